#!/usr/bin/env python3
"""Closed orbit of one corrector from a plugin element (examples/plugin_corrector/README.md).

Tracks one particle, started on the axis, through the tutorial plugin's ring (plugins/tutorial: 16 thin-lens
FODO cells with one `KickX` corrector at a focusing-quadrupole centre) and compares with the thin-lens
theory (S.Y. Lee, "Accelerator Physics", 3rd ed., sec. 2.II and 2.IV):
  FODO cell of half-length L with thin quadrupoles of focal length f:  sin(mu/2) = L / (2 f),
  beta at the focusing quadrupole:  beta_F = 2 L (1 + sin(mu/2)) / sin(mu),  Q = N_cells mu / (2 pi),
  closed orbit at a thin kick theta where alpha = 0:  x_co = theta beta_F / (2 tan(pi Q)).
The particle oscillates about the closed orbit: x(n) = x_co + a cos(2 pi q n) + b sin(2 pi q n), with q the
fractional tune (the strongest line of x(n)) and x_co, a, b fitted by least squares. Last: the same ring with the
built-in Multipole (knl[0] = -kick) in place of KickX gives the same turn-by-turn x, bit for bit.

    check_corrector.py LATTICE [--plugin SO] [--turns N] [--output DIR]
The fusetrack binary: $FUSETRACK (default build/bin/fusetrack). Exit status 0 when every check passes.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

FUSETRACK = os.environ.get("FUSETRACK", "build/bin/fusetrack")


def thin_fodo_theory(lattice):
    """Tune and closed orbit of the ring from its own parameters (thin lenses, symmetric cell)."""
    e = lattice["elements"]
    half_length = e["d"]["length"]
    inverse_f = 2 * e["qf_half"]["knl"][1]           # two half quadrupoles make the focusing one
    assert abs(inverse_f + e["qd"]["knl"][1]) < 1e-15   # symmetric FODO: |1/f| equal
    cells = next(s["repeat"] for s in lattice["sequence"] if isinstance(s, dict))
    mu = 2 * math.asin(half_length * inverse_f / 2)
    beta_f = 2 * half_length * (1 + math.sin(mu / 2)) / math.sin(mu)
    q = cells * mu / (2 * math.pi)
    kick = e["corrector"]["kick"]
    return {"tune": q, "beta_f": beta_f, "x_co": kick * beta_f / (2 * math.tan(math.pi * q))}


def line_frequency(signal):
    """Fractional frequency [1/turn] of the strongest line of a real signal: Hann-windowed FFT peak,
    refined by a golden-section search of the windowed Fourier amplitude (NAFF's first step)."""
    n = np.arange(len(signal))
    s = (signal - signal.mean()) * np.hanning(len(signal))
    spectrum = np.abs(np.fft.rfft(s, 16 * len(s)))
    q0 = np.argmax(spectrum[1:]) + 1
    lo, hi = (q0 - 1) / (16 * len(s)), (q0 + 1) / (16 * len(s))
    amp = lambda q: abs(np.sum(s * np.exp(-2j * math.pi * q * n)))  # noqa: E731
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if amp(a) > amp(b):
            hi = b
        else:
            lo = a
    return 0.5 * (lo + hi)


def track(lattice_path, turns, monitor, plugin):
    cmd = [FUSETRACK, "track", lattice_path, "--grid", "0", "0", "1", "0", "0", "1", "-n", str(turns),
           "--monitor", monitor, "--device", "cpu", "--threads", "1"]
    if plugin:
        cmd += ["--plugin", plugin]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with np.load(monitor) as m:
        return np.array(m["mean_x"]), np.array(m["mean_y"]), int(m["alive"][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lattice", help="the tutorial lattice (plugins/tutorial/lattice.json, plugin built next to it)")
    ap.add_argument("--plugin", help="the plugin (.so) when the lattice's own 'plugins' entry does not find it")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--output", default="plugin_corrector_out")
    a = ap.parse_args()
    os.makedirs(a.output, exist_ok=True)
    with open(a.lattice) as f:
        lattice = json.load(f)
    theory = thin_fodo_theory(lattice)

    x, y, alive = track(a.lattice, a.turns, os.path.join(a.output, "kickx.npz"), a.plugin)
    tune = line_frequency(x)
    n = np.arange(len(x))
    basis = np.stack([np.ones(len(x)), np.cos(2 * math.pi * tune * n), np.sin(2 * math.pi * tune * n)], axis=1)
    x_co = np.linalg.lstsq(basis, x, rcond=None)[0][0]
    frac = theory["tune"] % 1.0
    frac = min(frac, 1 - frac)
    failures = []

    def check(name, ok, text):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {text}")
        if not ok:
            failures.append(name)

    check("survival", alive == 1, f"{alive} of 1 particle alive after {a.turns} turns")
    check("closed orbit", abs(x_co / theory["x_co"] - 1) < 1e-3,
          f"fitted x_co {x_co:.6e} m, thin-lens theory {theory['x_co']:.6e} m "
          f"(beta_F {theory['beta_f']:.4f} m, Q {theory['tune']:.5f}; tolerance 1e-3)")
    check("tune", abs(tune - frac) < 1e-4, f"line of x(turn) {tune:.6f}, thin-lens theory {frac:.6f} (tolerance 1e-4)")
    check("no vertical motion", np.all(y == 0), "y stays 0: KickX kicks only px")

    # The same ring with the built-in thin Multipole instead of the plugin's element.
    builtin = dict(lattice)
    builtin["elements"] = dict(lattice["elements"])
    builtin["elements"]["corrector"] = {"type": "Multipole", "knl": [-lattice["elements"]["corrector"]["kick"]]}
    builtin.pop("plugins", None)
    path = os.path.join(a.output, "ring_builtin_multipole.json")
    with open(path, "w") as f:
        json.dump(builtin, f, indent=1)
    xb, _, _ = track(path, a.turns, os.path.join(a.output, "multipole.npz"), None)
    check("plugin == built-in", np.array_equal(x, xb), "KickX and Multipole(knl[0] = -kick) give the same x, bit for bit")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("all checks passed")


if __name__ == "__main__":
    main()
