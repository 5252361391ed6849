// Slice-moment collective elements (TransverseWake, TransverseDamper) on the GPU: the segment kernels
// deposit the integer slice moments (weight and fixed-point x, px, y, py per slice, block-local in shared
// memory) and kick with the slice kicks that the host solves with the CPU backend's code
// (MomentsCollectiveSolver). With fma=off the particles equal the CPU's bit for bit (a wake first in the
// sequence so that the wrap kernel runs, a damper after it, both dispatches, with and without per-turn
// callbacks); with fma=on close.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "support/registry.h"
#include "support/wake_test_ring.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_transverse_wake.
namespace test_gpu_transverse_wake {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

/// Two thin-quadrupole FODO cells (160 m) with a TransverseWake first (a flat-chamber resonator and a
/// resistive wall, every component, 3 turns of memory) and a slice-by-slice TransverseDamper after qd.
Lattice wake_ring() {
  json sources = json::array();
  sources.push_back({{"type", "Resonator"}, {"r_shunt", 1e6}, {"q", 1.0}, {"frequency", 1e9}, {"chamber", "flat"}});
  sources.push_back({{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 40},     {"zeta_min", -0.6},    {"zeta_max", 0.6},
               {"intensity", 3e11},        {"memory_turns", 3},  {"quadrupolar_x", 1},  {"quadrupolar_y", 1},
               {"longitudinal", 1},        {"sources", sources}};
  json damper = {{"type", "TransverseDamper"}, {"gain_turns", 20.0}, {"zeta_min", -0.6}, {"zeta_max", 0.6},
                 {"n_slices", 8}};
  const json doc =
      ft::test::wake_test_ring({{"wake", wake}, {"damper", damper}}, {"wake"}, 0.01, -0.02, 26e9, "damper");
  return lattice_from_json(doc, "gpu_wake_ring.json", ft::test::builtin_registry());
}

Particles kicked_bunch(double beta0, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i)
    p.set(i, 1e-3 + 1e-3 * g(rng), 2e-5 * g(rng), -5e-4 + 1e-3 * g(rng), 2e-5 * g(rng), 0.15 * g(rng), 1e-4 * g(rng));
  return p;
}

}  // namespace

TEST_CASE("transverse wake and damper on the GPU: fma off equals the CPU bitwise (both dispatches)" *
          doctest::test_suite("wakes")) {
  const Lattice lattice = wake_ring();
  const Particles initial = kicked_bunch(lattice.reference().beta0(), 4000, 3);
  for (Dispatch dispatch : {Dispatch::Baked, Dispatch::Switch})
    for (int64_t callback_every : {int64_t(0), int64_t(2)}) {
      TrackOptions o;
      o.turns = 6;
      o.fma = FmaMode::Off;
      o.callback_every = callback_every;  // 2: the tail of every second turn runs unfused
      if (callback_every > 0) o.callback = [](int64_t, const Particles&) { return true; };
      Particles cpu = initial, gpu = initial;
      make_cpu_backend(lattice)->track(cpu, o);
      CudaBackendOptions co;
      co.dispatch = dispatch;
      CudaBackend gpu_backend(lattice, co);
      gpu_backend.track(gpu, o);
      const ParticleComparison c = compare_particles(cpu, gpu);
      MESSAGE(fmt::format("{} particles, 6 turns, {}, callback every {}: bitwise equal {}/{}, state mismatches {}, "
                          "max rel diff {:.3g}",
                          initial.size(), dispatch == Dispatch::Baked ? "baked" : "switch", callback_every,
                          c.bitwise_equal, c.coordinates, c.state_mismatches, c.max_relative));
      CHECK(c.identical());
    }
}

TEST_CASE("transverse wake and damper on the GPU: fma on is close to the CPU" * doctest::test_suite("wakes")) {
  const Lattice lattice = wake_ring();
  const Particles initial = kicked_bunch(lattice.reference().beta0(), 4000, 5);
  TrackOptions o;
  o.turns = 6;
  o.fma = FmaMode::On;
  Particles cpu = initial, gpu = initial;
  make_cpu_backend(lattice)->track(cpu, o);
  CudaBackend gpu_backend(lattice, CudaBackendOptions{});
  gpu_backend.track(gpu, o);
  const ParticleComparison c = compare_particles(cpu, gpu);
  MESSAGE(fmt::format("fma on: bitwise equal {}/{}, state mismatches {}, max rel coordinate diff {:.3g}", c.bitwise_equal,
                      c.coordinates, c.state_mismatches, c.max_relative));
  CHECK(c.state_mismatches == 0);
  CHECK(c.max_relative < 1e-6);
}

// A benchmark of the GPU's wakes, not part of the suite (reported as skipped; its times depend on the machine):
//   build-gpu/bin/test_gpu -tc="transverse wake on the GPU: benchmark*" --no-skip
// One bunch of 10^6 macroparticles (FUSETRACK_WAKE_PARTICLES), 500 slices, a resonator and the resistive
// wall with 100 turns of memory, in the FODO ring above: turns per second on the GPU and on the CPU backend
// with every hardware thread, and the GPU's time split (segment kernels with deposit and kick; the host
// solve with the moments' download and the kicks' upload). FUSETRACK_WAKE_CONVOLUTION=fft: the element's
// FFT convolution (default: direct).
TEST_CASE("transverse wake on the GPU: benchmark, 10^6 macroparticles, 500 slices, 100 turns of memory" *
          doctest::test_suite("benchmark") * doctest::skip()) {
  const size_t n =
      std::getenv("FUSETRACK_WAKE_PARTICLES") ? std::stoull(std::getenv("FUSETRACK_WAKE_PARTICLES")) : 1000000;
  json sources = json::array();
  sources.push_back({{"type", "Resonator"}, {"r_shunt", 1e6}, {"q", 1.0}, {"frequency", 1e9}});
  sources.push_back({{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 500},    {"zeta_min", -0.6}, {"zeta_max", 0.6},
               {"intensity", 1e11},        {"memory_turns", 100}, {"sources", sources}};
  const char* convolution = std::getenv("FUSETRACK_WAKE_CONVOLUTION");
  if (convolution) wake["convolution"] = convolution;
  const json doc = ft::test::wake_test_ring({{"wake", wake}}, {"wake"}, 0.01, -0.02);
  const Lattice lattice = lattice_from_json(doc, "bench_wake.json", ft::test::builtin_registry());
  const Particles initial = kicked_bunch(lattice.reference().beta0(), n, 11);
  const int turns = 120;  // the memory fills after 100
  for (FmaMode fma : {FmaMode::Off, FmaMode::On}) {
    TrackOptions o;
    o.fma = fma;
    o.turns = 1;
    CudaBackendOptions co;
    co.time_phases = true;
    CudaBackend gpu(lattice, co);
    Particles g = initial;
    gpu.track(g, o);  // compile, set up, warm up
    o.turns = turns;
    auto t0 = std::chrono::steady_clock::now();
    gpu.track(g, o);
    const double gpu_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const CudaRunStats& s = gpu.last_stats();
    Particles c = initial;
    auto cpu = make_cpu_backend(lattice);
    o.turns = 1;
    cpu->track(c, o);
    o.turns = turns;
    t0 = std::chrono::steady_clock::now();
    cpu->track(c, o);
    const double cpu_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(fmt::format("fma {}: {} macroparticles, 500 slices, 100 turns of memory ({} convolution), {} turns: GPU "
                        "{:.1f} turns/s "
                        "(segment kernels {:.3f} ms/turn, solve with transfers {:.3f} ms/turn), CPU ({} threads) "
                        "{:.1f} turns/s: GPU / CPU {:.2f}",
                        fma == FmaMode::On ? "on" : "off", n, convolution ? convolution : "direct", turns,
                        turns / gpu_wall, 1e3 * s.segment_seconds / turns,
                        1e3 * s.solve_seconds / turns, std::thread::hardware_concurrency(), turns / cpu_wall,
                        cpu_wall / gpu_wall));
    if (fma == FmaMode::Off) CHECK(compare_particles(c, g).identical());
  }
}

}  // namespace test_gpu_transverse_wake
