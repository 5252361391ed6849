#!/bin/bash
# The two-GPU benchmarks of one session, in one call on an nvidia-h200-x2 / nvidia-h100-x2 machine:
#   OUT=/tmp/out bash tools/device/two_gpu.sh   (needs .carry/deps and .carry/xsuite)
# 1. issue 22: CLIC 60 seeds x 100x100 x TWO_TURNS turns, whole command on one GPU and on two (da.npz compared);
# 2. issue 24: a train of TRAIN_BUNCHES bunches x TRAIN_PARTICLES macroparticles with a resonator and the resistive
#    wall (100 stored turns), one rank vs two (one GPU each), the hash of the final bunches compared;
# 3. the GPU tests named by TESTS (doctest filter), on GPU 0.
set -u
source tools/device/device_env.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
t0=$(date +%s)
build_gpu fusetrack test_gpu builtin || exit 1
echo "== build ok ($(( $(date +%s) - t0 )) s)"
if [ -n "${TESTS:-}" ]; then
  (cd build-gpu && CUDA_VISIBLE_DEVICES=0 ./bin/test_gpu -tc="$TESTS" ${TEST_ARGS:-} 2>&1 | grep -E "MESSAGE|ERROR|FAILED|test cases|assertions") | tee "$OUT/test_gpu.log"
fi
if [ "${TRAIN:-1}" = 1 ]; then
  for np in 1 2; do
    echo "== bunch train: $np rank(s)" | tee -a "$OUT/train.log"
    FUSETRACK_TRAIN_BUNCHES=${TRAIN_BUNCHES:-100} FUSETRACK_TRAIN_PARTICLES=${TRAIN_PARTICLES:-1000000} \
    FUSETRACK_TRAIN_TURNS=${TRAIN_TURNS:-20} timeout ${TRAIN_TIMEOUT:-200} \
      mpirun -np $np --bind-to none build-gpu/bin/test_gpu -tc="bunch train on the GPU: benchmark*" --no-skip 2>&1 \
      | grep -E "MESSAGE|bunches x|ERROR|FAILED|test cases" | tee -a "$OUT/train.log"
  done
fi
if [ "${DA:-1}" = 1 ]; then
  TWO_TURNS=${TWO_TURNS:-2000} OUT=$OUT bash tools/device/da_study.sh twogpu 2>&1 | grep -v "^== build ok"
fi
echo "== total $(( $(date +%s) - t0 )) s"
