#!/usr/bin/env python3
"""TMCI threshold of one bunch on a broadband resonator: fusetrack tracking against the Vlasov solver
validation/vlasov_tmci.py (README, "Mode coupling (TMCI)").

The ring is the instability ring of the worked example (tools/lattices/make_instability_ring.py: 26 GeV/c
protons, beta_x 69.3 m at the wake, Q_x 4.13, eta 1.80e-3, broadband resonator R_perp = 10 MOhm/m,
f_r = 1 GHz, Q = 1) at zero chromaticity (its sextupoles), with two changes for the Vlasov model's
assumptions: the RF is h = 462, 30 MV instead of h = 4620, 3 MV (the same linear Q_s = 0.01237, a bucket
ten times longer: linear synchrotron motion for sigma_z = 0.12 m), and the wake has `--slices` slices
over +-0.6 m (5 sigma_z). The bunch: a Gaussian in (zeta, delta) matched to the linear RF, every particle
on its dispersive closed orbit (x = D delta, px = 0, D' = 0 at the wake) plus a common offset in x of
`--offset` (no transverse emittance: with the dipolar wake only, the centroid motion of a linear ring does
not depend on it, and the sextupoles' detuning stays negligible). For each intensity N the bunch is tracked
`--turns` turns (CPU) one turn at a time; each turn records the centroid phasor X = <x - i beta px> and
the head-tail phasors <(x - i beta px)(zeta/sigma_z +- i delta/sigma_delta)> (azimuthal modes -+1).
Per run:
  - the growth rate of |X| (fusetrack.growth, Hilbert envelope of Re X over the last 2/3 of the turns,
    or until |X| reaches 20 * offset),
  - the mode tunes: the strongest line of X (mode 0) and of the head-tail phasor whose line lies nearer to
    -Q_s (mode -1), each refined by maximizing the Hann-windowed Fourier amplitude (NAFF's first step),
    relative to the tune at zero intensity, in units of Q_s.
The tracked threshold is N where the fitted growth rate, interpolated linearly, first crosses
`--rate-floor` per turn above the zero-intensity noise level; the Vlasov threshold is where its most
unstable eigenvalue first grows (vlasov_tmci.threshold). Writes DIR/tmci.json, DIR/tmci_modes.png
(mode tunes and growth rates vs intensity, tracking points on the Vlasov curves).

  tmci.py [--output DIR] [--intensities N1 N2 ...] [--turns T] [--particles P] [--slices S] [--qx QX]
          [--reuse DIR1/tmci.json ...]   (earlier runs with the same settings, not tracked again)
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "lattices"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "validation"))
import make_instability_ring as mir  # noqa: E402
import vlasov_tmci  # noqa: E402
from fusetrack.growth import fit_growth  # noqa: E402

LINEAR_RF = (462, 30e6)   # harmonic, voltage [V]: Q_s as the example's (4620, 3 MV), sqrt(h V) the same


def ring_document(intensity, slices=100, zeta_cut=0.6, qx=None):
    """(lattice dict, intended optics) of the example ring at Q' = 0 with the linear RF and the finer wake
    (and another horizontal tune qx, e.g. 4.25, where the one-kick-per-turn map's tune shift has no term
    of second order, unlike the smooth approximation of the Vlasov model)."""
    saved = mir.TARGET_TUNES
    if qx is not None:
        mir.TARGET_TUNES = (qx, saved[1])
    try:
        lattice, _, intended = mir.build((0.0, 0.0), intensity, mir.DAMPER_TURNS)
    finally:
        mir.TARGET_TUNES = saved
    lattice = copy.deepcopy(lattice)
    rf = lattice["elements"]["rf"]
    rf["harmonic"], rf["voltage"] = LINEAR_RF
    wake = lattice["elements"]["wake"]
    wake.update({"n_slices": slices, "zeta_min": -zeta_cut, "zeta_max": zeta_cut, "dipolar_y": 0})
    # Q_s of the linear RF (the formula of make_instability_ring.build with h V instead of 4620 x 3 MV).
    g = intended["gamma"]
    b0 = math.sqrt(1 - 1 / g ** 2)
    q_s = math.sqrt(LINEAR_RF[0] * LINEAR_RF[1] * intended["eta"] / (2 * math.pi * b0 ** 2 * g * mir.MASS))
    intended = dict(intended, synchrotron_tune=q_s,
                    sigma_delta=intended["sigma_z"] * 2 * math.pi * q_s / (intended["eta"] * intended["circumference"]))
    return lattice, intended


def make_bunch(ft, lattice, o, n, offset, seed=7):
    rng = np.random.default_rng(seed)
    zeta = o["sigma_z"] * rng.standard_normal(n)
    delta = o["sigma_delta"] * rng.standard_normal(n)
    return ft.Particles.from_arrays(lattice, x=offset + o["dispersion_at_start"] * delta, px=np.zeros(n),
                                    y=np.zeros(n), py=np.zeros(n), zeta=zeta, delta=delta)


def refine_peak(signal, q_guess, width):
    """Frequency [1/turn] of the strongest line of the complex signal near q_guess (+- width): the
    maximum of |sum s(n) hann(n) e^{-2 pi i q n}| (golden-section search after a fine grid)."""
    n = np.arange(len(signal))
    win = np.hanning(len(signal))
    s = (signal - signal.mean()) * win

    def amp(q):
        return abs(np.sum(s * np.exp(-2j * math.pi * q * n)))

    grid = np.linspace(q_guess - width, q_guess + width, 801)
    a = np.array([amp(q) for q in grid])
    i = int(np.argmax(a))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    phi = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        m1, m2 = hi - phi * (hi - lo), lo + phi * (hi - lo)
        if amp(m1) > amp(m2):
            hi = m2
        else:
            lo = m1
    q = 0.5 * (lo + hi)
    return q, amp(q)


def track_run(ft, intensity, args):
    lattice, o = ring_document(intensity, args.slices, qx=getattr(args, "qx", None))
    ring = ft.Lattice.from_dict(lattice)
    tracker = ft.Tracker(ring, device="cpu", fma="off", threads=args.threads)
    p = make_bunch(ft, ring, o, args.particles, args.offset)
    beta = o["beta_at_start"][0]
    sz, sd = o["sigma_z"], o["sigma_delta"]
    x0 = np.empty(args.turns, complex)
    xp1 = np.empty(args.turns, complex)
    xm1 = np.empty(args.turns, complex)
    t0 = time.time()
    for turn in range(args.turns):
        tracker.track(p, 1)
        alive = p.state > 0
        ph = p.x[alive] - 1j * beta * p.px[alive]
        u = p.zeta[alive] / sz
        v = p.delta[alive] / sd
        x0[turn] = ph.mean()
        xp1[turn] = np.mean(ph * (u + 1j * v))
        xm1[turn] = np.mean(ph * (u - 1j * v))
        if abs(x0[turn]) > 1000 * args.offset:   # far into the instability: stop
            x0, xp1, xm1 = x0[:turn + 1], xp1[:turn + 1], xm1[:turn + 1]
            break
    seconds = time.time() - t0
    turns = np.arange(1, len(x0) + 1)
    # Growth: fit over the last 2/3 of the turns, or up to where |X| reaches 20 offsets.
    big = np.flatnonzero(np.abs(x0) > 20 * args.offset)
    last = int(turns[big[0]]) if big.size else int(turns[-1])
    first = max(int(turns[0]) + 10, last - 2 * len(turns) // 3) if not big.size else max(10, last // 3)
    fit = fit_growth(turns.astype(float), x0.real, first=first, last=last, method="hilbert")
    # Mode tunes in units of Q_s, relative to the ring's bare fractional tune.
    q_frac = o["tunes"][0] % 1.0
    q_s = o["synchrotron_tune"]
    seg = slice(0, last)
    f0, _ = refine_peak(x0[seg], q_frac - 0.4 * q_s, 0.9 * q_s)
    cands = [refine_peak(s[seg], q_frac - q_s, 0.6 * q_s) for s in (xp1, xm1)]
    fm1 = max(cands, key=lambda c: c[1])[0]
    return {"intensity": intensity, "turns": len(turns), "rate": fit["rate"], "rate_error": fit["rate_error"],
            "fit_window": [first, last], "mode0": (f0 - q_frac) / q_s, "mode_m1": (fm1 - q_frac) / q_s,
            "seconds": seconds, "q_s": q_s, "beta_x": beta}


def vlasov_curves(o, n_max, points=41):
    ring = dict(vlasov_tmci.DEFAULT_RING, beta_x=o["beta_at_start"][0], q_s=o["synchrotron_tune"],
                sigma_z=o["sigma_z"], tune=o["tunes"][0], circumference=o["circumference"])
    solver = vlasov_tmci.GridSolver(ring, 20, 31)
    th = vlasov_tmci.threshold(solver, 1e9, n_max, ring["q_s"])
    ns = np.linspace(0, n_max, points)[1:]
    nu = [solver.eigenvalues(n) for n in ns]
    return ring, solver, th, ns, nu


def tracked_threshold(rows, floor):
    """Lowest N where the fitted rate, interpolated linearly between the tracked intensities, exceeds floor."""
    rows = sorted(rows, key=lambda r: r["intensity"])
    for a, b in zip(rows, rows[1:]):
        if a["rate"] <= floor < b["rate"]:
            return a["intensity"] + (floor - a["rate"]) * (b["intensity"] - a["intensity"]) / (b["rate"] - a["rate"])
    return None


def plot(out, rows, ns, nu, q_s, th_v, th_t):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 8), sharex=True)
    for n, e in zip(ns, nu):
        low = e[(e.real / q_s > -2.5) & (e.real / q_s < 1.5)]
        a1.plot(np.full(len(low), n), low.real / q_s, ".", color="0.5", ms=2)
        a2.plot(n, 2 * math.pi * max(0.0, float(np.max(-e.imag))), ".", color="0.4", ms=3)
    x = [r["intensity"] for r in rows]
    a1.plot(x, [r["mode0"] for r in rows], "o", color="C0", mfc="none", label="tracking, mode 0 (centroid line)")
    a1.plot(x, [r["mode_m1"] for r in rows], "s", color="C3", mfc="none", label="tracking, mode -1 (head-tail line)")
    a2.plot(x, [r["rate"] for r in rows], "o", color="C0", label="tracking, growth of |<x>|")
    for a in (a1, a2):
        a.axvline(th_v, color="0.4", ls="--", lw=0.8, label=f"Vlasov threshold {th_v:.3g}")
        if th_t:
            a.axvline(th_t, color="C0", ls=":", lw=0.8, label=f"tracked threshold {th_t:.3g}")
    a1.set_ylabel("(Q - Q_0) / Q_s")
    a1.set_ylim(-2.5, 1.5)
    a2.set_ylabel("growth rate [1/turn]")
    a2.set_xlabel("protons per bunch")
    a1.legend(fontsize=7, loc="lower left")
    a2.legend(fontsize=7, loc="upper left")
    a1.set_title("TMCI, broadband resonator (grey: Vlasov eigenvalues, validation/vlasov_tmci.py)", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "tmci_modes.png"), dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", default="tmci_example")
    ap.add_argument("--intensities", type=float, nargs="+",
                    default=[0.5e10, 1.5e10, 2.5e10, 3.0e10, 3.4e10, 3.6e10, 3.7e10, 3.8e10, 4.1e10, 4.4e10, 5.0e10])
    ap.add_argument("--turns", type=int, default=3000)
    ap.add_argument("--particles", type=int, default=20000)
    ap.add_argument("--slices", type=int, default=100)
    ap.add_argument("--offset", type=float, default=1e-4, help="initial x offset [m]")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (default 1; the results do not depend on it)")
    ap.add_argument("--qx", type=float, help="horizontal tune (default the example's 4.13)")
    ap.add_argument("--rate-floor", type=float, default=2e-4, help="tracked threshold criterion [1/turn]")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--reuse", nargs="+", metavar="TMCI_JSON",
                    help="runs of earlier tmci.json files (same settings) taken instead of tracking them again")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.environ.get("FUSETRACK_PYTHON", os.path.join(HERE, "..", "..", "build", "python")))
    import fusetrack as ft

    os.makedirs(args.output, exist_ok=True)
    reused = {}
    for path in args.reuse or []:
        with open(path) as f:
            for r in json.load(f)["runs"]:
                reused[r["intensity"]] = r
    _, o = ring_document(1e10, args.slices, qx=args.qx)
    ring, solver, th_v, ns, nu = vlasov_curves(o, max(1.5 * max(list(args.intensities) + list(reused)), 1e11))
    print(f"Vlasov threshold (grid solver, linear Q_s {o['synchrotron_tune']:.6f}): {th_v:.4e} protons")
    rows = []
    for n in sorted(set(args.intensities) | set(reused)):
        r = reused[n] if n in reused else track_run(ft, n, args)
        e = solver.eigenvalues(n)
        r["vlasov_rate"] = 2 * math.pi * max(0.0, float(np.max(-e.imag)))
        v0, v1 = solver.visible_modes(n)
        r["vlasov_mode0"], r["vlasov_mode_m1"] = v0.real / ring["q_s"], v1.real / ring["q_s"]
        rows.append(r)
        print(f"N {n:.3e}: rate {r['rate']:+.3e} +- {r['rate_error']:.1e} /turn (Vlasov {r['vlasov_rate']:.3e}), "
              f"mode 0 {r['mode0']:+.3f} Q_s (Vlasov {r['vlasov_mode0']:+.3f}), mode -1 {r['mode_m1']:+.3f} Q_s "
              f"(Vlasov {r['vlasov_mode_m1']:+.3f}), {r['turns']} turns, {r['seconds']:.0f} s", flush=True)
    th_t = tracked_threshold(rows, args.rate_floor)
    ratio = th_t / th_v if th_t else float("nan")
    stable = [r["intensity"] for r in rows if r["rate"] <= args.rate_floor]
    unstable = [r["intensity"] for r in rows if r["rate"] > args.rate_floor]
    if stable and unstable:
        print(f"bracket: stable up to {max(stable):.3e}, unstable from {min(unstable):.3e} "
              f"({max(stable) / th_v:.3f} .. {min(unstable) / th_v:.3f} of the Vlasov threshold)")
    print(f"tracked threshold (rate > {args.rate_floor:g}/turn): {th_t if th_t else float('nan'):.4e} protons, "
          f"Vlasov {th_v:.4e}: ratio {ratio:.3f}")
    with open(os.path.join(args.output, "tmci.json"), "w") as f:
        json.dump({"vlasov_threshold": th_v, "tracked_threshold": th_t, "ratio": ratio, "runs": rows,
                   "rate_floor": args.rate_floor, "turns": args.turns, "particles": args.particles,
                   "slices": args.slices}, f, indent=1)
    if not args.no_plot:
        plot(args.output, rows, ns, nu, ring["q_s"], th_v, th_t)
    return th_v, th_t, rows


if __name__ == "__main__":
    main()
