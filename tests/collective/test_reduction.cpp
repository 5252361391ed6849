// Deterministic reductions into bins (fusetrack/reduction.h): slice moments and charge on 2D/3D
// grids are bitwise the same for any particle order, thread count and split into parts (ranks),
// agree with the double-precision sums within the stated resolution, and refuse nothing silently.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fusetrack/codegen.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/parallel.h"
#include "fusetrack/reduction.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_reduction.
namespace test_reduction {

using namespace ft;

namespace {

/// A correlated Gaussian bunch (x-px and y-py correlations, zeta-delta chirp), seeded.
Particles bunch(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  Particles p(n, 0.9);
  for (size_t i = 0; i < n; ++i) {
    const double a = g(rng), b = g(rng), c = g(rng), d = g(rng), z = g(rng), e = g(rng);
    p.set(i, 1e-3 * a, 2e-5 * (0.5 * a + b), 5e-4 * c + 1e-4 * a, 1e-5 * (d - 0.3 * c), 0.05 * z, 1e-3 * (e + 0.2 * z));
  }
  return p;
}

Particles shuffled(const Particles& p, unsigned seed) {
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  Particles q(p.size(), p.beta0);
  for (size_t i = 0; i < order.size(); ++i) q.store(i, p.view(order[i]));
  return q;
}

SliceGrid grid(int n, bool linear) {
  SliceGrid g{n, linear ? 1 : 0, -0.3, 0.3, 0.0};
  g.inv_dz = n / (g.zeta_max - g.zeta_min);
  return g;
}

const std::array<double, 6> kRanges{0.01, 1e-3, 0.01, 1e-3, 0.5, 0.02};

}  // namespace

TEST_CASE("slice moments: bitwise the same for any particle order, thread count and split into parts") {
  const Particles p = bunch(20000, 1);
  for (const bool linear : {false, true}) {
    CAPTURE(linear);
    SliceMomentReducer one(grid(16, linear), kRanges, p.size());
    one.deposit(p, 1);
    SliceMomentReducer threads(grid(16, linear), kRanges, p.size());
    threads.deposit(shuffled(p, 7), 2);
    CHECK(threads.accumulators() == one.accumulators());
    // Three "ranks" with uneven shares, reduced separately and their integers added.
    SliceMomentReducer parts(grid(16, linear), kRanges, p.size());
    for (int r = 0; r < 3; ++r) {
      const Share s = share_of(p.size(), r, 3);
      SliceMomentReducer part(grid(16, linear), kRanges, p.size());
      part.deposit(shuffled(slice_particles(p, s.begin, s.end), 11 + r), 2);
      parts.add(part);
    }
    CHECK(parts.accumulators() == one.accumulators());
    parts.allreduce(world());  // a single process: unchanged
    CHECK(parts.accumulators() == one.accumulators());
    CHECK(one.out_of_range() == 0);
  }
}

TEST_CASE("slice moments equal the double-precision sums within the stated resolution") {
  const Particles p = bunch(5000, 2);
  const SliceGrid g = grid(8, false);
  SliceMomentReducer r(g, kRanges, p.size());
  r.deposit(p);
  const SliceMoments m = r.moments();
  // Independent double sums per slice (nearest-slice binning written out here).
  std::vector<double> count(8, 0.0);
  std::vector<std::array<double, 6>> sum(8, std::array<double, 6>{});
  std::vector<double> sum_xx(8, 0.0), sum_xpx(8, 0.0);
  for (size_t i = 0; i < p.size(); ++i) {
    const int s = std::clamp(static_cast<int>(std::floor((p.zeta[i] - g.zeta_min) * g.inv_dz)), 0, 7);
    if (!(p.zeta[i] >= g.zeta_min && p.zeta[i] < g.zeta_max)) continue;
    const double c[6] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i]};
    count[s] += 1.0;
    for (int k = 0; k < 6; ++k) sum[s][k] += c[k];
    sum_xx[s] += c[0] * c[0];
    sum_xpx[s] += c[0] * c[1];
  }
  const std::array<double, 6> res = r.resolution();
  for (size_t s = 0; s < 8; ++s) {
    CAPTURE(s);
    CHECK(m.macroparticles[s] == count[s]);
    if (count[s] == 0) continue;
    for (size_t k = 0; k < 6; ++k) {
      CAPTURE(k);
      CHECK(std::fabs(m.mean[s][k] - sum[s][k] / count[s]) <= res[k] + 1e-15 * kRanges[k]);
    }
    const double mx = sum[s][0] / count[s], mpx = sum[s][1] / count[s];
    CHECK(std::fabs(m.second_central[s][0] - (sum_xx[s] / count[s] - mx * mx)) < 1e-12 * kRanges[0] * kRanges[0]);
    CHECK(std::fabs(m.second_central[s][1] - (sum_xpx[s] / count[s] - mx * mpx)) < 1e-12 * kRanges[0] * kRanges[1]);
    CHECK(m.second_central[s][0] > 0.0);
  }
  // The stated resolution of 20000 macroparticles in a 1 cm range: below 1e-12 m.
  CHECK(res[0] < 1e-12);
}

TEST_CASE("slice moments: a coordinate outside its declared range is counted, not clamped") {
  Particles p = bunch(100, 3);
  p.x[5] = 0.5;  // beyond the 1 cm range
  p.px[9] = -1.0;
  SliceMomentReducer r(grid(4, true), kRanges, p.size());
  r.deposit(p);
  CHECK(r.out_of_range() == 2);
  // The weights of the others add up exactly to one macroparticle each (those within the cuts).
  uint64_t inside = 0;
  for (size_t i = 0; i < p.size(); ++i) inside += (i != 5 && i != 9 && p.zeta[i] >= -0.3 && p.zeta[i] < 0.3) ? 1 : 0;
  uint64_t weights = 0;
  for (size_t sl = 0; sl < 4; ++sl) weights += r.accumulators()[sl * kSliceAccumulators];
  CHECK(weights == inside * kProfileUnit);
  CHECK(inside > 90);
  CHECK_THROWS_WITH_AS(SliceMomentReducer(grid(4, true), {0.0, 1, 1, 1, 1, 1}, 10), doctest::Contains("range"), Error);
  CHECK_THROWS_AS(SliceMomentReducer(grid(4, true), kRanges, 0), Error);
}

TEST_CASE("charge on 2D and 3D grids: total charge, exact order independence, cloud-in-cell weights") {
  const Particles p = bunch(20000, 4);
  for (const int dims : {2, 3}) {
    CAPTURE(dims);
    const std::array<int, 3> nodes{33, 17, 9};
    const std::array<double, 3> lo{-6e-3, -3e-3, -0.3}, hi{6e-3, 3e-3, 0.3};
    ChargeGridReducer one(dims, nodes, lo, hi, p.size());
    one.deposit(p, 1);
    ChargeGridReducer other(dims, nodes, lo, hi, p.size());
    other.deposit(shuffled(p, 5), 2);
    CHECK(other.accumulators() == one.accumulators());
    ChargeGridReducer parts(dims, nodes, lo, hi, p.size());
    for (int r = 0; r < 4; ++r) {
      const Share s = share_of(p.size(), r, 4);
      ChargeGridReducer part(dims, nodes, lo, hi, p.size());
      part.deposit(slice_particles(p, s.begin, s.end), 1);
      parts.add(part);
    }
    CHECK(parts.accumulators() == one.accumulators());
    // Every particle inside deposits exactly one macroparticle (integer weights add up exactly).
    uint64_t total = 0;
    for (uint64_t w : one.accumulators()) total += w;
    CHECK(total == (p.size() - one.outside()) << (dims * one.spec().weight_bits));
    CHECK(one.outside() < p.size() / 100);
  }
  // One particle at a known position: bilinear weights 0.25 / 0.75 on x and 0.5 / 0.5 on y.
  Particles single(1, 0.9);
  single.set(0, 0.25, 0.0, 0.5, 0.0, 0.0, 0.0);
  ChargeGridReducer g(2, {3, 3, 1}, {0.0, 0.0, 0.0}, {2.0, 2.0, 1.0}, 1000);
  g.deposit(single);
  const std::vector<double> q = g.charge();
  CHECK(q[0] == 0.375);  // (ix 0, iy 0): 0.75 * 0.5
  CHECK(q[1] == 0.125);  // (1, 0): 0.25 * 0.5
  CHECK(q[3] == 0.375);  // (0, 1)
  CHECK(q[4] == 0.125);  // (1, 1)
  CHECK_THROWS_AS(ChargeGridReducer(4, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}, 10), Error);
  CHECK_THROWS_AS(ChargeGridReducer(2, {1, 3, 3}, {0, 0, 0}, {1, 1, 1}, 10), Error);
}

TEST_CASE("NVRTC compiles the reduction steps (one source for CPU and GPU)") {
  KernelSource src;
  src.name = "fusetrack_reduction_test.cu";
  src.headers = framework_device_headers();
  src.text = R"(#include "fusetrack/device/reduction.h"
extern "C" __global__ void fusetrack_slice_moments(ft::SliceGrid g, ft::SliceMomentScales s, const double* c, int n,
                                                   unsigned long long* acc) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double q[6] = {c[6 * i], c[6 * i + 1], c[6 * i + 2], c[6 * i + 3], c[6 * i + 4], c[6 * i + 5]};
  int bins[2];
  long long out[2][ft::kSliceAccumulators];
  const int m = ft::slice_moment_contributions(g, s, q, bins, out);
  for (int b = 0; b < m; ++b)
    for (int k = 0; k < ft::kSliceAccumulators; ++k)
      atomicAdd(acc + bins[b] * ft::kSliceAccumulators + k, static_cast<unsigned long long>(out[b][k]));
}
extern "C" __global__ void fusetrack_charge(ft::ChargeGridSpec g, const double* pos, int n, unsigned long long* acc) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  long long nodes[8];
  unsigned long long w[8];
  const int m = ft::charge_deposit(g, pos + 3 * i, nodes, w);
  for (int c = 0; c < m; ++c) atomicAdd(acc + nodes[c], w[c]);
}
)";
  CompiledKernel k;
  CHECK_NOTHROW(k = KernelCompiler("off").compile(src, 90));
  CHECK(!k.cubin.empty());
}

}  // namespace test_reduction
