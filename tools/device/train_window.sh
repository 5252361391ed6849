#!/bin/bash
# One GPU, one call: the windowed slice-moment deposit of bunch trains and the exact product of the
# portable math by fma (issues 24 and 25).
#   OUT=/tmp/out bash tools/device/train_window.sh     (needs .carry/deps)
# 1. GPU tests: the windowed deposit and the trains bitwise against the CPU, the collective tests, every
#    element type and the bundled rings (the portable sine's exact product);
# 2. the train benchmark (100 bunches x 10^6, FFT convolution, 120 turns) on one GPU with the window and
#    without it (FUSETRACK_MOMENT_WINDOW=0: every contribution to global memory), same call;
# 3. NCU=1: Nsight Compute on the longitudinal-only ring's wrap kernel (fma off and on, 10^7);
# 4. the collective bench (with the call's time left) on the longitudinal-only ring (10^8, 1000 slices, the issue's FFT size), fma off and on;
set -u
source tools/device/device_env.sh
t0=$SECONDS
device_start || exit 1
if [ "${TESTS:-1}" = 1 ]; then
  timeout ${TEST_TIMEOUT:-200} build-gpu/bin/test_gpu -tc="bunch train on the GPU: 4*,bunch train on the GPU: a slice*,collective fma=off: CPU*,transverse wake and damper on the GPU: fma off*,fma=off: every element*,fma=off: bundled*,fma=off: Bend*,collective fma=off: a longitudinal*" 2>&1 \
    | grep -E "MESSAGE|bitwise|test cases|assertions|ERROR|FAILED|skipped" | grep -v "^\s*$" | tee "$OUT/tests.log" | tail -30
fi
if [ "${TRAIN:-1}" = 1 ]; then
  for window in 1 0 1; do
    echo "== train, 1 GPU, FUSETRACK_MOMENT_WINDOW=$window" | tee -a "$OUT/train.log"
    FUSETRACK_MOMENT_WINDOW=$window FUSETRACK_WAKE_CONVOLUTION=fft FUSETRACK_TRAIN_TURNS=${TRAIN_TURNS:-120} \
      timeout 150 build-gpu/bin/test_gpu -tc="bunch train on the GPU: benchmark*" --no-skip 2>&1 \
      | grep -E "bunches x|ERROR|FAILED" | tee -a "$OUT/train.log"
  done
fi
if [ "${NCU:-1}" = 1 ]; then
  NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  # The ring with the issue's FFT size, and 10^7 particles of a longitudinal bunch (no transverse optics to match).
  python3 - <<'PY'
import json, numpy as np
d = json.load(open("lattices/longitudinal_only_bench_ring.json"))
d["elements"]["impedance"]["frequency_resolution"] = 5.6e6
json.dump(d, open("build-gpu/lon.json", "w"))
n, r = 10**7, np.random.default_rng(1)
z = np.zeros(n)
np.savez("build-gpu/lon_bunch.npz", x=z, px=z, y=z, py=z, zeta=r.normal(0, 2, n), delta=r.normal(0, 5e-4, n))
PY
  for fma in off on; do
    ARGS="build-gpu/lon.json --particles build-gpu/lon_bunch.npz -n 3 --device gpu --fma $fma"
    $BIN track $ARGS >/dev/null 2>&1  # compile
    timeout 200 $NCU_BIN --clock-control none -k regex:fusetrack_segment_wrap -c 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
      --section InstructionStats --section MemoryWorkloadAnalysis \
      $BIN track $ARGS > "$OUT/ncu_wrap_fma_$fma.txt" 2>&1
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots|Executed Ipc|Warp Cycles Per Issued|No Eligible|Stall|pipe|FP64" \
      "$OUT/ncu_wrap_fma_$fma.txt" | head -30
  done
fi
if [ "${BENCH:-1}" = 1 ]; then
  echo "== longitudinal-only ring, 10^8" | tee -a "$OUT/bench.log"
  timeout $((570 - SECONDS)) stdbuf -oL $BIN bench lattices/longitudinal_only_bench_ring.json --slices 1000 --gpu-turns 40 \
    -N 20000 -n 5 --set impedance.frequency_resolution=5.6e6 --collective-particles 1e8 2>&1 \
    | grep -v "^LongitudinalImpedance" | tee -a "$OUT/bench.log"
fi
echo "== total $((SECONDS - t0)) s"
