"""The module imports and tracks after `cmake --install` into a temporary prefix, without the
build tree on the path."""
import os
import subprocess
import sys

import pytest

from conftest import BUILD_DIR, lattice_path

pytestmark = pytest.mark.install


def test_import_after_cmake_install(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert (site / "fusetrack" / "__init__.py").exists()
    code = ("import fusetrack as ft, sys; "
            f"ring = ft.Lattice.from_file({lattice_path('fodo_ring.json')!r}); "
            "p = ft.Particles.grid(ring, 1e-4, 1e-3, 3, 1e-4, 1e-3, 3); "
            "ft.Tracker(ring, device='cpu').track(p, 10); "
            "print(ft.__file__); print(p.alive_count); print([q['file'] for q in ft.plugins()])")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FUSETRACK_PLUGIN_PATH")}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    module_file, alive, plugin_files = r.stdout.splitlines()
    assert module_file.startswith(str(site))
    assert alive == "9"
    assert str(prefix) in plugin_files  # the built-in plugin installed next to libfusetrack
