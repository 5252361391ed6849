"""`fusetrack track --space-charge-update K`: frozen space-charge sizes that follow the beam.

A ring with elements installed for emittances (2, 1.5) um tracks a beam of twice those emittances; at
turns 0, K, 2K, ... every element gets sigma = sqrt(beta eps + (D sigma_delta)^2) from the particles.
The test recomputes the sizes from the particles the command line writes (numpy: the betatron
emittances after removing the part correlated with delta, the rms delta, zeta's mean and rms) with the
optics the installation reports, and compares them with the CSV of the updates."""
import numpy as np
import pytest

import fusetrack as ft
from conftest import lattice_path, run_cli

INSTALL = dict(intensity=1.5e11, emittances=(2e-6, 1.5e-6), sigma_zeta=8.0, delta_rms=1e-3)
BEAM = ["--gaussian", 3000, "--emittance-nx", 4e-6, "--emittance-ny", 3e-6, "--sigma-zeta", 8, "--sigma-delta",
        1e-3, "--seed", 5]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    d = tmp_path_factory.mktemp("sc_update")
    ring = d / "ring_sc.json"
    run_cli("spacecharge", "install", lattice_path("space_charge_ring.json"), "--elements", 16, "--intensity", 1.5e11,
            "--emittances", 2e-6, 1.5e-6, "--sigma-zeta", 8, "--delta-rms", 1e-3, "-o", ring)
    kicks = ft.install_space_charge(ft.Lattice.from_file(lattice_path("space_charge_ring.json")), elements=16,
                                    **INSTALL)["kicks"]
    return d, ring, kicks


def read_updates(path):
    rows = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    return rows


def expected_sizes(npz, kicks):
    """The sizes of every element from the particles in `npz` (independent of the library's moments)."""
    with np.load(npz) as p:
        alive = p["state"] > 0
        x, px, y, py = p["x"][alive], p["px"][alive], p["y"][alive], p["py"][alive]
        zeta, delta = p["zeta"][alive], p["delta"][alive]
        n_total = p["state"].size

    def betatron_emittance(u, pu):
        c = np.cov(np.vstack([u, pu, delta]), bias=True)
        reduced = c[:2, :2] - np.outer(c[:2, 2], c[:2, 2]) / c[2, 2]
        return np.sqrt(np.linalg.det(reduced))

    ex, ey, sd = betatron_emittance(x, px), betatron_emittance(y, py), delta.std()
    sx = np.array([np.sqrt(k["beta_x"] * ex + (k["dx"] * sd) ** 2) for k in kicks])
    sy = np.array([np.sqrt(k["beta_y"] * ey + (k["dy"] * sd) ** 2) for k in kicks])
    return dict(sigma_x=sx, sigma_y=sy, sigma_z=zeta.std(), z0=zeta.mean(), alive=int(alive.sum()),
                intensity=1.5e11 * alive.sum() / n_total, emittance_x=ex)


def test_updated_sizes_follow_the_beam(installed):
    d, ring, kicks = installed
    out20, out10 = d / "p20.npz", d / "p10.npz"
    stdout, _ = run_cli("track", ring, *BEAM, "-n", 20, "--space-charge-update", 10, "-v", "--device", "cpu",
                        "--threads", 1, "-o", out20)
    assert "space charge turn 10: mean sigma_x" in stdout
    u = read_updates(d / "p20.space_charge.csv")
    assert sorted(set(u["turn"].tolist())) == [0, 10, 20]
    assert list(u["name"][u["turn"] == 0]) == [k["name"] for k in kicks]
    # The same beam tracked 10 turns (one update at turn 0, then one at turn 10): the particles at turn 10.
    run_cli("track", ring, *BEAM, "-n", 10, "--space-charge-update", 10, "--device", "cpu", "--threads", 1, "-o", out10)
    u10 = read_updates(d / "p10.space_charge.csv")
    for turn, npz in ((10, out10), (20, out20)):
        e = expected_sizes(npz, kicks)
        row = u[u["turn"] == turn]
        np.testing.assert_allclose(row["sigma_x"], e["sigma_x"], rtol=1e-9, atol=0)
        np.testing.assert_allclose(row["sigma_y"], e["sigma_y"], rtol=1e-9, atol=0)
        np.testing.assert_allclose(row["sigma_z"], e["sigma_z"], rtol=1e-9)
        np.testing.assert_allclose(row["z0"], e["z0"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(row["number_of_particles"], e["intensity"], rtol=1e-12)
        assert (row["alive"] == e["alive"]).all()
        np.testing.assert_allclose(row["emittance_x"], e["emittance_x"], rtol=1e-9)
    # The 10-turn run's last update is the 20-turn run's second: both tracked the same 10 turns.
    np.testing.assert_array_equal(u10["sigma_x"][u10["turn"] == 10], u["sigma_x"][u["turn"] == 10])
    # Twice the installed emittances: every element larger than installed (about sqrt(2) in y, D = 0).
    installed_y = np.array([k["sigma_y"] for k in kicks])
    ratio = u["sigma_y"][u["turn"] == 0] / installed_y
    assert (ratio > 1.3).all() and (ratio < 1.5).all()


def test_updates_change_the_tracking_and_do_not_depend_on_threads(installed):
    d, ring, _ = installed
    outs = {}
    for threads in (1, 2):
        out = d / f"t{threads}.npz"
        run_cli("track", ring, *BEAM, "-n", 12, "--space-charge-update", 4, "--device", "cpu", "--threads", threads,
                "-o", out, "--space-charge-sizes", d / f"t{threads}.csv")
        outs[threads] = out
    with np.load(outs[1]) as a, np.load(outs[2]) as b:
        for name in ("x", "px", "y", "py", "zeta", "delta", "state"):
            assert a[name].tobytes() == b[name].tobytes(), name
    assert (d / "t1.csv").read_bytes() == (d / "t2.csv").read_bytes()
    # Without updates the elements keep the installed (smaller) sizes: other kicks, other particles.
    run_cli("track", ring, *BEAM, "-n", 12, "--device", "cpu", "--threads", 1, "-o", d / "fixed.npz")
    with np.load(outs[1]) as a, np.load(d / "fixed.npz") as b:
        assert not np.array_equal(a["px"], b["px"])


def test_bad_input_names_the_option_file_and_element(installed, tmp_path):
    d, ring, _ = installed
    beam = ["--gaussian", 200, "--emittance-nx", 2e-6, "--emittance-ny", 1.5e-6, "--sigma-zeta", 8,
            "--sigma-delta", 1e-3, "-n", 2, "--device", "cpu"]
    for k in (0, -3):
        _, err = run_cli("track", ring, *beam, "--space-charge-update", k, expect_rc=2)
        assert "--space-charge-update" in err and "positive" in err
    bare = lattice_path("space_charge_ring.json")
    _, err = run_cli("track", bare, *beam, "--space-charge-update", 1, expect_rc=2)
    assert "space_charge_ring.json" in err and "no SpaceChargeBiGaussian" in err and "--space-charge-update" in err
    _, err = run_cli("track", ring, *beam, "--space-charge-intensity", 1e11, expect_rc=2)
    assert "--space-charge-intensity" in err and "needs --space-charge-update" in err
    # One definition at two positions (not as `fusetrack spacecharge install` writes them).
    import json
    doc = json.loads(ring.read_text())
    seq = doc["sequence"]
    seq[seq.index("sc_1")] = "sc_0"
    del doc["elements"]["sc_1"]
    shared = tmp_path / "shared.json"
    shared.write_text(json.dumps(doc))
    _, err = run_cli("track", shared, *beam, "--space-charge-update", 1, expect_rc=2)
    assert "shared.json" in err and "'sc_0'" in err and "one definition per position" in err
    # Elements that do not carry one intensity: named, unless the intensity is given.
    doc = json.loads(ring.read_text())
    doc["elements"]["sc_3"]["number_of_particles"] = 1e11
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(doc))
    _, err = run_cli("track", mixed, *beam, "--space-charge-update", 1, expect_rc=2)
    assert "'sc_3'" in err and "number_of_particles" in err
    run_cli("track", mixed, *beam, "--space-charge-update", 1, "--space-charge-intensity", 1.5e11,
            "--space-charge-sizes", tmp_path / "mixed.csv")
    u = read_updates(tmp_path / "mixed.csv")
    np.testing.assert_allclose(u["number_of_particles"][u["turn"] == 0], 1.5e11, rtol=1e-12)
    _, err = run_cli("track", ring, *beam, "--space-charge-update", 1, "--space-charge-intensity", -1, expect_rc=2)
    assert "--space-charge-intensity" in err


def test_tracker_option_equals_the_cli(installed):
    """Tracker.track(..., space_charge_update=K): the same session call as the command line."""
    d, ring, _ = installed
    run_cli("track", ring, *BEAM, "-n", 8, "--space-charge-update", 4, "--device", "cpu", "--threads", 1, "-o",
            d / "cli8.npz")
    u = read_updates(d / "cli8.space_charge.csv")
    lattice = ft.Lattice.from_file(str(ring))
    p = ft.Particles.matched_gaussian(lattice, 3000, emittance_nx=4e-6, emittance_ny=3e-6, sigma_zeta=8.0,
                                      sigma_delta=1e-3, seed=5)
    tracker = ft.Tracker(lattice, device="cpu", threads=1)
    out = tracker.track(p, turns=8, space_charge_update=4)
    assert [x["turn"] for x in out["space_charge"]] == [0, 4, 8]
    assert out["space_charge_elements"] == list(u["name"][u["turn"] == 0])
    for x in out["space_charge"]:
        np.testing.assert_array_equal(x["sigma_x"], u["sigma_x"][u["turn"] == x["turn"]])
        np.testing.assert_array_equal(x["sigma_y"], u["sigma_y"][u["turn"] == x["turn"]])
    # The lattice holds the last update's sizes.
    assert lattice["sc_5"]["sigma_x"] == out["space_charge"][-1]["sigma_x"][5]
    with np.load(d / "cli8.npz") as c:
        np.testing.assert_array_equal(np.asarray(p.x), c["x"])
    with pytest.raises(ft.InputError, match="space_charge_update"):
        tracker.track(p, turns=2, space_charge_update=-1)
