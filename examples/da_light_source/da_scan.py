#!/usr/bin/env python3
"""Dynamic-aperture scan of the light-source ring from Python, with a matplotlib plot.

    PYTHONPATH=build/python python3 examples/da_light_source/da_scan.py -o da.png

Runs fusetrack.da_scan (the same scan as `fusetrack da`, by default the README's: 1000 turns, 10 angles x
24 amplitudes from 0.2 to 7 mm) on lattices/mba_light_source.json and plots the initial conditions
coloured by the turn of loss, with the DA of each ray (the largest amplitude below the first loss).
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import fusetrack as ft  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lattice", default=os.path.join(HERE, "..", "..", "lattices", "mba_light_source.json"))
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--angles", type=int, default=10)
    ap.add_argument("--amplitudes", type=int, default=24)
    ap.add_argument("--amplitude-range", type=float, nargs=2, default=(0.0002, 0.007))
    ap.add_argument("--device", default="auto")
    ap.add_argument("-o", "--output", default="da_scan.png")
    a = ap.parse_args()

    ring = ft.Lattice.from_file(a.lattice)
    da = ft.da_scan(ring, turns=a.turns, angles=a.angles, amplitudes=a.amplitudes,
                    amplitude_range=a.amplitude_range, device=a.device)

    fig, ax = plt.subplots(figsize=(6, 5))
    lost = np.where(da["survived"], a.turns, da["lost_turn"])
    sc = ax.scatter(1e3 * da["grid_x"], 1e3 * da["grid_y"], c=lost, cmap="viridis", s=14, vmin=0, vmax=a.turns)
    fig.colorbar(sc, ax=ax, label="turns survived")
    rays = da["per_angle"]
    theta = np.radians(rays["angle"])
    ax.plot(1e3 * rays["da_last_stable"] * np.cos(theta), 1e3 * rays["da_last_stable"] * np.sin(theta), "r-o",
            ms=3, label=f"DA (min {1e3 * da['da_min']:.1f} mm)")
    ax.set_xlabel("x [mm]")
    ax.set_ylabel("y [mm]")
    ax.set_title(f"{os.path.basename(a.lattice)}: {a.turns} turns")
    ax.set_aspect("equal")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)
    print(f"DA min {da['da_min']:.6g} m, mean {da['da_mean']:.6g} m, max {da['da_max']:.6g} m "
          f"({da['backend']}); plot: {a.output}")


if __name__ == "__main__":
    main()
