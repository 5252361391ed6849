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
#include <vector>

#include "fusetrack/longitudinal.h"

namespace ft {

/// The matched distribution of `options` for `lattice`, without particles (the report's grid
/// tables hold what sampling needs). Throws as generate_matched_bunch does.
MatchedBunchReport match_longitudinal_bunch(const Lattice& lattice, const MatchedBunchOptions& options);

/// The tables of a matched distribution that the sampler reads (ft_longitudinal_sampler of
/// fusetrack/device/random.h points into them): line density, its cumulative integral and the
/// potential on the zeta grid; for binomial bunches the density of delta / delta_K on [-1, 1].
struct LongitudinalSamplerTables {
  std::vector<double> zeta, density, cumulative, potential;
  std::vector<double> u_grid, u_density, u_cumulative;  // binomial only (empty for gaussian)
  bool gaussian = true;
  double sigma_delta = 0.0, k_max = 0.0, inv_ac = 0.0;
};

/// Particles [first, first + count) of a matched bunch, not yet made: a particle source that a
/// backend fills where it tracks them (the CUDA backend samples them on the device, from the same
/// Philox stream, so they never cross the bus; CudaBackend::track_matched_share), or sample() on
/// the host. Particle i (global index) gets id i, the closed orbit transversely and (zeta, delta)
/// from draws 0 and 1 of its stream; ptau, rpp, rvv as Particles::set makes them.
class MatchedBunchShare {
 public:
  MatchedBunchShare(const MatchedBunchReport& report, uint64_t seed, size_t first, size_t count);
  size_t first() const { return m_first; }
  size_t count() const { return m_count; }
  uint64_t seed() const { return m_seed; }
  double beta0() const { return m_beta0; }
  /// Transverse coordinates of every particle (x, px, y, py): the 4D closed orbit.
  const double* orbit() const { return m_orbit; }
  const LongitudinalSamplerTables& tables() const { return m_tables; }
  /// The particles on the host, on `threads` OpenMP threads (0: OpenMP's default).
  Particles sample(int threads = 0) const;

 private:
  LongitudinalSamplerTables m_tables;
  uint64_t m_seed = 1;
  size_t m_first = 0, m_count = 0;
  double m_beta0 = 1.0;
  double m_orbit[4] = {0.0, 0.0, 0.0, 0.0};
};

/// Particles [first, first + count) of a bunch of the distribution `report` (ids first ...), on
/// `threads` OpenMP threads (0: OpenMP's default). Only the particle index and the seed decide a
/// particle's coordinates. (MatchedBunchShare(report, seed, first, count).sample(threads).)
Particles sample_matched_bunch(const MatchedBunchReport& report, uint64_t seed, size_t first, size_t count,
                               int threads = 0);

/// Sums over a share of particles, for the sample moments of a bunch split over ranks (the CUDA
/// backend sums particles made on the device there).
struct LongitudinalSums {
  double count = 0.0, zeta = 0.0, zeta2 = 0.0, delta = 0.0, delta2 = 0.0;
  LongitudinalSums& operator+=(const LongitudinalSums& o) {
    count += o.count;
    zeta += o.zeta;
    zeta2 += o.zeta2;
    delta += o.delta;
    delta2 += o.delta2;
    return *this;
  }
};
LongitudinalSums longitudinal_sums(const Particles& particles);
/// rms zeta and delta of the sums (into report.sigma_zeta_sample, sigma_delta_sample).
void set_sample_moments(MatchedBunchReport& report, const LongitudinalSums& sums);

}  // namespace ft
