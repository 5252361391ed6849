#!/bin/bash
# The collider benchmark (bench/colliders/lhc_trains.py: 8 + 7 bunches of 4 x 10^6 macroparticles, 6 slices,
# 100 turns) on 1, 2 and 4 ranks, one GPU each, with the default GPU check (a sample of 65536 particles per
# bunch) and without it; prints rank 0's time line of each run (whole command, exchange, GPU kernels).
#   bash bench/colliders/trains_per_rank_count.sh [FUSETRACK] [RANKS...]      (defaults: build/bin/fusetrack, 1 2 4)
set -u
BIN=${1:-build/bin/fusetrack}
shift || true
RANKS=${*:-1 2 4}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fusetrack_collider_bench_XXXXXX")
trap 'rm -rf "$WORK"' EXIT
python3 "$(dirname "$0")/lhc_trains.py" "$WORK/lhc_trains.json" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in $RANKS; do
  launch=(mpirun -np "$np" --bind-to none)
  [ "$np" = 1 ] && launch=()  # one rank: a plain process (no mpirun needed)
  for check in "" "--no-gpu-check"; do
    echo "== ${launch[*]} fusetrack collide lhc_trains.json -n 100 --device gpu --no-plot $check"
    start=$(date +%s%N)
    "${launch[@]}" "$BIN" collide "$WORK/lhc_trains.json" -n 100 --device gpu --no-plot $check -o "$WORK/np$np$check" \
      2>&1 | grep -E "time \(rank 0|GPU check|ranks for|error"
    echo "   whole command $(( ($(date +%s%N) - start) / 1000000 )) ms"
  done
done
