// Collective runs on the GPU: with fma=off bitwise equal to the CPU (particles, integer profile
// and induced voltage), for both solve methods and both depositions; with fma=on (cuFFT) close.
// The full-size check (10^6 macroparticles, 1000 turns, impedance, RF and losses) runs when
// FUSETRACK_GPU_FULL=1 (the device script sets it); CI has no GPU and reports these as skipped.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "fusetrack/codegen.h"
#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/lattice.h"
#include "fusetrack/registry.h"
#include "support/collective_lattice.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_collective.
namespace test_gpu_collective {

using namespace ft;
using ft::test::CollectiveRingOptions;

namespace {

struct RunResult {
  ParticleComparison particles;
  bool counts_equal = false;
  double field_max_rel = 0.0;
  size_t lost = 0;
};

RunResult cpu_vs_gpu(const Lattice& lattice, size_t n, int64_t turns, FmaMode fma, Dispatch dispatch) {
  const Particles initial = ft::test::collective_bunch(lattice, n);
  Particles cpu = initial, gpu = initial;
  TrackOptions o;
  o.turns = turns;
  o.fma = fma;
  auto cpu_backend = make_cpu_backend(lattice);
  cpu_backend->track(cpu, o);
  CudaBackendOptions co;
  co.dispatch = dispatch;
  CudaBackend gpu_backend(lattice, co);
  gpu_backend.track(gpu, o);
  RunResult r;
  r.particles = compare_particles(cpu, gpu);
  r.lost = cpu.size() - cpu.alive_count();
  const auto a = cpu_backend->collective_snapshots(), b = gpu_backend.collective_snapshots();
  REQUIRE(a.size() == b.size());
  r.counts_equal = true;
  double peak = 0, diff = 0;
  for (size_t c = 0; c < a.size(); ++c) {
    r.counts_equal &= a[c].counts == b[c].counts;
    for (size_t i = 0; i < a[c].field.size(); ++i) {
      peak = std::max(peak, std::fabs(a[c].field[i]));
      diff = std::max(diff, std::fabs(a[c].field[i] - b[c].field[i]));
    }
  }
  r.field_max_rel = peak > 0 ? diff / peak : diff;
  MESSAGE(fmt::format("{} particles, {} turns, fma {}, {}: lost {}, bitwise equal {}/{}, state mismatches {}, "
                      "profiles equal {}, field max rel diff {:.3g}, max rel coordinate diff {:.3g}",
                      n, turns, fma == FmaMode::On ? "on" : "off", dispatch == Dispatch::Baked ? "baked" : "switch",
                      r.lost, r.particles.bitwise_equal, r.particles.coordinates, r.particles.state_mismatches,
                      r.counts_equal, r.field_max_rel, r.particles.max_relative));
  return r;
}

}  // namespace

TEST_CASE("collective fma=off: CPU and GPU bitwise identical (both methods, both depositions, both dispatches)" *
          doctest::test_suite("collective")) {
  for (const char* method : {"frequency", "time"})
    for (const char* deposition : {"linear", "nearest"})
      for (Dispatch dispatch : {Dispatch::Baked, Dispatch::Switch}) {
        CollectiveRingOptions o;
        o.method = method;
        o.deposition = deposition;
        const Lattice lattice = ft::test::collective_ring(o);
        const RunResult r = cpu_vs_gpu(lattice, 20000, 200, FmaMode::Off, dispatch);
        CHECK(r.particles.identical());
        CHECK(r.counts_equal);
        CHECK(r.field_max_rel == 0.0);
        CHECK(r.lost > 0);
      }
}

TEST_CASE("collective fma=on: cuFFT and contraction differ from the CPU by rounding only" *
          doctest::test_suite("collective")) {
  // Rounding differences grow through the synchrotron motion and the self-field; after 50 turns
  // they stay far below the physics (1e-6 relative on every coordinate of surviving particles).
  for (const char* method : {"frequency", "time"}) {
    CollectiveRingOptions o;
    o.method = method;
    const Lattice lattice = ft::test::collective_ring(o);
    const RunResult r = cpu_vs_gpu(lattice, 20000, 50, FmaMode::On, Dispatch::Auto);
    CHECK(r.particles.max_relative < 1e-6);
    CHECK(r.field_max_rel < 1e-6);
  }
}

TEST_CASE(
    "collective fma=off at scale (10^6 x 1000 turns with FUSETRACK_GPU_FULL=1, else 10^5 x 100): impedance, RF, "
    "losses, bitwise" *
    doctest::test_suite("scale")) {
  const char* full = std::getenv("FUSETRACK_GPU_FULL");
  const bool run_full = full && std::string(full) == "1";
  const size_t n = run_full ? 1000000 : 100000;
  const int64_t turns = run_full ? 1000 : 100;
  const Lattice lattice = ft::test::collective_ring();
  const RunResult r = cpu_vs_gpu(lattice, n, turns, FmaMode::Off, Dispatch::Auto);
  CHECK(r.particles.identical());
  CHECK(r.counts_equal);
  CHECK(r.field_max_rel == 0.0);
  CHECK(r.lost > 0);
}

TEST_CASE(
    "collective fma=off: a longitudinal-only ring's kernels load and store only zeta, delta and ptau (rpp and rvv "
    "recomputed): CPU and GPU bitwise, losses included, and the same as loading every coordinate" *
    doctest::test_suite("scale")) {
  ElementRegistry registry;
  registry.load_default_plugins();
  const Lattice lattice = load_lattice(std::string(FT_SOURCE_DIR) + "/lattices/longitudinal_only_bench_ring.json", registry);
  const CollectiveTurnTraffic traffic = collective_turn_traffic(lattice);
  REQUIRE(traffic.wrap.loaded == (FT_COORD_ZETA | FT_COORD_DELTA | FT_COORD_PTAU));
  REQUIRE(traffic.wrap.derived_energy);
  Particles initial = ft::test::collective_bunch(lattice, 20000);
  // Coordinates no kernel loads after the first turn: beyond the global x limit (lost at the first
  // element), not finite (lost at the end of the first turn), large but inside the limit (kept).
  initial.x[0] = 2.0;
  initial.px[1] = std::nan("");
  initial.y[2] = 0.5;
  initial.py[3] = std::numeric_limits<double>::infinity();
  TrackOptions o;
  o.turns = 40;
  o.fma = FmaMode::Off;
  Particles cpu = initial, gpu = initial, gpu_full = initial;
  make_cpu_backend(lattice)->track(cpu, o);
  // Fresh backends: the resonator's multi-turn memory carries over from one track() to the next.
  CudaBackend(lattice, CudaBackendOptions{}).track(gpu, o);
  setenv("FUSETRACK_FULL_LOADS", "1", 1);
  CudaBackend(lattice, CudaBackendOptions{}).track(gpu_full, o);
  unsetenv("FUSETRACK_FULL_LOADS");
  auto report = [&](const char* name, const std::vector<double>& a, const std::vector<double>& b) {
    size_t bad = 0, first = a.size();
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0 && bad++ == 0) first = i;
    if (bad)
      MESSAGE(fmt::format("{}: {} differ; first #{} state {} lost_turn {}: {:a} vs {:a}", name, bad, first,
                          cpu.state[first], cpu.lost_turn[first], a[first], b[first]));
  };
  report("ptau", cpu.ptau, gpu.ptau);
  report("rpp", cpu.rpp, gpu.rpp);
  report("rvv", cpu.rvv, gpu.rvv);
  const ParticleComparison c = compare_particles(cpu, gpu);
  MESSAGE(fmt::format("bitwise equal {}/{}, state mismatches {}", c.bitwise_equal, c.coordinates, c.state_mismatches));
  CHECK(c.identical());
  auto same = [](const auto& a, const auto& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
  };
  for (const Particles* p : {&gpu, &gpu_full}) {
    CHECK(same(cpu.ptau, p->ptau));
    CHECK(same(cpu.rpp, p->rpp));
    CHECK(same(cpu.rvv, p->rvv));
    CHECK(same(cpu.lost_turn, p->lost_turn));
    CHECK(same(cpu.lost_element, p->lost_element));
    CHECK(same(cpu.state, p->state));
  }
  CHECK(compare_particles(gpu, gpu_full).identical());
  CHECK(cpu.state[0] <= 0);
  CHECK(cpu.lost_turn[0] == 0);
  CHECK(cpu.state[1] <= 0);
  CHECK(cpu.state[3] <= 0);
  CHECK(cpu.state[2] > 0);
  CHECK(gpu.y[2] == 0.5);
}

}  // namespace test_gpu_collective
