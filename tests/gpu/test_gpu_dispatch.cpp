// Auto dispatch measures its candidate forms (switch, staged, baked when short) on a sample of the
// run and runs the fastest; whichever it picks, fma=off results equal the CPU's bit for bit.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_dispatch.
namespace test_gpu_dispatch {

using namespace ft;

TEST_CASE("auto dispatch: the form measured fastest runs, and reproduces the CPU bitwise" * doctest::test_suite("da")) {
  const Lattice lattice = lattice_from_json(ft::test::parse_bundled("thin_collider_12k.json"), "thin_collider_12k",
                                            ft::test::builtin_registry());
  const Particles initial = make_grid(lattice.reference().beta0(), -2e-3, 2e-3, 40, -2e-3, 2e-3, 40, 1e-4);
  TrackOptions o;
  o.turns = 3;
  o.fma = FmaMode::Off;
  Particles cpu = initial;
  make_cpu_backend(lattice)->track(cpu, o);

  CudaBackendOptions co;
  co.dispatch = Dispatch::Auto;
  co.always_measure = true;
  CudaBackend gpu(lattice, co);
  Particles tracked = initial;
  gpu.track(tracked, o);
  const auto& measured = gpu.last_stats().measured_element_passes_per_s;
  REQUIRE(measured.size() >= 2);  // switch and staged at least (the ring is too long to bake)
  // A copy: the statistics (and `measured`) are replaced by the next run.
  const KernelForm best = std::max_element(measured.begin(), measured.end(), [](const auto& a, const auto& b) {
                            return a.second < b.second;
                          })->first;
  for (const auto& [form, rate] : measured) {
    MESSAGE(fmt::format("{}: {:.4g} element-passes/s", kernel_form_name(form), rate));
    CHECK(rate > 0.0);
  }
  CHECK(gpu.last_stats().form.dispatch == best.dispatch);
  CHECK(compare_particles(cpu, tracked).identical());
  // The choice is remembered: the next run of the same size measures nothing.
  Particles again = initial;
  gpu.track(again, o);
  CHECK(gpu.last_stats().measured_element_passes_per_s.empty());
  CHECK(gpu.last_stats().form.dispatch == best.dispatch);
  CHECK(compare_particles(cpu, again).identical());
}

}  // namespace test_gpu_dispatch
