#!/bin/bash
# The HL-LHC line with its 224 beam-beam lenses (180 BeamBeamBiGaussian2D, 44 BeamBeamBiGaussian3D) on one
# GPU: 10^6 particles of a Gaussian bunch, TURNS turns (default 20), fma off, with the lenses and with every
# lens replaced by a marker (the same line otherwise). Each run twice: the first compiles the kernel.
#   OUT=/tmp/out bash bench/colliders/lenses_against_markers.sh
set -u
cd "$(dirname "$0")/../.."
source bench/common/device_env.sh
# On a device machine the Xsuite rings travel in .carry/xsuite (../shared does not).
[ -e ../shared/lattices/xsuite ] || { mkdir -p ../shared/lattices && ln -sfn "$ROOT/.carry/xsuite" ../shared/lattices/xsuite; }
BIN=${BIN:-build-gpu/bin/fusetrack}
LINE=${LINE:-../shared/lattices/xsuite/hllhc14_with_beambeam.json}
MARKERS=build-gpu/hllhc_lenses_as_markers.json
python3 - "$LINE" "$MARKERS" <<'PY'
import json, sys
line = json.load(open(sys.argv[1]))
elements = line["line"]["elements"]
lenses = [n for n, e in elements.items() if e["__class__"].startswith("BeamBeamBiGaussian")]
for n in lenses:
    elements[n] = {"__class__": "Marker"}
json.dump(line, open(sys.argv[2], "w"))
print(f"{len(lenses)} lenses replaced by markers")
PY
BUNCH=(--gaussian 1000000 --emittance-nx 2.5e-6 --emittance-ny 2.5e-6 --sigma-zeta 0.076 --sigma-delta 1.1e-4
       -n "${TURNS:-20}" --device gpu --fma off)
for lattice in "$LINE" "$MARKERS"; do
  for run in compile cached; do
    echo "== $(basename "$lattice"), $run"
    "$BIN" track "$lattice" "${BUNCH[@]}" -o "build-gpu/hllhc_track_$run.npz" 2>&1 | tail -6
  done
done | tee "$OUT/lenses_against_markers.log"
