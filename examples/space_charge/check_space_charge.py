#!/usr/bin/env python3
"""Frozen space charge in a low-energy proton ring (examples/space_charge/README.md): runs space_charge.sh
and checks its outputs.

1. The beam sizes written into the 160 SpaceChargeBiGaussian elements: sigma = sqrt(beta eps + (D sigma_delta)^2)
   with eps = eps_n / (beta0 gamma0) and the optics of the bare ring at each element (the elements' intensity set
   to 0; `fusetrack optics --twiss-table`)  (1e-6).
2. The Laslett tune shift of a particle at small amplitude in the bunch centre (L.J. Laslett, BNL 7534 (1963);
   K. Schindl, "Space charge", CERN-2006-002), summed here over the elements:
     dQ_x = -r_p N / ((2 pi)^(3/2) sigma_z beta0^2 gamma0^3) sum_k L_k beta_x,k / (sigma_x,k (sigma_x,k + sigma_y,k))
   (and x <-> y), against the value `spacecharge install` prints (1e-4) and against the tunes the footprint
   tracked (NAFF over 1024 turns) at its smallest amplitude, 1/3 sigma, whose shift is the Laslett value
   to (1 - 3 a^2 / 32 sigma^2) ~ 1 % (within 3 %).
3. The tracked bunch: no particle lost, the normalized emittances at the end within 1 % of their start
   (the README: -0.01 % and +0.2 % over 500 turns) and within 3 % on every turn (the bunch is matched to
   the bare optics, not to the optics with space charge: its emittances oscillate a little).

    check_space_charge.py [--turns 500] [--particles 5000] [--footprint-angles 7] [--output DIR] [--plots]
$FUSETRACK: the fusetrack binary (default build/bin/fusetrack); THREADS (default 0: all). Exit status 0 when
every check passes.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FUSETRACK = os.environ.get("FUSETRACK", "build/bin/fusetrack")
PROTON_RADIUS = 1.53469866e-18      # [m] (CODATA 2018)
EMITTANCES = (2e-6, 1.5e-6)          # normalized, as space_charge.sh installs and tracks them
SIGMA_DELTA = 1e-3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--particles", type=int, default=5000)
    ap.add_argument("--footprint-angles", type=int, default=7)
    ap.add_argument("--output", default="space_charge_out")
    ap.add_argument("--plots", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ, DEVICE=os.environ.get("DEVICE", "cpu"), FOOTPRINT_ANGLES=str(a.footprint_angles),
               PLOTS="1" if a.plots else "0")
    cmd = ["bash", os.path.join(HERE, "space_charge.sh"), a.output, str(a.turns), str(a.particles)]
    print("$ " + " ".join(cmd), flush=True)
    run = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
    keep = ("laslett", "lattice", "footprint", "          qx", "particles", "bunch")
    print("\n".join(line for line in run.stdout.splitlines() if line.startswith(keep)))
    failures = []

    def check(name, ok, text):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {text}", flush=True)
        if not ok:
            failures.append(name)

    with open(os.path.join(a.output, "ring_sc.json")) as f:
        ring = json.load(f)
    ref = ring["reference"]
    energy = math.hypot(ref["p0c"], ref["mass0"])
    gamma, beta = energy / ref["mass0"], ref["p0c"] / energy
    names = [n for n, e in ring["elements"].items() if e["type"] == "SpaceChargeBiGaussian"]

    # 1. Beam sizes from the bare ring's optics.
    bare = json.loads(json.dumps(ring))
    for n in names:
        bare["elements"][n]["number_of_particles"] = 0.0
    bare_path, table = os.path.join(a.output, "ring_bare.json"), os.path.join(a.output, "twiss_bare.csv")
    with open(bare_path, "w") as f:
        json.dump(bare, f)
    subprocess.run([FUSETRACK, "optics", bare_path, "--twiss-table", table], check=True, stdout=subprocess.DEVNULL)
    with open(table) as f:
        optics = {row["name"]: row for row in csv.DictReader(f) if row["type"] == "SpaceChargeBiGaussian"}
    eps = [e / (beta * gamma) for e in EMITTANCES]
    worst = 0.0
    sums = [0.0, 0.0]
    for n in names:
        e, o = ring["elements"][n], optics[n]
        sx = math.sqrt(float(o["beta_x"]) * eps[0] + (float(o["dx"]) * SIGMA_DELTA) ** 2)
        sy = math.sqrt(float(o["beta_y"]) * eps[1] + (float(o["dy"]) * SIGMA_DELTA) ** 2)
        worst = max(worst, abs(e["sigma_x"] / sx - 1), abs(e["sigma_y"] / sy - 1))
        sums[0] += e["length"] * float(o["beta_x"]) / (e["sigma_x"] * (e["sigma_x"] + e["sigma_y"]))
        sums[1] += e["length"] * float(o["beta_y"]) / (e["sigma_y"] * (e["sigma_x"] + e["sigma_y"]))
    check("beam sizes", worst < 1e-6, f"{len(names)} elements: sqrt(beta eps + (D sigma_delta)^2) to {worst:.1e}")

    # 2. Laslett tune shift.
    element = ring["elements"][names[0]]
    factor = -PROTON_RADIUS * element["number_of_particles"] / ((2 * math.pi) ** 1.5 * element["sigma_z"] * beta ** 2 * gamma ** 3)
    laslett = [factor * s for s in sums]
    m = re.search(r"laslett\s+dQx = (\S+), dQy = (\S+)", run.stdout)
    printed = [float(m.group(1)), float(m.group(2))]
    check("Laslett, install", all(abs(p / q - 1) < 1e-4 for p, q in zip(printed, laslett)),
          f"printed dQx {printed[0]:.6f}, dQy {printed[1]:.6f}; the formula here {laslett[0]:.6f}, {laslett[1]:.6f}")
    with open(os.path.join(a.output, "footprint", "footprint.csv")) as f:
        header = f.readline()
        rows = list(csv.DictReader(f))
    bare_q = [float(v) for v in re.search(r"lattice tunes qx ([-0-9.eE+]+) qy ([-0-9.eE+]+)", header).groups()]
    smallest = min(math.hypot(float(r["amplitude_x"]), float(r["amplitude_y"])) for r in rows)
    inner = [r for r in rows if math.hypot(float(r["amplitude_x"]), float(r["amplitude_y"])) < 1.01 * smallest]
    for i, plane in enumerate(("x", "y")):
        shift = np.mean([float(r[f"q{plane}"]) for r in inner]) - bare_q[i]
        check(f"footprint dQ{plane}", abs(shift / laslett[i] - 1) < 0.03,
              f"{shift:+.5f} at {smallest:.2f} sigma ({len(inner)} rays), Laslett {laslett[i]:+.5f}: "
              f"{100 * (shift / laslett[i] - 1):+.1f} %")

    # 3. The tracked bunch.
    with np.load(os.path.join(a.output, "monitor.npz")) as mon:
        alive = mon["alive"]
        change = [mon[k][-1] / mon[k][0] - 1 for k in ("emittance_nx", "emittance_ny")]
        swing = max(np.max(np.abs(mon[k] / mon[k][0] - 1)) for k in ("emittance_nx", "emittance_ny"))
        start = [mon[k][0] for k in ("emittance_nx", "emittance_ny")]
    check("no loss", alive[-1] == a.particles, f"{alive[-1]} of {a.particles} alive after {a.turns} turns")
    check("emittances", max(abs(c) for c in change) < 0.01 and swing < 0.03,
          f"eps_nx {1e6 * start[0]:.3f} um {100 * change[0]:+.2f} %, eps_ny {1e6 * start[1]:.3f} um {100 * change[1]:+.2f} % "
          f"after {a.turns} turns (1 %); at most {100 * swing:.2f} % on any turn (3 %)")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("all checks passed")


if __name__ == "__main__":
    main()
