#!/bin/bash
# Light-source studies on one GPU, on the bundled MBA ring (lattices/mba_light_source.json):
#  - the local momentum acceptance at every element (1000 turns, precision 1e-4, |zeta| limited at half the
#    500 MHz RF wavelength) on the GPU, and at a tenth of the positions on the GPU and on every CPU core,
#    the two tables compared;
#  - where the commands exist in this tree: the frequency map of 10^4 particles over 2 x 1024 turns, and the
#    tracking with quantum radiation against the same tracking without it.
#   OUT=/tmp/out bash bench/light_sources/run.sh        (TESTS=1: the GPU test group da first)
# Appends one line to bench/light_sources/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=light_sources
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin $([ "${TESTS:-0}" = 1 ] && echo test_gpu) || exit 1
gpu_tests da
RING=lattices/mba_light_source.json
MA=(momentum-acceptance "$RING" --turns 1000 --precision 1e-4 --limit 0 0 0 0 0.2998 0 --no-plots)
# The tables go to the output directories; the record keeps each run's summary lines.
summary() { "$@" | grep -E "momentum acceptance of|rounds|results"; }
step lines ma_all_gpu summary "$BIN" "${MA[@]}" --device gpu -o build-gpu/ma_all_gpu
step lines ma_sample_gpu summary "$BIN" "${MA[@]}" --at "qf" --device gpu -o build-gpu/ma_sample_gpu
step lines ma_sample_cpu summary "$BIN" "${MA[@]}" --at "qf" --device cpu -o build-gpu/ma_sample_cpu
cmp -s build-gpu/ma_sample_gpu/momentum_acceptance.csv build-gpu/ma_sample_cpu/momentum_acceptance.csv \
  && VALUES+=(--value ma_gpu_equals_cpu=1) || VALUES+=(--value ma_gpu_equals_cpu=0)
VALUES+=(--value "ma_positions=$(($(wc -l <build-gpu/ma_all_gpu/momentum_acceptance.csv) - 1))")
if "$BIN" fma --help 2>/dev/null | grep -q turns-per-window; then
  step lines fma_gpu "$BIN" fma "$RING" --turns-per-window 1024 --amplitudes 100 --angles 100 --device gpu \
    -o build-gpu/fma_gpu --no-plots
fi
record --note "momentum acceptance without radiation: limited in zeta at half the RF wavelength"
