#!/usr/bin/env python3
"""Writes lattices/space_charge_ring.json: a low-energy proton ring for space-charge studies, the
space-charge example of fusetrack (docs/pages/user/space-charge.md, "Worked example").

Parameters in the range of a booster at injection (CERN PS Booster: 160 MeV kinetic, C = 157.08 m,
bending radius 8.24 m, tunes near 4.2 / 4.3, h = 1 RF of a few kV): 16 FODO cells of thick
quadrupoles and sector bends (bending radius 8.15 m), one RF cavity at harmonic 1 (below transition,
lag 0), and an elliptical aperture at every quadrupole. The quadrupole gradients come from the thin-
lens FODO formula sin(mu/2) = L_cell / (4 f) for the chosen phase advances per cell, then `fusetrack
optics` gives the exact tunes (the bends' weak focusing and the thick quadrupoles move them a little).
Run from the repository root: python3 tools/lattices/make_space_charge_ring.py
"""
import json
import math

MASS = 938272088.16     # proton [eV]
KINETIC = 160e6         # [eV]
E0 = MASS + KINETIC
P0C = math.sqrt(E0 * E0 - MASS * MASS)
CELLS = 16
CIRCUMFERENCE = 157.08
L_CELL = CIRCUMFERENCE / CELLS
L_QUAD, L_BEND = 0.5, 1.6
ANGLE = 2 * math.pi / (2 * CELLS)
# cell: QF/2 d B d QD d B d QF/2
L_DRIFT = (L_CELL - 2 * L_QUAD - 2 * L_BEND) / 4
TARGET_TUNE = (4.10, 4.53)   # thin-lens targets; the thick magnets and the bends' focusing move them
RF_VOLTAGE = 8e3             # [V]
APERTURE = (0.06, 0.03)      # semi-axes [m]


def gradient(mu):
    """k1 [1/m^2] of a quadrupole of length L_QUAD with focal length f: sin(mu/2) = L_cell / (4 f)."""
    f = L_CELL / (4 * math.sin(mu / 2))
    return 1.0 / (f * L_QUAD)


mu_x = 2 * math.pi * TARGET_TUNE[0] / CELLS
mu_y = 2 * math.pi * TARGET_TUNE[1] / CELLS
# Thin-lens FODO with unequal planes: average the two gradients (the tunes then follow from optics).
k_f = gradient(mu_x)
k_d = gradient(mu_y)
lattice = {
    "fusetrack_lattice": 1,
    "description": (
        f"Low-energy proton ring for space-charge studies (written by tools/lattices/make_space_charge_ring.py): "
        f"{KINETIC / 1e6:.0f} MeV kinetic, C = {CIRCUMFERENCE} m, {CELLS} FODO cells of thick quadrupoles "
        f"({L_QUAD} m) and sector bends ({L_BEND} m, {ANGLE:.6f} rad), elliptical aperture "
        f"{APERTURE[0]} x {APERTURE[1]} m at the quadrupoles, one {RF_VOLTAGE / 1e3:.0f} kV cavity at harmonic 1"),
    "reference": {"mass0": MASS, "q0": 1, "p0c": P0C},
    "elements": {
        "qf_half": {"type": "Quadrupole", "length": L_QUAD / 2, "k1": k_f},
        "qd": {"type": "Quadrupole", "length": L_QUAD, "k1": -k_d},
        "b": {"type": "Bend", "length": L_BEND, "angle": ANGLE},
        "d": {"type": "Drift", "length": L_DRIFT},
        "aperture": {"type": "LimitEllipse", "a": APERTURE[0], "b": APERTURE[1]},
        "rf": {"type": "Cavity", "voltage": RF_VOLTAGE, "harmonic": 1, "lag": 0.0},
    },
    "lines": {"cell": ["qf_half", "d", "b", "d", "qd", "aperture", "d", "b", "d", "qf_half", "aperture"]},  # starts at the centre of QF
    "sequence": [{"line": "cell", "repeat": CELLS}, "rf"],
}
with open("lattices/space_charge_ring.json", "w") as f:
    json.dump(lattice, f, indent=1)
    f.write("\n")
print(f"lattices/space_charge_ring.json: {CELLS} cells, k1 QF {k_f:.6f}, QD {-k_d:.6f} 1/m^2, drift {L_DRIFT:.6f} m")
