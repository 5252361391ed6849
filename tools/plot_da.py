#!/usr/bin/env python3
"""Plots of a fusetrack DA scan: survival map, DA against angle, DA against turns.

Usage: plot_da.py OUTPUT_DIR   (the directory `fusetrack da -o` wrote)
Writes survival.png, da_vs_angle.png and da_vs_turns.png into it.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_study(directory, summary):
    """A study of lattice variants: per angle (or x column), each variant's DA as a thin line and
    the minimum, mean and maximum over the variants (da_study.png)."""
    key = "per_angle" if "per_angle" in summary else "per_column"
    axis = "angle_deg" if key == "per_angle" else "x"
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for delta in summary["deltas"]:
        rows = [r for r in summary[key] if r["delta"] == delta]
        xs = [r[axis] for r in rows]
        per = np.array([[np.nan if v is None else v for v in r["per_variant"]] for r in rows], dtype=float)
        ax.plot(xs, per, color="0.55", lw=0.6)
        value = lambda name: [np.nan if r[name] is None else r[name] for r in rows]  # noqa: E731
        ax.fill_between(xs, value("min"), value("max"), alpha=0.25, label=f"min..max, delta = {delta:g}")
        ax.plot(xs, value("mean"), lw=1.5, label=f"mean over {per.shape[1]} variants, delta = {delta:g}")
        ax.plot(xs, value("min"), "k--", lw=1, label=f"minimum (worst variant), delta = {delta:g}")
    ax.set_xlabel("angle [deg]" if axis == "angle_deg" else "x")
    ax.set_ylabel(f"DA [{summary['amplitude_unit']}]")
    ax.set_title(f"DA over {len(summary['variants'])} lattice variants (grey: each), {summary['turns']} turns")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "da_study.png"), dpi=120)


def main(directory):
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    if summary.get("study"):
        plot_study(directory, summary)
        return
    data = np.load(os.path.join(directory, "da.npz"))
    unit = summary["amplitude_unit"]
    turns = summary["turns"]
    deltas = summary["deltas"]

    # Survival map: initial x-y (in amplitude units), coloured by log10 of the loss turn.
    lost_turn = np.where(data["state"] > 0, turns, data["lost_turn"] + 1).astype(float)
    fig, axes = plt.subplots(1, len(deltas), figsize=(5.5 * len(deltas), 4.6), squeeze=False)
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
                ax.plot(xs, [np.nan if c[key] is None else c[key] for c in cols], "r.-", lw=1, label=label)
            ax.legend(fontsize=8)
        ax.set_xlabel(f"x [{unit}]")
        ax.set_ylabel(f"y [{unit}]")
        ax.set_title(f"survival, delta = {delta:g}")
        fig.colorbar(sc, ax=ax, label="log10(turns survived)")
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "survival.png"), dpi=120)
    plt.close(fig)

    rows = summary["per_angle"]
    if rows:
        fig, ax = plt.subplots(figsize=(6, 4.2))
        for d, delta in enumerate(deltas):
            r = [row for row in rows if row["delta"] == delta]
            ang = [row["angle_deg"] for row in r]
            ax.plot(ang, [row["da_last_stable"] for row in r], "o-", label=f"last stable, delta={delta:g}")
            refined = [row["da_refined"] for row in r]
            if any(v is not None for v in refined):
                ax.plot(ang, [np.nan if v is None else v for v in refined], "s--", label=f"refined, delta={delta:g}")
        ax.set_xlabel("angle [deg]")
        ax.set_ylabel(f"DA [{unit}]")
        ax.set_title(f"dynamic aperture after {turns} turns")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "da_vs_angle.png"), dpi=120)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 4.2))
        t = summary["turn_checkpoints"]
        for d, delta in enumerate(deltas):
            v = [np.nan if x is None else x for x in summary["da_vs_turns"][d]]
            ax.semilogx(t, v, "o-", label=f"delta={delta:g}")
        ax.set_xlabel("turn")
        ax.set_ylabel(f"min DA over angles [{unit}]")
        ax.set_title("DA against turn number (minimum over angles)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "da_vs_turns.png"), dpi=120)
        plt.close(fig)
    print(f"plots: {directory}/survival.png" + (", da_vs_angle.png, da_vs_turns.png" if rows else ""))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
