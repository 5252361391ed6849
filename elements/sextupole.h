// Thick sextupole, xtrack Sextupole default model ("drift-kick-drift-expanded", model 6, with
// the "uniform" integrator 3): with n = num_slices (xtrack num_multipole_kicks) and L the length,
//   n x [ D(L/2n)  K  D(L/2n) ]
// D: the expanded drift of drift.h (xtrack Drift_single_particle_expanded):
//   x += s xp, y += s yp, zeta += s (1 - (1 + (xp^2 + yp^2)/2) / rvv), xp = px / (1 + delta);
// K: the thin sextupole kick of integrated strengths k2 L / n, k2s L / n (track_magnet_kick.h):
//   px -= Re S, py += Im S,  S = (k2 + i k2s) (L/n) (x + i y)^2 / 2, i.e.
//   px += -(L/n) [k2 (x^2 - y^2) / 2 - k2s x y],   py += (L/n) [k2 x y + k2s (x^2 - y^2) / 2].
// A symmetric leapfrog: symplectic, 2nd order in L/n, and tracking with -L inverts it exactly
// (up to rounding). With k2 = k2s = 0 one drift D(L) is applied (as xtrack does).
// Why this choice: it is Xsuite's default Sextupole model, so results agree with Xsuite to
// rounding; raise num_slices for accuracy in strong sextupoles.
// Sources: xtrack/beam_elements/elements_src/sextupole.h, default_magnet_config.h,
// track_magnet.h (uniform integrator), track_magnet_drift.h, track_magnet_kick.h.
#pragma once
#include "fusetrack/device/element.h"

#define FT_SEXTUPOLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                              \
  REQUIRED(double, length, "m", "magnetic length")                                         \
  REQUIRED(double, k2, "m^-3", "normal sextupole strength K2 = (d2By/dx2) / (B rho)")      \
  PARAM(double, k2s, 0.0, "m^-3", "skew sextupole strength")                               \
  PARAM(int, num_slices, 1, "1", "number of drift-kick-drift slices (xtrack num_multipole_kicks), >= 1")

FT_ELEMENT_STRUCT(Sextupole, FT_SEXTUPOLE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void Sextupole_prepare(Sextupole& e, const ft_reference& /*ref*/) {
  if (e.num_slices < 1) throw std::invalid_argument("Sextupole: num_slices must be >= 1");
}
#endif

FT_FUNCTION void Sextupole_drift_(double s, ft::ParticleView& p) {
  const double xp = p.px * p.rpp;
  const double yp = p.py * p.rpp;
  const double dzeta = 1.0 - p.rv0v * (1.0 + (xp * xp + yp * yp) / 2.0);  // rv0v = 1 / rvv
  p.x += xp * s;
  p.y += yp * s;
  p.zeta += s * dzeta;
}

FT_FUNCTION void Sextupole_track(const Sextupole& e, ft::ParticleView& p) {
  if (e.k2 == 0.0 && e.k2s == 0.0) {
    Sextupole_drift_(e.length, p);
    return;
  }
  const int n = e.num_slices > 1 ? e.num_slices : 1;
  const double half = 0.5 * (e.length / n);
  const double k2l = e.k2 * e.length / n;
  const double k2sl = e.k2s * e.length / n;
  for (int i = 0; i < n; ++i) {
    Sextupole_drift_(half, p);
    const double x = p.x;
    const double y = p.y;
    // Horner on (x + i y) for (k2l + i k2sl) (x + i y)^2 / 2.
    const double re1 = 0.5 * k2l * x - 0.5 * k2sl * y;
    const double im1 = 0.5 * k2l * y + 0.5 * k2sl * x;
    const double re = re1 * x - im1 * y;
    const double im = re1 * y + im1 * x;
    p.px += -re;
    p.py += im;
    Sextupole_drift_(half, p);
  }
}

FT_ELEMENT_COORDINATES(Sextupole, FT_COORD_ALL, FT_COORD_TRANSVERSE | FT_COORD_ZETA)
FT_REGISTER_ELEMENT(Sextupole, FT_SEXTUPOLE_FIELDS, FT_THICK, FT_WITH_PREPARE,
                    "Thick sextupole, drift-kick-drift with num_slices slices (xtrack Sextupole default)")
