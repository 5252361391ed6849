// Helpers for the element unit tests: particles, ptau <-> delta, finite-difference Jacobians
// in canonical coordinates (x, px, y, py, zeta, pzeta = ptau / beta0) and the symplectic check.
// Host-only test code; the formulas here are written independently of particle.h.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "fusetrack/device/particle.h"
#include "fusetrack/plugin_abi.h"

namespace ft_test {

using Vec6 = std::array<double, 6>;
using Mat6 = std::array<std::array<double, 6>, 6>;

/// ptau = (E - E0) / (P0 c) from delta = (P - P0) / P0:
///   ptau = sqrt((1 + delta)^2 + 1/beta0^2 - 1) - 1/beta0, written without cancellation.
inline double ptau_from_delta(double delta, double beta0) {
  const double e_over_p0c = std::sqrt((1.0 + delta) * (1.0 + delta) + 1.0 / (beta0 * beta0) - 1.0);
  return delta * (2.0 + delta) / (e_over_p0c + 1.0 / beta0);
}

/// delta from ptau: 1 + delta = sqrt(ptau^2 + 2 ptau / beta0 + 1), written without cancellation.
inline double delta_from_ptau(double ptau, double beta0) {
  const double s = ptau * ptau + 2.0 * ptau / beta0;
  return s / (std::sqrt(s + 1.0) + 1.0);
}

/// beta / beta0 = (1 + delta) / (1 + beta0 ptau).
inline double rvv_from(double delta, double ptau, double beta0) { return (1.0 + delta) / (1.0 + beta0 * ptau); }

/// A live particle with all of delta, ptau, rpp, rvv set from delta by the formulas above.
inline ft::ParticleView particle(double x, double px, double y, double py, double zeta, double delta,
                                 double beta0) {
  const double ptau = ptau_from_delta(delta, beta0);
  ft::ParticleView p{x, px, y, py, zeta, delta, ptau, 1.0 / (1.0 + delta), rvv_from(delta, ptau, beta0),
                     beta0, ft::kAlive};
  return p;
}

/// The same particle, from canonical coordinates (x, px, y, py, zeta, pzeta).
inline ft::ParticleView from_canonical(const Vec6& z, double beta0) {
  const double ptau = z[5] * beta0;
  const double delta = delta_from_ptau(ptau, beta0);
  ft::ParticleView p{z[0], z[1], z[2], z[3], z[4], delta, ptau, 1.0 / (1.0 + delta), rvv_from(delta, ptau, beta0),
                     beta0, ft::kAlive};
  return p;
}

inline Vec6 canonical(const ft::ParticleView& p) { return {p.x, p.px, p.y, p.py, p.zeta, p.ptau / p.beta0}; }

/// Tracks a copy of p through one element.
template <class E, class Track>
ft::ParticleView tracked(const E& e, Track track, ft::ParticleView p) {
  track(e, p);
  return p;
}

/// Finite-difference Jacobian M_ij = d out_i / d in_j of the element map in canonical
/// coordinates around z0: fourth-order central differences
///   f'(z) ~ [f(z - 2h) - 8 f(z - h) + 8 f(z + h) - f(z + 2h)] / (12 h),  h_j = step * max(1, |z0_j|).
/// Why not a two-point difference with h ~ 1e-7: a particle state is (delta, rpp, rvv) in double,
/// so 1 + delta and rvv carry an absolute rounding of ~1e-16, which a length-L map turns into
/// ~1e-16 L in zeta; divided by 2h = 2e-7 that is ~1e-9 L of noise in d zeta / d pzeta, the size
/// of the symplectic tolerance. With h = 1e-5 the noise is ~1e-11 and the truncation error
/// (h^4 / 30) f^(5) is far below it for these smooth maps.
template <class E, class Track>
Mat6 jacobian(const E& e, Track track, const Vec6& z0, double beta0, double step = 1e-5) {
  Mat6 m{};
  for (int j = 0; j < 6; ++j) {
    const double h = step * std::fmax(1.0, std::fabs(z0[j]));
    Vec6 f[4];
    const double offsets[4] = {-2.0, -1.0, 1.0, 2.0};
    for (int k = 0; k < 4; ++k) {
      Vec6 z = z0;
      z[j] += offsets[k] * h;
      f[k] = canonical(tracked(e, track, from_canonical(z, beta0)));
    }
    for (int i = 0; i < 6; ++i) m[i][j] = (f[0][i] - 8.0 * f[1][i] + 8.0 * f[2][i] - f[3][i]) / (12.0 * h);
  }
  return m;
}

/// max_ij |(M^T J M - J)_ij| with J the symplectic form of (x, px), (y, py), (zeta, pzeta).
inline double symplecticity_error(const Mat6& m) {
  double jm[6][6];  // J M
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 6; ++j) {
      jm[2 * k][j] = m[2 * k + 1][j];
      jm[2 * k + 1][j] = -m[2 * k][j];
    }
  }
  double err = 0.0;
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      double s = 0.0;
      for (int k = 0; k < 6; ++k) s += m[k][i] * jm[k][j];
      const double jij = (i % 2 == 0 && j == i + 1) ? 1.0 : ((i % 2 == 1 && j == i - 1) ? -1.0 : 0.0);
      err = std::fmax(err, std::fabs(s - jij));
    }
  }
  return err;
}

/// Tolerance of the symplectic check (max abs entry of M^T J M - J).
constexpr double kSymplecticTolerance = 1e-9;

/// |a - b| <= rel * max(|a|, |b|) + abs_tol.
inline bool close(double a, double b, double rel, double abs_tol = 0.0) {
  return std::fabs(a - b) <= rel * std::fmax(std::fabs(a), std::fabs(b)) + abs_tol;
}

/// Reference betas used across the element tests.
constexpr double kBetaUltraRelativistic = 0.9999999;  // ~ 2 TeV protons
constexpr double kBetaHalf = 0.5;                     // ~ 145 MeV kinetic-energy protons

/// Test particles: on- and off-momentum (|delta| ~ 1e-3), ultra-relativistic and beta0 = 0.5.
struct Case {
  double x, px, y, py, zeta, delta, beta0;
};
inline std::array<Case, 5> cases() {
  return {{
      {1.0e-3, 2.0e-4, -5.0e-4, 1.0e-4, 1.0e-2, 0.0, kBetaUltraRelativistic},
      {-2.0e-3, -3.0e-4, 1.5e-3, -2.0e-4, -3.0e-2, 1.0e-3, kBetaUltraRelativistic},
      {1.2e-3, -1.0e-4, 8.0e-4, 3.0e-4, 5.0e-2, -1.5e-3, kBetaHalf},
      {-7.0e-4, 4.0e-4, -1.1e-3, -2.5e-4, -2.0e-2, 1.0e-3, kBetaHalf},
      {3.0e-3, 1.0e-3, 2.0e-3, -1.0e-3, 0.0, 0.0, kBetaHalf},
  }};
}
inline ft::ParticleView particle(const Case& c) { return particle(c.x, c.px, c.y, c.py, c.zeta, c.delta, c.beta0); }
inline Vec6 canonical(const Case& c) { return canonical(particle(c)); }

/// An element struct with every input field that has a default set from the descriptor's field
/// table (as a lattice loader would do); required and derived fields are left zero.
template <class E>
E with_defaults(const ft_element_type_desc& d) {
  E e{};
  for (uint32_t i = 0; i < d.field_count; ++i) {
    const ft_field_desc& f = d.fields[i];
    if (!f.has_default || f.flags != FT_FIELD_INPUT) continue;
    char* base = reinterpret_cast<char*>(&e) + f.offset;
    for (uint32_t k = 0; k < f.count; ++k) {
      if (f.type == FT_FIELD_DOUBLE) {
        const double v = f.default_value;
        std::memcpy(base + k * sizeof(double), &v, sizeof(v));
      } else {
        const int32_t v = static_cast<int32_t>(f.default_value);
        std::memcpy(base + k * sizeof(int32_t), &v, sizeof(v));
      }
    }
  }
  return e;
}

/// The field named `name` in a descriptor, or nullptr.
inline const ft_field_desc* find_field(const ft_element_type_desc& d, const char* name) {
  for (uint32_t i = 0; i < d.field_count; ++i)
    if (std::strcmp(d.fields[i].name, name) == 0) return &d.fields[i];
  return nullptr;
}

/// A reference particle description for prepare().
inline ft_reference reference_proton(double beta0, double circumference = 0.0) {
  const double mass0 = 938.27208816e6;
  const double gamma0 = 1.0 / std::sqrt(1.0 - beta0 * beta0);
  ft_reference r{};
  r.mass0 = mass0;
  r.q0 = 1.0;
  r.beta0 = beta0;
  r.gamma0 = gamma0;
  r.energy0 = gamma0 * mass0;
  r.p0c = beta0 * gamma0 * mass0;
  r.circumference = circumference;
  return r;
}

}  // namespace ft_test
