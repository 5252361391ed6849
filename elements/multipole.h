// Thin multipole kick (xtrack Multipole, thin: isthick = 0, i.e. the "kick only" model), with
// integrated strengths knl[n] = K_n L, ksl[n] = J_n L [m^-n] and chi = 1 (reference species):
//   px -= Re S,  py += Im S,   S = sum_{n=0..order} (knl[n] + i ksl[n]) (x + i y)^n / n!
// evaluated by Horner from n = order down, with 1/n! carried as xtrack does
// (start from inv_factorial_order = 1/order!, multiply by n at each step).
// Then the curvature terms of a bend of angle hxl (h = hxl / length, 0 if length == 0),
// from H = -h x (1 + delta) + h knl[0] x^2 / 2 + h knl[1] (x^3/3 - x y^2/2) (MAD-8 physics
// manual eq. 5.15), with x, y the positions at the kick:
//   px += hxl (1 + delta) - h knl[0] x + h knl[1] (y^2/2 - x^2)
//   py += h knl[1] x y
//   zeta -= hxl x / rvv
// (knl[1] enters only if order >= 1). Sources: xtrack/beam_elements/elements_src/multipole.h
// (Multipole_track_local_particle -> track_magnet_particles with model -1 = kick only),
// track_magnet.h, track_magnet_configure.h (kick_rot_frame = 1 for the kick-only model),
// track_magnet_kick.h (track_magnet_kick_single_particle, kick_simple_single_coordinates);
// xtrack/beam_elements/_common.py (inv_factorial_order = 1 / order!).
//
// Radiation (field `radiation`, radiation.h), as xtrack's Multipole with radiation_flag (multipole.h,
// synrad_spectrum.h synrad_average_kick): for length > 0, with curv = |S| / length and the path
// L_path = (length + hxl x) / 2 from the position at the kick, one half of the loss before the kick
// (the kick then sees the new delta and scaled px, py) and the other after it.
//
// Integer fields are declared `int`: element.h maps them to FT_FIELD_INT32 through int32_t (the
// same type as int on every supported host), and NVRTC has no int32_t without a prelude.
#pragma once
#include "fusetrack/device/element.h"
#include "magnet_integrators.h"  // FT_MAGNET_BODY_FUNCTION, magnet_body_on_copy
#include "radiation.h"

#define FT_MULTIPOLE_MAX_ORDER 5

#define FT_MULTIPOLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                                          \
  ARRAY(double, knl, FT_MULTIPOLE_MAX_ORDER + 1, 0.0, "m^-n", "integrated normal strengths K_n L")                    \
  ARRAY(double, ksl, FT_MULTIPOLE_MAX_ORDER + 1, 0.0, "m^-n", "integrated skew strengths J_n L")                      \
  PARAM(double, hxl, 0.0, "rad", "horizontal bending angle of the reference trajectory")                              \
  PARAM(double, length, 0.0, "m", "length of the originating thick magnet, for h = hxl / length")                     \
  PARAM(int, order, -1, "1",                                                                                          \
        "highest order of the Horner sum; -1: the highest non-zero knl/ksl (set it as in Xsuite to match it bit for " \
        "bit)")                                                                                                       \
  DERIVED(int, kick_order, "1", "order used by the kick")                                                             \
  DERIVED(double, inv_factorial_order, "1", "1 / kick_order!")                                                        \
  DERIVED(double, h_knl0, "m^-1", "h knl[0], h = hxl / length (0 if length = 0)")                                     \
  DERIVED(double, h_k1l, "m^-2", "h knl[1] (0 below order 1)")                                                        \
  FT_RADIATION_FIELDS(PARAM, DERIVED)

FT_ELEMENT_STRUCT(Multipole, FT_MULTIPOLE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cstdio>
#include <stdexcept>
inline void Multipole_prepare(Multipole& e, const ft_reference& ref) {
  radiation_prepare(e, ref, "Multipole");
  if (e.order < -1 || e.order > FT_MULTIPOLE_MAX_ORDER) {
    char msg[160];
    std::snprintf(msg, sizeof(msg), "Multipole: order = %d is outside [-1, %d]", e.order, FT_MULTIPOLE_MAX_ORDER);
    throw std::invalid_argument(msg);
  }
  e.kick_order = e.order;
  if (e.order < 0) {  // automatic: the highest non-zero coefficient
    e.kick_order = 0;
    for (int n = 0; n <= FT_MULTIPOLE_MAX_ORDER; ++n)
      if (e.knl[n] != 0.0 || e.ksl[n] != 0.0) e.kick_order = n;
  }
  for (int n = e.kick_order + 1; n <= FT_MULTIPOLE_MAX_ORDER; ++n) {
    if (e.knl[n] != 0.0 || e.ksl[n] != 0.0) {
      char msg[160];
      std::snprintf(msg, sizeof(msg), "Multipole: knl[%d] or ksl[%d] is non-zero but order = %d", n, n, e.order);
      throw std::invalid_argument(msg);
    }
  }
  double factorial = 1.0;  // exact for n <= 18
  for (int n = 2; n <= e.kick_order; ++n) factorial *= n;
  e.inv_factorial_order = 1.0 / factorial;
  // The curvature terms' coefficients depend on the parameters only: the same IEEE products as before,
  // taken once here instead of per particle (the division by length included).
  const double h = (e.length != 0.0) ? e.hxl / e.length : 0.0;
  e.h_knl0 = e.knl[0] * h;
  e.h_k1l = h * ((e.kick_order >= 1) ? e.knl[1] : 0.0);
}
#endif

template <bool kRadiation>
FT_FUNCTION void multipole_track(const Multipole& e, ft::ParticleView& p) {
  const double x = p.x;
  const double y = p.y;

  // Horner on (x + i y): (re, im) <- (re, im) (x + i y) + (knl[n] + i ksl[n]) / n!
  int n = e.kick_order;
  double inv_factorial = e.inv_factorial_order;
  double re = e.knl[n] * inv_factorial;
  double im = e.ksl[n] * inv_factorial;
  while (n > 0) {
    const double zre = re * x - im * y;
    const double zim = re * y + im * x;
    inv_factorial *= n;
    n -= 1;
    re = e.knl[n] * inv_factorial + zre;
    im = e.ksl[n] * inv_factorial + zim;
  }
  double curv = 0.0, path = 0.0;
  if (kRadiation) {
    curv = sqrt(re * re + im * im) / e.length;
    path = 0.5 * (e.length + e.hxl * x);
    radiation_thin_half(e.radiation, e.rad_mean, e.rad_quantum, e.radiation_seed, curv, path, p);
  }
  p.px += -re;
  p.py += im;

  // Curvature of the reference trajectory; without bending every term is zero (up to the sign
  // of zero), so straight multipoles skip it.
  if (e.hxl != 0.0) {
    double dpx = e.hxl * (1.0 + p.delta);
    const double dzeta = -p.rv0v * e.hxl * x;  // rv0v = 1 / rvv
    dpx += -e.h_knl0 * x;
    dpx += e.h_k1l * (-x * x + 0.5 * y * y);
    const double dpy = e.h_k1l * x * y;
    p.px += dpx;
    p.py += dpy;
    p.zeta += dzeta;
  }
  if (kRadiation) radiation_thin_half(e.radiation, e.rad_mean, e.rad_quantum, e.radiation_seed, curv, path, p);
}

/// The radiating kick, one called device function (as the thick magnets' bodies, magnet_integrators.h): inlined
/// at every multipole of a baked kernel, NVRTC's time would grow with the multipole count even where the
/// radiation is off. It works on a copy of the particle in registers (magnet_body_on_copy).
FT_MAGNET_BODY_FUNCTION void multipole_track_radiating(const Multipole& e, ft::ParticleView& p) {
  magnet_body_on_copy(p, [&](ft::ParticleView& q) { multipole_track<true>(e, q); });
}

FT_FUNCTION void Multipole_track(const Multipole& e, ft::ParticleView& p) {
  // xtrack radiates only in a multipole of non-zero length (the curvature is the kick over it).
  if (e.radiation != FT_RADIATION_OFF && e.length > 0.0)
    multipole_track_radiating(e, p);
  else
    multipole_track<false>(e, p);
}

// Written: the energy coordinates too, for the radiation.
FT_ELEMENT_COORDINATES(Multipole, FT_COORD_ALL, FT_COORD_PX | FT_COORD_PY | FT_COORD_ZETA | FT_COORD_ENERGY)
FT_REGISTER_ELEMENT(Multipole, FT_MULTIPOLE_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Thin multipole kick with hxl curvature terms (xtrack Multipole, thin)")
