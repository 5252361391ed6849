// Matched longitudinal bunches in two steps, so that every MPI rank (or GPU) makes its own share
// of a large bunch (see fusetrack/longitudinal.h for the model; generate_matched_bunch does both
// steps for a whole bunch):
//   1. match_longitudinal_bunch: the distribution (line density, potential, energy spread) on a
//      grid, the same on every rank (deterministic host computation);
//   2. sample_matched_bunch: particles [first, first + count) of it. Particle i draws from the
//      counter-based Philox4x32-10 stream keyed by (seed, i) (fusetrack/device/random.h), so the
//      particles are bitwise the same for any split over ranks or threads, and on CPU and GPU.
//
// Sampling (fusetrack/device/random.h): zeta by the exact inverse CDF of the piecewise-linear line
// density, delta ~ N(0, sigma_delta) by Box-Muller (gaussian) or delta_K(zeta) times a draw of the
// density (1 - u^2)^mu on [-1, 1] (binomial); transverse coordinates on the 4D closed orbit.
#pragma once
#include <cstdint>

#include "fusetrack/longitudinal.h"

namespace ft {

/// The matched distribution of `options` for `lattice`, without particles (the report's grid
/// tables hold what sampling needs). Throws as generate_matched_bunch does.
MatchedBunchReport match_longitudinal_bunch(const Lattice& lattice, const MatchedBunchOptions& options);

/// Particles [first, first + count) of a bunch of the distribution `report` (ids first ...), on
/// `threads` OpenMP threads (0: OpenMP's default). Only the particle index and the seed decide a
/// particle's coordinates.
Particles sample_matched_bunch(const MatchedBunchReport& report, uint64_t seed, size_t first, size_t count,
                               int threads = 0);

/// Sums over a share of particles, for the sample moments of a bunch split over ranks.
struct LongitudinalSums {
  double count = 0.0, zeta = 0.0, zeta2 = 0.0, delta = 0.0, delta2 = 0.0;
};
LongitudinalSums longitudinal_sums(const Particles& particles);
/// rms zeta and delta of the sums (into report.sigma_zeta_sample, sigma_delta_sample).
void set_sample_moments(MatchedBunchReport& report, const LongitudinalSums& sums);

}  // namespace ft
