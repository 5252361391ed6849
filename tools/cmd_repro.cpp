// fusetrack repro LATTICE: the same particles on the CPU and the GPU, compared bit for bit.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "cli_common.h"
#include "fusetrack/collective.h"
#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/error.h"

namespace ft::cli {

namespace {

struct ReproArgs {
  CommonOptions common;
  std::string lattice;
  int64_t turns = 1000;
  size_t particles = 10000;
  double amplitude = 0.02;  // largest initial |x|, |y| of the grid [m]
  double delta = 1e-4;
  std::string particles_file;
};

int run_repro(const ReproArgs& a) {
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  Particles initial;
  if (!a.particles_file.empty()) {
    initial = read_particles(a.particles_file, lattice.reference().beta0());
  } else {
    const size_t side = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(a.particles))));
    initial = make_grid(lattice.reference().beta0(), -a.amplitude, a.amplitude, side, -a.amplitude, a.amplitude, side,
                        a.delta);
    initial.resize(a.particles);
    if (lattice.has_collective()) {
      // A bunch for the collective elements: zeta spread over the middle of the first one's cuts
      // (a deterministic, low-discrepancy fill), delta alternating around the grid's offset.
      const TurnProgram program = TurnProgram::build(lattice);
      const ft_profile_grid g = CollectiveSolver(lattice, program.collective.front(), FmaMode::Off, 1).grid();
      const double centre = 0.5 * (g.zeta_min + g.zeta_max), half = 0.2 * (g.zeta_max - g.zeta_min);
      for (size_t i = 0; i < initial.size(); ++i) {
        const double u = std::fmod(0.5 + 0.6180339887498949 * static_cast<double>(i), 1.0);
        initial.set(i, initial.x[i], initial.px[i], initial.y[i], initial.py[i], centre + half * (2.0 * u - 1.0),
                    (i % 2 ? 1.0 : -1.0) * a.delta);
      }
    }
  }
  const FmaMode fma = parse_fma(a.common.fma);
  auto cpu = make_cpu_backend(lattice);
  CudaBackendOptions co;
  co.cache_dir = a.common.cache_dir;
  CudaBackend gpu(lattice, co);  // throws with the reason when there is no GPU

  TrackOptions o;
  o.turns = a.turns;
  o.fma = fma;
  o.threads = a.common.threads;
  Particles on_cpu = initial, on_gpu = initial;
  auto t0 = std::chrono::steady_clock::now();
  cpu->track(on_cpu, o);
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  gpu.track(on_gpu, o);
  const ParticleComparison c = compare_particles(on_cpu, on_gpu);
  // Collective lattices: the integer profiles and the solved fields of the last turn too.
  bool collective_identical = true;
  const auto cpu_snaps = cpu->collective_snapshots(), gpu_snaps = gpu.collective_snapshots();

  fmt::print("repro {}: {} particles, {} turns, fma {}, GPU {}\n", a.lattice, initial.size(), a.turns, a.common.fma,
             gpu.name());
  fmt::print("  lost: cpu {}, gpu {}\n", on_cpu.size() - on_cpu.alive_count(), on_gpu.size() - on_gpu.alive_count());
  fmt::print("  bitwise-equal coordinates: {} of {} ({:.4f}%)\n", c.bitwise_equal, c.coordinates,
             100.0 * static_cast<double>(c.bitwise_equal) / static_cast<double>(c.coordinates));
  fmt::print("  particles whose state/loss turn/loss element differ: {}\n", c.state_mismatches);
  fmt::print("  max ULP difference {}, max relative difference {:.3g} (particles alive on both)\n", c.max_ulp,
             c.max_relative);
  fmt::print("  time: cpu {:.3f} s, gpu kernel {:.3f} s (compile {:.2f} s{})\n", cpu_s, gpu.last_stats().kernel_seconds,
             gpu.last_stats().compile_seconds, gpu.last_stats().kernel_from_cache ? ", from cache" : "");
  for (size_t k = 0; k < cpu_snaps.size() && k < gpu_snaps.size(); ++k) {
    const bool counts = cpu_snaps[k].counts == gpu_snaps[k].counts;
    double peak = 0, diff = 0;
    size_t equal = 0;
    for (size_t i = 0; i < cpu_snaps[k].field.size(); ++i) {
      peak = std::max(peak, std::fabs(cpu_snaps[k].field[i]));
      diff = std::max(diff, std::fabs(cpu_snaps[k].field[i] - gpu_snaps[k].field[i]));
      equal += ulp_distance(cpu_snaps[k].field[i], gpu_snaps[k].field[i]) == 0 ? 1 : 0;
    }
    collective_identical &= counts && equal == cpu_snaps[k].field.size();
    fmt::print("  collective '{}': profiles {}, field bitwise-equal {} of {} slices, max difference {:.3g} V of {:.3g} V\n",
               cpu_snaps[k].element_name, counts ? "identical" : "DIFFERENT", equal, cpu_snaps[k].field.size(), diff,
               peak);
  }
  if (c.identical() && collective_identical) {
    fmt::print("  result: IDENTICAL\n");
    return kOk;
  }
  const size_t i = static_cast<size_t>(c.first_differing);
  const Divergence d = find_divergence(lattice, *cpu, gpu, initial, i, a.turns, fma);
  fmt::print("  first differing particle: #{}\n", i);
  if (d.found && d.element >= 0) {
    fmt::print("  diverges at turn {}, element #{} '{}' ({})\n", d.turn, d.element, d.element_name, d.element_type);
    const char* names[6] = {"x", "px", "y", "py", "zeta", "delta"};
    for (int k = 0; k < 6; ++k)
      fmt::print("    {:<5} in {:+.17e}  cpu {:+.17e}  gpu {:+.17e}  ({} ulp)\n", names[k], d.input[k], d.output_a[k],
                 d.output_b[k], ulp_distance(d.output_a[k], d.output_b[k]));
  } else if (d.found) {
    fmt::print("  diverges at turn {} although every element agrees step by step\n", d.turn);
  } else {
    fmt::print("  the replay of this particle alone agrees\n");
  }
  fmt::print("  result: DIFFERENT\n");
  return fma == FmaMode::Off ? kMismatch : kOk;
}

}  // namespace

void add_repro_command(CLI::App& app) {
  auto args = std::make_shared<ReproArgs>();
  CLI::App* cmd = app.add_subcommand("repro", "track the same particles on CPU and GPU and compare them bit for bit");
  cmd->add_option("lattice", args->lattice, "lattice file")->required();
  cmd->add_option("-n,--turns", args->turns, "number of turns")->check(CLI::PositiveNumber);
  cmd->add_option("-N,--particles", args->particles, "number of particles on an x-y grid")->check(CLI::PositiveNumber);
  cmd->add_option("--amplitude", args->amplitude, "grid half-width in x and y [m]")->check(CLI::PositiveNumber);
  cmd->add_option("--delta", args->delta, "momentum offset of the grid particles");
  cmd->add_option("-p,--particles-file", args->particles_file, "initial particles (.npz or .csv) instead of a grid");
  add_common_options(*cmd, args->common);
  cmd->callback([args] {
    const int rc = run_repro(*args);
    if (rc != kOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ft::cli
