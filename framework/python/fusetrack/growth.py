"""Fit the exponential growth (or damping) rate of a turn-by-turn centroid signal.

    python3 -m fusetrack.growth monitor.npz [--column mean_x] [--first T --last T]
                                [--method hilbert|peaks] [--frev HZ] [--subtract-mean]
    python3 -m fusetrack.growth centroid.csv --column mean_y ...

Input: a monitor archive written by `fusetrack track --monitor FILE.npz` (arrays `turn` and the chosen
column, default mean_x), or a CSV/whitespace text file with a header line of names (a `turn` column and
the chosen column; without a `turn` column the row index is the turn; '#' comments skipped).

The envelope of the oscillation is taken either
  - hilbert (default): |analytic signal| from the FFT (numpy only), the first and last 5% of the window
    left out (edge effects of the transform), or
  - peaks: the local maxima of |signal| (the method of ft::instability::fit_exponential_growth in C++);
then ln(envelope) = a + rate * turn is fitted by linear least squares over [first, last].
Printed: rate [1/turn] with its standard error (from the residuals), the e-folding time [turns], and
with --frev the rate [1/s]. Negative rates are damping. Uses numpy only.
"""
import argparse
import sys

import numpy as np


def read_signal(path, column):
    """(turns, signal) from a monitor .npz or a text table with a header."""
    if path.endswith(".npz"):
        with np.load(path) as d:
            if column not in d:
                raise SystemExit(f"{path}: no array '{column}' (arrays: {', '.join(sorted(d.files))})")
            signal = np.asarray(d[column], dtype=float)
            turns = np.asarray(d["turn"], dtype=float) if "turn" in d else np.arange(len(signal), dtype=float)
        return turns, signal
    header = None
    rows = []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            body = line.split("#", 1)[0].strip()
            if not body:
                continue
            fields = [x for x in body.replace(",", " ").split()]
            if header is None:
                header = fields
                continue
            if len(fields) != len(header):
                raise SystemExit(f"{path}, line {line_no}: {len(fields)} values, expected {len(header)}")
            try:
                rows.append([float(x) for x in fields])
            except ValueError:
                raise SystemExit(f"{path}, line {line_no}: not a number in '{body}'")
    if header is None or not rows:
        raise SystemExit(f"{path}: no header line or no rows")
    if column not in header:
        raise SystemExit(f"{path}: no column '{column}' (columns: {', '.join(header)})")
    data = np.array(rows)
    signal = data[:, header.index(column)]
    turns = data[:, header.index("turn")] if "turn" in header else np.arange(len(signal), dtype=float)
    return turns, signal


def hilbert_envelope(signal):
    """|analytic signal| by FFT (numpy only)."""
    n = len(signal)
    spectrum = np.fft.fft(signal)
    h = np.zeros(n)
    h[0] = 1.0
    if n % 2 == 0:
        h[n // 2] = 1.0
        h[1:n // 2] = 2.0
    else:
        h[1:(n + 1) // 2] = 2.0
    return np.abs(np.fft.ifft(spectrum * h))


def peak_envelope(turns, signal):
    """(turns, values) of the local maxima of |signal|."""
    a = np.abs(signal)
    inner = (a[1:-1] >= a[:-2]) & (a[1:-1] > a[2:]) & (a[1:-1] > 0)
    idx = np.flatnonzero(inner) + 1
    return turns[idx], a[idx]


def fit_growth(turns, signal, first=None, last=None, method="hilbert", subtract_mean=False):
    """Returns dict(rate, rate_error, log_amplitude, points) for ln(envelope) = a + rate * turn."""
    turns = np.asarray(turns, dtype=float)
    signal = np.asarray(signal, dtype=float)
    lo = turns.min() if first is None else first
    hi = turns.max() if last is None else last
    sel = (turns >= lo) & (turns <= hi)
    t, s = turns[sel], signal[sel]
    if subtract_mean:
        s = s - s.mean()
    if method == "hilbert":
        # The FFT treats the window as periodic: a signal that grows or decays by a large factor jumps at
        # the window's ends and its envelope leaks. So the exponential is divided out first (rate r0 from
        # the peak envelope), the Hilbert envelope of the nearly stationary rest is fitted, and r0 added back.
        r0 = _linear_fit(*_log_points(*peak_envelope(t, s)), lo, hi)[0] if len(s) > 8 else 0.0
        tc = 0.5 * (t[0] + t[-1])
        for _ in range(2):
            env = hilbert_envelope(s * np.exp(-r0 * (t - tc)))
            edge = max(1, int(0.05 * len(s)))
            te, ye = _log_points(t[edge:-edge], env[edge:-edge])
            rate, a, err, points = _linear_fit(te, ye, lo, hi)
            r0 += rate
        return {"rate": float(r0), "rate_error": float(err), "log_amplitude": float(a - (r0 - rate) * tc),
                "points": int(points)}
    elif method == "peaks":
        t, y = _log_points(*peak_envelope(t, s))
    else:
        raise ValueError(f"unknown method '{method}' (hilbert or peaks)")
    rate, a, err, points = _linear_fit(t, y, lo, hi)
    return {"rate": float(rate), "rate_error": float(err), "log_amplitude": float(a), "points": int(points)}


def _log_points(t, env):
    ok = env > 0
    return t[ok], np.log(env[ok])


def _linear_fit(t, y, lo, hi):
    """rate, intercept, standard error of the rate, points, for y = a + rate * t."""
    if len(t) < 3:
        raise ValueError(f"only {len(t)} envelope points in the window [{lo}, {hi}]")
    tm, ym = t.mean(), y.mean()
    stt = np.sum((t - tm) ** 2)
    rate = np.sum((t - tm) * (y - ym)) / stt
    a = ym - rate * tm
    resid = y - (a + rate * t)
    err = np.sqrt(np.sum(resid ** 2) / (len(t) - 2) / stt)
    return rate, a, err, len(t)


def main(argv=None):
    """The command line (``python3 -m fusetrack.growth``; `argv`: its arguments, default sys.argv)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="monitor .npz or CSV/text table with a header")
    ap.add_argument("--column", default="mean_x", help="signal column (default mean_x)")
    ap.add_argument("--first", type=float, default=None, help="first turn of the fit window")
    ap.add_argument("--last", type=float, default=None, help="last turn of the fit window")
    ap.add_argument("--method", choices=("hilbert", "peaks"), default="hilbert")
    ap.add_argument("--frev", type=float, default=None, help="revolution frequency [Hz], for the rate in 1/s")
    ap.add_argument("--subtract-mean", action="store_true", help="remove the mean of the window first")
    args = ap.parse_args(argv)
    turns, signal = read_signal(args.file, args.column)
    try:
        r = fit_growth(turns, signal, args.first, args.last, args.method, args.subtract_mean)
    except ValueError as e:
        raise SystemExit(f"{args.file}: {e}")
    rate, err = r["rate"], r["rate_error"]
    print(f"rate        {rate:.6e} +- {err:.2e} 1/turn ({args.method} envelope, {r['points']} points, "
          f"column {args.column})")
    if rate != 0:
        kind = "growth" if rate > 0 else "damping"
        print(f"{kind:<11} e-folding time {1.0 / abs(rate):.6g} turns")
    if args.frev:
        print(f"rate_s      {rate * args.frev:.6e} +- {err * args.frev:.2e} 1/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
