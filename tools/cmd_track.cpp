// fusetrack track LATTICE: track particles for N turns and write them out.
#include <fmt/format.h>

#include <chrono>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"

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
  size_t gaussian = 0;  // number of particles of a matched Gaussian distribution
  double emittance_nx = 0.0, emittance_ny = 0.0, sigma_zeta = 0.0, sigma_delta = 0.0;
  uint64_t seed = 1;
};

Particles initial_particles(const TrackArgs& a, const Lattice& lattice) {
  const double beta0 = lattice.reference().beta0();
  if (!a.particles_file.empty()) return read_particles(a.particles_file, beta0);
  if (a.gaussian > 0) {
    InputLocation at;
    at.field = "--emittance-nx/--emittance-ny";
    if (!(a.emittance_nx > 0) || !(a.emittance_ny > 0))
      throw InputError(at, "a Gaussian distribution needs positive normalised emittances");
    at.field = "--sigma-zeta/--sigma-delta";
    if (a.sigma_zeta < 0 || a.sigma_delta < 0) throw InputError(at, "must not be negative");
    const LinearOptics optics = compute_linear_optics(lattice);
    return make_gaussian(lattice, optics, a.gaussian, a.emittance_nx, a.emittance_ny, a.sigma_zeta, a.sigma_delta,
                         a.seed);
  }
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
  cmd->add_option("--gaussian", args->gaussian,
                  "instead of a file or grid: N particles of a matched Gaussian from the optics at the start")
      ->excludes("--particles")
      ->excludes("--grid");
  cmd->add_option("--emittance-nx", args->emittance_nx, "normalised horizontal emittance [m] (--gaussian)");
  cmd->add_option("--emittance-ny", args->emittance_ny, "normalised vertical emittance [m] (--gaussian)");
  cmd->add_option("--sigma-zeta", args->sigma_zeta, "rms zeta [m] (--gaussian)");
  cmd->add_option("--sigma-delta", args->sigma_delta, "rms delta (--gaussian)");
  cmd->add_option("--seed", args->seed, "random seed (--gaussian)");
  cmd->add_option("--delta", args->delta, "momentum offset of the grid particles");
  cmd->add_option("-o,--output", args->output, "write the final particles (.npz or .csv)");
  add_common_options(*cmd, args->common);
  cmd->callback([args] { run_track(*args); });
}

}  // namespace ft::cli
