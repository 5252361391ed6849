// Small dense linear algebra of the optics (optics_internal.hpp).
#include <algorithm>
#include <cmath>

#include "analysis/optics/optics_internal.hpp"

namespace ft::optics_internal {

/// Solves a x = b in place by Gaussian elimination with partial pivoting; false if singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double>& b) {
  const size_t n = b.size();
  double scale = 0.0;
  for (const auto& row : a)
    for (double v : row) scale = std::max(scale, std::fabs(v));
  if (!(scale > 0.0)) return false;
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (!(std::fabs(a[p][c]) > 1e-14 * scale)) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      if (f == 0.0) continue;
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    double s = b[c];
    for (size_t k = c + 1; k < n; ++k) s -= a[c][k] * b[k];
    b[c] = s / a[c][c];
  }
  return true;
}

Matrix6 multiply(const Matrix6& a, const Matrix6& b) {
  Matrix6 c{};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double s = 0.0;
      for (int k = 0; k < 6; ++k) s += a[i][k] * b[k][j];
      c[i][j] = s;
    }
  return c;
}

double trace(const Matrix6& a) {
  double s = 0.0;
  for (int i = 0; i < 6; ++i) s += a[i][i];
  return s;
}

}  // namespace ft::optics_internal
