#!/usr/bin/env python3
"""Transverse mode coupling (TMCI) of one Gaussian bunch on a broadband resonator: a linearized Vlasov
solver (numpy/scipy only, independent of fusetrack), zero chromaticity, no space charge, linear
synchrotron motion, one wake kick per turn at beta_x (smooth approximation: the tune shifts << 1).

Model. Particle i has the betatron phasor X_i = x_i - i beta px_i (alpha = 0 at the wake), advancing by
e^{2 pi i Q} per turn, and sits at z_i = r_i cos(phi_i) in the normalized longitudinal phase space
(phi advancing by 2 pi Q_s per turn). The dipolar wake (fusetrack's convention, docs/pages/theory/wakes.md,
"Conventions") kicks a witness at z by Delta px = sum_j K_j x_j, K_j = q0^2 e N w_j W_dip(t_j) / (beta0 p0c),
t_j = (z_j - z) / (beta0 c) > 0 the source's lead, w_j its share of the bunch. Dropping the non-resonant
X* part of x = Re X, the phasor changes by -(i beta/2) sum_j K_j X_j per turn. Writing the mean phasor
of the particles at (r, phi) as D(r, phi) e^{2 pi i (Q + nu) n}, the linearized Vlasov equation is

    nu D = i Q_s dD/dphi - (beta / 4 pi) sum_j K(z(r, phi), z_j) D_j                         (1)

(a rigid bunch with a short defocusing wake gets nu < 0; an eigenvalue with Im nu < 0 grows as
exp(-2 pi Im(nu) n)). Without the wake the modes are nu = m Q_s, m = 0, +-1, ... (azimuthal modes).

Two discretizations of (1), independent of each other:

* ``grid`` (time domain; A. Burov, "Nested head-tail Vlasov solver", Phys. Rev. ST Accel. Beams 17,
  021007 (2014), whose circulant matrix is the d/dphi here): the phase space is cut into n_r rings at the
  Gauss-Laguerre nodes of u = r^2 / (2 sigma_z^2) (the Gaussian's radial measure is e^{-u} du), each with
  n_phi equally spaced points (weight w_k / n_phi), d/dphi the Fourier spectral differentiation matrix on
  each ring (odd n_phi); the wake matrix is the wake function W_dip(t) itself between the points.
* ``laguerre`` (frequency domain; Sacherer's integral equation expanded in azimuthal modes m and
  Laguerre radial functions as in A. Chao, "Physics of Collective Beam Instabilities" (1993) sec. 6.3-6.4,
  Y. H. Chin's MOSES (CERN/SPS/85-2) and N. Mounet's DELPHI): D = sum_{m,k} a_mk e^{i m phi}
  (r / (sqrt(2) sigma))^{|m|} L_k^{|m|}(u) e^{-u}; the wake term, written with the impedance
  Z_perp(f) = i int W e^{-2 pi i f t} dt, couples the modes through the sum over the betatron sidebands
  omega_p = (p + Q) omega_0 of Z_perp(omega_p) I_mk(omega_p) I_m'k'(omega_p)^*, with the Gaussian's
  closed-form transform I_mk(w) = i^-m (w sigma_t / sqrt 2)^{2k + |m|} e^{-(w sigma_t)^2 / 2} / k!
  (Hankel transform of the basis functions; Gradshteyn 7.421.4).

Both give the eigenvalues nu (in units of the tune) for a list of intensities; the threshold is the
lowest intensity where two modes merge (max growth rate above ``--growth-floor`` Q_s), found by bisection.

  vlasov_tmci.py [--ring intended.json] [--method grid|laguerre|both] [--n-max 1.2e11] [--points 41]
                 [--n-r 16 --n-phi 31] [--m-max 6 --n-k 8] [--output DIR]
prints the threshold and writes DIR/vlasov_modes.npz (intensity, nu) and DIR/vlasov_modes.png.
Default parameters: the instability ring of the worked example (tools/lattices/make_instability_ring.py):
26 GeV/c protons, beta_x 69.32 m at the wake, Q_s 0.012372, sigma_z 0.12 m, a broadband resonator
R_perp = 10 MOhm/m, f_r = 1 GHz, Q = 1.
"""
import argparse
import json
import math
import os

import numpy as np
from scipy import special

C = 299792458.0
E = 1.602176634e-19
MASS = 938272088.16  # proton [eV]

DEFAULT_RING = {"p0c": 26e9, "mass": MASS, "beta_x": 69.3202762614083, "q_s": 0.012372232744249388,
                "sigma_z": 0.12, "tune": 4.13, "circumference": 6911.5038,
                "r_shunt": 10e6, "f_r": 1e9, "q_r": 1.0}


def ring_from_intended(path):
    """Parameters from the 'intended' JSON line of make_instability_ring.py."""
    with open(path) as f:
        o = json.load(f)
    r = o["resonator"]
    return {"p0c": DEFAULT_RING["p0c"], "mass": MASS, "beta_x": o["beta_at_start"][0],
            "q_s": o["synchrotron_tune"], "sigma_z": o["sigma_z"], "tune": o["tunes"][0],
            "circumference": o["circumference"], "r_shunt": r["r_shunt"], "f_r": r["frequency"], "q_r": r["q"]}


def beta0_of(ring):
    g = math.sqrt(1 + (ring["p0c"] / ring["mass"]) ** 2)
    return math.sqrt(1 - 1 / g ** 2)


def resonator_wake(t, r_shunt, f_r, q):
    """Transverse broadband resonator W_dip(t) [V/C/m] = (w_r^2 R/(Q wb)) e^{-a t} sin(wb t), t > 0, else 0."""
    wr = 2 * math.pi * f_r
    a = wr / (2 * q)
    wb = math.sqrt(wr * wr - a * a)
    t = np.asarray(t, dtype=float)
    return np.where(t > 0, wr * wr * r_shunt / (q * wb) * np.exp(-a * np.abs(t)) * np.sin(wb * t), 0.0)


def resonator_z_perp(w, r_shunt, f_r, q):
    """Z_perp(omega) [Ohm/m] = (w_r/w) R / (1 + i Q (w/w_r - w_r/w)) (transverse_wakes.h)."""
    wr = 2 * math.pi * f_r
    w = np.asarray(w, dtype=float)
    return r_shunt * wr / (w + 1j * q * (w * w / wr - wr))


def kick_constant(ring, intensity):
    """q0^2 e N / (beta0 p0c[eV]) [m C / V... 1/(V/C/m)]: Delta px = this * w_j W x_j."""
    return E * intensity / (beta0_of(ring) * ring["p0c"])


class GridSolver:
    """Discretization ``grid``: rings x azimuthal points, wake function in the time domain."""

    def __init__(self, ring, n_r=24, n_phi=41):
        if n_phi % 2 == 0:
            raise ValueError("n_phi must be odd (spectral differentiation without a Nyquist mode)")
        self.ring = ring
        u, wu = special.roots_laguerre(n_r)          # int_0^inf e^{-u} f(u) du ~ sum wu f(u)
        r = ring["sigma_z"] * np.sqrt(2 * u)
        phi = 2 * math.pi * (np.arange(n_phi) + 0.5) / n_phi
        self.z = (r[:, None] * np.cos(phi[None, :])).ravel()
        self.w = np.repeat(wu / n_phi, n_phi)        # shares of the bunch, sum 1
        # Fourier spectral derivative on n_phi points (odd): D_jk = (-1)^(j-k) / (2 sin((j-k) h / 2)).
        h = 2 * math.pi / n_phi
        j = np.arange(n_phi)
        diff = j[:, None] - j[None, :]
        with np.errstate(divide="ignore"):
            d = np.where(diff == 0, 0.0, 0.5 * (-1.0) ** diff / np.sin(diff * h / 2))
        self.advection = np.kron(np.eye(n_r), 1j * ring["q_s"] * d)
        t = (self.z[None, :] - self.z[:, None]) / (beta0_of(ring) * C)   # row witness, column source
        self.wake = resonator_wake(t, ring["r_shunt"], ring["f_r"], ring["q_r"]) * self.w[None, :]
        self.u = (r[:, None] * np.cos(phi[None, :])).ravel() / ring["sigma_z"]   # z / sigma_z
        self.v = (r[:, None] * np.sin(phi[None, :])).ravel() / ring["sigma_z"]   # the other coordinate

    def matrix(self, intensity):
        return self.advection - self.ring["beta_x"] / (4 * math.pi) * kick_constant(self.ring, intensity) * self.wake

    def eigenvalues(self, intensity):
        return np.linalg.eigvals(self.matrix(intensity))

    def visible_modes(self, intensity):
        """(nu of mode 0, nu of mode -1): the eigenvalues whose modes carry the largest centroid
        <a> and head-tail moment <a (u +- i v)> (u = z/sigma_z), what the tracking's signals see, each
        relative to the mode's weighted norm sqrt(<|a|^2>)."""
        nu, vec = np.linalg.eig(self.matrix(intensity))
        norm = np.sqrt(self.w @ np.abs(vec) ** 2)
        c0 = np.abs(self.w @ vec) / norm
        c1 = np.maximum(np.abs((self.w * (self.u + 1j * self.v)) @ vec), np.abs((self.w * (self.u - 1j * self.v)) @ vec)) / norm
        near = np.abs(nu.real / self.ring["q_s"] + 1) < 0.6     # mode -1 near -Q_s (merged: the same)
        i0 = int(np.argmax(c0))
        i1 = int(np.flatnonzero(near)[np.argmax(c1[near])]) if near.any() else i0
        return nu[i0], nu[i1]


class LaguerreSolver:
    """Discretization ``laguerre``: azimuthal modes |m| <= m_max, radial Laguerre orders k < n_k, coupled
    through the impedance. Projecting (1), multiplied by the Gaussian psi0(r) = e^{-u}/(2 pi sigma^2), on
    f_mk(r) e^{i m phi}, f_mk = u^{|m|/2} L_k^{|m|}(u) e^{-u} (u = r^2/(2 sigma^2); orthogonal with
    the weight u^{|m|/2} L_k^{|m|}(u), norm N_mk = (k + |m|)!/k!), with W(t) = (1/2 pi) int -i Z(w) e^{i w t} dw
    and e^{i x cos phi} = sum_m i^{|m|} J_{|m|}(x) e^{-i m phi} (x = w r / v):

      nu a_mk = -m Q_s a_mk + (i beta kappa / (8 pi^2 N_mk)) sum_{m'k'} i^{|m'| - |m|} a_m'k'
                                 int Z_perp(w) g_mk(w) g_m'k'(w) dw,                          (2)

    g_mk(w) = X^{|m| + 2k} e^{-X^2} / k!, X = w sigma_t / sqrt 2 (the Hankel transform of f_mk,
    Gradshteyn & Ryzhik 7.421.4 at alpha = beta), kappa = q0^2 e N / (beta0 p0c). The integral over w is
    the single-turn wake (as the tracking's memory_turns = 0); the wake of all turns turns it into the sum
    over the sidebands omega_0 sum_p at (p + Q) omega_0, the same for a wake much shorter than a turn.
    Trapezoidal rule over X in [-x_max, x_max]."""

    def __init__(self, ring, m_max=6, n_k=8, x_max=12.0, n_w=24001, chromaticity=0.0, eta=None):
        self.ring = ring
        b0 = beta0_of(ring)
        sigma_t = ring["sigma_z"] / (b0 * C)
        # Chromaticity (an extension beyond the TMCI model; Q' = dQ/d delta, eta the slip factor): the
        # betatron phase 2 pi Q' int delta dn = -omega_xi z / v (dzeta = -eta C delta per turn) moves the
        # basis spectra to omega - omega_xi, omega_xi = Q' omega_0 / eta (Chao sec. 6.3).
        w_xi = 0.0
        if chromaticity:
            w_xi = chromaticity * 2 * math.pi * b0 * C / ring["circumference"] / eta
        x = np.linspace(-x_max, x_max, n_w) + w_xi * sigma_t / math.sqrt(2)
        w = x * math.sqrt(2) / sigma_t
        x = x - w_xi * sigma_t / math.sqrt(2)
        z = resonator_z_perp(np.where(w == 0, 1e-30, w), ring["r_shunt"], ring["f_r"], ring["q_r"])
        dw = (w[1] - w[0]) * np.ones_like(w)
        dw[0] = dw[-1] = 0.5 * dw[0]
        self.modes = [(m, k) for m in range(-m_max, m_max + 1) for k in range(n_k)]
        g = np.array([x ** (abs(m) + 2 * k) * np.exp(-x * x) / math.factorial(k) for m, k in self.modes])
        norm = np.array([math.factorial(k + abs(m)) / math.factorial(k) for m, k in self.modes])
        phase = np.array([[(1j) ** (abs(m2) - abs(m1)) for m2, _ in self.modes] for m1, _ in self.modes])
        self.coupling = phase * ((g * (z * dw)[None, :]) @ g.T) / norm[:, None]
        self.shift = np.array([-m * ring["q_s"] for m, _ in self.modes])

    def eigenvalues(self, intensity):
        kappa = kick_constant(self.ring, intensity)
        scale = 1j * self.ring["beta_x"] * kappa / (8 * math.pi ** 2)
        return np.linalg.eigvals(np.diag(self.shift).astype(complex) + scale * self.coupling)


def max_growth(nu):
    """Largest growth rate -Im(nu) (units of the tune; the amplitude grows as exp(2 pi rate n))."""
    return float(np.max(-nu.imag))


def threshold(solver, n_lo, n_hi, q_s, floor=1e-3, tol=1e-3):
    """Lowest intensity in [n_lo, n_hi] with max growth > floor Q_s (bisection; stable at n_lo)."""
    if max_growth(solver.eigenvalues(n_hi)) <= floor * q_s:
        return None
    while n_hi - n_lo > tol * n_hi:
        mid = 0.5 * (n_lo + n_hi)
        if max_growth(solver.eigenvalues(mid)) > floor * q_s:
            n_hi = mid
        else:
            n_lo = mid
    return 0.5 * (n_lo + n_hi)


def scan(solver, intensities):
    return np.array([np.sort_complex(solver.eigenvalues(n)) for n in intensities])


def low_modes(nu, q_s, m_range=(-3, 2)):
    """The eigenvalues with Re(nu)/Q_s within m_range (for plots)."""
    keep = (nu.real / q_s > m_range[0] - 0.5) & (nu.real / q_s < m_range[1] + 0.5)
    return nu[keep]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ring", help="the 'intended' JSON of make_instability_ring.py (default: the example ring)")
    ap.add_argument("--method", choices=("grid", "laguerre", "both"), default="both")
    ap.add_argument("--n-max", type=float, default=1.2e11, help="largest intensity of the scan")
    ap.add_argument("--points", type=int, default=41)
    ap.add_argument("--n-r", type=int, default=16)
    ap.add_argument("--n-phi", type=int, default=31)
    ap.add_argument("--m-max", type=int, default=6)
    ap.add_argument("--n-k", type=int, default=8)
    ap.add_argument("--growth-floor", type=float, default=1e-3, help="threshold criterion [Q_s]")
    ap.add_argument("--output", help="directory for vlasov_modes.npz and .png")
    args = ap.parse_args(argv)
    ring = ring_from_intended(args.ring) if args.ring else dict(DEFAULT_RING)
    methods = ("grid", "laguerre") if args.method == "both" else (args.method,)
    intensities = np.linspace(0, args.n_max, args.points)[1:]
    results = {}
    for method in methods:
        solver = (GridSolver(ring, args.n_r, args.n_phi) if method == "grid"
                  else LaguerreSolver(ring, args.m_max, args.n_k))
        th = threshold(solver, intensities[0], args.n_max, ring["q_s"], args.growth_floor)
        e = solver.eigenvalues(1e8)   # mode 0: the most shifted eigenvalue within Q_s / 2 of 0
        e = e[np.abs(e.real) < 0.5 * ring["q_s"]]
        mode0 = e[np.argmax(np.abs(e.real))].real / 1e8
        results[method] = {"threshold": th, "mode0_slope": mode0, "nu": scan(solver, intensities)}
        print(f"{method:8s} threshold {th:.4e} protons   mode-0 slope dnu/dN {mode0:.4e} per proton"
              f" (d(nu/Q_s)/dN {mode0 / ring['q_s']:.4e})")
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        np.savez(os.path.join(args.output, "vlasov_modes.npz"), intensity=intensities, q_s=ring["q_s"],
                 **{f"nu_{m}": r["nu"] for m, r in results.items()},
                 **{f"threshold_{m}": r["threshold"] for m, r in results.items()})
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
        for k, (method, r) in enumerate(results.items()):
            for n, nu in zip(intensities, r["nu"]):
                low = low_modes(nu, ring["q_s"], (-3, 2))
                a1.plot(np.full(len(low), n), low.real / ring["q_s"], ".", ms=2 + 2 * k, color=f"C{k}",
                        mfc="none" if k else None, label=method if n == intensities[0] else None)
                a2.plot(n, 2 * math.pi * max(0.0, max_growth(nu)), ".", color=f"C{k}", ms=3 + 2 * k,
                        mfc="none" if k else None, label=method if n == intensities[0] else None)
        a1.set_ylabel("Re(nu) / Q_s")
        a1.set_ylim(-3.5, 2.5)
        a2.set_ylabel("growth rate [1/turn]")
        a2.set_xlabel("protons per bunch")
        a1.legend(fontsize=8)
        a2.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(args.output, "vlasov_modes.png"), dpi=120)
    return results


if __name__ == "__main__":
    main()
