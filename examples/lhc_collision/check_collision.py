#!/usr/bin/env python3
"""LHC-like collision, strong-strong, at one IP (examples/lhc_collision/README.md): the run and its checks.

Runs `fusetrack collide` on lattices/colliders/lhc_like.json (or a copy with --macroparticles per beam)
and checks, from summary.json and bunches.csv:
1. the beam-beam parameter of round Gaussian beams, xi = N r_p / (4 pi eps_n) (head-on; W. Herr, T. Pieloni,
   "Beam-beam effects", CERN-2014-009), against the printed xi (1e-6);
2. the luminosity of the first crossing against the overlap integral of the two bunches computed here by
   numerical quadrature (W. Herr, B. Muratori, "Concept of luminosity", CERN-2006-002, eq. 3 with the
   kinematic factor 2 cos^2 phi), with the rms sizes of the bunches fusetrack sampled, the crossing angle and
   the hourglass beta(s) = beta* (1 + s^2 / beta*^2)  (2 %); the luminosity per second = that per crossing x
   the revolution frequency beta c / C (1e-6);
3. the emittances: within 2 % of their start after the run (the README's full run: 0.03 %);
4. with at least 1024 turns and 5000 macroparticles per beam: the coherent dipole modes. The sigma mode
   stays at the bare tune (within 2e-3); the pi mode is below it by Y xi_eff (within 25 %), with the Yokoya
   factor Y = 1.21 of round beams (K. Yokoya, H. Koiso, Part. Accel. 27 (1990) 181) and the beam-beam parameter
   reduced by the crossing angle, xi_x / (1 + Phi^2) and xi_y / sqrt(1 + Phi^2), Phi = sigma_z tan(phi) / sigma_x
   (Piwinski angle).

    check_collision.py [--turns 200] [--macroparticles M] [--threads 0] [--output DIR] [--plots]
The fusetrack binary: $FUSETRACK (default build/bin/fusetrack). Exit status 0 when every check passes.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = os.path.join(HERE, "..", "..", "lattices", "colliders", "lhc_like.json")
FUSETRACK = os.environ.get("FUSETRACK", "build/bin/fusetrack")
C_LIGHT = 299792458.0
PROTON_RADIUS = 1.53469866e-18      # r_p = e^2 / (4 pi eps0 m_p c^2) [m] (CODATA 2018)
YOKOYA = 1.21


def overlap_luminosity(n1, n2, s1, s2, phi, beta_star, points=301):
    """Luminosity per crossing [1/m^2] of two Gaussian bunches (s = sigma_x*, sigma_y*, sigma_z) crossing at
    the half angle phi in x, with the hourglass: the integral over x, z and ct of 2 cos^2(phi) rho1 rho2, the
    y integral done analytically. Beam 1 moves along (sin phi, 0, cos phi), beam 2 along (sin phi, 0, -cos phi)."""
    sz = max(s1[2], s2[2])
    z = np.linspace(-6 * sz, 6 * sz, 2 * points)
    ct = np.linspace(-6 * sz, 6 * sz, 2 * points)
    zz, tt = np.meshgrid(z, ct, indexing="ij")
    width = 6 * max(s1[0], s2[0]) * math.hypot(1, 6 * sz / beta_star) + 6 * sz * math.sin(phi)
    x = np.linspace(-width, width, points)
    total = 0.0
    for xv in x:
        along1, across1 = xv * math.sin(phi) + zz * math.cos(phi), xv * math.cos(phi) - zz * math.sin(phi)
        along2, across2 = xv * math.sin(phi) - zz * math.cos(phi), xv * math.cos(phi) + zz * math.sin(phi)
        h1 = np.sqrt(1 + (along1 / beta_star) ** 2)
        h2 = np.sqrt(1 + (along2 / beta_star) ** 2)
        rho1 = np.exp(-across1 ** 2 / (2 * (s1[0] * h1) ** 2) - (along1 - tt) ** 2 / (2 * s1[2] ** 2)) / (2 * math.pi * s1[0] * h1 * s1[2])
        rho2 = np.exp(-across2 ** 2 / (2 * (s2[0] * h2) ** 2) - (along2 - tt) ** 2 / (2 * s2[2] ** 2)) / (2 * math.pi * s2[0] * h2 * s2[2])
        y_overlap = 1 / np.sqrt(2 * math.pi * ((s1[1] * h1) ** 2 + (s2[1] * h2) ** 2))
        total += np.sum(rho1 * rho2 * y_overlap)
    step = (z[1] - z[0]) * (ct[1] - ct[0]) * (x[1] - x[0])
    return n1 * n2 * 2 * math.cos(phi) ** 2 * total * step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--macroparticles", type=int, help="per beam (default: the set-up file's, 10^5)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all)")
    ap.add_argument("--output", default="lhc_collision_out")
    ap.add_argument("--plots", action="store_true", help="draw the plots (python3 + matplotlib)")
    a = ap.parse_args()
    os.makedirs(a.output, exist_ok=True)
    with open(SETUP) as f:
        setup = json.load(f)
    path = SETUP
    if a.macroparticles:
        for beam in setup["beams"]:
            beam["bunches"]["macroparticles"] = a.macroparticles
        path = os.path.join(a.output, "lhc_like.json")
        with open(path, "w") as f:
            json.dump(setup, f, indent=1)
    cmd = [FUSETRACK, "collide", path, "-n", str(a.turns), "-o", a.output, "--device", "cpu", "--threads", str(a.threads)]
    if not a.plots:
        cmd.append("--no-plot")
    print("$ " + " ".join(cmd), flush=True)
    run = subprocess.run(cmd, check=True, capture_output=True, text=True)
    print("\n".join(line for line in run.stdout.splitlines() if not line.lstrip().startswith("wrote")))
    with open(os.path.join(a.output, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(a.output, "bunches.csv")) as f:
        first = {row["beam"]: row for row in csv.DictReader(f) if row["turn"] == "0"}
    failures = []

    def check(name, ok, text):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {text}", flush=True)
        if not ok:
            failures.append(name)

    b1 = setup["beams"][0]
    bunch = b1["bunches"]
    n = bunch["intensity"]
    # 1. Beam-beam parameter.
    xi = n * PROTON_RADIUS / (4 * math.pi * bunch["emittance_nx"])
    printed = summary["beams"][0]["xi_x"]
    check("beam-beam parameter", abs(-printed / xi - 1) < 1e-6, f"xi {printed:.7f}, N r_p / (4 pi eps_n) = {xi:.7f}")

    # 2. Luminosity.
    sizes = {b: [float(first[b][k]) for k in ("sigma_x", "sigma_y", "sigma_zeta")] for b in ("1", "2")}
    phi = setup["ip"]["half_crossing_angle"]
    beta_star = b1["linear_map"]["beta_x"]
    expected = overlap_luminosity(n, n, sizes["1"], sizes["2"], phi, beta_star)
    measured = float(first["1"]["luminosity_per_crossing"])
    sigma_x = math.sqrt((sizes["1"][0] ** 2 + sizes["2"][0] ** 2) / 2)
    sigma_y = math.sqrt((sizes["1"][1] ** 2 + sizes["2"][1] ** 2) / 2)
    head_on = n * n / (4 * math.pi * sigma_x * sigma_y)
    check("luminosity per crossing", abs(measured / expected - 1) < 0.02,
          f"first crossing {measured:.5e} /m^2, overlap integral {expected:.5e} /m^2 "
          f"({expected / head_on:.3f} of head-on N^2 / (4 pi sigma_x sigma_y) = {head_on:.4e})")
    f_rev = setup["beams"][0]["reference"]["p0c"] / math.hypot(b1["reference"]["p0c"], b1["reference"]["mass0"]) \
        * C_LIGHT / b1["linear_map"]["circumference"]
    per_second = summary["bunch_summaries"][0]["mean_luminosity_per_crossing_m2"] * f_rev
    check("luminosity per second", abs(summary["luminosity_m2_s"] / per_second - 1) < 1e-6,
          f"{summary['luminosity_cm2_s']:.5e} /(cm^2 s) = <L per crossing> x f_rev ({f_rev:.2f} Hz)")

    # 3. Emittances.
    growth = max(abs(s[k][1] / s[k][0] - 1) for s in summary["bunch_summaries"] for k in ("emittance_x", "emittance_y"))
    check("emittances", growth < 0.02, f"largest change {100 * growth:.3f} % over {a.turns} turns (2 %)")

    # 4. Coherent modes.
    macroparticles = bunch["macroparticles"]
    if a.turns >= 1024 and macroparticles >= 5000:
        modes = summary["coherent_modes"]
        piwinski = bunch["sigma_zeta"] * math.tan(phi) / sigma_x
        for plane, q, reduction in (("x", b1["linear_map"]["qx"], 1 / (1 + piwinski ** 2)),
                                    ("y", b1["linear_map"]["qy"], 1 / math.sqrt(1 + piwinski ** 2))):
            shift = modes[f"sigma_{plane}"] - modes[f"pi_{plane}"]
            want = YOKOYA * xi * reduction
            check(f"sigma mode {plane}", abs(modes[f"sigma_{plane}"] - q) < 2e-3, f"{modes[f'sigma_{plane}']:.5f}, bare tune {q}")
            check(f"pi mode {plane}", abs(shift / want - 1) < 0.25,
                  f"{shift:.5f} below the sigma mode, Y xi_eff = {want:.5f} (Piwinski angle {piwinski:.2f})")
    else:
        print(f"(coherent modes not checked: they need >= 1024 turns and >= 5000 macroparticles; "
              f"here {a.turns} and {macroparticles})")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("all checks passed")


if __name__ == "__main__":
    main()
