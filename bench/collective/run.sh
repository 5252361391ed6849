#!/bin/bash
# Collective driver: the longitudinal impedance at 10^7 and 10^8 macroparticles, 1000 slices, fma off and on
# (`fusetrack bench --collective-particles`: seconds per turn, particle-turns/s, the segment and solve shares,
# bytes moved against the device's copy bandwidth, the full-load baseline), on the longitudinal-only
# benchmark ring and its 6D twin with a small impedance FFT (frequency_resolution 5.6 MHz: 2048 points, so that
# the particle passes set the pace), and the PS example (lattices/ps_injection_longitudinal.json) at 10^7.
# One GPU.
#   OUT=/tmp/out bash bench/collective/run.sh      (TESTS=1: the GPU test group collective first)
# Appends one line to bench/collective/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=collective
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin $([ "${TESTS:-0}" = 1 ] && echo test_gpu) || exit 1
gpu_tests collective
SMALL_FFT=(--set impedance.frequency_resolution=5.6e6 --slices 1000 --gpu-turns 40 -N 20000 -n 5)
step bench longitudinal_only "$BIN" bench lattices/longitudinal_only_bench_ring.json "${SMALL_FFT[@]}" \
  --collective-particles 1e7 1e8
step bench longitudinal_6d "$BIN" bench lattices/longitudinal_bench_ring.json "${SMALL_FFT[@]}" --collective-particles 1e7 1e8
step bench ps_example "$BIN" bench lattices/ps_injection_longitudinal.json --collective-particles 1e7 --gpu-turns 20 -N 20000 -n 5
record
