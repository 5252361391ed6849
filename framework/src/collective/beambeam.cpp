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
      const double sx =
          a.sigma_11 + (2.0 * a.sigma_12 + a.sigma_22 * s) * s + b.sigma_11 + (2.0 * b.sigma_12 + b.sigma_22 * s) * s;
      const double sy =
          a.sigma_33 + (2.0 * a.sigma_34 + a.sigma_44 * s) * s + b.sigma_33 + (2.0 * b.sigma_34 + b.sigma_44 * s) * s;
      const double dx = (a.x + a.px * s) - (b.x + b.px * s);
      const double dy = (a.y + a.py * s) - (b.y + b.py * s);
      total += a.n_particles * b.n_particles * std::exp(-0.5 * (dx * dx / sx + dy * dy / sy)) /
               (two_pi * std::sqrt(sx * sy));
    }
  }
  return total;
}

}  // namespace ft
