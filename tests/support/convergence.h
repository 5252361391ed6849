// Convergence order of an integrator: the distance of a tracked particle from a
// converged reference at step counts that double, and the check that each
// doubling divides the error by 2^order (a method of order k has a global error
// ~ h^k).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <vector>

#include "fusetrack/device/particle.h"

namespace ft_test {

/// Sum of the absolute differences of the transverse coordinates and zeta.
inline double distance(const ft::ParticleView& a, const ft::ParticleView& b) {
  return std::fabs(a.x - b.x) + std::fabs(a.px - b.px) + std::fabs(a.y - b.y) + std::fabs(a.py - b.py) +
         std::fabs(a.zeta - b.zeta);
}

/// distance(track(n), reference) for each step count n; track(n) returns the
/// particle tracked with n steps.
template <class Track>
std::vector<double> errors_at(std::initializer_list<int> step_counts, const ft::ParticleView& reference, Track track) {
  std::vector<double> errors;
  for (const int n : step_counts) errors.push_back(distance(track(n), reference));
  return errors;
}

/// Each doubling of the step count divides the error by 2^order, within a
/// relative tolerance.
inline void check_convergence_order(const std::vector<double>& errors, int order, double tolerance = 0.25) {
  const double expected = std::pow(2.0, order);
  for (size_t i = 0; i + 1 < errors.size(); ++i) {
    CAPTURE(errors[i]);
    CAPTURE(errors[i + 1]);
    CHECK(errors[i] / errors[i + 1] > (1.0 - tolerance) * expected);
    CHECK(errors[i] / errors[i + 1] < (1.0 + tolerance) * expected);
  }
}

}  // namespace ft_test
