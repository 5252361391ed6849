#!/bin/bash
# Strong scaling of the three multi-GPU workloads on one host (1, 2 and 4 ranks, one GPU each), the whole
# commands and their parts, with the outputs of every rank count compared byte for byte:
#   collective  longitudinal_bench_ring with 10^4 slices (defaults otherwise), `track --matched 1e8`,
#               400 turns (and 4e8, 200 turns)
#   da          CLIC damping ring, 60 error seeds x 100 x 100, amplitudes 0.1-10 mm, 2000 turns
#   collider    lhc_like.json with 8 + 7 bunches of 4x10^6, 6 slices, 100 turns
# Run from the repository root on the GPU machine:
#   OUT=/tmp/out bash bench/multi_gpu/run.sh
# Settings (environment): WORKLOADS (default "collective da collider"), NPS (rank counts, default "1 2 4"),
# TESTS (a doctest filter of test_gpu cases to run first, default none), COLL_NPS, DA_NPS, COLLIDE_NPS (rank
# counts per workload), COLLIDE_SIZES (macroparticles per bunch, default 4e6), BASE=1 (also build .carry/base, an
# older tree, and run the same workloads with it: before/after from one machine), COLL_N, COLL_TURNS,
# DA_TURNS, COLLIDE_N (macroparticles per bunch), COLLIDE_TURNS, PHASES=1 (`fusetrack bench` on the
# collective ring too: one GPU's segment and solve times), EXCHANGE=0 (skip the MPI exchange microbenchmark),
# WEAK=1 (the DA study's weak scaling: 60 seeds on 1 rank against 60 WEAK_NP seeds on WEAK_NP ranks, default 4), DA_PPT (values of
# FUSETRACK_PARTICLES_PER_THREAD for the study, "default": unset), LONE_PPT (the same for the lone CLIC scan of
# 10^4 particles x LONE_TURNS turns; empty: not run). Needs .carry/deps (libzip, FFTW) and .carry/xsuite/clic_damping_ring.json.
# Prints one line per run (`result workload ranks tree seconds ...`) and appends them as JSON lines to
# $OUT/results.jsonl (device, commit, command, numbers).
set -u
OUT=${OUT:-/tmp/fusetrack-out}
mkdir -p "$OUT"
ROOT=$(pwd)
export CMAKE_PREFIX_PATH=$ROOT/.carry/deps/usr
export LD_LIBRARY_PATH=$ROOT/.carry/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORKLOADS=${WORKLOADS:-collective da collider}
NPS=${NPS:-1 2 4}
GPUS=$(nvidia-smi -L | wc -l)
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || cat .carry/commit 2>/dev/null || echo unknown)
echo "== $GPUS x $DEVICE, $(nproc) cores, commit $COMMIT; mpirun: $(command -v mpirun || echo none)"
command -v ompi_info >/dev/null && ompi_info --parsable --all 2>/dev/null | grep -E "mpi_built_with_cuda_support:value" | head -1

build_tree() {  # DIR TARGET...: configure and build the targets into DIR/build-gpu
  local dir=$1 t0=$SECONDS
  shift
  (cd "$dir" && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSETRACK_PYTHON=OFF >"$OUT/cmake_$(basename "$dir").log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target "$@" >"$OUT/build_$(basename "$dir").log" 2>&1) ||
    { grep -E -A5 "error" "$OUT/build_$(basename "$dir").log" | head -40; return 1; }
  echo "== built $dir ($((SECONDS - t0)) s)"
}
build_tree "$ROOT" fusetrack builtin merge_particle_set ${TESTS:+test_gpu} || exit 1
TREES="new"
if [ "${BASE:-0}" = 1 ] && [ -d .carry/base ]; then build_tree "$ROOT/.carry/base" fusetrack builtin merge_particle_set && TREES="base new"; fi
bin_of() { [ "$1" = base ] && echo "$ROOT/.carry/base/build-gpu/bin/fusetrack" || echo "$ROOT/build-gpu/bin/fusetrack"; }

# The exchanges alone (MPI_Allreduce and MPI_Sendrecv against the message size): the scaling model's parts.
if [ "${EXCHANGE:-1}" = 1 ] && command -v mpicxx >/dev/null; then
  mpicxx -O2 -DOMPI_SKIP_MPICXX -o build-gpu/exchange_latency bench/multi_gpu/exchange_latency.cpp &&
    for np in $NPS; do
      [ "$np" -gt 1 ] && mpirun -np "$np" --bind-to none build-gpu/exchange_latency | tee "$OUT/exchange_np$np.txt"
    done
fi

if [ -n "${TESTS:-}" ]; then
  (cd build-gpu && timeout 300 ./bin/test_gpu -tc="$TESTS" 2>&1 | grep -E "MESSAGE|ERROR|FAILED|TEST CASE|test cases|assertions" | tail -40) |
    tee "$OUT/test_gpu.log"
fi

record() {  # workload ranks tree seconds "extra json fields" command
  echo "result $1 np=$2 $3 $4 s $5" | tee -a "$OUT/summary.txt"
  printf '{"device": "%s x%s", "driver": "bench/multi_gpu/run.sh", "commit": "%s", "workload": "%s", "ranks": %s, "tree": "%s", "seconds": %s, %s "command": "%s", "date": "%s"}\n' \
    "$DEVICE" "$GPUS" "$COMMIT" "$1" "$2" "$3" "$4" "${5:+$5,}" "$6" "$(date -u +%FT%TZ)" >>"$OUT/results.jsonl"
}
launch() {  # np command...: one rank without mpirun, else mpirun -np N (one GPU per node-local rank)
  local np=$1
  shift
  if [ "$np" = 1 ]; then CUDA_VISIBLE_DEVICES=0 "$@"; else mpirun -np "$np" --bind-to none "$@"; fi
}
wall_ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

# ---- collective --------------------------------------------------------------------------------------
if [[ " $WORKLOADS " == *" collective "* ]]; then
  RING10K=$ROOT/build-gpu/ring_10k_slices.json
  sed 's/"n_slices": *[0-9]*/"n_slices": 10000/' lattices/longitudinal_bench_ring.json >"$RING10K"
  for tree in $TREES; do
    BIN=$(bin_of $tree)
    export FUSETRACK_KERNEL_CACHE=$(dirname "$(dirname "$BIN")")/kernel-cache
    $BIN track "$RING10K" -n 2 --matched 1e6 --sigma-zeta 2 --device gpu >/dev/null 2>&1  # kernel cache
    for size in "${COLL_N:-1e8} ${COLL_TURNS:-400}" "4e8 200"; do
      set -- $size
      for np in ${COLL_NPS:-$NPS}; do
        [ "$np" -gt "$GPUS" ] && continue
        log=$OUT/coll_${tree}_$1_np$np.log
        cmd="track ring_10k_slices.json -n $2 --matched $1 --sigma-zeta 2 --device gpu"
        t0=$(date +%s%N)
        launch "$np" "$BIN" track "$RING10K" -n "$2" --matched "$1" --sigma-zeta 2 --device gpu >"$log" 2>&1 || tail -3 "$log"
        w=$(wall_ms "$t0")
        kernels=$(grep -oE "kernels [0-9.]+ s" "$log" | head -1 | awk '{print $2}')
        reduce=$(grep -E "^mpi" "$log" | grep -oE ": [0-9.e+-]+ s" | head -1 | grep -oE "[0-9.e+-]+")
        grep -E "^(breakdown|mpi|time|collective)" "$log" | head -6 | sed 's/^/    /'
        record collective_$1 "$np" "$tree" "${kernels:-nan}" "\"particles\": \"$1\", \"turns\": $2, \"wall_ms\": $w, \"reduce_seconds\": \"${reduce:-}\"" "$cmd"
      done
    done
    # One GPU's segment and solve times (device events, a synchronisation per turn in the timed run).
    [ "${PHASES:-0}" = 1 ] && CUDA_VISIBLE_DEVICES=0 $BIN bench "$RING10K" --collective-particles "${COLL_N:-1e8}" --gpu-turns 20 2>&1 |
      tee "$OUT/coll_bench_$tree.log" | tail -4 | sed 's/^/    /'
    # Byte identity of the outputs for every rank count (10^6 particles, 50 turns).
    for np in $NPS; do
      [ "$np" -gt "$GPUS" ] && continue
      launch "$np" "$BIN" track "$RING10K" -n 50 --matched 1e6 --sigma-zeta 2 --device gpu -o "$ROOT/build-gpu/coll_$tree$np.npz" >/dev/null 2>&1
      [ -d "$ROOT/build-gpu/coll_$tree$np.npz.d" ] &&
        "$(dirname "$BIN")/merge_particle_set" "$ROOT/build-gpu/coll_$tree$np.npz" "$ROOT/build-gpu/coll_$tree${np}m.npz" >/dev/null 2>&1 &&
        mv "$ROOT/build-gpu/coll_$tree${np}m.npz" "$ROOT/build-gpu/coll_$tree$np.npz"
      cmp -s "$ROOT/build-gpu/coll_${tree}1.npz" "$ROOT/build-gpu/coll_$tree$np.npz" &&
        echo "identical: collective $tree, $np ranks == 1 rank" | tee -a "$OUT/summary.txt" ||
        echo "DIFFERENT: collective $tree, $np ranks" | tee -a "$OUT/summary.txt"
    done
  done
fi

# ---- DA study ----------------------------------------------------------------------------------------
if [[ " $WORKLOADS " == *" da "* ]]; then
  CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
  for tree in $TREES; do
    BIN=$(bin_of $tree)
    export FUSETRACK_KERNEL_CACHE=$(dirname "$(dirname "$BIN")")/kernel-cache
    mkdir -p "$ROOT/build-gpu/da"
    [ -f "$ROOT/build-gpu/da/clic_seeds60.json" ] ||
      printf '{"fusetrack_error_table": 1, "cut": 3.0, "entries": [{"match": ".*", "type": "Multipole", "random": {"dkn": [0, 0, 2e-2], "dks": [0, 0, 2e-2], "dx": 5e-6, "dy": 5e-6, "dpsi": 2e-5}}]}\n' >"$ROOT/build-gpu/da/clic_errors.json" &&
      $BIN errors "$CLIC" --table "$ROOT/build-gpu/da/clic_errors.json" --seeds 60 -o "$ROOT/build-gpu/da/clic_seeds60.json" >/dev/null
    for ppt in ${DA_PPT:-default}; do
    if [ "$ppt" = default ]; then unset FUSETRACK_PARTICLES_PER_THREAD; else export FUSETRACK_PARTICLES_PER_THREAD=$ppt; fi
    for np in ${DA_NPS:-$NPS}; do
      [ "$np" -gt "$GPUS" ] && continue
      log=$OUT/da_${tree}_k${ppt}_np$np.log
      cmd="da clic_damping_ring.json --variants clic_seeds60.json --turns ${DA_TURNS:-2000} --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 --device gpu"
      t0=$(date +%s%N)
      launch "$np" "$BIN" da "$CLIC" --variants "$ROOT/build-gpu/da/clic_seeds60.json" --turns "${DA_TURNS:-2000}" --angles 100 \
        --amplitudes 100 --amplitude-range 0.0001 0.01 --device gpu --no-plots -o "$ROOT/build-gpu/da/${tree}_np$np" >"$log" 2>&1 || tail -3 "$log"
      w=$(wall_ms "$t0")
      tracking=$(grep -oE "tracking: [0-9.]+ s" "$log" | head -1 | awk '{print $2}')
      grep -E "^(survivors|time|breakdown|tracking|rank)" "$log" | head -5 | sed 's/^/    /'
      record da "$np" "$tree" "${tracking:-nan}" "\"particles_per_thread\": \"$ppt\", \"turns\": ${DA_TURNS:-2000}, \"wall_ms\": $w" "$cmd"
      rm -rf "$ROOT/build-gpu/da/${tree}_k${ppt}_np$np"
      mv "$ROOT/build-gpu/da/${tree}_np$np" "$ROOT/build-gpu/da/${tree}_k${ppt}_np$np"
      first=$(ls -d "$ROOT"/build-gpu/da/${tree}_k*_np* | head -1)
      cmp -s "$first/da.npz" "$ROOT/build-gpu/da/${tree}_k${ppt}_np$np/da.npz" &&
        echo "identical: da $tree k=$ppt, $np ranks == $(basename "$first")" | tee -a "$OUT/summary.txt" ||
        echo "DIFFERENT: da $tree k=$ppt, $np ranks against $(basename "$first")" | tee -a "$OUT/summary.txt"
    done
    done
    unset FUSETRACK_PARTICLES_PER_THREAD
    # The lone scan (10^4 particles, 10^4 turns, one GPU), latency-bound.
    for ppt in ${LONE_PPT:-}; do
      if [ "$ppt" = default ]; then unset FUSETRACK_PARTICLES_PER_THREAD; else export FUSETRACK_PARTICLES_PER_THREAD=$ppt; fi
      log=$OUT/lone_${tree}_k$ppt.log
      CUDA_VISIBLE_DEVICES=0 timeout 120 "$BIN" da "$CLIC" --turns ${LONE_TURNS:-10000} --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
        --device gpu --no-plots -o "$ROOT/build-gpu/da/lone_${tree}_k$ppt" >"$log" 2>&1 || tail -3 "$log"
      tracking=$(grep -oE "tracking: [0-9.]+ s" "$log" | head -1 | awk '{print $2}')
      grep -E "^(survivors|tracking)" "$log" | sed 's/^/    /'
      record da_lone_scan 1 "$tree" "${tracking:-nan}" "\"particles_per_thread\": \"$ppt\", \"turns\": ${LONE_TURNS:-10000}" "da clic_damping_ring.json --turns ${LONE_TURNS:-10000} --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 --device gpu"
      cmp -s "$ROOT/build-gpu/da/lone_${tree}_k$(echo $LONE_PPT | awk '{print $1}')/da.npz" "$ROOT/build-gpu/da/lone_${tree}_k$ppt/da.npz" &&
        echo "identical: lone scan k=$ppt" | tee -a "$OUT/summary.txt" || echo "DIFFERENT: lone scan k=$ppt" | tee -a "$OUT/summary.txt"
    done
    unset FUSETRACK_PARTICLES_PER_THREAD
    WNP=${WEAK_NP:-4}
    if [ "${WEAK:-0}" = 1 ] && [ "$GPUS" -ge "$WNP" ]; then  # WNP x the seeds on WNP ranks against 1 x on 1 rank
      SEEDS=$((60 * WNP))
      [ -f "$ROOT/build-gpu/da/clic_seeds$SEEDS.json" ] ||
        $BIN errors "$CLIC" --table "$ROOT/build-gpu/da/clic_errors.json" --seeds $SEEDS -o "$ROOT/build-gpu/da/clic_seeds$SEEDS.json" >/dev/null
      log=$OUT/da_weak_${tree}_np$WNP.log
      t0=$(date +%s%N)
      launch "$WNP" "$BIN" da "$CLIC" --variants "$ROOT/build-gpu/da/clic_seeds$SEEDS.json" --turns "${DA_TURNS:-2000}" --angles 100 \
        --amplitudes 100 --amplitude-range 0.0001 0.01 --device gpu --no-plots -o "$ROOT/build-gpu/da/weak_${tree}" >"$log" 2>&1 || tail -3 "$log"
      w=$(wall_ms "$t0")
      tracking=$(grep -oE "tracking: [0-9.]+ s" "$log" | head -1 | awk '{print $2}')
      grep -E "^(survivors|tracking)" "$log" | head -4 | sed 's/^/    /'
      record da_weak_${SEEDS}_seeds "$WNP" "$tree" "${tracking:-nan}" "\"turns\": ${DA_TURNS:-2000}, \"wall_ms\": $w" "da ... --variants clic_seeds$SEEDS.json ($WNP ranks)"
    fi
  done
fi

# ---- collider ----------------------------------------------------------------------------------------
if [[ " $WORKLOADS " == *" collider "* ]]; then
  for size in ${COLLIDE_SIZES:-4e6}; do
    python3 - "$size" <<'PY'
import json, sys
d = json.load(open("lattices/colliders/lhc_like.json"))
for b, count in zip(d["beams"], (8, 7)):
    b["bunches"]["count"] = count
    b["bunches"]["macroparticles"] = int(float(sys.argv[1]))
d["ip"]["slices"] = 6
json.dump(d, open("build-gpu/collide_8_7_%s.json" % sys.argv[1], "w"))
PY
    for tree in $TREES; do
      BIN=$(bin_of $tree)
      export FUSETRACK_KERNEL_CACHE=$(dirname "$(dirname "$BIN")")/kernel-cache
      # The kernel cache first (the collider module's NVRTC compilation is not part of the benchmark).
      CUDA_VISIBLE_DEVICES=0 "$BIN" collide lattices/colliders/lhc_like.json -n 1 --device gpu --no-plot >/dev/null 2>&1
      for np in ${COLLIDE_NPS:-$NPS}; do
        [ "$np" -gt "$GPUS" ] && continue
        name=collide_${tree}_${size}_np$np
        log=$OUT/$name.log
        cmd="collide collide_8_7.json (8 + 7 bunches of $size, 6 slices) -n ${COLLIDE_TURNS:-100} --device gpu ${COLLIDE_OPTS:-}"
        t0=$(date +%s%N)
        launch "$np" "$BIN" collide "$ROOT/build-gpu/collide_8_7_$size.json" -n "${COLLIDE_TURNS:-100}" --device gpu --no-plot \
          ${COLLIDE_OPTS:-} -o "$ROOT/build-gpu/$name" >"$log" 2>&1 || tail -3 "$log"
        w=$(wall_ms "$t0")
        grep -E "time|kernel|exchange|check|ranks for" "$log" | head -5 | sed 's/^/    /'
        nums=$(python3 -c "
import json; s = json.load(open('$ROOT/build-gpu/$name/summary.json')); t = s.get('seconds', {})
print(t.get('total', 'nan'), t.get('gpu_kernels', 'nan'), t.get('exchange', 'nan'))" 2>/dev/null)
        set -- $nums
        record collider_$size "$np" "$tree" "${1:-nan}" "\"gpu_kernel_seconds\": \"${2:-}\", \"exchange_seconds\": \"${3:-}\", \"wall_ms\": $w" "$cmd"
        first=$(echo ${COLLIDE_NPS:-$NPS} | awk '{print $1}')
        cmp -s "$ROOT/build-gpu/collide_${tree}_${size}_np$first/bunches.csv" "$ROOT/build-gpu/$name/bunches.csv" &&
          echo "identical: collider $tree $size, $np ranks == $first" | tee -a "$OUT/summary.txt" ||
          echo "DIFFERENT: collider $tree $size, $np ranks" | tee -a "$OUT/summary.txt"
        cp "$ROOT/build-gpu/$name/summary.json" "$OUT/$name.summary.json" 2>/dev/null
      done
    done
  done
fi
echo "== summary"
cat "$OUT/summary.txt"
