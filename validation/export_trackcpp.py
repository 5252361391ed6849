#!/usr/bin/env python3
"""Write a fusetrack JSON lattice as a trackcpp flat file (the text format of trackcpp's
read_flat_file / write_flat_file), for benchmarks and cross-checks against trackcpp.

Usage: validation/export_trackcpp.py LATTICE.json -o RING.txt [--cavity-off] [--quiet]

Python standard library only. The file is written as trackcpp's own writer
(write_flat_file_trackcpp, src/flat_file.cpp) writes it: the header lines "% key value", then one
block per element of the expanded sequence ("fam_name", "length", "pass_method", then the fields
that differ from trackcpp's defaults), numbers as %+.17E, polynom lines as "ORDER VALUE " pairs
(each pair ends in a space: trackcpp's reader drops a last pair without one).

The sequence is expanded as fusetrack expands it (framework/src/core/sequence_expander.cpp): an
entry is an element or line name, or {"line": NAME, "repeat": N}; lines may nest.

Element mapping (the inverse of fusetrack's trackcpp import, framework/src/io/trackcpp_import.cpp,
so that `fusetrack import RING.txt` gives back the same elements up to rounding):
  Marker          identity_pass
  Drift           drift_pass (trackcpp's and fusetrack's drifts are both the expanded drift)
  ThickMultipole  str_mpole_symplectic4_pass, polynom_b[n] = kn[n] / n!, polynom_a[n] = ks[n] / n!,
                  nr_steps = num_slices (0 -> 10, AT's default); integrator must be 0 (Forest-Ruth)
  Bend            bnd_mpole_symplectic4_pass, angle, polynom_b[1] = k1, polynom_b[2] = k2 / 2,
                  polynom_b[3] = k3 / 6, polynom_a[n] = k{n}s / n!, knl / ksl added as
                  knl[n] / (length n!); angle_in / angle_out = edge_entry_angle / edge_exit_angle,
                  gap = 2 hgap (trackcpp has one gap: the entry and exit half gaps must be equal),
                  fint_in / fint_out; nr_steps = num_slices (0 -> 10); model 0 and integrator 0 only.
                  k0_from_h = 0 with k0 != h: polynom_b[0] = k0 - h (a warning: trackcpp's
                  curvature term is h^2 x, fusetrack's h k0 x).
  Cavity          cavity_pass (thin, length 0): voltage; frequency = the given one or
                  harmonic beta0 c / C (C = the sum of the lengths, as fusetrack); phase_lag =
                  pi - (lag pi / 180 + phase), so that trackcpp's
                  de += -(V/E0) sin(2 pi f dl / c - phase_lag) is fusetrack's
                  dE/E0 = (V/E0) sin(lag pi/180 + phase - 2 pi f zeta / (beta0 c)) with dl = -zeta.
Anything else (other types, misalignment fields, model/integrator other than those above, inactive
or "fdown" edges) is refused with the element named: trackcpp would track something else.

Header: energy = sqrt(p0c^2 + mass0^2) [eV] (trackcpp tracks ultra-relativistic electrons; another
particle is refused), harmonic_number (the cavity's harmonic, 0 if none), cavity_on true (unless
--cavity-off), radiation_on 0, vchamber_on false (the lattice has no apertures; fusetrack's global
aperture, 1 m by default, has no trackcpp counterpart: trackcpp loses a particle only when x or y is
not finite).

Coordinates (documented here for the benchmark): trackcpp (rx, px, ry, py, de, dl) =
fusetrack (x, px, y, py, delta, -zeta); trackcpp times the flight with velocity c, fusetrack with the
particle's velocity (a difference of order delta / gamma0^2 in dl per metre).
"""
import argparse
import json
import math
import sys

C_LIGHT = 299792458.0
DEG2RAD = 0.017453292519943295  # as fusetrack's Cavity_prepare
ELECTRON_MASS_EV = 510998.95
TRANSFORM_FIELDS = ("shift_x", "shift_y", "shift_s", "rot_x_rad", "rot_y_rad", "rot_s_rad",
                    "rot_s_rad_no_frame", "rot_shift_anchor")
MAX_ORDER = 5  # fusetrack's FT_MAGNET_MAX_ORDER


class ExportError(Exception):
    pass


def expand_sequence(doc, path):
    elements = doc["elements"]
    lines = doc.get("lines", {})
    out = []

    def walk(items, where, stack):
        if not isinstance(items, list):
            raise ExportError(f"{path}: {where} must be an array of names")
        for i, item in enumerate(items):
            repeat = 1
            if isinstance(item, str):
                name = item
            elif isinstance(item, dict) and "line" in item:
                name = item["line"]
                repeat = int(item.get("repeat", 1))
                if repeat <= 0:
                    raise ExportError(f"{path}: {where}[{i}]: repeat must be positive")
            else:
                raise ExportError(f"{path}: {where}[{i}]: expected a name or {{\"line\": ..., \"repeat\": ...}}")
            if name in lines and name in elements:
                raise ExportError(f"{path}: '{name}' names both an element and a line")
            for _ in range(repeat):
                if name in lines:
                    if name in stack:
                        raise ExportError(f"{path}: line '{name}' contains itself")
                    walk(lines[name], f"lines.{name}", stack + [name])
                elif name in elements:
                    out.append(name)
                else:
                    raise ExportError(f"{path}: {where}[{i}]: '{name}' is neither an element nor a line")

    walk(doc["sequence"], "sequence", [])
    return out


def num(v):
    return f"{float(v):+.17E}"


def polynom_line(label, p):
    words = "".join(f"{i} {num(v)} " for i, v in enumerate(p) if v != 0.0)
    return f"{label:<16}{words}\n" if words else ""


def steps_from(name, e):
    n = int(e.get("num_slices", 0))
    if int(e.get("integrator", 0)) != 0:
        raise ExportError(f"element '{name}' ({e['type']}): integrator {e.get('integrator')} is not Forest-Ruth (0); "
                          "trackcpp's symplectic4 passes integrate with Forest-Ruth only")
    return 10 if n == 0 else n


def check_fields(name, e, allowed):
    for k, v in e.items():
        if k == "type":
            continue
        if k in TRANSFORM_FIELDS:
            if float(v) != 0.0:
                raise ExportError(f"element '{name}': {k} = {v} (misalignments are not exported)")
            continue
        if k not in allowed:
            raise ExportError(f"element '{name}' ({e['type']}): field '{k}' has no trackcpp counterpart in this exporter")


def arr(e, key):
    a = [float(x) for x in e.get(key, [])]
    if len(a) > MAX_ORDER + 1:
        raise ExportError(f"{key} has more than {MAX_ORDER + 1} entries")
    return a + [0.0] * (MAX_ORDER + 1 - len(a))


def element_block(name, e, ctx, warnings):
    t = e.get("type")
    L = float(e.get("length", 0.0))
    fields = []  # (key, text) after pass_method
    if t == "Marker":
        check_fields(name, e, {"tag"})
        pm = "identity_pass"
        L = 0.0
    elif t == "Drift":
        check_fields(name, e, {"length"})
        pm = "drift_pass"
    elif t == "ThickMultipole":
        check_fields(name, e, {"length", "kn", "ks", "integrator", "num_slices"})
        pm = "str_mpole_symplectic4_pass"
        kn, ks = arr(e, "kn"), arr(e, "ks")
        pb = [kn[n] / math.factorial(n) for n in range(MAX_ORDER + 1)]
        pa = [ks[n] / math.factorial(n) for n in range(MAX_ORDER + 1)]
        nsteps = steps_from(name, e)
        if nsteps != 1:
            fields.append(f"{'nr_steps':<16}{nsteps}\n")
        fields.append(polynom_line("polynom_a", pa))
        fields.append(polynom_line("polynom_b", pb))
    elif t == "Bend":
        check_fields(name, e, {"length", "angle", "k0", "k0_from_h", "k1", "k2", "k3", "k0s", "k1s", "k2s", "k3s",
                               "knl", "ksl", "model", "integrator", "num_slices", "edge_entry_angle",
                               "edge_exit_angle", "edge_entry_angle_fdown", "edge_exit_angle_fdown",
                               "edge_entry_hgap", "edge_exit_hgap", "edge_entry_fint", "edge_exit_fint",
                               "edge_entry_active", "edge_exit_active"})
        if int(e.get("model", 0)) != 0:
            raise ExportError(f"element '{name}' (Bend): model {e['model']} is not 0 (expanded, trackcpp's)")
        for k in ("edge_entry_angle_fdown", "edge_exit_angle_fdown"):
            if float(e.get(k, 0.0)) != 0.0:
                raise ExportError(f"element '{name}' (Bend): {k} != 0 has no trackcpp counterpart")
        for k in ("edge_entry_active", "edge_exit_active"):
            if int(e.get(k, 1)) != 1:
                raise ExportError(f"element '{name}' (Bend): {k} = 0 has no trackcpp counterpart")
        if L == 0.0:
            raise ExportError(f"element '{name}' (Bend): zero length")
        hg_in, hg_out = float(e.get("edge_entry_hgap", 0.0)), float(e.get("edge_exit_hgap", 0.0))
        if hg_in != hg_out:
            raise ExportError(f"element '{name}' (Bend): entry and exit half gaps differ ({hg_in}, {hg_out}); "
                              "trackcpp has one gap")
        pm = "bnd_mpole_symplectic4_pass"
        angle = float(e.get("angle", 0.0))
        h = angle / L
        knl, ksl = arr(e, "knl"), arr(e, "ksl")
        pb = [knl[n] / (L * math.factorial(n)) for n in range(MAX_ORDER + 1)]
        pa = [ksl[n] / (L * math.factorial(n)) for n in range(MAX_ORDER + 1)]
        for n in range(4):
            pb[n] += float(e.get(f"k{n}", 0.0)) / math.factorial(n) if n > 0 else 0.0
            pa[n] += float(e.get(f"k{n}s", 0.0)) / math.factorial(n)
        if int(e.get("k0_from_h", 1)) == 0:
            pb[0] += float(e.get("k0", 0.0)) - h
        if pb[0] != 0.0:
            warnings.append(f"element '{name}' (Bend): polynom_b[0] = {pb[0]:.6g}: trackcpp's curvature term is h^2 x, "
                            "fusetrack's h (h + b0) x, and the edges differ likewise")
        nsteps = steps_from(name, e)
        if nsteps != 1:
            fields.append(f"{'nr_steps':<16}{nsteps}\n")
        fields.append(polynom_line("polynom_a", pa))
        fields.append(polynom_line("polynom_b", pb))
        if angle != 0.0:
            fields.append(f"{'angle':<16}{num(angle)}\n")
        if hg_in != 0.0:
            fields.append(f"{'gap':<16}{num(2.0 * hg_in)}\n")
        for src, dst in (("edge_entry_fint", "fint_in"), ("edge_exit_fint", "fint_out")):
            if float(e.get(src, 0.0)) != 0.0:
                fields.append(f"{dst:<16}{num(e[src])}\n")
        for src, dst in (("edge_entry_angle", "angle_in"), ("edge_exit_angle", "angle_out")):
            if float(e.get(src, 0.0)) != 0.0:
                fields.append(f"{dst:<16}{num(e[src])}\n")
        if angle != 0.0 and any(float(e.get(k, 0.0)) != 0.0 for k in ("edge_entry_angle", "edge_exit_angle",
                                                                       "edge_entry_fint", "edge_exit_fint")):
            ctx["edge_warning"] = True
    elif t == "Cavity":
        check_fields(name, e, {"voltage", "frequency", "lag", "phase", "harmonic"})
        pm = "cavity_pass"
        L = 0.0
        voltage = float(e["voltage"])
        f = float(e.get("frequency", 0.0))
        harmonic = float(e.get("harmonic", 0.0))
        if harmonic != 0.0:
            if f != 0.0:
                raise ExportError(f"element '{name}' (Cavity): frequency and harmonic both non-zero")
            f = harmonic / (ctx["circumference"] / (ctx["beta0"] * C_LIGHT))
            ctx["harmonics"].add(harmonic)
        phase_lag = math.pi - (DEG2RAD * float(e.get("lag", 0.0)) + float(e.get("phase", 0.0)))
        if abs(phase_lag) < 1e-15:
            phase_lag = 0.0  # lag = 180 deg: pi - pi up to one rounding
        if voltage != 0.0:
            fields.append(f"{'voltage':<16}{num(voltage)}\n")
        if f != 0.0:
            fields.append(f"{'frequency':<16}{num(f)}\n")
        if phase_lag != 0.0:
            fields.append(f"{'phase_lag':<16}{num(phase_lag)}\n")
    else:
        raise ExportError(f"element '{name}': type {t} has no trackcpp pass method in this exporter "
                          "(Marker, Drift, ThickMultipole, Bend, Cavity)")
    head = f"{'fam_name':<16}{name}\n{'length':<16}{num(L)}\n{'pass_method':<16}{pm}\n"
    return head + "".join(fields), L


def export(path, cavity_on=True):
    with open(path) as fp:
        doc = json.load(fp)
    if "fusetrack_lattice" not in doc:
        raise ExportError(f"{path}: not a fusetrack lattice (no 'fusetrack_lattice' key)")
    ref = doc["reference"]
    mass0, q0, p0c = float(ref["mass0"]), float(ref["q0"]), float(ref["p0c"])
    if abs(mass0 - ELECTRON_MASS_EV) > 1.0 or abs(q0) != 1.0:
        raise ExportError(f"{path}: trackcpp tracks electrons; reference mass0 = {mass0} eV, q0 = {q0}")
    energy = math.sqrt(p0c * p0c + mass0 * mass0)
    seq = expand_sequence(doc, path)
    elements = doc["elements"]
    circumference = 0.0
    for n in seq:  # fusetrack sums the lengths in sequence order
        circumference += float(elements[n].get("length", 0.0)) if elements[n]["type"] != "Cavity" else 0.0
    ctx = {"circumference": circumference, "beta0": p0c / energy, "harmonics": set(), "edge_warning": False}
    warnings = []
    blocks = []
    cache = {}
    for i, n in enumerate(seq):
        if n not in cache:
            cache[n] = element_block(n, elements[n], ctx, warnings)[0]
        blocks.append(f"### {i:04d} ###\n" + cache[n] + "\n")
    if len(ctx["harmonics"]) > 1:
        warnings.append(f"cavities with different harmonics {sorted(ctx['harmonics'])}: harmonic_number is the first")
    harmonic_number = int(sorted(ctx["harmonics"])[0]) if ctx["harmonics"] else 0
    if ctx["edge_warning"]:
        warnings.append("bend edges: trackcpp divides the edge kicks by (1 + de), fusetrack's linear edges do not "
                        "(equal on momentum)")
    header = (f"{'% energy':<18}{energy:.17E} eV\n"
              f"{'% harmonic_number':<18}{harmonic_number}\n"
              f"{'% cavity_on':<18}{'true' if cavity_on else 'false'}\n"
              f"{'% radiation_on':<18}0\n"
              f"{'% vchamber_on':<18}false\n"
              f"{'% lattice_version':<18}{doc.get('lattice_version', 'fusetrack_export')}\n\n")
    info = {"elements": len(seq), "circumference": circumference, "energy": energy, "beta0": ctx["beta0"]}
    return header + "".join(blocks), warnings, info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lattice", help="fusetrack lattice JSON")
    ap.add_argument("-o", "--output", required=True, help="trackcpp flat file to write")
    ap.add_argument("--cavity-off", action="store_true", help="write 'cavity_on false' (trackcpp tracks cavities as drifts)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    try:
        text, warnings, info = export(a.lattice, cavity_on=not a.cavity_off)
    except (ExportError, KeyError, ValueError) as ex:
        print(f"export_trackcpp: {ex}", file=sys.stderr)
        return 2
    with open(a.output, "w") as fp:
        fp.write(text)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not a.quiet:
        print(f"wrote {a.output}: {info['elements']} elements, C = {info['circumference']:.10g} m, "
              f"E = {info['energy']:.10g} eV, beta0 = {info['beta0']:.17g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
