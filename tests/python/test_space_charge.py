"""install_space_charge(), remove_space_charge() and tune_footprint() against the command line."""
import numpy as np
import pytest

import fusetrack as ft
from conftest import lattice_path, run_cli

BUNCH = dict(intensity=1.5e11, emittances=(2e-6, 1.5e-6), sigma_zeta=8.0, delta_rms=1e-3)


def test_install_equals_the_cli_and_remove_restores(tmp_path):
    ring = ft.Lattice.from_file(lattice_path("space_charge_ring.json"))
    sc = ft.install_space_charge(ring, elements=32, **BUNCH)
    out = tmp_path / "sc.json"
    stdout, _ = run_cli("spacecharge", "install", lattice_path("space_charge_ring.json"), "--elements", 32,
                        "--intensity", 1.5e11, "--emittances", 2e-6, 1.5e-6, "--sigma-zeta", 8, "--delta-rms", 1e-3,
                        "-o", out)
    cli = ft.Lattice.from_file(str(out))
    assert sc["lattice"].sequence == cli.sequence
    assert len(sc["kicks"]) == 32 and sc["kicks"][0]["name"] == "sc_0"
    assert f"dQx = {sc['laslett_dqx']:.6g}" in stdout
    assert sc["laslett_dqx"] < 0 and sc["laslett_dqy"] < 0
    # The argument is not changed; removing gives the original sequence back.
    assert len(ring) == 177
    assert ft.remove_space_charge(sc["lattice"]).sequence == ring.sequence


def test_install_pic_equals_the_cli(tmp_path):
    ring = ft.Lattice.from_file(lattice_path("space_charge_ring.json"))
    sc = ft.install_space_charge(ring, elements=16, model="pic", pic_model="3D", nodes=(32, 24, 16),
                                 fixed_grid_sigmas=6.0, **BUNCH)
    out = tmp_path / "pic.json"
    run_cli("spacecharge", "install", lattice_path("space_charge_ring.json"), "--elements", 16, "--intensity", 1.5e11,
            "--emittances", 2e-6, 1.5e-6, "--sigma-zeta", 8, "--delta-rms", 1e-3, "--model", "pic", "--pic-model", "3D",
            "--nodes", 32, 24, 16, "--fixed-grid-sigmas", 6, "-o", out)
    cli = ft.Lattice.from_file(str(out))
    assert sc["lattice"].sequence == cli.sequence
    assert ft.remove_space_charge(sc["lattice"]).sequence == ring.sequence
    with pytest.raises(ft.InputError, match="model"):
        ft.install_space_charge(ring, elements=4, model="frozen-ish", **BUNCH)


def test_footprint_equals_the_cli(tmp_path):
    ring = ft.Lattice.from_file(lattice_path("space_charge_ring.json"))
    sc = ft.install_space_charge(ring, elements=32, **BUNCH)
    fp = ft.tune_footprint(sc["lattice"], (2e-6, 1.5e-6), amplitudes=3, angles=2, turns=256, device="cpu")
    assert fp["qx"].shape == (6,) and (fp["lost_turn"] == -1).all()
    # the tunes of the bare ring, and every particle shifted below them
    assert fp["qx0"] == pytest.approx(0.2934120925, abs=1e-9)
    assert (fp["qx"] < fp["qx0"]).all() and (fp["qy"] < fp["qy0"]).all()
    out = tmp_path / "sc.json"
    run_cli("spacecharge", "install", lattice_path("space_charge_ring.json"), "--elements", 32, "--intensity",
            1.5e11, "--emittances", 2e-6, 1.5e-6, "--sigma-zeta", 8, "--delta-rms", 1e-3, "-o", out)
    run_cli("spacecharge", "footprint", out, "--emittances", 2e-6, 1.5e-6, "--amplitudes", 3, "--angles", 2,
            "-n", 256, "--device", "cpu", "--no-plot", "-o", tmp_path / "fp")
    csv = np.genfromtxt(tmp_path / "fp" / "footprint.csv", delimiter=",", names=True, comments="#", skip_header=1)
    # the CSV holds 12 significant digits
    np.testing.assert_allclose(csv["qx"], fp["qx"], rtol=0, atol=1e-11)
    np.testing.assert_allclose(csv["qy"], fp["qy"], rtol=0, atol=1e-11)


def test_bad_emittances_name_the_field():
    ring = ft.Lattice.from_file(lattice_path("space_charge_ring.json"))
    with pytest.raises(ft.InputError, match="'emittances'"):
        ft.tune_footprint(ring, (2e-6,))
    with pytest.raises(ft.InputError, match="emittances"):
        ft.tune_footprint(ring, (2e-6, 0.0))


def test_beam_sizes_follow_the_beam():
    ring = ft.Lattice.from_file(lattice_path("space_charge_ring.json"))
    sc = ft.install_space_charge(ring, elements=8, **BUNCH)["lattice"]
    follow = ft.SpaceChargeBeamSizes(sc)
    assert follow.elements == 8
    p = ft.Particles.matched_gaussian(ring, 2000, emittance_nx=4e-6, emittance_ny=3e-6, sigma_zeta=8.0,
                                      sigma_delta=1e-3, seed=3)
    before = sc["sc_0"]["sigma_x"]
    tracker = ft.Tracker(sc, device="cpu")
    tracker.track(p, turns=2)
    follow.update(p, 1.5e11)
    # twice the installation's emittances: larger sizes (about sqrt(2) where the dispersion is small)
    assert sc["sc_0"]["sigma_x"] > 1.2 * before
    alive = int((np.asarray(p.state) > 0).sum())
    assert sc["sc_0"]["number_of_particles"] == pytest.approx(1.5e11 * alive / 2000, rel=1e-12)
    tracker.track(p, turns=2)  # the tracker takes the new sizes
    with pytest.raises(ft.InputError, match="no SpaceChargeBiGaussian"):
        ft.SpaceChargeBeamSizes(ring)
