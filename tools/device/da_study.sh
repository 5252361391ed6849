#!/bin/bash
# On the GPU machine: DA studies of lattice variants (error seeds) in one run.
#   OUT=/tmp/out bash tools/device/da_study.sh [quick|full|lightsource|twogpu]   (needs .carry/deps and .carry/xsuite;
#   lightsource also .peers/trackcpp for the per-core comparison, never committed)
# quick: GPU tests of the variants and a short study; full: the benchmarks of the issue
#   CLIC damping ring, 60 seeds x 100x100 initial conditions x 10^4 turns (and one scan alone)
#   bundled light-source ring, 60 seeds x 496 initial conditions x 1000 turns, GPU vs all CPU cores
# twogpu: CLIC 60 seeds x 10^4 x TWO_TURNS turns on one GPU and on two (mpirun -np 2)
# blocks: survivor compaction and threads per block of the latency-bound scans (RUN_LIST, DA_TURNS, LS_TURNS)
set -u
OUT=${OUT:-/tmp/fusetrack-out}
MODE=${1:-quick}
mkdir -p "$OUT"
ROOT=$(pwd)
export CMAKE_PREFIX_PATH=$ROOT/.carry/deps/usr
export LD_LIBRARY_PATH=$ROOT/.carry/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export FUSETRACK_KERNEL_CACHE=$ROOT/build-gpu/kernel-cache
CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
t0=$(date +%s)
bash tools/device/refresh_sources.sh || true  # 1: sources changed, all touched
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build build-gpu -j16 --target ${BUILD_TARGETS:-fusetrack test_gpu builtin} >"$OUT/build.log" 2>&1 \
  || { grep -E -A5 "error" "$OUT/build.log" | head -40; exit 1; }
echo "== build ok ($(( $(date +%s) - t0 )) s)"
BIN=$ROOT/build-gpu/bin/fusetrack
source tools/device/study_inputs.sh
if [ "$MODE" = quick ]; then
  (cd build-gpu && ./bin/test_gpu -tc="variants*,DA scan*" 2>&1 | grep -E "MESSAGE|ERROR|test cases|assertions|variant") | tee "$OUT/test_gpu_variants.log"
  clic_seeds "$CLIC" 8
  for n in 1 8; do
    /usr/bin/time -f "wall %e s" $BIN da "$CLIC" $( [ $n -gt 1 ] && echo --variants build-gpu/clic_seeds8.json ) --turns 1000 \
      --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 --device gpu --no-plots -o build-gpu/study$n 2>&1 \
      | grep -E "study|DA scan|survivors|DA .smallest|DA min|wall" | tee -a "$OUT/study.log"
  done
  /usr/bin/time -f "wall %e s" $BIN da "$CLIC" --optimize --turns 1000 --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
    --device gpu --no-plots -o build-gpu/opt1 2>&1 | grep -E "optimized|survivors|DA min|wall" | tee -a "$OUT/study.log"
fi
if [ "$MODE" = full ]; then
  clic_seeds "$CLIC" 60
  echo "== CLIC, 60 seeds x 100 x 100 x 10^4 turns, one GPU" | tee "$OUT/study_clic.log"
  /usr/bin/time -f "study wall %e s" $BIN da "$CLIC" --variants build-gpu/clic_seeds60.json --turns 10000 --angles 100 \
    --amplitudes 100 --amplitude-range 0.0001 0.01 --checkpoint-every 2000 --device gpu --no-plots -o build-gpu/study_clic 2>&1 \
    | grep -vE "^progress|^ +[0-9]+ " | tail -16 | tee -a "$OUT/study_clic.log"
  [ "${ALONE:-1}" = 1 ] && echo "== CLIC, one scan alone (the same grid), one GPU" | tee -a "$OUT/study_clic.log" &&
  /usr/bin/time -f "alone wall %e s" $BIN da "$CLIC" --turns 10000 --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
    --checkpoint-every 2000 --device gpu --no-plots -o build-gpu/alone_clic 2>&1 | grep -E "survivors|DA min|wall" | tee -a "$OUT/study_clic.log"
  cp build-gpu/study_clic/summary.csv "$OUT/study_clic_summary.csv" 2>/dev/null
fi
if [ "$MODE" = lightsource ] || [[ " $* " == *" lightsource "* ]]; then
  # The light-source ring with 60 seeds (study_inputs.sh): GPU against all CPU cores, CPU 1 vs 16 threads.
  mba_seeds
  GRID="--angles 16 --amplitudes 31 --amplitude-range 0.0002 0.004"
  # LS_RUNS: "device turns threads" triples (default: the issue's runs and the thread scaling)
  IFS=';' read -ra LS_LIST <<< "${LS_RUNS:-gpu 1000 0;gpu 100 0;cpu 100 16;cpu 10 16;cpu 10 1}"
  for run in "${LS_LIST[@]}"; do
    set -- $run
    echo "== light-source ring, 60 seeds x 496 x $2 turns, device $1, threads $3" | tee -a "$OUT/lightsource.log"
    $BIN da build-gpu/mba_split.json --variants build-gpu/mba_seeds.json $GRID -n $2 --device $1 --threads $3 --no-plots \
      -o build-gpu/ls_$1_$2_$3 2>&1 | grep -E "^survivors|DA .smallest|^set-up|^tracking" | tee -a "$OUT/lightsource.log"
  done
  if [ -d .peers/trackcpp ] && [ "${TRACKCPP:-1}" = 1 ]; then
    DRIVER=.peers/bench_trackcpp/build-g++12.2.0-gsl/tc_driver
    tools/bench_trackcpp.sh .peers/trackcpp --fusetrack $BIN --turns 100 --repeats 1 --threads 16 --check-turns 0 \
      --jobs 16 --work build-gpu/bt $( [ -x $DRIVER ] && echo --driver $DRIVER ) 2>&1 | tail -12 | tee "$OUT/trackcpp.log"
  fi
fi
if [[ " $* " == *" twogpu "* ]]; then
  # CLIC, 60 seeds x 100 x 100 x TWO_TURNS turns on one GPU and on two (mpirun -np 2, one GPU per
  # rank), in one call; the two studies' da.npz compared byte for byte.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  TT=${TWO_TURNS:-1000}
  clic_seeds "$CLIC" 60
  for np in 1 2; do
    echo "== CLIC 60 seeds x 10^4 x $TT turns, $np GPU(s)" | tee -a "$OUT/twogpu.log"
    T0=$(date +%s%N)
    if [ $np = 1 ]; then
      CUDA_VISIBLE_DEVICES=0 $BIN da "$CLIC" --variants build-gpu/clic_seeds60.json --turns $TT --angles 100 --amplitudes 100 \
        --amplitude-range 0.0001 0.01 --device gpu --no-plots -o build-gpu/two$np > build-gpu/two$np.log 2>&1
    else
      mpirun -np 2 --bind-to none $BIN da "$CLIC" --variants build-gpu/clic_seeds60.json --turns $TT --angles 100 --amplitudes 100 \
        --amplitude-range 0.0001 0.01 --device gpu --no-plots -o build-gpu/two$np > build-gpu/two$np.log 2>&1
    fi
    echo "rc $? wall $(( ($(date +%s%N) - T0) / 1000000 )) ms" | tee -a "$OUT/twogpu.log"
    grep -E "^survivors|DA .smallest|tracking|set-up|setup|rank" build-gpu/two$np.log | head -8 | tee -a "$OUT/twogpu.log"
  done
  cmp build-gpu/two1/da.npz build-gpu/two2/da.npz && echo "da.npz 1 GPU == 2 GPUs byte for byte" | tee -a "$OUT/twogpu.log"
  if [ "${PARTS:-0}" = 1 ]; then
    # The same study as two job-array parts (contiguous halves: seeds 0-29 and 30-59), one per GPU at the
    # same time: each GPU's parameter tables are half of the ranks' (which hold every seed).
    echo "== CLIC 60 seeds x 10^4 x $TT turns, two parts (--part i/2) at once, one per GPU" | tee -a "$OUT/twogpu.log"
    for i in 0 1; do
      CUDA_VISIBLE_DEVICES=$i $BIN da "$CLIC" --variants build-gpu/clic_seeds60.json --turns $TT --angles 100 --amplitudes 100 \
        --amplitude-range 0.0001 0.01 --device gpu --no-plots --part $i/2 -o build-gpu/parts > build-gpu/part$i.log 2>&1 &
    done
    wait
    for i in 0 1; do grep -E "^survivors|tracking|set-up|part" build-gpu/part$i.log | head -5 | sed "s/^/part $i: /" | tee -a "$OUT/twogpu.log"; done
  fi
fi
if [[ " $* " == *" blocks "* ]]; then
  # Latency-bound scans on GPU 0: the lone CLIC scan (10^4 particles) and the light-source study
  # (29,760), for each "FIRST_CALL THREADS_PER_BLOCK" pair of RUN_LIST: FUSETRACK_DA_FIRST_CALL_TURNS
  # (16: compaction after 16, 32, 64, ... turns; 1000: every 1000 turns as before) and
  # FUSETRACK_THREADS_PER_BLOCK (0: the default). da.npz compared with the first run's byte for byte.
  export CUDA_VISIBLE_DEVICES=0
  DT=${DA_TURNS:-1000}
  mba_seeds
  IFS=';' read -ra RUNS <<< "${RUN_LIST:-1000 0;16 0;16 16;16 8}"
  first=""
  for run in "${RUNS[@]}"; do
    read -r fc tpb <<< "$run"
    tag=${fc}_$tpb
    echo "== first call $fc turns, threads per block $tpb (0: default)" | tee -a "$OUT/blocks.log"
    export FUSETRACK_DA_FIRST_CALL_TURNS=$fc FUSETRACK_THREADS_PER_BLOCK=$tpb
    $BIN da "$CLIC" --turns $DT --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
      --device gpu --no-plots -o build-gpu/blk_clic$tag 2>&1 | grep -E "^survivors|^tracking" | tee -a "$OUT/blocks.log"
    $BIN da build-gpu/mba_split.json --variants build-gpu/mba_seeds.json --angles 16 \
      --amplitudes 31 --amplitude-range 0.0002 0.004 -n ${LS_TURNS:-1000} --device gpu --no-plots -o build-gpu/blk_ls$tag 2>&1 \
      | grep -E "^tracking" | sed 's/^/light source: /' | tee -a "$OUT/blocks.log"
    unset FUSETRACK_DA_FIRST_CALL_TURNS FUSETRACK_THREADS_PER_BLOCK
    if [ -n "$first" ]; then
      cmp build-gpu/blk_clic$first/da.npz build-gpu/blk_clic$tag/da.npz && cmp build-gpu/blk_ls$first/da.npz build-gpu/blk_ls$tag/da.npz \
        && echo "da.npz identical to the first run's" | tee -a "$OUT/blocks.log"
    else first=$tag; fi
  done
  unset CUDA_VISIBLE_DEVICES
fi
echo "== total $(( $(date +%s) - t0 )) s"
