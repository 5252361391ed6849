// CPU == GPU bit for bit with fma=off, for every element type and every bundled ring, over
// 1,000 turns with 10^4 particles spread across the aperture (some of them lost). With fma=on
// the difference is reported and bounded for stable particles.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/compare.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/cuda_backend.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_reproduction.
namespace test_gpu_reproduction {

using namespace ft;

namespace {

Particles spread_particles(const Lattice& lattice, double amplitude, size_t side = 100) {
  return make_grid(lattice.reference().beta0(), -amplitude, amplitude, side, -amplitude, amplitude, side, 2e-4);
}

ParticleComparison cpu_vs_gpu(const Lattice& lattice, Particles initial, int64_t turns, FmaMode fma,
                              Dispatch dispatch = Dispatch::Auto) {
  Particles cpu = initial, gpu = initial;
  TrackOptions o;
  o.turns = turns;
  o.fma = fma;
  make_cpu_backend(lattice)->track(cpu, o);
  CudaBackendOptions co;
  co.dispatch = dispatch;
  CudaBackend backend(lattice, co);
  backend.track(gpu, o);
  const ParticleComparison c = compare_particles(cpu, gpu);
  MESSAGE(fmt::format("{}: {} particles, {} turns, fma {}, lost {}: bitwise equal {}/{}, state mismatches {}, max ulp {}, "
                      "max rel {:.3g}",
                      lattice.source_file().empty() ? "lattice" : lattice.source_file(), initial.size(), turns,
                      fma == FmaMode::On ? "on" : "off", cpu.size() - cpu.alive_count(), c.bitwise_equal,
                      c.coordinates, c.state_mismatches, c.max_ulp, c.max_relative));
  return c;
}

/// The FODO ring with one instance of `type` (small sample strengths) inserted after the first cell.
Lattice ring_with(const ElementType& type) {
  const nlohmann::ordered_json ring = ft::test::parse_bundled("fodo_ring.json");
  for (const auto& fields : ft::test::sample_candidates(type, 2e-3)) {
    nlohmann::ordered_json doc = ring;
    nlohmann::ordered_json def = fields;
    def["type"] = type.name;
    doc["elements"]["under_test"] = def;
    doc["sequence"] = nlohmann::ordered_json::array({nlohmann::ordered_json{{"line", "cell"}, {"repeat", 8}}, "under_test",
                                                     nlohmann::ordered_json{{"line", "cell"}, {"repeat", 8}}});
    try {
      return lattice_from_json(doc, "fodo_ring+" + type.name, ft::test::builtin_registry());
    } catch (const InputError&) {
    }
  }
  throw Error("no valid sample of " + type.name);
}

}  // namespace

TEST_CASE("fma=off: every element type reproduces bitwise on the GPU (10^4 particles, 1000 turns)" *
          doctest::test_suite("elements")) {
  for (const ElementType* type : ft::test::builtin_registry().types()) {
    if (type->is_collective()) continue;  // bunch-wide: tests/gpu/test_gpu_collective.cpp
    CAPTURE(type->name);
    const Lattice lattice = ring_with(*type);
    const ParticleComparison c = cpu_vs_gpu(lattice, spread_particles(lattice, 0.03), 1000, FmaMode::Off);
    CHECK(c.identical());
  }
}

TEST_CASE("fma=off: bundled rings reproduce bitwise in every dispatch mode" * doctest::test_suite("rings")) {
  for (const auto& entry : std::filesystem::directory_iterator(ft::test::source_path("lattices"))) {
    if (entry.path().extension() != ".json") continue;
    CAPTURE(entry.path().string());
    const Lattice lattice = load_lattice(entry.path().string(), ft::test::builtin_registry());
    // Long lattices: fewer turns (the CPU side), and no baked form (never chosen for them). Rings with collective
    // elements: 10 turns, as the CPU's impedance FFT (up to 4M points per turn for the benchmark rings, about a
    // second) sets the time; the collective test groups track them longer.
    const bool long_lattice = !bakeable(lattice);
    const int64_t turns = lattice.has_collective() ? 10 : long_lattice ? 20 : 1000;
    for (Dispatch dispatch : {Dispatch::Switch, Dispatch::Staged, Dispatch::Baked}) {
      if (long_lattice && dispatch == Dispatch::Baked) continue;
      const ParticleComparison c = cpu_vs_gpu(lattice, spread_particles(lattice, 0.03), turns, FmaMode::Off, dispatch);
      CHECK(c.identical());
    }
  }
}

TEST_CASE("fma=on: difference from the CPU is rounding-level for stable particles" * doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("fodo_ring.json");
  // Linear ring, small amplitudes: every particle is stable.
  const ParticleComparison c = cpu_vs_gpu(lattice, spread_particles(lattice, 0.005), 1000, FmaMode::On);
  CHECK(c.state_mismatches == 0);
  CHECK(c.max_relative < 1e-9);
}

TEST_CASE("the sextupole ring loses some particles and keeps others (the reproduction test covers both)" *
          doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  Particles p = spread_particles(lattice, 0.03);
  TrackOptions o;
  o.turns = 1000;
  CudaBackend backend(lattice, CudaBackendOptions{});
  backend.track(p, o);
  CHECK(p.alive_count() > p.size() / 10);
  CHECK(p.alive_count() < p.size());
}

TEST_CASE("switch motifs: particles lost after an element inside a motif occurrence equal the CPU's" *
          doctest::test_suite("da")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  REQUIRE(src.motif_at.size() == lattice.sequence().size());
  // Each element's place in its motif occurrence (0: the first, or in none).
  std::vector<uint32_t> place(lattice.sequence().size(), 0);
  for (size_t e = 0; e < src.motif_at.size(); ++e)
    for (uint32_t j = 1; j < (src.motif_at[e] & 0xffu); ++j) place[e + j] = j;
  const Particles initial = spread_particles(lattice, 0.03);
  Particles cpu = initial;
  TrackOptions o;
  o.turns = 300;
  o.fma = FmaMode::Off;
  make_cpu_backend(lattice)->track(cpu, o);
  size_t lost = 0, inside = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu.state[i] > 0) continue;
    ++lost;
    const int64_t e = cpu.lost_element[i];
    if (e >= 0 && e + 1 < static_cast<int64_t>(place.size()) && place[static_cast<size_t>(e)] > 0) ++inside;
  }
  MESSAGE(fmt::format("{} of {} particles lost in 300 turns, {} of them after an element inside a motif occurrence",
                      lost, cpu.size(), inside));
  CHECK(inside > 0);
  REQUIRE(src.few_particles_form);
  // Both kernel forms: the checked one (a branch after every element) and the one for few particles
  // (occurrences without a branch, replayed element by element for a particle lost inside one).
  for (int few_form : {0, 1}) {
    CAPTURE(few_form);
    Particles gpu = initial;
    CudaBackendOptions co;
    co.dispatch = Dispatch::Switch;
    co.few_particles_form = few_form;
    CudaBackend backend(lattice, co);
    backend.track(gpu, o);
    CHECK(compare_particles(cpu, gpu).identical());
  }
}

TEST_CASE("GPU run: kernel cache miss then hit, corrupt entry rebuilt, same results" * doctest::test_suite("quick")) {
  const auto dir = ft::test::temp_dir("gpu_cache");
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  CudaBackendOptions co;
  co.cache_dir = dir.string();
  TrackOptions o;
  o.turns = 100;
  Particles a = spread_particles(lattice, 0.02, 30), b = a, c = a;
  {
    CudaBackend first(lattice, co);
    first.track(a, o);
    CHECK_FALSE(first.last_stats().kernel_from_cache);
  }
  {
    CudaBackend second(lattice, co);
    second.track(b, o);
    CHECK(second.last_stats().kernel_from_cache);
  }
  for (const auto& f : std::filesystem::directory_iterator(dir)) std::filesystem::resize_file(f.path(), 40);
  {
    CudaBackend third(lattice, co);
    third.track(c, o);
    CHECK_FALSE(third.last_stats().kernel_from_cache);
  }
  CHECK(compare_particles(a, b).identical());
  CHECK(compare_particles(a, c).identical());
}

TEST_CASE("per-element launches give the fused kernel's result" * doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  Particles fused = spread_particles(lattice, 0.03, 40), per_element = fused;
  TrackOptions o;
  o.turns = 50;
  CudaBackend backend(lattice, CudaBackendOptions{});
  backend.track(fused, o);
  backend.track_per_element(per_element, o);
  CHECK(compare_particles(fused, per_element).identical());
}

TEST_CASE("callbacks every K turns see the same particles as an uninterrupted run" * doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  Particles whole = spread_particles(lattice, 0.03, 40), chunked = whole;
  TrackOptions o;
  o.turns = 200;
  CudaBackend backend(lattice, CudaBackendOptions{});
  backend.track(whole, o);
  int calls = 0;
  o.callback_every = 50;
  o.callback = [&](int64_t, const Particles&) { return ++calls > 0; };
  backend.track(chunked, o);
  CHECK(calls == 4);
  CHECK(compare_particles(whole, chunked).identical());
}

TEST_CASE("chunking when device memory is short gives identical results" * doctest::test_suite("quick")) {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  Particles whole = spread_particles(lattice, 0.03, 40), chunked = whole;
  TrackOptions o;
  o.turns = 100;
  CudaBackend backend(lattice, CudaBackendOptions{});
  backend.track(whole, o);
  CudaBackendOptions small;
  small.max_resident_particles = 333;
  CudaBackend chunky(lattice, small);
  chunky.track(chunked, o);
  CHECK(chunky.last_stats().chunks == (whole.size() + 332) / 333);
  CHECK(compare_particles(whole, chunked).identical());
}

}  // namespace test_gpu_reproduction
