// The frequency map on the GPU: with fma=off the GPU tracks the CPU's turn-by-turn data bit for bit, so
// the NAFF tunes of both windows and the diffusion indices (computed on the host) are the CPU's exactly.
#include <doctest/doctest.h>

#include <cmath>

#include "fusetrack/cuda_backend.h"
#include "fusetrack/frequency_map.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in its namespace.
namespace test_gpu_frequency_map {

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

TEST_CASE("frequency map: CPU and GPU give the same tunes and diffusion with fma=off" * doctest::test_suite("da")) {
  const ft::Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const ft::LinearOptics optics = ft::compute_linear_optics(lattice);
  ft::DaConfig c;
  c.angles = 3;
  c.amplitudes = 6;
  c.amplitude_min = 0.001;
  c.amplitude_max = 0.025;
  ft::FrequencyMapOptions o;
  o.turns_per_window = 128;
  ft::DaScan on_cpu = ft::make_da_scan(lattice, c), on_gpu = ft::make_da_scan(lattice, c);
  auto cpu = ft::make_cpu_backend(lattice);
  ft::CudaBackend gpu(lattice, ft::CudaBackendOptions{});
  const ft::FrequencyMap a = ft::frequency_map(on_cpu, &optics, *cpu, o);
  const ft::FrequencyMap b = ft::frequency_map(on_gpu, &optics, gpu, o);
  REQUIRE(a.qx1.size() == b.qx1.size());
  for (size_t i = 0; i < a.qx1.size(); ++i) {
    CAPTURE(i);
    CHECK(same(a.qx1[i], b.qx1[i]));
    CHECK(same(a.qy1[i], b.qy1[i]));
    CHECK(same(a.qx2[i], b.qx2[i]));
    CHECK(same(a.qy2[i], b.qy2[i]));
    CHECK(same(a.diffusion[i], b.diffusion[i]));
    CHECK(a.lost_turn[i] == b.lost_turn[i]);
  }
}

}  // namespace test_gpu_frequency_map
