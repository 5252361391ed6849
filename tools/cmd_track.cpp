// fusetrack track LATTICE: track particles for N turns and write them out.
#include <fmt/format.h>

#include <chrono>

#include "cli_common.h"
#include "fusetrack/error.h"

namespace ft::cli {

namespace {

struct TrackArgs {
  CommonOptions common;
  std::string lattice;
  int64_t turns = 100;
  std::string particles_file;
  std::vector<double> grid;  // x_min x_max nx y_min y_max ny
  double delta = 0.0;
  std::string output;
};

Particles initial_particles(const TrackArgs& a, const Lattice& lattice) {
  const double beta0 = lattice.reference().beta0();
  if (!a.particles_file.empty()) return read_particles(a.particles_file, beta0);
  std::vector<double> g = a.grid;
  if (g.empty()) g = {1e-4, 1e-3, 10, 1e-4, 1e-3, 10};
  InputLocation at;
  at.field = "--grid";
  if (g.size() != 6) throw InputError(at, "expects six values: x_min x_max nx y_min y_max ny");
  if (g[2] < 1 || g[5] < 1 || g[2] != static_cast<double>(static_cast<size_t>(g[2])) ||
      g[5] != static_cast<double>(static_cast<size_t>(g[5])))
    throw InputError(at, "nx and ny must be positive integers");
  return make_grid(beta0, g[0], g[1], static_cast<size_t>(g[2]), g[3], g[4], static_cast<size_t>(g[5]), a.delta);
}

void run_track(const TrackArgs& a) {
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  Particles particles = initial_particles(a, lattice);
  auto backend = make_backend(lattice, a.common);
  TrackOptions options;
  options.turns = a.turns;
  options.threads = a.common.threads;
  options.fma = parse_fma(a.common.fma);
  const auto t0 = std::chrono::steady_clock::now();
  backend->track(particles, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.output.empty()) write_particles(a.output, particles);

  const double passes = static_cast<double>(particles.size()) * static_cast<double>(a.turns) *
                        static_cast<double>(lattice.sequence().size());
  fmt::print("lattice     {} ({} elements, {} definitions, circumference {:.6g} m)\n", a.lattice,
             lattice.sequence().size(), lattice.definitions().size(), lattice.circumference());
  fmt::print("reference   mass0 {:.9g} eV, q0 {:g}, p0c {:.9g} eV, beta0 {:.9f}\n", lattice.reference().mass0,
             lattice.reference().q0, lattice.reference().p0c, lattice.reference().beta0());
  fmt::print("backend     {}\n", backend->name());
  fmt::print("particles   {} tracked for {} turns: {} survived, {} lost\n", particles.size(), a.turns,
             particles.alive_count(), particles.size() - particles.alive_count());
  fmt::print("time        {:.3f} s  ({:.3g} element-passes/s upper bound, {:.3g} particle-turns/s)\n", seconds,
             passes / seconds, static_cast<double>(particles.size()) * static_cast<double>(a.turns) / seconds);
  if (!a.output.empty()) fmt::print("output      {}\n", a.output);
}

}  // namespace

void add_track_command(CLI::App& app) {
  auto args = std::make_shared<TrackArgs>();
  CLI::App* cmd = app.add_subcommand("track", "track particles through a lattice for N turns");
  cmd->add_option("lattice", args->lattice, "lattice file (fusetrack JSON or Xsuite line JSON)")->required();
  cmd->add_option("-n,--turns", args->turns, "number of turns")->check(CLI::PositiveNumber);
  cmd->add_option("-p,--particles", args->particles_file, "initial particles (.npz or .csv)");
  cmd->add_option("--grid", args->grid, "x-y grid instead of a file: x_min x_max nx y_min y_max ny [m]")
      ->expected(6)
      ->excludes("--particles");
  cmd->add_option("--delta", args->delta, "momentum offset of the grid particles");
  cmd->add_option("-o,--output", args->output, "write the final particles (.npz or .csv)");
  add_common_options(*cmd, args->common);
  cmd->callback([args] { run_track(*args); });
}

}  // namespace ft::cli
