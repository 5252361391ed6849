"""Plots of a fusetrack collider run (`fusetrack collide SETUP.json -o DIR`).

Usage: python3 -m fusetrack.plot.collide DIR   (the directory the run wrote: bunches.csv, spectra.csv, summary.json)
Writes DIR/collide.png, four panels:
  luminosity   luminosity per crossing against turn, each bunch of beam 1
  centroids    centroid x and y against turn, each beam and bunch (each in its own beam's frame)
  emittances   rms geometric emittances x and y against turn, each beam and bunch
  spectra      centroid spectra (log amplitude against tune; spectra.csv, runs of 16 turns or more)
               with the unperturbed tunes Q of each beam, Q + xi and Q + 1.21 xi (Yokoya's factor
               for the pi mode of round beams), and the measured sigma and pi modes (one bunch per beam)
"""
import argparse
import json
import os

import numpy as np
from matplotlib.figure import Figure

YOKOYA_FACTOR = 1.21  # pi-mode tune shift / xi, two round Gaussian beams of equal intensity
MAX_LEGEND_ENTRIES = 8  # more bunches: no per-bunch legend


def read_csv(path):
    """Columns of a CSV file with a header line, by name (floats)."""
    with open(path) as f:
        names = f.readline().strip().split(",")
    values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if values.size == 0:
        values = np.zeros((0, len(names)))
    return {name: values[:, k] for k, name in enumerate(names)}


def folded_tune(q):
    """Where the tune q shows in the spectrum of a real signal: its fractional part folded into [0, 0.5]."""
    f = q % 1.0
    return 1.0 - f if f > 0.5 else f


def bunch_series(records):
    """(beam, bunch, row mask) for every bunch in the records, beam 1 first."""
    pairs = sorted({(int(b), int(n)) for b, n in zip(records["beam"], records["bunch"])})
    return [(b, n, (records["beam"] == b) & (records["bunch"] == n)) for b, n in pairs]


def plot_luminosity(ax, records):
    """Luminosity per crossing against turn, each bunch of beam 1."""
    beam1 = [(b, n, rows) for b, n, rows in bunch_series(records) if b == 1]
    for _, n, rows in beam1:
        ax.plot(records["turn"][rows], records["luminosity_per_crossing"][rows], lw=1, label=f"bunch {n}")
    ax.set_xlabel("turn (the bunch's own crossings)")
    ax.set_ylabel("luminosity per crossing [1/m$^2$]")
    ax.set_title("luminosity per crossing (beam 1's bunches)")
    if 1 < len(beam1) <= MAX_LEGEND_ENTRIES:
        ax.legend(fontsize=7)


def plot_xy_per_bunch(ax, records, x_key, y_key, scale, ylabel, title, lw):
    """Per bunch: records[x_key] (solid) and records[y_key] (dashed) times `scale` against the turn."""
    series = bunch_series(records)
    for k, (b, n, rows) in enumerate(series):
        label = f"b{b} bunch {n}" if len(series) <= MAX_LEGEND_ENTRIES else None
        colour = f"C{k % 10}"
        for key, style, plane in ((x_key, "-", "x"), (y_key, "--", "y")):
            ax.plot(records["turn"][rows], records[key][rows] * scale, lw=lw, ls=style, color=colour,
                    label=None if label is None else f"{label} {plane}")
    ax.set_xlabel("turn (the bunch's own crossings)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series and len(series) <= MAX_LEGEND_ENTRIES:
        ax.legend(fontsize=7, ncol=2)


def plot_centroids(ax, records):
    """Centroids x and y against turn, each beam and bunch."""
    plot_xy_per_bunch(ax, records, "x", "y", 1e6, "centroid [um]", "centroids x (solid), y (dashed)", 0.8)


def plot_emittances(ax, records):
    """Geometric rms emittances x and y against turn, each beam and bunch."""
    plot_xy_per_bunch(ax, records, "emittance_x", "emittance_y", 1e9, "rms emittance [nm]",
                      "geometric rms emittances x (solid), y (dashed)", 1)


def plot_spectra(ax, spectra, summary):
    """Centroid spectra with the unperturbed tunes, the beam-beam shifts and the measured modes."""
    if spectra is None:
        ax.text(0.5, 0.5, "no spectra.csv\n(runs of fewer than 16 turns)", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    tune = spectra["tune"]
    columns = [name for name in spectra if name != "tune"]  # b{beam}_{bunch}_{plane}
    for k, name in enumerate(columns):
        amplitude = spectra[name]
        shown = amplitude > 0  # log scale: leave out exact zeros (the mean, too-short series)
        ax.semilogy(tune[shown], amplitude[shown], lw=0.8, color=f"C{k % 10}",
                    label=name if len(columns) <= 2 * MAX_LEGEND_ENTRIES else None)

    # Vertical lines: (tune, colour, style, legend label); a label is shown once.
    lines = []
    for beam in summary["beams"]:
        for plane in ("x", "y"):
            q, xi = beam[f"q{plane}"], beam[f"xi_{plane}"]
            lines.append((q, "0.3", "-", "Q"))
            lines.append((q + xi, "0.3", "--", "Q + xi"))
            lines.append((q + YOKOYA_FACTOR * xi, "0.3", ":", f"Q + {YOKOYA_FACTOR} xi"))
    modes = summary.get("coherent_modes") or {}
    for plane in ("x", "y"):
        if modes.get(f"sigma_{plane}") is not None:
            lines.append((modes[f"sigma_{plane}"], "k", "-.", "sigma mode (measured)"))
        if modes.get(f"pi_{plane}") is not None:
            lines.append((modes[f"pi_{plane}"], "m", "-.", "pi mode (measured)"))
    labelled = set()
    positions = []
    for q, colour, style, label in lines:
        position = folded_tune(q)
        positions.append(position)
        ax.axvline(position, color=colour, ls=style, lw=1, label=None if label in labelled else label)
        labelled.add(label)
    if positions:  # zoom on the tunes, three decades below the strongest line there
        low, high = max(0.0, min(positions) - 0.03), min(0.5, max(positions) + 0.03)
        ax.set_xlim(low, high)
        window = (tune >= low) & (tune <= high)
        peak = max((spectra[name][window].max() for name in columns if window.any()), default=0.0)
        if peak > 0:
            ax.set_ylim(peak * 1e-3, peak * 2)
    ax.set_xlabel("tune")
    ax.set_ylabel("centroid amplitude [m]")
    ax.set_title("centroid spectra")
    ax.legend(fontsize=6, ncol=2)


def collide_figure(directory):
    """The four panels of the run written into `directory` (summary.json, bunches.csv, spectra.csv)."""
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    records = read_csv(os.path.join(directory, "bunches.csv"))
    spectra_path = os.path.join(directory, "spectra.csv")
    spectra = read_csv(spectra_path) if os.path.exists(spectra_path) else None

    fig = Figure(figsize=(13, 9))
    axes = fig.subplots(2, 2)
    plot_luminosity(axes[0][0], records)
    plot_centroids(axes[0][1], records)
    plot_emittances(axes[1][0], records)
    plot_spectra(axes[1][1], spectra, summary)
    for ax in axes.ravel():
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(f"{os.path.basename(summary['setup'])}: {summary['mode']}, {summary['model']}, "
                 f"{summary['slices']} slice(s), {summary['turns']} turns")
    fig.tight_layout()
    return fig


def write_plots(directory):
    """Draws DIR/collide.png of the run written into `directory`; returns the file written."""
    path = os.path.join(directory, "collide.png")
    collide_figure(directory).savefig(path, dpi=110)
    return [path]


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.collide``; `argv`: its arguments, default sys.argv)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", help="output directory of `fusetrack collide`")
    args = ap.parse_args(argv)
    print(f"plot: {write_plots(args.directory)[0]}")


if __name__ == "__main__":
    main()
