#!/usr/bin/env python3
"""Helper of examples/instability/instability.sh (README, "Transverse instability: worked example").

  instability_analysis.py bunch INTENDED.json MATCHED.npz OUT.npz [--offset X] [--seed K]
      the longitudinal coordinates of MATCHED.npz (fusetrack track --matched) with a transverse
      Gaussian matched to the ring's linear optics at its start (alpha = 0, D' = 0; D delta added),
      offset by X [m] in x (default 1 mm) to start the coherent motion
  instability_analysis.py report OUT_DIR
      fits the growth rate of mean_x of every run (fusetrack.growth), compares it with Sacherer's
      formula, writes OUT_DIR/summary.txt, summary.json, growth_vs_chromaticity.png, centroids.png

Sacherer's formula for head-tail mode m = 0 of a single Gaussian bunch (F. Sacherer, CERN 77-13 (1977)
198, in the form of E. Metral's USPAS 2009 lectures, as fusetrack's ft::instability::sacherer and
xwakes' sacherer_formula):
  d omega = i q e I_b Z_eff / (2 (1 + |m|) m0 gamma Q omega0 L),   I_b = q e N f0,  L = beta0 c tau_b,
  Z_eff = sum_p Z_perp(omega_p) h(omega_p - omega_xi) / sum_p h(omega_p - omega_xi),
  omega_p = (p + Q) omega0, omega_xi = Q' omega0 / eta, h(w) = exp(-(w tau_b / 4)^2) (Hermite mode 0),
with tau_b = 4 sigma_t. As in the head-tail test (tests/collective/test_transverse_wake_elements.cpp),
the smooth beta R/Q of the formula is replaced by beta at the wake (one kick per turn: factor beta Q / R),
and the flat-bunch length L by the Gaussian's equivalent length 2 sqrt(pi) sigma_t (factor
4 / (2 sqrt(pi)) = 1.128; its rigid short-wake limit). The amplitude grows as exp(rate * turn),
rate = -2 pi Im(dQ).
"""
import json
import math
import os
import sys

import numpy as np

from fusetrack.growth import fit_growth

C = 299792458.0
E = 1.602176634e-19
MASS = 938272088.16


def resonator_z_perp(f, r_perp, f_r, q):
    """Z_perp(f) = (f_r / f) R / (1 + i Q (f/f_r - f_r/f)) [Ohm/m], finite at f = 0 (transverse_wakes.h)."""
    f = np.asarray(f, dtype=float)
    return r_perp * f_r / (f + 1j * q * (f * f / f_r - f_r))


def sacherer_rate(o, chromaticity):
    """Growth rate [1/turn] of mode 0 (x) from the intended optics `o` (make_instability_ring.py)."""
    gamma = o["gamma"]
    beta0 = math.sqrt(1 - 1 / gamma ** 2)
    f0 = o["revolution_frequency"]
    w0 = 2 * math.pi * f0
    q = o["tunes"][0]
    tau = 4 * o["sigma_z"] / (beta0 * C)
    wxi = chromaticity * w0 / o["eta"]
    w_max = 400 * math.pi / tau + abs(wxi)
    base = q * w0
    p = np.arange(math.floor((-w_max - base) / w0), math.ceil((w_max - base) / w0) + 1)
    w = base + p * w0
    h = np.exp(-((w - wxi) * tau / 4) ** 2)
    r = o["resonator"]
    z_eff = np.sum(resonator_z_perp(w / (2 * math.pi), r["r_shunt"], r["frequency"], r["q"]) * h) / np.sum(h)
    m0_kg = MASS * E / C ** 2
    ib = E * o["intensity"] * f0
    length = beta0 * C * tau
    dw = 1j * E * ib * z_eff / (2 * m0_kg * gamma * q * w0 * length)
    scale = o["beta_at_start"][0] * q / (o["circumference"] / (2 * math.pi))
    gaussian_length = 4 / (2 * math.sqrt(math.pi))
    dq = dw / w0 * scale * gaussian_length
    return -2 * math.pi * dq.imag, dq


def bunch(intended_path, matched_path, out, offset=1e-3, seed=1, emittance_n=2e-6):
    """zeta, delta from `matched_path` (fusetrack track --matched: a Gaussian matched to the RF bucket);
    x, px, y, py Gaussian matched to the linear optics at the start (alpha = 0, D' = 0), plus D delta."""
    with open(intended_path) as f:
        o = json.load(f)
    with np.load(matched_path) as m:
        zeta, delta = np.array(m["zeta"]), np.array(m["delta"])
    n = len(zeta)
    rng = np.random.default_rng(seed)
    gamma = o["gamma"]
    eps = emittance_n / (gamma * math.sqrt(1 - 1 / gamma ** 2))
    bx, by = o["beta_at_start"]
    arrays = {
        "x": offset + math.sqrt(eps * bx) * rng.standard_normal(n) + o["dispersion_at_start"] * delta,
        "px": math.sqrt(eps / bx) * rng.standard_normal(n),
        "y": math.sqrt(eps * by) * rng.standard_normal(n),
        "py": math.sqrt(eps / by) * rng.standard_normal(n),
        "zeta": zeta,
        "delta": delta,
    }
    np.savez(out, **arrays)


def fit_run(path, first, last, limit=5e-3):
    """Fit of mean_x over [first, last], ending earlier where |mean_x| first exceeds `limit` [m] (the
    sextupoles make large amplitudes nonlinear); returns the data, the fit and the window's end."""
    d = np.load(path)
    t, x = d["turn"], d["mean_x"]
    big = np.flatnonzero((np.abs(x) > limit) & (t >= first))
    if big.size:
        last = min(last, float(t[big[0]]))
    fit = fit_growth(t, x, first=first, last=last, method="hilbert")
    return d, fit, last


def report(out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(out_dir, "runs.json")) as f:
        runs = json.load(f)
    rows = []
    for run in runs:
        with open(run["intended"]) as f:
            o = json.load(f)
        d, fit, last = fit_run(run["monitor"], run["first"], run["last"])
        theory, dq = sacherer_rate(o, run["chromaticity"])
        row = {"name": run["name"], "chromaticity": run["chromaticity"], "damper_turns": run.get("damper_turns"),
               "fitted_rate": fit["rate"], "fit_error": fit["rate_error"], "sacherer_rate": theory,
               "sacherer_tune_shift_real": dq.real, "first": run["first"], "last": last,
               "synchrotron_tune": o["synchrotron_tune"]}
        if run.get("damper_turns"):
            g = 2 / run["damper_turns"]
            row["damper_rate"] = math.log(1 - g) / 2      # the ideal damper alone, per turn (instability_theory.h)
            row["expected_rate"] = theory + row["damper_rate"]
        rows.append(row)

    lines = ["run                 Q'x    fitted rate [1/turn]      Sacherer [1/turn]   ratio   window   notes"]
    for r in rows:
        note = ""
        ref = r.get("expected_rate", r["sacherer_rate"])
        if r.get("damper_turns"):
            note = (f"damper n_d = {r['damper_turns']:g} (alone ln(1 - 2/n_d)/2 = {r['damper_rate']:.3e}); "
                    f"expected Sacherer + damper; e-folding {-1 / r['fitted_rate']:.1f} turns" if r["fitted_rate"] < 0
                    else f"damper n_d = {r['damper_turns']:g}: not damped")
        ratio = f"{r['fitted_rate'] / ref:6.3f}" if abs(ref) > 1e-9 else "   n/a"
        lines.append(f"{r['name']:<18} {r['chromaticity']:+5.1f}   {r['fitted_rate']:+.3e} +- {r['fit_error']:.1e}"
                     f"   {ref:+.3e}   {ratio}   {r['first']:g}-{r['last']:g}   {note}")
    lines.append(f"(fits of mean_x by fusetrack.growth, Hilbert envelope; real tune shift of mode 0 "
                 f"{rows[0]['sacherer_tune_shift_real']:.2e}, Q_s {rows[0]['synchrotron_tune']:.4f})")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)

    # Growth rate against chromaticity, with the formula as a curve.
    scan = [r for r in rows if not r.get("damper_turns")]
    with open(runs[0]["intended"]) as f:
        o = json.load(f)
    qp = np.linspace(min(r["chromaticity"] for r in scan) - 1, max(r["chromaticity"] for r in scan) + 1, 81)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(qp, [sacherer_rate(o, q)[0] for q in qp], "-", label="Sacherer, mode 0 (Gaussian)")
    ax.errorbar([r["chromaticity"] for r in scan], [r["fitted_rate"] for r in scan],
                yerr=[r["fit_error"] for r in scan], fmt="o", label="fusetrack (fit of <x>)")
    for r in rows:
        if r.get("damper_turns"):
            ax.plot([r["chromaticity"]], [r["fitted_rate"]], "s", label=f"Q'x = {r['chromaticity']:+g} with damper n_d = {r['damper_turns']:g}")
    ax.axhline(0, color="gray", lw=0.5)
    ax.set_xlabel("chromaticity Q'x")
    ax.set_ylabel("growth rate [1/turn]")
    ax.set_title("Head-tail mode 0, SPS-like ring, broadband resonator")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "growth_vs_chromaticity.png"), dpi=120)
    plt.close(fig)

    # Centroids against turn.
    fig, axes = plt.subplots(len(runs), 1, figsize=(7, 1.8 * len(runs)), sharex=True)
    for ax, run, r in zip(np.atleast_1d(axes), runs, rows):
        d = np.load(run["monitor"])
        ax.plot(d["turn"], d["mean_x"] * 1e3, lw=0.6)
        ax.set_ylabel("<x> [mm]")
        label = f"Q'x = {r['chromaticity']:+g}" + (f", damper {r['damper_turns']:g} turns" if r.get("damper_turns") else "")
        ax.set_title(f"{label}: fitted {r['fitted_rate']:+.2e} / turn", fontsize=9)
    np.atleast_1d(axes)[-1].set_xlabel("turn")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "centroids.png"), dpi=120)
    plt.close(fig)


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "bunch":
        kw = {}
        args = sys.argv[5:]
        for i in range(0, len(args), 2):
            kw[args[i].lstrip("-")] = float(args[i + 1]) if args[i] != "--seed" else int(args[i + 1])
        bunch(sys.argv[2], sys.argv[3], sys.argv[4], **kw)
    elif len(sys.argv) == 3 and sys.argv[1] == "report":
        report(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "sacherer":
        with open(sys.argv[2]) as f:
            o = json.load(f)
        rate, dq = sacherer_rate(o, float(sys.argv[3]))
        print(f"sacherer rate {rate:.6e} per turn, dQ {dq.real:.4e} {dq.imag:+.4e}i")
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
