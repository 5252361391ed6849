"""Plots of a fusetrack bunch monitor (`fusetrack track --monitor FILE.npz`).

Usage: python3 -m fusetrack.plot.collective MONITOR.npz -o DIR
Writes into DIR:
  bunch_length.png   rms bunch length (zeta [m] and time [ns]) and rms delta against turn
  emittance.png      longitudinal rms emittance (4 pi sigma_t sigma_E style) [eV s] against turn
  transverse.png     normalized betatron emittances (x, y) and rms beam sizes against turn, with the
                     particles alive (monitors written since the transverse moments exist)
  profiles.png       line-density profiles and induced voltage of each collective element at the
                     snapshot turns (when the file has profiles: --profile-every)
"""
import argparse
import os

import matplotlib
import numpy as np
from matplotlib.figure import Figure

C_LIGHT = 299792458.0


def bunch_length_figure(d):
    """rms zeta (and the bunch length in ns) and rms delta against turn; `d`: the monitor's arrays."""
    turn = d["turn"]
    beta0 = float(d["beta0"][0])
    fig = Figure(figsize=(7, 6))
    ax = fig.subplots(2, 1, sharex=True)
    ax[0].plot(turn, d["rms_zeta"], lw=1)
    ax[0].set_ylabel("rms zeta [m]")
    sec = ax[0].secondary_yaxis("right", functions=(lambda z: z / (beta0 * C_LIGHT) * 1e9,
                                                     lambda t: t * 1e-9 * beta0 * C_LIGHT))
    sec.set_ylabel("rms length [ns]")
    ax[1].plot(turn, d["rms_delta"], lw=1, color="C1")
    ax[1].set_ylabel("rms delta")
    ax[1].set_xlabel("turn")
    ax[0].set_title("bunch length")
    fig.tight_layout()
    return fig


def emittance_figure(d):
    """The longitudinal rms emittance and the particles alive against turn."""
    turn = d["turn"]
    fig = Figure(figsize=(7, 3.5))
    ax = fig.subplots()
    ax.plot(turn, d["emittance_evs"], lw=1)
    ax.set_xlabel("turn")
    ax.set_ylabel("4 pi sqrt(det cov(t, E)) [eV s]")
    ax2 = ax.twinx()
    ax2.plot(turn, d["alive"], lw=1, color="C3", ls="--")
    ax2.set_ylabel("alive", color="C3")
    fig.tight_layout()
    return fig


def transverse_figure(d):
    """Normalized emittances (with the particles alive) and rms beam sizes against turn."""
    turn = d["turn"]
    fig = Figure(figsize=(7, 5.5))
    ax, bx = fig.subplots(2, 1, sharex=True)
    ax.plot(turn, d["emittance_nx"] * 1e6, lw=1, label="x")
    ax.plot(turn, d["emittance_ny"] * 1e6, lw=1, label="y")
    ax.set_ylabel("normalized rms emittance [um]")
    ax.legend(loc="upper left")
    ax2 = ax.twinx()
    ax2.plot(turn, d["alive"], lw=1, color="C3", ls="--")
    ax2.set_ylabel("alive", color="C3")
    bx.plot(turn, d["rms_x"] * 1e3, lw=1, label="rms x")
    bx.plot(turn, d["rms_y"] * 1e3, lw=1, label="rms y")
    bx.set_xlabel("turn")
    bx.set_ylabel("rms size [mm]")
    bx.legend(loc="upper left")
    fig.tight_layout()
    return fig


def profiles_figure(d):
    """Per collective element: the line density (top) and induced voltage (bottom) at each snapshot turn."""
    pturns = d["profile_turn"]
    unit = float(d["profile_unit"][0])
    elements = sorted({k.split("_")[1] for k in d if k.startswith("profile_") and k.endswith("_counts")})
    fig = Figure(figsize=(7 * len(elements), 6.5))
    axes = fig.subplots(2, len(elements), squeeze=False, sharex="col")
    cmap = matplotlib.colormaps["viridis"]
    for e, k in enumerate(elements):
        z = d[f"profile_{k}_zeta"]
        counts = d[f"profile_{k}_counts"].astype(float) / unit
        field = d[f"profile_{k}_field"]
        dz = z[1] - z[0]
        for s, t in enumerate(pturns):
            colour = cmap(s / max(1, len(pturns) - 1))
            total = counts[s].sum()
            lam = counts[s] / (total * dz) if total > 0 else counts[s]
            axes[0][e].plot(z, lam, color=colour, lw=1, label=f"turn {t}")
            axes[1][e].plot(z, field[s] * 1e-3, color=colour, lw=1)
        axes[0][e].set_ylabel("line density [1/m]")
        axes[1][e].set_ylabel("induced voltage [kV]")
        axes[1][e].set_xlabel("zeta [m]")
        axes[0][e].set_title(f"collective element {k} (sequence index {int(d[f'profile_{k}_sequence_index'][0])})")
        if len(pturns) <= 12:
            axes[0][e].legend(fontsize=7)
    fig.tight_layout()
    return fig


def write_plots(monitor, output):
    """Draws the plots of the monitor file `monitor` into the directory `output` (made if missing);
    returns the files written."""
    os.makedirs(output, exist_ok=True)
    with np.load(monitor) as npz:
        d = {name: npz[name] for name in npz.files}
    figures = {"bunch_length.png": bunch_length_figure(d), "emittance.png": emittance_figure(d)}
    if "emittance_nx" in d:
        figures["transverse.png"] = transverse_figure(d)
    if "profile_turn" in d:
        figures["profiles.png"] = profiles_figure(d)
    written = []
    for name, fig in figures.items():
        written.append(os.path.join(output, name))
        fig.savefig(written[-1], dpi=120)
    return written


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.collective``; `argv`: its arguments, default sys.argv)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("monitor")
    ap.add_argument("-o", "--output", required=True, help="directory for the PNG files")
    args = ap.parse_args(argv)
    write_plots(args.monitor, args.output)


if __name__ == "__main__":
    main()
