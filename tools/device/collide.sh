#!/bin/bash
# On the GPU machine (one H100/H200): build fusetrack and the GPU suite, the collider's
# CPU == GPU test (fma off), then the collider benchmark against the anchor (10^6 macroparticles per
# beam, 6 slices, one turn = both beams tracked + collided): GPU against all CPU cores, fma off/on.
#   OUT=/tmp/out bash tools/device/collide.sh          (needs .carry/deps: libzip)
set -u
source tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
t0=$(date +%s)
build_gpu fusetrack test_gpu builtin || exit 1
echo "== build ok ($(( $(date +%s) - t0 )) s)"
BIN=$ROOT/build-gpu/bin/fusetrack
(cd build-gpu && ./bin/test_gpu -tc="collider*" 2>&1 | grep -E "MESSAGE|ERROR|test cases|assertions") | tee "$OUT/test_gpu_collider.log"
python3 - <<'PY'
import json
d = json.load(open("lattices/colliders/lhc_like.json"))
for b in d["beams"]:
    b["bunches"]["macroparticles"] = 1000000
d["ip"]["slices"] = 6
json.dump(d, open("build-gpu/anchor.json", "w"))
for b in d["beams"]:
    b["bunches"]["macroparticles"] = 10000000
json.dump(d, open("build-gpu/anchor1e7.json", "w"))
g = json.load(open("tests/mpi/collider_gear.json"))
for b in g["beams"]:
    b.pop("linear_map", None)
    b.pop("reference", None)
    b["lattice"] = "../lattices/sextupole_rf_ring.json"
    b["bunches"]["count"] = 1
    b["bunches"]["macroparticles"] = 1000000
json.dump(g, open("build-gpu/lattice_rings.json", "w"))
PY
for run in "gpu off" "gpu on" "cpu off"; do
  set -- $run
  turns=20; [ "$1" = cpu ] && turns=4
  echo "== collide 2 x 10^6 macroparticles, 6 slices, device $1, fma $2, $turns turns" | tee -a "$OUT/bench.log"
  $BIN collide build-gpu/anchor.json -n $turns --device $1 --fma $2 --no-plot -o "build-gpu/anchor_$1_$2" 2>&1 \
    | grep -E "time|collide" | tee -a "$OUT/bench.log"
done
echo "== collide 2 x 10^7 macroparticles, 6 slices, device gpu, fma off, 10 turns" | tee -a "$OUT/bench.log"
$BIN collide build-gpu/anchor1e7.json -n 10 --device gpu --no-plot -o build-gpu/anchor1e7 2>&1 | grep -E "time" | tee -a "$OUT/bench.log"
echo "== collide, both rings the sextupole lattice (178 elements), 2 x 10^6, 6D 7 slices, GPU, 5 turns" | tee -a "$OUT/bench.log"
$BIN collide build-gpu/lattice_rings.json -n 5 --device gpu --no-plot -o build-gpu/lattice_rings 2>&1 | grep -E "time" | tee -a "$OUT/bench.log"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/bench.log"
echo "== total $(( $(date +%s) - t0 )) s"
