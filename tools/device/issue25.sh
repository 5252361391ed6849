#!/bin/bash
# On one GPU: build, the collective GPU tests (bitwise with the coordinate masks), then the
# collective bench with the bytes report and the same-run full-load baseline:
#   the longitudinal-only twin of the benchmark ring and the bundled (6D) benchmark ring at 10^7 and
#   10^8 macroparticles, 1000 slices; the PS example at 10^7.
# Usage (device): OUT=... bash tools/device/issue25.sh [build] [tests] [bench]
set -u
OUT=${OUT:-/tmp/fusetrack-out}
mkdir -p "$OUT"
stages="$*"
has() { [[ " $stages " == *" $1 "* ]]; }
if has build; then bash tools/device/gpu_suite.sh build || exit 1; fi
BIN=build-gpu/bin/fusetrack
export FUSETRACK_KERNEL_CACHE=$(pwd)/build-gpu/kernel-cache
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
if has tests; then
  timeout 300 build-gpu/bin/test_gpu -tc="collective*,space charge PIC on the GPU: fma off*,fma=off: frozen*" -s 2>&1 \
    | grep -E "MESSAGE|bitwise|TEST CASE|test cases|assertions|ERROR|FAILED" | tee "$OUT/tests.log" | tail -40
fi
if has bench; then
  for lat in lattices/longitudinal_only_bench_ring.json lattices/longitudinal_bench_ring.json; do
    timeout 240 $BIN bench $lat --slices 1000 --collective-particles 1e7 1e8 --gpu-turns 40 -N 100000 -n 20 2>&1 \
      | tee -a "$OUT/bench.log" | grep -v "^LongitudinalImpedance"
  done
  timeout 120 $BIN bench lattices/ps_injection_longitudinal.json --collective-particles 1e7 --gpu-turns 20 -N 100000 -n 5 2>&1 \
    | tee -a "$OUT/bench.log" | grep -v "^LongitudinalImpedance"
fi
