#!/bin/bash
# Space-charge driver: the particle-in-cell element on the GPU (2.5D, 10^7 macroparticles, 256 x 256 x 64, one
# element per turn: time per element split into segment kernel, deposit and solve, ns per particle per step,
# bytes against the copy bandwidth), the GPU Poisson solve alone (2.5D 256x256x64 and 3D 128x128x64, cuFFT and
# reproducible), and the frozen-space-charge ring of examples/space_charge with 160 elements at 10^6 particles
# against all CPU cores. One GPU.
#   OUT=/tmp/out bash bench/space_charge/run.sh      (TESTS=1: the GPU test group space-charge first)
# Appends one line to bench/space_charge/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=space_charge
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin test_gpu || exit 1
gpu_tests space-charge
export OMP_NUM_THREADS=$(nproc)
step messages pic_element build-gpu/bin/test_gpu -tc="space charge PIC on the GPU: benchmark*" --no-skip
step messages poisson_solve build-gpu/bin/test_gpu -tc="GPU Poisson solve time*" --no-skip
mkdir -p build-gpu/sc_frozen
"$BIN" spacecharge install lattices/space_charge_ring.json --elements 160 --intensity 1.5e11 --emittances 2e-6 1.5e-6 \
  --sigma-zeta 8 --delta-rms 1e-3 -o build-gpu/sc_frozen/ring160.json >/dev/null
step bench frozen_ring160 "$BIN" bench build-gpu/sc_frozen/ring160.json -N 100000 -n 2 --gpu-particles 1e6 --gpu-turns 20 \
  --no-per-element
record
