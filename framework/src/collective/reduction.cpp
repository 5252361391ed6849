#include "fusetrack/reduction.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "fusetrack/error.h"
#include "fusetrack/parallel.h"

namespace ft {

namespace {

/// Bits of headroom kept below 2^63 in every accumulator (sums are compared with 2^62).
constexpr int kAccumulatorBits = 62;

int ceil_log2(uint64_t n) {
  int b = 0;
  while (b < 64 && (uint64_t(1) << b) < n) ++b;
  return b;
}

/// Runs body(thread_accumulators, out_of_range) over the alive particles with `threads` threads,
/// each thread into its own integer array, and adds the arrays: integer sums, so the result does
/// not depend on the split.
template <class Body>
void deposit_in_threads(const Particles& p, int threads, std::vector<uint64_t>& acc, uint64_t& rejected, Body body) {
  const int64_t n = static_cast<int64_t>(p.size());
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  std::vector<std::vector<uint64_t>> local(static_cast<size_t>(nt), std::vector<uint64_t>(acc.size(), 0));
  std::vector<uint64_t> local_rejected(static_cast<size_t>(nt), 0);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (p.state[static_cast<size_t>(i)] <= 0) continue;
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    if (!body(static_cast<size_t>(i), local[t].data())) ++local_rejected[t];
  }
  for (size_t t = 0; t < local.size(); ++t) {
    for (size_t k = 0; k < acc.size(); ++k) acc[k] += local[t][k];
    rejected += local_rejected[t];
  }
}

void require_same_size(size_t a, size_t b, const char* what) {
  if (a != b)
    throw Error(fmt::format("{}: cannot add reducers of different grids ({} vs {} accumulators)", what, a, b));
}

}  // namespace

double fixed_point_scale(double range, uint64_t max_particles) {
  if (!(range > 0.0) || !std::isfinite(range))
    throw Error(fmt::format("fixed-point reduction: the declared range must be positive and finite, got {}", range));
  if (max_particles == 0) throw Error("fixed-point reduction: the particle count must be positive");
  // Largest power of two s with max_particles * 2^24 * range * s <= 2^62.
  const double bound = std::ldexp(1.0, kAccumulatorBits - kProfileWeightBits - ceil_log2(max_particles)) / range;
  int e = 0;
  std::frexp(bound, &e);  // bound = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 1);
}

// ---- slice moments ----

SliceMomentReducer::SliceMomentReducer(const SliceGrid& grid, const std::array<double, 6>& ranges,
                                       uint64_t max_particles)
    : m_grid(grid) {
  if (grid.n_slices < 1 || !(grid.zeta_max > grid.zeta_min))
    throw Error(fmt::format("slice moments: need n_slices >= 1 and zeta_max > zeta_min, got {} slices over [{}, {}] m",
                            grid.n_slices, grid.zeta_min, grid.zeta_max));
  m_scales.scale[0] = 1.0;
  for (int k = 0; k < kSliceFirstMoments; ++k) {
    m_scales.range[k] = ranges[static_cast<size_t>(k)];
    m_scales.scale[1 + k] = fixed_point_scale(ranges[static_cast<size_t>(k)], max_particles);
  }
  for (int k = 0; k < kSliceSecondMoments; ++k) {
    int i, j;
    slice_second_moment_pair(k, &i, &j);
    m_scales.scale[1 + kSliceFirstMoments + k] =
        fixed_point_scale(ranges[static_cast<size_t>(i)] * ranges[static_cast<size_t>(j)], max_particles);
  }
  m_acc.assign(static_cast<size_t>(grid.n_slices) * kSliceAccumulators, 0);
}

void SliceMomentReducer::deposit(const Particles& p, int threads) {
  deposit_in_threads(p, threads, m_acc, m_out_of_range, [&](size_t i, uint64_t* acc) {
    const double c[6] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i]};
    int bins[2];
    long long out[2][kSliceAccumulators];
    const int n = slice_moment_contributions(m_grid, m_scales, c, bins, out);
    if (n < 0) return false;
    for (int b = 0; b < n; ++b) {
      uint64_t* slice = acc + static_cast<size_t>(bins[b]) * kSliceAccumulators;
      for (int k = 0; k < kSliceAccumulators; ++k) slice[k] += static_cast<uint64_t>(out[b][k]);
    }
    return true;
  });
}

void SliceMomentReducer::add(const SliceMomentReducer& other) { add_accumulators(other.m_acc, other.m_out_of_range); }

void SliceMomentReducer::add_accumulators(const std::vector<uint64_t>& acc, uint64_t out_of_range) {
  require_same_size(m_acc.size(), acc.size(), "slice moments");
  for (size_t k = 0; k < m_acc.size(); ++k) m_acc[k] += acc[k];
  m_out_of_range += out_of_range;
}

void SliceMomentReducer::allreduce(Communicator& comm) {
  comm.allreduce_sum(m_acc.data(), m_acc.size());
  comm.allreduce_sum(&m_out_of_range, 1);
}

SliceMoments SliceMomentReducer::moments() const {
  const size_t n = static_cast<size_t>(m_grid.n_slices);
  SliceMoments m;
  m.macroparticles.assign(n, 0.0);
  m.mean.assign(n, {});
  m.second_central.assign(n, {});
  for (size_t s = 0; s < n; ++s) {
    const uint64_t* a = m_acc.data() + s * kSliceAccumulators;
    const double w = static_cast<double>(a[0]);
    m.macroparticles[s] = w / static_cast<double>(kProfileUnit);
    if (a[0] == 0) continue;
    for (int k = 0; k < kSliceFirstMoments; ++k)
      m.mean[s][static_cast<size_t>(k)] =
          static_cast<double>(static_cast<int64_t>(a[1 + k])) / (m_scales.scale[1 + k] * w);
    for (int k = 0; k < kSliceSecondMoments; ++k) {
      int i, j;
      slice_second_moment_pair(k, &i, &j);
      const double raw = static_cast<double>(static_cast<int64_t>(a[1 + kSliceFirstMoments + k])) /
                         (m_scales.scale[1 + kSliceFirstMoments + k] * w);
      m.second_central[s][static_cast<size_t>(k)] =
          raw - m.mean[s][static_cast<size_t>(i)] * m.mean[s][static_cast<size_t>(j)];
    }
  }
  return m;
}

std::array<double, 6> SliceMomentReducer::resolution() const {
  std::array<double, 6> r{};
  for (int k = 0; k < kSliceFirstMoments; ++k)
    r[static_cast<size_t>(k)] = 0.5 / (m_scales.scale[1 + k] * static_cast<double>(kProfileUnit));
  return r;
}

// ---- slice centroids ----

SliceCentroidReducer::SliceCentroidReducer(const SliceGrid& grid, const std::array<double, 4>& ranges,
                                           uint64_t max_particles)
    : m_grid(grid) {
  if (grid.n_slices < 1 || !(grid.zeta_max > grid.zeta_min) || grid.linear != 0)
    throw Error(fmt::format("slice centroids: need n_slices >= 1, zeta_max > zeta_min and nearest-slice binning, got "
                            "{} slices over [{}, {}] m (linear {})",
                            grid.n_slices, grid.zeta_min, grid.zeta_max, grid.linear));
  m_scales.scale[0] = 1.0;
  for (int k = 0; k < 4; ++k) {
    m_scales.range[k] = ranges[static_cast<size_t>(k)];
    m_scales.scale[1 + k] = fixed_point_scale(ranges[static_cast<size_t>(k)], max_particles);
  }
  m_acc.assign(static_cast<size_t>(grid.n_slices) * kSliceCentroidAccumulators, 0);
}

void SliceCentroidReducer::deposit(const Particles& p, int threads) {
  deposit_in_threads(p, threads, m_acc, m_out_of_range, [&](size_t i, uint64_t* acc) {
    const double c[6] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i]};
    int bin = 0;
    long long out[kSliceCentroidAccumulators];
    const int n = slice_centroid_contributions(m_grid, m_scales, c, &bin, out);
    if (n < 0) return false;
    if (n == 0) return true;  // outside the cuts: no moment, not an out-of-range particle
    uint64_t* slice = acc + static_cast<size_t>(bin) * kSliceCentroidAccumulators;
    for (int k = 0; k < kSliceCentroidAccumulators; ++k) slice[k] += static_cast<uint64_t>(out[k]);
    return true;
  });
}

void SliceCentroidReducer::clear() {
  std::fill(m_acc.begin(), m_acc.end(), 0);
  m_out_of_range = 0;
}

void SliceCentroidReducer::add_accumulators(const std::vector<uint64_t>& acc, uint64_t out_of_range) {
  require_same_size(m_acc.size(), acc.size(), "slice centroids");
  for (size_t k = 0; k < m_acc.size(); ++k) m_acc[k] += acc[k];
  m_out_of_range += out_of_range;
}

void SliceCentroidReducer::allreduce(Communicator& comm) {
  comm.allreduce_sum(m_acc.data(), m_acc.size());
  comm.allreduce_sum(&m_out_of_range, 1);
}

// ---- charge on a grid ----

ChargeGridReducer::ChargeGridReducer(int dims, const std::array<int, 3>& nodes, const std::array<double, 3>& min,
                                     const std::array<double, 3>& max, uint64_t max_particles) {
  if (dims != 2 && dims != 3) throw Error(fmt::format("charge grid: dims must be 2 or 3, got {}", dims));
  if (max_particles == 0) throw Error("charge grid: the particle count must be positive");
  m_spec.dims = dims;
  size_t total = 1;
  for (int d = 0; d < 3; ++d) {
    const size_t u = static_cast<size_t>(d);
    const bool used = d < dims;
    m_spec.n[d] = used ? nodes[u] : 1;
    m_spec.min[d] = used ? min[u] : 0.0;
    if (used && (nodes[u] < 2 || !(max[u] > min[u])))
      throw Error(
          fmt::format("charge grid: dimension {} needs at least 2 nodes and max > min, got {} nodes over [{}, {}]", d,
                      nodes[u], min[u], max[u]));
    m_spec.inv_d[d] = used ? static_cast<double>(nodes[u] - 1) / (max[u] - min[u]) : 0.0;
    total *= static_cast<size_t>(m_spec.n[d]);
  }
  const int available = kAccumulatorBits - ceil_log2(max_particles);
  m_spec.weight_bits = std::min(20, available / dims);
  if (m_spec.weight_bits < 8)
    throw Error(
        fmt::format("charge grid: {} macroparticles leave {} bits per dimension for the cloud-in-cell weights "
                    "(at least 8 needed)",
                    max_particles, m_spec.weight_bits));
  m_acc.assign(total, 0);
}

void ChargeGridReducer::deposit(const Particles& p, int threads) {
  deposit_in_threads(p, threads, m_acc, m_outside, [&](size_t i, uint64_t* acc) {
    const double pos[3] = {p.x[i], p.y[i], p.zeta[i]};
    long long nodes[8];
    unsigned long long weights[8];
    const int n = charge_deposit(m_spec, pos, nodes, weights);
    for (int c = 0; c < n; ++c) acc[nodes[c]] += weights[c];
    return n > 0;
  });
}

void ChargeGridReducer::clear() {
  std::fill(m_acc.begin(), m_acc.end(), 0);
  m_outside = 0;
}

void ChargeGridReducer::add(const ChargeGridReducer& other) { add_accumulators(other.m_acc, other.m_outside); }

void ChargeGridReducer::add_accumulators(const std::vector<uint64_t>& acc, uint64_t outside) {
  require_same_size(m_acc.size(), acc.size(), "charge grid");
  for (size_t k = 0; k < m_acc.size(); ++k) m_acc[k] += acc[k];
  m_outside += outside;
}

void ChargeGridReducer::allreduce(Communicator& comm) {
  comm.allreduce_sum(m_acc.data(), m_acc.size());
  comm.allreduce_sum(&m_outside, 1);
}

std::vector<double> ChargeGridReducer::charge() const {
  const double unit = std::ldexp(1.0, m_spec.dims * m_spec.weight_bits);
  std::vector<double> q(m_acc.size());
  for (size_t k = 0; k < m_acc.size(); ++k) q[k] = static_cast<double>(m_acc[k]) / unit;
  return q;
}

}  // namespace ft
