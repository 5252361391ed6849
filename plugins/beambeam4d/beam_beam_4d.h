// BeamBeam4D: weak-strong 4D beam-beam kick from a strong bunch of N particles of charge q_s e with a
// transverse Gaussian distribution of rms sizes sigma_x, sigma_y, centred at (x_offset, y_offset)
// and moving against the tracked beam with velocity beta_s c. Thin; changes px and py only.
//
// Kick. The strong bunch's line density is lambda(s + beta_s c t) = N q_s e g(s + beta_s c t) with
// g normalised to 1; its field is E = lambda / (2 pi eps0) K(x, y), B = beta_s / c (e_s x E), and a
// test particle of charge q0 e moving at beta0 c feels F = q0 e (1 + beta0 beta_s) E. Integrated over
// the passage (int g dt = 1 / ((beta0 + beta_s) c)) and divided by P0 = p0c / c:
//   dpx = F_k Kx,  dpy = F_k Ky,
//   F_k = q0 q_s N e (1 + beta0 beta_s) / (2 pi eps0 p0c (beta0 + beta_s))   [p0c in eV, F_k in m]
// with K(x, y) = int rho(r') (r - r') / |r - r'|^2 d^2r' the field of the unit-normalised Gaussian
// rho, in 1/m (K -> r / |r|^2 far away). For beta0 = beta_s = 1 and q0 = q_s = 1 this is the
// classical 2 N r0 / gamma0 (r0 = e^2 / (4 pi eps0 m c^2)); same-sign charges repel (defocus).
// The kick is that of the reference momentum, independent of delta, as in Xsuite's
// BeamBeamBiGaussian2D (xfields/headers/beambeam2d.h: factor from q0, beta0, gamma0 of the
// reference; the convention (1 + beta0 beta_s) / (beta0 + beta_s) of its other_beam_beta0).
// Constants: e = 1.602176634e-19 C (exact, SI 2019), eps0 = 8.8541878128e-12 F/m (CODATA 2018).
//
// Field K:
//  - round beam (sigma_x == sigma_y = sigma):  K = r (1 - exp(-r^2 / (2 sigma^2))) / r^2, with
//    1 - exp(-u) = 2 exp(-u/2) sinh(u/2) for u < 1 (no cancellation) and K = r / (2 sigma^2) at r = 0;
//  - elliptic beam, sigma_a > sigma_b (a: the larger one; sigma_y > sigma_x swaps the roles of x and y):
//    Bassetti & Erskine, "Closed expression for the electric field of a two-dimensional Gaussian
//    charge density", CERN-ISR-TH/80-06 (1980), eq. (18), in the first quadrant (the signs of x, y
//    are restored after):
//      S = sqrt(2 (sigma_a^2 - sigma_b^2)),  z1 = (x + i y) / S,  z2 = (x sigma_b / sigma_a + i y sigma_a / sigma_b) / S,
//      Ky + i Kx = (sqrt(pi) / S) [w(z1) - exp(-x^2 / (2 sigma_a^2) - y^2 / (2 sigma_b^2)) w(z2)],
//    with the Faddeeva function w of bb4d_faddeeva.h;
//  - near the centre, where the bracket above cancels (relative error ~ eps / rho^2 near-round,
//    eps / rho flat), rho^2 = x^2 / (2 sigma_a^2) + y^2 / (2 sigma_b^2) < 5e-3: the Taylor series of
//    the integral representation (e.g. Kheifets, PETRA-Kurzmitteilung 119 (1976); Bassetti-Erskine eq. (7))
//      Kx = x int_0^inf exp(-x^2/A - y^2/B) / (A^(3/2) B^(1/2)) dq,  A = 2 sigma_a^2 + q,  B = 2 sigma_b^2 + q
//    (Ky: exponents 1/2, 3/2, times y), to total order 4 in (x^2, y^2) (truncation < rho^10 / 5! < 3e-14 relative),
//    with the moments J_ij = int_0^inf A^-(i+1/2) B^-(j+1/2) dq computed by prepare().
// r -> 0 gives K = 0 exactly in every branch, never NaN; K is exactly 0 on an axis it is odd in.
// Accuracy of K against numerical integration (tests/plugins/test_beambeam4d.cpp): ~1e-15 relative
// in general, at worst 1.5e-13 just outside the core (rho^2 ~ 5e-3) of near-round beams.
#pragma once
#include "bb4d_faddeeva.h"
#include "fusetrack/device/element.h"

// The moments J_ij, i + j = 1 .. 5, of the core expansion (prepare() fills them).
#define FT_BB4D_MOMENTS(DERIVED)                                                      \
  DERIVED(double, core_j10, "m^-3", "core moment J_10 (see beam_beam_4d.h)")          \
  DERIVED(double, core_j01, "m^-3", "core moment J_01")                               \
  DERIVED(double, core_j20, "m^-5", "core moment J_20")                               \
  DERIVED(double, core_j11, "m^-5", "core moment J_11")                               \
  DERIVED(double, core_j02, "m^-5", "core moment J_02")                               \
  DERIVED(double, core_j30, "m^-7", "core moment J_30")                               \
  DERIVED(double, core_j21, "m^-7", "core moment J_21")                               \
  DERIVED(double, core_j12, "m^-7", "core moment J_12")                               \
  DERIVED(double, core_j03, "m^-7", "core moment J_03")                               \
  DERIVED(double, core_j40, "m^-9", "core moment J_40")                               \
  DERIVED(double, core_j31, "m^-9", "core moment J_31")                               \
  DERIVED(double, core_j22, "m^-9", "core moment J_22")                               \
  DERIVED(double, core_j13, "m^-9", "core moment J_13")                               \
  DERIVED(double, core_j04, "m^-9", "core moment J_04")                               \
  DERIVED(double, core_j50, "m^-11", "core moment J_50")                              \
  DERIVED(double, core_j41, "m^-11", "core moment J_41")                              \
  DERIVED(double, core_j32, "m^-11", "core moment J_32")                              \
  DERIVED(double, core_j23, "m^-11", "core moment J_23")                              \
  DERIVED(double, core_j14, "m^-11", "core moment J_14")                              \
  DERIVED(double, core_j05, "m^-11", "core moment J_05")

#define FT_BEAMBEAM4D_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                                   \
  REQUIRED(double, intensity, "1", "number of particles N of the strong bunch")                                 \
  REQUIRED(double, q_strong, "e", "charge of one strong-beam particle")                                         \
  REQUIRED(double, sigma_x, "m", "rms horizontal size of the strong bunch")                                     \
  REQUIRED(double, sigma_y, "m", "rms vertical size of the strong bunch")                                       \
  PARAM(double, x_offset, 0.0, "m", "horizontal position of the strong bunch's centre (beam separation)")       \
  PARAM(double, y_offset, 0.0, "m", "vertical position of the strong bunch's centre (beam separation)")         \
  PARAM(double, beta_strong, 1.0, "1", "speed of the strong bunch / c, moving against the tracked beam")       \
  DERIVED(double, kick_factor, "m", "F_k = q0 q_s N e (1 + beta0 beta_s) / (2 pi eps0 p0c (beta0 + beta_s))")   \
  DERIVED(double, half_inv_a2, "m^-2", "1 / (2 sigma_a^2), sigma_a the larger size (round: 1 / (2 sigma^2))")   \
  DERIVED(double, half_inv_b2, "m^-2", "1 / (2 sigma_b^2), sigma_b the smaller size")                          \
  DERIVED(double, inv_s, "m^-1", "1 / S, S = sqrt(2 (sigma_a^2 - sigma_b^2)) (0 for a round beam)")             \
  DERIVED(double, ratio_ba, "1", "sigma_b / sigma_a")                                                          \
  DERIVED(double, ratio_ab, "1", "sigma_a / sigma_b")                                                          \
  DERIVED(double, field_scale, "m^-1", "sqrt(pi) / S")                                                          \
  DERIVED(double, dipole_px, "1", "px kick on the reference orbit, subtracted if subtract_dipole")             \
  DERIVED(double, dipole_py, "1", "py kick on the reference orbit, subtracted if subtract_dipole")             \
  FT_BB4D_MOMENTS(DERIVED)                                                                                      \
  PARAM(int, subtract_dipole, 0, "1",                                                                           \
        "1: subtract the kick at x = y = 0, so that offsets do not move the closed orbit (Xsuite post_subtract_px/py)") \
  DERIVED(int, mode, "1", "0: round beam, 1: sigma_x > sigma_y, 2: sigma_y > sigma_x (x and y swap roles)")

FT_ELEMENT_STRUCT(BeamBeam4D, FT_BEAMBEAM4D_FIELDS)

/// K(a, b) of the strong beam with sigma_a >= sigma_b (a: the coordinate along the larger size), in
/// 1/m; (ka, kb) its components. Round beams use the closed form.
FT_FUNCTION void bb4d_gauss_field(const BeamBeam4D& e, double a, double b, double& ka, double& kb) {
  if (e.mode == 0) {
    const double r2 = a * a + b * b;
    const double u = r2 * e.half_inv_a2;
    // q(u) = (1 - exp(-u)) / u, so that K = (a, b) q(u) / (2 sigma^2)
    double q;
    if (u < 1e-3) {
      q = 1.0 - u * (1.0 / 2.0 - u * (1.0 / 6.0 - u * (1.0 / 24.0 - u * (1.0 / 120.0))));  // error < u^5 / 720
    } else if (u < 1.0) {
      q = 2.0 * ft_exp(-0.5 * u) * ft_sinh(0.5 * u) / u;
    } else {
      q = (1.0 - ft_exp(-u)) / u;
    }
    const double factor = e.half_inv_a2 * q;
    ka = a * factor;
    kb = b * factor;
    return;
  }
  const double xa = fabs(a);
  const double yb = fabs(b);
  const double xx = xa * xa;
  const double yy = yb * yb;
  const double rho2 = xx * e.half_inv_a2 + yy * e.half_inv_b2;
  if (rho2 < 5e-3) {
    // Core: Ka = a sum_{m+n<=4} (-a^2)^m (-b^2)^n / (m! n!) J_{m+1,n},  Kb = b sum ... J_{m,n+1}.
    const double X = -xx;
    const double Y = -yy;
    const double X2 = X * X, Y2 = Y * Y, XY = X * Y;
    const double X3 = X2 * X, Y3 = Y2 * Y, X2Y = X2 * Y, XY2 = X * Y2;
    const double X4 = X3 * X, Y4 = Y3 * Y, X3Y = X3 * Y, X2Y2 = X2 * Y2, XY3 = X * Y3;
    const double sa = e.core_j10 + (X * e.core_j20 + Y * e.core_j11) +
                      (X2 * (1.0 / 2.0) * e.core_j30 + XY * e.core_j21 + Y2 * (1.0 / 2.0) * e.core_j12) +
                      (X3 * (1.0 / 6.0) * e.core_j40 + X2Y * (1.0 / 2.0) * e.core_j31 + XY2 * (1.0 / 2.0) * e.core_j22 +
                       Y3 * (1.0 / 6.0) * e.core_j13) +
                      (X4 * (1.0 / 24.0) * e.core_j50 + X3Y * (1.0 / 6.0) * e.core_j41 + X2Y2 * (1.0 / 4.0) * e.core_j32 +
                       XY3 * (1.0 / 6.0) * e.core_j23 + Y4 * (1.0 / 24.0) * e.core_j14);
    const double sb = e.core_j01 + (X * e.core_j11 + Y * e.core_j02) +
                      (X2 * (1.0 / 2.0) * e.core_j21 + XY * e.core_j12 + Y2 * (1.0 / 2.0) * e.core_j03) +
                      (X3 * (1.0 / 6.0) * e.core_j31 + X2Y * (1.0 / 2.0) * e.core_j22 + XY2 * (1.0 / 2.0) * e.core_j13 +
                       Y3 * (1.0 / 6.0) * e.core_j04) +
                      (X4 * (1.0 / 24.0) * e.core_j41 + X3Y * (1.0 / 6.0) * e.core_j32 + X2Y2 * (1.0 / 4.0) * e.core_j23 +
                       XY3 * (1.0 / 6.0) * e.core_j14 + Y4 * (1.0 / 24.0) * e.core_j05);
    ka = a * sa;
    kb = b * sb;
    return;
  }
  // Bassetti-Erskine in the first quadrant.
  double w1r, w1i, w2r, w2i;
  bb4d_faddeeva_w(xa * e.inv_s, yb * e.inv_s, w1r, w1i);
  bb4d_faddeeva_w(xa * e.ratio_ba * e.inv_s, yb * e.ratio_ab * e.inv_s, w2r, w2i);
  const double g = ft_exp(-rho2);
  const double k_a = e.field_scale * (w1i - g * w2i);
  const double k_b = e.field_scale * (w1r - g * w2r);
  // The field is odd in each coordinate: exactly zero on the axes (the bracket vanishes there only
  // up to rounding), sign restored elsewhere.
  ka = a == 0.0 ? 0.0 : (a < 0.0 ? -k_a : k_a);
  kb = b == 0.0 ? 0.0 : (b < 0.0 ? -k_b : k_b);
}

/// K(x, y) in the lattice frame, relative to the strong beam's centre.
FT_FUNCTION void bb4d_field_xy(const BeamBeam4D& e, double x, double y, double& kx, double& ky) {
  if (e.mode == 2) {
    bb4d_gauss_field(e, y, x, ky, kx);
  } else {
    bb4d_gauss_field(e, x, y, kx, ky);
  }
}

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>

inline void BeamBeam4D_prepare(BeamBeam4D& e, const ft_reference& ref) {
  char msg[200];
  const auto require = [&](bool ok, const char* what, double value) {
    if (!ok) {
      std::snprintf(msg, sizeof(msg), "BeamBeam4D: %s (got %.17g)", what, value);
      throw std::invalid_argument(msg);
    }
  };
  require(std::isfinite(e.sigma_x) && e.sigma_x > 0.0, "sigma_x must be positive and finite", e.sigma_x);
  require(std::isfinite(e.sigma_y) && e.sigma_y > 0.0, "sigma_y must be positive and finite", e.sigma_y);
  require(e.beta_strong > 0.0 && e.beta_strong <= 1.0, "beta_strong must be in (0, 1]", e.beta_strong);
  require(ref.p0c > 0.0, "the reference momentum p0c must be positive", ref.p0c);
  require(e.subtract_dipole == 0 || e.subtract_dipole == 1, "subtract_dipole must be 0 or 1", e.subtract_dipole);

  const double elementary_charge = 1.602176634e-19;  // C, exact (SI 2019)
  const double epsilon0 = 8.8541878128e-12;          // F/m, CODATA 2018
  const double pi = 3.14159265358979323846;
  const double e_over_2pi_eps0 = elementary_charge / (2.0 * pi * epsilon0);  // V m
  e.kick_factor = ref.q0 * e.q_strong * e.intensity * e_over_2pi_eps0 / ref.p0c *
                  ((1.0 + ref.beta0 * e.beta_strong) / (ref.beta0 + e.beta_strong));

  const double sa = std::fmax(e.sigma_x, e.sigma_y);
  const double sb = std::fmin(e.sigma_x, e.sigma_y);
  e.mode = e.sigma_x == e.sigma_y ? 0 : (e.sigma_x > e.sigma_y ? 1 : 2);
  e.half_inv_a2 = 1.0 / (2.0 * sa * sa);
  e.half_inv_b2 = 1.0 / (2.0 * sb * sb);
  e.ratio_ba = sb / sa;
  e.ratio_ab = sa / sb;
  if (e.mode == 0) {
    e.inv_s = 0.0;
    e.field_scale = 0.0;
  } else {
    const double s = std::sqrt(2.0 * (sa - sb) * (sa + sb));
    e.inv_s = 1.0 / s;
    e.field_scale = std::sqrt(pi) / s;
  }

  // Core moments J_ij = int_0^inf (q + 2 sa^2)^-(i+1/2) (q + 2 sb^2)^-(j+1/2) dq, by the trapezoidal rule
  // in s = log q: the integrand is analytic in |Im s| < pi and decays like e^s and e^-s at the ends, so
  // the error is ~ exp(-2 pi^2 / h) (h = 1/8: 1e-68); sums in long double.
  double* j[6][6] = {};
  j[1][0] = &e.core_j10; j[0][1] = &e.core_j01;
  j[2][0] = &e.core_j20; j[1][1] = &e.core_j11; j[0][2] = &e.core_j02;
  j[3][0] = &e.core_j30; j[2][1] = &e.core_j21; j[1][2] = &e.core_j12; j[0][3] = &e.core_j03;
  j[4][0] = &e.core_j40; j[3][1] = &e.core_j31; j[2][2] = &e.core_j22; j[1][3] = &e.core_j13; j[0][4] = &e.core_j04;
  j[5][0] = &e.core_j50; j[4][1] = &e.core_j41; j[3][2] = &e.core_j32; j[2][3] = &e.core_j23; j[1][4] = &e.core_j14;
  j[0][5] = &e.core_j05;
  const long double A0 = 2.0L * sa * sa;
  const long double B0 = 2.0L * sb * sb;
  long double sums[6][6] = {};
  const long double h = 0.125L;
  const long double s_lo = std::log(B0) - 48.0L;
  const long double s_hi = std::log(A0) + 48.0L;
  for (long double s = s_lo; s <= s_hi; s += h) {
    const long double q = std::exp(s);
    const long double ia = 1.0L / (q + A0);
    const long double ib = 1.0L / (q + B0);
    const long double base = q * std::sqrt(ia * ib);
    long double pa = 1.0L;
    for (int i = 0; i <= 5; ++i, pa *= ia) {
      long double pab = pa;
      for (int k = 0; i + k <= 5; ++k, pab *= ib) sums[i][k] += base * pab;
    }
  }
  for (int i = 0; i <= 5; ++i)
    for (int k = 0; i + k <= 5; ++k)
      if (j[i][k]) *j[i][k] = static_cast<double>(sums[i][k] * h);

  e.dipole_px = 0.0;
  e.dipole_py = 0.0;
  if (e.subtract_dipole) {
    double kx, ky;
    bb4d_field_xy(e, -e.x_offset, -e.y_offset, kx, ky);
    e.dipole_px = e.kick_factor * kx;
    e.dipole_py = e.kick_factor * ky;
  }
}
#endif

FT_FUNCTION void BeamBeam4D_track(const BeamBeam4D& e, ft::ParticleView& p) {
  double kx, ky;
  bb4d_field_xy(e, p.x - e.x_offset, p.y - e.y_offset, kx, ky);
  p.px += e.kick_factor * kx - e.dipole_px;
  p.py += e.kick_factor * ky - e.dipole_py;
}

FT_REGISTER_ELEMENT(BeamBeam4D, FT_BEAMBEAM4D_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Weak-strong 4D beam-beam kick of a Gaussian bunch (Bassetti-Erskine; Xsuite BeamBeamBiGaussian2D)")
