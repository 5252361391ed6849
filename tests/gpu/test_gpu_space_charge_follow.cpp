// Frozen space-charge sizes that follow the beam (ft::run_tracking with TrackRunOptions::space_charge)
// on the GPU: every update re-uploads the switch kernel's parameter table; with fma off the run equals
// the CPU backend's bit for bit, sizes included.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/optics.h"
#include "fusetrack/session.h"
#include "fusetrack/space_charge_install.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_space_charge_follow.
namespace test_gpu_space_charge_follow {

namespace {

ft::Lattice ring_with_space_charge() { return ft::test::space_charge_ring(16); }

ft::TrackRun follow_run(ft::Lattice& ring, ft::Backend& backend, ft::Particles& p) {
  ft::TrackRunOptions o;
  o.turns = 30;
  o.fma = ft::FmaMode::Off;
  o.progress = "off";
  o.space_charge.every = 7;  // updates at 0, 7, 14, 21, 28
  o.space_charge.lattice = &ring;
  return ft::run_tracking(ring, backend, p, o);
}

}  // namespace

TEST_CASE("frozen space charge with sizes that follow the beam: GPU (switch, fma off) equals the CPU bitwise" *
          doctest::test_suite("space-charge")) {
  ft::GaussianBunchSpec spec;
  spec.count = 20000;
  spec.emittance_nx = 4e-6;  // twice the installation's: the updates change the sizes
  spec.emittance_ny = 3e-6;
  spec.sigma_zeta = 8.0;
  spec.sigma_delta = 1e-3;
  spec.seed = 5;
  ft::Lattice cpu_ring = ring_with_space_charge(), gpu_ring = ring_with_space_charge();
  ft::Particles cpu = ft::make_matched_gaussian(cpu_ring, spec), gpu = cpu;
  auto cpu_backend = ft::make_cpu_backend(cpu_ring);
  const ft::TrackRun a = follow_run(cpu_ring, *cpu_backend, cpu);
  ft::CudaBackendOptions co;
  co.dispatch = ft::Dispatch::Switch;
  ft::CudaBackend gpu_backend(gpu_ring, co);
  const ft::TrackRun b = follow_run(gpu_ring, gpu_backend, gpu);
  const ft::ParticleComparison c = ft::compare_particles(cpu, gpu);
  MESSAGE(fmt::format("{} updates; bitwise equal {}/{}, state mismatches {}", b.space_charge_updates.size(),
                      c.bitwise_equal, c.coordinates, c.state_mismatches));
  CHECK(c.identical());
  REQUIRE(a.space_charge_updates.size() == 5);
  REQUIRE(b.space_charge_updates.size() == a.space_charge_updates.size());
  for (size_t u = 0; u < a.space_charge_updates.size(); ++u)
    for (size_t e = 0; e < a.space_charge_updates[u].sizes.size(); ++e) {
      CHECK(a.space_charge_updates[u].sizes[e].sigma_x == b.space_charge_updates[u].sizes[e].sigma_x);
      CHECK(a.space_charge_updates[u].sizes[e].sigma_y == b.space_charge_updates[u].sizes[e].sigma_y);
    }
  // The sizes did follow the beam: larger than the installation's (twice the emittance).
  REQUIRE_FALSE(a.space_charge_elements.empty());
  const double installed = ring_with_space_charge().field(a.space_charge_elements[0].definition, "sigma_x");
  CHECK(a.space_charge_updates.back().sizes[0].sigma_x > 1.2 * installed);
}

}  // namespace test_gpu_space_charge_follow
