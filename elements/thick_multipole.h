// Thick straight multipole: normal and skew strengths k_n, j_n [m^-(n+1)] for n = 0..5
// (dipole to dodecapole, MAD convention By + i Bx = B rho sum (k_n + i j_n) (x + i y)^n / n!),
// integrated with drifts and kicks of the expanded Hamiltonian (magnet_integrators.h, h = 0):
//   drift = expanded drift (drift.h), kick = the multipole kick of strengths k_n L, j_n L.
//  integrator 0 (default): Forest-Ruth 4th order, num_slices steps of 3 kicks (0 = 10 steps,
//    AT's default NumIntSteps): AT's and trackcpp's StrMPoleSymplectic4Pass (PolynomB[n] =
//    k_n / n!, PolynomA[n] = j_n / n!).
//  integrators 1 (teapot), 2 (yoshida4), 3 (uniform): xtrack's schedules with num_slices kicks
//    (0 = 1 kick, xtrack's automatic count for a straight magnet); 3 is xtrack's default
//    Octupole/Sextupole model (drift-kick-drift-expanded, uniform).
//  Radiation (field `radiation`, radiation.h): at every kick, from the field at the particle (AT
//    StrMPoleSymplectic4RadPass).
// Sources: AT atintegrators/StrMPoleSymplectic4Pass.c (strthinkick, fastdrift);
// xtrack/beam_elements/elements_src/octupole.h, track_magnet.h, track_magnet_kick.h.
#pragma once
#include "fusetrack/device/element.h"
#include "magnet_integrators.h"

#define FT_THICK_MULTIPOLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                              \
  REQUIRED(double, length, "m", "magnetic length")                                                              \
  ARRAY(double, kn, FT_MAGNET_MAX_ORDER + 1, 0.0, "m^-(n+1)", "normal strengths k_n = (d^n By/dx^n) / (B rho)") \
  ARRAY(double, ks, FT_MAGNET_MAX_ORDER + 1, 0.0, "m^-(n+1)", "skew strengths j_n = (d^n Bx/dx^n) / (B rho)")   \
  PARAM(int, integrator, 0, "1", "0: Forest-Ruth 4th order, 1: teapot, 2: yoshida4, 3: uniform (xtrack's)")     \
  PARAM(int, num_slices, 0, "1", "Forest-Ruth steps, or kicks of xtrack's integrators; 0: automatic")           \
  DERIVED(int, num_kicks, "1", "Forest-Ruth steps or kicks used")                                               \
  FT_MAGNET_KICK_FIELDS(DERIVED)                                                                                \
  FT_MAGNET_RADIATION_FIELDS(PARAM, DERIVED)

FT_ELEMENT_STRUCT(ThickMultipole, FT_THICK_MULTIPOLE_FIELDS)

#ifndef FT_DEVICE_COMPILE
inline void ThickMultipole_prepare(ThickMultipole& e, const ft_reference& ref) {
  e.num_kicks = magnet_num_kicks("ThickMultipole", e.integrator, e.num_slices, e.length, 0.0);
  double knl[FT_MAGNET_MAX_ORDER + 1], ksl[FT_MAGNET_MAX_ORDER + 1];
  for (int n = 0; n <= FT_MAGNET_MAX_ORDER; ++n) {
    knl[n] = e.kn[n] * e.length;
    ksl[n] = e.ks[n] * e.length;
  }
  magnet_set_kick(e, knl, ksl, 0.0, 0.0, 0.0);
  magnet_prepare_radiation(e, ref, "ThickMultipole", e.length, 0.0, 0.0, 0.0);
}
#endif

// P: ft::ParticleView, or ft::ParticleLanes on the host (magnet_integrators.h).
struct ThickMultipoleBody {
  const ThickMultipole& e;
  template <class P>
  FT_FUNCTION void drift(double s, P& p) const {
    magnet_expanded_drift(s, p);
  }
  template <class P>
  FT_FUNCTION void kick(double w, P& p) const {
    magnet_kick(e, w, p);
  }
};

template <class P>
FT_FUNCTION void thick_multipole_track(const ThickMultipole& e, P& p) {
  const ThickMultipoleBody body{e};
  magnet_integrate(body, e.integrator, e.num_kicks, e.length, p);
}

FT_MAGNET_BODY_FUNCTION void ThickMultipole_track(const ThickMultipole& e, ft::ParticleView& p) {
  magnet_body_on_copy(p, [&e](ft::ParticleView& q) { thick_multipole_track(e, q); });
}

#ifndef FT_DEVICE_COMPILE
/// The CPU form: every drift and kick over all alive particles of a block at once.
inline void ThickMultipole_track_lanes(const ThickMultipole& e, ft::ParticleLanes& l) { thick_multipole_track(e, l); }
#endif

// Written: the energy coordinates too, for the radiation.
FT_ELEMENT_COORDINATES(ThickMultipole, FT_COORD_ALL, FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_ENERGY)
FT_REGISTER_ELEMENT(ThickMultipole, FT_THICK_MULTIPOLE_FIELDS, FT_THICK, FT_WITH_PREPARE,
                    "Thick straight multipole (k_n, j_n to n = 5), Forest-Ruth (AT StrMPoleSymplectic4Pass) or "
                    "xtrack's integrators")
