#!/bin/bash
# Multi-process runs give byte-identical results to one process (CTest, tests/CMakeLists.txt):
#   multi_process_test.sh FUSETRACK SOURCE_DIR CASE [MERGE_PARTICLE_SET]
# CASE: da_mpi | track_mpi | collide_mpi | da_resume_mpi | parts_merge | parts_missing | parts_foreign |
#       study_mpi_parts | track_space_charge_mpi | track_space_charge_follow_mpi | track_train_mpi |
#       more_ranks_than_work
# MPI cases run `mpirun -np 1, 2, 3 --oversubscribe` on the CPU (CI has no GPU). Exit 77 (skipped)
# when mpirun is absent.
set -u
BIN=$1
SRC=$2
CASE=$3
MERGE=${4:-}  # merge_particle_set: a shard set (several ranks' -o) merged into one .npz
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fusetrack_mpi_${CASE}_XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# CI runs as root; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
DA_LATTICE=$SRC/lattices/sextupole_rf_ring.json
DA_OPTS="--turns 200 --angles 5 --amplitudes 12 --amplitude-range 0.001 0.04 --no-plots --device cpu --threads 1 --checkpoint-every 50"
COLL_OPTS="-n 40 --matched 3000 --sigma-zeta 2 --device cpu --threads 1 --monitor-every 5 --profile-every 10"
failed=0
same() {  # same FILE_A FILE_B: byte-identical
  if cmp -s "$1" "$2"; then echo "identical: $1 $2"; else echo "DIFFERENT: $1 $2"; failed=1; fi
}
need_mpirun() {
  command -v mpirun >/dev/null || { echo "SKIPPED: mpirun not found"; exit 77; }
}
run() {  # run COMMAND...: fails the test on a non-zero exit
  "$@" >"$WORK/last.log" 2>&1 || { echo "FAILED ($?): $*"; cat "$WORK/last.log"; failed=1; }
}
case "$CASE" in
  da_mpi)
    need_mpirun
    run "$BIN" da "$DA_LATTICE" $DA_OPTS -o single
    for np in 1 2 3; do
      run mpirun -np $np "$BIN" da "$DA_LATTICE" $DA_OPTS -o np$np
      for f in da.npz summary.json summary.csv; do same single/$f np$np/$f; done
    done
    # Shares sized by the ranks' times after every call (the boundaries move: particles change ranks).
    for np in 2 3; do
      FUSETRACK_DA_BALANCE_SECONDS=0 run mpirun -np $np -x FUSETRACK_DA_BALANCE_SECONDS "$BIN" da "$DA_LATTICE" $DA_OPTS -o bal$np
      for f in da.npz summary.json checkpoint.npz; do same single/$f bal$np/$f; done
    done
    # Settings from the environment of one rank only (remote ranks may not get it): rank 0's count.
    run timeout 120 mpirun -np 1 "$BIN" da "$DA_LATTICE" $DA_OPTS -o env2 : -np 1 env FUSETRACK_DA_FIRST_CALL_TURNS=7 \
      FUSETRACK_DA_BALANCE_SECONDS=0 "$BIN" da "$DA_LATTICE" $DA_OPTS -o env2
    for f in da.npz summary.json checkpoint.npz; do same single/$f env2/$f; done
    # A checkpoint that cannot be written (a directory in its place) stops every rank with rank 0's
    # error naming the file; no rank waits (timeout 124).
    mkdir -p wf2/checkpoint.npz
    timeout 120 mpirun -np 2 "$BIN" da "$DA_LATTICE" $DA_OPTS -o wf2 >"$WORK/wf.log" 2>&1
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -ne 124 ]; } || { echo "unwritable checkpoint: exit $rc (expected an error, no hang)"; failed=1; }
    grep -q "wf2/checkpoint.npz: cannot write the file (rename of the finished temporary file failed: Is a directory)" "$WORK/wf.log" \
      || { echo "the error does not name the checkpoint and the cause"; cat "$WORK/wf.log"; failed=1; }
    # Fewer survivors than ranks (2 of 6 after 300 turns on 4 ranks): ranks with an empty share wait.
    FEW_OPTS="--turns 300 --angles 2 --amplitudes 3 --amplitude-range 0.02 0.045 --no-plots --device cpu --threads 1 --checkpoint-every 100"
    run "$BIN" da "$DA_LATTICE" $FEW_OPTS -o few1
    grep -q "^survivors: 2 of 6" "$WORK/last.log" || { echo "expected 2 survivors of 6"; cat "$WORK/last.log"; failed=1; }
    run mpirun -np 4 "$BIN" da "$DA_LATTICE" $FEW_OPTS -o few4
    for f in da.npz summary.json checkpoint.npz; do same few1/$f few4/$f; done
    # The ranks share one checkpoint, rank 0's, that of one process (byte for byte).
    same single/checkpoint.npz np3/checkpoint.npz
    ! ls np3/checkpoint.part* >/dev/null 2>&1 || { echo "per-rank checkpoints written"; failed=1; }
    ;;
  study_mpi_parts)
    # A DA study of lattice variants: MPI ranks, and job-array parts merged, byte-identical to one run.
    cat >variants.json <<'JSON'
{"fusetrack_variants": 1,
 "variants": [{"name": "nominal"},
              {"name": "errors", "elements": [{"name": "qd[3]", "add": {"knl": [0, 0.004]}},
                                              {"name": "sd[5]", "set": {"shift_x": 1e-3, "rot_s_rad": 0.02}}]}],
 "scans": [{"name": "sf_half", "field": "knl", "index": 2, "values": [2.0, 2.6]}]}
JSON
    run "$BIN" da "$DA_LATTICE" --variants variants.json $DA_OPTS -o single
    for f in da.npz summary.json summary.csv variants.csv variants/003_errors_knl_2__2.6/summary.json; do
      [ -e single/$f ] || { echo "missing single/$f"; failed=1; }
    done
    for i in 0 1 2; do run "$BIN" da "$DA_LATTICE" --variants variants.json $DA_OPTS --part $i/3 -o parts; done
    run "$BIN" da-merge parts -o merged --no-plots
    for f in da.npz summary.json summary.csv variants.csv; do same single/$f merged/$f; done
    run "$BIN" da "$DA_LATTICE" --variants variants.json $DA_OPTS --stop-after 100 -o resumed
    run "$BIN" da "$DA_LATTICE" --variants variants.json $DA_OPTS --resume -o resumed
    for f in da.npz summary.json summary.csv variants.csv; do same single/$f resumed/$f; done
    if command -v mpirun >/dev/null; then
      # The ranks share the variants' set-up (closed orbit and optics) and exchange it: 1, 2 and 3
      # ranks (4 variants: shares 4; 2+2; 2+1+1) give the single run byte for byte.
      for np in 1 2 3; do
        run mpirun -np $np "$BIN" da "$DA_LATTICE" --variants variants.json $DA_OPTS -o np$np
        grep -q "^set-up: " "$WORK/last.log" && grep -q "^tracking: " "$WORK/last.log" \
          || { echo "no set-up/tracking time lines"; cat "$WORK/last.log"; failed=1; }
        for f in da.npz summary.json summary.csv variants.csv variants/003_errors_knl_2__2.6/da.npz; do
          same single/$f np$np/$f
        done
      done
      # Variants without a closed orbit on two ranks' shares: every rank stops (no deadlock) and the
      # error names the first of them in order, as one process does.
      cat >broken.json <<'JSON'
{"fusetrack_variants": 1,
 "variants": [{"name": "fine"}, {"name": "broken_a", "elements": [{"name": "qd", "set": {"shift_x": 0.3}}]},
              {"name": "broken_b", "elements": [{"name": "qf_half", "set": {"shift_x": 0.3}}]}]}
JSON
      for np in 1 2 3; do
        timeout 120 mpirun -np $np "$BIN" da "$DA_LATTICE" --variants broken.json $DA_OPTS -o broken$np \
          >"$WORK/broken.log" 2>&1
        rc=$?
        if [ $rc = 0 ] || [ $rc = 124 ] || ! grep -q "DA study, variant 'broken_a'" "$WORK/broken.log" \
           || grep -q "broken_b" "$WORK/broken.log"; then
          echo "np $np: a study with variants without a closed orbit gave rc $rc (expected an error naming broken_a only)"
          cat "$WORK/broken.log"
          failed=1
        fi
      done
    fi
    ;;
  da_resume_mpi)
    need_mpirun
    run "$BIN" da "$DA_LATTICE" $DA_OPTS -o single
    # Stopped at its first checkpoint (turn 50 of 200) on 3 ranks, then resumed on 3 ranks.
    run mpirun -np 3 "$BIN" da "$DA_LATTICE" $DA_OPTS --stop-after 50 -o np3r
    grep -q "stopped after turn 50" "$WORK/last.log" || { echo "the run did not stop at turn 50"; cat "$WORK/last.log"; failed=1; }
    [ ! -e np3r/da.npz ] || { echo "results written by a stopped run"; failed=1; }
    # The checkpoint is that of one process: resumed on 3 ranks, on 2, and by one process.
    cp -r np3r np2r && cp -r np3r np1r && cp -r np3r mpmdA
    run mpirun -np 3 "$BIN" da "$DA_LATTICE" $DA_OPTS -o np3r --resume
    grep -q "resuming from .* at turn 50" "$WORK/last.log" || { echo "the run did not resume at turn 50"; cat "$WORK/last.log"; failed=1; }
    run mpirun -np 2 "$BIN" da "$DA_LATTICE" $DA_OPTS -o np2r --resume
    grep -q "resuming from .* at turn 50" "$WORK/last.log" || { echo "2 ranks did not resume at turn 50"; cat "$WORK/last.log"; failed=1; }
    run "$BIN" da "$DA_LATTICE" $DA_OPTS -o np1r --resume
    grep -q "resuming from .* at turn 50" "$WORK/last.log" || { echo "one process did not resume at turn 50"; cat "$WORK/last.log"; failed=1; }
    # Rank 0 alone reads the checkpoint: another rank's output directory may lack it (node-local disks).
    mkdir -p mpmdB
    run timeout 120 mpirun -np 1 "$BIN" da "$DA_LATTICE" $DA_OPTS -o mpmdA --resume : -np 1 "$BIN" da "$DA_LATTICE" $DA_OPTS -o mpmdB --resume
    grep -q "resuming from mpmdA/checkpoint.npz at turn 50" "$WORK/last.log" || { echo "rank 0 did not resume at turn 50"; cat "$WORK/last.log"; failed=1; }
    for r in np3r np2r np1r mpmdA; do
      for f in da.npz summary.json summary.csv; do same single/$f $r/$f; done
    done
    ;;
  track_mpi)
    need_mpirun
    # The bundled impedance ring with a 100 kHz frequency_resolution: a 2^17-point FFT per turn instead of the
    # default 2^22 (the Q = 500 resonator's wake over 28 decay times), 30x less CPU for the same comparison.
    COLL_LATTICE=$WORK/impedance_ring.json
    python3 -c 'import json, sys; ring = json.load(open(sys.argv[1]))
ring["elements"]["impedance"]["frequency_resolution"] = 1e5; json.dump(ring, open(sys.argv[2], "w"))' \
      "$SRC/lattices/longitudinal_bench_ring.json" "$COLL_LATTICE" || { echo "could not write $COLL_LATTICE"; exit 1; }
    run "$BIN" track "$COLL_LATTICE" $COLL_OPTS -o single.npz --monitor single_monitor.npz
    for np in 1 2 3; do
      run mpirun -np $np "$BIN" track "$COLL_LATTICE" $COLL_OPTS -o np$np.npz --monitor np${np}_monitor.npz
      if [ $np -gt 1 ]; then
        # Several ranks: one shard per rank and an index, no gather; the merged set is the same.
        for r in $(seq 0 $((np - 1))); do
          [ -f np$np.npz.d/rank$(printf %04d $r).npz ] || { echo "shard $r of $np missing"; failed=1; }
        done
        [ -n "$MERGE" ] || { echo "no merge_particle_set given"; exit 1; }
        run "$MERGE" np$np.npz np${np}_merged.npz
        same single.npz np${np}_merged.npz
        # The shard set reads back as initial particles (-p) like the single file.
        run "$BIN" track "$COLL_LATTICE" -n 2 --device cpu --threads 1 -p single.npz -o again_single.npz
        run "$BIN" track "$COLL_LATTICE" -n 2 --device cpu --threads 1 -p np$np.npz -o again_np$np.npz
        same again_single.npz again_np$np.npz
      else
        same single.npz np$np.npz
      fi
      same single_monitor.npz np${np}_monitor.npz
    done
    # A CSV shard set merges to the single CSV, line for line.
    run "$BIN" track "$COLL_LATTICE" $COLL_OPTS -o single.csv
    run mpirun -np 2 "$BIN" track "$COLL_LATTICE" $COLL_OPTS -o np2.csv
    tail -q -n +2 np2.csv.d/rank0000.csv np2.csv.d/rank0001.csv > np2_rows.csv
    tail -n +2 single.csv > single_rows.csv
    same single_rows.csv np2_rows.csv
    ;;
  collide_mpi)
    # Two beams, 3 and 2 bunches (each meets a different partner every turn), over 1-3 ranks in both
    # placements: the per-crossing records and the spectra are the single process's, byte for byte.
    need_mpirun
    SETUP=$SRC/tests/mpi/collider_gear.json
    OPTS="-n 20 --device cpu --threads 1 --no-plot"
    run "$BIN" collide "$SETUP" $OPTS -o single
    [ -s single/spectra.csv ] || { echo "no spectra written"; failed=1; }
    for np in 1 2 3; do
      for placement in block round-robin; do
        run mpirun -np $np "$BIN" collide "$SETUP" $OPTS --placement $placement -o np${np}_$placement
        for f in bunches.csv spectra.csv; do same single/$f np${np}_$placement/$f; done
      done
    done
    # More ranks than bunches (6 for 3 + 2: rank 5 holds none): rank 0 says so, the files are the same.
    run mpirun -np 6 "$BIN" collide "$SETUP" $OPTS -o np6
    grep -q "collide: 6 ranks for 5 bunches: 1 rank holds no bunch" "$WORK/last.log" \
      || { echo "no line on the idle rank"; cat "$WORK/last.log"; failed=1; }
    for f in bunches.csv spectra.csv; do same single/$f np6/$f; done
    # Stopped at turn 7 on 3 ranks (checkpoints every 3 turns), resumed on 2: the same files.
    run mpirun -np 3 "$BIN" collide "$SETUP" $OPTS --checkpoint-every 3 --stop-after 7 -o resumed
    grep -q "stopped after crossing 21" "$WORK/last.log" || { echo "the run did not stop at crossing 21"; cat "$WORK/last.log"; failed=1; }
    [ ! -e resumed/spectra.csv ] || { echo "results written by a stopped run"; failed=1; }
    run mpirun -np 2 "$BIN" collide "$SETUP" $OPTS --checkpoint-every 3 --resume -o resumed
    grep -q "resuming from .* at crossing 21" "$WORK/last.log" || { echo "the run did not resume"; cat "$WORK/last.log"; failed=1; }
    for f in bunches.csv spectra.csv; do same single/$f resumed/$f; done
    # A checkpoint of another set-up is refused.
    sed 's/"intensity": 2e11/"intensity": 3e11/' "$SETUP" > other.json
    sed -i "s#../../lattices#$SRC/lattices#" other.json
    if "$BIN" collide other.json $OPTS --resume -o resumed > refused.log 2>&1; then
      echo "a checkpoint of another set-up was accepted"; failed=1
    fi
    grep -q "another set-up" refused.log || { echo "no clear refusal:"; cat refused.log; failed=1; }
    ;;
  parts_merge)
    run "$BIN" da "$DA_LATTICE" $DA_OPTS -o single
    for i in 0 1 2; do run "$BIN" da "$DA_LATTICE" $DA_OPTS --part $i/3 -o parts; done
    run "$BIN" da-merge parts -o merged --no-plots
    for f in da.npz summary.json summary.csv; do same single/$f merged/$f; done
    ;;
  parts_missing)
    for i in 0 2; do run "$BIN" da "$DA_LATTICE" $DA_OPTS --part $i/3 -o parts; done
    "$BIN" da-merge parts -o merged --no-plots >out.log 2>&1
    rc=$?
    cat out.log
    [ $rc -eq 2 ] || { echo "expected exit code 2, got $rc"; failed=1; }
    grep -q "1 of 3 parts missing: part 1 (part_1_of_3.json)" out.log || { echo "missing part not named"; failed=1; }
    [ ! -e merged/da.npz ] || { echo "results written despite a missing part"; failed=1; }
    ;;
  parts_foreign)
    for i in 0 2; do run "$BIN" da "$DA_LATTICE" $DA_OPTS --part $i/3 -o parts; done
    run "$BIN" da "$DA_LATTICE" ${DA_OPTS/--turns 200/--turns 150} --part 1/3 -o other
    cp other/part_1_of_3.* parts/
    "$BIN" da-merge parts -o merged --no-plots >out.log 2>&1
    rc=$?
    cat out.log
    [ $rc -eq 2 ] || { echo "expected exit code 2, got $rc"; failed=1; }
    grep -q "part_1_of_3.json: this part belongs to another scan" out.log || { echo "foreign part not named"; failed=1; }
    ;;
  track_space_charge_mpi)
    # Particle-in-cell space charge: the charge grid and the adapted grid's moments summed over the
    # ranks as integers, so 1, 2 and 3 ranks give the single run's particles byte for byte.
    need_mpirun
    cat > sc_ring.json <<'JSON'
{"fusetrack_lattice": 1, "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 1e9},
 "elements": {"qf_half": {"type": "Multipole", "knl": [0.0, 0.01]}, "qd": {"type": "Multipole", "knl": [0.0, -0.02]},
   "d": {"type": "Drift", "length": 40.0},
   "sc": {"type": "SpaceChargePIC", "length": 80.0, "intensity": 5e10, "nodes_x": 32, "nodes_y": 32, "nodes_zeta": 8},
   "sc3d": {"type": "SpaceChargePIC", "length": 80.0, "intensity": 5e10, "model": "3D", "nodes_x": 32, "nodes_y": 32,
            "nodes_zeta": 16, "x_min": -0.08, "x_max": 0.08, "y_min": -0.05, "y_max": 0.05, "zeta_min": -8, "zeta_max": 8}},
 "sequence": ["qf_half", "sc", "d", "qd", "sc3d", "d", "qf_half", "qf_half", "d", "qd", "d", "qf_half"]}
JSON
    SC_OPTS="-n 8 --gaussian 3000 --emittance-nx 2e-6 --emittance-ny 1e-6 --sigma-zeta 2 --sigma-delta 1e-3 --device cpu --threads 1"
    run "$BIN" track sc_ring.json $SC_OPTS -o single.npz
    for np in 1 2 3; do
      run mpirun -np $np "$BIN" track sc_ring.json $SC_OPTS -o np$np.npz
      if [ $np -gt 1 ]; then
        [ -n "$MERGE" ] || { echo "no merge_particle_set given"; exit 1; }
        run "$MERGE" np$np.npz np${np}_merged.npz
        same single.npz np${np}_merged.npz
      else
        same single.npz np$np.npz
      fi
    done
    ;;
  track_space_charge_follow_mpi)
    # Frozen space charge whose sizes follow the beam (--space-charge-update): rank 0 takes the moments
    # of the gathered bunch and sends the sizes to every rank, so 1, 2 and 3 ranks give the single
    # run's particles and sizes byte for byte.
    need_mpirun
    run "$BIN" spacecharge install "$SRC/lattices/space_charge_ring.json" --elements 16 --intensity 1.5e11 \
      --emittances 2e-6 1.5e-6 --sigma-zeta 8 --delta-rms 1e-3 -o ring_sc.json
    FOLLOW_OPTS="-n 6 --space-charge-update 3 --gaussian 1000 --emittance-nx 4e-6 --emittance-ny 3e-6 --sigma-zeta 8 --sigma-delta 1e-3 --device cpu --threads 1"
    run "$BIN" track ring_sc.json $FOLLOW_OPTS -o single.npz
    for np in 1 2 3; do
      run mpirun -np $np "$BIN" track ring_sc.json $FOLLOW_OPTS -o np$np.npz
      same single.space_charge.csv np$np.space_charge.csv
      if [ $np -gt 1 ]; then
        [ -n "$MERGE" ] || { echo "no merge_particle_set given"; exit 1; }
        run "$MERGE" np$np.npz np${np}_merged.npz
        same single.npz np${np}_merged.npz
      else
        same single.npz np$np.npz
      fi
    done
    ;;
  track_train_mpi)
    # A 4-bunch train (TransverseWake with a 30-turn resistive-wall memory, a delayed TransverseDamper), its
    # particles shared over 1, 2, 3 ranks (2: whole bunches per rank, the ranks exchange only holders and totals;
    # 3: bunches cut across ranks, the whole table summed): the particles and the per-bunch CSV are
    # byte-identical to one process.
    need_mpirun
    cat >train.json <<'JSON'
{"fusetrack_lattice": 1,
 "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 26e9},
 "elements": {
  "qf_half": {"type": "Multipole", "knl": [0.0, 0.01]}, "qd": {"type": "Multipole", "knl": [0.0, -0.02]},
  "d": {"type": "Drift", "length": 40.0},
  "wake": {"type": "TransverseWake", "n_slices": 20, "zeta_min": -0.5, "zeta_max": 0.5, "intensity": 2e11,
           "memory_turns": 30, "n_bunches": 4, "bunch_spacing": 5.0,
           "sources": [{"type": "ResistiveWall", "radius": 0.02, "length": 160.0, "conductivity": 1e6},
                       {"type": "Resonator", "r_shunt": 5e7, "q": 1.0, "frequency": 1e9}]},
  "damper": {"type": "TransverseDamper", "gain_turns": 20, "zeta_min": -0.5, "zeta_max": 0.5, "delay": 1,
             "n_bunches": 4, "bunch_spacing": 5.0}},
 "sequence": ["wake", "qf_half", "d", "qd", "damper", "d", "qf_half", "qf_half", "d", "qd", "d", "qf_half"]}
JSON
    TRAIN_OPTS="-n 30 --gaussian 700 --emittance-nx 2e-6 --emittance-ny 2e-6 --sigma-zeta 0.1 --bunches 4 --device cpu --threads 1"
    run "$BIN" track train.json $TRAIN_OPTS -o single.npz --bunches-output single_bunches.csv
    for np in 1 2 3; do
      run mpirun -np $np "$BIN" track train.json $TRAIN_OPTS -o np$np.npz --bunches-output np${np}_bunches.csv
      same single_bunches.csv np${np}_bunches.csv
      if [ $np -gt 1 ]; then
        run "$MERGE" np$np.npz np${np}_merged.npz
        same single.npz np${np}_merged.npz
      else
        same single.npz np$np.npz
      fi
    done
    # Adjacent cuts, a large momentum spread and no RF: from about turn 60 particles drift into the neighbouring
    # bunches' cuts, some into a bunch that another rank holds, while a damper kicks with the centroids of two
    # turns earlier. Each rank must have stored every bunch's centroids (a rank that had stored only its own
    # bunches gave such particles a zero delayed kick: 2 ranks differed from one process).
    cat >drift.json <<'JSON'
{"fusetrack_lattice": 1,
 "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 26e9},
 "elements": {
  "qf_half": {"type": "Multipole", "knl": [0.0, 0.01]}, "qd": {"type": "Multipole", "knl": [0.0, -0.02]},
  "d": {"type": "Drift", "length": 40.0},
  "wake": {"type": "TransverseWake", "n_slices": 100, "zeta_min": -0.6, "zeta_max": 0.6, "intensity": 1e3,
           "memory_turns": 20, "n_bunches": 4, "bunch_spacing": 1.2,
           "sources": [{"type": "ResistiveWall", "radius": 0.02, "length": 160.0, "conductivity": 1e6}]},
  "damper": {"type": "TransverseDamper", "gain_turns": 20, "zeta_min": -0.6, "zeta_max": 0.6, "delay": 2,
             "n_bunches": 4, "bunch_spacing": 1.2}},
 "sequence": ["wake", "qf_half", "d", "qd", "damper", "d", "qf_half", "qf_half", "d", "qd", "d", "qf_half"]}
JSON
    DRIFT_OPTS="-n 80 --gaussian 2000 --emittance-nx 2e-6 --emittance-ny 2e-6 --sigma-zeta 0.05 --sigma-delta 1e-2
                --bunches 4 --device cpu --threads 1"
    run "$BIN" track drift.json $DRIFT_OPTS -o drift_single.npz --bunches-output drift_single.csv
    for np in 2 3; do
      run mpirun -np $np "$BIN" track drift.json $DRIFT_OPTS -o drift_np$np.npz --bunches-output drift_np${np}_bunches.csv
      same drift_single.csv drift_np${np}_bunches.csv
      run "$MERGE" drift_np$np.npz drift_np${np}_merged.npz
      same drift_single.npz drift_np${np}_merged.npz
    done
    ;;
  more_ranks_than_work)
    # More ranks than particles: the idle ranks are named, and the results equal one process's.
    need_mpirun
    run "$BIN" da "$DA_LATTICE" --turns 20 --angles 1 --amplitudes 2 --amplitude-range 0.001 0.002 --no-plots \
      --device cpu --threads 1 -o single
    mpirun -np 3 "$BIN" da "$DA_LATTICE" --turns 20 --angles 1 --amplitudes 2 --amplitude-range 0.001 0.002 --no-plots \
      --device cpu --threads 1 -o np3 >np3.log 2>&1 || { echo "FAILED: da on 3 ranks"; cat np3.log; failed=1; }
    same single/da.npz np3/da.npz
    grep -q "3 ranks for 2 initial conditions: 1 rank holds none" np3.log ||
      { echo "MISSING the idle-rank note (da)"; cat np3.log; failed=1; }
    run "$BIN" track "$SRC/lattices/longitudinal_bench_ring.json" -n 5 --matched 2 --sigma-zeta 2 --device cpu \
      --threads 1 -o single.npz
    mpirun -np 3 "$BIN" track "$SRC/lattices/longitudinal_bench_ring.json" -n 5 --matched 2 --sigma-zeta 2 --device cpu \
      --threads 1 -o np3.npz >track3.log 2>&1 || { echo "FAILED: track on 3 ranks"; cat track3.log; failed=1; }
    [ -n "$MERGE" ] || { echo "no merge_particle_set given"; exit 1; }
    run "$MERGE" np3.npz np3_merged.npz
    same single.npz np3_merged.npz
    grep -q "3 ranks for 2 particles: 1 rank holds none" track3.log ||
      { echo "MISSING the idle-rank note (track)"; cat track3.log; failed=1; }
    ;;
  *) echo "unknown case $CASE"; exit 1 ;;
esac
if [ $failed -ne 0 ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
