#!/usr/bin/env python3
"""The CERN PS at injection with its longitudinal impedance (examples/ps_impedance/README.md).

Runs the README's command (`fusetrack track lattices/ps_injection_longitudinal.json --matched ...
--potential-well --monitor ...`) and checks, from its output and the monitor file:
1. the RF bucket against the textbook stationary bucket (S.Y. Lee, "Accelerator Physics", 3rd ed.,
   sec. 3.I), with the momentum compaction computed here from the lattice file by thin-lens transfer
   matrices (periodic dispersion of the FODO cell, alpha_c = sum(theta D) / C):
     eta = alpha_c - 1/gamma^2,  Q_s = sqrt(h q V |eta| / (2 pi beta^2 E)),
     half-length C / (2 h),  half-height delta = sqrt(2 q V / (pi h |eta| beta^2 E))   (1e-4);
2. the induced voltage at every recorded profile, recomputed here from the recorded line density with
   the three sources' analytic impedances (broadband and cavity resonators Z = R / (1 + iQ(f/f_r - f_r/f)),
   space charge Z = i (Z/n) f / f0), the Gaussian profile filter H = exp(-2 pi^2 f^2 sigma_t^2) and
   V(t) = -q e N IFFT[Z H FFT(lambda)] / dt, t = -zeta / (beta c) (the README's conventions)   (1e-6 of the peak);
3. the matched bunch: no particle lost, the rms length within 1 % of its start on every turn and the
   emittance within 0.1 % (the README: 0.6 % and 0.01 % over 500 turns); the monitor's emittance in eV s
   equal to 4 pi sqrt(det cov(t, E)) from its rms zeta, rms delta and their covariance, with
   t = -zeta / (beta c) and E - E0 = beta^2 E delta (first order in delta: 1e-4).

    check_ps.py [--turns 500] [--particles 10000] [--profile-every 100] [--threads 0] [--output DIR] [--plots]
The fusetrack binary: $FUSETRACK (default build/bin/fusetrack). Exit status 0 when every check passes.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LATTICE = os.path.join(HERE, "..", "..", "lattices", "ps_injection_longitudinal.json")
FUSETRACK = os.environ.get("FUSETRACK", "build/bin/fusetrack")
C_LIGHT = 299792458.0
E_CHARGE = 1.602176634e-19


def momentum_compaction(lattice):
    """alpha_c of the ring of thin elements (Drift, Multipole with knl[0] = hxl = theta, knl[1] = k1 l),
    from the periodic dispersion of one repeated line (3 x 3 matrices on (x, px, delta))."""
    elements = lattice["elements"]
    line = lattice["lines"]["cell"]
    cells = next(s["repeat"] for s in lattice["sequence"] if isinstance(s, dict) and s.get("line") == "cell")

    def matrix(name):
        e = elements[name]
        m = np.eye(3)
        if e["type"] == "Drift":
            m[0, 1] = e["length"]
        elif e["type"] == "Multipole":
            knl = e.get("knl", [0.0])
            if len(knl) > 1:
                m[1, 0] = -knl[1]
            m[1, 2] = e.get("hxl", 0.0)       # a thin bend of angle theta: px += theta delta
        return m

    one_cell = np.eye(3)
    for name in line:
        one_cell = matrix(name) @ one_cell
    d = np.linalg.solve(np.eye(2) - one_cell[:2, :2], one_cell[:2, 2])   # periodic (D, D')
    state = np.array([d[0], d[1], 1.0])
    path, length = 0.0, 0.0
    for name in line:
        e = elements[name]
        path += e.get("hxl", 0.0) * state[0]     # extra path theta x of a thin bend, x = D delta
        length += e.get("length", 0.0)
        state = matrix(name) @ state
    return path / length, cells * length


def parse_output(text):
    def number_after(pattern):
        m = re.search(pattern, text)
        if not m:
            sys.exit(f"not in the output of fusetrack track: {pattern}")
        return [float(g) for g in m.groups()]
    eta, lo, hi, height, qs = number_after(r"rf bucket\s+eta (\S+), stable zeta \S+ m, bucket \[(\S+), (\S+)\] m, "
                                           r"height delta (\S+), Qs (\S+)")
    survived, lost = number_after(r"particles\s+\d+ tracked for \d+ turns: (\d+) survived, (\d+) lost")
    return {"eta": eta, "bucket": (lo, hi), "height": height, "qs": qs, "survived": survived, "lost": lost}


def induced_voltage(impedance, zeta, counts, beta, f0):
    """V at the slice centres from the line density, by FFT on a window long enough for every wake."""
    lam = counts / counts.sum()
    dt = (zeta[1] - zeta[0]) / (beta * C_LIGHT)
    nfft = 1 << 19                                        # 3.3e-4 s: the cavity resonator's wake decays by e^-67
    f = np.fft.fftfreq(nfft, dt)
    z = np.zeros(nfft, complex)
    nonzero = f != 0
    for s in impedance["sources"]:
        if s["type"] == "Resonator":
            z[nonzero] += s["r_shunt"] / (1 + 1j * s["q"] * (f[nonzero] / s["frequency"] - s["frequency"] / f[nonzero]))
        elif s["type"] == "InductiveImpedance":
            z += 1j * s["z_over_n"] * f / f0
        else:
            sys.exit(f"source type {s['type']} not modelled here")
    sigma_t = math.sqrt(math.log(2)) / (2 * math.pi * impedance["profile_filter"]["cutoff_frequency"])
    h = np.exp(-2 * math.pi ** 2 * f ** 2 * sigma_t ** 2)
    lam_t = lam[::-1]                                     # increasing t = -zeta / (beta c): the head first
    v_t = -E_CHARGE * impedance["intensity"] / dt * np.fft.ifft(z * h * np.fft.fft(lam_t, nfft))[:len(lam)].real
    return v_t[::-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--particles", type=int, default=10000)
    ap.add_argument("--profile-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all)")
    ap.add_argument("--output", default="ps_impedance_out")
    ap.add_argument("--plots", action="store_true", help="also write the plots into OUTPUT/plots")
    a = ap.parse_args()
    os.makedirs(a.output, exist_ok=True)
    monitor = os.path.join(a.output, "ps.npz")
    cmd = [FUSETRACK, "track", LATTICE, "-n", str(a.turns), "--matched", str(a.particles), "--sigma-zeta", "10",
           "--distribution", "parabolic", "--potential-well", "--monitor", monitor, "--profile-every",
           str(a.profile_every), "--device", "cpu", "--threads", str(a.threads)]
    if a.plots:
        cmd += ["--plots", os.path.join(a.output, "plots")]
    print("$ " + " ".join(cmd), flush=True)
    run = subprocess.run(cmd, check=True, capture_output=True, text=True)
    print("\n".join(line for line in run.stdout.splitlines()
                    if line.split(" ")[0] in ("rf", "matched", "potential", "particles", "collective", "bunch")))
    out = parse_output(run.stdout)
    with open(LATTICE) as f:
        lattice = json.load(f)
    failures = []

    def check(name, ok, text):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {text}", flush=True)
        if not ok:
            failures.append(name)

    # 1. The bucket.
    ref = lattice["reference"]
    energy = math.hypot(ref["p0c"], ref["mass0"])                  # [eV]
    gamma, beta = energy / ref["mass0"], ref["p0c"] / energy
    alpha_c, circumference = momentum_compaction(lattice)
    rf = lattice["elements"]["rf"]
    h, volts = rf["harmonic"], rf["voltage"]
    eta = alpha_c - 1 / gamma ** 2
    qs = math.sqrt(h * volts * abs(eta) / (2 * math.pi * beta ** 2 * energy))
    height = math.sqrt(2 * volts / (math.pi * h * abs(eta) * beta ** 2 * energy))
    half = circumference / (2 * h)
    rel = lambda a, b: abs(a / b - 1)  # noqa: E731
    check("slip factor", rel(out["eta"], eta) < 1e-4,
          f"eta {out['eta']:.6e}, thin-lens alpha_c {alpha_c:.8f} - 1/gamma^2: {eta:.6e} (gamma_t {alpha_c ** -0.5:.4f})")
    check("synchrotron tune", rel(out["qs"], qs) < 1e-4, f"Q_s {out['qs']:.5e}, formula {qs:.5e}")
    check("bucket length", max(rel(-out["bucket"][0], half), rel(out["bucket"][1], half)) < 1e-4,
          f"[{out['bucket'][0]:g}, {out['bucket'][1]:g}] m, C / 2h = {half:.4f} m")
    check("bucket height", rel(out["height"], height) < 1e-4, f"delta {out['height']:.4e}, formula {height:.4e}")

    # 2. The induced voltage.
    with np.load(monitor) as m:
        mon = {k: np.array(m[k]) for k in m.files}
    impedance = lattice["elements"]["impedance"]
    f0 = beta * C_LIGHT / circumference
    worst, peak = 0.0, 0.0
    for k in range(len(mon["profile_turn"])):
        v = induced_voltage(impedance, mon["profile_0_zeta"], mon["profile_0_counts"][k].astype(float), beta, f0)
        field = mon["profile_0_field"][k]
        peak = max(peak, np.max(np.abs(field)))
        worst = max(worst, np.max(np.abs(v - field)) / np.max(np.abs(field)))
    check("induced voltage", len(mon["profile_turn"]) > 0 and worst < 1e-6,
          f"{len(mon['profile_turn'])} profiles: the analytic impedances give the recorded field to {worst:.1e} of its "
          f"peak ({peak:.0f} V)")

    # 3. The matched bunch.
    rms = mon["rms_zeta"]
    emit = mon["emittance_evs"]
    check("no loss", out["lost"] == 0 and out["survived"] == a.particles, f"{out['survived']:.0f} survived, {out['lost']:.0f} lost")
    check("bunch length", np.max(np.abs(rms / rms[0] - 1)) < 1e-2,
          f"rms zeta {rms[0]:.4f} m, within {100 * np.max(np.abs(rms / rms[0] - 1)):.2f} % of it on every turn (1 %)")
    check("emittance", np.max(np.abs(emit / emit[0] - 1)) < 1e-3,
          f"{emit[0]:.4f} eV s, within {100 * np.max(np.abs(emit / emit[0] - 1)):.3f} % on every turn (0.1 %)")
    beta0 = mon["beta0"][0]
    sigma_t = mon["rms_zeta"] / (beta0 * C_LIGHT)
    sigma_e = mon["rms_delta"] * beta0 ** 2 * energy                # dE = beta^2 E delta  [eV]
    cov = mon["cov_zeta_delta"] / (beta0 * C_LIGHT) * beta0 ** 2 * energy
    emit_here = 4 * math.pi * np.sqrt(sigma_t ** 2 * sigma_e ** 2 - cov ** 2)
    worst = np.max(np.abs(emit_here / emit - 1))
    check("emittance definition", worst < 1e-4,
          f"4 pi sqrt(sigma_t^2 sigma_E^2 - cov^2) from the monitor's moments is its emittance [eV s] to {worst:.1e}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("all checks passed")


if __name__ == "__main__":
    main()
