#!/bin/bash
# Where the time of a variant study goes on the GPU. The CLIC damping ring tracked with
# `fusetrack track` (a grid of small amplitudes, no losses), 600,000 particles in all:
#   one lattice, 600,000 particles;
#   60 identical variants x 10,000 (60 copies of one parameter table);
#   60 error seeds x 10,000 (60 different tables);
#   one seed alone (600,000 particles through its lattice); 60 seeds without misalignments;
#   with --optimize, the same (OPTS=plain: without; RUNS=name:count... picks runs).
#   OUT=/tmp/out bash tools/device/variant_l2.sh   (needs .carry/deps and .carry/xsuite)
set -u
source tools/device/device_env.sh
CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
TURNS=${TURNS:-100}
if ! bash tools/device/refresh_sources.sh || [ ! -x build-gpu/bin/fusetrack ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  cmake --build build-gpu -j16 --target fusetrack builtin >"$OUT/build.log" 2>&1 || { grep -E -A5 "error" "$OUT/build.log" | head -40; exit 1; }
fi
BIN=$ROOT/build-gpu/bin/fusetrack
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
source tools/device/study_inputs.sh
clic_seeds "$CLIC" 60
# One seed alone (its errors, one lattice of 600,000 particles), and 60 seeds without misalignments.
clic_seeds "$CLIC" 1
sed 's/"dx": 5e-6, "dy": 5e-6, "dpsi": 2e-5/"dx": 0, "dy": 0, "dpsi": 0/' build-gpu/clic_errors.json > build-gpu/clic_errors_nomis.json
$BIN errors "$CLIC" --table build-gpu/clic_errors_nomis.json --seeds 60 -o build-gpu/clic_seeds60_nomis.json >/dev/null 2>&1
python3 -c "import json; print(json.dumps({'fusetrack_variants': 1, 'variants': [{'name': 'same%d' % k} for k in range(60)]}))" > build-gpu/same60.json
for opt in ${OPTS-plain --optimize}; do
  [ $opt = plain ] && opt=""
  for run in ${RUNS:-single:600 same60:10 clic_seeds60:10 clic_seed1:600 clic_seeds60_nomis:10}; do
    set -- ${run/:/ }
    V=""; [ $1 != single ] && V="--variants build-gpu/$1.json"
    $BIN track "$CLIC" --grid 1e-5 1e-4 $2 1e-5 1e-4 1000 -n 1 --device gpu $V $opt >/dev/null 2>&1  # warm-up: kernel compile
    echo "== $1 $opt: $2 x 1000 particles per lattice, $TURNS turns" | tee -a "$OUT/variant_l2.log"
    $BIN track "$CLIC" --grid 1e-5 1e-4 $2 1e-5 1e-4 1000 -n $TURNS --device gpu $V $opt 2>&1 | grep -E "^tracking|^time|^particles|error" | tee -a "$OUT/variant_l2.log"
  done
done
