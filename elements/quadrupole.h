// Thick quadrupole, xtrack Quadrupole default model ("mat-kick-mat", model 4, drift_model 3):
// the normal gradient k1 is integrated exactly by the linear map of the expanded Hamiltonian
//   H = (px^2 + py^2) / (2 (1 + delta)) + k1 (x^2 - y^2) / 2 + pzeta - (1 + delta)
// (chromatic: Kx = k1 / (1 + delta), Ky = -Kx); with xp = px / (1 + delta), for each plane
//   C = cos(sqrt(K) s), S = sin(sqrt(K) s) / sqrt(K)   (cosh/sinh for K < 0; C = 1, S = s for K = 0)
//   x <- C x + S xp,   px <- (1 + delta) (-K S x + C xp),
// and zeta from the path length: zeta += s - (s + I) / rvv, I = (1/2) int_0^s (x'^2 + y'^2) ds',
//   int_0^s x'^2 = [K x^2 (s - S C) + xp^2 (s + S C)] / 2 - K x xp S^2.
// This is the exact flow of H, hence symplectic for any s, and M(-s) = M(s)^-1 exactly.
// Source: xtrack/beam_elements/elements_src/track_magnet_drift.h
// (track_expanded_combined_dipole_quad_single_particle with k0 = h = 0, from MAD-X trrun.f90),
// xtrack/beam_elements/elements_src/quadrupole.h, default_magnet_config.h, track_magnet.h.
//
// The skew gradient k1s is not part of the linear map in xtrack: it is applied as thin kicks
//   px += (k1s L / n) y,  py += (k1s L / n) x
// (xtrack track_magnet_kick.h, ksl[1] = k1s L) in xtrack's "uniform" integrator with
// n = num_slices (xtrack num_multipole_kicks):  n x [ M(L/2n)  kick  M(L/2n) ].
// That splitting is symmetric (2nd order in L/n), symplectic, and tracking with -L inverts it
// exactly up to rounding. With k1s == 0 the kicks vanish and one exact M(L) is applied, so
// num_slices does not matter (xtrack's result differs from this only by rounding).
// Why this choice: it is Xsuite's default Quadrupole model, so results agree with Xsuite to
// rounding, and it is exact (no slicing error) for the usual k1s = 0 case.
#pragma once
#include "fusetrack/device/element.h"

#define FT_QUADRUPOLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                       \
  REQUIRED(double, length, "m", "magnetic length")                                                   \
  REQUIRED(double, k1, "m^-2", "normal gradient K1 = (dBy/dx) / (B rho)")                            \
  PARAM(double, k1s, 0.0, "m^-2", "skew gradient, applied as thin kicks between linear maps")        \
  PARAM(int, num_slices, 1, "1", "number of kicks for k1s (xtrack num_multipole_kicks), >= 1")

FT_ELEMENT_STRUCT(Quadrupole, FT_QUADRUPOLE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void Quadrupole_prepare(Quadrupole& e, const ft_reference& /*ref*/) {
  if (e.num_slices < 1) throw std::invalid_argument("Quadrupole: num_slices must be >= 1");
}
#endif

/// One plane of the exact linear map over length s with focusing K [m^-2]; advances (u, up) with
/// up = u' and returns int_0^s u'^2.
FT_FUNCTION double Quadrupole_plane_(double K, double s, double& u, double& up) {
  double C, S;
  if (K > 0.0) {
    const double sk = sqrt(K);
    C = ft_cos(sk * s);
    S = ft_sin(sk * s) / sk;
  } else if (K < 0.0) {
    const double sk = sqrt(-K);
    C = ft_cosh(sk * s);
    S = ft_sinh(sk * s) / sk;
  } else {
    C = 1.0;
    S = s;
  }
  const double u0 = u;
  const double up0 = up;
  u = C * u0 + S * up0;
  up = -K * S * u0 + C * up0;
  return 0.5 * (K * u0 * u0 * (s - S * C) + up0 * up0 * (s + S * C)) - K * u0 * up0 * S * S;
}

/// The exact linear quadrupole map over length s.
FT_FUNCTION void Quadrupole_linear_map_(double k1, double s, ft::ParticleView& p) {
  const double opd = 1.0 + p.delta;
  const double kx = k1 / opd;
  double xp = p.px / opd;
  double yp = p.py / opd;
  const double ix = Quadrupole_plane_(kx, s, p.x, xp);
  const double iy = Quadrupole_plane_(-kx, s, p.y, yp);
  p.px = xp * opd;
  p.py = yp * opd;
  p.zeta += s - (s + 0.5 * (ix + iy)) / p.rvv;
}

FT_FUNCTION void Quadrupole_track(const Quadrupole& e, ft::ParticleView& p) {
  if (e.k1s == 0.0) {
    Quadrupole_linear_map_(e.k1, e.length, p);
    return;
  }
  const int n = e.num_slices > 1 ? e.num_slices : 1;
  const double half = 0.5 * (e.length / n);
  const double k1sl = e.k1s * e.length / n;
  for (int i = 0; i < n; ++i) {
    Quadrupole_linear_map_(e.k1, half, p);
    const double x = p.x;
    p.px += k1sl * p.y;
    p.py += k1sl * x;
    Quadrupole_linear_map_(e.k1, half, p);
  }
}

FT_ELEMENT_COORDINATES(Quadrupole, FT_COORD_ALL, FT_COORD_TRANSVERSE | FT_COORD_ZETA)
FT_REGISTER_ELEMENT(Quadrupole, FT_QUADRUPOLE_FIELDS, FT_THICK, FT_WITH_PREPARE,
                    "Thick quadrupole: exact chromatic linear map for k1, thin kicks for k1s "
                    "(xtrack Quadrupole, model mat-kick-mat)")
