// fusetrack collide SETUP.json -n TURNS: two beams colliding at an IP, strong-strong or weak-strong,
// bunches spread over MPI ranks (ft::run_collide); per-crossing records, centroid spectra, summary
// and plots (fusetrack.plot.collide).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "cli_common.h"
#include "fusetrack/collider.h"
#include "fusetrack/error.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"

namespace ft::cli {

namespace {

struct CollideArgs {
  CommonOptions common;
  std::string setup;
  int64_t turns = 1000;
  std::string output = "collide_out";
  std::string placement = "block";
  int64_t progress = 0;
  int64_t checkpoint_every = 0, stop_after = 0;
  bool resume = false;
  bool plot = true;
  bool gpu_check = true;
  size_t gpu_check_sample = CollideOptions{}.check_sample;
};

void plot(const std::string& directory) { run_plot_script("collide", {directory}, "the plots are"); }

int run(const CollideArgs& a) {
  Communicator& comm = world();
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const ColliderSetup setup = read_collider_setup(a.setup);
  CollideOptions o;
  o.turns = a.turns;
  o.threads = threads_per_rank(a.common);
  o.fma = parse_fma(a.common.fma);
  o.backend.device = a.common.device;
  o.backend.cache_dir = a.common.cache_dir;
  o.placement = parse_bunch_placement(a.placement, "--placement");
  o.output_dir = a.output;
  o.keep_records = false;
  o.progress_every = a.progress;
  o.checkpoint_every = a.checkpoint_every;
  o.resume = a.resume;
  o.stop_after = a.stop_after;
  o.check_gpu = a.gpu_check;
  o.check_sample = a.gpu_check_sample;
  if (comm.is_root()) check_output_directory(a.output, "--output");
  const CollideResult r = run_collide(setup, registry, o, comm);
  if (!r.root || r.stopped_at >= 0) return kOk;
  fmt::print("collide {}: {} turns, {} crossings, {} rank(s), {} placement, {} model, {} slice(s), {}\n", a.setup,
             a.turns, r.slots, r.ranks, a.placement, setup.ip.six_d ? "6d" : "4d", setup.ip.slices,
             setup.frozen_beam < 0 ? "strong-strong" : fmt::format("weak-strong (beam {} frozen)", setup.frozen_beam + 1));
  for (int b = 0; b < 2; ++b)
    fmt::print("  beam {} ({}): {} bunch(es), Q = ({:.6f}, {:.6f}), xi = ({:.5g}, {:.5g})\n", b + 1,
               setup.beams[static_cast<size_t>(b)].name, setup.beams[static_cast<size_t>(b)].bunches.count,
               r.tunes[static_cast<size_t>(b)][0], r.tunes[static_cast<size_t>(b)][1], r.xi[static_cast<size_t>(b)][0],
               r.xi[static_cast<size_t>(b)][1]);
  if (std::isfinite(r.sigma_mode[0]))
    fmt::print("  coherent modes: x sigma {:.5f} pi {:.5f}; y sigma {:.5f} pi {:.5f}\n", r.sigma_mode[0], r.pi_mode[0],
               r.sigma_mode[1], r.pi_mode[1]);
  for (const BunchSummary& b : r.bunches)
    fmt::print("  beam {} bunch {}: <L per crossing> {:.6g} /m^2, emittance x {:.4g} -> {:.4g} m, y {:.4g} -> {:.4g} m, "
               "alive {}\n",
               b.beam + 1, b.bunch, b.mean_luminosity, b.initial_emittance_x, b.final_emittance_x,
               b.initial_emittance_y, b.final_emittance_y, b.final_alive);
  if (r.luminosity > 0) fmt::print("  luminosity {:.6g} /(cm^2 s) at {:.6g} crossings/s\n", r.luminosity * 1e-4, r.crossing_frequency);
  fmt::print("  time (rank 0, {}): {:.3f} s: arrival (statistics, boost, deposit) {:.3f}, exchange {:.3f}, departure "
             "(kick, linear-map turn) {:.3f}, lattice turn {:.3f}; GPU kernels {:.3f} s\n",
             r.device, r.seconds, r.deposit_seconds, r.exchange_seconds, r.kick_seconds, r.transport_seconds,
             r.gpu_kernel_seconds);
  if (r.gpu_checks > 0)
    fmt::print(
        "  GPU check: the first crossing of {} GPU bunch(es) on rank 0 equals the CPU's bit for bit (a sample "
        "of {} particles each)\n",
        r.gpu_checks, a.gpu_check_sample > 0 ? fmt::format("up to {}", a.gpu_check_sample) : "all");
  for (const std::string& f : r.output_files) fmt::print("  wrote {}\n", f);
  if (a.plot) plot(a.output);
  return kOk;
}

}  // namespace

void add_collide_command(CLI::App& app) {
  auto args = std::make_shared<CollideArgs>();
  CLI::App* cmd = app.add_subcommand("collide", "two beams colliding: strong-strong or weak-strong beam-beam (docs: Colliders)");
  cmd->add_option("setup", args->setup, "collider set-up file (JSON)")->required();
  cmd->add_option("-n,--turns", args->turns, "turns of beam 1 (turns x bunches of beam 1 crossings)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-o,--output", args->output, "output directory (bunches.csv, spectra.csv, summary.json, plots)");
  cmd->add_option("--placement", args->placement, "bunches over MPI ranks: block | round-robin");
  cmd->add_option("--progress", args->progress, "a progress line every this many crossings");
  cmd->add_flag("!--no-plot", args->plot, "do not draw the plots");
  cmd->add_option("--checkpoint-every", args->checkpoint_every,
                  "write a checkpoint (every bunch's particles) every this many turns into OUTPUT/checkpoint")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("!--no-gpu-check", args->gpu_check,
                "skip the check of the GPU (with --fma off, the first crossing of every GPU bunch is replayed on a "
                "sample of its particles on the CPU and compared bit for bit)");
  cmd->add_option("--gpu-check-sample", args->gpu_check_sample,
                  fmt::format("particles of the GPU check's sample: the bunch's first N (0: the whole bunch; "
                              "default {})",
                              CollideOptions{}.check_sample))
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--resume", args->resume, "continue from the last checkpoint in OUTPUT (bitwise as if never stopped)");
  cmd->add_option("--stop-after", args->stop_after, "stop (with a checkpoint) after this many turns")
      ->check(CLI::NonNegativeNumber);
  add_common_options(*cmd, args->common);
  cmd->callback([args] {
    const int rc = run(*args);
    if (rc != kOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ft::cli
