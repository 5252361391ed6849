#!/usr/bin/env python3
"""Head-tail instability and its damper (examples/instability/README.md): runs instability.sh and checks
its fitted growth rates (OUT/summary.json) against Sacherer's formula and the ideal damper.

Sacherer's rate of head-tail mode 0 (F. Sacherer, CERN 77-13 (1977) 198; sacherer_rate in
instability_analysis.py, computed in numpy from the ring's intended optics) and the README's findings:
1. Q' < 0 (above transition): the centroid grows, 1.1-1.4 times Sacherer's rate (the README measures 1.24-1.25:
   the approach of mode coupling at 0.38 Q_s, which the formula leaves out); Q' > 0: it is damped, the same ratio;
   between chromaticities of one sign the ratio is the same within 5 % (the rate is linear in Q');
2. Q' = 0: no growth (|rate| < 10 % of the rate at the most unstable chromaticity; the README: 0.4 %);
3. a bunch-by-bunch damper of n_d turns at Q' = 0 damps at 0.85-1.05 times the ideal rate ln(1 - 2/n_d) / 2
   (the README: 0.95); at the most unstable chromaticity it turns the growth into damping.

    check_instability.py [--turns 1500] [--particles 20000] [--chromaticities -4 -2 0 2] [--output DIR]
The fusetrack binary: $FUSETRACK (default build/bin/fusetrack); THREADS (default 2). Exit status 0 when every
check passes.
"""
import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=1500)
    ap.add_argument("--particles", type=int, default=20000)
    ap.add_argument("--chromaticities", type=float, nargs="+", default=[-4, -2, 0, 2],
                    help="Q'x = Q'y of the scan, the most unstable first (it also runs with the damper)")
    ap.add_argument("--output", default="instability_out")
    a = ap.parse_args()
    env = dict(os.environ, CHROMATICITIES=" ".join(f"{q:g}" for q in a.chromaticities),
               PYTHON=os.environ.get("PYTHON", sys.executable))
    cmd = ["bash", os.path.join(HERE, "instability.sh"), a.output, str(a.turns), str(a.particles)]
    print("$ " + " ".join(cmd) + f"   (CHROMATICITIES=\"{env['CHROMATICITIES']}\")", flush=True)
    subprocess.run(cmd, check=True, env=env)
    with open(os.path.join(a.output, "summary.json")) as f:
        rows = json.load(f)
    failures = []

    def check(name, ok, text):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {text}", flush=True)
        if not ok:
            failures.append(name)

    scan = [r for r in rows if not r.get("damper_turns")]
    damped = [r for r in rows if r.get("damper_turns")]
    strongest = max(abs(r["sacherer_rate"]) for r in scan)
    ratios = {}
    for r in scan:
        qp = r["chromaticity"]
        if qp == 0:
            check("Q' = 0", abs(r["fitted_rate"]) < 0.1 * strongest,
                  f"rate {r['fitted_rate']:+.2e} per turn, below 10 % of {strongest:.2e}")
            continue
        ratio = r["fitted_rate"] / r["sacherer_rate"]
        ratios.setdefault(qp > 0, []).append(ratio)
        word = "grows" if qp < 0 else "is damped"
        check(f"Q' = {qp:+g}", (r["fitted_rate"] > 0) == (qp < 0) and 1.1 <= ratio <= 1.4,
              f"{word}: {r['fitted_rate']:+.3e} per turn, Sacherer {r['sacherer_rate']:+.3e}, ratio {ratio:.3f} (1.1-1.4)")
    for sign, values in ratios.items():
        if len(values) > 1:
            spread = max(values) / min(values) - 1
            check(f"linear in Q' ({'> 0' if sign else '< 0'})", spread < 0.05, f"ratios {', '.join(f'{v:.3f}' for v in values)}")
    for r in damped:
        ideal = math.log(1 - 2 / r["damper_turns"]) / 2
        if r["chromaticity"] == 0:
            ratio = r["fitted_rate"] / ideal
            check("damper at Q' = 0", 0.85 <= ratio <= 1.05,
                  f"{r['fitted_rate']:+.3e} per turn, ideal damper {ideal:+.3e}: ratio {ratio:.3f} (0.85-1.05)")
        else:
            check(f"damper at Q' = {r['chromaticity']:+g}", r["fitted_rate"] < 0,
                  f"{r['fitted_rate']:+.3e} per turn (e-folding {-1 / r['fitted_rate']:.0f} turns; without: "
                  f"{next(s['fitted_rate'] for s in scan if s['chromaticity'] == r['chromaticity']):+.3e})")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("all checks passed")


if __name__ == "__main__":
    main()
