"""optics(), da_scan() and the DA example, bit for bit against the command line."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import fusetrack as ft
from conftest import SOURCE_DIR, assert_bitwise_equal, lattice_path, run_cli


def test_optics_equals_the_cli(ring, tmp_path):
    out = tmp_path / "optics.json"
    run_cli("optics", lattice_path("sextupole_rf_ring.json"), "--tracking-turns", 64, "-o", out)
    j = json.load(open(out))
    o = ft.optics(ring, tracking_turns=64)
    assert isinstance(o["matrix"], np.ndarray) and o["matrix"].shape == (6, 6)
    # JSON holds doubles to 17 digits: they read back exactly
    assert_bitwise_equal(o["closed_orbit"], np.array([j["closed_orbit"][k] for k in ("x", "px", "y", "py", "zeta",
                                                                                      "delta")]), "closed orbit")
    assert_bitwise_equal(o["matrix"], np.array(j["one_turn_matrix"]["rows"], dtype=float), "matrix")
    assert (o["qx"], o["qy"], o["qs"]) == (j["tunes"]["qx"], j["tunes"]["qy"], j["tunes"]["qs"])
    assert (o["qx_4d"], o["qy_4d"]) == (j["tunes"]["qx_4d"], j["tunes"]["qy_4d"])
    assert (o["beta_x"], o["alpha_x"], o["beta_y"], o["dx"]) == (j["twiss"]["betx"], j["twiss"]["alfx"],
                                                                  j["twiss"]["bety"], j["twiss"]["dx"])
    assert (o["dqx"], o["dqy"]) == (j["chromaticity"]["dqx"], j["chromaticity"]["dqy"])
    assert o["eta"] == j["longitudinal"]["slip_factor"]
    assert list(o["tunes_from_tracking"][:2]) == [j["tunes_from_tracking"]["qx"], j["tunes_from_tracking"]["qy"]]
    with pytest.raises(ft.InputError) as e:
        ft.optics(ring, tracking_turns=5)
    assert "needs 0 (no tracking) or at least 16 turns" in str(e.value)


def test_twiss_table_equals_the_cli(ring, tmp_path):
    out = tmp_path / "twiss.npz"
    run_cli("optics", lattice_path("sextupole_rf_ring.json"), "--tracking-turns", 0, "--twiss-table", out)
    t = ft.twiss_table(ring)
    assert len(t["s"]) == len(ring) + 1 and list(t["name"][1:]) == ring.sequence
    with np.load(out) as d:
        for key in ("s", "beta_x", "alpha_x", "mu_x", "beta_y", "dx", "x"):
            assert_bitwise_equal(t[key], d[key], key)
    o = ft.optics(ring)
    assert t["beta_x"][0] == pytest.approx(o["beta_x"], rel=1e-9)
    assert t["q1"] % 1 == pytest.approx(o["qx"], abs=1e-9)


DA_ARGS = dict(turns=200, angles=5, amplitudes=12, amplitude_range=(0.001, 0.04), deltas=(0.0, 5e-4))


@pytest.mark.parametrize("refine", [0.0, 1e-3])
def test_da_scan_equals_the_cli(ring, tmp_path, refine):
    out = tmp_path / "cli"
    run_cli("da", lattice_path("sextupole_rf_ring.json"), "--turns", 200, "--angles", 5, "--amplitudes", 12,
            "--amplitude-range", 0.001, 0.04, "--delta", 0.0, 5e-4, "--refine", refine, "--no-plots", "--device",
            "cpu", "-o", out)
    da = ft.da_scan(ring, refine=refine, device="cpu", output=tmp_path / "py", **DA_ARGS)
    with np.load(out / "da.npz") as d:
        for key in ("amplitude", "angle", "grid_x", "grid_y", "delta_index", "lost_turn"):
            assert_bitwise_equal(da[key], d[key], key)
    summary = json.load(open(out / "summary.json"))
    assert da["da_min"] == summary["da_min"] and da["da_max"] == summary["da_max"]
    rays = summary["per_angle"]
    key = "da_refined" if refine else "da_last_stable"
    assert [r[key] for r in rays] == list(da["per_angle"][key])
    assert len(da["per_angle"]["angle"]) == 2 * 5
    assert 0 < da["da_min"] <= da["da_max"] < 0.04
    # the results the module wrote are the CLI's, byte for byte
    for name in ("summary.json", "summary.csv", "da.npz"):
        assert (tmp_path / "py" / name).read_bytes() == (out / name).read_bytes(), name
    # the lattice given is not changed by the scan's limits
    assert ring.to_dict() == ft.Lattice.from_file(lattice_path("sextupole_rf_ring.json")).to_dict()


def test_da_scan_errors(ring):
    with pytest.raises(ft.InputError) as e:
        ft.da_scan(ring, turns=10, amplitudes=0)
    assert "amplitudes" in str(e.value)
    with pytest.raises(ft.InputError):
        ft.da_scan(ring, grid="hexagonal")
    lat = ft.Lattice.from_file(lattice_path("ps_injection_longitudinal.json"))
    with pytest.raises(ft.InputError) as e:
        ft.da_scan(lat, turns=10, angles=2, amplitudes=2, device="cpu")
    _, err = run_cli("da", lattice_path("ps_injection_longitudinal.json"), "--turns", 10, "--angles", 2,
                     "--amplitudes", 2, "--no-plots", "--device", "cpu", "-o", "/tmp/fusetrack_pytest_da_refused",
                     expect_rc=2)
    # loading the lattice logs the impedance's default FFT window first; the error is the last line
    lines = err.strip().splitlines()
    assert lines[-1] == f"error: {e.value}"
    assert all(line.startswith("LongitudinalImpedance: ") for line in lines[:-1])


def test_da_example_writes_a_plot(tmp_path):
    script = os.path.join(SOURCE_DIR, "examples", "da_light_source", "da_scan.py")
    png = tmp_path / "da.png"
    r = subprocess.run([sys.executable, script, "--turns", "100", "--angles", "4", "--amplitudes", "8",
                        "--device", "cpu", "-o", str(png)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "DA min" in r.stdout


def test_da_study_equals_the_cli_and_each_variant_alone(ring, tmp_path):
    """A study of variants (a variants file) through Python: the CLI's summary, and each variant's DA
    per angle equal to the scan of that variant's lattice file alone."""
    variants = {"fusetrack_variants": 1,
                "variants": [{"name": "nominal"},
                             {"name": "strong_sf", "elements": [{"name": "sf_half", "add": {"knl": [0, 0, 1.5]}}]}]}
    vfile = tmp_path / "variants.json"
    vfile.write_text(json.dumps(variants))
    args = dict(turns=200, angles=4, amplitudes=8, amplitude_range=(0.004, 0.04))
    study = ft.da_scan(ring, device="cpu", variants=[vfile], output=tmp_path / "py", **args)
    s = study["study"]
    assert list(s["names"]) == ["nominal", "strong_sf"]
    assert s["per_variant"].shape == (4, 2)
    assert np.array_equal(s["min"], s["per_variant"].min(axis=1))
    assert len(study["final"]) == 2 * 4 * 8 and list(np.unique(s["variant"])) == [0, 1]
    run_cli("da", lattice_path("sextupole_rf_ring.json"), "--variants", vfile, "-n", 200, "--angles", 4,
            "--amplitudes", 8, "--amplitude-range", 0.004, 0.04, "--device", "cpu", "--no-plots", "-o", tmp_path / "cli")
    j = json.load(open(tmp_path / "cli" / "summary.json"))
    assert [r["per_variant"] for r in j["per_angle"]] == s["per_variant"].tolist()
    # The second variant alone: the base lattice with the changed sextupoles.
    doc = json.load(open(lattice_path("sextupole_rf_ring.json")))
    doc["elements"]["sf_half"]["knl"][2] += 1.5
    (tmp_path / "strong_sf.json").write_text(json.dumps(doc))
    alone = ft.da_scan(ft.Lattice.from_file(tmp_path / "strong_sf.json"), device="cpu", **args)
    assert np.array_equal(alone["per_angle"]["da_last_stable"], s["per_variant"][:, 1])
