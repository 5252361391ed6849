#!/usr/bin/env python3
"""Writes ../lattice.json: a one-turn map in TaylorMap form, composed by hand.

Linear part: uncoupled rotations with tunes qx, qy and beta functions betx, bety (alpha = 0) at
the map's location; then a thin sextupole kick of integrated strength k2l [m^-2]:
  px -= k2l / 2 (x^2 - y^2),  py += k2l x y   (applied to the rotated coordinates),
which composes to a polynomial of degree 2 (exactly, no truncation). zeta slips by slip * delta,
delta passes through (no terms). tests/plugins/test_taylor_map.cpp rebuilds the same map from
the same numbers and checks the tracked result.
"""
import json
import math
import os

qx, qy, betx, bety, k2l, slip = 0.31, 0.32, 10.0, 8.0, 0.5, -0.05


def main():
    cx, sx = math.cos(2 * math.pi * qx), math.sin(2 * math.pi * qx)
    cy, sy = math.cos(2 * math.pi * qy), math.sin(2 * math.pi * qy)
    ax, bx = cx, betx * sx          # x1 = ax x + bx px
    ay, by = cy, bety * sy          # y1 = ay y + by py
    terms = [  # (output, exponents of x px y py zeta delta, coefficient)
        (0, (1, 0, 0, 0, 0, 0), ax), (0, (0, 1, 0, 0, 0, 0), bx),
        (1, (1, 0, 0, 0, 0, 0), -sx / betx), (1, (0, 1, 0, 0, 0, 0), cx),
        (1, (2, 0, 0, 0, 0, 0), -k2l / 2 * ax * ax), (1, (1, 1, 0, 0, 0, 0), -k2l * ax * bx),
        (1, (0, 2, 0, 0, 0, 0), -k2l / 2 * bx * bx), (1, (0, 0, 2, 0, 0, 0), k2l / 2 * ay * ay),
        (1, (0, 0, 1, 1, 0, 0), k2l * ay * by), (1, (0, 0, 0, 2, 0, 0), k2l / 2 * by * by),
        (2, (0, 0, 1, 0, 0, 0), ay), (2, (0, 0, 0, 1, 0, 0), by),
        (3, (0, 0, 1, 0, 0, 0), -sy / bety), (3, (0, 0, 0, 1, 0, 0), cy),
        (3, (1, 0, 1, 0, 0, 0), k2l * ax * ay), (3, (1, 0, 0, 1, 0, 0), k2l * ax * by),
        (3, (0, 1, 1, 0, 0, 0), k2l * bx * ay), (3, (0, 1, 0, 1, 0, 0), k2l * bx * by),
        (4, (0, 0, 0, 0, 1, 0), 1.0), (4, (0, 0, 0, 0, 0, 1), slip),
    ]
    lattice = {
        "fusetrack_lattice": 1,
        "description": (f"One-turn map as a TaylorMap: rotations with qx = {qx}, qy = {qy}, betx = {betx} m, "
                        f"bety = {bety} m (alpha = 0), then a thin sextupole k2l = {k2l} m^-2, composed exactly "
                        f"(degree 2); zeta += {slip} m * delta; delta passes through. Written by "
                        "tools/make_example_map.py. The plugin path is relative to this file."),
        "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 450e9},
        "plugins": ["build/fusetrack_plugin_taylor_map.so"],
        "elements": {
            "one_turn": {
                "type": "TaylorMap",
                "length": 100.0,
                "output": [t[0] for t in terms],
                "exponents": [e for t in terms for e in t[1]],
                "coefficients": [t[2] for t in terms],
            },
        },
        "sequence": ["one_turn"],
    }
    text = json.dumps(lattice, indent=2)
    # one term per line: six exponents together
    exps = ",\n        ".join(", ".join(str(e) for e in t[1]) for t in terms)
    start = text.index('"exponents": [')
    end = text.index("]", start) + 1
    text = text[:start] + '"exponents": [\n        ' + exps + "\n      ]" + text[end:]
    outs = ", ".join(str(t[0]) for t in terms)
    start = text.index('"output": [')
    end = text.index("]", start) + 1
    text = text[:start] + '"output": [' + outs + "]" + text[end:]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lattice.json")
    with open(out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
