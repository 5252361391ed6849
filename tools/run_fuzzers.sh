#!/bin/bash
# Runs every libFuzzer target of a sanitizer build for a bounded time, in parallel, and fails on any
# crash, sanitizer report, leak, timeout or out-of-memory. The kept corpus (tests/fuzz/corpus/NAME)
# seeds each run; new inputs go to a scratch copy, not into the repository.
#   tools/run_fuzzers.sh BUILD_DIR [SECONDS_PER_TARGET] [JOBS]
# A crash leaves its input in BUILD_DIR/fuzz-artifacts/NAME/: add it to tests/fuzz/corpus/NAME/ as
# crash-<what> (the corpus replay in CTest is then its regression test) and fix the bug.
set -uo pipefail
build=${1:?usage: run_fuzzers.sh BUILD_DIR [SECONDS] [JOBS]}
seconds=${2:-60}
jobs=${3:-$(nproc)}
source_dir="$(cd "$(dirname "$0")/.." && pwd)"
source "$source_dir/tools/sanitizer/env.sh"
targets=(lattice xsuite particles_npz particles_csv kernel_cache plugin_descriptor collider)
work="$build/fuzz-work"
rm -rf "$work" && mkdir -p "$work"
run_one() {
  local name=$1
  local corpus="$work/corpus_$name" artifacts="$build/fuzz-artifacts/$name/"
  mkdir -p "$corpus" "$artifacts"
  cp "$source_dir/tests/fuzz/corpus/$name/"* "$corpus/" 2>/dev/null
  # -timeout: one input may take at most 10 s; -rss_limit_mb: the process at most 3 GiB.
  "$build/bin/fuzz_$name" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 \
    -max_len=65536 -artifact_prefix="$artifacts" -print_final_stats=1 >"$work/$name.log" 2>&1
  local rc=$?
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    echo "fuzz $name: ok (${runs:-?} inputs in ${seconds} s)"
  else
    echo "fuzz $name: FAILED (exit $rc); log $work/$name.log, input in $artifacts"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$work/$name.log" | head -20
  fi
  return $rc
}
export -f run_one
export build seconds work source_dir
failed=0
pids=()
names=()
running=0
for name in "${targets[@]}"; do
  if [ ! -x "$build/bin/fuzz_$name" ]; then
    echo "fuzz $name: missing $build/bin/fuzz_$name (configure with the preset fuzz)"; failed=1; continue
  fi
  run_one "$name" &
  pids+=($!); names+=("$name"); running=$((running + 1))
  if [ $running -ge "$jobs" ]; then wait -n || failed=1; running=$((running - 1)); fi
done
while [ $running -gt 0 ]; do wait -n || failed=1; running=$((running - 1)); done
exit $failed
