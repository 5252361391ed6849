"""Bunch trains in the Python module (Particles.train, declared_train, bunch_moments) against the
command line's ``fusetrack track --bunches``: the same train, the same tracked particles bit for bit and
the same per-bunch moments as its CSV; the moments against NumPy."""
import json

import numpy as np
import pytest

import fusetrack as ft
from conftest import assert_particles_equal_npz, lattice_path, run_cli

BUNCHES, SPACING, PER_BUNCH, TURNS = 3, 2.4, 300, 5


@pytest.fixture
def train_lattice(tmp_path):
    """The FODO ring with a multi-turn wake and a delayed damper that declare a train of 3 bunches."""
    with open(lattice_path("fodo_ring.json")) as f:
        doc = json.load(f)
    train = {"n_bunches": BUNCHES, "bunch_spacing": SPACING}
    doc["elements"]["wake"] = {
        "type": "TransverseWake", "n_slices": 40, "zeta_min": -0.6, "zeta_max": 0.6, "intensity": 5e11,
        "memory_turns": 2, "convolution": "fft",
        "sources": [{"type": "Resonator", "r_shunt": 5e7, "q": 2.0, "frequency": 3e8}], **train}
    doc["elements"]["damper"] = {"type": "TransverseDamper", "gain_turns": 20.0, "zeta_min": -0.6,
                                 "zeta_max": 0.6, "delay": 1, **train}
    doc["sequence"] = ["wake", "damper"] + doc["sequence"]
    path = tmp_path / "train_ring.json"
    path.write_text(json.dumps(doc))
    return path


def python_train(lattice):
    # the command line's --gaussian bunch b is drawn with seed + b
    bunches = [ft.Particles.matched_gaussian(lattice, PER_BUNCH, 1e-6, 1e-6, sigma_zeta=0.1, sigma_delta=1e-4,
                                             seed=1 + b) for b in range(BUNCHES)]
    return ft.Particles.train(bunches, SPACING)


def test_declared_train(train_lattice):
    lattice = ft.Lattice.from_file(str(train_lattice))
    t = ft.declared_train(lattice)
    assert t["bunches"] == BUNCHES and t["spacing"] == SPACING and t["centre"] == 0.0
    assert t["element"] == "damper"  # the last element declaring it
    single = ft.declared_train(ft.Lattice.from_file(lattice_path("fodo_ring.json")))
    assert single["bunches"] == 1 and single["element"] == ""


def test_train_layout_and_moments_against_numpy(train_lattice):
    lattice = ft.Lattice.from_file(str(train_lattice))
    p = python_train(lattice)
    assert len(p) == BUNCHES * PER_BUNCH
    m = ft.bunch_moments(p, lattice)
    assert list(m["macroparticles"]) == [PER_BUNCH] * BUNCHES and m["out_of_range"] == 0
    for b in range(BUNCHES):
        part = slice(b * PER_BUNCH, (b + 1) * PER_BUNCH)
        assert np.mean(p.zeta[part]) == pytest.approx(-b * SPACING, abs=0.05)
        for name in ("x", "px", "y", "py", "zeta", "delta"):
            v = getattr(p, name)[part]
            # fixed-point sums: the resolution of the declared ranges, far below the spread
            assert m["mean_" + name][b] == pytest.approx(np.mean(v), abs=1e-9 * max(np.std(v), 1e-12) + 1e-15)
        x, px = p.x[part] - np.mean(p.x[part]), p.px[part] - np.mean(p.px[part])
        emittance = np.sqrt(np.mean(x * x) * np.mean(px * px) - np.mean(x * px) ** 2)
        assert m["emittance_x"][b] == pytest.approx(emittance, rel=1e-8)
    # an explicit train: two bunches of the three, the third out of the cuts' half spacings is ignored
    two = ft.bunch_moments(p, bunches=2, spacing=SPACING, centre=0.0)
    assert list(two["macroparticles"]) == [PER_BUNCH, PER_BUNCH]


def test_python_train_equals_the_command_line(train_lattice, tmp_path):
    lattice = ft.Lattice.from_file(str(train_lattice))
    out, csv = tmp_path / "out.npz", tmp_path / "bunches.csv"
    run_cli("track", train_lattice, "-n", TURNS, "--gaussian", PER_BUNCH, "--emittance-nx", 1e-6, "--emittance-ny",
            1e-6, "--sigma-zeta", 0.1, "--sigma-delta", 1e-4, "--bunches", BUNCHES, "--device", "cpu", "-o", out,
            "--bunches-output", csv)
    p = python_train(lattice)
    ft.Tracker(lattice, device="cpu").track(p, TURNS)
    assert_particles_equal_npz(p, out)  # the same train, the same wakes: bit for bit
    rows = np.genfromtxt(csv, delimiter=",", names=True)
    last = rows[rows["turn"] == rows["turn"].max()]
    assert int(last["turn"][0]) == TURNS and len(last) == BUNCHES
    m = ft.bunch_moments(p, lattice)
    for name in ("macroparticles", "mean_x", "mean_px", "mean_y", "mean_py", "mean_zeta", "mean_delta",
                 "emittance_x", "emittance_y"):
        assert list(m[name]) == list(last[name]), name  # %.17g in the CSV: the same doubles
    # the wakes acted: the bunches' centroids differ from those of the ring alone
    free = python_train(lattice)
    alone = ft.Lattice.from_file(lattice_path("fodo_ring.json"))
    ft.Tracker(alone, device="cpu").track(free, TURNS)
    assert np.max(np.abs(m["mean_px"] - ft.bunch_moments(free, lattice)["mean_px"])) > 1e-9


def test_bad_train_arguments(train_lattice):
    lattice = ft.Lattice.from_file(str(train_lattice))
    bunch = ft.Particles.matched_gaussian(lattice, 10, 1e-6, 1e-6, sigma_zeta=0.1)
    with pytest.raises(ft.Error, match="finite spacing > 0"):
        ft.Particles.train([bunch, bunch], 0.0)
    with pytest.raises(ft.Error, match="at least one bunch"):
        ft.Particles.train([], 1.0)
    with pytest.raises(ft.InputError, match="whole number"):
        ft.bunch_moments(bunch, bunches=2.5, spacing=1.0)
