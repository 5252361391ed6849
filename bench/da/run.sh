#!/bin/bash
# DA driver: the light-source ring's dynamic-aperture scan (examples/da_light_source: 240 particles, 1000 turns)
# on the GPU (twice: the first run compiles the kernel, the second loads it from the cache) and on every CPU
# core; then the light-source study, 60 error seeds x 496 initial conditions x LS_TURNS turns (default 1000) on
# the GPU and LS_CPU_TURNS (default 100) on the CPU: the latency-bound regime of the switch kernel. One GPU.
#   OUT=/tmp/out bash bench/da/run.sh        (TESTS=1: the GPU test groups da and rings first)
# Appends one line to bench/da/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=da
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin $([ "${TESTS:-0}" = 1 ] && echo test_gpu) || exit 1
gpu_tests da rings
SCAN=(lattices/mba_light_source.json --turns 1000 --angles 10 --amplitudes 24 --amplitude-range 0.0002 0.007 --no-plots)
step da scan_gpu_compile "$BIN" da "${SCAN[@]}" --device gpu -o build-gpu/da_scan_gpu
step da scan_gpu "$BIN" da "${SCAN[@]}" --device gpu -o build-gpu/da_scan_gpu
step da scan_cpu "$BIN" da "${SCAN[@]}" --device cpu -o build-gpu/da_scan_cpu
cmp -s build-gpu/da_scan_gpu/da.npz build-gpu/da_scan_cpu/da.npz && VALUES+=(--value scan_gpu_equals_cpu=1) \
  || VALUES+=(--value scan_gpu_equals_cpu=0)
source bench/common/study_inputs.sh
mba_seeds
STUDY=(build-gpu/mba_split.json --variants build-gpu/mba_seeds.json --angles 16 --amplitudes 31
       --amplitude-range 0.0002 0.004 --no-plots)
step da study_gpu "$BIN" da "${STUDY[@]}" -n "${LS_TURNS:-1000}" --device gpu -o build-gpu/study_gpu
step da study_cpu "$BIN" da "${STUDY[@]}" -n "${LS_CPU_TURNS:-100}" --device cpu -o build-gpu/study_cpu
record --note "study: GPU ${LS_TURNS:-1000} turns, CPU ${LS_CPU_TURNS:-100} turns on all cores"
