#!/bin/bash
# GPU checks of the space-charge GPU solve and the transverse wakes: build, the
# bitwise tests (PIC with the Poisson solve on the GPU, wakes and damper), then the PIC benchmark with
# the GPU solve and with the host solve (FUSETRACK_HOST_POISSON=1, the previous path), and the wake
# benchmark. Usage (device): OUT=... bash bench/space_charge/gpu_vs_host_poisson_solve.sh [build] [tests] [bench]
set -u
OUT=${OUT:-/tmp/fusetrack-out}
mkdir -p "$OUT"
stages="$*"
has() { [[ " $stages " == *" $1 "* ]]; }
if has build; then bash bench/common/gpu_suite.sh build || exit 1; fi
export FUSETRACK_KERNEL_CACHE=$(pwd)/build-gpu/kernel-cache
T=build-gpu/bin/test_gpu
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
pick() { grep -E "MESSAGE|TEST CASE|test cases|ERROR|values|outside"; }
if has tests; then
  timeout 240 $T -tc="space charge PIC on the GPU: fma*,transverse wake and damper on the GPU*" -s 2>&1 | pick \
    | tee "$OUT/tests.log" | tail -40
fi
if has bench; then
  export OMP_NUM_THREADS=$(nproc)
  echo "== PIC benchmark, Poisson solve on the GPU" | tee "$OUT/bench.log"
  timeout 150 $T -tc="space charge PIC on the GPU: benchmark*" --no-skip 2>&1 | pick | tee -a "$OUT/bench.log"
  echo "== PIC benchmark, Poisson solve on the host (FUSETRACK_HOST_POISSON=1)" | tee -a "$OUT/bench.log"
  FUSETRACK_HOST_POISSON=1 timeout 150 $T -tc="space charge PIC on the GPU: benchmark*" --no-skip 2>&1 | pick | tee -a "$OUT/bench.log"
  echo "== wake benchmark" | tee -a "$OUT/bench.log"
  timeout 200 $T -tc="transverse wake on the GPU: benchmark*" --no-skip 2>&1 | pick | tee -a "$OUT/bench.log"
fi
