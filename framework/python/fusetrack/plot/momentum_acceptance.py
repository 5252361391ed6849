"""Plot of a local momentum acceptance written by `fusetrack momentum-acceptance` (-o DIR): delta+ and
delta- against s (momentum_acceptance.csv) and, when the Touschek lifetime was computed, the local
Touschek loss rate against s below it (touschek_rate.csv).

Usage: python3 -m fusetrack.plot.momentum_acceptance DIR   (writes DIR/momentum_acceptance.png)
"""
import argparse
import json
import os

import numpy as np
from matplotlib.figure import Figure


def read_acceptance(directory):
    """(acceptance, rate, summary): the acceptance table (NumPy record array), the Touschek rate table or
    None, and summary.json."""
    acceptance = np.genfromtxt(os.path.join(directory, "momentum_acceptance.csv"), delimiter=",", names=True,
                               dtype=None, encoding="utf-8")
    acceptance = np.atleast_1d(acceptance)
    rate_path = os.path.join(directory, "touschek_rate.csv")
    rate = np.atleast_1d(np.genfromtxt(rate_path, delimiter=",", names=True)) if os.path.exists(rate_path) else None
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    return acceptance, rate, summary


def acceptance_figure(acceptance, rate=None, summary=None):
    """delta+ and delta- [%] against s; the local Touschek rate against s in a second panel when given."""
    fig = Figure(figsize=(8.0, 5.6 if rate is not None else 3.8))
    axes = fig.subplots(2 if rate is not None else 1, 1, sharex=True, squeeze=False)[:, 0]
    ax = axes[0]
    s = acceptance["s"]
    ax.step(s, 100 * acceptance["delta_positive"], where="post", color="C0", label=r"$\delta_+$")
    ax.step(s, 100 * acceptance["delta_negative"], where="post", color="C3", label=r"$\delta_-$")
    ax.plot(s, 100 * acceptance["delta_positive"], ".", color="C0", ms=3)
    ax.plot(s, 100 * acceptance["delta_negative"], ".", color="C3", ms=3)
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_ylabel("momentum acceptance [%]")
    title = "local momentum acceptance"
    if summary:
        title += f" ({summary['turns']} turns, precision {summary['precision']:g})"
        touschek = summary.get("touschek")
        if touschek:
            hours = touschek.get("lifetime_h")  # null when no rate (an infinite lifetime)
            title += f"; Touschek lifetime {hours:.3g} h" if hours is not None else "; no Touschek loss"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    if rate is not None:
        axes[1].plot(rate["s"], rate["rate"], color="C2")
        axes[1].set_ylabel("Touschek rate [1/s]")
        axes[1].grid(alpha=0.3)
    axes[-1].set_xlabel("s [m]")
    fig.tight_layout()
    return fig


def write_plots(directory):
    """Draws the plot of the acceptance in `directory` into it; returns the files written."""
    acceptance, rate, summary = read_acceptance(directory)
    path = os.path.join(directory, "momentum_acceptance.png")
    acceptance_figure(acceptance, rate, summary).savefig(path, dpi=120)
    return [path]


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.momentum_acceptance``; `argv`: its arguments)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="output directory of `fusetrack momentum-acceptance`")
    args = parser.parse_args(argv)
    print("plots: " + ", ".join(write_plots(args.directory)))


if __name__ == "__main__":
    main()
