// Particle-in-cell space charge (grid collective element): the electric field of the whole bunch,
// computed by the framework from its charge on a grid (cloud-in-cell deposit in exact integers,
// open-boundary Poisson solve with the integrated Green's function on Hockney's doubled grid,
// fusetrack/poisson.h), interpolated at each particle with the deposit's weights and applied as the
// kick of `length` metres of ring:
//
//   Delta px = q0 L E_x / (beta0 gamma0^2 p0c)      Delta py = the same with E_y
//   Delta E  = q0 L E_z [eV]                         (model "3D" only; 2.5D has no E_z)
//
// with E the bunch's electric field in the laboratory frame [V/m], q0 [e], p0c [eV], L [m].
// Derivation. A bunch moving at beta0 c carries, besides its electric field, the magnetic field
// B = (beta0 / c) z^ x E (the Lorentz transformation of its rest-frame Coulomb field: E_perp =
// gamma E'_perp, E_par = E'_par, B = (v / c^2) x E; Jackson, "Classical Electrodynamics", 3rd ed.,
// eq. 11.149). The transverse Lorentz force on a particle of the bunch is
//   F_x = q (E_x - v B_y) = q E_x (1 - beta0^2) = q E_x / gamma0^2,
// the electric and magnetic forces cancel up to 1/gamma^2 (Reiser, "Theory and Design of Charged
// Particle Beams", 2nd ed., Wiley 2008, sec. 4.2, eq. 4.17). Over the length L, travelled in the
// time L / (beta0 c), the momentum changes by Delta P_x = q E_x L / (gamma0^2 beta0 c), and with
// px = P_x / P0, P0 c = p0c:  Delta px = q0 E_x L / (beta0 gamma0^2 p0c) (p0c in eV, E in V/m:
// e cancels). Written with the mass, q L E_x / (m c^2 beta0^2 gamma0^3): the form of xfields'
// SpaceChargeBiGaussian (factor = q/m L (1 - beta0^2) / (gamma0 beta0^2 c^2)). The longitudinal
// force has no magnetic part (v along z), so the energy changes by the work q E_z L.
//
// The framework's part (plugin_abi.h, ft_grid_model): model "2.5D" deposits in 3D (x, y, zeta)
// and solves a 2D Poisson equation per zeta layer (the field of a long beam with each layer's line
// density); model "3D" solves in the bunch's rest frame (zeta stretched by gamma0, the density
// divided by gamma0) and transforms back (E_x = gamma0 E'_x, E_z = E'_z).
//
// Grid. nodes_x, nodes_y, nodes_zeta nodes; per dimension a fixed extent (x_min < x_max, ...) or,
// when both ends are left at 0, the extent adapted every turn to the bunch: mean +- extent_sigmas
// rms, from moments summed as fixed-point integers over threads and MPI ranks (every rank computes
// the same grid from the same integers; the half extent is rounded up to a step of 2^(1/8) so the
// solver is rebuilt only when the beam size changes by more than 9 %). A particle outside the grid
// gets no kick: the framework counts it and warns with the count, never dropping it in silence.
//
// Host-only JSON field: "model": "2.5D" (default) or "3D". Host model: framework/src/collective/
// space_charge_model.cpp.
#pragma once
#include "fusetrack/device/element.h"

#define FT_SPACE_CHARGE_PIC_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                        \
  REQUIRED(double, length, "m", "length of ring whose space charge this element applies (integrated kick)") \
  REQUIRED(double, intensity, "1", "real particles per bunch, spread over the macroparticles")              \
  PARAM(int, nodes_x, 64, "1", "grid nodes in x (>= 2)")                                                   \
  PARAM(int, nodes_y, 64, "1", "grid nodes in y (>= 2)")                                                   \
  PARAM(int, nodes_zeta, 32, "1", "grid nodes in zeta (>= 2): the slices of the bunch")                    \
  PARAM(double, x_min, 0.0, "m", "first node in x; x_min = x_max = 0: adapted to the bunch every turn")   \
  PARAM(double, x_max, 0.0, "m", "last node in x")                                                         \
  PARAM(double, y_min, 0.0, "m", "first node in y; y_min = y_max = 0: adapted to the bunch every turn")   \
  PARAM(double, y_max, 0.0, "m", "last node in y")                                                         \
  PARAM(double, zeta_min, 0.0, "m", "first node in zeta; zeta_min = zeta_max = 0: adapted every turn")    \
  PARAM(double, zeta_max, 0.0, "m", "last node in zeta")                                                   \
  PARAM(double, extent_sigmas, 6.0, "1", "adapted extent: the bunch's mean +- extent_sigmas rms")          \
  DERIVED(double, kick_transverse, "m/V", "q0 L / (beta0 gamma0^2 p0c): Delta px per V/m of E_x")          \
  DERIVED(double, kick_energy, "m/V", "q0 L / E0: Delta E / E0 per V/m of E_z")

#define FT_SPACE_CHARGE_PIC_JSON_FIELDS(JSON) \
  JSON(model, 0, "-", "\"2.5D\" (default: 3D deposit, a 2D solve per zeta layer) or \"3D\" (rest-frame 3D solve)")

FT_ELEMENT_STRUCT(SpaceChargePIC, FT_SPACE_CHARGE_PIC_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>

inline void SpaceChargePIC_prepare(SpaceChargePIC& e, const ft_reference& ref) {
  if (!(ref.p0c > 0.0 && ref.energy0 > 0.0 && ref.beta0 > 0.0 && ref.gamma0 >= 1.0)) {
    char msg[200];
    std::snprintf(msg, sizeof(msg), "SpaceChargePIC: the reference particle needs p0c > 0 and energy0 > 0, got %.17g, %.17g eV",
                  ref.p0c, ref.energy0);
    throw std::invalid_argument(msg);
  }
  e.kick_transverse = ref.q0 * e.length / (ref.beta0 * ref.gamma0 * ref.gamma0 * ref.p0c);
  e.kick_energy = ref.q0 * e.length / ref.energy0;
}

/// The grid and the bunch charge for the framework; throws std::invalid_argument naming the field on
/// bad input. Defined in space_charge_model.cpp.
void SpaceChargePIC_create_grid(const SpaceChargePIC& e, const char* json_definition, const char* base_directory,
                                const ft_reference& reference, ft_grid_model& model);
#endif

/// field: E_x, E_y, E_z [V/m] of the bunch at the particle (laboratory frame; E_z = 0 in 2.5D).
FT_FUNCTION void SpaceChargePIC_kick(const SpaceChargePIC& e, const double field[3], ft::ParticleView& p) {
  p.px += e.kick_transverse * field[0];
  p.py += e.kick_transverse * field[1];
  if (field[2] != 0.0) p.add_to_energy(e.kick_energy * field[2]);
}

FT_ELEMENT_COORDINATES(SpaceChargePIC, FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_PTAU, FT_COORD_PX | FT_COORD_PY | FT_COORD_ENERGY)
FT_REGISTER_GRID_COLLECTIVE_ELEMENT(SpaceChargePIC, FT_SPACE_CHARGE_PIC_FIELDS, FT_SPACE_CHARGE_PIC_JSON_FIELDS,
                                    FT_WITH_PREPARE,
                                    "Particle-in-cell space charge, 2.5D or 3D: the bunch's field from its charge on "
                                    "a grid (open-boundary FFT Poisson solve, integrated Green's function; Hockney & "
                                    "Eastwood; xfields), kick q L E / (beta gamma^2 p0c) (Reiser sec. 4.2)")
