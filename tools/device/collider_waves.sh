#!/bin/bash
# The collider on one GPU machine: build; the GPU suite's collider tests (bunches generated on the device equal
# the host generator's, the first crossing's check on a sample, GPU == CPU records bit for bit); the benchmark
# set-up (bench/colliders/run.sh: 8 + 7 bunches of 4 x 10^6, 6 slices, 100 turns) on the ranks given (default 1;
# more need mpirun and as many GPUs).
#   OUT=/tmp/out bash tools/device/collider_waves.sh [RANKS...]      (carry .carry: FFTW and libzip)
set -u
source tools/device/device_env.sh
device_start || exit 1
(cd build-gpu && ./bin/test_gpu -tc="collider*" -s 2>&1 | grep -E "MESSAGE|ERROR|FAILED|test cases|assertions|SKIPPED") \
  | tee "$OUT/test_gpu_collider.log"
bash bench/colliders/run.sh "$BIN" "${@:-1}" | tee "$OUT/bench.log"
