// The coupled linear normal form of a 4x4 transverse one-turn matrix: Edwards-Teng eigen-tunes and the
// symplectically normalized eigenvectors of the two modes (see fusetrack/optics.h for the sources).
#include "analysis/optics/coupled_normal_form.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/optics/optics_internal.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"

namespace ft::optics_internal {

namespace {

/// 2 cos mu of the two eigenmodes of a 4x4 symplectic (x, px, y, py) block (Edwards-Teng; see
/// transverse_tunes), mode 1 the one closer to the x block. Throws on a coupling resonance.
std::array<double, 2> edwards_teng_two_cos(const std::array<std::array<double, 4>, 4>& m) {
  const double tra = m[0][0] + m[1][1], trd = m[2][2] + m[3][3];
  const double b00 = m[0][2] + m[3][1], b01 = m[0][3] - m[2][1];
  const double b10 = m[1][2] - m[3][0], b11 = m[1][3] + m[2][0];
  const double half_diff = 0.5 * (tra - trd);
  const double disc = half_diff * half_diff + (b00 * b11 - b01 * b10);
  if (!(disc >= 0.0))
    throw Error(
        fmt::format("optics along the ring: the transverse motion is unstable (coupling resonance: "
                    "Edwards-Teng discriminant {:.3g} < 0)",
                    disc));
  const double root = std::copysign(std::sqrt(disc), half_diff == 0.0 ? 1.0 : half_diff);
  return {0.5 * (tra + trd) + root, 0.5 * (tra + trd) - root};
}

/// A non-zero solution of a v = 0 for a singular 4x4 complex matrix (rank 3): Gaussian
/// elimination with full pivoting, the last unknown (in pivot order) set to 1.
CVector4 null_vector(std::array<CVector4, 4> a) {
  std::array<int, 4> col = {0, 1, 2, 3};
  for (int k = 0; k < 3; ++k) {
    int pr = k, pc = k;
    for (int r = k; r < 4; ++r)
      for (int c = k; c < 4; ++c)
        if (std::abs(a[static_cast<size_t>(r)][static_cast<size_t>(c)]) >
            std::abs(a[static_cast<size_t>(pr)][static_cast<size_t>(pc)])) {
          pr = r;
          pc = c;
        }
    std::swap(a[static_cast<size_t>(k)], a[static_cast<size_t>(pr)]);
    for (auto& row : a) std::swap(row[static_cast<size_t>(k)], row[static_cast<size_t>(pc)]);
    std::swap(col[static_cast<size_t>(k)], col[static_cast<size_t>(pc)]);
    const Complex pivot = a[static_cast<size_t>(k)][static_cast<size_t>(k)];
    if (pivot == 0.0) throw Error("optics along the ring: the one-turn matrix has a degenerate eigenvalue");
    for (int r = k + 1; r < 4; ++r) {
      const Complex f = a[static_cast<size_t>(r)][static_cast<size_t>(k)] / pivot;
      for (int c = k; c < 4; ++c)
        a[static_cast<size_t>(r)][static_cast<size_t>(c)] -= f * a[static_cast<size_t>(k)][static_cast<size_t>(c)];
    }
  }
  CVector4 y{};
  y[3] = 1.0;
  for (int k = 2; k >= 0; --k) {
    Complex sum = 0.0;
    for (int c = k + 1; c < 4; ++c)
      sum += a[static_cast<size_t>(k)][static_cast<size_t>(c)] * y[static_cast<size_t>(c)];
    y[static_cast<size_t>(k)] = -sum / a[static_cast<size_t>(k)][static_cast<size_t>(k)];
  }
  CVector4 v{};
  for (int k = 0; k < 4; ++k) v[static_cast<size_t>(col[static_cast<size_t>(k)])] = y[static_cast<size_t>(k)];
  return v;
}

/// The x plane's part of v^H S v = i (v^H S v = 2i Im(conj(v_x) v_px) + 2i Im(conj(v_y) v_py)).
double x_share(const CVector4& v) { return 2.0 * (std::conj(v[0]) * v[1]).imag(); }

/// Largest |(M^T S M - S)_ik| of a 4x4 matrix (0 for a symplectic one).
double symplecticity_error(const std::array<std::array<double, 4>, 4>& m) {
  const double s[4][4] = {{0, 1, 0, 0}, {-1, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, -1, 0}};
  double e = 0.0;
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k) {
      double sum = -s[i][k];
      for (size_t a = 0; a < 4; ++a)
        for (size_t b = 0; b < 4; ++b) sum += m[a][i] * s[a][b] * m[b][k];
      e = std::max(e, std::fabs(sum));
    }
  return e;
}

/// The two modes are separable when their normalized eigenvectors (v^H S v = i) are independent in
/// the symplectic form: |v1^H S v2| and |v1^T S v2| are 0 for a symplectic matrix with distinct
/// eigenvalues, and ~|v1^T E v2| / |lambda1 lambda2 - 1| for a matrix E = M^T S M - S off symplectic
/// (the 4D map with crab cavities: 5e-4 for HL-LHC at collision, mode tunes 0.01 apart), while two
/// eigenvectors of one degenerate eigenvalue (a coupling resonance with equal mode tunes) overlap by
/// ~1. Above 0.1 the modes are refused.
void check_separable(const std::array<std::array<double, 4>, 4>& m, const std::array<CVector4, 2>& modes) {
  CVector4 conj1 = modes[0];
  for (auto& z : conj1) z = std::conj(z);
  const double overlap =
      std::max(std::abs(symplectic_product(modes[0], modes[1])), std::abs(symplectic_product(conj1, modes[1])));
  if (overlap < 0.1) return;
  throw Error(
      fmt::format("optics along the ring: the two transverse eigenmodes are not separable: their "
                  "normalized eigenvectors overlap by {:.3g} in the symplectic form (the ring is on a "
                  "coupling resonance, equal mode tunes; the one-turn matrix is off symplectic by {:.3g})",
                  overlap, symplecticity_error(m)));
}

}  // namespace

Complex symplectic_product(const CVector4& u, const CVector4& w) {
  return std::conj(u[0]) * w[1] - std::conj(u[1]) * w[0] + std::conj(u[2]) * w[3] - std::conj(u[3]) * w[2];
}

TransverseModes transverse_eigenvectors(const std::array<std::array<double, 4>, 4>& m) {
  double coupling = 0.0;
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k)
      if ((i < 2) != (k < 2)) coupling = std::max(coupling, std::fabs(m[i][k]));
  std::array<CVector4, 2> modes{};
  std::array<Complex, 2> eigenvalues{};
  if (coupling == 0.0) {
    // Uncoupled (also with equal tunes): the classic Twiss parameters of each 2x2 block.
    for (int p = 0; p < 2; ++p) {
      const size_t o = static_cast<size_t>(2 * p);
      const PlaneTwiss t = twiss_from_block(m[o][o], m[o][o + 1], m[o + 1][o], m[o + 1][o + 1]);
      if (!t.stable)
        throw Error(
            fmt::format("optics along the ring: the {} motion is unstable", p == 0 ? "horizontal" : "vertical"));
      const double sb = std::sqrt(t.beta);
      CVector4 v{};
      v[o] = sb / std::sqrt(2.0);
      v[o + 1] = Complex(-t.alpha, 1.0) / (sb * std::sqrt(2.0));
      modes[static_cast<size_t>(p)] = v;
      eigenvalues[static_cast<size_t>(p)] = std::polar(1.0, 2.0 * kPi * t.tune);
    }
    return {modes, eigenvalues};
  }
  const std::array<double, 2> u = edwards_teng_two_cos(m);
  for (int p = 0; p < 2; ++p) {
    const double c = 0.5 * u[static_cast<size_t>(p)];
    if (!(std::fabs(c) < 1.0))
      throw Error(fmt::format("optics along the ring: eigenmode {} is unstable (cos mu = {:.12g})", p + 1, c));
    // The eigenvalue (Edwards-Teng, polished when the block is not exactly symplectic) and the null
    // vector of m - lambda.
    const Complex lambda = mode_eigenvalue(m, u[static_cast<size_t>(p)], u[static_cast<size_t>(1 - p)]);
    std::array<CVector4, 4> a{};
    for (size_t i = 0; i < 4; ++i)
      for (size_t k = 0; k < 4; ++k) a[i][k] = m[i][k] - (i == k ? lambda : Complex(0.0));
    CVector4 v = null_vector(a);
    double w = symplectic_product(v, v).imag();
    Complex eigenvalue = lambda;
    if (w < 0.0) {
      for (auto& z : v) z = std::conj(z);
      eigenvalue = std::conj(lambda);
      w = -w;
    }
    if (!(w > 0.0) || !std::isfinite(w))
      throw Error("optics along the ring: an eigenvector of the one-turn matrix has no symplectic norm");
    for (auto& z : v) z /= std::sqrt(w);
    modes[static_cast<size_t>(p)] = v;
    eigenvalues[static_cast<size_t>(p)] = eigenvalue;
  }
  if (x_share(modes[1]) > x_share(modes[0])) {
    std::swap(modes[0], modes[1]);
    std::swap(eigenvalues[0], eigenvalues[1]);
  }
  check_separable(m, modes);
  return {modes, eigenvalues};
}

}  // namespace ft::optics_internal
