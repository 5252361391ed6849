#!/bin/bash
# On the GPU machine (one H100/H200): build, the whole test suite with the GPU tests, auto
# dispatch on the thin collider with and without crab cavities, the deterministic reductions, the
# collective whole-command breakdown at 10^8 (1 GPU), the impedance lattices CPU==GPU.
#   OUT=/tmp/out bash tools/device/issue20.sh        (needs .carry/ as for tools/device/gpu_suite.sh)
set -u
OUT=${OUT:-/tmp/fusetrack-out}
mkdir -p "$OUT"
ROOT=$(pwd)
bash tools/device/gpu_suite.sh build || exit 1
export LD_LIBRARY_PATH=$ROOT/.carry/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export FUSETRACK_KERNEL_CACHE=$ROOT/build-gpu/kernel-cache
mkdir -p "$ROOT/../shared/lattices" && ln -sfn "$ROOT/.carry/xsuite" "$ROOT/../shared/lattices/xsuite" 2>/dev/null
BIN=$ROOT/build-gpu/bin/fusetrack
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"

echo "== tests"
(cd build-gpu && ctest -j8 --output-on-failure) >"$OUT/tests.log" 2>&1
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run" "$OUT/tests.log" | head -20
(cd build-gpu && ./bin/test_gpu -tc="GPU slice*,auto dispatch*" -s 2>&1 | grep -E "MESSAGE|measured|ms|passed|failed" | head -20) \
  | tee "$OUT/gpu_new_tests.log"

echo "== auto dispatch: thin collider (12k elements), with 16 crab cavities (RFMultipole) and with markers instead"
python3 - <<'PY'
import json
d = json.load(open("lattices/thin_collider_12k.json"))
seq = []
for s in d["sequence"]:
    seq.append(s)
    if isinstance(s, dict) and s.get("line") == "straight":
        seq += ["crab", "crab"]
d["sequence"] = seq
d["elements"]["crab"] = {"type": "RFMultipole", "frequency": 400.79e6, "ksl": [1e-6]}
json.dump(d, open("build-gpu/collider_crab.json", "w"))
d["elements"]["crab"] = {"type": "Marker"}
json.dump(d, open("build-gpu/collider_crab_markers.json", "w"))
PY
for lat in lattices/thin_collider_12k.json build-gpu/collider_crab_markers.json build-gpu/collider_crab.json; do
  $BIN bench "$lat" --device gpu -N 1024 -n 1 --thread-counts 1 --gpu-particles 1000000 --gpu-turns 4 \
    --no-per-element 2>&1 | grep -v "cpu " | tee -a "$OUT/dispatch.log"
done

echo "== collective: whole command vs tracking, 1 GPU (2-GPU kinds not lent in this session)"
bash tools/device/bench_ranks.sh 1e8 200 2>&1 | tee "$OUT/ranks.log"

echo "== collective: impedance lattices CPU == GPU (fma off) and the collective bench"
for lat in lattices/ps_injection_longitudinal.json lattices/longitudinal_bench_ring.json; do
  $BIN repro "$lat" --fma off -N 20000 -n 200 2>&1 | grep -E "repro|bitwise|result|collective" | tee -a "$OUT/collective.log"
done
$BIN bench lattices/longitudinal_bench_ring.json --slices 1000 --collective-particles 1e6 1e7 --gpu-turns 20 2>&1 \
  | tee -a "$OUT/collective.log" | tail -12
