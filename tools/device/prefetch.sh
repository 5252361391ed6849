#!/bin/bash
# One GPU, one call: how the collective segment kernels read the next particle (FUSETRACK_PREFETCH=auto|l1|registers|none,
# codegen.cpp segment_prefetch).
#   OUT=/tmp/out bash tools/device/prefetch.sh     (needs .carry/deps)
# 1. GPU tests of the collective kernels (bitwise against the CPU) with the prefetch modes of TEST_MODES (auto, the default);
# 2. every mode on 10^7 particles (track, 300 turns; kernel time per turn, solves included): the longitudinal-only
#    ring and its 6D twin with the issue's FFT size, the PS example, fma off and on;
# 3. the collective bench at 10^8 (longitudinal-only ring, the issue's FFT size; BENCH_RUNS, BENCH_ENVS), in the time left.
set -u
source tools/device/device_env.sh
t0=$SECONDS
device_start || exit 1
if [ "${TESTS:-1}" = 1 ]; then
  # TEST_MODES: the prefetch modes the collective GPU tests run with (each bitwise against the CPU);
  # TEST_FILTER: the test cases (doctest -tc).
  TEST_FILTER=${TEST_FILTER:-"bunch train on the GPU: 4*,bunch train on the GPU: a slice*,collective fma=off: CPU*,collective fma=off: a longitudinal*,transverse wake and damper on the GPU: fma off*,space charge PIC on the GPU: fma off*,frozen space charge with sizes*,matched bunch made on the device and tracked*"}
  for mode in ${TEST_MODES:-auto}; do
    echo "== GPU tests, FUSETRACK_PREFETCH=$mode" | tee -a "$OUT/tests.log"
    FUSETRACK_PREFETCH=$mode timeout ${TEST_TIMEOUT:-150} build-gpu/bin/test_gpu -tc="$TEST_FILTER" 2>&1 \
      | grep -E "MESSAGE|test cases|assertions|ERROR|FAILED" | tee -a "$OUT/tests.log" | tail -12
  done
fi
python3 - <<'PY'
import json, numpy as np
for name in ("longitudinal_only_bench_ring", "longitudinal_bench_ring"):
    d = json.load(open(f"lattices/{name}.json"))
    d["elements"]["impedance"]["frequency_resolution"] = 5.6e6
    json.dump(d, open(f"build-gpu/{name}_fft.json", "w"))
n, r = 10**7, np.random.default_rng(1)
z = np.zeros(n)
np.savez("build-gpu/lon_bunch.npz", x=z, px=z, y=z, py=z, zeta=r.normal(0, 2, n), delta=r.normal(0, 5e-4, n))
np.savez("build-gpu/bunch6d.npz", x=r.normal(0, 1e-3, n), px=r.normal(0, 1e-4, n), y=r.normal(0, 1e-3, n),
         py=r.normal(0, 1e-4, n), zeta=r.normal(0, 2, n), delta=r.normal(0, 5e-4, n))
PY
if [ "${MODES:-1}" = 1 ]; then
  for lat in longitudinal_only_bench_ring_fft:lon_bunch longitudinal_bench_ring_fft:bunch6d; do
    L=build-gpu/${lat%%:*}.json; B=build-gpu/${lat##*:}.npz
    for fma in off on; do
      $BIN track $L --particles $B -n 2 --device gpu --fma $fma >/dev/null 2>&1  # compile
      for mode in auto l1 registers none auto; do
        FUSETRACK_PREFETCH=$mode $BIN track $L --particles $B -n 2 --device gpu --fma $fma >/dev/null 2>&1  # compile
        line=$(FUSETRACK_PREFETCH=$mode $BIN track $L --particles $B -n 300 --device gpu --fma $fma 2>&1 | grep "^breakdown")
        echo "${lat%%:*} fma $fma prefetch $mode: $(echo "$line" | grep -oE 'kernels [0-9.]+ s')" | tee -a "$OUT/modes.log"
      done
    done
  done
fi
if [ "${BENCH:-1}" = 1 ]; then
  # BENCH_RUNS: lattice:particles pairs, the issue's FFT size for the bench rings (the PS example keeps its own).
  # BENCH_ENVS: settings (VAR=value, several joined by ',') each bench runs with, in turn; "default": none.
  for run in ${BENCH_RUNS:-longitudinal_only_bench_ring:1e8}; do
    lat=${run%%:*}; np=${run##*:}
    fft=(); [ "$lat" != ps_injection_longitudinal ] && fft=(--set impedance.frequency_resolution=5.6e6)
    for setting in ${BENCH_ENVS:-default}; do
      envs=(); [ "$setting" != default ] && IFS=, read -r -a envs <<<"$setting"
      echo "== $lat, $np, $setting" | tee -a "$OUT/bench.log"
      timeout $((580 - SECONDS)) env "${envs[@]}" stdbuf -oL $BIN bench lattices/$lat.json --slices 1000 --gpu-turns 40 \
        -N 20000 -n 5 "${fft[@]}" --collective-particles $np 2>&1 | grep -v "^LongitudinalImpedance" | tee -a "$OUT/bench.log"
    done
  done
fi
echo "== total $((SECONDS - t0)) s"
