"""Plots of a fusetrack DA scan: survival map, DA against angle, DA against turns.

Usage: python3 -m fusetrack.plot.da OUTPUT_DIR   (the directory `fusetrack da -o` wrote)
Writes survival.png, da_vs_angle.png and da_vs_turns.png into it (da_study.png for a study of
lattice variants).
"""
import argparse
import json
import os

import numpy as np
from matplotlib.figure import Figure


def _none_as_nan(values):
    return [np.nan if v is None else v for v in values]


def study_figure(summary):
    """A study of lattice variants: per angle (or x column), each variant's DA as a thin line and
    the minimum, mean and maximum over the variants."""
    key = "per_angle" if "per_angle" in summary else "per_column"
    axis = "angle_deg" if key == "per_angle" else "x"
    fig = Figure(figsize=(7, 4.6))
    ax = fig.subplots()
    for delta in summary["deltas"]:
        rows = [r for r in summary[key] if r["delta"] == delta]
        xs = [r[axis] for r in rows]
        per = np.array([_none_as_nan(r["per_variant"]) for r in rows], dtype=float)
        ax.plot(xs, per, color="0.55", lw=0.6)
        value = lambda name: _none_as_nan(r[name] for r in rows)  # noqa: E731
        ax.fill_between(xs, value("min"), value("max"), alpha=0.25, label=f"min..max, delta = {delta:g}")
        ax.plot(xs, value("mean"), lw=1.5, label=f"mean over {per.shape[1]} variants, delta = {delta:g}")
        ax.plot(xs, value("min"), "k--", lw=1, label=f"minimum (worst variant), delta = {delta:g}")
    ax.set_xlabel("angle [deg]" if axis == "angle_deg" else "x")
    ax.set_ylabel(f"DA [{summary['amplitude_unit']}]")
    ax.set_title(f"DA over {len(summary['variants'])} lattice variants (grey: each), {summary['turns']} turns")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def survival_figure(summary, data):
    """Initial x-y (in amplitude units) of every particle, coloured by log10 of its loss turn; one panel
    per momentum offset. `data`: the arrays of da.npz."""
    unit = summary["amplitude_unit"]
    turns = summary["turns"]
    deltas = summary["deltas"]
    lost_turn = np.where(data["state"] > 0, turns, data["lost_turn"] + 1).astype(float)
    fig = Figure(figsize=(5.5 * len(deltas), 4.6))
    axes = fig.subplots(1, len(deltas), squeeze=False)
    for d, delta in enumerate(deltas):
        ax = axes[0][d]
        sel = data["delta_index"] == d
        sc = ax.scatter(data["grid_x"][sel], data["grid_y"][sel], c=np.log10(lost_turn[sel]), s=12, cmap="viridis",
                        vmin=0, vmax=np.log10(max(turns, 10)))
        # Cartesian grids: the border per column (y_high, y_low; summary.json "per_column").
        # A column whose start point is lost (null) breaks the line.
        cols = [c for c in summary.get("per_column", []) if c["delta"] == delta]
        if cols:
            xs = [c["x"] for c in cols]
            for key, label in (("y_high", "border per column"), ("y_low", None)):
                ax.plot(xs, _none_as_nan(c[key] for c in cols), "r.-", lw=1, label=label)
            ax.legend(fontsize=8)
        ax.set_xlabel(f"x [{unit}]")
        ax.set_ylabel(f"y [{unit}]")
        ax.set_title(f"survival, delta = {delta:g}")
        fig.colorbar(sc, ax=ax, label="log10(turns survived)")
    fig.tight_layout()
    return fig


def da_vs_angle_figure(summary):
    """The last stable amplitude (and the refined boundary, where scanned) against the angle."""
    fig = Figure(figsize=(6, 4.2))
    ax = fig.subplots()
    for delta in summary["deltas"]:
        r = [row for row in summary["per_angle"] if row["delta"] == delta]
        ang = [row["angle_deg"] for row in r]
        ax.plot(ang, [row["da_last_stable"] for row in r], "o-", label=f"last stable, delta={delta:g}")
        refined = [row["da_refined"] for row in r]
        if any(v is not None for v in refined):
            ax.plot(ang, _none_as_nan(refined), "s--", label=f"refined, delta={delta:g}")
    ax.set_xlabel("angle [deg]")
    ax.set_ylabel(f"DA [{summary['amplitude_unit']}]")
    ax.set_title(f"dynamic aperture after {summary['turns']} turns")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def da_vs_turns_figure(summary):
    """The minimum DA over the angles against the turn number, per momentum offset."""
    fig = Figure(figsize=(6, 4.2))
    ax = fig.subplots()
    t = summary["turn_checkpoints"]
    for d, delta in enumerate(summary["deltas"]):
        ax.semilogx(t, _none_as_nan(summary["da_vs_turns"][d]), "o-", label=f"delta={delta:g}")
    ax.set_xlabel("turn")
    ax.set_ylabel(f"min DA over angles [{summary['amplitude_unit']}]")
    ax.set_title("DA against turn number (minimum over angles)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def write_plots(directory):
    """Draws the plots of the DA scan in `directory` into it; returns the files written."""
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    if summary.get("study"):
        figures = {"da_study.png": study_figure(summary)}
    else:
        with np.load(os.path.join(directory, "da.npz")) as npz:
            data = {name: npz[name] for name in ("state", "lost_turn", "delta_index", "grid_x", "grid_y")}
        figures = {"survival.png": survival_figure(summary, data)}
        if summary["per_angle"]:
            figures["da_vs_angle.png"] = da_vs_angle_figure(summary)
            figures["da_vs_turns.png"] = da_vs_turns_figure(summary)
    written = []
    for name, fig in figures.items():
        written.append(os.path.join(directory, name))
        fig.savefig(written[-1], dpi=120)
    return written


def main(argv=None):
    """The command line (``python3 -m fusetrack.plot.da``; `argv`: its arguments, default sys.argv)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="output directory of `fusetrack da`")
    args = parser.parse_args(argv)
    print("plots: " + ", ".join(write_plots(args.directory)))


if __name__ == "__main__":
    main()
