// Tunes and Twiss parameters from one-turn matrices: the uncoupled 2x2 blocks, the Edwards-Teng
// eigen-tunes of a coupled 4x4 block and the 6D eigen-tunes (see fusetrack/optics.h for the sources).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>

#include "analysis/optics/optics_internal.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft::optics_internal {

/// 2 cos mu of the longitudinal mode of a 6x6 symplectic matrix: the root, nearest the trace of
/// the zeta-pzeta block, of the reduced characteristic polynomial. For a symplectic M,
/// det(M - lambda) = lambda^6 + c1 lambda^5 + c2 lambda^4 + c3 lambda^3 + c2 lambda^2 + c1 lambda + 1
/// (c1 = -e1, c2 = e2, c3 = -e3 from Newton's identities on tr M^k), and lambda^-3 det(...) is
/// a cubic in u = lambda + 1/lambda = 2 cos mu: u^3 + c1 u^2 + (c2 - 3) u + c3 - 2 c1.
double longitudinal_two_cos(const Matrix6& m, double exclude_a, double exclude_b) {
  const Matrix6 m2 = multiply(m, m);
  const Matrix6 m3 = multiply(m2, m);
  const double t1 = trace(m), t2 = trace(m2), t3 = trace(m3);
  const double e1 = t1, e2 = (t1 * t1 - t2) / 2.0, e3 = (t1 * t1 * t1 - 3.0 * t1 * t2 + 2.0 * t3) / 6.0;
  const double c1 = -e1, c2 = e2, c3 = -e3;
  const double u0 = m[4][4] + m[5][5];
  auto p = [&](double u) { return ((u + c1) * u + (c2 - 3.0)) * u + (c3 - 2.0 * c1); };
  auto dp = [&](double u) { return (3.0 * u + 2.0 * c1) * u + (c2 - 3.0); };
  double u = u0;
  for (int it = 0; it < 60; ++it) {
    const double d = dp(u);
    if (d == 0.0 || !std::isfinite(d)) return u0;
    const double step = p(u) / d;
    u -= step;
    if (std::fabs(step) <= 1e-16 * std::max(1.0, std::fabs(u))) break;
  }
  // Keep the block trace if Newton wandered towards a transverse root.
  const double sep = std::min(std::fabs(u0 - exclude_a), std::fabs(u0 - exclude_b));
  if (!std::isfinite(u) || std::fabs(u - u0) > 0.25 * sep) return u0;
  return u;
}

namespace {

/// A non-zero solution of a v = 0 for a singular N x N complex matrix (rank N - 1): Gaussian
/// elimination with full pivoting, the last unknown (in pivot order) set to 1.
template <size_t N>
std::array<std::complex<double>, N> null_vector_of(std::array<std::array<std::complex<double>, N>, N> a) {
  std::array<size_t, N> col{};
  for (size_t k = 0; k < N; ++k) col[k] = k;
  for (size_t k = 0; k + 1 < N; ++k) {
    size_t pr = k, pc = k;
    for (size_t r = k; r < N; ++r)
      for (size_t c = k; c < N; ++c)
        if (std::abs(a[r][c]) > std::abs(a[pr][pc])) pr = r, pc = c;
    std::swap(a[k], a[pr]);
    for (auto& row : a) std::swap(row[k], row[pc]);
    std::swap(col[k], col[pc]);
    if (a[k][k] == 0.0) break;
    for (size_t r = k + 1; r < N; ++r) {
      const std::complex<double> f = a[r][k] / a[k][k];
      for (size_t c = k; c < N; ++c) a[r][c] -= f * a[k][c];
    }
  }
  std::array<std::complex<double>, N> y{};
  y[N - 1] = 1.0;
  for (size_t k = N - 1; k-- > 0;) {
    std::complex<double> sum = 0.0;
    for (size_t c = k + 1; c < N; ++c) sum += a[k][c] * y[c];
    y[k] = a[k][k] == 0.0 ? std::complex<double>(1.0) : -sum / a[k][k];
  }
  std::array<std::complex<double>, N> v{};
  for (size_t k = 0; k < N; ++k) v[col[k]] = y[k];
  return v;
}

/// The 6D eigen-tunes (qx, qy, qs) of a stable 6x6 symplectic one-turn matrix (eigenvalues
/// e^{+-i 2 pi Q}; Xsuite / MAD-X 6D twiss). The matrix is first scaled with the 4D Twiss
/// (x -> x / sqrt(beta_x), px -> px sqrt(beta_x), zeta, pzeta with beta_s), a symplectic
/// similarity that keeps the eigenvalues and brings the entries to ~1. For a symplectic M,
/// det(M - lambda) / lambda^3 is a cubic in u = lambda + 1/lambda = 2 cos 2 pi Q,
/// u^3 + c1 u^2 + (c2 - 3) u + c3 - 2 c1 (c_k from Newton's identities on tr M^k, see
/// longitudinal_two_cos). The longitudinal root is polished by Newton from the zeta-pzeta block's
/// trace, the two others are the roots of the deflated quadratic (then polished on the cubic);
/// the horizontal one is the root whose eigenvector has the larger share in (x, px). Q or 1 - Q
/// as the 4D tune (x, y) or in [0, 0.5] (s). NaN where a root is not in (-2, 2).
std::array<double, 3> six_d_eigen_tunes(const Matrix6& m, double beta_x, double beta_y, double beta_s, double qx4,
                                        double qy4) {
  const double scale[6] = {std::sqrt(beta_x),       1.0 / std::sqrt(beta_x),      std::sqrt(beta_y),
                           1.0 / std::sqrt(beta_y), std::sqrt(std::fabs(beta_s)), 1.0 / std::sqrt(std::fabs(beta_s))};
  Matrix6 a{};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) a[i][j] = m[i][j] * scale[j] / scale[i];
  const Matrix6 a2 = multiply(a, a);
  const Matrix6 a3 = multiply(a2, a);
  const double t1 = trace(a), t2 = trace(a2), t3 = trace(a3);
  const double e1 = t1, e2 = (t1 * t1 - t2) / 2.0, e3 = (t1 * t1 * t1 - 3.0 * t1 * t2 + 2.0 * t3) / 6.0;
  const double c2u = -e1, c1u = e2 - 3.0, c0u = -e3 + 2.0 * e1;  // u^3 + c2u u^2 + c1u u + c0u
  auto p = [&](double u) { return ((u + c2u) * u + c1u) * u + c0u; };
  auto dp = [&](double u) { return (3.0 * u + 2.0 * c2u) * u + c1u; };
  auto polish = [&](double u) {
    for (int it = 0; it < 50; ++it) {
      const double d = dp(u);
      if (d == 0.0 || !std::isfinite(d)) break;
      const double step = p(u) / d;
      u -= step;
      if (std::fabs(step) <= 1e-16 * std::max(1.0, std::fabs(u))) break;
    }
    return u;
  };
  std::array<double, 3> q = {kNaN, kNaN, kNaN};
  const double us = polish(a[4][4] + a[5][5]);
  // Deflation: (u - us)(u^2 + b u + c).
  const double b = c2u + us, c = c1u + us * b;
  const double disc = b * b - 4.0 * c;
  if (!std::isfinite(us) || !(disc >= 0.0)) return q;
  const double big = -0.5 * (b + std::copysign(std::sqrt(disc), b));
  double r1 = big, r2 = big != 0.0 ? c / big : 0.0;
  r1 = polish(r1);
  r2 = polish(r2);
  // x share of each root's eigenvector.
  auto x_share = [&](double u) {
    const double cs = 0.5 * u;
    if (!(std::fabs(cs) < 1.0)) return kNaN;
    const std::complex<double> lambda(cs, std::sqrt(1.0 - cs * cs));
    std::array<std::array<std::complex<double>, 6>, 6> sys{};
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 6; ++j) sys[i][j] = a[i][j] - (i == j ? lambda : std::complex<double>(0.0));
    const auto v = null_vector_of<6>(sys);
    const double sx = std::norm(v[0]) + std::norm(v[1]), sy = std::norm(v[2]) + std::norm(v[3]);
    return sx / (sx + sy);
  };
  if (x_share(r2) > x_share(r1)) std::swap(r1, r2);
  auto tune = [](double u, double q4) {
    const double cs = 0.5 * u;
    if (!(std::fabs(cs) < 1.0)) return kNaN;
    const double t = std::acos(cs) / (2.0 * kPi);  // [0, 0.5]
    return q4 > 0.5 ? 1.0 - t : t;
  };
  q[0] = tune(r1, qx4);
  q[1] = tune(r2, qy4);
  q[2] = tune(us, 0.0);
  return q;
}

}  // namespace

/// The 6D eigen-tunes, exact where planes decouple: the planes x, y, s are grouped by the non-zero
/// 2x2 blocks that join them (central differences of an uncoupled plane give exact zeros); a plane
/// alone has the tune of its 2x2 block (twiss_from_block), two joined planes the Edwards-Teng
/// eigen-tunes of their 4x4 block (transverse_tunes; a double root, Qx = Qy, is exact there and
/// not in the cubic, whose roots would then carry sqrt(rounding) ~ 1e-7), all three the cubic of
/// six_d_eigen_tunes.
std::array<double, 3> six_d_tunes(const Matrix6& m, double beta_x, double beta_y, double beta_s, double qx4,
                                  double qy4) {
  auto joined = [&](size_t p, size_t q) {
    for (size_t i = 0; i < 2; ++i)
      for (size_t k = 0; k < 2; ++k)
        if (m[2 * p + i][2 * q + k] != 0.0 || m[2 * q + i][2 * p + k] != 0.0) return true;
    return false;
  };
  const bool xy = joined(0, 1), xs = joined(0, 2), ys = joined(1, 2);
  const int links = static_cast<int>(xy) + static_cast<int>(xs) + static_cast<int>(ys);
  if (links >= 2) return six_d_eigen_tunes(m, beta_x, beta_y, beta_s, qx4, qy4);
  std::array<double, 3> q = {kNaN, kNaN, kNaN};
  auto single = [&](size_t p) {
    const PlaneTwiss t =
        twiss_from_block(m[2 * p][2 * p], m[2 * p][2 * p + 1], m[2 * p + 1][2 * p], m[2 * p + 1][2 * p + 1]);
    return t.stable ? t.tune : kNaN;
  };
  auto pair = [&](size_t p, size_t r) {
    Matrix6 sub{};
    const size_t idx[4] = {2 * p, 2 * p + 1, 2 * r, 2 * r + 1};
    for (size_t i = 0; i < 4; ++i)
      for (size_t k = 0; k < 4; ++k) sub[i][k] = m[idx[i]][idx[k]];
    try {
      return transverse_tunes(sub);
    } catch (const Error&) {
      return std::array<double, 2>{kNaN, kNaN};
    }
  };
  if (links == 0) {
    q = {single(0), single(1), single(2)};
  } else if (xy) {
    const auto t = pair(0, 1);
    q = {t[0], t[1], single(2)};
  } else if (xs) {
    const auto t = pair(0, 2);
    q = {t[0], single(1), t[1]};
  } else {
    const auto t = pair(1, 2);
    q = {single(0), t[0], t[1]};
  }
  if (std::isfinite(q[2])) q[2] = std::min(q[2], 1.0 - q[2]);
  return q;
}

namespace {

/// det(lambda - A) = lambda^4 + c[0] lambda^3 + c[1] lambda^2 + c[2] lambda + c[3] of a 4x4 matrix
/// (Faddeev-LeVerrier: N_k = A N_{k-1} + c_{k-1} I, c_k = -tr(A N_k) / k).
std::array<double, 4> characteristic_polynomial(const std::array<std::array<double, 4>, 4>& a) {
  std::array<std::array<double, 4>, 4> n{};
  std::array<double, 4> c{};
  double previous = 1.0;
  for (size_t k = 0; k < 4; ++k) {
    std::array<std::array<double, 4>, 4> next{};
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 4; ++j) {
        double s = i == j ? previous : 0.0;
        for (size_t l = 0; l < 4; ++l) s += a[i][l] * n[l][j];
        next[i][j] = s;
      }
    n = next;
    double tr = 0.0;
    for (size_t i = 0; i < 4; ++i)
      for (size_t l = 0; l < 4; ++l) tr += a[i][l] * n[l][i];
    c[k] = -tr / static_cast<double>(k + 1);
    previous = c[k];
  }
  return c;
}

}  // namespace

// The Edwards-Teng formula assumes a symplectic block. The 4D map (delta frozen) is not exactly
// symplectic when a transverse kick depends on zeta (crab cavities: their energy kick is frozen while
// zeta still follows the transverse path length), and its eigenvalues then differ from the
// Edwards-Teng roots (HL-LHC at collision: 9e-8 in Qx, where tracking follows the eigenvalues to
// 1e-10). Newton on det(lambda - M) from the Edwards-Teng root finds the eigenvalue; the step is kept
// only when it stays within 1e-3 of the distance to the other roots (near a double root, equal mode
// tunes, the polynomial's roots are ill-conditioned and the Edwards-Teng one is the better). An
// uncoupled block keeps its exact 2x2 roots.
std::complex<double> mode_eigenvalue(const std::array<std::array<double, 4>, 4>& m, double u_self, double u_other) {
  using Complex = std::complex<double>;
  const double c_self = 0.5 * u_self, c_other = 0.5 * u_other;
  const Complex start(c_self, std::sqrt(1.0 - c_self * c_self));
  bool coupled = false;
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k) coupled |= (i < 2) != (k < 2) && m[i][k] != 0.0;
  if (!coupled || !(std::fabs(c_other) < 1.0)) return start;
  const Complex other(c_other, std::sqrt(1.0 - c_other * c_other));
  const double separation = std::min({std::abs(start - other), std::abs(start - std::conj(other)), 2.0 * start.imag()});
  const std::array<double, 4> c = characteristic_polynomial(m);
  Complex lambda = start;
  for (int it = 0; it < 20; ++it) {
    const Complex p = (((lambda + c[0]) * lambda + c[1]) * lambda + c[2]) * lambda + c[3];
    const Complex dp = ((4.0 * lambda + 3.0 * c[0]) * lambda + 2.0 * c[1]) * lambda + c[2];
    const Complex step = p / dp;
    lambda -= step;
    if (!(std::abs(step) > 1e-16)) break;
  }
  if (!std::isfinite(lambda.real()) || !std::isfinite(lambda.imag()) ||
      !(std::abs(lambda - start) <= 1e-3 * separation))
    return start;
  return lambda;
}

}  // namespace ft::optics_internal

namespace ft {

std::array<double, 3> eigen_tunes_6d(const Matrix6& m, double qx_hint, double qy_hint) {
  double beta[3];
  for (size_t p = 0; p < 3; ++p) {
    const PlaneTwiss t =
        twiss_from_block(m[2 * p][2 * p], m[2 * p][2 * p + 1], m[2 * p + 1][2 * p], m[2 * p + 1][2 * p + 1]);
    beta[p] = t.stable && t.beta > 0.0 ? t.beta : 1.0;
  }
  return optics_internal::six_d_tunes(m, beta[0], beta[1], beta[2], qx_hint, qy_hint);
}

PlaneTwiss twiss_from_block(double m11, double m12, double m21, double m22) {
  PlaneTwiss t;
  const double cos_mu = 0.5 * (m11 + m22);
  if (!(std::fabs(cos_mu) < 1.0)) {
    t.tune = t.beta = t.alpha = t.gamma = optics_internal::kNaN;
    return t;
  }
  const double sin_mu = std::copysign(std::sqrt(1.0 - cos_mu * cos_mu), m12);
  double q = std::atan2(sin_mu, cos_mu) / (2.0 * kPi);
  if (q < 0.0) q += 1.0;
  t.stable = true;
  t.tune = q;
  t.beta = m12 / sin_mu;
  t.alpha = (m11 - m22) / (2.0 * sin_mu);
  t.gamma = -m21 / sin_mu;
  return t;
}

std::array<double, 2> transverse_tunes(const Matrix6& m) {
  // Edwards-Teng: with M = [[A, B], [C, D]] (2x2 blocks of x and y),
  //   (u1 - u2)^2 = (trA - trD)^2 + 4 det(B + adj C),  u1 + u2 = trA + trD,  u = 2 cos mu.
  const double tra = m[0][0] + m[1][1], trd = m[2][2] + m[3][3];
  // adj C = [[c22, -c12], [-c21, c11]] with C = [[m20, m21], [m30, m31]]
  const double b00 = m[0][2] + m[3][1], b01 = m[0][3] - m[2][1];
  const double b10 = m[1][2] - m[3][0], b11 = m[1][3] + m[2][0];
  const double det = b00 * b11 - b01 * b10;
  const double half_diff = 0.5 * (tra - trd);
  const double disc = half_diff * half_diff + det;
  if (!(disc >= 0.0))
    throw Error(
        fmt::format("optics: the transverse motion is unstable (coupling resonance: Edwards-Teng "
                    "discriminant {:.3g} < 0)",
                    disc));
  const double root = std::copysign(std::sqrt(disc), half_diff == 0.0 ? 1.0 : half_diff);
  const double u1 = 0.5 * (tra + trd) + root;  // closer to trA
  const double u2 = 0.5 * (tra + trd) - root;
  std::array<double, 2> q{};
  const double signs[2] = {m[0][1], m[2][3]};
  const double us[2] = {u1, u2};
  std::array<std::array<double, 4>, 4> m4{};
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k) m4[i][k] = m[i][k];
  for (int p = 0; p < 2; ++p) {
    const double c = 0.5 * us[p];
    if (!(std::fabs(c) < 1.0))
      throw Error(
          fmt::format("optics: the {} motion is unstable: cos mu = {:.12g}", p == 0 ? "horizontal" : "vertical", c));
    // The eigenvalue e^{+-i mu} (Im >= 0 here); Q or 1 - Q from the sign of m12 / m34 (MAD-X).
    const std::complex<double> lambda = optics_internal::mode_eigenvalue(m4, us[p], us[1 - p]);
    const double s = std::copysign(std::fabs(lambda.imag()), signs[p]);
    double t = std::atan2(s, lambda.real()) / (2.0 * kPi);
    if (t < 0.0) t += 1.0;
    q[static_cast<size_t>(p)] = t;
  }
  return q;
}

}  // namespace ft
