"""Smoke test of the transverse-instability example (docs: Wakes and instabilities, worked example):
tools/lattices/make_instability_ring.py writes a ring whose tunes, chromaticity, beta, dispersion and
slip factor from `fusetrack optics` are those the script computed with its own thin-lens optics; the
bundled lattices/instability_ring*.json are the script's current output; the damper lattice tracks 20
turns; the example's Sacherer formula has the head-tail signs above transition."""
import json
import os
import subprocess
import sys

import numpy as np

from conftest import SOURCE_DIR, lattice_path, run_cli

GENERATOR = os.path.join(SOURCE_DIR, "tools", "lattices", "make_instability_ring.py")
ANALYSIS_DIR = os.path.join(SOURCE_DIR, "examples", "instability")


def generate(out_dir, *args):
    r = subprocess.run([sys.executable, GENERATOR, "--output-dir", str(out_dir), *map(str, args)],
                       capture_output=True, text=True, check=True)
    line = [s for s in r.stdout.splitlines() if s.startswith("intended ")][0]
    return json.loads(line[len("intended "):])


def test_generated_ring_has_the_intended_optics(tmp_path):
    intended = generate(tmp_path, "--chromaticity", -3.0, 1.5)
    out = tmp_path / "optics.json"
    run_cli("optics", tmp_path / "instability_ring.json", "-o", out)
    o = json.loads(out.read_text())
    assert abs(o["tunes"]["total"]["qx"] - intended["tunes"][0]) < 1e-6
    assert abs(o["tunes"]["total"]["qy"] - intended["tunes"][1]) < 1e-6
    assert abs(o["tunes"]["total"]["qx"] - 4.13) < 1e-6 and abs(o["tunes"]["total"]["qy"] - 4.18) < 1e-6
    # The sextupole knob: Q' = dQ/d delta from the optics' finite differences against the requested values.
    assert abs(o["chromaticity"]["dqx"] - (-3.0)) < 1e-3
    assert abs(o["chromaticity"]["dqy"] - 1.5) < 1e-3
    assert abs(o["twiss"]["betx"] / intended["beta_at_start"][0] - 1) < 1e-6
    assert abs(o["twiss"]["bety"] / intended["beta_at_start"][1] - 1) < 1e-6
    assert abs(o["twiss"]["alfx"]) < 1e-8 and abs(o["twiss"]["alfy"]) < 1e-8  # the wake sits at alpha = 0
    assert abs(o["twiss"]["dx"] / intended["dispersion_at_start"] - 1) < 1e-6
    assert abs(o["longitudinal"]["gamma_tr"] - 17.95) < 1e-4
    assert abs(o["longitudinal"]["slip_factor"] / intended["eta"] - 1) < 1e-6
    assert abs(o["tunes"]["qs"] / intended["synchrotron_tune"] - 1) < 2e-3  # linear Q_s of the script
    # Natural chromaticity (sextupoles off) of the thin-lens FODO, about -1.3 Q.
    natural = generate(tmp_path / "nat", "--chromaticity", *intended["natural_chromaticity"])
    assert max(abs(k) for k in natural["k2l"]) < 1e-9


def test_bundled_lattices_are_the_generators_output(tmp_path):
    generate(tmp_path)
    for name in ("instability_ring.json", "instability_ring_damper.json"):
        with open(lattice_path(name)) as f:
            bundled = json.load(f)
        with open(tmp_path / name) as f:
            fresh = json.load(f)
        assert bundled == fresh, f"lattices/{name} is not the output of make_instability_ring.py: run it again"


def test_damper_ring_tracks_twenty_turns(tmp_path):
    mon = tmp_path / "m.npz"
    stdout, _ = run_cli("track", lattice_path("instability_ring_damper.json"), "--matched", 200, "--sigma-zeta", 0.12,
                        "-n", 20, "--monitor", mon, "--device", "cpu", "--threads", 1)
    assert "200 survived, 0 lost" in stdout
    with np.load(mon) as d:
        assert len(d["turn"]) == 21
        assert np.all(d["alive"] == 200)
        assert abs(d["rms_zeta"][0] - 0.12) < 0.02


def test_sacherer_signs_above_transition():
    sys.path.insert(0, ANALYSIS_DIR)
    import instability_analysis as ia
    with open(os.path.join(SOURCE_DIR, "lattices", "instability_ring.json")) as f:
        assert "TransverseWake" in json.dumps(json.load(f))
    o = generate_default()
    grow, _ = ia.sacherer_rate(o, -2.0)
    damp, _ = ia.sacherer_rate(o, +2.0)
    zero, dq0 = ia.sacherer_rate(o, 0.0)
    assert grow > 0 and damp < 0 and abs(grow + damp) < 1e-3 * grow  # odd in Q' for mode 0 (Re Z_perp odd)
    assert abs(zero) < 1e-6 * grow and dq0.real < 0                   # rigid shift down, no growth at Q' = 0


def generate_default():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        return generate(d)
