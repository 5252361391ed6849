// SpaceChargeBiGaussian: frozen space charge. The transverse kick of a bunch of the reference species
// with a fixed Gaussian distribution: transverse rms sizes sigma_x, sigma_y around (mean_x, mean_y),
// Gaussian line density in zeta of N particles, rms length sigma_z, centred at z0. Thin; changes px and
// py only; integrates the force over `length`, the part of the ring the kick stands for (xfields
// SpaceChargeBiGaussian, whose name and fields this element takes so that Xsuite lines import).
//
// Kick. The bunch's line density is lambda(zeta) = N / (sqrt(2 pi) sigma_z) exp(-(zeta - z0)^2 / (2 sigma_z^2))
// [1/m]; its fields at the particle are E = q0 e lambda K / (2 pi eps0) and B = (beta0 / c) e_s x E, so
// the transverse force on a particle of charge q0 e moving with it at beta0 c is
// q0 e E (1 - beta0^2) = q0 e E / gamma0^2 (electric minus magnetic). Over `length` L (time L / (beta0 c))
// and divided by P0 = gamma0 m0 beta0 c:
//   dpx = F_sc lambda(zeta) Kx,  dpy = F_sc lambda(zeta) Ky,  F_sc = 2 r0 q0^2 L / (beta0^2 gamma0^3),
//   r0 = e / (4 pi eps0 m0) with m0 in eV (the classical radius of the species, 1.5347e-18 m for protons),
// with the reference's beta0, gamma0, q0, mass0 (as xfields). K(x, y) = int rho(r') (r - r') / |r - r'|^2 d^2 r'
// is the field of the unit-normalised 2D Gaussian rho [1/m], K -> r / r^2 far away; like charges repel
// (defocusing). Near the centre K = (x / (sigma_x (sigma_x + sigma_y)), y / (sigma_y (sigma_x + sigma_y))),
// which gives the Laslett tune shift dQ_x = -(1 / 4 pi) sum beta_x F_sc lambda / (sigma_x (sigma_x + sigma_y)).
// Sources: xfields SpaceChargeBiGaussian (xfields/beam_elements/spacecharge.py and spacechargebigaussian.h,
// factor -q0^2 e L (1 - beta0^2) / (m0 gamma0 beta0^2 c^2) times lambda dphi/dx; facts only, no code);
// K. Schindl, "Space charge", CERN Accelerator School, CERN-2006-002, p. 305 (force, Laslett tune shift).
//
// Field K of the Gaussian with sizes sigma_a >= sigma_b (a: the coordinate along the larger size;
// sigma_y > sigma_x swaps the roles of x and y):
//  - round (|sigma_x - sigma_y| < min_sigma_diff, as xfields, or below 1e-8 relative): sigma = (sigma_x +
//    sigma_y) / 2, K = r q(u) / (2 sigma^2), u = r^2 / (2 sigma^2), q = (1 - e^-u) / u, without
//    cancellation (series for u < 1e-3, 2 e^(-u/2) sinh(u/2) / u below 1);
//  - elliptic: Bassetti & Erskine, "Closed expression for the electric field of a two-dimensional
//    Gaussian charge density", CERN-ISR-TH/80-06 (1980), eq. (18), in the first quadrant (signs restored
//    after; exactly 0 on an axis):
//      S = sqrt(2 (sigma_a^2 - sigma_b^2)),  z1 = (a + i b) / S,  z2 = (a sigma_b / sigma_a + i b sigma_a / sigma_b) / S,
//      K_b + i K_a = (sqrt(pi) / S) [w(z1) - exp(-a^2 / (2 sigma_a^2) - b^2 / (2 sigma_b^2)) w(z2)],
//    w the Faddeeva function of fusetrack/device/faddeeva.h (the same arithmetic as beambeam6d.h and the
//    BeamBeam4D plugin);
//  - the core of an elliptic beam, rho^2 = a^2 / (2 sigma_a^2) + b^2 / (2 sigma_b^2) < 1e-5, where the bracket
//    above cancels: the series of the integral representation (Bassetti & Erskine eq. (7))
//      K_a = a int_0^inf exp(-a^2/A - b^2/B) A^(-3/2) B^(-1/2) dq,  A = 2 sigma_a^2 + q,  B = 2 sigma_b^2 + q,
//    to first order: K_a = a (J10 - a^2 J20 - b^2 J11), K_b = b (J01 - a^2 J11 - b^2 J02) with the closed forms
//    (s_a = sqrt(2) sigma_a, s_b = sqrt(2) sigma_b) J10 = 2 / (s_a (s_a + s_b)), J01 = 2 / (s_b (s_a + s_b)),
//    J20 = 2 (2 s_a + s_b) / (3 s_a^3 (s_a + s_b)^2), J11 = 2 / (s_a s_b (s_a + s_b)^2),
//    J02 = 2 (s_a + 2 s_b) / (3 s_b^3 (s_a + s_b)^2) (prepare computes them); truncation < rho^4 / 2 ~ 5e-11.
// Accuracy (tests/elements/test_space_charge_bigaussian.cpp, against direct 2D quadrature of the field
// of the Gaussian charge): round and flat beams to ~1e-13 relative; near-round beams (relative size
// difference 1e-8 .. 1e-4) lose up to ~1e-8 relative to the cancellation of the Bassetti-Erskine bracket,
// the size of the round approximation at the 1e-8 threshold (the field is continuous there to ~1e-8).
//
// Map properties: the kick derives from a potential at fixed zeta, so the transverse map is symplectic
// and L -> -L undoes it (up to rounding). As in xfields (without its optional longitudinal kick), delta
// is not changed, so the 6D map is not symplectic: the frozen model's known approximation.
// Host-only: prepare() checks the fields (errors name the field) and computes the constants below once,
// so CPU and GPU read identical numbers; the kick is branch-light (the beam's shape is chosen per
// element) and uses the portable ft_exp, ft_sinh and the Faddeeva function: --fma off reproduces the
// CPU bit for bit.
#pragma once
#include "fusetrack/device/element.h"
#include "fusetrack/device/faddeeva.h"

#define FT_SPACE_CHARGE_BIGAUSSIAN_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                    \
  REQUIRED(double, length, "m", "length of ring the kick integrates (the element itself is thin), >= 0")       \
  REQUIRED(double, number_of_particles, "1", "bunch intensity N: real particles in the frozen bunch, >= 0")     \
  REQUIRED(double, sigma_z, "m", "rms bunch length of the Gaussian line density in zeta, > 0")                  \
  REQUIRED(double, sigma_x, "m", "horizontal rms beam size, > 0")                                               \
  REQUIRED(double, sigma_y, "m", "vertical rms beam size, > 0")                                                 \
  PARAM(double, z0, 0.0, "m", "zeta of the bunch centre (peak of the line density)")                           \
  PARAM(double, mean_x, 0.0, "m", "horizontal centre of the bunch")                                             \
  PARAM(double, mean_y, 0.0, "m", "vertical centre of the bunch")                                               \
  PARAM(double, min_sigma_diff, 1e-10, "m",                                                                     \
        "|sigma_x - sigma_y| below which the beam is round (also below 1e-8 of the larger size), >= 0")         \
  DERIVED(double, kick_factor, "m",                                                                             \
          "2 r0 q0^2 N L / (sqrt(2 pi) sigma_z beta0^2 gamma0^3): the kick is kick_factor exp(...) K")          \
  DERIVED(double, half_inv_sz2, "m^-2", "1 / (2 sigma_z^2)")                                                   \
  DERIVED(double, half_inv_a2, "m^-2", "1 / (2 sigma_a^2), sigma_a the larger size (round: 1 / (2 sigma^2))")   \
  DERIVED(double, half_inv_b2, "m^-2", "1 / (2 sigma_b^2), sigma_b the smaller size")                          \
  DERIVED(double, inv_s, "m^-1", "1 / S, S = sqrt(2 (sigma_a^2 - sigma_b^2)) (0 for a round beam)")             \
  DERIVED(double, ratio_ba, "1", "sigma_b / sigma_a")                                                          \
  DERIVED(double, ratio_ab, "1", "sigma_a / sigma_b")                                                          \
  DERIVED(double, field_scale, "m^-1", "sqrt(pi) / S")                                                          \
  DERIVED(double, core_j10, "m^-2", "core series J10 = 2 / (s_a (s_a + s_b)), s = sqrt(2) sigma")              \
  DERIVED(double, core_j01, "m^-2", "core series J01 = 2 / (s_b (s_a + s_b))")                                 \
  DERIVED(double, core_j20, "m^-4", "core series J20 = 2 (2 s_a + s_b) / (3 s_a^3 (s_a + s_b)^2)")             \
  DERIVED(double, core_j11, "m^-4", "core series J11 = 2 / (s_a s_b (s_a + s_b)^2)")                           \
  DERIVED(double, core_j02, "m^-4", "core series J02 = 2 (s_a + 2 s_b) / (3 s_b^3 (s_a + s_b)^2)")             \
  DERIVED(int, mode, "1", "0: round beam, 1: sigma_x > sigma_y, 2: sigma_y > sigma_x (x and y swap roles)")

FT_ELEMENT_STRUCT(SpaceChargeBiGaussian, FT_SPACE_CHARGE_BIGAUSSIAN_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>

inline void SpaceChargeBiGaussian_prepare(SpaceChargeBiGaussian& e, const ft_reference& ref) {
  char msg[240];
  const auto require = [&](bool ok, const char* field, const char* what, double value) {
    if (!ok) {
      std::snprintf(msg, sizeof(msg), "SpaceChargeBiGaussian: field '%s' = %.17g: %s", field, value, what);
      throw std::invalid_argument(msg);
    }
  };
  require(std::isfinite(e.length) && e.length >= 0.0, "length", "must be finite and >= 0 [m]", e.length);
  require(std::isfinite(e.number_of_particles) && e.number_of_particles >= 0.0, "number_of_particles",
          "must be finite and >= 0 (real particles in the bunch)", e.number_of_particles);
  require(std::isfinite(e.sigma_z) && e.sigma_z > 0.0, "sigma_z", "must be positive and finite [m]", e.sigma_z);
  require(std::isfinite(e.sigma_x) && e.sigma_x > 0.0, "sigma_x", "must be positive and finite [m]", e.sigma_x);
  require(std::isfinite(e.sigma_y) && e.sigma_y > 0.0, "sigma_y", "must be positive and finite [m]", e.sigma_y);
  require(std::isfinite(e.z0), "z0", "must be finite [m]", e.z0);
  require(std::isfinite(e.mean_x), "mean_x", "must be finite [m]", e.mean_x);
  require(std::isfinite(e.mean_y), "mean_y", "must be finite [m]", e.mean_y);
  require(std::isfinite(e.min_sigma_diff) && e.min_sigma_diff >= 0.0, "min_sigma_diff", "must be finite and >= 0 [m]",
          e.min_sigma_diff);
  if (!(ref.mass0 > 0.0) || !(ref.beta0 > 0.0) || !(ref.gamma0 >= 1.0)) {
    std::snprintf(msg, sizeof(msg),
                  "SpaceChargeBiGaussian: the reference particle needs mass0 > 0 and beta0 > 0 (got mass0 = %.17g eV, "
                  "beta0 = %.17g)",
                  ref.mass0, ref.beta0);
    throw std::invalid_argument(msg);
  }

  const double elementary_charge = 1.602176634e-19;  // C, exact (SI 2019)
  const double epsilon0 = 8.8541878128e-12;          // F/m, CODATA 2018
  const double pi = 3.14159265358979323846;
  const double r0 = elementary_charge / (4.0 * pi * epsilon0 * ref.mass0);  // m (mass0 in eV)
  const double b2g3 = ref.beta0 * ref.beta0 * ref.gamma0 * ref.gamma0 * ref.gamma0;
  e.kick_factor = 2.0 * r0 * ref.q0 * ref.q0 * e.number_of_particles * e.length /
                  (std::sqrt(2.0 * pi) * e.sigma_z * b2g3);
  e.half_inv_sz2 = 1.0 / (2.0 * e.sigma_z * e.sigma_z);

  const double sa = std::fmax(e.sigma_x, e.sigma_y);
  const double sb = std::fmin(e.sigma_x, e.sigma_y);
  const double diff = sa - sb;
  const bool round = diff < e.min_sigma_diff || diff <= 1e-8 * sa;
  e.mode = round ? 0 : (e.sigma_x > e.sigma_y ? 1 : 2);
  if (round) {
    const double sigma = 0.5 * (e.sigma_x + e.sigma_y);
    e.half_inv_a2 = 1.0 / (2.0 * sigma * sigma);
    e.half_inv_b2 = e.half_inv_a2;
    e.inv_s = 0.0;
    e.ratio_ba = 1.0;
    e.ratio_ab = 1.0;
    e.field_scale = 0.0;
    e.core_j10 = e.core_j01 = e.core_j20 = e.core_j11 = e.core_j02 = 0.0;
    return;
  }
  e.half_inv_a2 = 1.0 / (2.0 * sa * sa);
  e.half_inv_b2 = 1.0 / (2.0 * sb * sb);
  e.ratio_ba = sb / sa;
  e.ratio_ab = sa / sb;
  const double s = std::sqrt(2.0 * (sa - sb) * (sa + sb));
  e.inv_s = 1.0 / s;
  e.field_scale = std::sqrt(pi) / s;
  const double a = std::sqrt(2.0) * sa;
  const double b = std::sqrt(2.0) * sb;
  const double ab = a + b;
  e.core_j10 = 2.0 / (a * ab);
  e.core_j01 = 2.0 / (b * ab);
  e.core_j20 = 2.0 * (2.0 * a + b) / (3.0 * a * a * a * ab * ab);
  e.core_j11 = 2.0 / (a * b * ab * ab);
  e.core_j02 = 2.0 * (a + 2.0 * b) / (3.0 * b * b * b * ab * ab);
}
#endif

/// K(a, b) [1/m] of the unit-normalised Gaussian with sigma_a >= sigma_b (a along the larger size), for an
/// elliptic beam (mode 1 or 2).
FT_FUNCTION void SpaceChargeBiGaussian_elliptic_(const SpaceChargeBiGaussian& e, double a, double b, double& ka,
                                                 double& kb) {
  const double xa = fabs(a);
  const double yb = fabs(b);
  const double aa = xa * xa;
  const double bb = yb * yb;
  const double rho2 = aa * e.half_inv_a2 + bb * e.half_inv_b2;
  double k_a, k_b;
  if (rho2 < 1e-5) {
    k_a = xa * (e.core_j10 - aa * e.core_j20 - bb * e.core_j11);
    k_b = yb * (e.core_j01 - aa * e.core_j11 - bb * e.core_j02);
  } else {
    double w1r, w1i, w2r, w2i;
    ft_faddeeva_w(xa * e.inv_s, yb * e.inv_s, w1r, w1i);
    ft_faddeeva_w(xa * e.ratio_ba * e.inv_s, yb * e.ratio_ab * e.inv_s, w2r, w2i);
    const double g = ft_exp(-rho2);
    k_a = e.field_scale * (w1i - g * w2i);
    k_b = e.field_scale * (w1r - g * w2r);
  }
  // Odd in each coordinate: exactly zero on an axis, the sign restored elsewhere.
  ka = a == 0.0 ? 0.0 : (a < 0.0 ? -k_a : k_a);
  kb = b == 0.0 ? 0.0 : (b < 0.0 ? -k_b : k_b);
}

/// K(x, y) [1/m] relative to the bunch centre.
FT_FUNCTION void SpaceChargeBiGaussian_field(const SpaceChargeBiGaussian& e, double x, double y, double& kx,
                                             double& ky) {
  if (e.mode == 0) {
    const double u = (x * x + y * y) * e.half_inv_a2;
    double q;  // (1 - e^-u) / u
    if (u < 1e-3) {
      q = 1.0 - u * (1.0 / 2.0 - u * (1.0 / 6.0 - u * (1.0 / 24.0 - u * (1.0 / 120.0))));  // error < u^5 / 720
    } else if (u < 1.0) {
      q = 2.0 * ft_exp(-0.5 * u) * ft_sinh(0.5 * u) / u;
    } else {
      q = (1.0 - ft_exp(-u)) / u;
    }
    const double factor = e.half_inv_a2 * q;
    kx = x * factor;
    ky = y * factor;
  } else if (e.mode == 1) {
    SpaceChargeBiGaussian_elliptic_(e, x, y, kx, ky);
  } else {
    SpaceChargeBiGaussian_elliptic_(e, y, x, ky, kx);
  }
}

FT_FUNCTION void SpaceChargeBiGaussian_track(const SpaceChargeBiGaussian& e, ft::ParticleView& p) {
  const double dz = p.zeta - e.z0;
  const double strength = e.kick_factor * ft_exp(-(dz * dz) * e.half_inv_sz2);
  double kx, ky;
  SpaceChargeBiGaussian_field(e, p.x - e.mean_x, p.y - e.mean_y, kx, ky);
  p.px += strength * kx;
  p.py += strength * ky;
}

FT_ELEMENT_COORDINATES(SpaceChargeBiGaussian, FT_COORD_TRANSVERSE | FT_COORD_ZETA, FT_COORD_PX | FT_COORD_PY)
FT_REGISTER_ELEMENT(SpaceChargeBiGaussian, FT_SPACE_CHARGE_BIGAUSSIAN_FIELDS, FT_THIN | FT_LARGE_CODE, FT_WITH_PREPARE,
                    "Frozen space charge: kick of a Gaussian bunch scaled by its line density (Bassetti-Erskine; "
                    "Xsuite SpaceChargeBiGaussian)")
