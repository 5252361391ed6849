#!/bin/bash
# The space-charge worked example (examples/space_charge/README.md): the bundled low-energy proton ring
# (lattices/space_charge_ring.json, written by tools/lattices/make_space_charge_ring.py) with 160 frozen
# space-charge elements, its tune footprint and a tracked Gaussian bunch with the emittances per turn.
#   bash examples/space_charge/space_charge.sh [OUT_DIR] [TURNS] [PARTICLES]   (defaults sc_example 500 5000)
# FUSETRACK: the fusetrack binary (default build/bin/fusetrack); DEVICE: auto, cpu or gpu (default auto);
# THREADS: CPU threads (default 0: all); FOOTPRINT_ANGLES: rays of the footprint (default 7);
# PLOTS=0: no plots (footprint.csv and monitor.npz only).
set -eu
OUT=${1:-sc_example}
TURNS=${2:-500}
N=${3:-5000}
FT=${FUSETRACK:-build/bin/fusetrack}
DEVICE=${DEVICE:-auto}
THREADS=${THREADS:-0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
plots=(--plots "$OUT/plots")
footprint_plot=()
if [ "${PLOTS:-1}" = 0 ]; then
  plots=()
  footprint_plot=(--no-plot)
fi
# Bunch: 1.5e11 protons, normalized rms emittances 2 / 1.5 um, rms length 8 m, rms delta 1e-3.
$FT spacecharge install "$ROOT/lattices/space_charge_ring.json" --elements 160 --intensity 1.5e11 \
  --emittances 2e-6 1.5e-6 --sigma-zeta 8 --delta-rms 1e-3 -o "$OUT/ring_sc.json" --threads "$THREADS" | tee "$OUT/install.log"
$FT spacecharge footprint "$OUT/ring_sc.json" --emittances 2e-6 1.5e-6 --angles "${FOOTPRINT_ANGLES:-7}" \
  --device "$DEVICE" --threads "$THREADS" -o "$OUT/footprint" "${footprint_plot[@]}"
$FT track "$OUT/ring_sc.json" --gaussian "$N" --emittance-nx 2e-6 --emittance-ny 1.5e-6 --sigma-zeta 8 \
  --sigma-delta 1e-3 -n "$TURNS" --monitor "$OUT/monitor.npz" "${plots[@]}" --device "$DEVICE" --threads "$THREADS"
