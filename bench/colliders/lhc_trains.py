#!/usr/bin/env python3
"""The collider benchmark set-up: lattices/colliders/lhc_like.json with 8 bunches in beam 1 and 7 in beam 2 (the gear
change: every bunch meets another partner every turn), 4 x 10^6 macroparticles per bunch, 6 slices.

    python3 bench/colliders/lhc_trains.py OUT.json [--bunches 8 7] [--macroparticles 4000000] [--slices 6]

Run it as bench/colliders/run.sh does: mpirun -np N fusetrack collide OUT.json -n 100 --no-plot.
"""
import argparse
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("output")
parser.add_argument("--bunches", type=int, nargs=2, default=[8, 7], metavar=("N1", "N2"))
parser.add_argument("--macroparticles", type=int, default=4000000)
parser.add_argument("--slices", type=int, default=6)
a = parser.parse_args()
setup = json.load(open(os.path.join(here, "..", "..", "lattices", "colliders", "lhc_like.json")))
setup["description"] = (f"Benchmark: lhc_like.json with {a.bunches[0]} + {a.bunches[1]} bunches of "
                        f"{a.macroparticles} macroparticles, {a.slices} slices (bench/colliders/lhc_trains.py)")
for beam, count in zip(setup["beams"], a.bunches):
    beam["bunches"]["count"] = count
    beam["bunches"]["macroparticles"] = a.macroparticles
setup["ip"]["slices"] = a.slices
with open(a.output, "w") as f:
    json.dump(setup, f, indent=1)
    f.write("\n")
