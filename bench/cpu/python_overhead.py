#!/usr/bin/env python3
"""Python overhead benchmark: the same track from the fusetrack module and from the command line.

    PYTHONPATH=build/python python3 bench/cpu/python_overhead.py --build build --particles 1000000 --turns 1000 \
        --device gpu

Both sides track a grid of N particles (side x side, small amplitudes: nothing is lost) through a
lattice for T turns with the same backend, alternately, `--repeats` times each. Reported: the
tracking time of each (the CLI's "time" line; Python: perf_counter around Tracker.track) and the
whole-process wall time (load, particle set-up, tracking; the CLI writes no output file), the
medians, and their ratios. One line of result at the end.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

PY_RUN = r"""
import sys, time
t0 = time.perf_counter()
import fusetrack as ft
lattice, side, amp, turns, device, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
ring = ft.Lattice.from_file(lattice)
p = ft.Particles.grid(ring, amp / 10, amp, side, amp / 10, amp, side)
t = ft.Tracker(ring, device=device, threads=threads)
t1 = time.perf_counter()
t.track(p, turns)
t2 = time.perf_counter()
print(f"track {t2 - t1:.6f} total {t2 - t0:.6f} alive {p.alive_count} backend {t.backend}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"), help="build directory")
    ap.add_argument("--lattice", default=os.path.join(SOURCE, "lattices", "reference_sequence.json"))
    ap.add_argument("--particles", type=int, default=1_000_000, help="rounded up to a square grid")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--amplitude", type=float, default=1e-3, help="largest grid x, y [m]")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    side = math.isqrt(a.particles - 1) + 1
    cli = os.path.join(a.build, "bin", "fusetrack")
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    grid = [str(a.amplitude / 10), str(a.amplitude), str(side)] * 2
    cli_cmd = [cli, "track", a.lattice, "-n", str(a.turns), "--grid", *grid, "--device", a.device,
               "--threads", str(a.threads)]
    py_cmd = [sys.executable, "-c", PY_RUN, a.lattice, str(side), str(a.amplitude), str(a.turns), a.device,
              str(a.threads)]
    times = {"cli": [], "py": []}
    walls = {"cli": [], "py": []}
    alive = {}
    for r in range(a.repeats):
        for side_name, cmd in (("cli", cli_cmd), ("py", py_cmd)) if r % 2 == 0 else (("py", py_cmd), ("cli", cli_cmd)):
            t0 = time.perf_counter()
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - t0
            if out.returncode != 0:
                sys.exit(f"{side_name} failed:\n{out.stdout}\n{out.stderr}")
            if side_name == "cli":
                t = float(re.search(r"^time\s+([0-9.]+) s", out.stdout, re.M).group(1))
                alive["cli"] = int(re.search(r"(\d+) survived", out.stdout).group(1))
                backend = re.search(r"^backend\s+(.*)$", out.stdout, re.M).group(1)
            else:
                m = re.search(r"track ([0-9.]+) total [0-9.]+ alive (\d+) backend (.*)", out.stdout)
                t, alive["py"], backend_py = float(m.group(1)), int(m.group(2)), m.group(3)
            times[side_name].append(t)
            walls[side_name].append(wall)
            print(f"  {side_name:3s} repeat {r}: track {t:.3f} s, process {wall:.3f} s", flush=True)
    assert alive["cli"] == alive["py"], alive
    tc, tp = statistics.median(times["cli"]), statistics.median(times["py"])
    wc, wp = statistics.median(walls["cli"]), statistics.median(walls["py"])
    print(f"result: {side * side} particles x {a.turns} turns, {os.path.basename(a.lattice)}, {backend}: "
          f"track python/cli = {tp / tc:.4f} ({tp:.3f} s / {tc:.3f} s), process python/cli = {wp / wc:.4f} "
          f"({wp:.3f} s / {wc:.3f} s), medians of {a.repeats}")


if __name__ == "__main__":
    main()
