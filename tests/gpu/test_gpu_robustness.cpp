// GPU robustness: non-finite coordinates are marked lost as on the CPU; particles beyond a device
// memory cap (FUSETRACK_GPU_MEMORY_LIMIT) are tracked in chunks with results bitwise equal to the CPU;
// a collective run that cannot keep its particles resident is refused with the sizes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/memory_budget.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_robustness.
namespace test_gpu_robustness {

using namespace ft;

namespace {

/// Device bytes per particle: nine doubles, state and loss turn (int32), loss element (int64).
constexpr size_t kGpuBytesPerParticle = 9 * sizeof(double) + 2 * sizeof(int32_t) + sizeof(int64_t);

struct GpuMemoryCap {
  explicit GpuMemoryCap(const char* bytes) { setenv("FUSETRACK_GPU_MEMORY_LIMIT", bytes, 1); }
  ~GpuMemoryCap() { unsetenv("FUSETRACK_GPU_MEMORY_LIMIT"); }
};

}  // namespace

TEST_CASE("non-finite coordinates are marked lost on the GPU as on the CPU" * doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  Particles initial = make_grid(lattice.reference().beta0(), -1e-3, 1e-3, 4, -1e-3, 1e-3, 4);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  initial.x[1] = nan;
  initial.px[2] = inf;
  initial.y[3] = -inf;
  initial.py[4] = nan;
  initial.zeta[5] = inf;
  Particles cpu = initial, gpu = initial;
  TrackOptions o;
  o.turns = 10;
  make_cpu_backend(lattice)->track(cpu, o);
  CudaBackend backend(lattice, CudaBackendOptions{});
  backend.track(gpu, o);
  // x, px, y, py: lost at the first element's aperture check (|NaN| <= limit is false, and an
  // infinite momentum makes x or y infinite); zeta is checked only at the end of the turn.
  for (size_t i = 1; i <= 5; ++i) {
    CAPTURE(i);
    CHECK(gpu.state[i] <= 0);
    CHECK(gpu.state[i] == cpu.state[i]);
    CHECK(gpu.lost_turn[i] == 0);
  }
  CHECK(gpu.state[5] == kLostNotFinite);
  CHECK(gpu.state[0] > 0);
  const ParticleComparison c = compare_particles(cpu, gpu);
  CHECK(c.state_mismatches == 0);
  CHECK(gpu.lost_element == cpu.lost_element);
}

TEST_CASE("a GPU memory cap splits the particles into chunks, results stay bitwise equal to the CPU" *
          doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  // 40000 particles of 88 bytes = 3.52 MB; 1 MiB allowed -> 80% usable -> 9532 resident -> 5 chunks.
  const Particles initial = make_grid(lattice.reference().beta0(), -2e-2, 2e-2, 200, -2e-2, 2e-2, 200);
  Particles cpu = initial, gpu = initial;
  TrackOptions o;
  o.turns = 20;
  make_cpu_backend(lattice)->track(cpu, o);
  {
    GpuMemoryCap cap("1M");
    CudaBackend backend(lattice, CudaBackendOptions{});
    backend.track(gpu, o);
    const GpuResidency plan = plan_gpu_residency(initial.size(), kGpuBytesPerParticle, uint64_t{1} << 40, 0, false, "");
    CHECK(plan.chunks == 5);
    CHECK(backend.last_stats().chunks == plan.chunks);
  }
  const ParticleComparison c = compare_particles(cpu, gpu);
  CHECK(c.state_mismatches == 0);
  CHECK(c.bitwise_equal == c.coordinates);
}

TEST_CASE("a collective run that cannot keep its particles on the GPU is refused with the sizes" *
          doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("longitudinal_bench_ring.json");
  Particles p = make_grid(lattice.reference().beta0(), -1e-3, 1e-3, 100, -1e-3, 1e-3, 100);
  TrackOptions o;
  o.turns = 1;
  GpuMemoryCap cap("256K");
  CudaBackend backend(lattice, CudaBackendOptions{});
  std::string message;
  try {
    backend.track(p, o);
  } catch (const MemoryError& e) {
    message = e.what();
  }
  MESSAGE(message);
  CHECK(message.find("a collective run keeps all 10000 particles on the GPU: they need " +
                     format_bytes(10000 * kGpuBytesPerParticle)) != std::string::npos);
  CHECK(message.find("262144 bytes") != std::string::npos);
}

TEST_CASE("particle copies through the page-locked staging buffers come back byte for byte, over several chunks" *
          doctest::test_suite("quick")) {
  // 5,000,001 particles: each double array is 40 MB, over one 32 MiB staging chunk and not a whole number of
  // them; the int32 arrays (20 MB) take one staged chunk. No turn tracked: what comes back is what went up.
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const size_t n = 5000001;
  Particles initial(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(i) / static_cast<double>(n);
    initial.set(i, 1e-3 * u, -2e-5 * u, 3e-4 * std::sin(static_cast<double>(i)), 1e-6, 1e-2 * (u - 0.5), 1e-4 * u);
    if (i % 7 == 3) {  // some lost, with their turn and element, so that every array holds distinct values
      initial.state[i] = 0;
      initial.lost_turn[i] = static_cast<int32_t>(i % 1000);
      initial.lost_element[i] = static_cast<int64_t>(i);
    }
  }
  TrackOptions o;
  o.turns = 0;
  CudaBackend backend(lattice, CudaBackendOptions{});
  Particles round_trip = initial;
  backend.track(round_trip, o);
  CHECK(compare_particles(initial, round_trip).identical());
  CHECK(round_trip.lost_turn == initial.lost_turn);
  CHECK(round_trip.lost_element == initial.lost_element);
  CHECK(round_trip.ptau == initial.ptau);
  CHECK(round_trip.rpp == initial.rpp);
  CHECK(round_trip.rvv == initial.rvv);
  // Two turns tracked with the staged copies and with the driver's plain copies: the same bytes.
  o.turns = 2;
  Particles staged = initial, plain = initial;
  backend.track(staged, o);
  setenv("FUSETRACK_STAGED_COPIES", "0", 1);
  CudaBackend plain_backend(lattice, CudaBackendOptions{});
  plain_backend.track(plain, o);
  unsetenv("FUSETRACK_STAGED_COPIES");
  const ParticleComparison c = compare_particles(staged, plain);
  MESSAGE("5,000,001 particles, 2 turns, staged against plain copies: bitwise equal " << c.bitwise_equal << "/"
                                                                                      << c.coordinates);
  CHECK(c.identical());
  CHECK(staged.lost_element == plain.lost_element);
}

}  // namespace test_gpu_robustness
