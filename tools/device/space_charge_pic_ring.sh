#!/bin/bash
# On the GPU machine: a ring with particle-in-cell space-charge elements around it (`fusetrack
# spacecharge install --model pic`), 10^6 macroparticles: turns per second on one GPU (fma off and on, and fma
# off with the particles ordered by tile every turn) against the CPU backend on all host cores.
#   OUT=/tmp/out bash tools/device/space_charge_pic_ring.sh    (needs .carry/deps and .carry/xsuite)
# PIC_LATTICE (default the PS Booster line of .carry/xsuite), PIC_ELEMENTS (default 160), PIC_NODES (default
# "64 64 32"), GPU_TURNS (20), CPU_TURNS (2); SUITE=1 first runs the GPU test suite (test_gpu without the
# bundled rings and the at-scale cases).
set -u
source tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/device.txt"
t0=$SECONDS
if [ "${SUITE:-0}" = 1 ]; then
  build_gpu fusetrack test_gpu builtin || exit 1
  echo "== build $((SECONDS - t0)) s" | tee "$OUT/suite.log"
  (cd build-gpu && timeout ${SUITE_LIMIT:-300} ./bin/test_gpu -tce="*bundled rings*,*at scale*" 2>&1 \
    | grep -E "ERROR|FAILED|CRASHED|test cases|assertions|Status") | tee -a "$OUT/suite.log"
else
  build_gpu fusetrack builtin || exit 1
fi
BIN=$ROOT/build-gpu/bin/fusetrack
W=build-gpu/sc_pic
mkdir -p $W
LAT=${PIC_LATTICE:-.carry/xsuite/psb_injection.json}
NODES=${PIC_NODES:-64 64 32}
N=${PIC_ELEMENTS:-160}
$BIN spacecharge install "$LAT" --elements "$N" --intensity 4e11 --emittances 2e-6 1.5e-6 --sigma-zeta 8 --delta-rms 1e-3 \
  --model pic --nodes $NODES --fixed-grid-sigmas 6 -o $W/ring.json | grep -E "^installed|^laslett" | tee "$OUT/pic_ring.log"
BUNCH="--gaussian 1000000 --emittance-nx 2e-6 --emittance-ny 1.5e-6 --sigma-zeta 8 --sigma-delta 1e-3"
run() {  # label, then the arguments of fusetrack track
  local label=$1
  shift
  echo "== $label" | tee -a "$OUT/pic_ring.log"
  "$BIN" track $W/ring.json $BUNCH "$@" 2>$W/stderr.log | grep -E "^backend|^particles|^time|^breakdown" | tee -a "$OUT/pic_ring.log"
  grep -m1 "outside the grid" $W/stderr.log | cut -c1-240 | tee -a "$OUT/pic_ring.log"
}
# FUSETRACK_TILE_SORT_EVERY=0: no tile sort (with 32 or more PIC elements the default sorts every turn).
for fma in off on; do
  "$BIN" track $W/ring.json $BUNCH -n 1 --device gpu --fma $fma >/dev/null 2>&1  # compile into the cache
  FUSETRACK_TILE_SORT_EVERY=0 run "GPU, fma $fma, ${GPU_TURNS:-20} turns, no tile sort" -n "${GPU_TURNS:-20}" --device gpu --fma $fma
done
run "GPU, fma off, ${GPU_TURNS:-20} turns, the default (tile sort every turn from 32 PIC elements)" \
  -n "${GPU_TURNS:-20}" --device gpu --fma off
run "CPU, $(nproc) threads, ${CPU_TURNS:-2} turns" -n "${CPU_TURNS:-2}" --device cpu --threads "$(nproc)"
echo "== total $((SECONDS - t0)) s" | tee -a "$OUT/pic_ring.log"
