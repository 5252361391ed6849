#!/usr/bin/env python3
"""Writes lattices/instability_ring.json (and instability_ring_damper.json, the same ring with a
TransverseDamper): an SPS-like proton ring at injection for the transverse-instability example of
fusetrack (docs/pages/user/wakes.md, "Worked example: head-tail instability and its cure";
examples/instability/instability.sh).

SPS-like parameters (CERN SPS at injection, 26 GeV/c, Q20 optics; H. Bartosik, "Beam dynamics and
optics studies for the LHC injectors upgrade", CERN-THESIS-2013-257, and H. Bartosik et al., "Low
gamma transition optics for the SPS", IPAC'11, THPAT026): circumference 6911.5 m, harmonic 4620
(200 MHz RF), gamma_t = 17.95, fractional tunes 0.13 / 0.18. RF voltage 3 MV (of the order of the
Q20 flat-bottom voltage; it sets Q_s = 0.0124). Transverse impedance: one broadband resonator
R_perp = 10 MOhm/m, f_r = 1 GHz, Q = 1, the kind of SPS broadband model of the HEADTAIL studies of the
SPS's fast vertical instability / TMCI at 26 GeV/c (G. Rumolo, E. Metral et al., CERN; B. Salvant, EPFL
thesis 4585, 2010) -- the values are those suggested for this example and are of that order; they were
not checked here against the papers. Representative values, not a validated SPS impedance model. The
bunch: 2e10 protons (a fifth of the nominal LHC bunch, so that the real tune shift of mode 0, 0.0047,
stays below Q_s, the domain of Sacherer's formula), rms length 0.12 m (4 sigma_t = 1.6 ns).

The model is simplified on purpose (a fast example, ~10 s per 1000 turns of 2e4 particles on 2 cores):
the betatron optics is 16 thin-lens FODO cells (40 m each, thin bends of length 0 for the dispersion
at the sextupoles), tunes 4.13 / 4.18 (the SPS's fractional parts, a smaller integer part); the rest
of the circumference is a LongitudinalDrift (zeta slippage only) whose momentum compaction makes the
ring's gamma_t the SPS's. The head-tail growth rate depends on the optics only through beta at the
wake (one kick per turn), the fractional tune, Q', eta and f0: the last three are the SPS's, beta_x at
the wake is 69.3 m (the SPS's average beta R / Q_x is 54 m in Q20; the SPS's integer tunes 20 / 20 are
not reproduced).

The chromaticity knob: two thin sextupole families (SF at the centre of QF, SD at the centre of QD)
set from the thin-lens optics computed here (numpy, independently of fusetrack):
  Q'_x = -(1/4 pi) sum beta_x k1L_x + (1/4 pi) sum beta_x D k2L,
  Q'_y = -(1/4 pi) sum beta_y k1L_y - (1/4 pi) sum beta_y D k2L,   k1L_y = -k1L_x,
(Q' = dQ / d delta, k2L = knl[2]; thin lenses with the drift's px / (1 + delta), bends of length 0).
`fusetrack optics` gives the same tunes and chromaticities (tests/python/test_instability_example.py).

  python3 tools/lattices/make_instability_ring.py [--chromaticity QPX QPY] [--output-dir DIR]
          [--damper-turns N_D] [--intensity N]
writes DIR/instability_ring.json and DIR/instability_ring_damper.json and prints the intended optics
as one JSON line (prefix "intended ").
"""
import argparse
import json
import math
import os

import numpy as np

MASS = 938272088.16          # proton [eV]
P0C = 26e9                   # [eV]
CIRCUMFERENCE = 6911.5038    # [m] SPS
HARMONIC = 4620              # 200 MHz
GAMMA_T = 17.95              # SPS Q20 optics
RF_VOLTAGE = 3e6             # [V]
CELLS = 16
L_CELL = 40.0                # [m] thin-lens FODO cell
BEND_ANGLE = 0.02            # [rad] each of the 2 thin bends per cell (dispersion at the sextupoles)
TARGET_TUNES = (4.13, 4.18)  # the SPS's fractional tunes 0.13 / 0.18
R_PERP, F_R, Q_R = 10e6, 1e9, 1.0   # broadband resonator [Ohm/m], [Hz], 1
INTENSITY = 2e10             # protons per bunch (a fifth of nominal: real tune shift well below Q_s, the formula's domain)
SIGMA_Z = 0.12               # [m] rms bunch length the example uses (4 sigma_t = 1.6 ns, inside the bucket)
ZETA_CUT = 0.6               # [m] wake and damper cuts (5 sigma_z; the 200 MHz bucket is +-0.748 m)
N_SLICES = 48
DAMPER_TURNS = 50.0

L_D = L_CELL / 4             # cell: qf_half d b d qd sd d b d qf_half sf  (starts at the centre of QF)


def drift(l):
    return np.array([[1.0, l, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def kick(k1l):
    """Thin quadrupole kick px -= k1l x (3x3 with the dispersion column)."""
    return np.array([[1.0, 0.0, 0.0], [-k1l, 1.0, 0.0], [0.0, 0.0, 1.0]])


def bend(angle):
    """Thin bend of length 0 (Multipole knl[0] = hxl = angle): px += angle delta."""
    return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, angle], [0.0, 0.0, 1.0]])


def cell_elements(kf_half, kd, plane):
    """(name, 3x3 matrix) of one cell; plane +1: x, -1: y (quadrupoles change sign, no bends in y)."""
    s = plane
    b = BEND_ANGLE if plane > 0 else 0.0
    return [("qf_half", kick(s * kf_half)), ("d", drift(L_D)), ("b", bend(b)), ("d", drift(L_D)),
            ("qd", kick(s * kd)), ("sd", np.eye(3)), ("d", drift(L_D)), ("b", bend(b)), ("d", drift(L_D)),
            ("qf_half", kick(s * kf_half)), ("sf", np.eye(3))]


def periodic(m):
    """beta, alpha, tune of a 2x2 one-turn matrix, D, D' from the 3x3 one."""
    cos_mu = 0.5 * (m[0, 0] + m[1, 1])
    if abs(cos_mu) >= 1:
        raise ValueError("unstable cell")
    sin_mu = math.copysign(math.sqrt(1 - cos_mu * cos_mu), m[0, 1])
    beta = m[0, 1] / sin_mu
    alpha = (m[0, 0] - m[1, 1]) / (2 * sin_mu)
    mu = math.atan2(sin_mu, cos_mu) % (2 * math.pi)
    a = np.array([[1 - m[0, 0], -m[0, 1]], [-m[1, 0], 1 - m[1, 1]]])
    d = np.linalg.solve(a, m[0:2, 2])
    return beta, alpha, mu, d


def optics(kf_half, kd):
    """Tunes, natural and sextupole chromaticity coefficients, beta and D at the start (centre of QF)."""
    out = {}
    # horizontal dispersion before each element of the cell (the sextupoles' feed-down acts in both planes)
    elems_x = cell_elements(kf_half, kd, 1)
    m = np.eye(3)
    for _, e in elems_x:
        m = e @ m
    d0 = periodic(m)[3]
    disp_x = []
    disp = np.array([d0[0], d0[1], 1.0])
    for _, e in elems_x:
        disp_x.append(disp[0])
        disp = e @ disp
    for plane, name in ((1, "x"), (-1, "y")):
        elems = cell_elements(kf_half, kd, plane)
        m = np.eye(3)
        for _, e in elems:
            m = e @ m
        beta, alpha, mu, d = periodic(m)
        # propagate Twiss through the cell; sum beta k1L and beta D at the sextupoles
        b, a, g = beta, alpha, (1 + alpha * alpha) / beta
        nat, at_sf, at_sd = 0.0, 0.0, 0.0
        for i, (ename, e) in enumerate(elems):
            if ename.startswith("q"):
                nat += b * (-e[1, 0])     # k1L with the plane's sign
            if ename == "sf":
                at_sf += b * disp_x[i]
            if ename == "sd":
                at_sd += b * disp_x[i]
            r = e[0:2, 0:2]
            t = np.array([[r[0, 0] ** 2, -2 * r[0, 0] * r[0, 1], r[0, 1] ** 2],
                          [-r[0, 0] * r[1, 0], r[0, 0] * r[1, 1] + r[0, 1] * r[1, 0], -r[0, 1] * r[1, 1]],
                          [r[1, 0] ** 2, -2 * r[1, 0] * r[1, 1], r[1, 1] ** 2]])
            b, a, g = t @ np.array([b, a, g])
        out[name] = {"tune": CELLS * mu / (2 * math.pi), "beta": beta, "dispersion": d0[0],
                     "natural_chromaticity": -CELLS * nat / (4 * math.pi),
                     # dQ'/dk2L of each family (all 16 sextupoles of it), sign of the plane
                     "per_sf": plane * CELLS * at_sf / (4 * math.pi), "per_sd": plane * CELLS * at_sd / (4 * math.pi)}
    return out


def match_tunes():
    """Newton iteration on the two quadrupole strengths for TARGET_TUNES (thin-lens optics above)."""
    mu = 2 * math.pi * 0.25
    k = np.array([2 * math.sin(mu / 2) / L_CELL, 4 * math.sin(mu / 2) / L_CELL])  # thin FODO start
    for _ in range(50):
        o = optics(k[0], -k[1])
        f = np.array([o["x"]["tune"] - TARGET_TUNES[0], o["y"]["tune"] - TARGET_TUNES[1]])
        if np.max(np.abs(f)) < 1e-12:
            break
        jac = np.zeros((2, 2))
        for j in range(2):
            dk = k.copy()
            dk[j] += 1e-7
            oj = optics(dk[0], -dk[1])
            jac[:, j] = (np.array([oj["x"]["tune"], oj["y"]["tune"]]) - np.array([o["x"]["tune"], o["y"]["tune"]])) / 1e-7
        k = k - np.linalg.solve(jac, f)
    return k[0], -k[1]


def momentum_compaction_of_cells(kf_half, kd):
    """sum over the thin bends of D angle (the path lengthening of the FODO part per unit delta) [m]."""
    elems = cell_elements(kf_half, kd, 1)
    m = np.eye(3)
    for _, e in elems:
        m = e @ m
    _, _, _, d = periodic(m)
    disp = np.array([d[0], d[1], 1.0])
    total = 0.0
    for name, e in elems:
        if name == "b":
            total += disp[0] * BEND_ANGLE
        disp = e @ disp
    return CELLS * total


def build(chromaticity, intensity, damper_turns):
    kf_half, kd = match_tunes()
    o = optics(kf_half, kd)
    # Sextupole strengths for the requested Q' (linear in k2L): solve the 2x2 system.
    a = np.array([[o["x"]["per_sf"], o["x"]["per_sd"]], [o["y"]["per_sf"], o["y"]["per_sd"]]])
    rhs = np.array([chromaticity[0] - o["x"]["natural_chromaticity"], chromaticity[1] - o["y"]["natural_chromaticity"]])
    k2l_sf, k2l_sd = np.linalg.solve(a, rhs)
    gamma = math.sqrt(1 + (P0C / MASS) ** 2)
    alpha_c = 1 / GAMMA_T ** 2
    l_arc = CIRCUMFERENCE - CELLS * L_CELL
    alpha_arc = (alpha_c * CIRCUMFERENCE - momentum_compaction_of_cells(kf_half, kd)) / l_arc
    eta = alpha_c - 1 / gamma ** 2
    beta0 = math.sqrt(1 - 1 / gamma ** 2)
    e0 = gamma * MASS
    q_s = math.sqrt(HARMONIC * RF_VOLTAGE * eta / (2 * math.pi * beta0 ** 2 * e0))  # linear, small amplitude
    intended = {"tunes": [o["x"]["tune"], o["y"]["tune"]], "chromaticity": list(chromaticity),
                "natural_chromaticity": [o["x"]["natural_chromaticity"], o["y"]["natural_chromaticity"]],
                "beta_at_start": [o["x"]["beta"], o["y"]["beta"]], "dispersion_at_start": o["x"]["dispersion"],
                "gamma_t": GAMMA_T, "eta": eta, "synchrotron_tune": q_s, "circumference": CIRCUMFERENCE,
                "revolution_frequency": beta0 * 299792458.0 / CIRCUMFERENCE, "gamma": gamma,
                "intensity": intensity, "resonator": {"r_shunt": R_PERP, "frequency": F_R, "q": Q_R},
                "sigma_z": SIGMA_Z, "sigma_delta": SIGMA_Z * 2 * math.pi * q_s / (eta * CIRCUMFERENCE),
                "damper_turns": damper_turns, "k1l": [kf_half, kd], "k2l": [k2l_sf, k2l_sd]}
    wake = {"type": "TransverseWake", "n_slices": N_SLICES, "zeta_min": -ZETA_CUT, "zeta_max": ZETA_CUT,
            "intensity": intensity,
            "sources": [{"type": "Resonator", "r_shunt": R_PERP, "q": Q_R, "frequency": F_R}]}
    elements = {
        "wake": wake,
        "qf_half": {"type": "Multipole", "knl": [0.0, kf_half]},
        "qd": {"type": "Multipole", "knl": [0.0, kd]},
        "b": {"type": "Multipole", "knl": [BEND_ANGLE], "hxl": BEND_ANGLE},
        "sf": {"type": "Multipole", "knl": [0.0, 0.0, k2l_sf]},
        "sd": {"type": "Multipole", "knl": [0.0, 0.0, k2l_sd]},
        "d": {"type": "Drift", "length": L_D},
        "arc": {"type": "LongitudinalDrift", "length": l_arc, "momentum_compaction": alpha_arc},
        "rf": {"type": "Cavity", "voltage": RF_VOLTAGE, "harmonic": HARMONIC, "lag": 180.0},
    }
    description = (
        "SPS-like proton ring at injection for the transverse-instability example (written by "
        "tools/lattices/make_instability_ring.py; parameters and sources in its docstring): p0c 26 GeV, "
        f"C = {CIRCUMFERENCE} m, h = {HARMONIC}, V = {RF_VOLTAGE / 1e6:g} MV (above transition, lag 180), "
        f"gamma_t = {GAMMA_T} (SPS Q20; H. Bartosik, CERN-THESIS-2013-257), {CELLS} thin-lens FODO cells of "
        f"{L_CELL} m, tunes {TARGET_TUNES[0]} / {TARGET_TUNES[1]} (the SPS's fractional parts), chromaticity "
        f"Q' = {chromaticity[0]:g} / {chromaticity[1]:g} from thin sextupoles, the rest of the circumference a "
        f"LongitudinalDrift; a broadband resonator R_perp = {R_PERP / 1e6:g} MOhm/m, f_r = {F_R / 1e9:g} GHz, "
        f"Q = {Q_R:g} (SPS broadband model of HEADTAIL TMCI studies: E. Metral et al., HB2004; B. Salvant, "
        f"EPFL thesis 4585, 2010; representative, not a validated SPS model) for {intensity:g} protons")
    lattice = {
        "fusetrack_lattice": 1,
        "description": description,
        "reference": {"mass0": MASS, "q0": 1, "p0c": P0C},
        "elements": elements,
        "lines": {"cell": ["qf_half", "d", "b", "d", "qd", "sd", "d", "b", "d", "qf_half", "sf"]},
        "sequence": ["wake", {"line": "cell", "repeat": CELLS}, "arc", "rf"],
    }
    damped = json.loads(json.dumps(lattice))
    damped["description"] = description + f"; with a bunch-by-bunch TransverseDamper of {damper_turns:g} turns"
    damped["elements"]["damper"] = {"type": "TransverseDamper", "gain_turns": damper_turns,
                                    "zeta_min": -ZETA_CUT, "zeta_max": ZETA_CUT}
    damped["sequence"].insert(1, "damper")
    return lattice, damped, intended


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromaticity", type=float, nargs=2, default=(0.0, 0.0), metavar=("QPX", "QPY"),
                    help="Q' = dQ/d delta in x and y (default 0 0)")
    ap.add_argument("--intensity", type=float, default=INTENSITY)
    ap.add_argument("--damper-turns", type=float, default=DAMPER_TURNS)
    ap.add_argument("--output-dir", default="lattices")
    ap.add_argument("--name", default="instability_ring", help="file name stem (default instability_ring)")
    args = ap.parse_args()
    lattice, damped, intended = build(tuple(args.chromaticity), args.intensity, args.damper_turns)
    os.makedirs(args.output_dir, exist_ok=True)
    for doc, suffix in ((lattice, ""), (damped, "_damper")):
        path = os.path.join(args.output_dir, f"{args.name}{suffix}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote {path}")
    print("intended " + json.dumps(intended))


if __name__ == "__main__":
    main()
