#!/usr/bin/env python3
"""Writes lattices/thin_collider_12k.json: a thin-lens collider ring of LHC size and about 12,000
elements, the long-lattice benchmark of fusetrack (switch dispatch, kernel build time).

8 arcs of 50 FODO cells (85 degrees per cell, tune away from integers, thin-lens formula sin(mu/2) = L / (2 f) with L the
quadrupole spacing), 6 thin dipoles per cell (2400 in all, hxl = 2 pi / 2400), two sextupole families
next to the quadrupoles and a thin corrector per half cell; 7 TeV protons; 8 straight sections of six FODO
cells without dipoles and one RF cavity (400 MHz, h = 35640, 16 MV above transition: lag 180 deg).
Run from the repository root: python3 tools/lattices/make_thin_collider.py

With --crab it writes lattices/thin_collider_crab.json instead: the same ring with 16 crab cavities
(RFMultipole, order-0 normal term, 400.79 MHz, phase 90 deg so that the kick px -= knl0 sin(w zeta /
beta0) vanishes on the reference), two in each straight with opposite signs, and one thin skew
quadrupole (ksl1 = 2e-4 1/m) for a small linear coupling: the element types and couplings of an
HL-LHC-like thin line (it tests zeta-dependent kicks in the optics along the ring and the 4D tracked
tunes), without its high-beta insertions.
"""
import json
import math
import sys

CRAB = "--crab" in sys.argv[1:]

ARCS, CELLS = 8, 50
HALF_CELL = 33.5                      # quadrupole spacing [m]
F = HALF_CELL / (2 * math.sin(math.radians(42.5)))  # thin-lens focal length for 85 deg per cell [m]
N_DIPOLES = ARCS * CELLS * 6
ANGLE = 2 * math.pi / N_DIPOLES

elements = {
    "qf": {"type": "Multipole", "knl": [0.0, 1 / F]},
    "qd": {"type": "Multipole", "knl": [0.0, -1 / F]},
    "sf": {"type": "Multipole", "knl": [0.0, 0.0, 0.02]},
    "sd": {"type": "Multipole", "knl": [0.0, 0.0, -0.04]},
    "mb": {"type": "Multipole", "knl": [ANGLE], "hxl": ANGLE, "length": 14.3},
    "mcx": {"type": "Multipole", "knl": [0.0]},
    "mcy": {"type": "Multipole", "ksl": [0.0]},
    "bpm": {"type": "Marker"},
    "d1": {"type": "Drift", "length": 1.0},
    "d2": {"type": "Drift", "length": 0.5},
    "d_mb": {"type": "Drift", "length": 9.5},
    "d_ss": {"type": "Drift", "length": HALF_CELL},
    "rf": {"type": "Cavity", "voltage": 16e6, "frequency": 0.0, "harmonic": 35640, "lag": 180.0},
}
# A half cell: quadrupole, sextupole, corrector, three dipoles, a monitor; 15 elements, 33.5 m.
half_f = ["qf", "d1", "sf", "d2", "mcx", "d2", "bpm", "d_mb", "mb", "d_mb", "mb", "d_mb", "mb", "d1", "d1"]
half_d = ["qd", "d1", "sd", "d2", "mcy", "d2", "bpm", "d_mb", "mb", "d_mb", "mb", "d_mb", "mb", "d1", "d1"]


def length(names):
    return sum(elements[n].get("length", 0.0) if elements[n]["type"] == "Drift" else 0.0 for n in names)


# close each half cell to the quadrupole spacing with its last drift
pad = HALF_CELL - length(half_f) + elements["d1"]["length"]
elements["d_pad"] = {"type": "Drift", "length": pad}
half_f[-1] = half_d[-1] = "d_pad"

# Straight sections: six FODO cells without dipoles (the same phase advance, 402 m).
lines = {"cell": half_f + half_d, "arc": [{"line": "cell", "repeat": CELLS}],
         "straight": [{"line": "straight_cell", "repeat": 6}], "straight_cell": ["qf", "d_ss", "qd", "d_ss"]}
sequence = []
for a in range(ARCS):
    sequence.append({"line": "arc"})
    sequence += [{"line": "straight"}, "rf"] if a == 0 else [{"line": "straight"}]
    if CRAB:
        sequence += [f"crab_{a}_l", "d2", f"crab_{a}_r"] + (["skew"] if a == 0 else [])
if CRAB:
    for a in range(ARCS):
        for side, sign in (("l", 1.0), ("r", -1.0)):
            elements[f"crab_{a}_{side}"] = {"type": "RFMultipole", "frequency": 400.79e6,
                                            "knl": [sign * 1e-6], "pn": [90.0]}
    elements["skew"] = {"type": "Multipole", "ksl": [0.0, 2e-4]}

doc = {
    "fusetrack_lattice": 1,
    "description": ("Thin-lens collider ring of LHC size (written by tools/lattices/make_thin_collider.py): "
                    "8 arcs x 50 FODO cells of 67 m at 85 deg, 2400 thin dipoles, two sextupole families, "
                    "thin correctors and monitors, 402 m straights of FODO cells, one 400 MHz cavity; 7 TeV protons; "
                    "about 12,000 elements. A benchmark lattice, not a model of the LHC optics."),
    "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 7e12},
    "elements": elements,
    "lines": lines,
    "sequence": sequence,
}
out = "lattices/thin_collider_crab.json" if CRAB else "lattices/thin_collider_12k.json"
if CRAB:
    doc["description"] = ("Thin-lens collider ring of LHC size with 16 crab cavities (RFMultipole, 400.79 MHz, "
                          "opposite pairs in the straights) and a thin skew quadrupole (ksl1 = 2e-4): "
                          "written by tools/lattices/make_thin_collider.py --crab; otherwise as thin_collider_12k.json. "
                          "A test lattice for the optics with zeta-dependent kicks, not a model of the HL-LHC.")
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
n = ARCS * (CELLS * len(lines["cell"]) + 6 * 4) + 1 + (ARCS * 3 + 1 if CRAB else 0)
print(f"{out}: {n} elements")
