// Luminosity of one bunch crossing from slice moments (see fusetrack/beambeam.h).
#include "fusetrack/beambeam.h"

#include <cmath>
#include <stdexcept>

namespace ft {

double luminosity_per_crossing(const std::vector<Bb6dSlice>& bunch1, const std::vector<Bb6dSlice>& bunch2) {
  if (bunch1.empty() || bunch2.empty()) throw std::invalid_argument("luminosity: a bunch has no slices");
  for (std::size_t i = 0; i < bunch1.size(); ++i) bb6d_check_slice(bunch1[i], static_cast<int>(i));
  for (std::size_t j = 0; j < bunch2.size(); ++j) bb6d_check_slice(bunch2[j], static_cast<int>(j));
  const double two_pi = 2.0 * 3.14159265358979323846;
  double total = 0.0;
  for (const Bb6dSlice& a : bunch1) {
    for (const Bb6dSlice& b : bunch2) {
      const double s = 0.5 * (a.zeta - b.zeta);
      const auto cov = [s](const Bb6dSlice& v, double& s11, double& s33, double& s13) {
        s11 = v.sigma_11 + (2.0 * v.sigma_12 + v.sigma_22 * s) * s;
        s33 = v.sigma_33 + (2.0 * v.sigma_34 + v.sigma_44 * s) * s;
        s13 = v.sigma_13 + (v.sigma_14 + v.sigma_23 + v.sigma_24 * s) * s;
      };
      double a11, a33, a13, b11, b33, b13;
      cov(a, a11, a33, a13);
      cov(b, b11, b33, b13);
      const double sx = a11 + b11, sy = a33 + b33, sxy = a13 + b13;
      const double det = sx * sy - sxy * sxy;
      const double dx = (a.x + a.px * s) - (b.x + b.px * s);
      const double dy = (a.y + a.py * s) - (b.y + b.py * s);
      // d^T Sigma^-1 d of the summed (x, y) covariance (uncoupled: dx^2 / sx + dy^2 / sy)
      const double quad = sxy == 0.0 ? dx * dx / sx + dy * dy / sy : (sy * dx * dx - 2.0 * sxy * dx * dy + sx * dy * dy) / det;
      total += a.n_particles * b.n_particles * std::exp(-0.5 * quad) / (two_pi * std::sqrt(det));
    }
  }
  return total;
}

}  // namespace ft
