#!/bin/bash
# On the GPU machine: where the warps of the latency-bound switch kernel stall, per SASS instruction.
#   OUT=/tmp/out bash tools/device/stall_profile.sh [profile] [lone]   (needs .carry/deps and .carry/xsuite)
#   profile: Nsight Compute's source counters (stall reasons per instruction) on `fusetrack track` of CLIC with
#            --optimize, for each grid size of STALL_GRIDS (n x n particles; 56: the lone scan's tail of about
#            3,100 survivors, 270: about 73,000, one GPU's share of the two-GPU study); the per-instruction table
#            as CSV in $OUT/stall_N.csv, the kernel's summary in $OUT/stall_N.txt; N = ls: the light-source
#            study's kernel (60 seeds x 22 x 22 particles)
#   lone:    the lone CLIC scan 100x100 x 10^4 turns with --optimize, for each fma mode of LONE_FMA
set -u
source tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin || exit 1  # (the report files stay in build-gpu: $OUT returns few files)
BIN=$ROOT/build-gpu/bin/fusetrack
CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
has() { [[ " $MODES " == *" $1 "* ]]; }
MODES=" $* "
if has profile; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "ncu: ${NCU:-none}"
  source tools/device/study_inputs.sh
  for n in ${STALL_GRIDS:-56 270}; do
    ARGS="$CLIC --optimize --grid 1e-5 1e-4 $n 1e-5 1e-4 $n --device gpu --fma off"
    if [ "$n" = ls ]; then  # the light-source study's kernel: 60 seeds x 22 x 22 particles
      mba_seeds
      ARGS="build-gpu/mba_split.json --variants build-gpu/mba_seeds.json --grid 2e-4 2e-3 22 2e-4 2e-3 22 --device gpu --fma off"
    fi
    $BIN track $ARGS -n 1 >/dev/null 2>&1  # the kernel compiled and cached
    timeout 200 $NCU --clock-control none -k regex:fusetrack_track -c 1 --import-source no \
      --section LaunchStats --section Occupancy --section WarpStateStats --section SourceCounters --section SchedulerStats \
      -f -o "build-gpu/stall_$n" $BIN track $ARGS -n ${STALL_TURNS:-3} > build-gpu/stall_${n}_run.log 2>&1
    tail -3 build-gpu/stall_${n}_run.log
    $NCU -i "build-gpu/stall_$n.ncu-rep" --page details > "$OUT/stall_$n.txt" 2>&1
    $NCU -i "build-gpu/stall_$n.ncu-rep" --page source --csv --print-source sass > "$OUT/stall_$n.csv" 2>&1
    grep -E "Duration|Registers Per|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall|Achieved Occupancy" "$OUT/stall_$n.txt" | head -20
    wc -c "$OUT/stall_$n.csv"
  done
fi
if has lone; then
  GRID="--angles 100 --amplitudes 100 --amplitude-range 0.0001 0.01"
  for fma in ${LONE_FMA:-off on}; do
    echo "== CLIC lone scan --optimize, 100x100 x 10^4 turns, fma $fma" | tee -a "$OUT/lone.log"
    /usr/bin/time -f "wall %e s" $BIN da "$CLIC" --optimize --turns 10000 $GRID --device gpu --fma $fma --no-plots \
      -o build-gpu/lone_$fma 2>&1 | grep -E "optimiz|^survivors|DA .smallest|^tracking|wall" | tee -a "$OUT/lone.log"
  done
fi
