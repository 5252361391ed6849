"""fusetrack.growth on synthetic centroid signals of known growth and damping rates: both envelope
methods, the .npz and CSV inputs, the command line, and clear errors for a missing column."""
import subprocess
import sys

import numpy as np
import pytest

from fusetrack import growth

TOOL = [sys.executable, "-m", "fusetrack.growth"]


def synthetic(rate, turns=2000, tune=0.2731, noise=0.01, seed=1):
    rng = np.random.default_rng(seed)
    n = np.arange(turns, dtype=float)
    x = 1e-4 * np.exp(rate * n) * np.cos(2 * np.pi * tune * n + 0.3) * (1 + noise * rng.standard_normal(turns))
    return n, x


@pytest.mark.parametrize("method", ["hilbert", "peaks"])
@pytest.mark.parametrize("rate", [3e-3, -4e-3, 2e-4])
def test_known_rates(method, rate):
    n, x = synthetic(rate)
    r = growth.fit_growth(n, x, 100, 1900, method=method)
    assert abs(r["rate"] - rate) < 5e-5, r
    assert abs(r["rate"] - rate) < 6 * r["rate_error"] + 2e-6, r


def test_command_line_npz_and_csv(tmp_path):
    n, x = synthetic(2.5e-3)
    npz = tmp_path / "monitor.npz"
    np.savez(npz, turn=n, mean_x=x, mean_y=0.5 * x)
    out = subprocess.run([*TOOL, str(npz), "--column", "mean_y", "--frev", "43347"],
                         capture_output=True, text=True, check=True).stdout
    rate = float(out.split()[1])
    assert abs(rate - 2.5e-3) < 5e-5, out
    assert "rate_s" in out and "e-folding time" in out

    csv = tmp_path / "centroid.csv"
    with open(csv, "w") as f:
        f.write("# synthetic\nturn,mean_x\n")
        for t, v in zip(n, x):
            f.write(f"{t:.0f},{v:.17g}\n")
    out = subprocess.run([*TOOL, str(csv), "--method", "peaks", "--first", "200"],
                         capture_output=True, text=True, check=True).stdout
    assert abs(float(out.split()[1]) - 2.5e-3) < 5e-5, out

    bad = subprocess.run([*TOOL, str(csv), "--column", "mean_q"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no column 'mean_q'" in bad.stderr
