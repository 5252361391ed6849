# Sourced by the topic drivers (bench/<topic>/run.sh), from the repository root: the device environment
# (bench/common/device_env.sh: $OUT, the carried libraries, the kernel cache, build_gpu), and
#   step KIND NAME CMD...   run CMD, its output shown and kept in $OUT/NAME.log, parsed later as KIND
#                           (bench/common/results.py: bench, da, track, collide, messages, lines)
#   gpu_tests GROUP...      TESTS=1: the GPU test groups first (test_gpu --test-suite), pass/fail recorded
#   record [ARGS...]        one JSON line of results into bench/$TOPIC/results.jsonl (and $OUT/results.jsonl)
# The driver sets TOPIC before sourcing, and may set DRIVER_ARGS (its own arguments, for the record).
source bench/common/device_env.sh
BIN=$ROOT/build-gpu/bin/fusetrack
STEPS=()
PARSES=()
VALUES=()
STARTED=$SECONDS

step() {
  local kind=$1 name=$2
  shift 2
  echo "== $name: $*"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  STEPS+=("$(printf '%q ' "$@")")
  PARSES+=(--parse "$kind:$OUT/$name.log")
  [ "$rc" = 0 ] || VALUES+=(--value "${name}_exit_status=$rc")
  return 0
}

gpu_tests() {
  [ "${TESTS:-0}" = 1 ] || return 0
  local group rc
  for group in "$@"; do
    echo "== GPU tests, group $group"
    build-gpu/bin/test_gpu --test-suite="$group" 2>&1 | tee "$OUT/tests_$group.log" | grep -E "test cases|assertions|ERROR|SKIPPED"
    rc=${PIPESTATUS[0]}
    VALUES+=(--value "tests_${group//-/_}_exit_status=$rc")
  done
}

record() {
  local joined
  joined=$(printf ' ; %s' "${STEPS[@]}")
  python3 bench/common/results.py record "$TOPIC" --command "bench/$TOPIC/run.sh ${DRIVER_ARGS:-}:${joined# ;}" \
    "${PARSES[@]}" "${VALUES[@]}" --value "driver_seconds=$((SECONDS - STARTED))" "$@"
}
