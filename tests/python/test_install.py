"""After `cmake --install` into a temporary prefix, without the build tree on the path: the module imports
and tracks, and the installed command line draws its plots with the installed package."""
import os
import subprocess
import sys

import pytest

from conftest import BUILD_DIR, lattice_path

pytestmark = pytest.mark.install


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("install") / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return prefix


def environment_without_the_build_tree():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FUSETRACK_PLUGIN_PATH")}


def test_import_after_cmake_install(prefix, tmp_path):
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert (site / "fusetrack" / "__init__.py").exists()
    code = ("import fusetrack as ft, sys; "
            f"ring = ft.Lattice.from_file({lattice_path('fodo_ring.json')!r}); "
            "p = ft.Particles.grid(ring, 1e-4, 1e-3, 3, 1e-4, 1e-3, 3); "
            "ft.Tracker(ring, device='cpu').track(p, 10); "
            "print(ft.__file__); print(p.alive_count); print([q['file'] for q in ft.plugins()])")
    env = environment_without_the_build_tree()
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    module_file, alive, plugin_files = r.stdout.splitlines()
    assert module_file.startswith(str(site))
    assert alive == "9"
    assert str(prefix) in plugin_files  # the built-in plugin installed next to libfusetrack


def test_installed_command_line_plots_with_the_installed_package(prefix, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "optics.png"
    command = [str(prefix / "bin" / "fusetrack"), "optics", lattice_path("fodo_ring.json"), "--tracking-turns", "0",
               "--plot", str(png)]
    r = subprocess.run(command, capture_output=True, text=True, env=environment_without_the_build_tree(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in r.stderr, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
