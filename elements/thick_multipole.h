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
// Sources: AT atintegrators/StrMPoleSymplectic4Pass.c (strthinkick, fastdrift);
// xtrack/beam_elements/elements_src/octupole.h, track_magnet.h, track_magnet_kick.h.
#pragma once
#include "fusetrack/device/element.h"
#include "magnet_integrators.h"

#define FT_THICK_MULTIPOLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                      \
  REQUIRED(double, length, "m", "magnetic length")                                                       \
  ARRAY(double, kn, FT_MAGNET_MAX_ORDER + 1, 0.0, "m^-(n+1)", "normal strengths k_n = (d^n By/dx^n) / (B rho)") \
  ARRAY(double, ks, FT_MAGNET_MAX_ORDER + 1, 0.0, "m^-(n+1)", "skew strengths j_n = (d^n Bx/dx^n) / (B rho)")   \
  PARAM(int, integrator, 0, "1", "0: Forest-Ruth 4th order, 1: teapot, 2: yoshida4, 3: uniform (xtrack's)") \
  PARAM(int, num_slices, 0, "1", "Forest-Ruth steps, or kicks of xtrack's integrators; 0: automatic")  \
  DERIVED(int, num_kicks, "1", "Forest-Ruth steps or kicks used")                                        \
  FT_MAGNET_KICK_FIELDS(DERIVED)

FT_ELEMENT_STRUCT(ThickMultipole, FT_THICK_MULTIPOLE_FIELDS)

#ifndef FT_DEVICE_COMPILE
inline void ThickMultipole_prepare(ThickMultipole& e, const ft_reference& /*ref*/) {
  e.num_kicks = magnet_num_kicks("ThickMultipole", e.integrator, e.num_slices, e.length, 0.0);
  double knl[FT_MAGNET_MAX_ORDER + 1], ksl[FT_MAGNET_MAX_ORDER + 1];
  for (int n = 0; n <= FT_MAGNET_MAX_ORDER; ++n) {
    knl[n] = e.kn[n] * e.length;
    ksl[n] = e.ks[n] * e.length;
  }
  magnet_set_kick(e, knl, ksl, 0.0, 0.0, 0.0);
}
#endif

struct ThickMultipoleBody {
  const ThickMultipole& e;
  FT_FUNCTION void drift(double s, ft::ParticleView& p) const { magnet_expanded_drift(s, p); }
  FT_FUNCTION void kick(double w, ft::ParticleView& p) const { magnet_kick(e, w, p); }
};

FT_MAGNET_BODY_FUNCTION void ThickMultipole_track(const ThickMultipole& e, ft::ParticleView& p) {
  const ThickMultipoleBody body{e};
  magnet_integrate(body, e.integrator, e.num_kicks, e.length, p);
}

FT_REGISTER_ELEMENT(ThickMultipole, FT_THICK_MULTIPOLE_FIELDS, FT_THICK, FT_WITH_PREPARE,
                    "Thick straight multipole (k_n, j_n to n = 5), Forest-Ruth (AT StrMPoleSymplectic4Pass) or "
                    "xtrack's integrators")
