#!/bin/bash
# Wakes driver: the transverse wake and damper on one bunch (10^6 macroparticles, 500 slices, a resonator and the
# resistive wall with 100 turns of memory; GPU turns/s against all CPU cores, fma off and on, the direct and the
# FFT convolution) and a train of bunches (TRAIN_BUNCHES x TRAIN_PARTICLES, default 100 x 10^6 as in the test's
# benchmark; FFT convolution, TRAIN_TURNS turns, default 120) on one GPU.
#   OUT=/tmp/out bash bench/wakes/run.sh      (TESTS=1: the GPU test group wakes first)
# Appends one line to bench/wakes/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=wakes
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin test_gpu || exit 1
gpu_tests wakes
export OMP_NUM_THREADS=$(nproc)
step messages one_bunch_direct build-gpu/bin/test_gpu -tc="transverse wake on the GPU: benchmark*" --no-skip
FUSETRACK_WAKE_CONVOLUTION=fft step messages one_bunch_fft build-gpu/bin/test_gpu -tc="transverse wake on the GPU: benchmark*" --no-skip
export FUSETRACK_WAKE_CONVOLUTION=fft FUSETRACK_TRAIN_TURNS=${TRAIN_TURNS:-120}
[ -n "${TRAIN_BUNCHES:-}" ] && export FUSETRACK_TRAIN_BUNCHES=$TRAIN_BUNCHES
[ -n "${TRAIN_PARTICLES:-}" ] && export FUSETRACK_TRAIN_PARTICLES=$TRAIN_PARTICLES
step messages train build-gpu/bin/test_gpu -tc="bunch train on the GPU: benchmark*" --no-skip
record --note "train: FFT convolution, ${FUSETRACK_TRAIN_TURNS} turns"
