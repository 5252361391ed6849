"""Plot of a tune footprint written by `fusetrack footprint` (footprint.csv): each
particle's (qx, qy) coloured by its amplitude, the lattice's tunes, and the resonance lines
m qx + n qy = p up to order 4 in the window.

Usage: python3 -m fusetrack.plot.footprint footprint.csv footprint.png
"""
import argparse
import re

import numpy as np
from matplotlib.figure import Figure

MAX_RESONANCE_ORDER = 4


def read_footprint(path):
    """(data, lattice_tunes): the CSV's columns (a NumPy record array) and the (qx, qy) of the lattice
    from its header line, or None when the header has none."""
    with open(path) as f:
        header = f.readline()
    m = re.search(r"qx ([-0-9.eE+]+) qy ([-0-9.eE+]+)", header)
    data = np.genfromtxt(path, delimiter=",", names=True, comments="#", skip_header=1)
    return data, (float(m.group(1)), float(m.group(2))) if m else None


def footprint_figure(data, lattice_tunes=None):
    """The surviving particles' tunes coloured by amplitude over the resonance lines |a| + |b| <= 4."""
    alive = data["lost_turn"] < 0
    amplitude = np.hypot(data["amplitude_x"], data["amplitude_y"])
    fig = Figure(figsize=(6.4, 5.6))
    ax = fig.subplots()
    sc = ax.scatter(data["qx"][alive], data["qy"][alive], c=amplitude[alive], s=14, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="amplitude [rms beam sizes]")
    qx, qy = data["qx"][alive], data["qy"][alive]
    if lattice_tunes is not None:
        ax.plot([lattice_tunes[0]], [lattice_tunes[1]], "r+", ms=14, mew=2, label="lattice tunes")
        qx, qy = np.append(qx, lattice_tunes[0]), np.append(qy, lattice_tunes[1])
    pad = 0.02
    x0, x1 = qx.min() - pad, qx.max() + pad
    y0, y1 = qy.min() - pad, qy.max() + pad
    # Resonance lines a qx + b qy = p.
    for a in range(-MAX_RESONANCE_ORDER, MAX_RESONANCE_ORDER + 1):
        for b in range(-MAX_RESONANCE_ORDER, MAX_RESONANCE_ORDER + 1):
            order = abs(a) + abs(b)
            if order == 0 or order > MAX_RESONANCE_ORDER:
                continue
            corners = [a * x + b * y for x in (x0, x1) for y in (y0, y1)]
            for p in range(int(np.floor(min(corners))), int(np.ceil(max(corners))) + 1):
                style = dict(color="0.6", lw=1.6 - 0.3 * order, alpha=0.8)
                if b == 0:
                    ax.axvline(p / a, **style)
                else:
                    xs = np.array([x0, x1])
                    ax.plot(xs, (p - a * xs) / b, **style)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel("fractional tune qx")
    ax.set_ylabel("fractional tune qy")
    lost = int((~alive).sum())
    ax.set_title(f"tune footprint ({int(alive.sum())} particles{f', {lost} lost' if lost else ''}); "
                 f"resonances to order {MAX_RESONANCE_ORDER}")
    if lattice_tunes is not None:
        ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def write_plots(csv, png):
    """Draws the footprint of `csv` into the image `png`; returns [png]."""
    footprint_figure(*read_footprint(csv)).savefig(png, dpi=120)
    return [png]


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.footprint``; `argv`: its arguments, default sys.argv)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="footprint.csv of `fusetrack footprint`")
    parser.add_argument("png", help="the image to write")
    args = parser.parse_args(argv)
    write_plots(args.csv, args.png)


if __name__ == "__main__":
    main()
