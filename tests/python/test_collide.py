"""collide(): two beams colliding, bit for bit against `fusetrack collide`, and its errors."""
import copy
import csv
import json

import numpy as np
import pytest

import fusetrack as ft
from conftest import assert_bitwise_equal, run_cli

TURNS = 64


def beam(name, seed):
    """An LHC-like beam at the IP (7 TeV protons, beta* 0.55 m), its ring a linear one-turn map."""
    return {
        "name": name,
        "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 6.99999993712e12},
        "linear_map": {"qx": 0.31, "qy": 0.32, "beta_x": 0.55, "beta_y": 0.55, "circumference": 26658.8832},
        "bunches": {"intensity": 1.15e11, "macroparticles": 2000, "emittance_nx": 3.75e-6, "emittance_ny": 3.75e-6,
                    "sigma_zeta": 0.0755, "sigma_delta": 1.129e-4, "seed": seed},
    }


# Strong-strong, 4D (one slice), one bunch per beam.
SETUP = {"fusetrack_collider": "1", "mode": "strong-strong", "beams": [beam("b1", 1), beam("b2", 2)],
         "ip": {"model": "4d"}}

RECORD_FIELDS = ("slot", "beam", "bunch", "partner", "turn", "alive", "luminosity", "x", "px", "y", "py", "zeta",
                 "delta", "sigma_x", "sigma_y", "sigma_zeta", "sigma_delta", "emittance_x", "emittance_y", "coupling",
                 "unused_charge")
# bunches.csv's column of each record field (the CSV writes coupling to 6 digits only).
CSV_COLUMNS = {"luminosity": "luminosity_per_crossing", "coupling": None,
               "unused_charge": "unused_partner_macroparticles"}


def read_csv_columns(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {key: [row[key] for row in rows] for key in rows[0]}


def without_run_details(summary):
    """summary.json less what differs between two runs of the same set-up: the file's name, times."""
    return {k: v for k, v in summary.items() if k not in ("setup", "seconds")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The set-up run by the command line (from a file) and by the module (from the dict)."""
    tmp = tmp_path_factory.mktemp("collide")
    setup_file = tmp / "setup.json"
    setup_file.write_text(json.dumps(SETUP, indent=1))
    run_cli("collide", setup_file, "-n", TURNS, "-o", tmp / "cli", "--no-plot")
    result = ft.collide(SETUP, TURNS, output_dir=tmp / "py")
    return tmp, setup_file, result


def test_records(runs):
    _, _, r = runs
    rec = r["records"]
    assert set(rec) == set(RECORD_FIELDS)
    for name in RECORD_FIELDS:
        assert isinstance(rec[name], np.ndarray) and rec[name].shape == (2 * TURNS,), name
    # slot order, beam 1 then beam 2 in each slot; one bunch per beam meets the same partner
    assert_bitwise_equal(rec["slot"], np.repeat(np.arange(TURNS, dtype=np.int64), 2), "slot")
    assert_bitwise_equal(rec["turn"], rec["slot"], "turn")
    assert list(rec["beam"]) == [1, 2] * TURNS
    assert not rec["bunch"].any() and not rec["partner"].any()
    assert np.all(rec["alive"] == 2000)
    # both rows of a crossing hold its luminosity
    assert rec["luminosity"][0] > 0
    assert_bitwise_equal(rec["luminosity"][0::2], rec["luminosity"][1::2], "luminosity of both beams")
    assert np.all((rec["emittance_x"] > 0) & (rec["sigma_x"] > 0) & (rec["sigma_zeta"] > 0))


def test_equals_the_cli(runs):
    tmp, _, r = runs
    cli = read_csv_columns(tmp / "cli" / "bunches.csv")
    # the first crossing's luminosity, bit for bit (the CSV has 17 digits: it reads back exactly)
    assert r["records"]["luminosity"][0] == float(cli["luminosity_per_crossing"][0])
    # every record field the CSV holds to 17 digits
    for name in RECORD_FIELDS:
        column = CSV_COLUMNS.get(name, name)
        if column is None:
            continue
        values = np.array([float(v) for v in cli[column]]).astype(r["records"][name].dtype)
        assert_bitwise_equal(r["records"][name], values, name)
    # the files the module wrote are the CLI's, byte for byte; the summary less file name and times
    assert sorted(r["output_files"]) == sorted(str(tmp / "py" / n) for n in ("bunches.csv", "spectra.csv",
                                                                              "summary.json"))
    for name in ("bunches.csv", "spectra.csv"):
        assert (tmp / "py" / name).read_bytes() == (tmp / "cli" / name).read_bytes(), name
    cli_summary = json.load(open(tmp / "cli" / "summary.json"))
    assert without_run_details(r["summary"]) == without_run_details(cli_summary)
    assert without_run_details(json.load(open(tmp / "py" / "summary.json"))) == without_run_details(cli_summary)
    assert r["summary"]["setup"] == "<dict>"


def test_summary_values(runs):
    _, _, r = runs
    s = r["summary"]
    assert r["xi"].shape == (2, 2) and r["tunes"].shape == (2, 2)
    for b in range(2):
        assert list(r["xi"][b]) == [s["beams"][b]["xi_x"], s["beams"][b]["xi_y"]]
        assert list(r["tunes"][b]) == [s["beams"][b]["qx"], s["beams"][b]["qy"]]
    assert list(r["tunes"][0]) == [0.31, 0.32]
    assert r["xi"][0][0] == pytest.approx(-3.745e-3, rel=1e-3)  # round LHC beams, nominal intensity
    modes = s["coherent_modes"]
    assert list(r["sigma_mode"]) == [modes["sigma_x"], modes["sigma_y"]]
    assert list(r["pi_mode"]) == [modes["pi_x"], modes["pi_y"]]
    assert r["luminosity"] == s["luminosity_m2_s"] > 0
    p0c, mass0 = 6.99999993712e12, 938272088.16
    revolution = 299792458.0 * p0c / np.hypot(p0c, mass0) / 26658.8832  # one bunch: one crossing a turn
    assert r["crossing_frequency"] == s["crossing_frequency_hz"] == pytest.approx(revolution, rel=1e-12)


def test_a_setup_file_gives_the_same_run(runs):
    _, setup_file, r = runs
    from_file = ft.collide(setup_file, TURNS, threads=1, placement="round-robin", device="cpu")
    assert from_file["summary"]["setup"] == str(setup_file) and from_file["output_files"] == []
    for name in RECORD_FIELDS:
        assert_bitwise_equal(from_file["records"][name], r["records"][name], name)


def test_errors(tmp_path):
    misspelt = copy.deepcopy(SETUP)
    misspelt["beams"][1]["bunches"]["sigma_delt"] = 1e-4
    with pytest.raises(ft.InputError) as e:
        ft.collide(misspelt, TURNS)
    assert "<dict>" in str(e.value) and "beams[1].bunches.sigma_delt" in str(e.value)
    assert "unknown field" in str(e.value)
    # the CLI's message for the same set-up in a file, with the file's name
    setup_file = tmp_path / "misspelt.json"
    setup_file.write_text(json.dumps(misspelt))
    _, err = run_cli("collide", setup_file, "-n", TURNS, "-o", tmp_path / "out", "--no-plot", expect_rc=2)
    assert err.strip().splitlines()[-1] == "error: " + str(e.value).replace("<dict>", str(setup_file))
    with pytest.raises(ft.InputError) as e:
        ft.collide(setup_file, TURNS)
    assert str(setup_file) in str(e.value) and "beams[1].bunches.sigma_delt" in str(e.value)

    for kwargs, field in ((dict(turns=0), "turns"), (dict(placement="diagonal"), "placement"),
                          (dict(threads=-1), "threads"), (dict(fma="maybe"), "fma"), (dict(device="tpu"), "device")):
        with pytest.raises(ft.InputError) as e:
            ft.collide(SETUP, **{"turns": TURNS, **kwargs})
        assert f"'{field}'" in str(e.value), kwargs
    no_number = copy.deepcopy(SETUP)
    no_number["ip"]["half_crossing_angle"] = float("nan")
    with pytest.raises(ft.InputError):
        ft.collide(no_number, TURNS)
    with pytest.raises(ft.InputError) as e:
        ft.collide(tmp_path / "no_such_setup.json", TURNS)
    assert "no_such_setup.json" in str(e.value)
    with pytest.raises(ft.InputError) as e:
        ft.collide(SETUP, TURNS, output_dir=setup_file)  # a file, not a directory
    assert "output_dir" in str(e.value)
