#!/bin/bash
# On the GPU machine: where the seeded CLIC study's kernel spends its time.
#   OUT=/tmp/out bash tools/device/profile_study.sh   (needs .carry/deps and .carry/xsuite)
# Nsight Compute on the fused kernel of `fusetrack track` over 60 error seeds x 10^4 particles (the study's
# kernel), one seed x 600,000 and the bare ring x 600,000; then kernel rates with fma off and on.
set -u
source tools/device/device_env.sh
CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
if ! bash tools/device/refresh_sources.sh || [ ! -x build-gpu/bin/fusetrack ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  cmake --build build-gpu -j16 --target fusetrack builtin ${TESTS:+test_gpu} >"$OUT/build.log" 2>&1 || { grep -E -A5 "error" "$OUT/build.log" | head -40; exit 1; }
fi
BIN=$ROOT/build-gpu/bin/fusetrack
# TESTS: a doctest filter of GPU tests to run first (e.g. "*transform*,variants*")
[ -n "${TESTS:-}" ] && (cd build-gpu && ./bin/test_gpu -tc="$TESTS" 2>&1 | grep -E "MESSAGE|ERROR|FAILED|test cases|assertions|bitwise" | tee "$OUT/test_gpu.log")
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/device.txt"
source tools/device/study_inputs.sh
clic_seeds "$CLIC" 60
clic_seeds "$CLIC" 1
[ "${PROFILE:-1}" = 1 ] && NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1) || NCU=""
echo "ncu: ${NCU:-none}"
for run in ${RUNS:-clic_seeds60:10 clic_seed1:600 single:600}; do
  set -- ${run/:/ }
  V=""; [ $1 != single ] && V="--variants build-gpu/$1.json"
  ARGS="$CLIC --grid 1e-5 1e-4 $2 1e-5 1e-4 1000 --device gpu $V"
  $BIN track $ARGS -n 1 >/dev/null 2>&1  # kernel compile
  for fma in off on; do
    echo "== $1: $2 x 1000 particles per lattice, ${TURNS:-20} turns, fma $fma" | tee -a "$OUT/rates.log"
    $BIN track $ARGS -n ${TURNS:-20} --fma $fma 2>&1 | grep -E "^tracking|^time|^particles" | tee -a "$OUT/rates.log"
  done
  if [ -n "$NCU" ]; then
    timeout 240 $NCU --target-processes all -k regex:fusetrack -c 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
      $BIN track $ARGS -n 2 > "$OUT/ncu_$1.txt" 2>&1
    grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Block Limit" \
      "$OUT/ncu_$1.txt" | head -40
  fi
done
