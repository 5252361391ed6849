#!/bin/bash
# One short GPU call: the bitwise CPU == GPU tests of the radiating magnets and of the beam-beam lenses (staged
# kernel with large lens parameters included), the frequency map of 10^4 particles over 2 x 1024 turns, and the
# cost of quantum radiation against the same tracking without it (bundled MBA ring, 10^6 particles).
#   OUT=/tmp/out bash bench/light_sources/radiation_and_lenses_on_gpu.sh
set -u
cd "$(dirname "$0")/../.."
source bench/common/device_env.sh
mkdir -p ../shared/lattices && ln -sfn "$ROOT/.carry/xsuite" ../shared/lattices/xsuite
device_start || exit 1
echo "== GPU tests: radiation and lenses"
timeout 150 build-gpu/bin/test_gpu -tc="*radiating*,*lenses*" --duration=true 2>&1 | tee "$OUT/tests.log" \
  | grep -E "test cases|assertions|ERROR|SKIPPED|bitwise|duration|seconds" | head -40
RING=lattices/mba_light_source.json
python3 - "$RING" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["radiation"] = "quantum"
json.dump(d, open("build-gpu/mba_quantum.json", "w"))
PY
echo "== frequency map 10^4 x 2 x 1024"
/usr/bin/time -f "fma wall %e s" timeout 60 "$BIN" fma "$RING" --turns-per-window 1024 --amplitudes 100 --angles 100 \
  --device gpu -o build-gpu/fma_gpu --no-plots 2>&1 | tail -4 | tee "$OUT/fma.log"
echo "== quantum radiation against none"
timeout 90 "$BIN" bench "$RING" build-gpu/mba_quantum.json -N 2000 -n 5 --thread-counts 16 --device gpu --gpu-particles 1e6 --gpu-turns 200 \
  --dispatch auto 2>&1 | tail -12 | tee "$OUT/radiation_cost.log"
