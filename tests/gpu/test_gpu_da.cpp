// DA scans on the GPU reproduce the CPU scan bit for bit with fma=off (loss turns, loss elements,
// final coordinates), with survivors compacted between chunks.
#include <doctest/doctest.h>

#include <cstring>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/da.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_da.
namespace test_gpu_da {

using namespace ft;

namespace {

/// Every array of the particles bit for bit: the nine coordinates, the states, loss turns and loss elements.
bool same_bits(const Particles& a, const Particles& b) {
  auto same = [](const auto& u, const auto& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])) == 0;
  };
  return same(a.x, b.x) && same(a.px, b.px) && same(a.y, b.y) && same(a.py, b.py) && same(a.zeta, b.zeta) &&
         same(a.delta, b.delta) && same(a.ptau, b.ptau) && same(a.rpp, b.rpp) && same(a.rvv, b.rvv) &&
         same(a.state, b.state) && same(a.lost_turn, b.lost_turn) && same(a.lost_element, b.lost_element);
}

}  // namespace

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

TEST_CASE(
    "two particles per thread: the bits of one per thread in both kernel forms with an odd count and particles "
    "lost before the run; callbacks; per-element launches" *
    doctest::test_suite("da")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  // 99 x 99 (odd) across the aperture: many lost over the run, some inside a motif occurrence; every 97th
  // particle lost before it (left as it is, and the partner of a live one in some threads).
  Particles initial = make_grid(lattice.reference().beta0(), -0.03, 0.03, 99, -0.03, 0.03, 99, 2e-4);
  for (size_t i = 0; i < initial.size(); i += 97) {
    initial.state[i] = kLostOnAperture;
    initial.lost_turn[i] = 0;
    initial.lost_element[i] = 3;
  }
  TrackOptions o;
  o.turns = 300;
  o.fma = FmaMode::Off;
  Particles cpu = initial;
  make_cpu_backend(lattice)->track(cpu, o);
  const size_t lost_before = (initial.size() + 96) / 97;
  MESSAGE("lost " << cpu.size() - cpu.alive_count() - lost_before << " of " << initial.size() - lost_before);
  CHECK(cpu.alive_count() + lost_before < initial.size());
  CHECK(cpu.alive_count() > initial.size() / 10);
  for (int few_form : {0, 1}) {
    CAPTURE(few_form);
    Particles one = initial, two = initial;
    for (int particles_per_thread : {1, 2}) {
      CudaBackendOptions co;
      co.dispatch = Dispatch::Switch;
      co.few_particles_form = few_form;
      co.particles_per_thread = particles_per_thread;
      CudaBackend gpu(lattice, co);
      gpu.track(particles_per_thread == 1 ? one : two, o);
      CHECK(gpu.last_stats().form.particles_per_thread == particles_per_thread);
    }
    CHECK(compare_particles(cpu, one).identical());
    CHECK(same_bits(one, two));
  }
  // A run resumed every 7 turns (callbacks), and one launch per element and turn (segments of one element).
  CudaBackendOptions co;
  co.dispatch = Dispatch::Switch;
  co.particles_per_thread = 2;
  CudaBackend gpu(lattice, co);
  Particles chunked = initial;
  TrackOptions every7 = o;
  every7.callback_every = 7;
  every7.callback = [](int64_t, const Particles&) { return true; };
  gpu.track(chunked, every7);
  CHECK(compare_particles(cpu, chunked).identical());
  Particles per_element = initial;
  TrackOptions short_run = o;
  short_run.turns = 20;
  gpu.track_per_element(per_element, short_run);
  Particles fused = initial;
  CudaBackend one_per_thread(lattice, CudaBackendOptions{});
  one_per_thread.track(fused, short_run);
  CHECK(same_bits(fused, per_element));
}

TEST_CASE("two particles per thread: a DA scan equals one particle per thread and the CPU bit for bit" *
          doctest::test_suite("da")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  DaConfig c;
  c.turns = 2000;
  c.angles = 19;
  c.amplitudes = 41;
  c.amplitude_min = 0.001;
  c.amplitude_max = 0.04;
  c.deltas = {0.0, 1e-3};
  c.around_closed_orbit = false;
  DaScan on_cpu = make_da_scan(lattice, c), one = on_cpu, two = on_cpu;
  DaRunOptions ro;
  ro.checkpoint_every = 300;  // survivors compacted between calls: odd and even counts
  auto cpu = make_cpu_backend(lattice);
  REQUIRE(run_da_scan(on_cpu, *cpu, ro));
  CudaBackendOptions co;
  co.dispatch = Dispatch::Switch;  // (auto would bake this short ring: one particle per thread)
  CudaBackend gpu_one(lattice, co);
  co.particles_per_thread = 2;
  CudaBackend gpu_two(lattice, co);
  REQUIRE(run_da_scan(one, gpu_one, ro));
  REQUIRE(run_da_scan(two, gpu_two, ro));
  CHECK(gpu_two.last_stats().form.particles_per_thread == 2);
  MESSAGE("lost " << on_cpu.particles.size() - on_cpu.particles.alive_count() << " of " << on_cpu.particles.size()
                  << "; two per thread: " << kernel_form_name(gpu_two.last_stats().form));
  CHECK(on_cpu.particles.alive_count() < on_cpu.particles.size());
  CHECK(compare_particles(on_cpu.particles, two.particles).identical());
  CHECK(same_bits(one.particles, two.particles));
  const DaSummary a = summarize_da(on_cpu), b = summarize_da(two);
  REQUIRE(a.per_angle.size() == b.per_angle.size());
  for (size_t i = 0; i < a.per_angle.size(); ++i) CHECK(a.per_angle[i].da_last_stable == b.per_angle[i].da_last_stable);
}

}  // namespace test_gpu_da
