"""The API of the package over the compiled module ``_fusetrack``: plugins, lattices, particles, tracking,
optics, DA scans, reproduction, space charge and colliders. The package (``fusetrack/__init__.py``)
imports this module on the first use of one of its names."""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional, Sequence

import numpy as np

from . import _fusetrack as _ft
from ._fusetrack import DeviceError, Element, Error, InputError, PluginError  # noqa: F401 (the package's names)


# ---------------------------------------------------------------------------------------------
# Plugins and element types

def load_plugin(path: str) -> str:
    """Loads an element plugin (``fusetrack_plugin_NAME.so``) and registers its types for every
    lattice loaded afterwards. Returns the file loaded. Raises :class:`PluginError` naming the
    file and the reason (e.g. an ABI version mismatch). The default plugins (the built-in types,
    ``$FUSETRACK_PLUGIN_PATH``) are loaded first, on first use of the module."""
    return _ft.load_plugin(os.fspath(path))


def plugins() -> list:
    """The loaded plugins: a list of dicts with ``name``, ``file`` and ``abi_version``."""
    return _ft.plugins()


def element_types() -> dict:
    """The registered element types by name, as ``fusetrack info`` lists them: each a dict with
    ``doc``, ``kind`` (thin, thick or collective), ``plugin`` and ``fields``, a list of dicts with
    ``name``, ``unit``, ``type`` (double, int32, JSON), ``count``, ``required``, ``derived``,
    ``default`` (None for required, derived and JSON fields) and ``doc``."""
    return {t["name"]: t for t in _ft.element_types()}


def gpu_unavailable_reason() -> str:
    """Why no GPU can be used ("" when one can)."""
    return _ft.gpu_unavailable_reason()


def gpus() -> list:
    """The GPUs the CUDA driver reports (empty without a driver)."""
    return _ft.gpus()


# ---------------------------------------------------------------------------------------------
# Lattices

_LATTICE_DOC = """A ring: the reference particle, named element definitions and the sequence of one turn.

    Load one with :meth:`from_file` (fusetrack JSON or an Xsuite line JSON) or :meth:`from_dict`;
    :meth:`to_dict` gives it back with the current field values. Elements are read and written by
    definition name (several sequence entries may share one definition)::

        ring["qf"]["knl"]            # NumPy array (array fields) or float
        ring["qf"]["knl"] = [0, 0.1] # validated as a lattice file's field is; s, lengths recomputed
        ring["qf"].fields()          # every numeric field

    A :class:`Tracker` built on the lattice uses new values at its next ``track()``: the CPU reads
    them directly; on a GPU the switch kernel gets its parameter table uploaded again (no NVRTC
    compile), while a baked kernel (``dispatch="baked"``, or ``"auto"`` on lattices of up to 2000
    elements) is regenerated and compiled (or found in the kernel cache). Use
    ``dispatch="switch"`` for knob scans on a GPU.

    Attributes: ``reference`` (dict: mass0 [eV], q0 [e], p0c [eV], beta0, gamma0, energy0),
    ``circumference`` [m], ``element_names``, ``sequence`` (names, one per entry), ``s`` [m],
    ``has_collective``, ``source_file``; ``len(ring)`` is the number of sequence entries.
    """


def _lattice_from_file(path):
    """Loads a lattice file (fusetrack JSON or Xsuite line JSON). Errors (:class:`InputError`)
    name the file, the element and the field, as ``fusetrack track`` reports them; plugins listed
    in the file are loaded."""
    return _ft.Lattice._from_file(os.fspath(path))


def _lattice_from_dict(doc, file="<dict>"):
    """Builds a lattice from a dict in fusetrack's JSON format (docs: Lattices and import); ``file`` names
    it in error messages and resolves relative plugin paths."""
    return _ft.Lattice._from_json(doc, file)


def _lattice_to_dict(self):
    """The lattice in fusetrack's JSON format, with the current field values."""
    return self._to_json()


def _lattice_repr(self):
    return (f"<fusetrack.Lattice {self.source_file or '(dict)'}: {len(self)} elements, "
            f"circumference {self.circumference:.6g} m>")


Lattice = _ft.Lattice
Lattice.__doc__ = _LATTICE_DOC
Lattice.from_file = staticmethod(_lattice_from_file)
Lattice.from_dict = staticmethod(_lattice_from_dict)
Lattice.to_dict = _lattice_to_dict
Lattice.__repr__ = _lattice_repr


# ---------------------------------------------------------------------------------------------
# Particles

_ARRAYS = ("x", "px", "y", "py", "zeta", "delta", "ptau", "rpp", "rvv", "state", "lost_turn", "lost_element", "id",
           "variant")
_ASSIGNABLE = ("x", "px", "y", "py", "zeta", "delta")


def _particles_property(name):
    def get(self):
        return self._view(name)

    def set(self, values):
        if name == "variant":
            self._assign_variant(values)
        else:
            self._assign(name, values)

    doc = (f"``{name}`` as a NumPy array that views the particles' own memory (zero-copy): tracking "
           f"updates it in place.")
    if name in ("x", "px", "y", "py", "zeta"):
        doc += " Writable; assigning an array copies it in."
    elif name == "delta":
        doc += " Read-only view; assigning an array sets delta and updates ptau, rpp and rvv."
    elif name == "variant":
        doc += (" The lattice variant of each particle (a Tracker made with ``variants``), 0 until "
                "assigned; assigning an array of integers copies it in.")
    else:
        doc += " Read-only."
    return property(get, set if name in _ASSIGNABLE + ("variant",) else None, doc=doc)


class _ParticlesDoc:
    """Particles as a structure of arrays, in C++ memory that NumPy views without copying.

    Arrays (``p.x`` ...): ``x px y py zeta delta ptau rpp rvv state lost_turn lost_element id``,
    each a NumPy view of the C++ vector (``np.shares_memory(p.x, p.x)``; the view keeps the
    particles alive). ``x, px, y, py, zeta`` are writable in place; ``delta`` is read-only because
    ``ptau, rpp, rvv`` must follow it: assign ``p.delta = values`` instead. A particle is alive
    while ``state > 0``; ``lost_turn`` and ``lost_element`` record where it was lost.

    Zero-copy holds on the host: the CPU backend tracks these very arrays; a GPU copies them to
    the device and back into the same memory. Constructors (:meth:`from_arrays`) copy their
    inputs once, since the C++ vectors own their storage.

    Constructors: :meth:`from_arrays`, :meth:`grid`, :meth:`matched_gaussian`,
    :meth:`matched_bunch`, :meth:`from_file`; :meth:`write` saves .npz/.csv as the CLI does.
    """


Particles = _ft.Particles
Particles.__doc__ = _ParticlesDoc.__doc__
for _name in _ARRAYS:
    setattr(Particles, _name, _particles_property(_name))


def _from_arrays(lattice_or_beta0, x=None, px=None, y=None, py=None, zeta=None, delta=None) -> Particles:
    """Particles from coordinate arrays (missing ones zero), all alive. The first argument is a
    :class:`Lattice` (its reference beta0) or beta0 itself. The arrays are copied once."""
    beta0 = (lattice_or_beta0.reference["beta0"] if isinstance(lattice_or_beta0, _ft.Lattice)
             else float(lattice_or_beta0))
    return Particles._from_arrays(beta0, dict(x=x, px=px, y=y, py=py, zeta=zeta, delta=delta))


def _grid(lattice, x_min, x_max, nx, y_min, y_max, ny, delta=0.0) -> Particles:
    """A regular x-y grid of nx x ny particles in [x_min, x_max] x [y_min, y_max] [m], as
    ``fusetrack track --grid``; the other coordinates zero but ``delta``."""
    return Particles._grid(lattice, x_min, x_max, int(nx), y_min, y_max, int(ny), delta)


def _matched_gaussian(lattice, n, emittance_nx, emittance_ny, sigma_zeta=0.0, sigma_delta=0.0, seed=1) -> Particles:
    """``n`` particles of a Gaussian bunch matched to the optics at the start (closed orbit,
    Twiss, dispersion), normalised emittances [m], rms zeta [m] and delta: ``fusetrack track
    --gaussian``. Deterministic for a seed."""
    return Particles._matched_gaussian(lattice, int(n), emittance_nx, emittance_ny, sigma_zeta, sigma_delta, seed)


def _matched_bunch(lattice, n, sigma_zeta, distribution="gaussian", mu=1.5, potential_well=False, seed=1,
                   fma="off", threads=0):
    """``n`` particles of a longitudinal bunch matched to the lattice's RF bucket
    (``fusetrack track --matched``): distribution ``gaussian``, ``parabolic`` or ``binomial``
    (exponent ``mu``), rms length ``sigma_zeta`` [m], optionally with the potential-well distortion
    of the collective elements. Returns ``(particles, report)``, the report a dict (bucket, eta,
    Qs, sigma_zeta, sigma_delta, convergence, line density)."""
    return Particles._matched_bunch(lattice, int(n), sigma_zeta, distribution, mu, potential_well, seed, fma, threads)


def _from_file(path, lattice_or_beta0) -> Particles:
    """Reads .npz or .csv particles (as ``fusetrack track -p``); the reference beta0 from a
    :class:`Lattice` or given."""
    beta0 = (lattice_or_beta0.reference["beta0"] if isinstance(lattice_or_beta0, _ft.Lattice)
             else float(lattice_or_beta0))
    return Particles._read(os.fspath(path), beta0)


def load_particle_arrays(path) -> dict:
    """The arrays of a particle file written by ``fusetrack track -o`` as a dict of numpy arrays:
    an ``.npz`` file, or the index of a shard set that several MPI ranks wrote (``out.npz`` with its
    member ``fusetrack_shard_counts``, shards ``out.npz.d/rank0000.npz`` ...), concatenated in rank
    order (the order of one process)."""
    path = os.fspath(path)
    with np.load(path) as index:
        if "fusetrack_shard_counts" not in index.files:
            return {name: index[name] for name in index.files}
        counts = index["fusetrack_shard_counts"]
    parts = []
    for rank, count in enumerate(counts):
        with np.load(f"{path}.d/rank{rank:04d}.npz") as shard:
            part = {name: shard[name] for name in shard.files}
        if len(part["x"]) != count:
            raise InputError(f"{path}.d/rank{rank:04d}.npz: holds {len(part['x'])} particles, the index says {count}")
        parts.append(part)
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def _particles_write(self, path) -> None:
    """Writes .npz (every array) or .csv (coordinates, state, loss records), as ``fusetrack track -o``."""
    self._write(os.fspath(path))


def _particles_repr(self):
    return f"<fusetrack.Particles: {len(self)} particles, {self.alive_count} alive>"


def _train(bunches, spacing: float) -> Particles:
    """A bunch train (as ``fusetrack track --bunches``): ``bunches`` is a list of :class:`Particles`, one per
    bunch (bunch 0 leading), concatenated in that order with bunch b shifted by ``-b * spacing`` [m] in zeta.
    The slice-moment elements of a lattice that declares the train (``declared_train``) expect this layout."""
    if isinstance(bunches, _ft.Particles):
        bunches = [bunches]
    return _ft._make_train(list(bunches), float(spacing))


Particles.train = staticmethod(_train)
Particles.from_arrays = staticmethod(_from_arrays)
Particles.grid = staticmethod(_grid)
Particles.matched_gaussian = staticmethod(_matched_gaussian)
Particles.matched_bunch = staticmethod(_matched_bunch)
Particles.from_file = staticmethod(_from_file)
Particles.write = _particles_write
Particles.__repr__ = _particles_repr


# ---------------------------------------------------------------------------------------------
# Tracking

class Monitor(_ft._Monitor):
    """Turn-by-turn bunch monitor for :meth:`Tracker.track` (``fusetrack track --monitor``).

    ``every``: record the longitudinal moments every that many turns; ``profile_every``: also
    the profiles and fields of the collective elements (a multiple of ``every``; 0: none).
    After tracking, :meth:`arrays` gives ``turn alive mean_zeta rms_zeta mean_delta rms_delta
    cov_zeta_delta emittance emittance_evs`` (and ``profile_*``) as NumPy arrays; :meth:`write`
    saves the same .npz file as the CLI.
    """

    def __init__(self, every: int = 1, profile_every: int = 0):
        super().__init__(every, profile_every)

    def arrays(self) -> dict:
        """The recorded arrays by name (a copy)."""
        return self._arrays()

    def write(self, path) -> None:
        """Writes the monitor .npz (the CLI's format)."""
        self._write(os.fspath(path))


class Tracker:
    """Tracks particles through a lattice, on the CPU or a GPU.

    ``Tracker(lattice, device="auto", fma="off", threads=0, dispatch="auto", kernel_cache="")``

    - ``device``: ``"auto"`` (the GPU when one is usable, else the CPU; :attr:`notices` says why),
      ``"cpu"`` or ``"gpu"`` (raises :class:`DeviceError` without one).
    - ``fma``: ``"off"`` reproduces the CPU bit for bit on the GPU; ``"on"`` is faster (CUDA math,
      contraction), results then differ by rounding.
    - ``threads``: CPU threads (0: OpenMP's default).
    - ``dispatch``: GPU kernel form, ``"auto"``, ``"baked"`` (parameters compiled in), ``"switch"``
      (parameter table: knob scans without recompiling) or ``"staged"`` (the switch with its
      parameters staged in shared memory: many particles on long lattices).
    - ``kernel_cache``: directory of compiled kernels ("" the default, ``"off"`` none).
    - ``variants``: variants files or lattice files with the lattice's sequence (error seeds, knob
      scans); each particle is then tracked through variant ``particles.variant[i]``, all in one run.

    The tracker keeps its backend (compiled kernels, collective state) across :meth:`track`
    calls; changed lattice fields are picked up at the next call. Lattices with collective
    elements (``LongitudinalImpedance``) are tracked with their bunch profiles every turn.
    """

    def __init__(self, lattice: Lattice, device: str = "auto", fma: str = "off", threads: int = 0,
                 dispatch: str = "auto", kernel_cache: str = "", variants: Iterable[str] = ()):
        self._tracker = _ft._Tracker(lattice, device, fma, int(threads), dispatch, os.fspath(kernel_cache),
                                     [os.fspath(v) for v in variants])

    @property
    def variant_names(self) -> list:
        """With ``variants`` (variants files or lattice files, as ``fusetrack track --variants``): their
        names; each particle is tracked through variant ``particles.variant[i]``, bitwise as through
        that variant alone."""
        return list(self._tracker.variant_names)

    @property
    def backend(self) -> str:
        """The backend's name, e.g. ``cpu`` or ``gpu (NVIDIA H100, sm_90)``."""
        return self._tracker.backend

    @property
    def notices(self) -> list:
        """Notes from choosing the backend (why the CPU was used with ``device="auto"``)."""
        return list(self._tracker.notices)

    @property
    def lattice(self) -> Lattice:
        return self._tracker.lattice

    def track(self, particles: Particles, turns: int, monitor: Optional[Monitor] = None,
              progress: str = "off", space_charge_update: int = 0,
              space_charge_intensity: Optional[float] = None) -> dict:
        """Tracks ``particles`` in place for ``turns`` turns (the same call as ``fusetrack track``).

        ``monitor``: a :class:`Monitor` to fill; ``progress``: a progress bar on stderr
        (``"on"``, ``"off"``, ``"auto"``: when stderr is a terminal). Returns a dict with
        ``seconds`` (tracking time), ``backend`` and ``collective`` (per collective element its
        last-turn ``counts`` and ``field`` [V] on the slice grid). The Python interpreter lock is
        released while tracking.

        ``space_charge_update=K`` (``fusetrack track --space-charge-update K``): frozen space charge
        whose sizes follow the beam; at turns 0, K, 2K, ... every SpaceChargeBiGaussian element of
        the lattice gets sigma_x, sigma_y, sigma_z, z0 and the intensity (``space_charge_intensity``,
        default the elements' ``number_of_particles``, times the alive fraction) from the particles;
        the lattice is changed in place and the dict gets ``space_charge`` (per update: ``turn``,
        ``alive``, the emittances, ``sigma_x``, ``sigma_y`` per element) and
        ``space_charge_elements`` (their names)."""
        return self._tracker.track(particles, int(turns), monitor, progress, int(space_charge_update),
                                   None if space_charge_intensity is None else float(space_charge_intensity))

    def __repr__(self):
        return f"<fusetrack.Tracker on {self.backend}>"


# ---------------------------------------------------------------------------------------------
# Optics, DA scans, reproduction

def optics(lattice: Lattice, force_4d: bool = False, delta0: float = 0.0, tracking_turns: int = 0,
           threads: int = 0) -> dict:
    """Linear optics at the start of the lattice (``fusetrack optics``): a dict with
    ``closed_orbit`` (6,), ``matrix`` (6, 6; canonical x, px, y, py, zeta, pzeta), ``matrix_4d``,
    ``tunes`` (qx, qy, qs), Twiss ``beta_x alpha_x gamma_x beta_y ...``, dispersion ``dx dpx dy
    dpy``, chromaticities ``dqx dqy``, slip factor ``eta``, ``alpha_c``, ``gamma_tr``, ``six_d``
    and ``method``; with ``tracking_turns`` (>= 16) also ``tunes_from_tracking``."""
    return _ft._optics(lattice, force_4d, delta0, int(tracking_turns), int(threads))


def declared_train(lattice: Lattice) -> dict:
    """The bunch train that the lattice's slice-moment elements (TransverseWake, TransverseDamper with
    ``n_bunches`` > 1) declare: ``bunches``, ``spacing`` [m], ``centre`` [m] (the middle of bunch 0's cuts)
    and the declaring ``element`` ('' and one bunch when none does)."""
    return _ft._declared_train(lattice)


def bunch_moments(particles: Particles, lattice: Optional[Lattice] = None, bunches: Optional[int] = None,
                  spacing: Optional[float] = None, centre: Optional[float] = None, threads: int = 0) -> dict:
    """Per-bunch moments of a train's alive particles, the numbers of ``fusetrack track --bunches-output``:
    ``macroparticles``, ``mean_x`` ... ``mean_delta`` and the geometric rms ``emittance_x``, ``emittance_y``
    (NumPy arrays indexed by bunch) from exact integer sums (independent of particle order and threads),
    and ``out_of_range`` (particles beyond |x|, |y| < 0.1 m, |px|, |py| < 0.01, |delta| < 0.1, left out).
    Bunch b holds the particles within half a spacing of ``centre - b * spacing`` (a single bunch: within
    0.5 m of ``centre``). The train is the lattice's (``declared_train``); ``bunches``, ``spacing`` and
    ``centre`` given replace its values."""
    train = declared_train(lattice) if lattice is not None else {"bunches": 1, "spacing": 0.0, "centre": 0.0}
    if bunches is not None:
        if int(bunches) != bunches:
            raise InputError(f"bunches: expected a whole number, got {bunches}")
        train["bunches"] = int(bunches)
    if spacing is not None:
        train["spacing"] = float(spacing)
    if centre is not None:
        train["centre"] = float(centre)
    return _ft._bunch_moments(particles, train["bunches"], train["spacing"], train["centre"], len(particles), threads)


def install_space_charge(lattice: Lattice, intensity: float, emittances: Sequence[float], sigma_zeta: float,
                         elements: int = 0, positions: Iterable[float] = (), delta_rms: float = 0.0,
                         z0: Optional[float] = None, prefix: str = "sc", force_4d: bool = False,
                         threads: int = 0, model: str = "frozen", pic_model: str = "2.5D",
                         nodes: Sequence[int] = (64, 64, 32), extent_sigmas: float = 6.0,
                         fixed_grid_sigmas: float = 0.0) -> dict:
    """Space-charge elements around the ring (``fusetrack spacecharge install``): ``elements``
    SpaceChargeBiGaussian at equal spacing (or at ``positions`` [m]), each with the beam sizes
    sqrt(beta eps_n / (beta0 gamma0) + (D delta_rms)^2) from the optics there; ``emittances``:
    normalized (eps_nx, eps_ny) [m rad]; ``intensity``: real particles in the bunch; ``sigma_zeta``
    [m]. ``model="pic"``: SpaceChargePIC elements at the same places instead (``pic_model`` "2.5D" or
    "3D", ``nodes`` in x, y, zeta; grids adapted to the bunch's mean +- ``extent_sigmas`` rms every
    turn, or with ``fixed_grid_sigmas`` > 0 fixed at the closed orbit +- that many rms beam sizes).
    Returns a dict: ``lattice`` (a new :class:`Lattice`; the argument is not changed), ``kicks`` (per
    element name, s, length, beta_x, beta_y, dx, dy, sigma_x, sigma_y) and the first-order Laslett
    shifts ``laslett_dqx``, ``laslett_dqy``."""
    eps = _emittances(emittances)
    return _ft._install_space_charge(lattice, int(elements), [float(p) for p in positions], float(intensity),
                                     eps[0], eps[1], float(sigma_zeta), float(delta_rms), z0, prefix,
                                     bool(force_4d), int(threads), str(model), str(pic_model),
                                     [int(n) for n in nodes], float(extent_sigmas), float(fixed_grid_sigmas))


class SpaceChargeBeamSizes:
    """Frozen space charge whose beam sizes follow the beam (``ft::SpaceChargeBeamSizes``): made from
    a lattice with SpaceChargeBiGaussian elements (their optics from its Twiss table without them);
    ``update(particles, intensity)`` sets every element's sizes sqrt(beta eps + (D sigma_delta)^2),
    sigma_z, z0 and intensity (times the alive fraction) from the particles' moments. A
    :class:`Tracker` of that lattice uses the new values at its next ``track()``::

        follow = ft.SpaceChargeBeamSizes(ring)
        for _ in range(turns // k):
            tracker.track(p, k)
            follow.update(p, intensity)
    """

    def __init__(self, lattice: Lattice):
        self._impl = _ft._SpaceChargeBeamSizes(lattice)

    def update(self, particles: "Particles", intensity: float) -> None:
        self._impl.update(particles, float(intensity))

    @property
    def elements(self) -> int:
        return self._impl.elements


def remove_space_charge(lattice: Lattice) -> Lattice:
    """The lattice without its SpaceChargeBiGaussian elements, split drifts joined again
    (``fusetrack spacecharge remove``): a new :class:`Lattice`."""
    return _ft._remove_space_charge(lattice)


def tune_footprint(lattice: Lattice, emittances: Sequence[float], max_sigma: float = 4.0, amplitudes: int = 12,
                   angles: int = 7, turns: int = 1024, zeta: float = 0.0, delta: float = 0.0,
                   device: str = "auto", fma: str = "off", threads: int = 0) -> dict:
    """Tune footprint (``fusetrack footprint``): NAFF tunes of a polar grid of amplitudes
    up to ``max_sigma`` rms beam sizes (normalized ``emittances`` [m rad]) tracked ``turns`` turns.
    Returns NumPy arrays ``amplitude_x amplitude_y`` [sigma], ``qx qy`` (NaN when lost),
    ``lost_turn`` (-1: survived), the reference tunes ``qx0 qy0`` and ``sigma_x sigma_y`` [m] (of the
    ring without its frozen space-charge elements and with its beam-beam lenses switched off), and
    ``backend``."""
    eps = _emittances(emittances)
    return _ft._tune_footprint(lattice, eps[0], eps[1], float(max_sigma), int(amplitudes), int(angles), int(turns),
                               float(zeta), float(delta), device, fma, int(threads))


def twiss_table(lattice: Lattice, force_4d: bool = False, delta0: float = 0.0, threads: int = 0) -> dict:
    """Optics at every element around the closed orbit (``fusetrack optics --twiss-table``): a dict of
    NumPy columns with one row per sequence entry plus the end of the ring (``name``, ``type``,
    ``s``, closed orbit ``x px y py zeta delta``, ``beta_x alpha_x mu_x beta_y alpha_y mu_y``
    [m, 1, tune units], dispersion ``dx dpx dy dpy``, Mais-Ripken ``beta_1x ... alpha_2y``), and
    ``q1``, ``q2`` (full tunes), ``max_coupling``, ``six_d``, ``method``, ``circumference``."""
    return _ft._twiss_table(lattice, force_4d, delta0, int(threads))


def da_scan(lattice: Lattice, turns: int = 1000, grid: str = "polar", angles: int = 19,
            angle_range: Sequence[float] = (0.0, 90.0), amplitudes: int = 30,
            amplitude_range: Sequence[float] = (0.0, 0.02), nx: int = 30, ny: int = 30,
            x_range: Sequence[float] = (0.0, 0.02), y_range: Sequence[float] = (0.0, 0.02),
            units: str = "m", emittance_nx: float = 0.0, emittance_ny: float = 0.0, px: float = 0.0,
            py: float = 0.0, zeta: float = 0.0, deltas: Iterable[float] = (0.0,), closed_orbit: bool = True,
            limits: Optional[Sequence[float]] = None, refine: float = 0.0, device: str = "auto",
            fma: str = "off", threads: int = 0, dispatch: str = "auto", output: Optional[str] = None,
            checkpoint_every: int = 0, variants: Iterable[str] = ()) -> dict:
    """A dynamic-aperture scan (``fusetrack da``; the same options, the same results).

    Polar grids: ``angles`` rays in ``angle_range`` [deg] with ``amplitudes`` points in
    ``amplitude_range``; cartesian: ``nx`` x ``ny`` in ``x_range``, ``y_range``. ``units`` "m" or
    "sigma" (with normalised emittances). ``deltas``: one scan per momentum offset. ``limits``:
    per-turn limits |x| |px| |y| |py| |zeta| |delta| (0: none). ``refine``: bisect each ray's
    boundary to this resolution. ``output``: also write summary.json, summary.csv and da.npz there
    (and checkpoints every ``checkpoint_every`` turns). The lattice itself is not changed.

    Returns a dict of NumPy arrays: per particle ``amplitude angle grid_x grid_y delta_index
    lost_turn survived`` and ``initial``/``final`` :class:`Particles`; ``per_angle`` (``delta
    angle da_first_loss da_last_stable da_refined``); ``da_min da_mean da_max``;
    ``turn_checkpoints`` and ``da_vs_turns`` (per delta, the DA for that many turns).

    ``variants``: variants files or lattice files (``fusetrack da --variants``): a study of all
    variants in one run. The per-particle arrays then hold every variant's scan in turn, the
    summary entries are the worst variant's, and ``study`` holds ``names``, per angle ``delta
    angle min mean std max`` over the variants, ``per_variant`` (angle x variant),
    ``da_min_per_variant`` and the per-particle ``variant``."""
    c = _ft._DaConfig()
    c.turns = int(turns)
    c.grid = grid
    c.angles = int(angles)
    c.angle_min, c.angle_max = _pair(angle_range, "angle_range")
    c.amplitudes = int(amplitudes)
    c.amplitude_min, c.amplitude_max = _pair(amplitude_range, "amplitude_range")
    c.nx, c.ny = int(nx), int(ny)
    c.x_min, c.x_max = _pair(x_range, "x_range")
    c.y_min, c.y_max = _pair(y_range, "y_range")
    c.units = units
    c.emittance_nx, c.emittance_ny = emittance_nx, emittance_ny
    c.px0, c.py0, c.zeta0 = px, py, zeta
    c.deltas = [float(d) for d in deltas]
    c.around_closed_orbit = bool(closed_orbit)
    if limits is not None:
        c.turn_limits = [float(v) for v in limits]
    c.refine_resolution = refine
    return _ft._da_scan(lattice, c, device, fma, int(threads), dispatch,
                        "" if output is None else os.fspath(output), int(checkpoint_every),
                        [os.fspath(v) for v in variants])


def repro(lattice: Lattice, particles: Optional[Particles] = None, n: int = 10000, amplitude: float = 0.02,
          delta: float = 1e-4, turns: int = 1000, fma: str = "off", threads: int = 0,
          kernel_cache: str = "") -> dict:
    """The same particles on the CPU and the GPU, compared bit for bit (``fusetrack repro``).

    Without ``particles``: ``n`` particles on a square grid of half-width ``amplitude`` [m] at
    ``delta`` (a bunch in zeta on collective lattices), as the CLI makes them. Raises
    :class:`DeviceError` without a GPU. Returns a dict: ``identical``, ``bitwise_equal`` of
    ``coordinates``, ``state_mismatches``, ``max_ulp``, ``max_relative``, ``first_differing``,
    ``cpu_particles``, ``gpu_particles``, per collective element the profile/field comparison,
    and ``divergence`` (turn and element where the first differing particle parts) or None."""
    if particles is None:
        particles = Particles._repro_particles(lattice, int(n), amplitude, delta)
    return _ft._repro(lattice, particles, int(turns), fma, int(threads), os.fspath(kernel_cache))



def collide(setup, turns: int, threads: int = 0, placement: str = "block", output_dir: str = "",
            device: str = "auto", fma: str = "off") -> dict:
    """Two beams colliding at an IP, strong-strong or weak-strong (``fusetrack collide``; the
    same run, the same numbers bit for bit).

    ``setup``: a collider set-up file (docs: Colliders), or its document as a dict (named
    ``<dict>`` in messages; relative paths from the working directory). ``turns``: turns of beam 1
    (``turns`` x bunches of beam 1 crossings). ``placement``: bunches over MPI ranks, "block" or
    "round-robin". ``output_dir``: also write bunches.csv, spectra.csv and summary.json there (no
    plots). ``device``: lattice rings on "auto", "cpu" or "gpu". Bad input raises
    :class:`InputError` naming the file and the field (``beams[1].bunches.intensity``).

    Returns a dict (under MPI, rank 0's; the other ranks get no records):

    - ``records``: per bunch and crossing, in slot order, NumPy columns ``slot beam bunch partner
      turn alive luminosity x px y py zeta delta sigma_x sigma_y sigma_zeta sigma_delta
      emittance_x emittance_y coupling unused_charge`` (beam 1 or 2, as bunches.csv; centroids
      in the beam's own frame; luminosity per crossing [1/m^2]);
    - ``summary``: summary.json's content as a dict;
    - ``xi``, ``tunes``: [beam, plane] beam-beam parameters and unperturbed tunes (2x2 arrays);
    - ``sigma_mode``, ``pi_mode``: coherent mode tunes [x, y] (NaN unless one bunch per beam);
    - ``luminosity`` [1/(m^2 s)] and ``crossing_frequency`` [1/s] (0 without a circumference);
    - ``output_files``: the files written; ``device``: where the linear-map bunches were tracked."""
    if isinstance(setup, dict):
        try:
            json.dumps(setup, allow_nan=False)
        except ValueError as e:
            raise InputError(f"<dict>: {e} (JSON has no NaN or infinity)") from None
    else:
        setup = os.fspath(setup)
    return _ft._collide(setup, int(turns), int(threads), placement, os.fspath(output_dir), device, fma)

def _emittances(values):
    v = [float(a) for a in values]
    if len(v) != 2:
        raise InputError("<input>, field 'emittances': expects two values: eps_nx eps_ny [m rad]")
    return v[0], v[1]


def _pair(values, name):
    v = [float(a) for a in values]
    if len(v) != 2:
        raise InputError(f"<input>, field '{name}': expects two values: min max")
    return v[0], v[1]
