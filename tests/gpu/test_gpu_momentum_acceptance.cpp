// The local momentum acceptance on the GPU: the partial first and last turns (element ranges) and the
// full turns of one launch give the CPU's acceptance exactly with fma=off.
#include <doctest/doctest.h>

#include <cmath>

#include "fusetrack/cuda_backend.h"
#include "fusetrack/momentum_acceptance.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in its namespace.
namespace test_gpu_momentum_acceptance {

TEST_CASE("momentum acceptance: CPU and GPU give the same acceptance with fma=off" * doctest::test_suite("da")) {
  ft::Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  // Half the RF wavelength (C = 161.6 m, h = 8): outside the stationary bucket zeta runs past it.
  ft::GlobalLimits limits = lattice.limits();
  limits.turn_limit[4] = 10.1;
  lattice.set_limits(limits);
  ft::MomentumAcceptanceConfig c;
  c.turns = 500;
  c.delta_max = 0.05;
  c.precision = 1e-4;
  const std::vector<size_t> positions = {0, 60, 121, 176};
  auto cpu = ft::make_cpu_backend(lattice);
  ft::CudaBackend gpu(lattice, ft::CudaBackendOptions{});
  const ft::MomentumAcceptance a = ft::compute_momentum_acceptance(lattice, *cpu, positions, c);
  const ft::MomentumAcceptance b = ft::compute_momentum_acceptance(lattice, gpu, positions, c);
  REQUIRE(a.positive.size() == positions.size());
  REQUIRE(b.positive.size() == positions.size());
  for (size_t k = 0; k < positions.size(); ++k) {
    CAPTURE(a.name[k]);
    MESSAGE(a.name[k] << ": delta+ " << a.positive[k] << ", delta- " << a.negative[k]);
    CHECK(!std::isnan(a.positive_lost[k]));  // the bucket is inside delta_max: a real boundary
    CHECK(a.positive[k] == b.positive[k]);
    CHECK(a.negative[k] == b.negative[k]);
    CHECK(a.positive_lost[k] == b.positive_lost[k]);
    CHECK(a.negative_lost[k] == b.negative_lost[k]);
  }
  CHECK(a.launches == b.launches);
}

}  // namespace test_gpu_momentum_acceptance
