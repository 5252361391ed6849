// The deterministic reductions on the GPU (fusetrack/cuda_reduction.h): the integers equal the
// CPU's bit for bit, for slice moments and 2D/3D charge grids (skipped without a GPU).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <random>

#include "fusetrack/cuda_reduction.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_reduction.
namespace test_gpu_reduction {

using namespace ft;

namespace {

Particles gaussian_bunch(size_t n) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> g(0.0, 1.0);
  Particles p(n, 0.9);
  for (size_t i = 0; i < n; ++i) {
    const double a = g(rng), b = g(rng), c = g(rng), d = g(rng), z = g(rng), e = g(rng);
    p.set(i, 1e-3 * a, 2e-5 * (0.5 * a + b), 5e-4 * c, 1e-5 * d, 0.05 * z, 1e-3 * e);
  }
  p.state[7] = 0;  // a lost particle is left out on both sides
  return p;
}

}  // namespace

TEST_CASE("GPU slice moments and charge grids equal the CPU's integers bit for bit" * doctest::test_suite("quick")) {
  const size_t n = 1000000;
  const Particles p = gaussian_bunch(n);
  SliceGrid grid{64, 1, -0.25, 0.25, 64 / 0.5};
  const std::array<double, 6> ranges{5e-3, 2e-4, 3e-3, 1e-4, 0.3, 6e-3};
  SliceMomentReducer cpu(grid, ranges, n), gpu(grid, ranges, n);
  cpu.deposit(p);
  double seconds = 0.0;
  gpu_deposit(gpu, p, 0, &seconds);
  CHECK(gpu.accumulators() == cpu.accumulators());
  CHECK(gpu.out_of_range() == cpu.out_of_range());
  MESSAGE(fmt::format("slice moments, {} particles, 64 slices: GPU kernel {:.3f} ms ({:.3g} particles/s)", n,
                      seconds * 1e3, static_cast<double>(n) / seconds));
  for (const int dims : {2, 3}) {
    CAPTURE(dims);
    ChargeGridReducer c(dims, {65, 65, 33}, {-5e-3, -3e-3, -0.25}, {5e-3, 3e-3, 0.25}, n);
    ChargeGridReducer g(dims, {65, 65, 33}, {-5e-3, -3e-3, -0.25}, {5e-3, 3e-3, 0.25}, n);
    c.deposit(p);
    gpu_deposit(g, p, 0, &seconds);
    CHECK(g.accumulators() == c.accumulators());
    CHECK(g.outside() == c.outside());
    MESSAGE(fmt::format("charge grid {}D, {} particles: GPU kernel {:.3f} ms", dims, n, seconds * 1e3));
  }
}

}  // namespace test_gpu_reduction
