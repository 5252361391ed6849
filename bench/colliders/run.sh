#!/bin/bash
# Colliders driver: `fusetrack collide` on the LHC-like set-up (lattices/colliders/lhc_like.json) with 10^6
# macroparticles per beam and 6 slices: one turn is both beams tracked and collided; GPU fma off and on
# (20 turns) against every CPU core (4 turns), then 10^7 per beam on the GPU (10 turns). One GPU.
#   OUT=/tmp/out bash bench/colliders/run.sh      (TESTS=1: the GPU test group colliders first)
# Appends one line to bench/colliders/results.jsonl (and $OUT/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
TOPIC=colliders
DRIVER_ARGS="$*"
source bench/common/driver.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
build_gpu fusetrack builtin $([ "${TESTS:-0}" = 1 ] && echo test_gpu) || exit 1
gpu_tests colliders
python3 - <<'PY'
import json
d = json.load(open("lattices/colliders/lhc_like.json"))
d["ip"]["slices"] = 6
for n, name in ((1000000, "lhc_1e6"), (10000000, "lhc_1e7")):
    for b in d["beams"]:
        b["bunches"]["macroparticles"] = n
    json.dump(d, open(f"build-gpu/{name}.json", "w"))
PY
step collide gpu_fma_off "$BIN" collide build-gpu/lhc_1e6.json -n 20 --device gpu --fma off --no-plot -o build-gpu/collide_gpu_off
step collide gpu_fma_on "$BIN" collide build-gpu/lhc_1e6.json -n 20 --device gpu --fma on --no-plot -o build-gpu/collide_gpu_on
step collide cpu "$BIN" collide build-gpu/lhc_1e6.json -n 4 --device cpu --no-plot -o build-gpu/collide_cpu
step collide gpu_1e7 "$BIN" collide build-gpu/lhc_1e7.json -n 10 --device gpu --no-plot -o build-gpu/collide_gpu_1e7
record --note "seconds are per run: 20 turns (GPU), 4 turns (CPU), 10 turns (10^7)"
