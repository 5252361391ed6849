"""Particles (zero-copy NumPy views, constructors) and the tracker, bit for bit against the
command line, including knob changes, monitors and a collective lattice."""
import json

import numpy as np
import pytest

import fusetrack as ft
from conftest import (PARTICLE_ARRAYS, assert_bitwise_equal, assert_particles_equal_npz, lattice_path,
                      run_cli)

GRID = (1e-3, 2e-2, 7, 1e-3, 2e-2, 6)


def test_arrays_are_views_of_the_particles_memory(ring):
    p = ft.Particles.grid(ring, *GRID)
    x = p.x
    assert x.ctypes.data == p._data_pointer("x")
    assert p.delta.ctypes.data == p._data_pointer("delta")
    assert p.state.ctypes.data == p._data_pointer("state")
    assert np.shares_memory(x, p.x)
    before = x.copy()
    ft.Tracker(ring, device="cpu").track(p, 10)
    # the array taken before tracking shows the tracked values: same memory
    assert not np.array_equal(x, before)
    assert_bitwise_equal(x, p.x)
    x[0] = 0.125
    assert p.x[0] == 0.125
    assert x.flags.writeable and not p.delta.flags.writeable and not p.state.flags.writeable
    # a view keeps the particles alive
    v = ft.Particles.grid(ring, *GRID).px
    assert v.shape == (42,) and np.all(v == 0)


def test_assigning_delta_keeps_ptau_rpp_rvv_consistent(ring):
    delta = np.linspace(-1e-3, 1e-3, 11)
    a = ft.Particles.from_arrays(ring, x=np.zeros(11), delta=delta)
    b = ft.Particles.from_arrays(ring, x=np.zeros(11))
    b.delta = delta
    for name in ("delta", "ptau", "rpp", "rvv"):
        assert_bitwise_equal(getattr(a, name), getattr(b, name), name)
    assert np.all(a.rpp == 1 / (1 + delta))
    with pytest.raises(ValueError):
        b.x = np.zeros(3)
    with pytest.raises(AttributeError):
        b.state = np.zeros(11)


def test_from_arrays_equals_the_grid(ring):
    g = ft.Particles.grid(ring, *GRID)
    a = ft.Particles.from_arrays(ring, x=g.x, y=g.y)
    for name in PARTICLE_ARRAYS:
        assert_bitwise_equal(getattr(a, name), getattr(g, name), name)
    assert a.beta0 == ring.reference["beta0"]
    with pytest.raises(ValueError):
        ft.Particles.from_arrays(ring, x=np.zeros(3), y=np.zeros(4))


@pytest.mark.parametrize("threads", [1, 2])
def test_track_equals_the_cli(ring, tmp_path, threads):
    out = tmp_path / "out.npz"
    run_cli("track", lattice_path("sextupole_rf_ring.json"), "-n", 300, "--grid", *GRID, "--device", "cpu",
            "--threads", threads, "-o", out)
    p = ft.Particles.grid(ring, *GRID)
    t = ft.Tracker(ring, device="cpu", threads=threads)
    r = t.track(p, 300)
    assert r["backend"] == "cpu" and r["seconds"] > 0
    assert 0 < p.alive_count < len(p)  # the grid reaches beyond the dynamic aperture
    assert_particles_equal_npz(p, out)
    # written by the module: the same file, byte for byte; read back: the same coordinates
    p.write(tmp_path / "py.npz")
    assert (tmp_path / "py.npz").read_bytes() == out.read_bytes()
    back = ft.Particles.from_file(tmp_path / "py.npz", ring)
    for name in ("x", "px", "y", "py", "zeta", "delta"):
        assert_bitwise_equal(getattr(back, name), getattr(p, name), name)


def test_knob_change_is_used_by_the_next_track(ring, tmp_path):
    t = ft.Tracker(ring, device="cpu")
    p = ft.Particles.grid(ring, *GRID)
    t.track(p, 50)
    ring["sd"]["knl"] = [0.0, 0.0, -2.5]
    ring["qd"]["knl"] = [0.0, -0.185]
    p = ft.Particles.grid(ring, *GRID)
    t.track(p, 200)
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(ring.to_dict()))
    out = tmp_path / "out.npz"
    run_cli("track", changed, "-n", 200, "--grid", *GRID, "--device", "cpu", "-o", out)
    assert_particles_equal_npz(p, out)


def test_matched_gaussian_equals_the_cli(tmp_path):
    lat = ft.Lattice.from_file(lattice_path("fodo_ring.json"))
    out = tmp_path / "g.npz"
    run_cli("track", lattice_path("fodo_ring.json"), "-n", 20, "--gaussian", 500, "--emittance-nx", 2e-6,
            "--emittance-ny", 1e-6, "--sigma-zeta", 0.1, "--sigma-delta", 1e-4, "--seed", 7, "--device", "cpu",
            "-o", out)
    p = ft.Particles.matched_gaussian(lat, 500, 2e-6, 1e-6, 0.1, 1e-4, seed=7)
    ft.Tracker(lat, device="cpu").track(p, 20)
    assert_particles_equal_npz(p, out)
    with pytest.raises(ft.InputError) as e:
        ft.Particles.matched_gaussian(lat, 10, 0.0, 1e-6)
    assert "positive normalised emittances" in str(e.value) and "emittance_nx" in str(e.value)


def test_collective_matched_bunch_and_monitor_equal_the_cli(tmp_path):
    path = lattice_path("ps_injection_longitudinal.json")
    lat = ft.Lattice.from_file(path)
    assert lat.has_collective
    out, mon = tmp_path / "p.npz", tmp_path / "m.npz"
    stdout, _ = run_cli("track", path, "-n", 40, "--matched", 2000, "--sigma-zeta", 10, "--distribution",
                        "parabolic", "--seed", 3, "--monitor", mon, "--monitor-every", 2, "--profile-every", 20,
                        "--device", "cpu", "-o", out)
    p, report = ft.Particles.matched_bunch(lat, 2000, 10.0, distribution="parabolic", seed=3)
    assert f"eta {report['eta']:.6e}" in stdout
    m = ft.Monitor(every=2, profile_every=20)
    r = ft.Tracker(lat, device="cpu").track(p, 40, monitor=m)
    assert_particles_equal_npz(p, out)
    arrays = m.arrays()
    with np.load(mon) as d:
        assert set(arrays) == set(d.files)
        for k in d.files:
            assert_bitwise_equal(arrays[k], d[k], k)
    (c,) = r["collective"]
    assert c["counts"].sum() == 2000 * 2 ** 24 and c["field"].shape == (c["n_slices"],)
    m.write(tmp_path / "py_m.npz")
    with np.load(tmp_path / "py_m.npz") as a, np.load(mon) as b:
        for k in b.files:
            assert_bitwise_equal(a[k], b[k], k)


def test_tracker_errors():
    lat = ft.Lattice.from_file(lattice_path("fodo_ring.json"))
    with pytest.raises(ft.InputError) as e:
        ft.Tracker(lat, fma="fast")
    assert "field 'fma'" in str(e.value)
    with pytest.raises(ft.InputError):
        ft.Tracker(lat, device="tpu")
    t = ft.Tracker(lat, device="cpu")
    with pytest.raises(ft.InputError) as e:
        t.track(ft.Particles.grid(lat, 0, 1e-3, 2, 0, 1e-3, 2), 0)
    assert "field 'turns': must be positive" in str(e.value)
    if ft.gpu_unavailable_reason():
        with pytest.raises(ft.DeviceError) as e:
            ft.Tracker(lat, device="gpu")
        _, err = run_cli("track", lattice_path("fodo_ring.json"), "-n", 1, "--device", "gpu", expect_rc=1)
        assert err.strip() == f"error: {e.value}"
        auto = ft.Tracker(lat, device="auto")
        assert auto.backend == "cpu" and "tracking on the CPU" in auto.notices[0]


def test_plugin_function_error_equals_the_cli(tmp_path):
    import os
    from conftest import BUILD_DIR, SOURCE_DIR
    plugin = os.path.join(BUILD_DIR, "tests", "plugins", "fixtures", "fusetrack_plugin_fixture_cpu_throws.so")
    lattice = os.path.join(SOURCE_DIR, "tests", "plugins", "fixtures", "cpu_throws", "throwing_lattice.json")
    if not os.path.exists(plugin):
        pytest.skip("the plugin fixtures of tests/plugins are not built")
    _, err = run_cli("track", lattice, "--plugin", plugin, "--device", "cpu", "-n", 3, expect_rc=1)
    ft.load_plugin(plugin)
    lat = ft.Lattice.from_file(lattice)
    with pytest.raises(ft.Error) as e:
        ft.Tracker(lat, device="cpu").track(ft.Particles.grid(lat, 1e-4, 1e-3, 10, 1e-4, 1e-3, 10), 3)
    assert err.strip() == f"error: {e.value}"
    assert "ThrowingKick fixture: x above the threshold" in str(e.value)


def test_tracker_with_variants_equals_each_variant_alone(ring, tmp_path):
    """Tracker(variants=...): particles carrying their variant, tracked in one call, each bitwise as
    through that variant's lattice alone."""
    doc = json.load(open(lattice_path("sextupole_rf_ring.json")))
    doc["elements"]["sd"]["knl"][2] = -9.0
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(doc))
    tracker = ft.Tracker(ring, device="cpu", variants=[lattice_path("sextupole_rf_ring.json"), changed])
    assert tracker.variant_names == ["sextupole_rf_ring", "changed"]
    x = np.linspace(-0.038, 0.038, 12)
    both = ft.Particles.from_arrays(ring, x=np.concatenate([x, x]), y=np.full(24, 0.01))
    both.variant = np.repeat([0, 1], 12)
    tracker.track(both, turns=300)
    for k, lattice in enumerate([ring, ft.Lattice.from_file(changed)]):
        alone = ft.Particles.from_arrays(ring, x=x, y=np.full(12, 0.01))
        ft.Tracker(lattice, device="cpu").track(alone, turns=300)
        for name in ("x", "px", "y", "py", "zeta", "delta", "state", "lost_turn"):
            assert_bitwise_equal(getattr(both, name)[12 * k:12 * (k + 1)], getattr(alone, name), name)
    assert both.alive_count < 24
