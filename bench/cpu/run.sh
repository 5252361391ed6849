#!/bin/bash
# CPU driver: the CPU backend per core and across cores on a DA-like workload (the light-source ring, 496
# initial conditions of `fusetrack da`, TURNS turns, default 1000; 1 thread and all), lattice loading (time and
# peak memory for 10^4..10^6 elements, and the Xsuite import of the CLIC ring where ../shared holds it), and,
# where .peers/trackcpp holds trackcpp's sources, fusetrack against trackcpp per core on the same ring.
# Any machine (no GPU needed); the build in BUILD_DIR (default build/, configured and built when absent).
#   bash bench/cpu/run.sh        (REPEAT: best of, default 3; SIZES: element counts of the loading benchmark)
# Appends one line to bench/cpu/results.jsonl (and $OUT/results.jsonl when OUT is set).
set -u
cd "$(dirname "$0")/../.."
TOPIC=cpu
DRIVER_ARGS="$*"
source bench/common/driver.sh
BUILD=${BUILD_DIR:-build}
BIN=$ROOT/$BUILD/bin/fusetrack
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
fi
cmake --build "$BUILD" -j"$(nproc)" --target fusetrack builtin >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
step cpu_throughput da_throughput bash bench/cpu/da_throughput_per_core.sh --build "$BUILD" --turns "${TURNS:-1000}" \
  --threads "1 $(nproc)" --repeat "${REPEAT:-3}"
step loading lattice_loading python3 bench/cpu/lattice_loading.py --fusetrack "$BIN" --sizes ${SIZES:-10000 100000 1000000} \
  --repeat "${REPEAT:-3}"
if [ -d .peers/trackcpp ]; then
  step lines against_trackcpp bash bench/cpu/against_trackcpp.sh .peers/trackcpp --fusetrack "$BIN" --turns "${TURNS:-1000}"
fi
record
