#!/bin/bash
# Switch-kernel motifs (fusetrack/motifs.h) on the GPU machine, against FUSETRACK_MOTIFS=0 in the same call.
#   OUT=/tmp/out bash bench/dispatch/switch_motifs_on_off.sh [tests] [latency] [da] [optimize] [study] [lightsource]
# (needs .carry/deps and .carry/xsuite). TOGGLE=NAME: the same runs with the environment setting NAME=0 and NAME=1
# instead of FUSETRACK_MOTIFS (a kernel-form switch under test).
#   tests:      the GPU tests that run the switch kernel (bitwise CPU == GPU, losses, segments, variants)
#   latency:    bench at 10^4 particles on a 600-element piece of CLIC (all forms, baked included) and on
#               the whole ring; the 12k collider at 10^6 (throughput)
#   da:         lone CLIC scan 100x100 x DA_TURNS turns, without and with motifs; da.npz compared
#   optimize:   lone CLIC scan 100x100 x 10^4 turns with --optimize (MOTIFS_BASELINE=1: without too)
#   study:      CLIC 60 seeds x 100x100 x STUDY_TURNS turns (STUDY_BASELINE=1: without too)
#   lightsource: the light-source ring, 60 seeds x 496 x LS_TURNS turns, GPU with and without, CPU 16 threads
set -u
TOGGLE=${TOGGLE:-FUSETRACK_MOTIFS}
source bench/common/device_env.sh
device_start || exit 1
source bench/common/study_inputs.sh
CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
GRID="--angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01"
has() { [[ " $MODES " == *" $1 "* ]]; }
MODES=" $* "
t0=$SECONDS
if has tests; then
  # TESTS: ';'-separated groups of test-case patterns, each run with its own time limit (TEST_LIMIT s)
  IFS=';' read -ra TEST_GROUPS <<< "${TESTS:-DA scan*,per-element*,callbacks*,chunking*,non-finite*,variants*,the sextupole ring*,auto dispatch*,fma=off: transformed*,fma=off: Bend*,fma=off: ThickMultipole*,fma=on: difference*;fma=off: bundled rings*}"
  for group in "${TEST_GROUPS[@]}"; do
    echo "== test_gpu -tc=\"$group\"" | tee -a "$OUT/tests.log"
    (cd build-gpu && timeout ${TEST_LIMIT:-240} ./bin/test_gpu -tc="$group" 2>&1 \
      | grep -E "ERROR|FAILED|CRASHED|test cases|assertions|Status" ) | tee -a "$OUT/tests.log"
  done
  echo "== tests $((SECONDS - t0)) s"
fi
if has sass; then
  $BIN codegen "$CLIC" --dispatch switch --fma off -o build-gpu/cg_motifs >/dev/null 2>&1
  cuobjdump -sass build-gpu/cg_motifs/fusetrack_fused.cubin > "$OUT/clic_motifs.sass" 2>&1
  cp build-gpu/cg_motifs/fusetrack_fused.cu "$OUT/clic_motifs.cu"
fi
if has latency; then
  clic_piece "$CLIC" build-gpu/clic_piece.json 10000 600
  for m in 0 1; do
    echo "== $TOGGLE=$m: CLIC piece (600 elements), 10^4 particles, 2000 turns" | tee -a "$OUT/latency.log"
    env $TOGGLE=$m $BIN bench build-gpu/clic_piece.json -N 64 -n 1 --thread-counts 1 --gpu-particles 1e4 --gpu-turns 2000 \
      --no-per-element 2>&1 | grep -E "fused|rror" | tee -a "$OUT/latency.log"
    echo "== $TOGGLE=$m: CLIC (36954 elements), 10^4 particles, 40 turns" | tee -a "$OUT/latency.log"
    env $TOGGLE=$m $BIN bench "$CLIC" -N 64 -n 1 --thread-counts 1 --gpu-particles 1e4 --gpu-turns 40 \
      --no-per-element 2>&1 | grep -E "fused|rror" | tee -a "$OUT/latency.log"
    echo "== $TOGGLE=$m: thin collider 12k, 10^6 particles, 4 turns" | tee -a "$OUT/latency.log"
    env $TOGGLE=$m $BIN bench lattices/thin_collider_12k.json -N 64 -n 1 --thread-counts 1 --gpu-particles 1e4 1e6 --gpu-turns 4 \
      --no-per-element 2>&1 | grep -E "fused|rror" | tee -a "$OUT/latency.log"
  done
  echo "== latency $((SECONDS - t0)) s"
fi
if has da; then
  for m in 0 1; do
    echo "== $TOGGLE=$m: CLIC lone scan 100x100 x ${DA_TURNS:-1000} turns" | tee -a "$OUT/da.log"
    env $TOGGLE=$m /usr/bin/time -f "wall %e s" $BIN da "$CLIC" --turns ${DA_TURNS:-1000} $GRID --device gpu --no-plots \
      -o build-gpu/da_m$m 2>&1 | grep -E "^survivors|DA .smallest|^tracking|wall" | tee -a "$OUT/da.log"
  done
  cmp build-gpu/da_m0/da.npz build-gpu/da_m1/da.npz && echo "da.npz without == with motifs, byte for byte" | tee -a "$OUT/da.log"
  echo "== da $((SECONDS - t0)) s"
fi
if has optimize; then
  for m in ${OPT_MODES:-1}; do
    echo "== $TOGGLE=$m: CLIC lone scan --optimize, 100x100 x 10^4 turns" | tee -a "$OUT/optimize.log"
    env $TOGGLE=$m /usr/bin/time -f "wall %e s" $BIN da "$CLIC" --optimize --turns 10000 $GRID --device gpu --no-plots \
      -o build-gpu/opt_m$m 2>&1 | grep -E "optimiz|^survivors|DA .smallest|^tracking|wall" | tee -a "$OUT/optimize.log"
  done
  [ -f build-gpu/opt_m0/da.npz ] && cmp build-gpu/opt_m0/da.npz build-gpu/opt_m1/da.npz \
    && echo "--optimize da.npz $TOGGLE=0 == 1, byte for byte" | tee -a "$OUT/optimize.log"
  echo "== optimize $((SECONDS - t0)) s"
fi
if has study; then
  clic_seeds "$CLIC" 60
  for m in ${STUDY_MODES:-1}; do
    echo "== $TOGGLE=$m: CLIC 60 seeds x 100x100 x ${STUDY_TURNS:-10000} turns" | tee -a "$OUT/study.log"
    env $TOGGLE=$m /usr/bin/time -f "wall %e s" $BIN da "$CLIC" --variants build-gpu/clic_seeds60.json --turns ${STUDY_TURNS:-10000} \
      $GRID --device gpu --no-plots -o build-gpu/study_m$m 2>&1 | grep -E "^survivors|DA .smallest|^set-up|^tracking|wall" | tee -a "$OUT/study.log"
  done
  [ -f build-gpu/study_m0/da.npz ] && cmp build-gpu/study_m0/da.npz build-gpu/study_m1/da.npz \
    && echo "study da.npz $TOGGLE=0 == 1, byte for byte" | tee -a "$OUT/study.log"
  echo "== study $((SECONDS - t0)) s"
fi
if has lightsource; then
  mba_seeds
  LGRID="--angles 16 --amplitudes 31 --amplitude-range 0.0002 0.004"
  IFS=';' read -ra LS_LIST <<< "${LS_RUNS:-gpu 0;gpu 1;cpu 1}"
  for run in "${LS_LIST[@]}"; do
    set -- $run
    echo "== light-source ring, 60 seeds x 496 x ${LS_TURNS:-1000} turns, device $1, $TOGGLE=$2" | tee -a "$OUT/lightsource.log"
    env $TOGGLE=$2 $BIN da build-gpu/mba_split.json --variants build-gpu/mba_seeds.json $LGRID -n ${LS_TURNS:-1000} --device $1 \
      --threads 16 --no-plots -o build-gpu/ls_$1_$2 2>&1 | grep -E "^survivors|DA .smallest|^set-up|^tracking" | tee -a "$OUT/lightsource.log"
  done
  cmp build-gpu/ls_gpu_0/da.npz build-gpu/ls_gpu_1/da.npz && echo "light source da.npz $TOGGLE=0 == 1" | tee -a "$OUT/lightsource.log"
  # LS_BENCH=1: the ring at 10^6 particles (throughput-bound), both settings.
  if [ "${LS_BENCH:-0}" = 1 ]; then
    for m in 0 1; do
      echo "== $TOGGLE=$m: light-source ring, 10^6 particles, 20 turns" | tee -a "$OUT/lightsource.log"
      env $TOGGLE=$m $BIN bench lattices/mba_light_source.json -N 64 -n 1 --thread-counts 1 --gpu-particles 1e6 --gpu-turns 20 \
        --no-per-element 2>&1 | grep -E "fused|rror" | tee -a "$OUT/lightsource.log"
    done
  fi
  echo "== lightsource $((SECONDS - t0)) s"
fi
