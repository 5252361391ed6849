// fusetrack bench: throughput of the backends on given lattices, reported as ratios measured
// in one run (element-passes/s and particle-turns/s).
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>

#include "cli_common.h"
#include "fusetrack/cuda_backend.h"

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
  for (Dispatch dispatch : {Dispatch::Auto, Dispatch::Switch, Dispatch::Baked}) {
    if (dispatch == Dispatch::Baked && lattice.sequence().size() > kBakedMaxElements) continue;
    CudaBackendOptions co;
    co.dispatch = dispatch;
    co.cache_dir = a.common.cache_dir;
    CudaBackend gpu(lattice, co);
    const char* dname = dispatch == Dispatch::Auto ? (choose_dispatch(lattice, Dispatch::Auto) == Dispatch::Baked ? "auto=baked" : "auto=switch")
                        : dispatch == Dispatch::Switch ? "switch" : "baked";
    for (double nd : a.gpu_particles) {
      const size_t n = static_cast<size_t>(nd);
      const Measurement off = time_gpu(gpu, lattice, n, a.gpu_turns, a.amplitude, FmaMode::Off, false);
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

void run_bench(BenchArgs a) {
  ElementRegistry registry;
  load_plugins(registry, a.common);
  if (a.threads.empty()) a.threads = {1, omp_get_max_threads()};
  fmt::print("# fusetrack bench: {} particles, {} turns, CPU threads available {}\n", a.particles, a.turns,
             omp_get_max_threads());
  fmt::print("{:<40} {:>8} {:>8} {:>10} {:>14} {:>14} {:>9}\n", "lattice", "backend", "threads", "seconds",
             "elem-passes/s", "part-turns/s", "speedup");
  for (const auto& path : a.lattices) {
    const Lattice lattice = load_lattice(path, registry);
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
  add_common_options(*cmd, args->common);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace ft::cli
