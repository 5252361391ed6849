#!/bin/bash
# On the GPU machine: the particle-in-cell element's GPU path of this tree against an older tree in one
# call. The older tree is the carried .carry/base (`git archive` of its commit); BASE=0 skips it.
#   OUT=/tmp/out bash tools/device/pic_ab.sh    (needs .carry/deps; .carry/base unless BASE=0)
# 1. this tree: the GPU Poisson tests and the GPU space-charge tests (TEST_FILTER replaces their doctest filter) (CPU == GPU bitwise with fma off: the GPU
#    solver against the CPU's, and tracking with the solve on the GPU and on the host);
# 2. each tree: the GPU Poisson solve times (2.5D 256x256x64, 3D 128x128x64; cuFFT and reproducible) and the PIC
#    benchmark (2.5D, 10^7 macroparticles, 256 x 256 x 64, one element per turn; random order and by tile, fma
#    off and on). BENCH_FILTER replaces the benchmarks' doctest filter.
set -u
source tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/device.txt"
t0=$SECONDS
build_gpu test_gpu builtin || exit 1
TREES="this"
if [ "${BASE:-1}" = 1 ]; then
  (cd .carry/base && mkdir -p .carry && ln -sfn "$ROOT/.carry/deps" .carry/deps && BASE_OUT=$OUT/base && mkdir -p "$BASE_OUT" \
    && OUT=$BASE_OUT && source tools/device/device_env.sh && build_gpu test_gpu builtin) || exit 1
  TREES="base this"
fi
echo "== builds $((SECONDS - t0)) s" | tee "$OUT/pic_ab.log"
(cd build-gpu && ./bin/test_gpu -tc="${TEST_FILTER:-GPU Poisson solver*,space charge PIC on the GPU: fma*}" 2>&1 \
  | grep -E "MESSAGE|ERROR|FAILED|CRASHED|values|test cases|assertions|Status" -A1) | tee -a "$OUT/pic_ab.log"
# BENCH_ENVS: ';'-separated environment settings, the benchmarks run once with each (e.g. "FUSETRACK_L2_PERSIST=0;").
# BASE_ENVS: the same for the older tree (BENCH_ENVS when unset; BASE_ENVS="" runs it once without settings).
for tree in $TREES; do
  D=$ROOT/build-gpu
  IFS=';' read -ra ENVS <<< "${BENCH_ENVS:-}"
  [ "$tree" = base ] && D=$ROOT/.carry/base/build-gpu && IFS=';' read -ra ENVS <<< "${BASE_ENVS-${BENCH_ENVS:-}}"
  [ ${#ENVS[@]} -eq 0 ] && ENVS=("")
  for setting in "${ENVS[@]}"; do
    echo "== $tree: benchmarks ${setting}" | tee -a "$OUT/pic_ab.log"
    (cd "$D" && env $setting OMP_NUM_THREADS=$(nproc) ./bin/test_gpu \
      -tc="${BENCH_FILTER:-GPU Poisson solve time*,space charge PIC on the GPU: benchmark*}" --no-skip 2>&1 \
      | grep -E "GPU solve|particles in random|ordered by grid|fma o(n|ff):|outside|ERROR|test cases") | tee -a "$OUT/pic_ab.log"
  done
done
echo "== total $((SECONDS - t0)) s" | tee -a "$OUT/pic_ab.log"
