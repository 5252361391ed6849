#!/bin/bash
# Whole-command time of large collective runs against their tracking (kernel)
# time, per rank count, on the GPU machine. Run from the repository root (carry .carry):
#   OUT=/tmp/out bash tools/device/bench_ranks.sh [PARTICLES] [TURNS]
# (defaults 1e8 and 200). Builds only the targets it needs into build-gpu/ (fusetrack, builtin,
# merge_particle_set; EXTRA_TARGETS=test_gpu for GPU_TEST=1) when absent. Writes the logs to $OUT
# and prints, per run, the breakdown line of `fusetrack track`: start-up, initial particles
# (matching, and generation on the device or host), setup/compile, upload, kernels (the tracking
# time, as `fusetrack bench` counts it), download, output (shards).
# Goal: the whole command ("breakdown ... s in all") within 1.5x of its kernel time at 10^8.
# Runs: 1 rank without and with -o; 2 ranks (mpirun -np 2; on one GPU when the machine has one)
# without and with -o; the merged shard set of 2 ranks against the 1-rank file byte for byte
# (GPU, 10^6); with CPU_CHECK=1 the same run on the CPU against the GPU byte for byte (fma off:
# the particles generated on the device equal the host sampler's); with BENCH=1 `bench` on the same
# lattice and size (kernel time only); with GPU_TEST=1 the GPU tests of particles made on the device
# (test_gpu -tc='matched bunch*'); TWO_RANKS=0 skips the 2-rank runs. The -o files go to $SCRATCH (default /tmp) and are removed.
set -u
OUT=${OUT:-/tmp/fusetrack-out}
SCRATCH=${SCRATCH:-/tmp}
mkdir -p "$OUT"
ROOT=$(pwd)
N=${1:-1e8}
TURNS=${2:-200}
export CMAKE_PREFIX_PATH=$ROOT/.carry/deps/usr
export LD_LIBRARY_PATH=$ROOT/.carry/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export FUSETRACK_KERNEL_CACHE=$ROOT/build-gpu/kernel-cache
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! bash tools/device/refresh_sources.sh || [ ! -x build-gpu/bin/fusetrack ]; then
  t0=$(date +%s)
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
  cmake --build build-gpu -j16 --target fusetrack builtin merge_particle_set ${EXTRA_TARGETS:-} >"$OUT/build.log" 2>&1 \
    || { grep -E -A5 "error" "$OUT/build.log" | head -60; exit 1; }
  echo "== build ok ($(( $(date +%s) - t0 )) s)"
fi
BIN=$ROOT/build-gpu/bin/fusetrack
MERGE=$ROOT/build-gpu/bin/merge_particle_set
RING=${RING:-lattices/longitudinal_bench_ring.json}
# The 10^4-slice variant of the ring (the 6.2e9 vs 1.55e10 particle-turns/s comparison).
RING10K=build-gpu/ring_10k_slices.json
sed 's/"n_slices": *[0-9]*/"n_slices": 10000/' "$RING" > "$RING10K"
OPTS="--matched $N --sigma-zeta 2 --device gpu"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpus.txt"
echo "cpus $(nproc), $(free -g | awk '/Mem:/ {print $2}') GB host memory; mpirun: $(command -v mpirun || echo none)"
GPUS=$(nvidia-smi -L | wc -l)
show() { grep -E "^(time|tracking|breakdown|particles|output|matched)" "$1"; }
timed() {  # name, command...: runs it, prints the breakdown and the wall time
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" >"$OUT/$name.log" 2>&1 || { echo "FAILED: $*"; tail -5 "$OUT/$name.log"; }
  local t1=$(date +%s%N)
  show "$OUT/$name.log"
  echo "wall $(( (t1 - t0) / 1000000 )) ms ($name)"
}

if [ "${GPU_TEST:-0}" = 1 ]; then
  echo "== GPU tests: matched bunches made on the device"
  (cd build-gpu && ./bin/test_gpu -tc='matched bunch*' -s 2>&1 | grep -E "MESSAGE|TEST CASE|ERROR|FAILED|passed|failed|bitwise" | head -40)
fi
echo "== warm-up (kernel cache, NVRTC)"
$BIN track "$RING10K" -n 2 --matched 1e6 --sigma-zeta 2 --device gpu >/dev/null 2>&1
for out in "" "-o $SCRATCH/np1.npz"; do
  echo "== 1 rank: fusetrack track RING10K -n $TURNS $OPTS $out"
  timed track_np1${out:+_o} $BIN track "$RING10K" -n "$TURNS" $OPTS $out
  rm -rf "$SCRATCH/np1.npz" "$SCRATCH/np1.npz.d"
done
if [ "${BENCH:-0}" = 1 ]; then
  echo "== 1 GPU: bench on the same lattice and size (kernel time only)"
  $BIN bench "$RING10K" --collective-particles "$N" --gpu-turns 20 2>&1 | tee "$OUT/bench_1gpu.log" | tail -6
fi
if [ "${TWO_RANKS:-1}" = 0 ]; then
  echo "== 2-rank runs skipped (TWO_RANKS=0)"
elif command -v mpirun >/dev/null; then
  [ "$GPUS" -lt 2 ] && echo "(one GPU: the 2 ranks share it)"
  for out in "" "-o $SCRATCH/np2.npz"; do
    echo "== 2 ranks: mpirun -np 2 fusetrack track RING10K -n $TURNS $OPTS $out"
    timed track_np2${out:+_o} mpirun -np 2 --bind-to none $BIN track "$RING10K" -n "$TURNS" $OPTS $out
    rm -rf "$SCRATCH/np2.npz" "$SCRATCH/np2.npz.d"
  done
  echo "== merged shard set of 2 ranks against 1 rank, byte for byte (GPU, 10^6 particles, 50 turns)"
  $BIN track "$RING10K" -n 50 --matched 1e6 --sigma-zeta 2 --device gpu -o "$SCRATCH/one.npz" >/dev/null
  mpirun -np 2 --bind-to none $BIN track "$RING10K" -n 50 --matched 1e6 --sigma-zeta 2 --device gpu -o "$SCRATCH/two.npz" >/dev/null
  "$MERGE" "$SCRATCH/two.npz" "$SCRATCH/two_merged.npz"
  cmp "$SCRATCH/one.npz" "$SCRATCH/two_merged.npz" && echo "identical: 1 rank and the merged 2-rank set" || echo "DIFFERENT"
else
  echo "== 2-rank runs skipped: no mpirun"
fi
if [ "${CPU_CHECK:-0}" = 1 ]; then
  echo "== CPU against GPU, byte for byte (10^6 particles, 2 turns, fma off)"
  $BIN track "$RING10K" -n 2 --matched 1e6 --sigma-zeta 2 --device gpu -o "$SCRATCH/gpu.npz" >/dev/null 2>&1
  $BIN track "$RING10K" -n 2 --matched 1e6 --sigma-zeta 2 --device cpu -o "$SCRATCH/cpu.npz" >/dev/null 2>&1
  cmp "$SCRATCH/gpu.npz" "$SCRATCH/cpu.npz" && echo "identical: CPU and GPU" || echo "DIFFERENT: CPU and GPU"
fi
rm -rf "$SCRATCH"/one.npz "$SCRATCH"/two.npz "$SCRATCH"/two.npz.d "$SCRATCH"/two_merged.npz "$SCRATCH"/gpu.npz "$SCRATCH"/cpu.npz
