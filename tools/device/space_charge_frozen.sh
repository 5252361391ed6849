#!/bin/bash
# On the GPU machine: frozen space charge and the Poisson solver.
#   OUT=/tmp/out bash tools/device/space_charge_frozen.sh   (needs .carry/deps and .carry/xsuite)
# GPU tests of SpaceChargeBiGaussian (CPU == GPU bitwise, fma off) and of the GPU Poisson solver
# (bitwise the CPU's reproducible solve, cuFFT against FFTW, solve times); then `fusetrack bench` of
# rings with frozen space-charge elements: the bundled 160 MeV ring with 160 and 480 elements and the
# PS Booster (Xsuite line) with 160, 10^6 particles on the GPU (fma off and on) against 16 CPU threads.
set -u
source tools/device/device_env.sh
build_gpu fusetrack test_gpu builtin || exit 1
BIN=$ROOT/build-gpu/bin/fusetrack
(cd build-gpu && timeout 120 ./bin/test_gpu -tc="*frozen space charge*,GPU Poisson solver*" 2>&1 \
  | grep -E "MESSAGE|ERROR|values|test cases|assertions|SKIPPED" -A1
  timeout 60 ./bin/test_gpu -tc="GPU Poisson solve time*" --no-skip 2>&1 | grep -E "MESSAGE|ERROR" -A1) \
  | tee "$OUT/test_gpu_frozen_poisson.log"
W=build-gpu/sc_frozen
mkdir -p $W
$BIN spacecharge install lattices/space_charge_ring.json --elements 160 --intensity 1.5e11 --emittances 2e-6 1.5e-6 \
  --sigma-zeta 8 --delta-rms 1e-3 -o $W/ring160.json >/dev/null
$BIN spacecharge install lattices/space_charge_ring.json --elements 480 --intensity 1.5e11 --emittances 2e-6 1.5e-6 \
  --sigma-zeta 8 --delta-rms 1e-3 -o $W/ring480.json >/dev/null
$BIN spacecharge install .carry/xsuite/psb_injection.json --elements 160 --intensity 4e11 --emittances 2e-6 1.5e-6 \
  --sigma-zeta 8 --delta-rms 1e-3 -o $W/psb160.json >/dev/null
for lat in ring160 ring480 psb160; do
  for fma in off on; do
    echo "== $lat, fma $fma" | tee -a "$OUT/bench_frozen.log"
    timeout 200 $BIN bench $W/$lat.json -N 32000 -n 2 --thread-counts 16 --gpu-particles 1e6 --gpu-turns 20 --no-per-element --fma $fma 2>&1 \
      | grep -vE "^\s*$" | tail -n 12 | tee -a "$OUT/bench_frozen.log"
    [ $fma = off ] || continue
  done
done
