#!/bin/bash
# Two source trees on the GPU machine in one call: the carried .carry/base (e.g. `git archive` of an older
# commit) built into build-gpu-base, and this tree into build-gpu; the light-source study (60 seeds x 496 x
# LS_TURNS turns) on each, GPU twice (the first run compiles the kernel) and CPU (16 threads, LS_CPU_TURNS
# turns; 0: none); the da.npz of the two trees compared byte for byte; then TESTS (a doctest filter) of this
# tree's test_gpu, and LS_BENCH=1: the ring at 10^6 particles on each tree (throughput-bound).
#   OUT=/tmp/out bash bench/da/light_source_study_two_trees.sh   (needs .carry/deps, .carry/base)
set -u
source bench/common/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
t0=$SECONDS
build_gpu fusetrack test_gpu builtin || exit 1
(cd .carry/base && mkdir -p .carry && ln -sfn "$ROOT/.carry/deps" .carry/deps && BASE_OUT=$OUT/base && mkdir -p $BASE_OUT \
  && OUT=$BASE_OUT && source bench/common/device_env.sh && build_gpu fusetrack builtin) || exit 1
echo "== builds $((SECONDS - t0)) s"
source bench/common/study_inputs.sh
BIN=$ROOT/build-gpu/bin/fusetrack
mba_seeds
LGRID="--angles 16 --amplitudes 31 --amplitude-range 0.0002 0.004"
for tree in base this; do
  B=$BIN; [ $tree = base ] && B=$ROOT/.carry/base/build-gpu/bin/fusetrack
  for run in 1 2; do
    echo "== $tree: light-source ring, 60 seeds x 496 x ${LS_TURNS:-1000} turns, GPU run $run" | tee -a "$OUT/ab.log"
    $B da build-gpu/mba_split.json --variants build-gpu/mba_seeds.json $LGRID -n ${LS_TURNS:-1000} --device gpu --no-plots \
      -o build-gpu/ab_gpu_$tree 2>&1 | grep -E "^survivors|^tracking" | tee -a "$OUT/ab.log"
  done
  if [ "${LS_CPU_TURNS:-100}" != 0 ]; then
    echo "== $tree: the same, ${LS_CPU_TURNS:-100} turns, CPU 16 threads" | tee -a "$OUT/ab.log"
    $B da build-gpu/mba_split.json --variants build-gpu/mba_seeds.json $LGRID -n ${LS_CPU_TURNS:-100} --device cpu --threads 16 \
      --no-plots -o build-gpu/ab_cpu_$tree 2>&1 | grep -E "^survivors|^tracking" | tee -a "$OUT/ab.log"
  fi
  if [ "${LS_BENCH:-0}" = 1 ]; then
    echo "== $tree: light-source ring, 10^6 particles, 20 turns" | tee -a "$OUT/ab.log"
    $B bench lattices/mba_light_source.json -N 64 -n 1 --thread-counts 1 --gpu-particles 1e6 --gpu-turns 20 --no-per-element 2>&1 \
      | grep -E "fused switch fma=off|rror" | tee -a "$OUT/ab.log"
  fi
done
cmp build-gpu/ab_gpu_base/da.npz build-gpu/ab_gpu_this/da.npz && echo "GPU da.npz base == this, byte for byte" | tee -a "$OUT/ab.log"
[ "${LS_CPU_TURNS:-100}" != 0 ] && cmp build-gpu/ab_cpu_base/da.npz build-gpu/ab_cpu_this/da.npz \
  && echo "CPU da.npz base == this, byte for byte" | tee -a "$OUT/ab.log"
if [ -n "${TESTS:-}" ]; then
  (cd build-gpu && timeout ${TEST_LIMIT:-200} ./bin/test_gpu -tc="$TESTS" 2>&1 | grep -E "ERROR|FAILED|CRASHED|test cases|assertions|Status") \
    | tee -a "$OUT/ab.log"
fi
echo "== total $((SECONDS - t0)) s"
