"""Shared fixtures of the Python module's tests: where the build tree, the sources and the
command line are, and a runner for the command line (whose results the module must equal)."""
import os
import subprocess

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("FUSETRACK_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.environ.get("FUSETRACK_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
CLI = os.path.join(BUILD_DIR, "bin", "fusetrack")
LATTICES = os.path.join(SOURCE_DIR, "lattices")


def lattice_path(name):
    return os.path.join(LATTICES, name)


def run_cli(*args, expect_rc=0):
    """Runs the fusetrack command line; returns (stdout, stderr). Asserts its exit code."""
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == expect_rc, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout, r.stderr


def assert_bitwise_equal(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} and {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtypes {a.dtype} and {b.dtype}"
    assert a.tobytes() == b.tobytes(), f"{what}: differs at {np.flatnonzero(a.ravel() != b.ravel())[:5]}"


PARTICLE_ARRAYS = ("x", "px", "y", "py", "zeta", "delta", "ptau", "rpp", "rvv", "state", "lost_turn",
                   "lost_element", "id")


def assert_particles_equal_npz(particles, npz_path):
    """Every array of `particles` bitwise equal to the .npz written by the command line."""
    with np.load(npz_path) as d:
        for name in PARTICLE_ARRAYS:
            assert_bitwise_equal(getattr(particles, name), d[name], name)


def pytest_sessionfinish(session, exitstatus):
    # A run in which everything was skipped (the GPU tests without a GPU) exits 77, so that CTest
    # reports it as skipped (SKIP_RETURN_CODE 77), not passed.
    if os.environ.get("FUSETRACK_ALL_SKIPPED_EXIT") and exitstatus == 0:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        stats = reporter.stats if reporter else {}
        if stats.get("skipped") and not stats.get("passed"):
            session.exitstatus = 77


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a usable GPU (skipped without one)")
    config.addinivalue_line("markers", "install: runs cmake --install into a temporary prefix")
    config.addinivalue_line("markers", "plots: the command line's plots (matplotlib; no compiled module needed)")


@pytest.fixture
def ring():
    import fusetrack as ft
    return ft.Lattice.from_file(lattice_path("sextupole_rf_ring.json"))
