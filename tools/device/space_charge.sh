#!/bin/bash
# On the GPU machine: particle-in-cell space charge (SpaceChargePIC).
#   OUT=/tmp/out bash tools/device/space_charge.sh [quick|bench]      (needs .carry/deps)
# quick: builds build-gpu and runs the GPU space-charge tests (CPU == GPU bitwise with fma off,
#        fma on close) and the CPU space-charge tests (the NVRTC compile check of the same kernels);
# bench: also the benchmark: 2.5D, 10^7 macroparticles, 256 x 256 nodes, 64 slices, one element per
#        turn: time per element split into segment kernel (kick + deposit), deposit alone, host
#        solve and grid transfers; ns per particle per step; bytes moved and the fraction of the
#        measured copy bandwidth (FUSETRACK_SC_PARTICLES overrides 10^7).
set -u
OUT=${OUT:-/tmp/fusetrack-out}
MODE=${1:-bench}
mkdir -p "$OUT"
ROOT=$(pwd)
export CMAKE_PREFIX_PATH=$ROOT/.carry/deps/usr
export LD_LIBRARY_PATH=$ROOT/.carry/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export FUSETRACK_KERNEL_CACHE=$ROOT/build-gpu/kernel-cache
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/device.txt"
t0=$(date +%s)
bash tools/device/refresh_sources.sh || true  # 1: sources changed, all touched
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build build-gpu -j16 --target test_gpu test_collective builtin >"$OUT/build.log" 2>&1 \
  || { grep -E -A5 "error" "$OUT/build.log" | head -40; exit 1; }
echo "== build ok ($(( $(date +%s) - t0 )) s)"
cd build-gpu
echo "== GPU space-charge tests" | tee "$OUT/test_gpu_space_charge.log"
./bin/test_gpu -tc="space charge PIC on the GPU: fma*" 2>&1 \
  | grep -E "MESSAGE|ERROR|CHECK|values|test cases|assertions|SKIPPED" -A1 | tee -a "$OUT/test_gpu_space_charge.log"
echo "== CPU space-charge tests (NVRTC compile check included)" | tee "$OUT/test_collective_space_charge.log"
./bin/test_collective -tc="space charge PIC*" 2>&1 | grep -E "MESSAGE|ERROR|values|test cases|assertions" -A1 \
  | tee -a "$OUT/test_collective_space_charge.log"
if [ "$MODE" = bench ]; then
  echo "== benchmark: 2.5D PIC, 256 x 256 x 64, one element per turn" | tee "$OUT/bench_space_charge.log"
  OMP_NUM_THREADS=$(nproc) ./bin/test_gpu -tc="space charge PIC on the GPU: benchmark*" --no-skip 2>&1 \
    | grep -E "MESSAGE|ERROR|values|test cases|fma|outside" | tee -a "$OUT/bench_space_charge.log"
  nvidia-smi --query-gpu=name,clocks.max.memory,memory.total --format=csv | tee -a "$OUT/bench_space_charge.log"
fi
echo "== done ($(( $(date +%s) - t0 )) s)"
