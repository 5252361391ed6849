// Particle-in-cell space charge (SpaceChargePIC) on the GPU: the segment kernels deposit the integer
// charge grid and kick from the node fields, the Poisson solve runs on the host (the CPU backend's
// GridCollectiveSolver). With fma=off the particles equal the CPU's bit for bit (2.5D with an adapted
// grid, 3D with a fixed one, one element first in the sequence so the wrap kernel runs, both
// dispatches, with and without per-turn callbacks); with fma=on (FFTW on the host for the solve,
// contraction in the kernels) close. The benchmark of the PIC element (2.5D, 10^7 macroparticles,
// 256 x 256 nodes, 64 slices, one element per turn) is a skipped case that
// bench/space_charge/pic_element_breakdown.sh runs with --no-skip.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/cuda_reduction.h"
#include "fusetrack/space_charge.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_space_charge.
namespace test_gpu_space_charge {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

constexpr double kProtonMass = 938272088.16;  // [eV]

/// Two thin-quadrupole FODO cells (160 m) with a 2.5D SpaceChargePIC (adapted grid) first in the
/// sequence and a 3D one (fixed grid) after qd; a strong intensity so that differences show.
Lattice pic_ring(double intensity = 5e11) {
  json sc = {{"type", "SpaceChargePIC"}, {"length", 80.0}, {"intensity", intensity}, {"model", "2.5D"},
             {"nodes_x", 32},            {"nodes_y", 32},  {"nodes_zeta", 8}};
  json sc3 = {{"type", "SpaceChargePIC"}, {"length", 80.0}, {"intensity", intensity}, {"model", "3D"},
              {"nodes_x", 32},            {"nodes_y", 32},  {"nodes_zeta", 16},      {"x_min", -0.03},
              {"x_max", 0.03},            {"y_min", -0.03}, {"y_max", 0.03},         {"zeta_min", -10.0},
              {"zeta_max", 10.0}};
  json doc = {{"fusetrack_lattice", 1},
              {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", 1e9}}},
              {"elements",
               {{"qf_half", {{"type", "Multipole"}, {"knl", {0.0, 0.01}}}},
                {"qd", {{"type", "Multipole"}, {"knl", {0.0, -0.02}}}},
                {"d", {{"type", "Drift"}, {"length", 40.0}}},
                {"sc", sc},
                {"sc3d", sc3}}},
              {"sequence", {"sc", "qf_half", "d", "qd", "sc3d", "d", "qf_half", "qf_half", "d", "qd", "d", "qf_half"}}};
  return lattice_from_json(doc, "gpu_pic_ring.json", ft::test::builtin_registry());
}

/// A Gaussian bunch with rms divergence `sigma_p` in px and py.
Particles gaussian_bunch(double beta0, size_t n, double sigma_x, double sigma_y, double sigma_zeta, uint64_t seed,
                         double sigma_p = 1e-4) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i) {
    const double x = sigma_x * g(rng), px = sigma_p * g(rng), y = sigma_y * g(rng), py = sigma_p * g(rng);
    p.set(i, x, px, y, py, sigma_zeta * g(rng), 0.0);
  }
  return p;
}

/// The particles reordered by grid tile (zeta slice, then y node, then x node, as the deposit's cells are laid
/// out), stable within a tile: the order a GPU code that keeps particles sorted by cell would have.
Particles ordered_by_tile(const Particles& p, const std::array<int, 3>& nodes, const std::array<double, 3>& lo,
                          const std::array<double, 3>& hi) {
  std::vector<uint64_t> key(p.size());
  auto cell = [](double u, double a, double b, int n) {
    const double c = std::floor((u - a) / (b - a) * n);
    return static_cast<uint64_t>(std::clamp(c, 0.0, static_cast<double>(n - 1)));
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const ParticleView v = p.view(i);
    key[i] = (cell(v.zeta, lo[2], hi[2], nodes[2]) * nodes[1] + cell(v.y, lo[1], hi[1], nodes[1])) * nodes[0] +
             cell(v.x, lo[0], hi[0], nodes[0]);
  }
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  Particles sorted(p.size(), p.beta0);
  for (size_t i = 0; i < order.size(); ++i) sorted.store(i, p.view(order[i]));
  return sorted;
}

}  // namespace

TEST_CASE("space charge PIC on the GPU: fma off equals the CPU bitwise (2.5D adapted, 3D fixed, both dispatches)" *
          doctest::test_suite("space-charge")) {
  const Lattice lattice = pic_ring();
  const Particles initial = gaussian_bunch(lattice.reference().beta0(), 4000, 4e-3, 3e-3, 3.0, 3);
  // The last run solves on the host (FUSETRACK_HOST_POISSON, the path of several MPI ranks): its fields
  // go up to the GPU, a node's components side by side, as the GPU solver writes them.
  // Runs with tile_sort_every > 0 order the particles by the 3D element's cells on the GPU (its deposit then
  // sums in shared-memory windows first), with and without callbacks in between.
  struct Run {
    Dispatch dispatch;
    int64_t callback_every;
    bool host_poisson;
    int tile_sort_every;
  };
  for (const Run& run : {Run{Dispatch::Baked, 0, false, 0}, Run{Dispatch::Baked, 2, false, 0},
                         Run{Dispatch::Switch, 0, false, 0}, Run{Dispatch::Switch, 2, false, 0},
                         Run{Dispatch::Switch, 0, true, 0}, Run{Dispatch::Switch, 0, false, 1},
                         Run{Dispatch::Baked, 2, false, 3}}) {
    const Dispatch dispatch = run.dispatch;
    const int64_t callback_every = run.callback_every;
    TrackOptions o;
    o.turns = 6;
    o.fma = FmaMode::Off;
    o.warnings = false;
    o.callback_every = callback_every;  // 2: the tail of every second turn runs unfused
    if (callback_every > 0) o.callback = [](int64_t, const Particles&) { return true; };
    Particles cpu = initial, gpu = initial;
    auto cpu_backend = make_cpu_backend(lattice);
    cpu_backend->track(cpu, o);
    CudaBackendOptions co;
    co.dispatch = dispatch;
    co.tile_sort_every = run.tile_sort_every;
    CudaBackend gpu_backend(lattice, co);
    if (run.host_poisson) setenv("FUSETRACK_HOST_POISSON", "1", 1);
    gpu_backend.track(gpu, o);
    if (run.host_poisson) unsetenv("FUSETRACK_HOST_POISSON");
    const ParticleComparison c = compare_particles(cpu, gpu);
    const auto a = cpu_backend->grid_reports(), b = gpu_backend.grid_reports();
    REQUIRE(a.size() == 2);
    REQUIRE(b.size() == 2);
    MESSAGE(fmt::format("{} particles, 6 turns, {}{}, tile sort every {}, callback every {}: bitwise equal {}/{}, state "
                        "mismatches {}, "
                        "max rel diff {:.3g}; outside the grids CPU {} + {}, GPU {} + {}; 2.5D grid x [{:.6g}, {:.6g}] m",
                        initial.size(), dispatch == Dispatch::Baked ? "baked" : "switch",
                        run.host_poisson ? ", Poisson solve on the host" : "", run.tile_sort_every, callback_every,
                        c.bitwise_equal, c.coordinates, c.state_mismatches, c.max_relative, a[0].outside_total,
                        a[1].outside_total, b[0].outside_total, b[1].outside_total, b[0].min[0], b[0].max[0]));
    CHECK(c.identical());
    CHECK(gpu_backend.last_stats().tile_sorts == (run.tile_sort_every > 0 ? (6 + run.tile_sort_every - 1) / run.tile_sort_every : 0));
    for (size_t k = 0; k < 2; ++k) {
      CHECK(a[k].outside_total == b[k].outside_total);
      CHECK(a[k].min == b[k].min);
      CHECK(a[k].max == b[k].max);
      CHECK(a[k].max_field == b[k].max_field);
    }
  }
}

TEST_CASE(
    "space charge PIC on the GPU: a ring of kTileSortAutoElements PIC elements sorts every turn by default, CPU bits" *
    doctest::test_suite("space-charge")) {
  // The FODO cells with kTileSortAutoElements fixed-grid 2.5D elements spread over them (installed with spacecharge
  // install --model pic in the physics): the default (tile_sort_every = -1) sorts every turn; 0 never; the same bits.
  json elements = {{"qf_half", {{"type", "Multipole"}, {"knl", {0.0, 0.01}}}},
                   {"qd", {{"type", "Multipole"}, {"knl", {0.0, -0.02}}}},
                   {"d", {{"type", "Drift"}, {"length", 160.0 / kTileSortAutoElements}}}};
  json sequence = json::array();
  for (int k = 0; k < kTileSortAutoElements; ++k) {
    const std::string name = fmt::format("sc{}", k);
    elements[name] = {{"type", "SpaceChargePIC"}, {"length", 160.0 / kTileSortAutoElements}, {"intensity", 5e11},
                      {"model", "2.5D"}, {"nodes_x", 16}, {"nodes_y", 16}, {"nodes_zeta", 8},
                      {"x_min", -0.03}, {"x_max", 0.03}, {"y_min", -0.03}, {"y_max", 0.03},
                      {"zeta_min", -10.0}, {"zeta_max", 10.0}};
    sequence.push_back(name);
    if (k == kTileSortAutoElements / 4 || k == 3 * kTileSortAutoElements / 4) sequence.push_back("qf_half");
    if (k == kTileSortAutoElements / 2) sequence.push_back("qd");
    sequence.push_back("d");
  }
  json doc = {{"fusetrack_lattice", 1}, {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", 1e9}}},
              {"elements", elements}, {"sequence", sequence}};
  const Lattice lattice = lattice_from_json(doc, "gpu_pic_ring32.json", ft::test::builtin_registry());
  const Particles initial = gaussian_bunch(lattice.reference().beta0(), 4000, 4e-3, 3e-3, 3.0, 7);
  TrackOptions o;
  o.turns = 4;
  o.fma = FmaMode::Off;
  o.warnings = false;
  Particles cpu = initial;
  make_cpu_backend(lattice)->track(cpu, o);
  for (const int every : {-1, 0}) {
    Particles gpu = initial;
    CudaBackendOptions co;
    co.tile_sort_every = every;
    CudaBackend gpu_backend(lattice, co);
    gpu_backend.track(gpu, o);
    const ParticleComparison c = compare_particles(cpu, gpu);
    MESSAGE(fmt::format("{} PIC elements, tile_sort_every {}: {} sorts in 4 turns; bitwise equal {}/{}", kTileSortAutoElements,
                        every, gpu_backend.last_stats().tile_sorts, c.bitwise_equal, c.coordinates));
    CHECK(c.identical());
    CHECK(gpu_backend.last_stats().tile_sorts == (every < 0 ? 4 : 0));
  }
}

TEST_CASE("space charge PIC on the GPU: fma on is close to the CPU" * doctest::test_suite("space-charge")) {
  const Lattice lattice = pic_ring();
  const Particles initial = gaussian_bunch(lattice.reference().beta0(), 4000, 4e-3, 3e-3, 3.0, 5);
  TrackOptions o;
  o.turns = 6;
  o.fma = FmaMode::On;
  o.warnings = false;
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

// A benchmark, not part of the suite (reported as skipped; its times depend on the machine):
//   build-gpu/bin/test_gpu -tc="space charge PIC on the GPU: benchmark*" --no-skip   (bench/space_charge/pic_element_breakdown.sh)
TEST_CASE("space charge PIC on the GPU: benchmark, 2.5D, 10^7 macroparticles, 256 x 256 x 64, one element per turn" *
          doctest::test_suite("benchmark") * doctest::skip()) {
  const size_t n = std::getenv("FUSETRACK_SC_PARTICLES") ? std::stoull(std::getenv("FUSETRACK_SC_PARTICLES")) : 10000000;
  const int turns = 5;
  // FUSETRACK_SC_INTENSITY: the bunch's protons (default 1e11). The work per particle does not depend on it, but
  // at 1e11 the space-charge kicks of this lattice without focusing push part of the beam off the grid within the
  // 6 turns (reported below): such particles deposit nothing.
  const double intensity =
      std::getenv("FUSETRACK_SC_INTENSITY") ? std::atof(std::getenv("FUSETRACK_SC_INTENSITY")) : 1e11;
  // One fixed-grid element per turn and a drift (the segment's single-particle work); the grid
  // covers +-6 sigma transverse and +-4 sigma in zeta.
  const double sx = 3e-3, sy = 2e-3, sz = 2.0;
  // Tile ordering (it pays only where measured to): the bunch in random order with the GPU's own tile sort
  // (CudaBackendOptions::tile_sort_every: never, every turn, once per run of 5 turns), and sorted by grid tile once
  // on the host before the run without the GPU's sort. The beam is cold, so particles stay in their cells over the
  // run: sorting once keeps them in order for the whole run, an optimistic case for a real ring.
  struct Config {
    bool by_tile;
    int sort_every;
  };
  // FUSETRACK_SC_BENCH_CONFIG (0-3) and FUSETRACK_SC_BENCH_FMA (off, on) run one case only (profiling).
  const char* only_config = std::getenv("FUSETRACK_SC_BENCH_CONFIG");
  const char* only_fma = std::getenv("FUSETRACK_SC_BENCH_FMA");
  const Config configs[] = {Config{false, 0}, Config{false, 1}, Config{false, 5}, Config{true, 0}};
  for (int ci = 0; ci < 4; ++ci)
    for (FmaMode fma : {FmaMode::Off, FmaMode::On}) {
      if (only_config && std::atoi(only_config) != ci) continue;
      if (only_fma && (std::string(only_fma) == "on") != (fma == FmaMode::On)) continue;
      const Config& config = configs[ci];
      const bool by_tile = config.by_tile;
      json sc = {{"type", "SpaceChargePIC"}, {"length", 10.0},   {"intensity", intensity}, {"model", "2.5D"},
                 {"nodes_x", 256},           {"nodes_y", 256},   {"nodes_zeta", 64},       {"x_min", -6 * sx},
                 {"x_max", 6 * sx},          {"y_min", -6 * sy}, {"y_max", 6 * sy},        {"zeta_min", -4 * sz},
                 {"zeta_max", 4 * sz}};
      json doc = {{"fusetrack_lattice", 1},
                  {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", 1e9}}},
                  {"elements", {{"sc", sc}, {"d", {{"type", "Drift"}, {"length", 10.0}}}}},
                  {"sequence", {"d", "sc"}}};
      const Lattice lattice = lattice_from_json(doc, "bench_pic.json", ft::test::builtin_registry());
      // A cold beam (1e-6 rad): over the 6 turns of 10 m drifts it stays on the grid (with 1e-4 rad,
      // as in the tests above, a fifth of it drifted off the grid and deposited nothing).
      Particles p = gaussian_bunch(lattice.reference().beta0(), n, sx, sy, sz, 9, 1e-6);
      if (by_tile) p = ordered_by_tile(p, {256, 256, 64}, {-6 * sx, -6 * sy, -4 * sz}, {6 * sx, 6 * sy, 4 * sz});
      MESSAGE(fmt::format("{}; tile sort on the GPU every {} turns (0: never)",
                          by_tile ? "particles ordered by grid tile (zeta slice, y node, x node) on the host"
                                  : "particles in random order",
                          config.sort_every));
      CudaBackendOptions co;
      co.time_phases = true;
      co.tile_sort_every = config.sort_every;
      CudaBackend gpu(lattice, co);
      TrackOptions o;
      o.turns = 1;
      o.fma = fma;
      o.warnings = false;
      gpu.track(p, o);  // compile, set up, warm up
      o.turns = turns;
      const auto t0 = std::chrono::steady_clock::now();
      gpu.track(p, o);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const CudaRunStats& s = gpu.last_stats();
      // The deposit alone (the same grid and particles, the existing GPU grid deposit kernel).
      ChargeGridReducer reducer(3, {256, 256, 64}, {-6 * sx, -6 * sy, -4 * sz}, {6 * sx, 6 * sy, 4 * sz}, n);
      double deposit_seconds = 0;
      gpu_deposit(reducer, p, 0, &deposit_seconds);
      const double per_turn = (s.segment_seconds + s.solve_seconds + s.tile_sort_seconds) / turns;
      const double segment = s.segment_seconds / turns, solve_host = s.grid_solve_seconds / turns,
                   transfer = s.grid_transfer_seconds / turns;
      // Bytes the element moves on the device per particle (lower bound): the segment kernel reads and
      // writes the particle (9 doubles, state, lost turn/element: 92 bytes each way), the deposit adds
      // 8 integer atomics (8 bytes read + written each), the kick gathers 8 nodes x 2 fields x 8 bytes.
      const double bytes_particle = 2.0 * 92.0, bytes_grid = 8.0 * 16.0 + 8.0 * 16.0;
      const double bandwidth = gpu.copy_bandwidth();
      const double bytes_turn = n * (bytes_particle + bytes_grid);
      MESSAGE(fmt::format(
          "fma {}: {} macroparticles, {} turns, wall {:.3f} s; per element: {:.3f} ms = segment kernel (kick + drift + "
          "deposit) {:.3f} ms [the deposit alone, random order, global atomics: {:.3f} ms] + solve {:.3f} ms (Poisson "
          "solve "
          "{:.3f} ms, on the GPU for one rank, on the host with FUSETRACK_HOST_POISSON=1 or several ranks; grid "
          "down/fields "
          "up {:.3f} ms, {:.1f} MB) + tile sorts {:.3f} ms ({} sorts of {:.3f} ms: counts {:.3f}, slots {:.3f}, move "
          "{:.3f})",
          fma == FmaMode::On ? "on" : "off", n, turns, wall, 1e3 * per_turn, 1e3 * segment, 1e3 * deposit_seconds,
          1e3 * s.solve_seconds / turns, 1e3 * solve_host, 1e3 * transfer, s.grid_bytes_transferred / turns / 1e6,
          1e3 * s.tile_sort_seconds / turns, s.tile_sorts,
          s.tile_sorts ? 1e3 * s.tile_sort_seconds / s.tile_sorts : 0.0,
          1e3 * s.tile_sort_phase_seconds[0] / std::max(s.tile_sorts, 1),
          1e3 * s.tile_sort_phase_seconds[1] / std::max(s.tile_sorts, 1),
          1e3 * s.tile_sort_phase_seconds[2] / std::max(s.tile_sorts, 1)));
      MESSAGE(fmt::format(
          "fma {}: {:.4f} ns per particle per step (element), {:.4f} ns for the segment kernel alone; device bytes per "
          "particle-step >= {:.0f} (particle {:.0f}, grid atomics and gather {:.0f}): {:.2f} GB per step, {:.1f} GB/s "
          "in the segment kernel = {:.1f} % of the measured copy bandwidth {:.0f} GB/s",
          fma == FmaMode::On ? "on" : "off", 1e9 * per_turn / n, 1e9 * segment / n, bytes_particle + bytes_grid,
          bytes_particle, bytes_grid, bytes_turn / 1e9, bytes_turn / segment / 1e9,
          100.0 * bytes_turn / segment / bandwidth, bandwidth / 1e9));
      // The bytes the step must move at least: the particles read and written once (184 bytes each) and the grid's
      // arrays once each way (integer charge, density, the two field components: 8 bytes a node each, written then
      // read): the whole element (segment kernel, solve, sorts) against that HBM bound.
      const double nodes = 256.0 * 256.0 * 64.0, bytes_needed = n * bytes_particle + nodes * 4.0 * 16.0;
      MESSAGE(
          fmt::format("fma {}: the element at {:.1f} % of the HBM bound of the bytes it must move ({:.2f} GB per step: "
                      "{:.3f} ms at the copy bandwidth)",
                      fma == FmaMode::On ? "on" : "off", 100.0 * bytes_needed / bandwidth / per_turn,
                      bytes_needed / 1e9, 1e3 * bytes_needed / bandwidth));
      const auto reports = gpu.grid_reports();
      REQUIRE(reports.size() == 1);
      MESSAGE(fmt::format("outside the grid on the last turn: {} particles; max |E| {:.4g} V/m",
                          reports[0].outside_last, reports[0].max_field));
      CHECK(per_turn > 0);
    }
}

}  // namespace test_gpu_space_charge
