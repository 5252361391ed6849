#!/bin/bash
# Dispatch driver: the fused single-particle kernel in each form (auto, switch, staged, baked; fma off and on)
# against the CPU and against per-element launches, in the throughput regime (10^4..10^7 particles on two short
# rings) and the latency regime (800 particles on the 12k-element collider line). One GPU.
#   OUT=/tmp/out bash bench/dispatch/run.sh        (TESTS=1: the GPU test groups rings and da first)
# Appends one line to bench/dispatch/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=dispatch
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin $([ "${TESTS:-0}" = 1 ] && echo test_gpu) || exit 1
gpu_tests rings da
step bench throughput "$BIN" bench lattices/reference_sequence.json lattices/sextupole_rf_ring.json -N 65536 -n 10 \
  --gpu-particles 1e4 1e5 1e6 1e7 --gpu-turns 20
step bench latency "$BIN" bench lattices/thin_collider_12k.json -N 4096 -n 1 --gpu-particles 800 1e6 --gpu-turns 4 \
  --no-per-element
record
