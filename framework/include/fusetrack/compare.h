// Bitwise and ULP comparison of two particle sets (CPU vs GPU reproduction).
#pragma once
#include <cstdint>
#include <string>

#include "fusetrack/particles.h"

namespace ft {

struct ParticleComparison {
  size_t coordinates = 0;      // compared coordinates: 6 per particle (x, px, y, py, zeta, delta)
  size_t bitwise_equal = 0;    // equal bit patterns, or NaN on both sides (see nan_pairs)
  size_t nan_pairs = 0;        // of those: NaN on both sides with different bits. The NaN an invalid
                               // operation returns is not portable (x86: sign bit set; CUDA: clear),
                               // so a particle that went NaN on both sides counts as reproduced.
  size_t state_mismatches = 0; // particles whose state, lost turn or lost element differ
  uint64_t max_ulp = 0;        // over coordinates of particles alive on both sides
  double max_relative = 0.0;   // |a - b| / max(|a|, |b|), same set
  long first_differing = -1;   // index of the first particle with any difference
  bool identical() const { return bitwise_equal == coordinates && state_mismatches == 0; }
};

/// Distance in units in the last place between two doubles (0 when bitwise equal; huge for
/// different signs or NaNs).
uint64_t ulp_distance(double a, double b);

ParticleComparison compare_particles(const Particles& a, const Particles& b);

}  // namespace ft

#include "fusetrack/tracker.h"

namespace ft {

/// Where two backends first disagree for one particle, found by replaying it: turn by turn to
/// find the turn, then element by element from a common state (the first backend's) to find
/// the element whose single step differs.
struct Divergence {
  bool found = false;
  int64_t turn = -1;
  long element = -1;            // sequence index
  std::string element_name, element_type;
  double input[6] = {0, 0, 0, 0, 0, 0};   // common state before the element
  double output_a[6] = {0, 0, 0, 0, 0, 0};
  double output_b[6] = {0, 0, 0, 0, 0, 0};
};

Divergence find_divergence(const Lattice& lattice, Backend& a, Backend& b, const Particles& initial, size_t particle,
                           int64_t turns, FmaMode fma);

}  // namespace ft
