"""GPU: the tracker and repro() on a GPU equal the CPU bit for bit (fma off), and a knob change
on the switch kernel needs no new compile. Skipped without a usable GPU (CTest: skipped)."""
import os

import numpy as np
import pytest

import fusetrack as ft
from conftest import PARTICLE_ARRAYS, assert_bitwise_equal, lattice_path, run_cli

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(bool(ft.gpu_unavailable_reason()),
                                 reason=f"no usable GPU: {ft.gpu_unavailable_reason()}")]

GRID = (1e-3, 2e-2, 32, 1e-3, 2e-2, 32)


def cache_entries(directory):
    return sorted(f for f in os.listdir(directory)) if os.path.isdir(directory) else []


def test_gpu_track_equals_cpu_and_knobs_reuse_the_switch_kernel(tmp_path):
    ring = ft.Lattice.from_file(lattice_path("sextupole_rf_ring.json"))
    cache = tmp_path / "kernels"
    gpu = ft.Tracker(ring, device="gpu", dispatch="switch", kernel_cache=str(cache))
    cpu = ft.Tracker(ring, device="cpu")
    assert gpu.backend.startswith("gpu")
    for knl in (-3.5, -2.5, -1.5):
        ring["sd"]["knl"] = [0.0, 0.0, knl]
        a, b = ft.Particles.grid(ring, *GRID), ft.Particles.grid(ring, *GRID)
        gpu.track(a, 200)
        cpu.track(b, 200)
        for name in PARTICLE_ARRAYS:
            assert_bitwise_equal(getattr(a, name), getattr(b, name), name)
        if knl == -3.5:
            compiled = cache_entries(cache)
            assert compiled, "the first track compiles one kernel into the cache"
        assert cache_entries(cache) == compiled, "a knob change must not compile the switch kernel again"
    # A change of an integer field that the switch kernel's motifs hold as a constant (sd's kick order,
    # 2 -> 3): the kernel is generated and compiled again, and still equals the CPU bit for bit.
    ring["sd"]["knl"] = [0.0, 0.0, -2.5, 40.0]
    a, b = ft.Particles.grid(ring, *GRID), ft.Particles.grid(ring, *GRID)
    gpu.track(a, 200)
    cpu.track(b, 200)
    for name in PARTICLE_ARRAYS:
        assert_bitwise_equal(getattr(a, name), getattr(b, name), name)
    assert len(cache_entries(cache)) == len(compiled) + 1, "the motifs' kick order changed: a new kernel"
    ring["sd"]["knl"] = [0.0, 0.0, -1.5]
    # the baked form carries the parameters as constants: a knob change compiles a new kernel
    baked = ft.Tracker(ring, device="gpu", dispatch="baked", kernel_cache=str(cache))
    baked.track(ft.Particles.grid(ring, *GRID), 10)
    n = len(cache_entries(cache))
    ring["sd"]["knl"] = [0.0, 0.0, -3.0]
    c, d = ft.Particles.grid(ring, *GRID), ft.Particles.grid(ring, *GRID)
    baked.track(c, 200)
    cpu.track(d, 200)
    assert len(cache_entries(cache)) == n + 1
    assert_bitwise_equal(c.x, d.x, "x")


def test_repro_equals_the_cli():
    path = lattice_path("sextupole_rf_ring.json")
    out, _ = run_cli("repro", path, "-n", 300, "-N", 2000, "--kernel-cache", "off")
    r = ft.repro(ft.Lattice.from_file(path), n=2000, turns=300, kernel_cache="off")
    assert r["identical"] and "result: IDENTICAL" in out
    assert f"bitwise-equal coordinates: {r['bitwise_equal']} of {r['coordinates']}" in out
    assert_bitwise_equal(r["cpu_particles"].x, r["gpu_particles"].x, "x")


def test_collective_on_the_gpu_equals_cpu():
    lat = ft.Lattice.from_file(lattice_path("ps_injection_longitudinal.json"))
    p, _ = ft.Particles.matched_bunch(lat, 5000, 10.0, distribution="parabolic")
    q = p.copy()
    rg = ft.Tracker(lat, device="gpu").track(p, 50)
    rc = ft.Tracker(lat, device="cpu").track(q, 50)
    for name in PARTICLE_ARRAYS:
        assert_bitwise_equal(getattr(p, name), getattr(q, name), name)
    assert_bitwise_equal(rg["collective"][0]["counts"], rc["collective"][0]["counts"], "profile")
    assert_bitwise_equal(rg["collective"][0]["field"], rc["collective"][0]["field"], "field")
