"""Plot of the optics along a ring: beta functions and dispersion against s.

Usage: python3 -m fusetrack.plot.optics TABLE OUTPUT [--title TEXT]
  TABLE   the table `fusetrack optics --twiss-table` wrote (.npz or .csv)
  OUTPUT  the image to write (.png, .pdf or .svg)
Top: beta_x and beta_y (modes 1 and 2 in their own planes); for a coupled ring also the
cross terms beta_1y and beta_2x (Mais-Ripken), dashed. Bottom: the dispersion D_x and D_y.
"""
import argparse
import csv

import numpy as np
from matplotlib.figure import Figure

COLUMNS = ("s", "beta_x", "beta_y", "beta_1y", "beta_2x", "dx", "dy", "mu_x", "mu_y")


def read_table(path):
    """The columns of a Twiss table file (.npz or .csv) that the plot uses, as float arrays by name."""
    if str(path).endswith(".npz"):
        with np.load(path) as data:
            return {c: np.asarray(data[c], dtype=float) for c in COLUMNS}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {c: np.array([float(r[c]) for r in rows]) for c in COLUMNS}


def optics_figure(table, title=""):
    """Beta functions (top) and dispersion (bottom) against s; `table`: columns by name (read_table)."""
    t = table
    s = t["s"]
    coupled = max(np.max(t["beta_1y"]), np.max(t["beta_2x"])) > 1e-6 * max(np.max(t["beta_x"]), np.max(t["beta_y"]))

    fig = Figure(figsize=(10, 6.5))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    top.plot(s, t["beta_x"], color="tab:blue", lw=1.1, label=r"$\beta_x$ ($\beta_{1x}$)")
    top.plot(s, t["beta_y"], color="tab:red", lw=1.1, label=r"$\beta_y$ ($\beta_{2y}$)")
    if coupled:
        top.plot(s, t["beta_1y"], color="tab:blue", lw=0.9, ls="--", label=r"$\beta_{1y}$")
        top.plot(s, t["beta_2x"], color="tab:red", lw=0.9, ls="--", label=r"$\beta_{2x}$")
    top.set_ylabel(r"$\beta$ [m]")
    top.legend(loc="upper right", ncol=4 if coupled else 2, fontsize=9)
    top.grid(alpha=0.3)
    prefix = title + ": " if title else ""
    top.set_title(f"{prefix}Q1 = {t['mu_x'][-1]:.5f}, Q2 = {t['mu_y'][-1]:.5f}")

    bottom.plot(s, t["dx"], color="tab:green", lw=1.1, label=r"$D_x$")
    if np.max(np.abs(t["dy"])) > 0.0:
        bottom.plot(s, t["dy"], color="tab:purple", lw=1.1, label=r"$D_y$")
    bottom.set_xlabel("s [m]")
    bottom.set_ylabel("D [m]")
    bottom.legend(loc="upper right", fontsize=9)
    bottom.grid(alpha=0.3)
    bottom.set_xlim(s[0], s[-1])
    fig.tight_layout()
    return fig


def write_plots(table_path, output, title=""):
    """Draws the optics of the Twiss table file `table_path` into the image `output`; returns [output]."""
    optics_figure(read_table(table_path), title).savefig(output, dpi=130)
    return [output]


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.optics``; `argv`: its arguments, default sys.argv)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table")
    parser.add_argument("output")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    write_plots(args.table, args.output, args.title)


if __name__ == "__main__":
    main()
