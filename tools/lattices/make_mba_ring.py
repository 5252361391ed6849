#!/usr/bin/env python3
"""Writes lattices/mba_light_source.json: a thick 3 GeV electron storage ring in the style of a
4th-generation light source (multi-bend achromat arcs made of combined-function unit cells), the
DA example of fusetrack.

Parameters in the range of published MBA rings (MAX IV: 3 GeV, 528 m, 20 7-bend achromats of
combined-function bends with a defocusing gradient and sextupole components, vertically focusing
in the bends; ESRF-EBS: 6 GeV, 844 m, 32 hybrid 7BA cells): here 20 arcs of 7 unit cells, each unit
cell = focusing quadrupole QF, chromatic sextupole SF, and a combined-function sector bend BD
(gradient k1 < 0 and sextupole k2 < 0: the vertical chromatic family) of 2 pi / 140 rad, phase
advances 2/7 of 2 pi per unit cell in both planes (the sextupoles' geometric terms cancel per arc); between
the arcs a 5 m straight with a doublet, and one 500 MHz RF cavity. The arc is a periodic
unit-cell structure, not a dispersion-free achromat (no matching section): a simplification.

The optics are fitted here with plain linear matrices (Newton on QF k1 and BD k1 for the unit-cell
phase advances, then the straight doublet for the ring tunes), and the two sextupole families
(SF, and k2 of BD) from the chromaticity integrals
  xi = -(1/4 pi) sum int beta K1 ds + (1/4 pi) sum int beta D k2 ds (x: +, y: - for k2; K1 incl. h^2),
to the target chromaticity +1.5 in both planes. `fusetrack optics` checks the result.
Run from the repository root: python3 tools/lattices/make_mba_ring.py
"""
import json
import math

E0 = 3e9
MASS = 510998.95
P0C = math.sqrt(E0 * E0 - MASS * MASS)
ARCS, UNITS = 20, 7
N_BENDS = ARCS * UNITS
ANGLE = 2 * math.pi / N_BENDS
L_BEND, L_QF, L_SF, L_QS = 1.1, 0.25, 0.15, 0.2
D_SHORT = 0.1
L_STRAIGHT = 5.0
# Unit-cell phase advances / 2 pi: (2/7, 2/7), so that the first-order geometric driving terms of the
# sextupoles cancel over the 7 unit cells of each arc: each term h_jklm sums exp(i (j-k) mu_x + i (l-m) mu_y)
# over the cells and vanishes for N = 7 identical cells when 7 (p mu_x + q mu_y) is an integer while
# p mu_x + q mu_y is not: (p, q) = (1, 0) for h_21000 and h_10110, (3, 0) for h_30000, (1, 2) for h_10200,
# (1, -2) for h_10020 (J. Bengtsson, SLS Note 9/97; the principle of the multi-bend achromat, e.g.
# MAX IV's 7BA with arc phase advances near integers); here p mu_x + q mu_y = 2/7, 6/7, 6/7, -2/7.
# The former (0.285, 0.105) left the vertical terms uncancelled (7 (mu_x - 2 mu_y) = 0.525) and
# the vertical DA at 0.2 mm; with (2/7, 2/7) it is about 2 mm (1000 turns), the horizontal 5.5 mm.
TARGET_UNIT_MU = (2.0 / 7.0, 2.0 / 7.0)
TARGET_TUNE = (43.21, 42.78)   # the arcs give 40 / 40 (20 x 7 x 2/7), the straights the rest
TARGET_XI = 1.5


# ---- linear optics with 3x3 matrices per plane (x, x', delta) and (y, y', 0) ---------------------
def mat_mul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def plane(K, L, h):
    """Body map of u'' = -K u + h delta over L: 3x3 (u, u', delta)."""
    if K > 0:
        w = math.sqrt(K)
        c, s, dc = math.cos(w * L), math.sin(w * L) / w, -w * math.sin(w * L)
        d = h * (1 - c) / K
    elif K < 0:
        w = math.sqrt(-K)
        c, s, dc = math.cosh(w * L), math.sinh(w * L) / w, w * math.sinh(w * L)
        d = h * (1 - c) / K
    else:
        c, s, dc, d = 1.0, L, 0.0, h * L * L / 2
    return [[c, s, d], [dc, c, h * s], [0, 0, 1]]


def element_maps(e, L):
    """(Mx, My, Kx, Ky, h) of the part of length L of element e (no edges: sector bends)."""
    t = e["type"]
    h = e.get("angle", 0.0) / e["length"] if t == "Bend" else 0.0
    k1 = e.get("k1", 0.0) if t == "Bend" else (e["kn"][1] if t == "ThickMultipole" else 0.0)
    kx, ky = h * h + k1, -k1
    return plane(kx, L, h), plane(ky, L, 0.0), kx, ky, h


def sliced(seq, elements, n=20):
    """Yields (element name, slice length, Mx, My, Kx, Ky, h) for n slices of each thick element."""
    for name in seq:
        e = elements[name]
        if "length" not in e or e["length"] == 0:
            continue
        L = e["length"] / n
        mx, my, kx, ky, h = element_maps(e, L)
        for _ in range(n):
            yield name, L, mx, my, kx, ky, h


def one_turn(seq, elements):
    mx = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    my = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    for _, _, ax, ay, _, _, _ in sliced(seq, elements, 1):
        mx, my = mat_mul(ax, mx), mat_mul(ay, my)
    return mx, my


def periodic(m):
    cos_mu = (m[0][0] + m[1][1]) / 2
    if abs(cos_mu) >= 1:
        raise ValueError("unstable")
    sin_mu = math.copysign(math.sqrt(1 - cos_mu ** 2), m[0][1])
    beta, alpha = m[0][1] / sin_mu, (m[0][0] - m[1][1]) / (2 * sin_mu)
    # periodic dispersion: (1 - M) (D, D') = (m02, m12)
    a, b, c, d = 1 - m[0][0], -m[0][1], -m[1][0], 1 - m[1][1]
    det = a * d - b * c
    disp = ((d * m[0][2] - b * m[1][2]) / det, (-c * m[0][2] + a * m[1][2]) / det)
    return math.atan2(sin_mu, cos_mu) % (2 * math.pi), beta, alpha, disp


def tunes(seq, elements):
    mx, my = one_turn(seq, elements)
    return periodic(mx)[0] / (2 * math.pi), periodic(my)[0] / (2 * math.pi)


def newton(knobs, residual, steps=100):
    """Solves residual(knobs) = 0 for two knobs by Newton's method with numerical derivatives."""
    x = list(knobs)
    for _ in range(steps):
        r = residual(x)
        if max(abs(v) for v in r) < 1e-12:
            break
        jac = []
        for j in range(2):
            xp = list(x)
            xp[j] += 1e-7
            rp = residual(xp)
            jac.append([(rp[i] - r[i]) / 1e-7 for i in range(2)])
        a, b, c, d = jac[0][0], jac[1][0], jac[0][1], jac[1][1]  # J = [[a, b], [c, d]]
        det = a * d - b * c
        step = [(d * r[0] - b * r[1]) / det, (-c * r[0] + a * r[1]) / det]
        scale = min(1.0, 0.2 / max(abs(v) for v in step))  # damped: stay inside the stable region
        x[0] -= scale * step[0]
        x[1] -= scale * step[1]
    return x


elements = {
    "qf": {"type": "ThickMultipole", "length": L_QF, "kn": [0, 4.0, 0, 0, 0, 0], "num_slices": 4},
    "sf": {"type": "ThickMultipole", "length": L_SF, "kn": [0, 0, 0, 0, 0, 0], "num_slices": 4},
    "bd": {"type": "Bend", "length": L_BEND, "angle": ANGLE, "k1": -1.0, "k2": 0.0, "num_slices": 10,
           "edge_entry_angle": ANGLE / 2, "edge_exit_angle": ANGLE / 2},
    "d1": {"type": "Drift", "length": D_SHORT},
    "qs1": {"type": "ThickMultipole", "length": L_QS, "kn": [0, 0.0, 0, 0, 0, 0], "num_slices": 4},
    "qs2": {"type": "ThickMultipole", "length": L_QS, "kn": [0, 0.0, 0, 0, 0, 0], "num_slices": 4},
    "ds": {"type": "Drift", "length": L_STRAIGHT / 2},
    "rf": {"type": "Cavity", "voltage": 1.0e6, "harmonic": 0, "lag": 180.0},
    "mid": {"type": "Marker"},
}
# the edges of bd make it a rectangular-ish bend: their linear kicks enter the fitted optics below
unit = ["qf", "d1", "sf", "d1", "bd", "d1", "sf", "d1", "qf"]
# the unit cell uses half of qf at each end: qf of half length
elements["qf"]["length"] = L_QF / 2


def with_edges(seq, els):
    """The sequence with the bend edges as explicit linear kicks (for the matrix code)."""
    out = []
    for n in seq:
        if els[n]["type"] == "Bend":
            out += ["_edge_in_" + n, n, "_edge_out_" + n]
        else:
            out.append(n)
    return out


def edge_matrix(e, angle):
    h = e["angle"] / e["length"]
    t = h * math.tan(angle)
    return [[1, 0, 0], [t, 1, 0], [0, 0, 1]], [[1, 0, 0], [-t, 1, 0], [0, 0, 1]]


def maps_of(seq, els, n=1):
    for name in with_edges(seq, els):
        if name.startswith("_edge_"):
            b = els[name.split("_", 3)[3]]
            ax, ay = edge_matrix(b, b["edge_entry_angle"])
            yield name, 0.0, ax, ay, 0.0, 0.0, 0.0
        else:
            yield from sliced([name], els, n)


def line_matrices(seq, els):
    mx = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    my = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    for _, _, ax, ay, _, _, _ in maps_of(seq, els):
        mx, my = mat_mul(ax, mx), mat_mul(ay, my)
    return mx, my


def unit_residual(k):
    elements["qf"]["kn"][1], elements["bd"]["k1"] = k
    mx, my = line_matrices(unit, elements)
    try:
        return [periodic(mx)[0] / (2 * math.pi) - TARGET_UNIT_MU[0], periodic(my)[0] / (2 * math.pi) - TARGET_UNIT_MU[1]]
    except ValueError:
        return [1.0, 1.0]


elements["qf"]["kn"][1], elements["bd"]["k1"] = newton([4.0, -1.0], unit_residual)

arc = unit * UNITS
cell = ["ds", "qs1", "d1", "qs2", "d1"] + arc + ["d1", "qs2", "d1", "qs1", "ds"]
ring = cell * ARCS


def cell_tunes(seq, els):
    """Phase advances / 2 pi of one cell, summed slice by slice from the periodic Twiss functions."""
    mx, my = line_matrices(seq, els)
    out = []
    for m, plane_index in ((mx, 0), (my, 1)):
        _, beta, alpha, _ = periodic(m)
        mu = 0.0
        for _, _, a, b, _, _, _ in maps_of(seq, els, 4):
            t = a if plane_index == 0 else b
            c, s, cp, sp = t[0][0], t[0][1], t[1][0], t[1][1]
            mu += math.atan2(s, c * beta - s * alpha)
            gamma = (1 + alpha * alpha) / beta
            beta, alpha = (c * c * beta - 2 * c * s * alpha + s * s * gamma,
                           -c * cp * beta + (c * sp + s * cp) * alpha - s * sp * gamma)
        out.append(mu / (2 * math.pi))
    return out


def ring_residual(k):
    elements["qs1"]["kn"][1], elements["qs2"]["kn"][1] = k
    try:
        mu = cell_tunes(cell, elements)
    except ValueError:
        return [1.0, 1.0]
    return [ARCS * mu[0] - TARGET_TUNE[0], ARCS * mu[1] - TARGET_TUNE[1]]


# a coarse grid for the start (the tunes are not monotonic in the doublet strengths), then Newton
grid = [(0.1 * i, 0.1 * j) for i in range(-30, 31) for j in range(-30, 31)]
start = min(grid, key=lambda k: sum(v * v for v in ring_residual(k)))
elements["qs1"]["kn"][1], elements["qs2"]["kn"][1] = newton(start, ring_residual)


def chromaticity(seq, els):
    """Natural + sextupole chromaticity from the periodic Twiss functions along one cell."""
    mx, my = line_matrices(seq, els)
    _, bx, ax, (dx, dpx) = periodic(mx)
    _, by, ay, _ = periodic(my)
    gx, gy = (1 + ax * ax) / bx, (1 + ay * ay) / by
    xi = [0.0, 0.0]
    sext = {"sf": [0.0, 0.0], "bd": [0.0, 0.0]}  # d xi / d k2 per family
    for name, L, a, b, kx, ky, h in maps_of(seq, els, 20):
        # mid-slice values approximated by the slice entrance values (20 slices per element)
        xi[0] -= bx * kx * L / (4 * math.pi)
        xi[1] -= by * ky * L / (4 * math.pi)
        if name in sext:
            sext[name][0] += bx * dx * L / (4 * math.pi)
            sext[name][1] -= by * dx * L / (4 * math.pi)
        # propagate (beta, alpha, gamma) and dispersion
        c, s, cp, sp = a[0][0], a[0][1], a[1][0], a[1][1]
        bx, ax, gx = (c * c * bx - 2 * c * s * ax + s * s * gx, -c * cp * bx + (c * sp + s * cp) * ax - s * sp * gx,
                      cp * cp * bx - 2 * cp * sp * ax + sp * sp * gx)
        c, s, cp, sp = b[0][0], b[0][1], b[1][0], b[1][1]
        by, ay, gy = (c * c * by - 2 * c * s * ay + s * s * gy, -c * cp * by + (c * sp + s * cp) * ay - s * sp * gy,
                      cp * cp * by - 2 * cp * sp * ay + sp * sp * gy)
        dx, dpx = a[0][0] * dx + a[0][1] * dpx + a[0][2], a[1][0] * dx + a[1][1] * dpx + a[1][2]
    return xi, sext


xi_natural, sext = chromaticity(cell, elements)
# k2 of SF and BD so that ARCS * (xi + sum k2 d xi / d k2) = TARGET_XI in both planes
a, b = sext["sf"][0], sext["bd"][0]
c, d = sext["sf"][1], sext["bd"][1]
rx, ry = TARGET_XI / ARCS - xi_natural[0], TARGET_XI / ARCS - xi_natural[1]
det = a * d - b * c
k2_sf, k2_bd = (d * rx - b * ry) / det, (-c * rx + a * ry) / det
elements["sf"]["kn"][2] = k2_sf
elements["bd"]["k2"] = k2_bd

circumference = ARCS * sum(elements[n].get("length", 0.0) for n in cell)
elements["rf"]["harmonic"] = 880
sequence = [{"line": "cell", "repeat": ARCS}, "rf"]
qx, qy = (ARCS * mu for mu in cell_tunes(cell, elements))
doc = {
    "fusetrack_lattice": 1,
    "description": (
        "Thick 3 GeV electron storage ring in the style of a 4th-generation light source (written by "
        "tools/lattices/make_mba_ring.py): 20 arcs of 7 unit cells (QF, SF, combined-function sector bend "
        f"with k1 < 0 and the SD family as its k2), 5 m straights with doublets, one 500 MHz cavity; "
        f"C = {circumference:.4f} m, tunes {qx:.4f} / {qy:.4f} and chromaticity {TARGET_XI} / {TARGET_XI} "
        "from the generator's linear optics; no aperture elements (the dynamic aperture is the sextupoles')"),
    "reference": {"mass0": MASS, "q0": -1.0, "p0c": P0C},
    "elements": elements,
    "lines": {"unit": unit, "cell": ["ds", "qs1", "d1", "qs2", "d1", {"line": "unit", "repeat": UNITS},
                                     "d1", "qs2", "d1", "qs1", "ds", "mid"]},
    "sequence": sequence,
}
with open("lattices/mba_light_source.json", "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print(f"unit cell: QF k1 = {elements['qf']['kn'][1]:.6f}, BD k1 = {elements['bd']['k1']:.6f}")
print(f"straight: QS1 k1 = {elements['qs1']['kn'][1]:.6f}, QS2 k1 = {elements['qs2']['kn'][1]:.6f}")
print(f"circumference {circumference:.6f} m, tunes {qx:.6f} {qy:.6f}")
print(f"natural chromaticity {ARCS * xi_natural[0]:.4f} {ARCS * xi_natural[1]:.4f}; "
      f"SF k2 = {k2_sf:.4f}, BD k2 = {k2_bd:.4f}")
