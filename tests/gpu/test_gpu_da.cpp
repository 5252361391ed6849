// DA scans on the GPU reproduce the CPU scan bit for bit with fma=off (loss turns, loss elements,
// final coordinates), with survivors compacted between chunks.
#include <doctest/doctest.h>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/da.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_da.
namespace test_gpu_da {

using namespace ft;

TEST_CASE("DA scan: CPU and GPU bitwise identical with fma=off" * doctest::test_suite("da")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  DaConfig c;
  c.turns = 3000;
  c.angles = 20;
  c.amplitudes = 50;
  c.amplitude_min = 0.001;
  c.amplitude_max = 0.04;
  c.deltas = {0.0, 1e-3};
  c.around_closed_orbit = false;
  DaScan on_cpu = make_da_scan(lattice, c), on_gpu = on_cpu;
  DaRunOptions ro;
  ro.checkpoint_every = 500;
  auto cpu = make_cpu_backend(lattice);
  CudaBackend gpu(lattice, CudaBackendOptions{});
  REQUIRE(run_da_scan(on_cpu, *cpu, ro));
  REQUIRE(run_da_scan(on_gpu, gpu, ro));
  const ParticleComparison cmp = compare_particles(on_cpu.particles, on_gpu.particles);
  MESSAGE("lost " << on_cpu.particles.size() - on_cpu.particles.alive_count() << " of " << on_cpu.particles.size()
                  << "; bitwise equal " << cmp.bitwise_equal << "/" << cmp.coordinates);
  CHECK(on_cpu.particles.alive_count() < on_cpu.particles.size());
  CHECK(on_cpu.particles.alive_count() > 0);
  CHECK(cmp.identical());
  const DaSummary a = summarize_da(on_cpu), b = summarize_da(on_gpu);
  REQUIRE(a.per_angle.size() == b.per_angle.size());
  for (size_t i = 0; i < a.per_angle.size(); ++i) CHECK(a.per_angle[i].da_last_stable == b.per_angle[i].da_last_stable);
}

}  // namespace test_gpu_da
