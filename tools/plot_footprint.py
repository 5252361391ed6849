#!/usr/bin/env python3
"""Plot of a tune footprint written by `fusetrack spacecharge footprint` (footprint.csv): each
particle's (qx, qy) coloured by its amplitude, the lattice's tunes, and the resonance lines
m qx + n qy = p up to order 4 in the window.
Usage: plot_footprint.py footprint.csv footprint.png"""
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main(csv, png):
    with open(csv) as f:
        header = f.readline()
    m = re.search(r"qx ([-0-9.eE+]+) qy ([-0-9.eE+]+)", header)
    data = np.genfromtxt(csv, delimiter=",", names=True, comments="#", skip_header=1)
    alive = data["lost_turn"] < 0
    amplitude = np.hypot(data["amplitude_x"], data["amplitude_y"])
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    sc = ax.scatter(data["qx"][alive], data["qy"][alive], c=amplitude[alive], s=14, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="amplitude [rms beam sizes]")
    if m:
        qx0, qy0 = float(m.group(1)), float(m.group(2))
        ax.plot([qx0], [qy0], "r+", ms=14, mew=2, label="lattice tunes")
    qx = np.concatenate([data["qx"][alive], [qx0] if m else []])
    qy = np.concatenate([data["qy"][alive], [qy0] if m else []])
    pad = 0.02
    x0, x1 = qx.min() - pad, qx.max() + pad
    y0, y1 = qy.min() - pad, qy.max() + pad
    # Resonance lines a qx + b qy = p, |a| + |b| <= 4.
    for a in range(-4, 5):
        for b in range(-4, 5):
            order = abs(a) + abs(b)
            if order == 0 or order > 4:
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
    ax.set_title(f"tune footprint ({int(alive.sum())} particles{f', {lost} lost' if lost else ''}); resonances to order 4")
    if m:
        ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
