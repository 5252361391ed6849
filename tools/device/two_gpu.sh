#!/bin/bash
# The two-GPU benchmarks of one session, in one call on an nvidia-h200-x2 / nvidia-h100-x2 machine:
#   OUT=/tmp/out bash tools/device/two_gpu.sh   (needs .carry/deps and .carry/xsuite)
# 1. DA study: CLIC 60 seeds x 100x100 x TWO_TURNS turns, whole command on one GPU and on two (da.npz compared);
# 2. bunch train: a train of TRAIN_BUNCHES bunches x TRAIN_PARTICLES macroparticles with a resonator and the resistive
#    wall (100 stored turns), one rank vs two (one GPU each), the hash of the final bunches compared;
# 3. the GPU tests named by TESTS (doctest filter), on GPU 0.
set -u
source tools/device/device_env.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
lscpu | grep -E "^(Model name|Socket|Core|Thread|NUMA node)" | tee -a "$OUT/device.txt"
t0=$(date +%s)
build_gpu fusetrack test_gpu builtin || exit 1
echo "== build ok ($(( $(date +%s) - t0 )) s)"
if [ -n "${TESTS:-}" ]; then
  (cd build-gpu && CUDA_VISIBLE_DEVICES=0 ./bin/test_gpu -tc="$TESTS" ${TEST_ARGS:-} 2>&1 | grep -E "MESSAGE|ERROR|FAILED|test cases|assertions") | tee "$OUT/test_gpu.log"
fi
train() {  # ranks, label, extra environment (NAME=VALUE ...)
  local np=$1 label=$2
  shift 2
  # BIND=threads (a setting): each rank on its own half of the hardware threads (OpenMP threads inside it),
  # one rank or two alike; otherwise the ranks are not bound.
  local bind="--bind-to none"
  for a in "$@"; do
    [ "$a" = BIND=threads ] && bind="--use-hwthread-cpus --map-by slot:PE=$(( $(nproc) / 2 )) --bind-to hwthread"
  done
  echo "== bunch train: $np rank(s) $label" | tee -a "$OUT/train.log"
  env "$@" FUSETRACK_TRAIN_BUNCHES=${TRAIN_BUNCHES:-100} FUSETRACK_TRAIN_PARTICLES=${TRAIN_PARTICLES:-1000000} \
    FUSETRACK_TRAIN_TURNS=${TRAIN_TURNS:-20} timeout ${TRAIN_TIMEOUT:-200} \
    mpirun -np $np $bind build-gpu/bin/test_gpu -tc="bunch train on the GPU: benchmark*" --no-skip 2>&1 \
    | grep -E "MESSAGE|bunches x|rank [0-9]:|ERROR|FAILED|test cases" | tee -a "$OUT/train.log"
}
if [ "${TRAIN:-1}" = 1 ]; then
  # TRAIN_REPEAT pairs of one and two ranks, alternating (the pairs' spread is the measurement's).
  # TRAIN_ENVS: extra settings, one pair (or TRAIN_REPEAT pairs) each, e.g. "X=0 OMP_WAIT_POLICY=active".
  for setting in ${TRAIN_ENVS:-X=0}; do
    for rep in $(seq 1 ${TRAIN_REPEAT:-1}); do
      for np in 1 2; do train $np "(pair $rep, ${setting//,/ })" ${setting//,/ }; done
    done
  done
  # SHARE_DIAG=1: each rank's bunches alone in one process on GPU 0 (FUSETRACK_TRAIN_SHARE=k/2), to see
  # whether the second half of the train costs more in the segment kernels whatever the GPU.
  if [ "${SHARE_DIAG:-0}" = 1 ]; then
    for k in 0 1; do train 1 "(share $k/2 alone, GPU 0)" FUSETRACK_TRAIN_SHARE=$k/2 CUDA_VISIBLE_DEVICES=0; done
  fi
fi
if [ "${DA:-1}" = 1 ]; then
  TWO_TURNS=${TWO_TURNS:-2000} OUT=$OUT bash tools/device/da_study.sh twogpu 2>&1 | grep -v "^== build ok"
fi
echo "== total $(( $(date +%s) - t0 )) s"
