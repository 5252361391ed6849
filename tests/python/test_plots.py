"""The plots of the command line (fusetrack.plot): each command that draws them writes its images through
the package found in the build tree, the modules import and run without the compiled module, and they draw
from the command's files again (python3 -m fusetrack.plot.MODULE)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD_DIR, lattice_path, run_cli

pytestmark = pytest.mark.plots
pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOT_MODULES = ("collective", "collide", "da", "fma", "footprint", "momentum_acceptance", "optics")


def assert_images(directory, names):
    for name in names:
        path = os.path.join(directory, name)
        assert os.path.isfile(path), f"{path} not written"
        with open(path, "rb") as f:
            assert f.read(8) == PNG_SIGNATURE, f"{path} is not a PNG image"


def run_module(module, *args):
    """python3 -m fusetrack.plot.MODULE ARGS with the build tree's package on the path."""
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD_DIR, "python"))
    r = subprocess.run([sys.executable, "-m", f"fusetrack.plot.{module}", *map(str, args)], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_the_plots_import_without_the_compiled_module(tmp_path):
    # The package's pure-Python part alone (no _fusetrack beside it): the plots and the growth fit import,
    # the rest of the API says what it needs.
    package = tmp_path / "fusetrack"
    source = os.path.join(BUILD_DIR, "python", "fusetrack")
    subprocess.run(["cp", "-r", source, str(tmp_path)], check=True)
    for compiled in package.glob("_fusetrack*"):
        compiled.unlink()
    code = ("import sys; import fusetrack, fusetrack.growth; "
            + "; ".join(f"import fusetrack.plot.{m}" for m in PLOT_MODULES)
            + "; print('_fusetrack' in str(sorted(sys.modules)))\n"
            "try:\n    fusetrack.Lattice\nexcept ImportError as e:\n    print(e)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert r.returncode == 0, r.stdout + r.stderr
    loaded, message = r.stdout.splitlines()
    assert loaded == "False"
    assert "fusetrack.Lattice needs the compiled module fusetrack._fusetrack" in message


def test_da_plots(tmp_path):
    out = tmp_path / "da"
    stdout, stderr = run_cli("da", lattice_path("sextupole_rf_ring.json"), "-n", 50, "--angles", 3, "--amplitudes", 4,
                             "--amplitude-range", 0.004, 0.04, "--device", "cpu", "--threads", 1, "-o", out)
    assert "warning" not in stderr, stderr
    names = ("survival.png", "da_vs_angle.png", "da_vs_turns.png")
    assert_images(out, names)
    for name in names:
        os.remove(out / name)
    assert "survival.png" in run_module("da", out)
    assert_images(out, names)


def test_da_study_plot(tmp_path):
    variants = {"fusetrack_variants": 1,
                "variants": [{"name": "nominal"},
                             {"name": "strong_sf", "elements": [{"name": "sf_half", "add": {"knl": [0, 0, 1.5]}}]}]}
    vfile = tmp_path / "variants.json"
    vfile.write_text(json.dumps(variants))
    _, stderr = run_cli("da", lattice_path("sextupole_rf_ring.json"), "--variants", vfile, "-n", 50, "--angles", 3,
                        "--amplitudes", 4, "--amplitude-range", 0.004, 0.04, "--device", "cpu", "--threads", 1,
                        "-o", tmp_path / "study")
    assert "warning" not in stderr, stderr
    assert_images(tmp_path / "study", ["da_study.png"])


def test_fma_end_to_end(tmp_path):
    # The optics from the one-turn matrix (`fusetrack optics`), independent of NAFF.
    optics_file = tmp_path / "optics.json"
    run_cli("optics", lattice_path("sextupole_rf_ring.json"), "--tracking-turns", 0, "-o", optics_file)
    with open(optics_file) as f:
        optics = json.load(f)
    qx, qy = optics["tunes"]["qx"], optics["tunes"]["qy"]
    _, stderr = run_cli("fma", lattice_path("sextupole_rf_ring.json"), "--turns-per-window", 8, expect_rc=2)
    assert "--turns-per-window" in stderr and "at least 16" in stderr, stderr
    out = tmp_path / "fma"
    stdout, stderr = run_cli("fma", lattice_path("sextupole_rf_ring.json"), "--turns-per-window", 256, "--angles", 2,
                             "--angle-range", 30, 60, "--amplitudes", 8, "--amplitude-range", 0.0001, 0.025,
                             "--device", "cpu", "--threads", 1, "-o", out)
    assert "warning" not in stderr, stderr
    table = np.atleast_1d(np.genfromtxt(out / "fma.csv", delimiter=",", names=True))
    alive = table["lost_turn"] < 0
    assert alive.any() and not alive.all()  # a regular core and losses beyond the aperture
    assert np.isnan(table["diffusion"][~alive]).all()
    smallest = np.argmin(table["amplitude"])
    for key, q in (("qx1", qx), ("qx2", qx), ("qy1", qy), ("qy2", qy)):
        assert abs(table[key][smallest] - q) < 1e-4, key
    edge = alive & (table["amplitude"] >= 0.75 * table["amplitude"][alive].max())
    assert table["diffusion"][smallest] < np.nanmax(table["diffusion"][edge]) - 3.0
    assert_images(out, ["fma.png"])
    os.remove(out / "fma.png")
    assert "fma.png" in run_module("fma", out)
    assert_images(out, ["fma.png"])


def test_momentum_acceptance_plot(tmp_path):
    out = tmp_path / "lma"
    # zeta limited to half the RF wavelength (C = 161.6 m, h = 8): the bucket bounds the acceptance
    stdout, stderr = run_cli("momentum-acceptance", lattice_path("sextupole_rf_ring.json"), "--at", "rf", "qd",
                             "--limit", 0, 0, 0, 0, 10.1, 0, "-n", 100, "--precision", 1e-3, "--emittance-x", 1e-5,
                             "--emittance-y", 1e-5, "--sigma-delta", 1e-3, "--sigma-zeta", 1.0,
                             "--bunch-population", 1e11, "--device", "cpu", "--threads", 1, "-o", out)
    assert "warning" not in stderr, stderr
    assert "Touschek lifetime" in stdout
    assert_images(out, ["momentum_acceptance.png"])
    os.remove(out / "momentum_acceptance.png")
    assert "momentum_acceptance.png" in run_module("momentum_acceptance", out)
    assert_images(out, ["momentum_acceptance.png"])


def test_optics_plot(tmp_path):
    png = tmp_path / "optics.png"
    stdout, stderr = run_cli("optics", lattice_path("fodo_ring.json"), "--tracking-turns", 0,
                             "--twiss-table", tmp_path / "twiss.csv", "--plot", png)
    assert "warning" not in stderr, stderr
    assert f"plot         {png}" in stdout
    assert_images(tmp_path, ["optics.png"])
    run_module("optics", tmp_path / "twiss.csv", tmp_path / "again.svg", "--title", "FODO")
    assert (tmp_path / "again.svg").read_text().lstrip().startswith("<?xml")


def test_collective_plots(tmp_path):
    plots = tmp_path / "plots"
    stdout, stderr = run_cli("track", lattice_path("ps_injection_longitudinal.json"), "-n", 40, "--matched", 2000,
                             "--sigma-zeta", 10, "--seed", 3, "--monitor", tmp_path / "m.npz", "--profile-every", 20,
                             "--device", "cpu", "--threads", 1, "--plots", plots)
    assert "warning" not in stderr, stderr
    assert f"plots       {plots}" in stdout
    assert_images(plots, ["bunch_length.png", "emittance.png", "transverse.png", "profiles.png"])


def test_footprint_plot(tmp_path):
    ring = tmp_path / "sc.json"
    run_cli("spacecharge", "install", lattice_path("space_charge_ring.json"), "--elements", 8, "--intensity", 1.5e11,
            "--emittances", 2e-6, 1.5e-6, "--sigma-zeta", 8, "--delta-rms", 1e-3, "-o", ring)
    stdout, stderr = run_cli("spacecharge", "footprint", ring, "--emittances", 2e-6, 1.5e-6, "--amplitudes", 3,
                             "--angles", 2, "-n", 128, "--device", "cpu", "--threads", 1, "-o", tmp_path / "fp")
    assert "warning" not in stderr, stderr
    assert_images(tmp_path / "fp", ["footprint.png"])
    run_module("footprint", tmp_path / "fp" / "footprint.csv", tmp_path / "again.png")
    assert_images(tmp_path, ["again.png"])


def test_collide_plot(tmp_path):
    def beam(name, seed):  # LHC-like at the IP, 1000 macroparticles, the ring a linear one-turn map
        return {"name": name, "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 6.5e12},
                "linear_map": {"qx": 0.31, "qy": 0.32, "beta_x": 0.55, "beta_y": 0.55, "circumference": 26658.8832},
                "bunches": {"intensity": 1.15e11, "macroparticles": 1000, "emittance_nx": 3.75e-6,
                            "emittance_ny": 3.75e-6, "sigma_zeta": 0.0755, "sigma_delta": 1.129e-4, "seed": seed}}

    setup = tmp_path / "setup.json"
    setup.write_text(json.dumps({"fusetrack_collider": "1", "mode": "strong-strong",
                                 "beams": [beam("b1", 1), beam("b2", 2)], "ip": {"model": "4d"}}))
    # 32 turns: enough for the centroid spectra (16 or more)
    stdout, stderr = run_cli("collide", setup, "-n", 32, "--threads", 1, "-o", tmp_path / "run")
    assert "warning" not in stderr, stderr
    assert_images(tmp_path / "run", ["collide.png"])
