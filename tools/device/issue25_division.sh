#!/bin/bash
# One GPU, one call: the collective bench with the divisions by beta0 as Markstein's corrected products and
# the cosine kernel's exact square by fma (fusetrack/device/invariant_division.h, portable_math.h),
# against a baseline tree built in the same call.
#   BASE=path/to/baseline/tree OUT=/tmp/out bash tools/device/issue25_division.sh   (needs .carry/deps)
# 1. builds this tree (build-gpu/) and BASE (build-base/, its own kernel cache);
# 2. the SASS of the longitudinal-only ring's wrap kernel in both: registers and instruction counts;
# 3. the collective bench at 10^8 (longitudinal-only ring, the issue's FFT size), this tree and BASE in turn,
#    ROUNDS times (fma off and on in each);
# 4. GPU tests (bitwise against the CPU, TEST_FILTER) in the time left, or before the benches with TESTS=first.
set -u
source tools/device/device_env.sh
t0=$SECONDS
device_start || exit 1
BASE=${BASE:-}
if [ -n "$BASE" ]; then
  t=$SECONDS
  (cd "$BASE" && cmake -S . -B "$ROOT/build-base" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake-base.log" 2>&1 &&
    cmake --build "$ROOT/build-base" -j"$(nproc)" --target fusetrack builtin >"$OUT/build-base.log" 2>&1) ||
    { tail -30 "$OUT/build-base.log"; exit 1; }
  echo "== baseline build ok ($((SECONDS - t)) s)"
fi
run_tests() {
  TEST_FILTER=${TEST_FILTER:-"collective fma=off: CPU*,collective fma=off: a longitudinal*,collective fma=off at scale*,bunch train on the GPU: 4*,transverse wake and damper on the GPU: fma off*,matched bunch made on the device and tracked*"}
  timeout $((590 - SECONDS)) build-gpu/bin/test_gpu -tc="$TEST_FILTER" 2>&1 |
    grep -E "MESSAGE|test cases|assertions|ERROR|FAILED|TEST CASE" | tee "$OUT/tests.log" | tail -25
}
[ "${TESTS:-1}" = first ] && run_tests
FFT=(--set impedance.frequency_resolution=5.6e6)
sass_counts() {  # $1: fusetrack binary, $2: kernel cache, $3: label
  local dir=$ROOT/build-gpu/codegen-$3
  FUSETRACK_KERNEL_CACHE=$2 $1 codegen lattices/longitudinal_only_bench_ring.json --fma off -o "$dir" 2>&1 |
    grep -E "segment_wrap|segment_1 " | sed "s/^/$3 /" | tee -a "$OUT/sass.log"
  if command -v cuobjdump >/dev/null; then
    cuobjdump -sass -fun fusetrack_segment_wrap "$dir/fusetrack_collective.cubin" >"$dir/wrap.sass" 2>&1
    echo "$3 wrap SASS: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$dir/wrap.sass") instructions, FP64:" \
      "$(grep -oE '\b(DADD|DMUL|DFMA|DSETP|MUFU\.RCP64H|MUFU\.RSQ64H)\b' "$dir/wrap.sass" | sort | uniq -c | tr '\n' ' ')" |
      tee -a "$OUT/sass.log"
  fi
}
sass_counts "$BIN" "$FUSETRACK_KERNEL_CACHE" new
[ -n "$BASE" ] && sass_counts "$ROOT/build-base/bin/fusetrack" "$ROOT/build-base/kernel-cache" base
bench() {  # $1: label, $2: fusetrack binary, $3: kernel cache
  echo "== bench $1" | tee -a "$OUT/bench.log"
  FUSETRACK_KERNEL_CACHE=$3 timeout $((590 - SECONDS)) stdbuf -oL "$2" bench lattices/longitudinal_only_bench_ring.json \
    --slices 1000 --gpu-turns 40 -N 20000 -n 5 "${FFT[@]}" --collective-particles ${NP:-1e8} 2>&1 |
    grep -v "^LongitudinalImpedance" | tee -a "$OUT/bench.log" | grep -E "^lattices|single-particle" | tail -8
}
for round in $(seq "${ROUNDS:-1}"); do
  bench "new, round $round" "$BIN" "$FUSETRACK_KERNEL_CACHE"
  [ -n "$BASE" ] && bench "base, round $round" "$ROOT/build-base/bin/fusetrack" "$ROOT/build-base/kernel-cache"
done
[ "${TESTS:-1}" = 1 ] && [ $((SECONDS - t0)) -lt 520 ] && run_tests
echo "== total $((SECONDS - t0)) s"
