// fusetrack da LATTICE: dynamic-aperture scan with loss maps, DA per angle and against turns,
// checkpoints and resume, Ctrl-C handling, adaptive refinement and plots.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>

#include "cli_common.h"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_optimize.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/session.h"
#include "fusetrack/variants.h"

namespace ft::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

struct DaArgs {
  CommonOptions common;
  std::string lattice;
  DaConfig config;
  std::string grid = "polar";
  std::string units = "m";
  std::vector<double> amplitude_range, angle_range, x_range, y_range;  // min max
  std::vector<double> limits;                                          // x px y py zeta delta
  bool no_closed_orbit = false;
  std::string output = "da_out";
  int64_t checkpoint_every = 0;
  bool resume = false;
  bool plots = true;
  std::string part;                   // --part i/N
  std::vector<std::string> variants;  // --variants: variants files or lattice files (a study)
  bool optimize = false;              // --optimize
  int64_t stop_after = 0;             // --stop-after TURNS
};

/// Plots of a DA result directory with fusetrack.plot.da.
void make_da_plots(const std::string& output) { run_plot_script("da", {output}, "the DA plots are"); }

std::string format_duration(double s) {
  if (!std::isfinite(s)) return "?";
  const long t = static_cast<long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60) : fmt::format("{}m{:02d}s", t / 60, t % 60);
}

/// A progress bar with rate and ETA on a terminal, plain lines otherwise.
class ProgressReporter {
 public:
  ProgressReporter() : m_tty(isatty(fileno(stderr)) != 0) {}
  void operator()(const DaProgress& p) {
    const double frac = static_cast<double>(p.turns_done) / static_cast<double>(p.turns_total);
    const double rate = p.seconds > 0 ? p.surviving_particle_turns / p.seconds : 0.0;
    const double eta = frac > 0 ? p.seconds * (1 - frac) / frac : NAN;
    if (m_tty) {
      const int width = 30, filled = static_cast<int>(frac * width);
      fmt::print(stderr, "\r[{}{}] {:5.1f}%  turn {}/{}  alive {}/{}  {:.3g} particle-turns/s  ETA {}   ",
                 std::string(static_cast<size_t>(filled), '#'), std::string(static_cast<size_t>(width - filled), '.'),
                 100 * frac, p.turns_done, p.turns_total, p.alive, p.total, rate, format_duration(eta));
      if (p.turns_done >= p.turns_total) fmt::print(stderr, "\n");
    } else {
      const auto now = std::chrono::steady_clock::now();
      if (p.turns_done >= p.turns_total || now - m_last > std::chrono::seconds(10) || frac >= m_next) {
        fmt::print(stderr, "progress: turn {}/{} ({:.1f}%), alive {}/{}, {:.3g} particle-turns/s, ETA {}\n",
                   p.turns_done, p.turns_total, 100 * frac, p.alive, p.total, rate, format_duration(eta));
        m_last = now;
        while (m_next <= frac) m_next += 0.1;
      }
    }
  }

 private:
  bool m_tty;
  std::chrono::steady_clock::time_point m_last = std::chrono::steady_clock::now();
  double m_next = 0.1;
};

void take_range(const std::vector<double>& v, const char* name, double& lo, double& hi) {
  if (v.empty()) return;
  InputLocation at;
  at.field = name;
  if (v.size() != 2) throw InputError(at, "expects two values: min max");
  lo = v[0];
  hi = v[1];
}

/// Cartesian scans: the border of the stable region per x column, and its statistics.
void print_columns(const DaSummary& summary, const char* unit) {
  fmt::print("{:>10} {:>14} {:>16} {:>16}\n", "delta", fmt::format("x [{}]", unit), fmt::format("y_high [{}]", unit),
             fmt::format("y_low [{}]", unit));
  for (const auto& r : summary.per_column)
    fmt::print("{:>10.3g} {:>14.6g} {:>16.6g} {:>16.6g}\n", r.delta, r.x, r.y_high, r.y_low);
  fmt::print(
      "DA min {:.6g}, mean {:.6g}, max {:.6g} [{}] (definition: over the columns whose point nearest y = 0 "
      "survives, the vertical border min(|y_high|, |y_low|) reached from it before the first loss)\n",
      summary.da_min, summary.da_mean, summary.da_max, unit);
}

/// A study: per variant its DA, then per angle (column) the statistics over the variants.
void print_study(const DaStudySummary& st, const DaScan& scan, const DaProgress& progress, const char* unit) {
  fmt::print("survivors: {} of {} after {} turns; {:.3g} surviving-particle-turns/s over the study ({:.2f} s)\n",
             scan.particles.alive_count(), scan.particles.size(), scan.config.turns,
             progress.seconds > 0 ? progress.surviving_particle_turns / progress.seconds : 0.0, progress.seconds);
  fmt::print("{:>5} {:<32} {:>14} {:>14} {:>14}\n", "#", "variant", fmt::format("DA min [{}]", unit),
             fmt::format("mean [{}]", unit), fmt::format("max [{}]", unit));
  for (size_t v = 0; v < st.names.size(); ++v)
    fmt::print("{:>5} {:<32} {:>14.6g} {:>14.6g} {:>14.6g}\n", v, st.names[v], st.per_variant[v].da_min,
               st.per_variant[v].da_mean, st.per_variant[v].da_max);
  const bool cartesian = scan.config.grid == DaGrid::Cartesian;
  fmt::print("across the {} variants:\n{:>10} {:>10} {:>14} {:>14} {:>14} {:>14}  {}\n", st.names.size(), "delta",
             cartesian ? "x" : "angle", "min", "mean", "std", "max", "worst variant");
  for (const DaStudyRow& r : st.rows)
    fmt::print("{:>10.3g} {:>10.4g} {:>14.6g} {:>14.6g} {:>14.6g} {:>14.6g}  {}\n", r.delta, r.angle, r.min, r.mean,
               r.std, r.max, st.names[r.worst_variant]);
  fmt::print("DA (smallest over angles) over the variants: min {:.6g} ({}), mean {:.6g}, std {:.6g}, max {:.6g} [{}]\n",
             st.da_min, st.names[st.worst_variant], st.da_mean, st.da_std, st.da_max, unit);
}

/// Options of the grid not chosen are an error, not silently ignored (--nx without --grid cartesian
/// used to run the default polar scan).
void refuse_options_of_the_other_grid(const CLI::App& cmd, const std::string& grid) {
  const bool cartesian = grid == "cartesian";
  const std::vector<const char*> polar_only = {"--angles", "--angle-range", "--amplitudes", "--amplitude-range",
                                               "--refine"};
  const std::vector<const char*> cartesian_only = {"--nx", "--ny", "--x-range", "--y-range"};
  std::string given;
  for (const char* name : cartesian ? polar_only : cartesian_only)
    if (cmd.get_option(name)->count() > 0) given += (given.empty() ? "" : ", ") + std::string(name);
  if (given.empty()) return;
  InputLocation at;
  at.field = "--grid";
  throw InputError(
      at, fmt::format("{} {} only for --grid {}, but the grid is {}{}", given,
                      given.find(',') == std::string::npos ? "applies" : "apply", cartesian ? "polar" : "cartesian",
                      grid, cartesian ? "" : " (the default); add --grid cartesian"));
}

int run_da(DaArgs a) {
  DaConfig& c = a.config;
  c.grid = a.grid == "cartesian" ? DaGrid::Cartesian : DaGrid::Polar;
  c.units = a.units == "sigma" ? DaUnits::Sigma : DaUnits::Metres;
  c.around_closed_orbit = !a.no_closed_orbit;
  take_range(a.amplitude_range, "--amplitude-range", c.amplitude_min, c.amplitude_max);
  take_range(a.angle_range, "--angle-range", c.angle_min, c.angle_max);
  take_range(a.x_range, "--x-range", c.x_min, c.x_max);
  take_range(a.y_range, "--y-range", c.y_min, c.y_max);
  if (!a.limits.empty()) {
    InputLocation at;
    at.field = "--limit";
    if (a.limits.size() != 6) throw InputError(at, "expects six values: x px y py zeta delta (0: no limit)");
    std::copy(a.limits.begin(), a.limits.end(), c.turn_limits);
  }
  validate_da_config(c);                         // before the (possibly slow) lattice load
  check_output_directory(a.output, "--output");  // not after hours of tracking

  // Set-up (reading the lattice and variants, each variant's closed orbit and optics, the backend)
  // and tracking are timed apart: the set-up is CPU work that MPI ranks share by variant.
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const auto t_start = Clock::now();
  ElementRegistry registry;
  load_plugins(registry, a.common);
  Lattice base = load_lattice(a.lattice, registry);
  LatticeVariants variants;
  const bool study = !a.variants.empty();
  if (study) variants = load_variants(base, a.variants, registry);
  if (a.optimize) {
    OptimizeReport report;
    if (study)
      variants.lattices = optimize_variants_for_tracking(variants.pointers(), &report);
    else
      base = optimize_for_tracking(base, &report);
    fmt::print("{} (loss elements are indices into the optimized sequence)\n", report.summary());
  }
  Lattice& lattice = study ? variants.lattices[0] : base;
  const double read_seconds = seconds_since(t_start);
  DaJobOptions jo;
  jo.lattice_file = a.lattice;
  jo.output = a.output;
  jo.checkpoint_every = a.checkpoint_every;
  jo.part = a.part;
  jo.part_label = "--part";
  jo.stop_after = a.stop_after;
  jo.fma = parse_fma(a.common.fma);
  jo.threads = threads_per_rank(a.common);
  jo.stop = &g_stop;
  ProgressReporter reporter;
  jo.on_progress = [&](const DaProgress& p) { reporter(p); };
  std::unique_ptr<DaJob> job_holder =
      study ? std::make_unique<DaJob>(variants, c, jo) : std::make_unique<DaJob>(lattice, c, jo);
  DaJob& job = *job_holder;
  const double frames_seconds = seconds_since(t_start) - read_seconds;
  const bool split = job.split(), job_part = job.job_part(), root = job.root();
  const PartSpec part = job.part();
  const Share share = job.share();
  auto backend = make_backend(lattice, a.common);
  const double backend_seconds = seconds_since(t_start) - read_seconds - frames_seconds;
  if (a.resume) {
    job.resume();
    if (root) fmt::print(stderr, "resuming from {} at turn {}\n", job.checkpoint_file(), job.scan().turns_done);
  }
  if (root && study)
    fmt::print("DA study of {}: {} lattice variants ({}{}), {} particles each, all tracked together\n", a.lattice,
               variants.size(), variants.names.front(), variants.size() > 1 ? ", ..., " + variants.names.back() : "",
               job.total() / variants.size());
  if (root)
    fmt::print("DA scan of {}: {} particles ({} momentum offsets), {} turns, backend {}{}\n", a.lattice,
               job.scan().particles.size(), c.deltas.size(), c.turns, backend->name(),
               !split     ? std::string()
               : job_part ? fmt::format(" (part {} of {}: particles {} to {})", part.index, part.count, share.begin,
                                        share.end - 1)
                          : fmt::format(" (shared by {} MPI ranks)", part.count));
  if (root)
    fmt::print("set-up: {:.2f} s (lattice{} read {:.2f} s, closed orbit and optics{} {:.2f} s, backend {:.2f} s)\n",
               seconds_since(t_start), study ? " and variants" : "", read_seconds,
               study ? fmt::format(" of the {} variants", variants.size()) : std::string(), frames_seconds,
               backend_seconds);
  g_stop = false;
  auto previous = std::signal(SIGINT, on_sigint);
  const auto t_run = Clock::now();
  const DaJobStatus status = job.run(*backend);
  std::signal(SIGINT, previous);
  if (root)
    fmt::print(
        "tracking: {:.2f} s (then results {:.2f} s){}\n", job.progress().seconds,
        seconds_since(t_run) - job.progress().seconds,
        job.rank_seconds().empty()
            ? fmt::format("; in the backend {:.2f} s", job.progress().backend_seconds)
            : fmt::format("; per MPI rank in the backend: {:.2f} s, in exchanges (waits included): {:.2f} s",
                          fmt::join(job.rank_seconds(), " s, "), fmt::join(job.rank_exchange_seconds(), " s, ")));
  if (status == DaJobStatus::StoppedAsAsked) {
    if (root)
      fmt::print("stopped after turn {} as asked (--stop-after): checkpoint written to {}; continue with --resume\n",
                 job.scan().turns_done, job.checkpoint_file());
    return kOk;
  }
  if (status == DaJobStatus::Interrupted) {
    if (root)
      fmt::print(stderr, "\ninterrupted at turn {}: checkpoint written to {}; continue with --resume\n",
                 job.scan().turns_done, job.checkpoint_file());
    return 130;
  }
  if (status == DaJobStatus::PartWritten) {
    fmt::print("part {} of {} written: {}/part_{}_of_{}.json and .npz; merge all parts with `fusetrack da-merge`\n",
               part.index, part.count, a.output, part.index, part.count);
    return kOk;
  }
  if (status == DaJobStatus::NotRoot) return kOk;
  const DaScan& scan = job.scan();
  const DaSummary& summary = job.summary();
  const DaProgress& progress = job.progress();

  const char* unit = c.units == DaUnits::Sigma ? "sigma" : "m";
  if (job.study()) {
    print_study(job.study_summary(), scan, progress, unit);
    fmt::print("results: {0}/summary.json, {0}/summary.csv, {0}/variants.csv, {0}/da.npz, {0}/variants/*/\n", a.output);
    if (a.plots) make_da_plots(a.output);
    return kOk;
  }
  fmt::print("survivors: {} of {} after {} turns; {:.3g} surviving-particle-turns/s over the scan ({:.2f} s)\n",
             scan.particles.alive_count(), scan.particles.size(), c.turns,
             progress.seconds > 0 ? progress.surviving_particle_turns / progress.seconds : 0.0, progress.seconds);
  if (c.grid == DaGrid::Polar) {
    fmt::print("{:>10} {:>10} {:>16} {:>16} {:>16}\n", "delta", "angle", fmt::format("first loss [{}]", unit),
               fmt::format("last stable [{}]", unit), fmt::format("refined [{}]", unit));
    for (const auto& r : summary.per_angle)
      fmt::print("{:>10.3g} {:>10.2f} {:>16.6g} {:>16.6g} {:>16.6g}\n", r.delta, r.angle, r.da_first_loss,
                 r.da_last_stable, r.da_refined);
    fmt::print(
        "DA min {:.6g}, mean {:.6g}, max {:.6g} [{}] (definition: largest amplitude below the first loss on "
        "each ray{})\n",
        summary.da_min, summary.da_mean, summary.da_max, unit, c.refine_resolution > 0 ? ", refined by bisection" : "");
    if (c.refine_resolution > 0)
      fmt::print(
          "refinement: {} particle-turns; the equivalent fine grid (step {}) would need about {} ({:.1f}x more)\n",
          summary.refinement_particle_turns, c.refine_resolution, summary.fine_grid_particle_turns_estimate,
          static_cast<double>(summary.fine_grid_particle_turns_estimate) /
              std::max<double>(1.0, static_cast<double>(summary.refinement_particle_turns) +
                                        static_cast<double>(c.turns) * static_cast<double>(scan.particles.size())));
  }
  if (c.grid == DaGrid::Cartesian) print_columns(summary, unit);
  fmt::print("results: {0}/summary.json, {0}/summary.csv, {0}/da.npz\n", a.output);
  if (a.plots) make_da_plots(a.output);
  return kOk;
}

}  // namespace

namespace {

struct MergeArgs {
  std::vector<std::string> parts;
  std::string output = "da_out";
  bool plots = true;
};

void run_da_merge(const MergeArgs& m) {
  check_output_directory(m.output, "--output");
  std::string lattice_file;
  const DaScan scan = merge_da_parts(m.parts, lattice_file);
  if (!scan.variants.empty()) {
    const DaStudySummary study = summarize_da_study(scan);
    write_da_study_results(scan, study, m.output, lattice_file);
    fmt::print("merged {} particles of the study of {} ({} variants)\n", scan.particles.size(), lattice_file,
               scan.variants.size());
    print_study(study, scan, DaProgress{}, scan.config.units == DaUnits::Sigma ? "sigma" : "m");
    fmt::print("results: {0}/summary.json, {0}/summary.csv, {0}/variants.csv, {0}/da.npz, {0}/variants/*/\n", m.output);
    if (m.plots) make_da_plots(m.output);
    return;
  }
  const DaSummary summary = summarize_da(scan);
  write_da_results(scan, summary, m.output, lattice_file);
  fmt::print("merged {} particles of the scan of {}: survivors {} after {} turns\n", scan.particles.size(),
             lattice_file, scan.particles.alive_count(), scan.config.turns);
  fmt::print("DA min {:.6g}, mean {:.6g}, max {:.6g}{}\n", summary.da_min, summary.da_mean, summary.da_max,
             scan.config.grid == DaGrid::Polar ? "" : " (cartesian: vertical border per column)");
  fmt::print("results: {0}/summary.json, {0}/summary.csv, {0}/da.npz\n", m.output);
  if (m.plots) make_da_plots(m.output);
}

}  // namespace

void add_da_merge_command(CLI::App& app) {
  auto m = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "da-merge", "join the job-array parts of a DA scan (fusetrack da --part i/N) into the results of one run");
  cmd->add_option("parts", m->parts, "part_<i>_of_<N>.json files, or directories holding them")->required();
  cmd->add_option("-o,--output", m->output, "output directory");
  cmd->add_flag("--plots,!--no-plots", m->plots, "write PNG plots (python3 + matplotlib)");
  cmd->callback([m] { run_da_merge(*m); });
}

void add_da_command(CLI::App& app) {
  auto a = std::make_shared<DaArgs>();
  CLI::App* cmd = app.add_subcommand("da", "dynamic-aperture scan: loss map, DA per angle and against turns, plots");
  cmd->add_option("lattice", a->lattice, "lattice file")->required();
  cmd->add_option("-n,--turns", a->config.turns, "turns (1 to 10^6 and more)");
  cmd->add_option("--grid", a->grid, "polar (angles x amplitudes) or cartesian (x-y)")
      ->check(CLI::IsMember({"polar", "cartesian"}));
  cmd->add_option("--angles", a->config.angles, "number of angles (polar)");
  cmd->add_option("--angle-range", a->angle_range, "first and last angle [deg] (polar, default 0 90)")->expected(2);
  cmd->add_option("--amplitudes", a->config.amplitudes, "number of amplitudes per angle (polar)");
  cmd->add_option("--amplitude-range", a->amplitude_range, "smallest and largest amplitude (polar)")->expected(2);
  add_cartesian_grid_options(*cmd, a->config, a->x_range, a->y_range, a->units);
  cmd->add_option("--px", a->config.px0, "px offset of every particle");
  cmd->add_option("--py", a->config.py0, "py offset of every particle");
  cmd->add_option("--zeta", a->config.zeta0, "zeta offset of every particle [m]");
  cmd->add_option("--delta", a->config.deltas, "momentum offsets (several: one scan each)");
  cmd->add_flag("--no-closed-orbit", a->no_closed_orbit, "launch around zero instead of the closed orbit");
  cmd->add_option("--limit", a->limits, "per-turn limits |x| |px| |y| |py| |zeta| |delta| (0: none)")->expected(6);
  cmd->add_option("--refine", a->config.refine_resolution, "bisect the boundary on each ray to this resolution");
  cmd->add_option("-o,--output", a->output, "output directory");
  cmd->add_option("--checkpoint-every", a->checkpoint_every, "turns between checkpoints (default 1000)");
  cmd->add_flag("--resume", a->resume, "continue from the checkpoint in the output directory");
  cmd->add_option("--stop-after", a->stop_after,
                  "stop at the first checkpoint at or after this many turns (batch wall-time limits); continue with "
                  "--resume")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--plots,!--no-plots", a->plots, "write PNG plots (python3 + matplotlib)");
  cmd->add_option("--part", a->part,
                  "job arrays: track only part i of N of the initial conditions (i/N, 0 <= i < N) and write "
                  "part_i_of_N.json/.npz; `fusetrack da-merge` joins the parts");
  cmd->add_option("--variants", a->variants,
                  "lattice variants tracked together in one run (a study: error seeds, knob scans): variants "
                  "files (fusetrack errors writes them) applied to LATTICE, or lattice files with LATTICE's "
                  "sequence; results per variant and across them");
  cmd->add_flag("--optimize", a->optimize,
                "simplify the lattice for tracking first: markers, inactive kicks and zero-length drifts removed, "
                "consecutive drifts and adjacent thin kicks merged (docs: Lattices and import, --optimize)");
  add_common_options(*cmd, a->common);
  cmd->callback([a, cmd] {
    refuse_options_of_the_other_grid(*cmd, a->grid);
    const int rc = run_da(*a);
    if (rc != kOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ft::cli
