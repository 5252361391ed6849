"""fusetrack: particle tracking through circular accelerators, on the CPU or a GPU.

The module is a thin layer over fusetrack's C++ library, the same calls that the ``fusetrack``
command line makes, so that both give the same numbers bit for bit.

Units are SI, energies in eV; coordinates (x, px, y, py, zeta, delta) as in MAD-X/Xsuite.

    import fusetrack as ft
    ring = ft.Lattice.from_file("lattices/sextupole_rf_ring.json")
    p = ft.Particles.grid(ring, 1e-4, 1e-3, 10, 1e-4, 1e-3, 10)
    ft.Tracker(ring, device="auto").track(p, turns=1000)      # in place
    print(p.x[:3], p.alive_count)

    ring["sf"]["knl"] = [0, 0, 1.2]      # a knob: the next track() uses it (no rebuild)
    o = ft.optics(ring)                   # closed orbit, matrix, tunes, Twiss as NumPy arrays
    da = ft.da_scan(ring, turns=1000, angles=10, amplitudes=20, amplitude_range=(1e-3, 0.04))
    c = ft.collide("lattices/colliders/lhc_like.json", turns=1000)   # two beams colliding

Errors of the C++ library arrive as :class:`fusetrack.Error` (``InputError`` for bad input,
naming the file, the element and the field; ``PluginError``; ``DeviceError``) with the messages
of the command line.

Two parts need only NumPy (and matplotlib for the plots), not the compiled module: ``fusetrack.plot``,
the plots that the command line draws (``python3 -m fusetrack.plot.da DIR`` draws a DA scan's again),
and ``fusetrack.growth``, the growth-rate fit of a centroid signal. The rest of the API is loaded from
the compiled module on the first use of one of its names.
"""

from __future__ import annotations

import importlib

__all__ = [
    "Lattice", "Element", "Particles", "Tracker", "Monitor", "optics", "twiss_table", "da_scan", "repro", "collide",
    "install_space_charge", "remove_space_charge", "tune_footprint", "SpaceChargeBeamSizes",
    "declared_train", "bunch_moments",
    "element_types", "load_plugin", "plugins", "gpu_unavailable_reason", "gpus", "load_particle_arrays",
    "Error", "InputError", "PluginError", "DeviceError",
]

__version__ = "0.1.0"


def __getattr__(name: str):
    """The names of ``__all__``, from ``fusetrack._core`` (which loads the compiled module) on first use."""
    if name not in __all__:
        raise AttributeError(f"module 'fusetrack' has no attribute '{name}'")
    try:
        core = importlib.import_module("._core", __name__)
    except ImportError as error:
        raise ImportError(f"fusetrack.{name} needs the compiled module fusetrack._fusetrack, which did not load "
                          f"({error}); fusetrack.plot and fusetrack.growth work without it") from error
    value = getattr(core, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
