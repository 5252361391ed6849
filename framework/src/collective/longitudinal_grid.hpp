// Grid helpers of the longitudinal model, shared by the RF bucket (longitudinal.cpp) and the
// matched bunches (matched_bunch.cpp); see fusetrack/longitudinal.h for the model.
#pragma once
#include <algorithm>
#include <vector>

#include "fusetrack/longitudinal.h"
#include "core/math_helpers.hpp"

namespace ft {
namespace longitudinal_grid {


inline std::vector<double> linspace(double a, double b, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = a + (b - a) * static_cast<double>(i) / static_cast<double>(n - 1);
  v.back() = b;
  return v;
}

/// Cumulative trapezoidal integral, starting at 0.
inline std::vector<double> cumtrapz(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> c(x.size(), 0.0);
  for (size_t i = 1; i < x.size(); ++i) c[i] = c[i - 1] + 0.5 * (y[i] + y[i - 1]) * (x[i] - x[i - 1]);
  return c;
}

/// Linear interpolation of y(x) at t (x increasing), clamped at the ends.
inline double interp(const std::vector<double>& x, const std::vector<double>& y, double t) {
  if (t <= x.front()) return y.front();
  if (t >= x.back()) return y.back();
  const size_t j = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), t) - x.begin());
  const double w = (t - x[j - 1]) / (x[j] - x[j - 1]);
  return y[j - 1] + (y[j] - y[j - 1]) * w;
}

inline double sign_of(double v) { return v < 0.0 ? -1.0 : 1.0; }

/// U(zeta) = sign(eta) integral Delta E / (beta0^2 E0) dzeta on a grid, zero at zeta_ref.
inline std::vector<double> potential_of(const RfBucket& b, const std::vector<double>& z, const std::vector<double>& de,
                                        double zeta_ref) {
  const double scale = sign_of(b.eta) / (b.beta0 * b.beta0 * b.energy0);
  std::vector<double> f(de.size());
  for (size_t i = 0; i < de.size(); ++i) f[i] = scale * de[i];
  std::vector<double> u = cumtrapz(z, f);
  const double u0 = interp(z, u, zeta_ref);
  for (double& v : u) v -= u0;
  return u;
}

}  // namespace longitudinal_grid
}  // namespace ft
