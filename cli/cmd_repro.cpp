// fusetrack repro LATTICE: the same particles on the CPU and the GPU, compared bit for bit.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "cli_common.h"
#include "fusetrack/compare.h"
#include "fusetrack/error.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/session.h"

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
  const Particles initial = !a.particles_file.empty()
                                ? read_particles(a.particles_file, lattice.reference().beta0())
                                : make_repro_particles(lattice, a.particles, a.amplitude, a.delta);
  ReproOptions o;
  o.turns = a.turns;
  o.fma = parse_fma(a.common.fma);
  o.threads = a.common.threads;
  o.cache_dir = a.common.cache_dir;
  const ReproResult r = run_repro(lattice, initial, o);
  const ParticleComparison& c = r.comparison;

  fmt::print("repro {}: {} particles, {} turns, fma {}, GPU {}\n", a.lattice, initial.size(), a.turns, a.common.fma,
             r.gpu_name);
  fmt::print("  lost: cpu {}, gpu {}\n", r.cpu.size() - r.cpu.alive_count(), r.gpu.size() - r.gpu.alive_count());
  fmt::print("  bitwise-equal coordinates: {} of {} ({:.4f}%)\n", c.bitwise_equal, c.coordinates,
             100.0 * static_cast<double>(c.bitwise_equal) / static_cast<double>(c.coordinates));
  if (c.nan_pairs > 0)
    fmt::print("  (of which {} NaN on both sides with different NaN bits: not portable, counted as equal)\n", c.nan_pairs);
  fmt::print("  particles whose state/loss turn/loss element differ: {}\n", c.state_mismatches);
  fmt::print("  max ULP difference {}, max relative difference {:.3g} (particles alive on both)\n", c.max_ulp,
             c.max_relative);
  fmt::print("  time: cpu {:.3f} s, gpu kernel {:.3f} s (compile {:.2f} s{})\n", r.cpu_seconds,
             r.gpu_stats.kernel_seconds, r.gpu_stats.compile_seconds, r.gpu_stats.kernel_from_cache ? ", from cache" : "");
  for (const CollectiveComparison& k : r.collective)
    fmt::print("  collective '{}': profiles {}, field bitwise-equal {} of {} slices, max difference {:.3g} V of {:.3g} V\n",
               k.element_name, k.counts_identical ? "identical" : "DIFFERENT", k.field_equal, k.field_size,
               k.max_difference, k.peak);
  if (r.identical) {
    fmt::print("  result: IDENTICAL\n");
    return kOk;
  }
  const Divergence& d = r.divergence;
  if (c.first_differing >= 0) fmt::print("  first differing particle: #{}\n", c.first_differing);
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
  return o.fma == FmaMode::Off ? kMismatch : kOk;
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
