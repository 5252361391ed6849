"""Plots of a frequency map written by `fusetrack fma` (-o DIR): the tunes of the first window in tune
space and the initial amplitudes in amplitude space, each particle coloured by its tune diffusion index
log10 sqrt(dqx^2 + dqy^2) (fma.csv, summary.json); lost particles in grey in amplitude space.

Usage: python3 -m fusetrack.plot.fma DIR   (writes DIR/fma.png)
"""
import argparse
import json
import os

import numpy as np
from matplotlib.figure import Figure

DIFFUSION_RANGE = (-10.0, -2.0)  # colour scale of log10 |dq| (regular .. chaotic)


def read_fma(directory):
    """(table, summary): fma.csv as a NumPy record array and summary.json as a dict."""
    table = np.atleast_1d(np.genfromtxt(os.path.join(directory, "fma.csv"), delimiter=",", names=True))
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    return table, summary


def fma_figure(table, summary=None):
    """Tune space (qx1, qy1) and amplitude space (x, y of the grid), coloured by the diffusion index."""
    fig = Figure(figsize=(12.0, 5.2))
    ax_tune, ax_amp = fig.subplots(1, 2)
    d = table["diffusion"]
    finite = np.isfinite(d)
    lost = table["lost_turn"] >= 0
    vmin, vmax = DIFFUSION_RANGE
    if finite.any():
        vmin = min(vmin, float(np.nanmin(d[finite])))
        vmax = max(vmax, float(np.nanmax(d[finite])))
    style = dict(c=d[finite], cmap="jet", vmin=vmin, vmax=vmax, s=12)
    ax_tune.scatter(table["qx1"][finite], table["qy1"][finite], **style)
    if summary and summary.get("qx") is not None and summary.get("qy") is not None:
        ax_tune.plot([summary["qx"]], [summary["qy"]], "k+", ms=14, mew=2, label="optics tunes")
        ax_tune.legend(fontsize=8, loc="best")
    ax_tune.set_xlabel(r"$q_x$")
    ax_tune.set_ylabel(r"$q_y$")
    ax_tune.set_title("tune space (first window)", fontsize=10)
    ax_tune.grid(alpha=0.3)
    sc = ax_amp.scatter(table["grid_x"][finite], table["grid_y"][finite], **style)
    if lost.any():
        ax_amp.scatter(table["grid_x"][lost], table["grid_y"][lost], c="0.75", s=12, label="lost")
        ax_amp.legend(fontsize=8, loc="upper right")
    unit = summary.get("amplitude_unit", "m") if summary else "m"
    ax_amp.set_xlabel(f"x [{unit}]")
    ax_amp.set_ylabel(f"y [{unit}]")
    title = "amplitude space"
    if summary:
        title += f" ({summary['turns_per_window']} turns per window)"
    ax_amp.set_title(title, fontsize=10)
    ax_amp.grid(alpha=0.3)
    fig.colorbar(sc, ax=[ax_tune, ax_amp], label=r"$\log_{10}\sqrt{\Delta q_x^2 + \Delta q_y^2}$")
    return fig


def write_plots(directory):
    """Draws the frequency map in `directory` into it; returns the files written."""
    table, summary = read_fma(directory)
    path = os.path.join(directory, "fma.png")
    fma_figure(table, summary).savefig(path, dpi=120)
    return [path]


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.fma``; `argv`: its arguments)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="output directory of `fusetrack fma`")
    args = parser.parse_args(argv)
    print("plots: " + ", ".join(write_plots(args.directory)))


if __name__ == "__main__":
    main()
