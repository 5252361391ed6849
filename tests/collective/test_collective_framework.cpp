// The framework side of collective elements: exact integer profiles, thread-count independence,
// the solve methods against each other, multi-turn memory against the analytic wake, and NVRTC
// compilation of every collective kernel variant (no GPU needed).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <random>

#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/compare.h"
#include "fusetrack/da.h"
#include "fusetrack/nvrtc_compiler.h"
#include "support/collective_lattice.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_collective_framework.
namespace test_collective_framework {

using namespace ft;
using ft::test::CollectiveRingOptions;

namespace {

constexpr double kC = 299792458.0;

std::vector<uint64_t> deposit_all(const SliceGrid& g, const std::vector<double>& zetas) {
  std::vector<uint64_t> counts(static_cast<size_t>(g.n_slices), 0);
  for (double z : zetas) {
    int bins[2];
    unsigned long long w[2];
    const int m = profile_deposit(g, z, bins, w);
    for (int q = 0; q < m; ++q) counts[static_cast<size_t>(bins[q])] += w[q];
  }
  return counts;
}

}  // namespace

TEST_CASE("profile deposit: integer weights conserve the charge exactly, particles outside the cuts are excluded") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  std::vector<double> zetas(100000);
  size_t inside = 0;
  for (double& z : zetas) {
    z = u(rng);
    inside += (z >= -1.0 && z < 1.0) ? 1 : 0;
  }
  zetas.push_back(-1.0);          // the lower cut is inside
  zetas.push_back(1.0);           // the upper cut is outside
  zetas.push_back(std::nan(""));  // never deposited
  zetas.push_back(std::nextafter(1.0, 0.0));
  inside += 2;
  for (int linear = 0; linear < 2; ++linear) {
    const SliceGrid g{100, linear, -1.0, 1.0, 100 / 2.0};
    const auto counts = deposit_all(g, zetas);
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    // Exact: every particle between the cuts deposits kProfileUnit, no rounding anywhere.
    CHECK(total == static_cast<uint64_t>(inside) * kProfileUnit);
  }
  // Linear weights split by the distance to the slice centres (slice width 0.02 m).
  const SliceGrid g{100, 1, -1.0, 1.0, 50.0};
  int bins[2];
  unsigned long long w[2];
  REQUIRE(profile_deposit(g, -1.0 + 0.02 * 10.75, bins, w) == 2);  // a quarter past the centre of slice 10
  CHECK(bins[0] == 10);
  CHECK(bins[1] == 11);
  CHECK(w[1] == kProfileUnit / 4);
  CHECK(w[0] == 3 * kProfileUnit / 4);
}

TEST_CASE("collective run: identical particles and profiles with 1 and 2 CPU threads, both solve methods") {
  for (const char* method : {"frequency", "time"}) {
    CollectiveRingOptions o;
    o.method = method;
    const Lattice lattice = ft::test::collective_ring(o);
    const Particles initial = ft::test::collective_bunch(lattice, 4000);
    Particles a = initial, b = initial;
    TrackOptions opt;
    opt.turns = 30;
    opt.threads = 1;
    auto cpu1 = make_cpu_backend(lattice);
    cpu1->track(a, opt);
    opt.threads = 2;
    auto cpu2 = make_cpu_backend(lattice);
    cpu2->track(b, opt);
    CHECK(compare_particles(a, b).identical());
    REQUIRE(cpu1->collective_snapshots().size() == 1);
    CHECK(cpu1->collective_snapshots()[0].counts == cpu2->collective_snapshots()[0].counts);
    CHECK(cpu1->collective_snapshots()[0].field == cpu2->collective_snapshots()[0].field);
    // The aperture took some particles and the impedance acted (the field is not zero).
    CHECK(a.alive_count() < a.size());
    double field_max = 0;
    // collective_snapshots() returns a copy: keep it alive for the loop (a range over a member of the
    // temporary read freed memory; found by AddressSanitizer).
    const std::vector<CollectiveSnapshot> snapshots = cpu1->collective_snapshots();
    for (double v : snapshots[0].field) field_max = std::max(field_max, std::fabs(v));
    MESSAGE(std::string(method), ": max |induced voltage| ", field_max, " V, alive ", a.alive_count(), "/", a.size());
    CHECK(field_max > 1.0);
  }
}

TEST_CASE("solve: the portable FFT (fma off), FFTW (fma on) and the direct convolution agree") {
  // A Gaussian line density on 512 slices; the same profile solved four ways. The portable FFT
  // and FFTW compute the same discrete transform in different orders: rounding only (1e-12 of the
  // peak). The direct convolution with wake samples and the FFT with impedance samples are two
  // discretisations of the same integral: they differ by the sampling of Z (aliasing of the
  // resonator wake beyond the padded window, exp(-alpha T_pad) ~ e^-7 here) and by the half-value
  // convention at t = 0, bounded at 2% of the peak for this broadband resonator.
  std::vector<std::vector<double>> fields;
  for (const char* method : {"frequency", "time"}) {
    for (FmaMode fma : {FmaMode::Off, FmaMode::On}) {
      CollectiveRingOptions o;
      o.method = method;
      o.n_slices = 512;
      o.narrowband = false;
      const Lattice lattice = ft::test::collective_ring(o);
      CollectiveSolver solver(lattice, 6, fma, 1000000);
      const SliceGrid g = solver.slice_grid();
      std::vector<uint64_t> counts(static_cast<size_t>(g.n_slices));
      const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
      for (int i = 0; i < g.n_slices; ++i) {
        const double z = g.zeta_min + (i + 0.5) * dz;
        counts[static_cast<size_t>(i)] =
            static_cast<uint64_t>(std::llround(1e6 * dz / (2.0 * std::sqrt(2 * M_PI)) * std::exp(-z * z / 8.0))) *
            kProfileUnit;
      }
      std::vector<double> field(static_cast<size_t>(g.n_slices));
      solver.solve(counts.data(), field.data());
      fields.push_back(field);
    }
  }
  double peak = 0;
  for (double v : fields[0]) peak = std::max(peak, std::fabs(v));
  REQUIRE(peak > 0);
  auto max_diff = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m / peak;
  };
  MESSAGE("peak ", peak, " V; portable FFT vs FFTW ", max_diff(fields[0], fields[1]), ", direct fma off vs on ",
          max_diff(fields[2], fields[3]), ", frequency vs time ", max_diff(fields[0], fields[2]));
  CHECK(max_diff(fields[0], fields[1]) < 1e-12);
  CHECK(max_diff(fields[2], fields[3]) == 0.0);  // the CPU never contracts: the same loop
  CHECK(max_diff(fields[0], fields[2]) < 2e-2);
}

TEST_CASE("multi-turn memory: the field a turn later equals the analytic resonator wake") {
  // All macroparticles in one slice on turn 1, none on turn 2: the field on turn 2 is the
  // narrowband resonator's memory alone, field_r = -q e N W(T0 + (r - r0) dt), with
  // W(t) = 2 alpha R e^{-alpha t} (cos w t - alpha/w sin w t) evaluated here independently.
  // Agreement to 1e-9 relative: the memory propagates the same exponentials exactly (rounding only).
  CollectiveRingOptions o;
  o.narrowband = false;
  o.r_shunt = 1e6;
  o.resonator_frequency = 13.6e6;
  o.q = 300.0;
  o.method = "time";
  o.n_slices = 200;
  const Lattice lattice = ft::test::collective_ring(o);
  CollectiveSolver solver(lattice, 6, FmaMode::Off, 1000);
  REQUIRE(solver.mode_count() >= 1);
  const int n = solver.n_slices();
  std::vector<uint64_t> counts(static_cast<size_t>(n), 0);
  const int i0 = 120;  // zeta order
  counts[i0] = 1000 * kProfileUnit;
  std::vector<double> field(static_cast<size_t>(n));
  solver.solve(counts.data(), field.data());
  std::fill(counts.begin(), counts.end(), 0);
  solver.solve(counts.data(), field.data());
  const double beta0 = lattice.reference().beta0();
  const double t0 = lattice.circumference() / (beta0 * kC);
  const double wr = 2 * M_PI * o.resonator_frequency, alpha = wr / (2 * o.q), wb = std::sqrt(wr * wr - alpha * alpha);
  const double scale = -1.602176634e-19 * o.intensity;
  double worst = 0, peak = 0;
  for (int i = 0; i < n; ++i) {
    const double t = t0 + (i0 - i) * solver.dt();  // a lower zeta arrives later
    const double w = 2 * alpha * o.r_shunt * std::exp(-alpha * t) * (std::cos(wb * t) - alpha / wb * std::sin(wb * t));
    worst = std::max(worst, std::fabs(field[static_cast<size_t>(i)] - scale * w));
    peak = std::max(peak, std::fabs(scale * w));
  }
  MESSAGE("memory field peak ", peak, " V, max deviation ", worst, " V");
  REQUIRE(peak > 0);
  CHECK(worst / peak < 1e-9);
}

// The GPU runs the radix-2 FFT of the frequency method in groups of stages, each group one launch on
// sets of values in shared memory (fusetrack_fft_stages); here the same grouping on the host, with
// the kernel's index mapping and butterflies, against the stage-by-stage transform, bit for bit.
TEST_CASE("radix-2 FFT: the GPU's groups of stages on sets of values give the stage-by-stage values bit for bit") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const int log2n : {1, 4, 10, 11, 12, 15, 18, 19, 25}) {
    const int n = 1 << log2n;
    std::vector<double> twiddle(static_cast<size_t>(n));
    for (int k = 0; k < n / 2; ++k) {
      twiddle[2 * static_cast<size_t>(k)] = std::cos(2.0 * M_PI * k / n);
      twiddle[2 * static_cast<size_t>(k) + 1] = -std::sin(2.0 * M_PI * k / n);
    }
    std::vector<double> stagewise(2 * static_cast<size_t>(n));
    for (double& v : stagewise) v = u(rng);
    std::vector<double> grouped = stagewise;
    for (int half = 1; half < n; half <<= 1)
      for (int b = 0; b < n / 2; ++b) fft_butterfly(stagewise.data(), twiddle.data(), n, half, b);
    int launches = 0;
    for (int done = 0; done < log2n; ++launches) {
      const FftStageGroup g = fft_stage_group(log2n, done);
      const int set_size = 1 << g.stages, held = set_size * g.sets_per_block;
      REQUIRE(held <= (1 << kFftGroupLog2));
      REQUIRE(n % held == 0);
      std::vector<double> shared(2 * static_cast<size_t>(held));
      for (int block = 0; block < n / held; ++block) {  // the kernel's loops, one block at a time
        const int first_set = block * g.sets_per_block;
        for (int e = 0; e < held; ++e) {
          const int at = fft_set_index(first_set + e % g.sets_per_block, e / g.sets_per_block, g.first_log2, g.stages);
          shared[2 * static_cast<size_t>(e)] = grouped[2 * static_cast<size_t>(at)];
          shared[2 * static_cast<size_t>(e) + 1] = grouped[2 * static_cast<size_t>(at) + 1];
        }
        for (int stage = 0; stage < g.stages; ++stage)
          for (int e = 0; e < held / 2; ++e) {
            const int lane = e % g.sets_per_block;
            fft_set_butterfly(shared.data(), g.sets_per_block, lane, twiddle.data(), n, g.first_log2,
                              fft_set_index(first_set + lane, 0, g.first_log2, g.stages), stage, e / g.sets_per_block);
          }
        for (int e = 0; e < held; ++e) {
          const int at = fft_set_index(first_set + e % g.sets_per_block, e / g.sets_per_block, g.first_log2, g.stages);
          grouped[2 * static_cast<size_t>(at)] = shared[2 * static_cast<size_t>(e)];
          grouped[2 * static_cast<size_t>(at) + 1] = shared[2 * static_cast<size_t>(e) + 1];
        }
      }
      done += g.stages;
    }
    INFO("2^", log2n, " values in ", launches, " launches");
    CHECK(launches == (log2n <= kFftGroupLog2 ? 1 : 1 + (log2n - kFftGroupLog2 + 6) / 7));
    CHECK(std::memcmp(grouped.data(), stagewise.data(), grouped.size() * sizeof(double)) == 0);
  }
}

TEST_CASE("collective lattices: every kernel variant compiles with NVRTC (no GPU needed)") {
  // Two collective elements, one of them first in the sequence, so that segments with and without
  // kicks, deposits and elements all occur.
  for (const char* method : {"frequency", "time"})
    for (const char* deposition : {"linear", "nearest"}) {
      CollectiveRingOptions o;
      o.method = method;
      o.deposition = deposition;
      auto doc = ft::test::collective_ring_json(o);
      doc["sequence"].insert(doc["sequence"].begin(), "impedance");
      const Lattice lattice = lattice_from_json(doc, "two_impedances", ft::test::builtin_registry());
      const TurnProgram program = TurnProgram::build(lattice);
      REQUIRE(program.collective.size() == 2);
      CHECK(program.segments.front().end == 0);
      std::vector<SliceGrid> grids;
      for (size_t c = 0; c < 2; ++c)
        grids.push_back(CollectiveSolver(lattice, program.collective[c], FmaMode::Off, 10).slice_grid());
      KernelCompiler compiler("off");
      for (FmaMode fma : {FmaMode::Off, FmaMode::On})
        for (Dispatch dispatch : {Dispatch::Baked, Dispatch::Switch}) {
          const KernelSource src = generate_collective_kernels(lattice, fma, dispatch, grids);
          CHECK(src.text.find("fusetrack_segment_2") != std::string::npos);
          CompiledKernel k;
          CHECK_NOTHROW(k = compiler.compile(src, 90));
          CHECK(k.cubin.size() > 1000);
        }
    }
}

TEST_CASE(
    "collective kernels: every prefetch mode compiles with NVRTC, auto takes registers only where at most three "
    "coordinates are loaded") {
  // FUSETRACK_PREFETCH (codegen.cpp, segment_prefetch): l1 emits prefetches of the next particle's words,
  // registers loads them one iteration ahead into ft_next_<name>, none does neither; auto (the default)
  // is registers for the longitudinal-only ring (zeta, delta, ptau) and l1 for a 6D ring.
  const Lattice longitudinal = ft::test::bundled_lattice("longitudinal_only_bench_ring.json");
  const Lattice six_d = lattice_from_json(ft::test::collective_ring_json(), "ring6d", ft::test::builtin_registry());
  const KernelCompiler compiler("off");
  const auto source = [](const Lattice& lattice, const char* mode) {
    if (mode)
      setenv("FUSETRACK_PREFETCH", mode, 1);
    else
      unsetenv("FUSETRACK_PREFETCH");
    const TurnProgram program = TurnProgram::build(lattice);
    std::vector<SliceGrid> grids;
    for (size_t c : program.collective) grids.push_back(CollectiveSolver(lattice, c, FmaMode::Off, 10).slice_grid());
    KernelSource src = generate_collective_kernels(lattice, FmaMode::Off, Dispatch::Baked, grids);
    unsetenv("FUSETRACK_PREFETCH");
    return src;
  };
  const auto form = [](const KernelSource& src) {
    const bool l1 = src.text.find("ft::prefetch_l1(P.zeta") != std::string::npos;
    const bool registers = src.text.find("ft_next_zeta = P.zeta[ft_j]") != std::string::npos;
    return l1 && registers ? "both" : l1 ? "l1" : registers ? "registers" : "none";
  };
  for (const char* mode : {"none", "l1", "registers", "auto"})
    for (const Lattice* lattice : {&longitudinal, &six_d}) {
      CAPTURE(mode);
      CAPTURE(lattice == &longitudinal);
      const KernelSource src = source(*lattice, mode);
      const std::string expected = std::string(mode) != "auto" ? mode : lattice == &longitudinal ? "registers" : "l1";
      CHECK(form(src) == expected);
      CompiledKernel k;
      CHECK_NOTHROW(k = compiler.compile(src, 90));
      CHECK(k.cubin.size() > 1000);
    }
  CHECK(std::string(form(source(longitudinal, nullptr))) == "registers");  // the default is auto
  CHECK(std::string(form(source(six_d, nullptr))) == "l1");
}

TEST_CASE("a collective lattice starting and ending with collective elements tracks on the CPU") {
  auto doc = ft::test::collective_ring_json();
  doc["sequence"].insert(doc["sequence"].begin(), "impedance");
  doc["sequence"].push_back("impedance");
  const Lattice lattice = lattice_from_json(doc, "three_impedances", ft::test::builtin_registry());
  Particles p = ft::test::collective_bunch(lattice, 500);
  TrackOptions o;
  o.turns = 5;
  auto cpu = make_cpu_backend(lattice);
  cpu->track(p, o);
  CHECK(cpu->collective_snapshots().size() == 3);
  CHECK(p.alive_count() > 0);
  // Single-particle tracking of the same lattice (collective = false) skips the impedances.
  Particles q = ft::test::collective_bunch(lattice, 500);
  o.collective = false;
  CHECK_NOTHROW(make_cpu_backend(lattice)->track(q, o));
}

TEST_CASE("a DA scan of a lattice with a collective element is refused, naming the element") {
  // Decision (docs: Collective effects): DA scans track independent test particles; a bunch
  // profile of a grid of initial conditions has no meaning, so the scan is refused, not run.
  const Lattice lattice = ft::test::collective_ring();
  DaConfig config;
  config.turns = 10;
  config.angles = 3;
  config.amplitudes = 4;
  config.around_closed_orbit = false;
  const std::string message = ft::test::error_message([&] { make_da_scan(lattice, config); });
  CHECK(message.find("collective_ring") != std::string::npos);
  CHECK(message.find("'impedance'") != std::string::npos);
  CHECK(message.find("LongitudinalImpedance") != std::string::npos);
  CHECK(message.find("dynamic-aperture scan") != std::string::npos);
}

}  // namespace test_collective_framework
