#!/bin/bash
# Runs on the GPU machine (see bench/RESULTS.md): builds fusetrack, then runs the stages named
# on the command line, writing logs and numbers to $OUT:
#   build      configure and build (Release) into build-gpu/
#   tests      the whole CTest suite, GPU tests included
#   repro      fusetrack repro on every bundled lattice, fma off and on
#   bench      fusetrack bench (CPU threads, fused vs per-element, fma off/on, 1e4..1e7 particles)
#   reference  ../shared/reference/run.sh (carried in .carry/reference) on the same device
#   ncu        FP64 pipe utilisation of the fused kernel; register/spill report and SASS
#   clic       CLIC damping ring (Xsuite import): repro fma off, GPU throughput 1e5/1e6, compile times
#   latency    CPU core probe, 800 vs 10^6 particles per dispatch form, CLIC DA per dispatch
#   da         DA benchmark: CLIC 100 angles x 100 amplitudes, 10^4 turns, GPU; CPU rate on 100 turns
#   collective collective effects: GPU tests at full size (10^6 x 1000 turns bitwise), repro of the
#              bundled impedance lattice, the collective bench (10^6..10^8 macroparticles, 1000 and
#              10^4 slices, fma off/on, time split, bandwidth fraction)
# Needs .carry/ (libzip, the reference kernel) carried with the call.
set -u
source tools/device/device_env.sh
# Real lattices: ../shared does not travel; a copy is carried in .carry/xsuite.
XSUITE=$ROOT/.carry/xsuite
mkdir -p "$ROOT/../shared/lattices" && ln -sfn "$XSUITE" "$ROOT/../shared/lattices/xsuite" 2>/dev/null || true
BIN=$ROOT/build-gpu/bin/fusetrack
stages="$*"
has() { [[ " $stages " == *" $1 "* ]]; }

if has build; then
  bash tools/device/refresh_sources.sh || true  # 1: sources changed, all touched
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 \
    || { tail -40 "$OUT/cmake.log"; exit 1; }
  cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { grep -E -A5 "error" "$OUT/build.log" | head -60; exit 1; }
  echo "== build ok"
fi
if has tests; then
  (cd build-gpu && ctest -j4 --output-on-failure) >"$OUT/tests.log" 2>&1
  grep -E "tests passed|tests failed|\*\*\*Failed" "$OUT/tests.log"
  tail -25 "$OUT/tests.log"
  (cd build-gpu && ./bin/test_gpu -s 2>&1 | grep -E "MESSAGE|bitwise|TEST CASE" | head -80) >>"$OUT/tests.log" 2>&1
fi
if has repro; then
  for f in lattices/*.json; do
    for fma in off on; do
      $BIN repro "$f" --fma $fma -N 10000 -n 1000 --amplitude 0.03 2>&1 | tee -a "$OUT/repro.log" | grep -E "repro|bitwise|max ULP|result|diverges"
    done
  done
fi
if has bench; then
  $BIN bench lattices/reference_sequence.json lattices/sextupole_rf_ring.json -N 65536 -n 10 --gpu-turns 20 2>&1 | tee "$OUT/bench.log"
fi
if has reference; then
  bash .carry/reference/run.sh 1048576 100 2>&1 | tee -a "$OUT/bench.log"
fi
if has ncu; then
  rm -rf "$OUT/dump"
  FUSETRACK_DUMP_SOURCE=$ROOT/build-gpu/dump $BIN bench lattices/reference_sequence.json --device gpu -N 1024 -n 1 \
    --gpu-particles 1048576 --gpu-turns 10 --no-per-element >/dev/null 2>&1
  for d in build-gpu/dump/*/; do
    echo "== $d" ; cuobjdump -res-usage "$d/fusetrack_fused.cubin" 2>&1 | grep -E "REG|STACK|LOCAL" | head -3
  done | tee "$OUT/resources.log"
  cuobjdump -sass build-gpu/dump/baked_fma_off/fusetrack_fused.cubin > "$OUT/sass_baked_fma_off.txt" 2>&1
  grep -c -E "DFMA|DMUL|DADD" "$OUT/sass_baked_fma_off.txt" | sed 's/^/fp64 instructions in baked fma=off SASS: /'
  ncu --metrics sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__warps_active.avg.pct_of_peak_sustained_active \
    --kernel-name fusetrack_track --launch-count 4 \
    $BIN bench lattices/reference_sequence.json --device gpu -N 1024 -n 1 --gpu-particles 1048576 --gpu-turns 10 \
    --no-per-element 2>&1 | tee "$OUT/ncu.log" | grep -E "fusetrack_track|pipe_fp64|throughput|warps_active"
fi
if has switchbench; then
  $BIN bench lattices/reference_sequence.json .carry/xsuite/clic_damping_ring.json -N 4096 -n 2 --thread-counts 16 \
    --gpu-particles 1000000 --gpu-turns 10 --no-per-element 2>&1 | grep -E "switch|auto" | tee "$OUT/switch_bench.log"
fi
if has clic; then
  CLIC=$XSUITE/clic_damping_ring.json
  rm -rf build-gpu/cache-clic
  for i in 1 2; do  # first uncached, then cached
    /usr/bin/time -f "wall %e s" $BIN repro "$CLIC" --fma off -N 2048 -n 200 --amplitude 0.002 \
      --kernel-cache build-gpu/cache-clic 2>&1 | tee -a "$OUT/clic_repro.log" | grep -E "repro|bitwise|ULP|result|diverges|time|wall"
  done
  $BIN bench "$CLIC" -N 4096 -n 2 --gpu-particles 100000 1000000 --gpu-turns 10 --no-per-element 2>&1 | tee "$OUT/clic_bench.log"
fi
if has clicbench; then
  $BIN bench $XSUITE/clic_damping_ring.json -N 4096 -n 2 --gpu-particles 100000 1000000 --gpu-turns 10 \
    --no-per-element 2>&1 | grep -E "cpu|auto" | tee "$OUT/clic_bench.log"
fi
if has collective; then
  COLL=${COLLECTIVE_LATTICE:-lattices/ps_injection_longitudinal.json}
  (cd build-gpu && FUSETRACK_GPU_FULL=1 ./bin/test_gpu -tc="collective*" -s 2>&1 | grep -E "MESSAGE|TEST CASE|ERROR|passed|failed" | head -60) \
    | tee "$OUT/collective_tests.log"
  for fma in off on; do
    $BIN repro "$COLL" --fma $fma -N 20000 -n 1000 2>&1 | tee -a "$OUT/collective_repro.log" \
      | grep -E "repro|bitwise|collective|result|time"
  done
  # The memory-bound short ring: both solve methods, 1000 and 10^4 slices, 10^6..10^8 macroparticles.
  BENCH=lattices/longitudinal_bench_ring.json
  $BIN bench $BENCH --slices 1000 10000 --collective-particles 1e6 1e7 1e8 --gpu-turns 20 2>&1 \
    | tee "$OUT/collective_bench.log"
  sed 's/"method": "frequency"/"method": "time"/' $BENCH > build-gpu/longitudinal_bench_ring_time.json
  $BIN bench build-gpu/longitudinal_bench_ring_time.json --slices 1000 10000 --collective-particles 1e6 1e7 --gpu-turns 20 2>&1 \
    | tee "$OUT/collective_bench_time.log"
  # The PS example (about 250 elements per turn: compute-bound segments).
  $BIN bench "$COLL" --collective-particles 1e6 1e7 --gpu-turns 20 2>&1 | tee "$OUT/collective_bench_ps.log"
fi
if has mpi2; then
  # Two GPUs of one host (nvidia-h200-x2): the CLIC DA scan and a 10^8-macroparticle collective run on
  # 1 rank and on 2 ranks (one GPU each), wall times, and byte comparison of the outputs.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  (mpirun --version | head -1; nvidia-smi -L) | tee "$OUT/mpi2.log"
  grep -E "MPI" build-gpu/CMakeCache.txt | grep -E "MPI_CXX_FOUND|MPI_CXX_COMPILER:" | tee -a "$OUT/mpi2.log"
  CLIC=$XSUITE/clic_damping_ring.json
  for np in 1 2; do
    t0=$(date +%s%N)
    mpirun -np $np --bind-to none $BIN da "$CLIC" --turns ${MPI2_DA_TURNS:-10000} --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
      --checkpoint-every 2000 --device gpu --no-plots -o build-gpu/da_np$np 2>&1 | grep -E "DA scan|survivors|DA min" | tee -a "$OUT/mpi2.log"
    t1=$(date +%s%N)
    echo "da np=$np wall $(( (t1 - t0) / 1000000 )) ms" | tee -a "$OUT/mpi2.log"
  done
  for f in da.npz summary.json summary.csv; do cmp build-gpu/da_np1/$f build-gpu/da_np2/$f && echo "da $f: 1 GPU == 2 GPUs (bytes)"; done | tee -a "$OUT/mpi2.log"
  BENCH=lattices/longitudinal_bench_ring.json
  sed 's/"n_slices": 1000/"n_slices": 10000/' $BENCH > build-gpu/ring_1e4.json
  # warm the kernel cache (NVRTC) so that neither run below pays the compile
  $BIN track build-gpu/ring_1e4.json -n 2 --matched 100000 --sigma-zeta 2 --device gpu >/dev/null 2>&1
  for np in 1 2; do
    t0=$(date +%s%N)
    mpirun -np $np --bind-to none $BIN track build-gpu/ring_1e4.json -n ${MPI2_TURNS:-200} --matched ${MPI2_PARTICLES:-100000000} --sigma-zeta 2 \
      --device gpu -o build-gpu/coll_np$np.npz 2>&1 | grep -E "backend|mpi|time|particles|collective" | tee -a "$OUT/mpi2.log"
    t1=$(date +%s%N)
    echo "collective np=$np wall $(( (t1 - t0) / 1000000 )) ms (generation, tracking, gather, writing)" | tee -a "$OUT/mpi2.log"
  done
  cmp build-gpu/coll_np1.npz build-gpu/coll_np2.npz && echo "collective output: 1 GPU == 2 GPUs (bytes)" | tee -a "$OUT/mpi2.log"
fi
if has latency; then
  # The latency-bound regime (few particles, long lattices) and the CPU's real core count.
  (nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA") | tee "$OUT/latency.log"
  cc -O2 -fopenmp tools/device/cpu_scaling_probe.c -o build-gpu/cpu_scaling_probe && ./build-gpu/cpu_scaling_probe | tee -a "$OUT/latency.log"
  $BIN bench lattices/thin_collider_12k.json $XSUITE/clic_damping_ring.json -N 4096 -n 1 --thread-counts 16 \
    --gpu-particles 800 1000000 --gpu-turns 4 --no-per-element 2>&1 | grep -E "fused|kernel" | tee -a "$OUT/latency.log"
  CLIC=$XSUITE/clic_damping_ring.json
  LT=${LATENCY_DA_TURNS:-2000}
  for v in ${LATENCY_VARIANTS:-switch staged}; do
    d=${v%%:*}; la=${v#*:}; [ "$la" = "$v" ] && la=""
    t0=$(date +%s%N)
    FUSETRACK_LOOKAHEAD=$la $BIN da "$CLIC" --turns $LT --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
      --dispatch $d --device gpu --no-plots -o build-gpu/da_lat_${d}_${la} >/dev/null 2>&1
    t1=$(date +%s%N)
    echo "CLIC DA 100x100 $LT turns, dispatch $v: wall $(( (t1 - t0) / 1000000 )) ms" | tee -a "$OUT/latency.log"
    cmp build-gpu/da_lat_switch_/da.npz build-gpu/da_lat_${d}_${la}/da.npz && echo "  da.npz identical to switch" | tee -a "$OUT/latency.log"
  done
fi
if has da; then
  CLIC=$XSUITE/clic_damping_ring.json
  /usr/bin/time -f "da wall %e s" $BIN da "$CLIC" --turns 10000 --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
    --checkpoint-every 2000 --device gpu -o build-gpu/da_clic_gpu 2>&1 | grep -E "DA scan|survivors|DA min|plots|wall" | tee "$OUT/da.log"
  $BIN da "$CLIC" --turns 100 --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
    --device cpu -o build-gpu/da_clic_cpu --no-plots 2>&1 | grep -E "DA scan|survivors" | tee -a "$OUT/da.log"
  $BIN da "$CLIC" --turns 100 --angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01 \
    --device gpu -o build-gpu/da_clic_gpu100 --no-plots 2>&1 | grep -E "DA scan|survivors" | tee -a "$OUT/da.log"
  cp build-gpu/da_clic_gpu/*.png "$OUT/" 2>/dev/null
fi
