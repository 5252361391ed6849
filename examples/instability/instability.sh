#!/bin/bash
# The transverse-instability worked example of the README ("Transverse instability: worked example"):
# head-tail mode 0 of one bunch in an SPS-like ring at 26 GeV/c (tools/lattices/make_instability_ring.py)
# on a broadband resonator, for a scan of the chromaticity Q'x (= Q'y) above transition, the growth rate of
# the bunch centroid fitted by fusetrack.growth and compared with Sacherer's formula, and the most
# unstable case again with a bunch-by-bunch TransverseDamper of N_D turns. Plots and a summary table in
# OUT_DIR (growth_vs_chromaticity.png, centroids.png, summary.txt, summary.json).
#   bash examples/instability/instability.sh [OUT_DIR] [TURNS] [PARTICLES]   (defaults instability_example 1500 20000)
# FUSETRACK: the fusetrack binary (default build/bin/fusetrack); PYTHON (default python3); PYTHONPATH (default
# build/python: the fusetrack package, whose growth-rate fit the analysis uses);
# CHROMATICITIES (default "-4 -2 0 2", the most unstable first); DAMPER_CHROMATICITIES (default: the first
# and 0); N_D (default 50); THREADS (default 2). CPU backend.
set -eu
OUT=${1:-instability_example}
TURNS=${2:-1500}
N=${3:-20000}
FT=${FUSETRACK:-build/bin/fusetrack}
PY=${PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:-build/python}
CHROMATICITIES=${CHROMATICITIES:-"-4 -2 0 2"}
N_D=${N_D:-50}
THREADS=${THREADS:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
runs="["
sep=""
for QP in $CHROMATICITIES; do
  name="qp${QP}"
  $PY "$HERE/../../tools/lattices/make_instability_ring.py" --chromaticity "$QP" "$QP" --damper-turns "$N_D" \
    --output-dir "$OUT" --name "ring_$name" | tee "$OUT/ring_$name.log" | tail -n 1 | sed 's/^intended //' \
    > "$OUT/ring_$name.intended.json"
  if [ ! -f "$OUT/bunch.npz" ]; then
    # zeta, delta matched to the RF bucket (Gaussian, rms 0.12 m; the bucket does not depend on Q'), then the
    # transverse Gaussian (2 um normalized) offset by 1 mm in x; the same bunch for every run.
    $FT track "$OUT/ring_$name.json" --matched "$N" --sigma-zeta 0.12 -n 1 -o "$OUT/matched.npz" \
      --device cpu --threads "$THREADS" | grep -E "^(rf bucket|matched)"
    $PY "$HERE/instability_analysis.py" bunch "$OUT/ring_$name.intended.json" "$OUT/matched.npz" "$OUT/bunch.npz"
  fi
  echo "== Q'x = Q'y = $QP: $TURNS turns, $N macroparticles"
  $FT track "$OUT/ring_$name.json" -p "$OUT/bunch.npz" -n "$TURNS" --monitor "$OUT/$name.npz" \
    --device cpu --threads "$THREADS" | grep -E "^(particles|time)"
  runs="$runs$sep{\"name\": \"$name\", \"chromaticity\": $QP, \"monitor\": \"$OUT/$name.npz\", \"intended\": \"$OUT/ring_$name.intended.json\", \"first\": 50, \"last\": $TURNS}"
  sep=", "
  [ -n "${first_qp:-}" ] || first_qp=$QP
done
# With the damper: the most unstable case and Q' = 0 (DAMPER_CHROMATICITIES, each one of the scan's, whose
# lattice files with the damper were written with the scan's); 500 turns at most, fitted over turns 10-150
# (the centroid reaches the noise floor of N macroparticles after ~ 4 n_d turns).
DAMPER_TURNS_RUN=$(( TURNS < 500 ? TURNS : 500 ))
for QP in ${DAMPER_CHROMATICITIES:-$first_qp 0}; do
  name="qp${QP}"
  echo "== Q' = $QP with a TransverseDamper of $N_D turns: $DAMPER_TURNS_RUN turns"
  $FT track "$OUT/ring_${name}_damper.json" -p "$OUT/bunch.npz" -n "$DAMPER_TURNS_RUN" --monitor "$OUT/${name}_damper.npz" \
    --device cpu --threads "$THREADS" | grep -E "^(particles|time)"
  runs="$runs$sep{\"name\": \"${name}_damper\", \"chromaticity\": $QP, \"damper_turns\": $N_D, \"monitor\": \"$OUT/${name}_damper.npz\", \"intended\": \"$OUT/ring_$name.intended.json\", \"first\": 10, \"last\": 150}"
done
runs="$runs]"
echo "$runs" > "$OUT/runs.json"
$PY "$HERE/instability_analysis.py" report "$OUT"
echo "plots: $OUT/growth_vs_chromaticity.png $OUT/centroids.png; table: $OUT/summary.txt"
