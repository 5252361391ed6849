#!/bin/bash
# On one GPU: the collective bench of the longitudinal-only and 6D benchmark rings
# at 10^8 with the impedance's FFT as small as the baseline had it (frequency_resolution
# 5.6 MHz: 2048 points for 1000 slices; the default now resolves the Q = 500 resonator with 4M points),
# so that the particle passes, not the reproducible FFT, set the pace; then the transverse-wake GPU
# benchmark again (its host solve was made faster after the first measurement).
# Usage (device): OUT=... bash tools/device/issue25_small_fft.sh
set -u
source tools/device/device_env.sh
build_gpu fusetrack test_gpu builtin || exit 1
BIN=build-gpu/bin/fusetrack
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
for lat in lattices/longitudinal_only_bench_ring.json lattices/longitudinal_bench_ring.json; do
  timeout 200 $BIN bench $lat --set impedance.frequency_resolution=5.6e6 --slices 1000 --collective-particles 1e8 \
    --gpu-turns 40 -N 20000 -n 5 2>&1 | grep -v "^LongitudinalImpedance" | tee -a "$OUT/bench_small_fft.log"
done
export OMP_NUM_THREADS=$(nproc)
timeout 200 build-gpu/bin/test_gpu -tc="transverse wake on the GPU: benchmark*" --no-skip 2>&1 | grep -E "MESSAGE|test cases" \
  | tee "$OUT/bench_wake.log"
