#!/usr/bin/env python3
"""Lattice loading benchmark: time and peak memory against the number of elements.

Generates fusetrack lattice JSON files with N distinct element definitions (a thin FODO-like
pattern: drift, quadrupole multipole, drift, sextupole multipole, marker, each element its own
definition, as in a sliced thick lattice), one sequence entry per definition, and runs

    fusetrack track LATTICE -n 1 --grid 0 0 1 0 0 1 --device cpu

under /usr/bin/time -v: one particle for one turn, so the run is dominated by loading (JSON
parse, definitions, sequence expansion, prepare). A one-element lattice gives the fixed cost of
starting the program. Optionally also times an Xsuite import (--xsuite FILE, e.g. the CLIC
damping ring).

Usage:
    bench/cpu/lattice_loading.py [--fusetrack build/bin/fusetrack] [--sizes 10000 100000 1000000]
                           [--xsuite ../shared/lattices/xsuite/clic_damping_ring.json] [--repeat 3]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def write_lattice(path, n):
    """A lattice with n distinct definitions e0..e{n-1}, each used once, written streaming."""
    kinds = [
        lambda i: '{"type": "Drift", "length": %.17g}' % (0.5 + 1e-7 * (i % 1000)),
        lambda i: '{"type": "Multipole", "knl": [0.0, %.17g]}' % (0.01 * (1 + (i % 7))),
        lambda i: '{"type": "Drift", "length": %.17g}' % (0.25 + 1e-7 * (i % 997)),
        lambda i: '{"type": "Multipole", "knl": [0.0, %.17g, 0.001]}' % (-0.01 * (1 + (i % 5))),
        lambda i: '{"type": "Marker"}',
    ]
    with open(path, "w") as f:
        f.write('{\n  "fusetrack_lattice": 1,\n')
        f.write('  "description": "lattice_loading.py: %d distinct elements",\n' % n)
        f.write('  "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 7000000000000.0},\n')
        f.write('  "elements": {\n')
        for i in range(n):
            f.write('    "e%d": %s%s\n' % (i, kinds[i % len(kinds)](i), "," if i + 1 < n else ""))
        f.write('  },\n  "sequence": [\n')
        for i in range(n):
            f.write('    "e%d"%s\n' % (i, "," if i + 1 < n else ""))
        f.write("  ]\n}\n")


def run(fusetrack, lattice, timeout):
    """Runs one load; returns (wall seconds, max RSS MiB)."""
    cmd = ["/usr/bin/time", "-v", fusetrack, "track", lattice, "-n", "1", "--grid", "0", "0", "1", "0", "0", "1",
           "--device", "cpu"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("fusetrack failed on %s:\n%s%s" % (lattice, p.stdout, p.stderr))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rss = int(m.group(1)) / 1024.0 if m else float("nan")
    return wall, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--fusetrack", default=os.path.join(root, "build", "bin", "fusetrack"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    default_xsuite = os.path.join(root, "..", "shared", "lattices", "xsuite", "clic_damping_ring.json")
    ap.add_argument("--xsuite", nargs="*", default=[default_xsuite] if os.path.exists(default_xsuite) else [])
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the best time is reported")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    a = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="ft_lattice_loading_") as tmp:
        cases = [("fusetrack JSON, 1 element (start-up)", 1, None)]
        cases += [("fusetrack JSON, %d elements" % n, n, None) for n in a.sizes]
        cases += [("Xsuite import, %s" % os.path.basename(x), None, x) for x in a.xsuite]
        for label, n, path in cases:
            if path is None:
                path = os.path.join(tmp, "lattice_%d.json" % n)
                write_lattice(path, n)
            size_mb = os.path.getsize(path) / 1e6
            best_t, best_rss = float("inf"), 0.0
            for _ in range(a.repeat):
                t, rss = run(a.fusetrack, path, a.timeout)
                if t < best_t:
                    best_t, best_rss = t, rss
            rows.append((label, size_mb, best_t, best_rss))
            print("%-48s %8.1f MB file  %8.3f s  %8.1f MiB max RSS" % (label, size_mb, best_t, best_rss), flush=True)
            if n is not None and n > 1:
                os.remove(path)

    print("\n| lattice | file | load time (best of %d) | max RSS |" % a.repeat)
    print("|---|---:|---:|---:|")
    for label, size_mb, t, rss in rows:
        print("| %s | %.1f MB | %.3f s | %.0f MiB |" % (label, size_mb, t, rss))


if __name__ == "__main__":
    main()
