// fusetrack bench: throughput of the backends on given lattices, reported as ratios measured
// in one run (element-passes/s and particle-turns/s).
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>

#include "cli_common.h"

namespace ft::cli {

namespace {

struct BenchArgs {
  CommonOptions common;
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

Measurement time_backend(Backend& backend, const Lattice& lattice, const BenchArgs& a, int threads) {
  const size_t side = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(a.particles))));
  Particles warm = make_grid(lattice.reference().beta0(), 0.0, a.amplitude, side, 0.0, a.amplitude, side);
  warm.resize(a.particles);
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
    double base = 0;
    for (int t : a.threads) {
      const Measurement m = time_backend(*cpu, lattice, a, t);
      if (base == 0) base = m.element_passes_per_s;
      fmt::print("{:<40} {:>8} {:>8} {:>10.3f} {:>14.4g} {:>14.4g} {:>8.2f}x\n", path, "cpu", t, m.seconds,
                 m.element_passes_per_s, m.particle_turns_per_s, m.element_passes_per_s / base);
    }
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
  add_common_options(*cmd, args->common);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace ft::cli
