#!/usr/bin/env python3
"""Peer comparison of fusetrack's transverse wakes with PyHEADTAIL's reference kicks.

PyHEADTAIL's repository (github PyCOMPLETE/PyHEADTAIL, test_scripts/impedance_test/, removed from the tree
in September 2014; the last version is the parent of commit 63ec70e) holds an initial bunch (initBunch/*.dat,
20000 macroparticles), three scripts that define the cases (test_wake_kicks_{resonator,resistive_wall,table}.py)
and the kicks that the old PyHEADTAIL computed for them (resultsOldPyHT/kicks_{dipX,dipY,quadX,quadY}_CASE.dat).
This tool reads those files from the folder given on the command line; nothing of the peer is copied here.
The case parameters (energy, intensity, tunes, slicing, resonator, resistive wall, table columns) are parsed
from the peer's scripts at run time.

What the peer scripts do, and what is reproduced here (numpy, written from their description):
  - per turn: a linear transverse one-turn map (alpha = 0, beta_x, beta_y, tunes Q_x, Q_y), a linear
    synchrotron map (momentum compaction, Q_s), then the slicing: the particles are sorted by z, and cut into
    n_slices equal slices between mean(z) -+ nsigmaz std(z) (population std), slice i = [edge_i, edge_i+1);
  - turns 0..3: the wakes kick the bunch; turn 4: the kicks are recorded, per particle in the z-sorted order of
    that turn: dipX, dipY, quadX, quadY (the reference files of the old PyHEADTAIL hold the quadrupolar kick
    alone, G_i x: their difference to G_i x is constant over a slice and equal to -dipX; the 2014 scripts' own
    "new" quadX is xp - xp_before, dipolar + quadrupolar);
  - kick on slice i: -e^2 N/(N_mp m gamma beta^2 c^2) sum_j n_j <x>_j W(z_i - z_j) with PyHEADTAIL's sign
    (W < 0 behind the source), i.e. fusetrack's Delta px = e Q_j <x>_j W_ft(t) / (beta0 p0c) with
    W_ft = -W_PyHT > 0 just behind a resonator;
  - particles outside the cuts keep the slice index that their array position had at an earlier turn (the
    slicer's index array is never reset); this PyHEADTAIL artefact is emulated to reproduce every particle,
    and the particles inside the cuts are also reported alone (fusetrack does not kick particles outside).

fusetrack is run in two ways:
  library  the wake library (ft::wakes, fusetrack/transverse_wakes.h) through a small C++ harness compiled
           against libfusetrack (into --work): the sources Resonator, ResistiveWall and read_pyheadtail_table
           with the cases' Yokoya factors (0.5 for all four components), convolve() on the sliced bunch.
           Kernel "point": the point sample W(t) at the slice-centre delays, as PyHEADTAIL does (its
           resistive wall is 0 for delays below dz_min, i.e. on the slice itself); kernel "ft": fusetrack's own
           sample_wake() (for the resistive wall the hat-kernel average, finite on the slice itself).
           Turns 0..3 are tracked with the library's point kicks in PyHEADTAIL's constants (the column
           "CODATA 2010"), so that turn 4 sees PyHEADTAIL's bunch: with fusetrack's constants in the history the
           turn-4 kicks move by ~1e-10 (a wake kick is ~1e-3 of the slice centroids' spread in xp).
  element  the TransverseWake element through the Python module (build/python), one element in a lattice,
           cuts = PyHEADTAIL's cuts of turn 4, one turn tracked: Delta px, Delta py per particle. The element's
           analytic sources know only round (dipolar 1, quadrupolar 0) and flat chambers (Yokoya factors), so for
           the resonator and the wall the dipolar kicks come from a round chamber with R_perp or L halved (the
           factor 0.5) and the quadrupolar ones from a flat chamber scaled by 24/pi^2 (quadrupolar -0.5 and +0.5,
           its dipolar part subtracted); the table case has all four components.

Usage (python3 with numpy, a C++ compiler, fusetrack built in --build; about 15 s on 2 cores):
    python3 validation/compare_pyheadtail_wakes.py PATH [--build build] [--work .peers/pyheadtail_wakes]
        [--no-element] [--no-pairs]
PATH: the peer's impedance_test folder (holding initBunch/, resultsOldPyHT/, the scripts and the table).
"""
import argparse
import ast
import math
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C_LIGHT = 299792458.0
E_CHARGE = 1.602176634e-19
MP_EV = 938272088.16  # proton mass [eV] (CODATA 2018, fusetrack's lattices)
# PyHEADTAIL (2014) took e and m_p from scipy.constants, then CODATA 2010:
E_2010, MP_KG_2010 = 1.602176565e-19, 1.672621777e-27
MP_EV_2010 = MP_KG_2010 * C_LIGHT ** 2 / E_2010
MU0 = 1.25663706212e-6  # fusetrack's (CODATA 2018)

HARNESS = r"""
// Reads: kernel(point|ft) case(resonator|rw|table) params...; dt n; n lines 'charge x y'.
// Writes per slice: D_x D_y G_x G_y (ft::wakes::SliceKicks: V and V/m).
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>
#include "fusetrack/transverse_wakes.h"
using namespace ft::wakes;
int main() {
  std::string kernel, kind;
  std::cin >> kernel >> kind;
  std::shared_ptr<WakeSource> src;
  bool singular = false;
  if (kind == "resonator" || kind == "rw") {
    double a, b, c, fx1, fy1, fx2, fy2;
    std::cin >> a >> b >> c >> fx1 >> fy1 >> fx2 >> fy2;
    ComponentFactors f;
    f.value = {0.0, fx1, fy1, fx2, fy2};
    if (kind == "resonator") src = std::make_shared<Resonator>(a, b, c, f);
    else { src = std::make_shared<ResistiveWall>(a, b, c, f); singular = true; }
  } else {
    std::string path; int nc; std::cin >> path >> nc;
    std::vector<std::string> cols(nc);
    for (auto& s : cols) std::cin >> s;
    src = std::make_shared<WakeTable>(read_pyheadtail_table(path, cols));
  }
  double dt; int n;
  std::cin >> dt >> n;
  SliceMoments m;
  m.charge.resize(n); m.x.resize(n); m.y.resize(n);
  for (int i = 0; i < n; ++i) std::cin >> m.charge[i] >> m.x[i] >> m.y[i];
  SampledWake w;
  if (kernel == "ft" || kernel == "ft_noself") {
    w = sample_wake(*src, dt, n);
    if (kernel == "ft_noself")
      for (auto& kc : w.k)
        if (!kc.empty()) kc[0] = 0.0;
  } else {  // point samples W(k dt); the self-slice k = 0 as PyHEADTAIL: 0 for the wall (dz_min), W(0) else
    w.dt = dt;
    for (int c = 0; c < kComponents; ++c) {
      if (!src->has(Component(c))) continue;
      w.k[c].resize(n);
      for (int k = 0; k < n; ++k) w.k[c][k] = (k == 0 && singular) ? 0.0 : src->wake(Component(c), k * dt);
    }
  }
  SliceKicks kk = convolve(w, m);
  std::cout.precision(17);
  for (int i = 0; i < n; ++i)
    std::cout << kk.dipolar_x[i] << " " << kk.dipolar_y[i] << " " << kk.quadrupolar_x[i] << " "
              << kk.quadrupolar_y[i] << "\n";
  return 0;
}
"""

CASES = {"resonator": "test_wake_kicks_resonator.py", "resistive_wall": "test_wake_kicks_resistive_wall.py",
         "table": "test_wake_kicks_table.py"}


def parse_params(path):
    """Numeric assignments 'name = expression' of a peer script (literals and earlier names only), and
    list assignments of strings (the table's column names)."""
    env = {"np": np, "pi": math.pi}
    out = {}
    for line in open(path):
        m = re.match(r"\s*([A-Za-z_]\w*)\s*=\s*([^#]+)", line)
        if not m:
            continue
        name, expr = m.group(1), m.group(2).strip()
        try:
            node = ast.parse(expr, mode="eval")
        except SyntaxError:
            continue
        if isinstance(node.body, ast.List) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                   for e in node.body.elts):
            out[name] = [e.value for e in node.body.elts]
            continue
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if not names <= set(env) | {"np"}:
            continue
        try:
            v = eval(compile(node, "<param>", "eval"), {"__builtins__": {}}, env)
        except Exception:
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            env[name] = float(v)
            out[name] = float(v)
    text = open(path).read()
    for m in re.finditer(r"(\w+)\s*=\s*(\[[^\]]*\])", text, re.S):
        try:
            v = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError):
            continue
        if v and all(isinstance(e, str) for e in v):
            out[m.group(1)] = v
    # string assignments (the table file name)
    for line in open(path):
        m = re.match(r"\s*(\w+)\s*=\s*wakepath\s*\+\s*'([^']+)'", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def slicing(z, n_slices, nsigmaz):
    """PyHEADTAIL's constant-space slicing of an already z-sorted bunch: (edges, first index of each slice,
    n_slices + 1 values)."""
    mean = z.mean()
    sig = math.sqrt(((z - mean) ** 2).mean())
    edges = np.linspace(mean - nsigmaz * sig, mean + nsigmaz * sig, n_slices + 1)
    first = np.searchsorted(z, edges)
    if edges[-1] in z:
        first[-1] += 1
    return edges, first


class Harness:
    def __init__(self, args):
        os.makedirs(args.work, exist_ok=True)
        src = os.path.join(args.work, "ft_wake_kicks.cpp")
        self.bin = os.path.join(args.work, "ft_wake_kicks")
        with open(src, "w") as f:
            f.write(HARNESS)
        lib = os.path.abspath(os.path.join(args.build, "lib"))
        subprocess.run([args.cxx, "-O2", "-std=c++17", "-I", os.path.join(ROOT, "framework", "include"), src,
                        "-o", self.bin, "-L", lib, "-Wl,-rpath," + lib, "-lfusetrack"], check=True)

    def kicks(self, spec, kernel, dt, charge, mx, my):
        inp = [kernel + " " + spec, "%.17g %d" % (dt, len(charge))]
        inp += ["%.17g %.17g %.17g" % t for t in zip(charge, mx, my)]
        out = subprocess.run([self.bin], input="\n".join(inp) + "\n", capture_output=True, text=True, check=True)
        return np.array([list(map(float, l.split())) for l in out.stdout.split("\n") if l.strip()])


def rel(a, b):
    """max and rms of |a - b| relative to max |b|."""
    s = np.abs(b).max()
    d = np.abs(a - b)
    return d.max() / s, math.sqrt((d ** 2).mean()) / s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("peer", help="PyHEADTAIL's test_scripts/impedance_test folder")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=os.path.join(ROOT, ".peers", "pyheadtail_wakes"))
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--no-element", action="store_true", help="skip the element (Python module) runs")
    ap.add_argument("--no-pairs", action="store_true",
                    help="skip the unsliced particle-pair sum of the resistive wall (about 15 s)")
    args = ap.parse_args()

    h = Harness(args)
    bunch0 = {k: np.loadtxt(os.path.join(args.peer, "initBunch", k + ".dat")) for k in
              ("x", "xp", "y", "yp", "z", "dp")}
    ft = None
    if not args.no_element:
        sys.path.insert(0, os.path.join(args.build, "python"))
        import fusetrack as ft

    print("fusetrack transverse wakes against PyHEADTAIL's reference kicks (resultsOldPyHT), %d macroparticles"
          % len(bunch0["x"]))
    print("error: max (rms) of |kick_ft - kick_PyHT| / max |kick_PyHT| over the particles; 'all': every particle\n"
          "(PyHEADTAIL's stale slice index emulated for those outside the cuts), else those inside the cuts.\n"
          "point: the library's W(t) at the slice delays (PyHEADTAIL's model); CODATA 2010: the same with\n"
          "PyHEADTAIL's e and m_p (and for the wall its factor sqrt(beta0) and Z0, see below); ft kernel:\n"
          "fusetrack's sample_wake() (the element's kernel); no self: without the slice's wake on itself;\n"
          "element: the TransverseWake element through the Python module")
    summary = []
    for case, script in CASES.items():
        P = parse_params(os.path.join(args.peer, script))
        gamma, intensity = P["gamma"], P["intensity"]
        beta = math.sqrt(1 - 1 / gamma ** 2)
        p0c = math.sqrt(gamma ** 2 - 1) * MP_EV
        n_mp = int(P["n_macroparticles"])
        n_slices, nsig = int(P["n_slices_for_wakes"]), float(
            re.search(r"nsigmaz\s*=\s*([0-9.]+)", open(os.path.join(args.peer, script)).read()).group(1))
        eta = P["alpha_0"] - 1 / gamma ** 2
        omega_s = P["Q_s"] * 2 * math.pi * beta * C_LIGHT / P["C"]
        yok = tuple(P.get(k, 1.0) for k in ("Yokoya_X1", "Yokoya_Y1", "Yokoya_X2", "Yokoya_Y2"))
        if case == "resonator":
            spec = "resonator %.17g %.17g %.17g %g %g %g %g" % ((P["R_shunt"], P["frequency"], P["Q"]) + yok)
            el_src = {"type": "Resonator", "r_shunt": P["R_shunt"] * yok[0], "q": P["Q"], "frequency": P["frequency"]}
        elif case == "resistive_wall":
            spec = "rw %.17g %.17g %.17g %g %g %g %g" % ((P["pipe_radius"], P["resistive_wall_length"],
                                                         P["conductivity"]) + yok)
            el_src = {"type": "ResistiveWall", "radius": P["pipe_radius"],
                      "length": P["resistive_wall_length"] * yok[0], "conductivity": P["conductivity"]}
        else:
            # Names the fusetrack reader knows; the peer's extra columns 'xterms1', 'xterms2' are cross terms that
            # its WakeTable does not use either (not in its list of keys): read here as dipole_xy/yx and ignored.
            cols = [{"xterms1": "dipole_xy", "xterms2": "dipole_yx"}.get(c, c) for c in P["wake_file_columns"]]
            tpath = os.path.abspath(os.path.join(args.peer, P["wakefile"]))
            spec = "table %s %d %s" % (tpath, len(cols), " ".join(cols))
            el_src = {"type": "WakeTable", "file": tpath, "format": "pyheadtail", "columns": cols}
            yok = (1, 1, 1, 1)
        mux, muy = 2 * math.pi * P["Q_x"], 2 * math.pi * P["Q_y"]
        bx, by = P["beta_x"], P["beta_y"]
        b = {k: v.copy() for k, v in bunch0.items()}
        stale = np.zeros(n_mp, dtype=int)  # PyHEADTAIL's slice index array, by array position
        for turn in range(5):
            b["x"], b["xp"] = (math.cos(mux) * b["x"] + bx * math.sin(mux) * b["xp"],
                               -math.sin(mux) / bx * b["x"] + math.cos(mux) * b["xp"])
            b["y"], b["yp"] = (math.cos(muy) * b["y"] + by * math.sin(muy) * b["yp"],
                               -math.sin(muy) / by * b["y"] + math.cos(muy) * b["yp"])
            cq, sq = math.cos(2 * math.pi * P["Q_s"]), math.sin(2 * math.pi * P["Q_s"])
            b["z"], b["dp"] = (b["z"] * cq - eta * C_LIGHT / omega_s * b["dp"] * sq,
                               b["dp"] * cq + omega_s / eta / C_LIGHT * b["z"] * sq)
            order = np.argsort(b["z"], kind="stable")
            b = {k: v[order] for k, v in b.items()}
            edges, first = slicing(b["z"], n_slices, nsig)
            cnt = np.diff(first)
            for i in range(n_slices):
                stale[first[i]:first[i + 1]] = i
            mx = np.array([b["x"][first[i]:first[i + 1]].mean() if cnt[i] else 0.0 for i in range(n_slices)])
            my = np.array([b["y"][first[i]:first[i + 1]].mean() if cnt[i] else 0.0 for i in range(n_slices)])
            # fusetrack's slices run head first (delay order): reverse PyHEADTAIL's tail-first order
            charge = E_CHARGE * intensity / n_mp * cnt[::-1]
            dz = edges[1] - edges[0]
            dt = dz / (beta * C_LIGHT)
            to_px = 1.0 / (beta * p0c)  # q0 = 1: Delta px = q0 V / (beta0 p0c[eV])
            # the same with PyHEADTAIL's constants: charge and p0c scale, Delta px by e_2010 MP_EV / (e MP_EV_2010)
            c2010 = (E_2010 / E_CHARGE) * (MP_EV / MP_EV_2010)
            res = {}
            for kern in ("point", "point2010", "ft", "ft_noself"):
                k = h.kicks(spec, kern.replace("2010", ""), dt, charge, mx[::-1], my[::-1])[::-1] * to_px
                if kern == "point2010":
                    k = k * c2010
                    if case == "resistive_wall":
                        # PyHEADTAIL's wall: beta c Z0 ... sqrt(lambda/(pi |z|)), |z| = beta c t, and
                        # Z0 = 4 pi 1e-7 c (scipy 2014) where fusetrack has mu0 = 1.25663706212e-6 (CODATA 2018)
                        k = k * math.sqrt(beta) * math.sqrt(4e-7 * math.pi / MU0)
                ix = stale
                dipx, dipy = k[ix, 0], k[ix, 1]
                res[kern] = {"dipX": dipx, "dipY": dipy, "quadX": k[ix, 2] * b["x"], "quadY": k[ix, 3] * b["y"]}
            if turn < 4:
                b["xp"] = b["xp"] + res["point2010"]["dipX"] + res["point2010"]["quadX"]
                b["yp"] = b["yp"] + res["point2010"]["dipY"] + res["point2010"]["quadY"]
        # the bunch and kicks of turn 4, for inspection
        np.savez(os.path.join(args.work, "state_%s.npz" % case), stale=stale, first=first, edges=edges,
                 **{k: v for k, v in b.items()}, **{"pt_" + k: v for k, v in res["point"].items()})
        inside = np.zeros(n_mp, dtype=bool)
        inside[first[0]:first[-1]] = True
        print("\n== %s (%s) ==" % (case, script))
        print("  turn 4 cuts [%.6f, %.6f] m, %d slices of %.3e s; %d of %d particles inside the cuts" %
              (edges[0], edges[-1], n_slices, dt, inside.sum(), n_mp))
        el = None
        if ft is not None:
            def element_kicks(quad, src):
                wake = {"type": "TransverseWake", "n_slices": n_slices, "zeta_min": float(edges[0]),
                        "zeta_max": float(edges[-1]), "intensity": intensity, "quadrupolar_x": quad,
                        "quadrupolar_y": quad, "moment_range_xy": 0.01, "moment_range_pxy": 1e-3,
                        "sources": [src]}
                lat = ft.Lattice.from_dict({"fusetrack_lattice": 1,
                                            "reference": {"mass0": MP_EV, "q0": 1, "p0c": p0c},
                                            "elements": {"wake": wake}, "sequence": ["wake"]})
                # px = py = 0 (the wake does not depend on them): the kick is read without the roundoff of
                # px + kick - px (a 1e-16 rad wall kick on px ~ 1e-6 would keep only 6 digits)
                zero = np.zeros(n_mp)
                part = ft.Particles.from_arrays(lat, x=b["x"], px=zero, y=b["y"], py=zero, zeta=b["z"], delta=b["dp"])
                ft.Tracker(lat, device="cpu", threads=1).track(part, 1)
                return np.asarray(part.px).copy(), np.asarray(part.py).copy()
            el = {}
            el["dipX"], el["dipY"] = element_kicks(0, el_src)
            if case == "table":
                qx, qy = element_kicks(1, el_src)
                el["quadX"], el["quadY"] = qx - el["dipX"], qy - el["dipY"]
            else:
                # quadrupolar through the flat chamber (Yokoya dipolar pi^2/24, pi^2/12, quadrupolar -pi^2/24,
                # +pi^2/24), the strength scaled by 24/pi^2: dipolar x 0.5 (as above), dipolar y 1.0 (twice the
                # above), quadrupolar x -0.5, y +0.5 (the cases' 0.5 with the flat chamber's signs)
                flat = dict(el_src, chamber="flat")
                key = "r_shunt" if case == "resonator" else "length"
                flat[key] = el_src[key] * 24 / math.pi ** 2
                qx, qy = element_kicks(1, flat)
                el["quadX"], el["quadY"] = -(qx - el["dipX"]), qy - 2 * el["dipY"]
        print("  %-6s %-19s | inside the cuts: %-19s %-19s %-19s %-19s %s" % (
            "kick", "point, all", "point", "point, CODATA 2010", "ft kernel", "ft kernel, no self", "element"))
        for comp in ("dipX", "dipY", "quadX", "quadY"):
            ref = np.loadtxt(os.path.join(args.peer, "resultsOldPyHT", "kicks_%s_%s.dat" % (comp, case)))
            cells = [rel(res["point"][comp], ref)]
            for kern in ("point", "point2010", "ft", "ft_noself"):
                cells.append(rel(res[kern][comp][inside], ref[inside]))
            cells.append(rel(el[comp][inside], ref[inside]) if el is not None and comp in el else None)
            print("  %-6s " % comp + " ".join("%-19s" % ("-" if c is None else "%.2e (%.1e)" % c) for c in cells))
            summary.append((case, comp, cells))
        if el is not None:
            print("  element against the library (fusetrack kernel and constants), inside the cuts: max %.2e" % max(
                rel(el[c][inside], res["ft"][c][inside])[0] for c in el))
        if case == "resistive_wall":
            print("  PyHEADTAIL's wall wake W(z) = beta c Z0 L/(pi b^3) sqrt(1/(Z0 sigma pi |z|)) is sqrt(beta0)\n"
                  "  times the thick-wall W(t) of fusetrack (and xwakes), 1 - sqrt(beta0) = %.2e; the 'CODATA 2010' column\n"
                  "  includes it. fusetrack's kernel is the hat average of 1/sqrt(t) (4/3 W(dt) on the slice itself,\n"
                  "  where PyHEADTAIL takes 0 below dz_min); 'no self' leaves out only the slice's own wake."
                  % (1 - math.sqrt(beta)))
        if case == "resistive_wall" and not args.no_pairs:
            # Which sliced model is closer to the unsliced wake? The dipolar x kick of every particle from every
            # particle ahead of it, W(t) = a / sqrt(t) (the thick wall, fusetrack's constants), averaged per slice.
            a_w = yok[0] * P["resistive_wall_length"] / (math.pi * P["pipe_radius"] ** 3) * math.sqrt(
                C_LIGHT * MU0 * C_LIGHT / (math.pi * P["conductivity"]))
            q_mp = E_CHARGE * intensity / n_mp
            zi, xi = b["z"][first[0]:first[-1]], b["x"][first[0]:first[-1]]
            kick = np.zeros(len(zi))
            for a0 in range(0, len(zi), 1000):
                d = zi[None, :] - zi[a0:a0 + 1000, None]  # > 0: the source is ahead of the witness
                w = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0) / (beta * C_LIGHT)), 0.0)
                kick[a0:a0 + 1000] = a_w * q_mp * to_px * (w @ xi)
            sl = stale[first[0]:first[-1]]
            ref = np.loadtxt(os.path.join(args.peer, "resultsOldPyHT", "kicks_dipX_%s.dat" % case))[first[0]:first[-1]]
            per = lambda v: np.array([v[sl == i].mean() for i in range(n_slices)])
            pair = per(kick)
            scale = np.abs(pair).max()
            err = lambda v: np.abs(per(v[first[0]:first[-1]]) - pair).max() / scale
            line = ("  unsliced pair sum of dipX (per-slice means): max |sliced - pairs| / max |pairs|: PyHEADTAIL %.3f, "
                    "fusetrack library kernel %.3f" % (np.abs(per(ref) - pair).max() / scale, err(res["ft"]["dipX"])))
            if el is not None:
                line += ", element %.3f" % err(el["dipX"])
            print(line)
        print("  (max |kick_PyHT| of dipX: %.3e rad)" % np.abs(
            np.loadtxt(os.path.join(args.peer, "resultsOldPyHT", "kicks_dipX_%s.dat" % case))).max())
    print("\nsummary, max relative error inside the cuts: point kernel (fusetrack's constants / CODATA 2010), "
          "fusetrack kernel, element")
    for case, comp, cells in summary:
        print("  %-15s %-6s %.2e / %.2e   %.2e   %s" % (case, comp, cells[1][0], cells[2][0], cells[3][0],
                                                     "-" if cells[5] is None else "%.2e" % cells[5][0]))

if __name__ == "__main__":
    main()
