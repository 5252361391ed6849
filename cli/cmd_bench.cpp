// fusetrack bench: throughput of the backends on given lattices, reported as ratios measured
// in one run (element-passes/s and particle-turns/s).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include "cli_common.h"
#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/lattice_optimize.h"

namespace ft::cli {

namespace {

struct BenchArgs {
  CommonOptions common;
  std::vector<double> gpu_particles = {1e4, 1e5, 1e6, 1e7};
  int64_t gpu_turns = 20;
  bool per_element = true;
  std::vector<std::string> lattices;
  size_t particles = 4096;
  int64_t turns = 20;
  std::vector<int> threads;
  double amplitude = 1e-3;  // grid amplitude [m]
  std::vector<std::string> settings;  // --set NAME.FIELD=VALUE
  std::vector<double> collective_particles = {1e6, 1e7, 1e8};
  std::vector<int> slices;            // --slices: n_slices of every collective element
  double sigma_zeta = 0.0;            // collective bench bunch length [m]; 0: a fifth of the cuts
  bool optimize = false;              // compare the lattice with its optimized form (lattice_optimize.h)
};

struct Measurement {
  double seconds;
  double element_passes_per_s;
  double particle_turns_per_s;
};

Particles bench_particles(const Lattice& lattice, size_t n, double amplitude) {
  const size_t side = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  Particles p = make_grid(lattice.reference().beta0(), 0.0, amplitude, side, 0.0, amplitude, side);
  p.resize(n);
  return p;
}

Measurement time_backend(Backend& backend, const Lattice& lattice, const BenchArgs& a, int threads) {
  Particles warm = bench_particles(lattice, a.particles, a.amplitude);
  Particles p = warm;
  TrackOptions o;
  o.turns = 1;
  o.threads = threads;
  o.fma = parse_fma(a.common.fma);
  backend.track(warm, o);  // warm-up: caches, thread pool, kernel load
  o.turns = a.turns;
  const auto t0 = std::chrono::steady_clock::now();
  backend.track(p, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double pt = static_cast<double>(a.particles) * static_cast<double>(a.turns);
  return {s, pt * static_cast<double>(lattice.sequence().size()) / s, pt / s};
}

/// GPU kernel throughput (device events around the launches) for one configuration.
Measurement time_gpu(CudaBackend& gpu, const Lattice& lattice, size_t n, int64_t turns, double amplitude, FmaMode fma,
                     bool per_element) {
  Particles p = bench_particles(lattice, n, amplitude);
  TrackOptions o;
  o.turns = 1;
  o.fma = fma;
  Particles warm = bench_particles(lattice, std::min<size_t>(n, 1024), amplitude);
  gpu.track(warm, o);  // compile or load from cache outside the timing
  o.turns = turns;
  if (per_element)
    gpu.track_per_element(p, o);
  else
    gpu.track(p, o);
  const double s = gpu.last_stats().kernel_seconds;
  const double pt = static_cast<double>(n) * static_cast<double>(turns);
  return {s, pt * static_cast<double>(lattice.sequence().size()) / s, pt / s};
}

void run_gpu_bench(const BenchArgs& a, const Lattice& lattice, const std::string& path, double cpu_all_threads) {
  auto row = [&](const std::string& what, size_t n, const Measurement& m, const std::string& ratio) {
    fmt::print("{:<40} {:>24} {:>10} {:>10.4f} {:>14.4g} {:>14.4g} {:>12}\n", path, what, n, m.seconds,
               m.element_passes_per_s, m.particle_turns_per_s, ratio);
  };
  fmt::print("{:<40} {:>24} {:>10} {:>10} {:>14} {:>14} {:>12}\n", "lattice", "gpu mode", "particles", "kernel s",
             "elem-passes/s", "part-turns/s", "ratio");
  for (Dispatch dispatch : {Dispatch::Auto, Dispatch::Switch, Dispatch::Staged, Dispatch::Baked}) {
    if (dispatch == Dispatch::Baked && !bakeable(lattice)) continue;
    CudaBackendOptions co;
    co.dispatch = dispatch;
    co.cache_dir = a.common.cache_dir;
    co.always_measure = true;  // auto: the form measured fastest, as a long run would choose it
    CudaBackend gpu(lattice, co);
    std::string dname = dispatch_name(dispatch);
    for (double nd : a.gpu_particles) {
      const size_t n = static_cast<size_t>(nd);
      const Measurement off = time_gpu(gpu, lattice, n, a.gpu_turns, a.amplitude, FmaMode::Off, false);
      if (dispatch == Dispatch::Auto) {
        dname = fmt::format("auto={}", kernel_form_name(gpu.last_stats().form));
        for (const auto& [form, rate] : gpu.last_stats().measured_element_passes_per_s)
          fmt::print("# auto at {} particles measured {}: {:.4g} element-passes/s\n", n, kernel_form_name(form), rate);
      }
      const Measurement on = time_gpu(gpu, lattice, n, a.gpu_turns, a.amplitude, FmaMode::On, false);
      row(fmt::format("fused {} fma=off", dname), n, off,
          cpu_all_threads > 0 ? fmt::format("{:.0f}x cpu", off.element_passes_per_s / cpu_all_threads) : "");
      row(fmt::format("fused {} fma=on", dname), n, on, fmt::format("off/on {:.3f}", off.seconds / on.seconds));
      if (dispatch == Dispatch::Auto && a.per_element && n >= 100000 && n <= 1000000) {
        const Measurement pe = time_gpu(gpu, lattice, n, std::max<int64_t>(1, a.gpu_turns / 10), a.amplitude, FmaMode::Off, true);
        row("per-element launches", n, pe, fmt::format("fused {:.1f}x", off.element_passes_per_s / pe.element_passes_per_s));
      }
    }
    fmt::print("# {} kernel: {} registers/thread, {} bytes local memory/thread\n", dname,
               gpu.last_stats().registers_per_thread, gpu.last_stats().local_bytes_per_thread);
  }
}

/// One lattice tracked for the --optimize comparison: the final particles and the best time of the
/// repeats (CPU: wall time of track(); GPU: its kernels, device events).
struct OptimizeRun {
  Particles particles;
  double seconds = std::numeric_limits<double>::infinity();
};

/// The largest differences of the optimized lattice's particles from the original's, over the
/// particles alive in both, and the particles whose fate differs.
struct OptimizeDifference {
  std::array<double, 6> absolute{};  // max |optimized - original| per coordinate
  std::array<double, 6> spread{};    // max - min of the original's coordinate
  size_t lost = 0;                   // particles lost with the original lattice
  size_t fate_differs = 0;           // state or lost_turn differ
  size_t element_differs = 0;        // lost alike, but lost_element (mapped to the original) differs
};

OptimizeDifference optimize_difference(const Particles& original, const Particles& optimized,
                                       const OptimizeReport& report) {
  OptimizeDifference d;
  std::array<double, 6> low, high;
  low.fill(std::numeric_limits<double>::infinity());
  high.fill(-std::numeric_limits<double>::infinity());
  Particles mapped = optimized;
  map_lost_elements_to_original(mapped, report);
  const std::vector<int64_t>& lost_element = mapped.lost_element;
  for (size_t i = 0; i < original.size(); ++i) {
    d.lost += original.state[i] <= 0;
    if (original.state[i] != optimized.state[i] || original.lost_turn[i] != optimized.lost_turn[i]) {
      ++d.fate_differs;
      continue;
    }
    if (original.state[i] <= 0) {
      d.element_differs += original.lost_element[i] != lost_element[i];
      continue;
    }
    double a[6], b[6];
    original.coordinates(i, a);
    optimized.coordinates(i, b);
    for (size_t k = 0; k < 6; ++k) {
      d.absolute[k] = std::max(d.absolute[k], std::fabs(a[k] - b[k]));
      low[k] = std::min(low[k], a[k]);
      high[k] = std::max(high[k], a[k]);
    }
  }
  for (size_t k = 0; k < 6; ++k) d.spread[k] = high[k] > low[k] ? high[k] - low[k] : 0.0;
  return d;
}

/// --optimize: the lattice as given and optimized, on the same particles, backend, threads and
/// turns, in one run. Each lattice is tracked `kRepeats` times, alternating, after a one-turn
/// warm-up of each; the best time counts (the other processes of a shared machine only slow a run
/// down). Prints element counts, element-passes/s and particle-turns/s of both, the speed ratio,
/// the largest coordinate differences (absolute and relative to the coordinate's spread) and
/// whether losses agree (state, turn, element mapped back to the original sequence); with a GPU the
/// same on its kernels, and whether it reproduces the CPU's optimized run bit for bit (fma off).
void run_optimize_comparison(const BenchArgs& a, const Lattice& lattice, const std::string& path) {
  constexpr int kRepeats = 3;
  OptimizeReport report;
  const Lattice optimized = optimize_for_tracking(lattice, &report);
  fmt::print("# {}: {}\n", path, report.summary());
  const Particles start = bench_particles(lattice, a.particles, a.amplitude);
  const int threads = a.threads.back();
  const double particle_turns = static_cast<double>(a.particles) * static_cast<double>(a.turns);
  fmt::print("{:<40} {:>8} {:>10} {:>10} {:>10} {:>14} {:>14}\n", "lattice", "backend", "form", "elements", "seconds",
             "elem-passes/s", "part-turns/s");

  // Tracks both lattices with the backends `make(lattice)` returns; `seconds_of` reads a run's time.
  auto compare = [&](const std::string& backend_name, auto make, auto seconds_of) {
    auto original_backend = make(lattice);
    auto optimized_backend = make(optimized);
    TrackOptions options;
    options.threads = threads;
    options.fma = parse_fma(a.common.fma);
    options.turns = 1;
    for (Backend* backend : {original_backend.get(), optimized_backend.get()}) {
      Particles warm = start;
      backend->track(warm, options);  // caches, thread pool, kernel compile or load
    }
    options.turns = a.turns;
    OptimizeRun original_run, optimized_run;
    for (int repeat = 0; repeat < kRepeats; ++repeat) {
      for (auto [backend, run] : {std::make_pair(original_backend.get(), &original_run),
                                  std::make_pair(optimized_backend.get(), &optimized_run)}) {
        Particles p = start;
        const auto t0 = std::chrono::steady_clock::now();
        backend->track(p, options);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        run->seconds = std::min(run->seconds, seconds_of(*backend, wall));
        run->particles = std::move(p);
      }
    }
    for (auto [form, run, elements] : {std::make_tuple("original", &original_run, lattice.sequence().size()),
                                       std::make_tuple("optimized", &optimized_run, optimized.sequence().size())})
      fmt::print("{:<40} {:>8} {:>10} {:>10} {:>10.4f} {:>14.4g} {:>14.4g}\n", path, backend_name, form, elements,
                 run->seconds, particle_turns * static_cast<double>(elements) / run->seconds,
                 particle_turns / run->seconds);
    const OptimizeDifference d = optimize_difference(original_run.particles, optimized_run.particles, report);
    fmt::print("# {} speed ratio optimized/original: {:.3f}x in particle-turns/s ({} -> {} elements, best of {})\n",
               backend_name, original_run.seconds / optimized_run.seconds, lattice.sequence().size(),
               optimized.sequence().size(), kRepeats);
    static const char* const kNames[6] = {"x", "px", "y", "py", "zeta", "delta"};
    std::string differences;
    double worst_relative = 0.0;
    for (size_t k = 0; k < 6; ++k) {
      const double relative = d.spread[k] > 0 ? d.absolute[k] / d.spread[k] : d.absolute[k];
      worst_relative = std::max(worst_relative, relative);
      differences += fmt::format("{}{} {:.3g} ({:.3g} of spread)", k ? ", " : "", kNames[k], d.absolute[k], relative);
    }
    fmt::print("# {} max |optimized - original| after {} turns: {}; largest relative {:.3g}\n", backend_name, a.turns,
               differences, worst_relative);
    if (d.fate_differs == 0 && d.element_differs == 0)
      fmt::print("# {} losses agree: {} of {} lost in both, at the same turn and element\n", backend_name, d.lost,
                 a.particles);
    else
      fmt::print(
          "# {} losses differ: {} particles lost or not or at another turn, {} at another element ({} lost "
          "with the original)\n",
          backend_name, d.fate_differs, d.element_differs, d.lost);
    return optimized_run.particles;
  };

  const Particles cpu_optimized = compare(
      fmt::format("cpu({})", threads), [](const Lattice& l) { return make_cpu_backend(l); },
      [](Backend&, double wall) { return wall; });
  if (a.common.device == "cpu") return;
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) {
    fmt::print("# gpu: skipped ({})\n", why);
    return;
  }
  const Particles gpu_optimized = compare(
      "gpu",
      [&](const Lattice& l) {
        CudaBackendOptions co;
        co.cache_dir = a.common.cache_dir;
        return std::make_unique<CudaBackend>(l, co);
      },
      [](Backend& backend, double) { return static_cast<CudaBackend&>(backend).last_stats().kernel_seconds; });
  size_t differ = 0;
  for (size_t i = 0; i < cpu_optimized.size(); ++i) {
    double c[6], g[6];
    cpu_optimized.coordinates(i, c);
    gpu_optimized.coordinates(i, g);
    differ += std::memcmp(c, g, sizeof c) != 0 || cpu_optimized.state[i] != gpu_optimized.state[i] ||
              cpu_optimized.lost_turn[i] != gpu_optimized.lost_turn[i];
  }
  fmt::print("# optimized lattice, gpu against cpu (fma {}): {}\n", a.common.fma,
             differ == 0 ? "bitwise identical" : fmt::format("{} of {} particles differ", differ, a.particles));
}

/// A Gaussian bunch in zeta (and delta) centred between the cuts of the collective elements.
Particles collective_bench_bunch(const Lattice& lattice, size_t n, double sigma_zeta) {
  Particles p(n, lattice.reference().beta0());
  uint64_t state = 12345;
  auto uniform = [&state] {  // splitmix64: fast and deterministic for 10^8 particles
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (static_cast<double>((z ^ (z >> 31)) >> 11) + 0.5) * 0x1.0p-53;
  };
  for (size_t i = 0; i < n; ++i) {
    const double r = std::sqrt(-2.0 * std::log(uniform())), phi = 2.0 * M_PI * uniform();
    p.set(i, 0.0, 0.0, 0.0, 0.0, sigma_zeta * r * std::cos(phi), 1e-4 * r * std::sin(phi));
  }
  return p;
}

double device_copy_bandwidth(CudaBackend& gpu) { return gpu.copy_bandwidth(); }

/// Every coordinate and state of two particle sets bit for bit.
bool same_particles(const Particles& a, const Particles& b) {
  auto same = [](const auto& u, const auto& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])) == 0;
  };
  return same(a.x, b.x) && same(a.px, b.px) && same(a.y, b.y) && same(a.py, b.py) && same(a.zeta, b.zeta) &&
         same(a.delta, b.delta) && same(a.ptau, b.ptau) && same(a.rpp, b.rpp) && same(a.rvv, b.rvv) &&
         same(a.state, b.state) && same(a.lost_turn, b.lost_turn) && same(a.lost_element, b.lost_element);
}

double largest_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;
    const double d = std::fabs(a[i] - b[i]) / std::max(std::fabs(a[i]), std::fabs(b[i]));
    worst = std::isfinite(d) ? std::max(worst, d) : std::numeric_limits<double>::infinity();  // NaN or inf vs a number
  }
  return worst;
}

void run_collective_bench(const BenchArgs& a, Lattice& lattice, const std::string& path) {
  // The CPU backend on the lattice as given: all threads, fma off (portable FFT or direct sum).
  {
    auto cpu = make_cpu_backend(lattice);
    Particles p = collective_bench_bunch(lattice, a.particles, a.sigma_zeta > 0 ? a.sigma_zeta : 1.0);
    TrackOptions o;
    o.turns = 1;
    Particles warm = p;
    cpu->track(warm, o);
    o.turns = a.turns;
    const auto t0 = std::chrono::steady_clock::now();
    cpu->track(p, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("# cpu ({} threads): {} particles, {} turns: {:.4g} s, {:.4g} particle-turns/s\n", omp_get_max_threads(),
               a.particles, a.turns, s, static_cast<double>(a.particles) * static_cast<double>(a.turns) / s);
  }
  if (a.common.device == "cpu") return;
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) {
    fmt::print("# collective gpu bench: skipped ({})\n", why);
    return;
  }
  std::vector<int> slice_counts = a.slices;
  if (slice_counts.empty()) slice_counts.push_back(0);  // as in the lattice
  // Bytes per particle-turn (codegen.h collective_turn_traffic): what the kernels load and store
  // after the first turn, what they moved before the coordinate masks (every coordinate read and
  // written in each pass), and what the physics needs (the six coordinates the turn reads and writes).
  const CollectiveTurnTraffic traffic = collective_turn_traffic(lattice);
  const double kBytes = traffic.bytes_per_turn(), kBytesAll = traffic.bytes_per_turn_all(),
               kBytesNeeded = traffic.bytes_per_turn_needed();
  fmt::print("# bytes per particle-turn: {:.0f} moved (coordinates loaded {:#05x}, stored {:#05x}), {:.0f} with every "
             "coordinate (FUSETRACK_FULL_LOADS=1), {:.0f} needed by the physics\n",
             kBytes, traffic.wrap.loaded, traffic.wrap.stored, kBytesAll, kBytesNeeded);
  fmt::print("{:<34} {:>7} {:>10} {:>6} {:>10} {:>13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}\n", "lattice", "slices",
             "particles", "fma", "s/turn", "part-turns/s", "segment%", "solve%", "GB/s", "of bw", "need/bw", "off/on",
             "vs full");
  bool bandwidth_printed = false;
  for (int ns : slice_counts) {
    if (ns > 0)
      for (uint32_t d = 0; d < lattice.definitions().size(); ++d)
        if (lattice.definitions()[d].type->is_profile_collective()) lattice.set_field(d, "n_slices", ns);
    lattice.prepare();
    for (double nd : a.collective_particles) {
      const size_t n = static_cast<size_t>(nd);
      double sigma = a.sigma_zeta;
      double on_seconds = 0;
      for (FmaMode fma : {FmaMode::On, FmaMode::Off}) {
        CudaBackendOptions co;
        co.cache_dir = a.common.cache_dir;
        co.time_phases = false;
        CudaBackend gpu(lattice, co);
        if (!bandwidth_printed) {
          fmt::print("# device copy bandwidth (read + write): {:.4g} GB/s\n", device_copy_bandwidth(gpu) * 1e-9);
          bandwidth_printed = true;
        }
        const double bw = device_copy_bandwidth(gpu);
        if (sigma <= 0) {
          const auto snaps = [&] {
            Particles one = collective_bench_bunch(lattice, 16, 1.0);
            TrackOptions o1;
            o1.turns = 1;
            o1.fma = fma;
            gpu.track(one, o1);
            return gpu.collective_snapshots();
          }();
          sigma = snaps.empty() ? 1.0 : (snaps[0].grid.zeta_max - snaps[0].grid.zeta_min) / 10.0;
        }
        Particles p = collective_bench_bunch(lattice, n, sigma);
        TrackOptions o;
        o.fma = fma;
        o.turns = 2;
        Particles warm = p;
        gpu.track(warm, o);  // compile or load the kernels, plan cuFFT, outside the timing
        o.turns = a.gpu_turns;
        gpu.track(p, o);
        const double total = gpu.last_stats().kernel_seconds;
        // The same run again with the phases timed separately (a synchronisation per turn).
        CudaBackendOptions cp = co;
        cp.time_phases = true;
        CudaBackend timed(lattice, cp);
        Particles q = collective_bench_bunch(lattice, n, sigma);
        Particles warm2 = q;
        o.turns = 2;
        timed.track(warm2, o);
        o.turns = a.gpu_turns;
        timed.track(q, o);
        const double seg = timed.last_stats().segment_seconds, sol = timed.last_stats().solve_seconds;
        // The same run with every coordinate loaded and stored on every turn: the baseline of the masks.
        // The same two runs on a new backend (the multi-turn wake memory carries over from one
        // track() to the next), every coordinate loaded and stored on every turn.
        setenv("FUSETRACK_FULL_LOADS", "1", 1);
        CudaBackend full_gpu(lattice, co);
        Particles f = collective_bench_bunch(lattice, n, sigma), warm3 = f;
        o.turns = 2;
        full_gpu.track(warm3, o);
        o.turns = a.gpu_turns;
        full_gpu.track(f, o);
        unsetenv("FUSETRACK_FULL_LOADS");
        const double full_total = full_gpu.last_stats().kernel_seconds;
        // fma off: bit for bit. fma on: the compiler may contract the recomputation of rpp and rvv
        // (collective_energy_is_derived) differently from their computation where the energy changes.
        if (fma == FmaMode::Off && !same_particles(p, f))
          throw Error("bench: the run with every coordinate loaded differs from the masked run");
        if (fma == FmaMode::On && (p.state != f.state || p.lost_turn != f.lost_turn))
          fmt::print(
              "# fma on: WARNING: the run with every coordinate loaded loses other particles or on other turns\n");
        if (fma == FmaMode::On)
          fmt::print(
              "# fma on: the run with every coordinate loaded differs from the masked run by at most {:.3g} in zeta "
              "and delta, {:.3g} in rvv (relative)\n",
              std::max(largest_relative_difference(p.zeta, f.zeta), largest_relative_difference(p.delta, f.delta)),
              largest_relative_difference(p.rvv, f.rvv));
        const double per_turn = total / static_cast<double>(a.gpu_turns);
        const double rate = static_cast<double>(n) / per_turn;
        if (fma == FmaMode::On) on_seconds = total;
        fmt::print("{:<34} {:>7} {:>10} {:>6} {:>10.4g} {:>13.4g} {:>8.1f}% {:>8.1f}% {:>9.4g} {:>8.1f}% {:>8.1f}% {:>8} {:>8.2f}x\n",
                   path, ns > 0 ? std::to_string(ns) : "lattice", n, fma == FmaMode::On ? "on" : "off", per_turn, rate,
                   100.0 * seg / (seg + sol), 100.0 * sol / (seg + sol), rate * kBytes * 1e-9,
                   100.0 * rate * kBytes / bw, 100.0 * rate * kBytesNeeded / bw,
                   fma == FmaMode::Off ? fmt::format("{:.3f}", total / on_seconds) : "", full_total / total);
      }
      // Single-particle segments alone (collective steps skipped): the cost of deposit and kick.
      CudaBackendOptions co;
      co.cache_dir = a.common.cache_dir;
      CudaBackend gpu(lattice, co);
      Particles p = collective_bench_bunch(lattice, n, sigma);
      TrackOptions plain;
      plain.collective = false;
      plain.turns = 1;
      Particles warm = collective_bench_bunch(lattice, 1024, sigma);
      gpu.track(warm, plain);
      double single_turn_total = 0;
      for (int64_t t = 0; t < a.gpu_turns; ++t) {
        gpu.track(p, plain);
        single_turn_total += gpu.last_stats().kernel_seconds;
      }
      fmt::print("# {} particles: single-particle segments alone (no deposit, no kick, no solve): {:.4g} s/turn\n",
                 n, single_turn_total / static_cast<double>(a.gpu_turns));
    }
  }
}

void run_bench(BenchArgs a) {
  ElementRegistry registry;
  load_plugins(registry, a.common);
  if (a.threads.empty()) a.threads = {1, omp_get_max_threads()};
  fmt::print("# fusetrack bench: {} particles, {} turns, CPU threads available {}\n", a.particles, a.turns,
             omp_get_max_threads());
  if (!a.optimize)  // --optimize prints its own table per lattice
    fmt::print("{:<40} {:>8} {:>8} {:>10} {:>14} {:>14} {:>9}\n", "lattice", "backend", "threads", "seconds",
               "elem-passes/s", "part-turns/s", "speedup");
  for (const auto& path : a.lattices) {
    Lattice lattice = load_lattice(path, registry);
    for (const std::string& setting : a.settings) {
      const size_t dot = setting.find('.'), eq = setting.find('=');
      InputLocation at;
      at.field = "--set " + setting;
      if (dot == std::string::npos || eq == std::string::npos || eq < dot)
        throw InputError(at, "expected NAME.FIELD=VALUE");
      const int d = lattice.find_definition(setting.substr(0, dot));
      if (d < 0) throw InputError(at, "no element of that name in the lattice");
      lattice.set_field(static_cast<uint32_t>(d), setting.substr(dot + 1, eq - dot - 1), std::stod(setting.substr(eq + 1)));
    }
    lattice.prepare();
    if (lattice.has_collective()) {
      if (a.optimize)
        fmt::print("# --optimize: {} has collective elements; the collective bench runs unoptimized\n", path);
      run_collective_bench(a, lattice, path);
      continue;
    }
    if (a.optimize) {
      run_optimize_comparison(a, lattice, path);
      continue;
    }
    auto cpu = make_cpu_backend(lattice);
    double base = 0, last = 0;
    for (int t : a.threads) {
      const Measurement m = time_backend(*cpu, lattice, a, t);
      if (base == 0) base = m.element_passes_per_s;
      last = m.element_passes_per_s;
      fmt::print("{:<40} {:>8} {:>8} {:>10.3f} {:>14.4g} {:>14.4g} {:>8.2f}x\n", path, "cpu", t, m.seconds,
                 m.element_passes_per_s, m.particle_turns_per_s, m.element_passes_per_s / base);
    }
    if (a.common.device == "cpu") continue;
    const std::string why = gpu_unavailable_reason();
    if (!why.empty()) {
      fmt::print("# gpu: skipped ({})\n", why);
      continue;
    }
    run_gpu_bench(a, lattice, path, last);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "measure tracking throughput (element-passes/s, particle-turns/s)");
  cmd->add_option("lattices", args->lattices, "lattice files")->required();
  cmd->add_option("-N,--particles", args->particles, "number of particles")->check(CLI::PositiveNumber);
  cmd->add_option("-n,--turns", args->turns, "turns per measurement")->check(CLI::PositiveNumber);
  cmd->add_option("--thread-counts", args->threads, "CPU thread counts to measure (default: 1 and all)");
  cmd->add_option("--amplitude", args->amplitude, "largest initial x and y of the particle grid [m]");
  cmd->add_option("--gpu-particles", args->gpu_particles, "GPU particle counts (default 1e4 1e5 1e6 1e7)");
  cmd->add_option("--gpu-turns", args->gpu_turns, "turns per GPU measurement")->check(CLI::PositiveNumber);
  cmd->add_flag("--per-element,!--no-per-element", args->per_element,
                "also time one launch per element (the per-element baseline)");
  cmd->add_option("--set", args->settings, "set a field before measuring: NAME.FIELD=VALUE (repeatable)");
  cmd->add_option("--collective-particles", args->collective_particles,
                  "macroparticle counts of the collective GPU bench (default 1e6 1e7 1e8)");
  cmd->add_option("--slices", args->slices, "collective bench: n_slices of every collective element (repeatable list)");
  cmd->add_option("--sigma-zeta", args->sigma_zeta, "collective bench: rms bunch length [m] (default: a tenth of the cuts)");
  cmd->add_flag("--optimize", args->optimize,
                "instead of the thread and GPU tables: the lattice and its optimized form (markers, inactive kicks "
                "and zero-length drifts removed, drifts and thin kicks merged) on the same particles, with the "
                "speed ratio, the largest coordinate "
                "differences and whether losses agree (threads: the last of --thread-counts)");
  add_common_options(*cmd, args->common);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace ft::cli
