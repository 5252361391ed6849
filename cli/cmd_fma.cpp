// fusetrack fma LATTICE: frequency map analysis of a dynamic-aperture grid. Every particle is tracked
// 2N turns; NAFF tunes of turns [0, N) and [N, 2N) give the tune diffusion index (ft::frequency_map).
// Writes DIR/fma.csv, DIR/fma.npz, DIR/summary.json and the plot DIR/fma.png.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli_common.h"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/frequency_map.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"

namespace ft::cli {

namespace {

struct FmaArgs {
  CommonOptions common;
  std::string lattice;
  DaConfig config;
  FrequencyMapOptions options;
  std::string grid = "polar", units = "m";
  std::vector<double> amplitude_range, angle_range, x_range, y_range;  // min max
  bool no_closed_orbit = false;
  std::string output;
  bool plots = true;
};

void take_range(const std::vector<double>& range, double& lo, double& hi) {
  if (range.size() == 2) {
    lo = range[0];
    hi = range[1];
  }
}

/// The particles of lowest and highest diffusion index.
void print_extremes(const FrequencyMap& map, const DaScan& scan, const char* unit) {
  size_t best = map.diffusion.size(), worst = map.diffusion.size();
  for (size_t i = 0; i < map.diffusion.size(); ++i) {
    if (!std::isfinite(map.diffusion[i])) continue;
    if (best == map.diffusion.size() || map.diffusion[i] < map.diffusion[best]) best = i;
    if (worst == map.diffusion.size() || map.diffusion[i] > map.diffusion[worst]) worst = i;
  }
  if (best == map.diffusion.size()) return;
  for (const auto& [label, i] : {std::pair<const char*, size_t>{"lowest ", best}, {"highest", worst}})
    fmt::print("{} diffusion {:8.3f} at x {:.6g} {}, y {:.6g} {}: qx {:.8f} -> {:.8f}, qy {:.8f} -> {:.8f}\n", label,
               map.diffusion[i], scan.grid_x[i], unit, scan.grid_y[i], unit, map.qx1[i], map.qx2[i], map.qy1[i],
               map.qy2[i]);
}

int run_fma(FmaArgs& a) {
  DaConfig& c = a.config;
  c.grid = a.grid == "cartesian" ? DaGrid::Cartesian : DaGrid::Polar;
  c.units = a.units == "sigma" ? DaUnits::Sigma : DaUnits::Metres;
  c.around_closed_orbit = !a.no_closed_orbit;
  c.turns = 2 * a.options.turns_per_window;
  take_range(a.amplitude_range, c.amplitude_min, c.amplitude_max);
  take_range(a.angle_range, c.angle_min, c.angle_max);
  take_range(a.x_range, c.x_min, c.x_max);
  take_range(a.y_range, c.y_min, c.y_max);
  validate_frequency_map_options(a.options);
  validate_da_config(c);
  if (!a.output.empty()) check_output_directory(a.output, "--output");
  a.options.fma = parse_fma(a.common.fma);
  a.options.threads = threads_per_rank(a.common);

  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  const LinearOptics optics = compute_linear_optics(lattice);
  DaScan scan = make_da_scan(lattice, c);
  auto backend = make_backend(lattice, a.common);
  const char* unit = c.units == DaUnits::Sigma ? "sigma" : "m";
  fmt::print("frequency map of {}: {} particles, 2 x {} turns, backend {}; optics tunes qx {:.8f} qy {:.8f}\n",
             a.lattice, scan.initial.size(), a.options.turns_per_window, backend->name(), optics.qx, optics.qy);
  const FrequencyMap map = frequency_map(scan, &optics, *backend, a.options);
  size_t survivors = 0;
  for (int64_t t : map.lost_turn) survivors += t < 0 ? 1 : 0;
  fmt::print("{} of {} particles survived {} turns; tracking {:.2f} s, NAFF {:.2f} s\n", survivors,
             map.lost_turn.size(), 2 * map.turns_per_window, map.tracking_seconds, map.naff_seconds);
  print_extremes(map, scan, unit);
  if (a.output.empty()) return kOk;
  write_frequency_map(scan, map, a.output, a.lattice, optics.qx, optics.qy);
  fmt::print("results: {0}/fma.csv, {0}/fma.npz, {0}/summary.json\n", a.output);
  if (a.plots) run_plot_script("fma", {a.output}, "the frequency map plots are");
  return kOk;
}

}  // namespace

void add_fma_command(CLI::App& app) {
  auto a = std::make_shared<FmaArgs>();
  // A DA grid that leaves out the closed orbit itself (a particle there has no betatron signal).
  a->config.amplitudes = 20;
  a->config.amplitude_min = 0.001;
  a->config.angles = 7;
  CLI::App* cmd = app.add_subcommand(
      "fma", "frequency map analysis: NAFF tunes of two windows of N turns over a DA grid, tune diffusion index");
  cmd->add_option("lattice", a->lattice, "lattice file")->required();
  cmd->add_option("-N,--turns-per-window", a->options.turns_per_window,
                  "turns per NAFF window N (2N turns are tracked; default 1024)");
  cmd->add_option("--window-order", a->options.naff.window_order, "Hann window order p (default 2)");
  cmd->add_option("--grid", a->grid, "polar (angles x amplitudes) or cartesian (x-y)")
      ->check(CLI::IsMember({"polar", "cartesian"}));
  cmd->add_option("--angles", a->config.angles, "number of angles (polar, default 7)");
  cmd->add_option("--angle-range", a->angle_range, "first and last angle [deg] (polar, default 0 90)")->expected(2);
  cmd->add_option("--amplitudes", a->config.amplitudes, "number of amplitudes per angle (polar, default 20)");
  cmd->add_option("--amplitude-range", a->amplitude_range, "smallest and largest amplitude (polar, default 0.001 0.02)")
      ->expected(2);
  add_cartesian_grid_options(*cmd, a->config, a->x_range, a->y_range, a->units);
  cmd->add_option("--delta", a->config.deltas, "momentum offsets (several: one grid each)");
  cmd->add_flag("--no-closed-orbit", a->no_closed_orbit, "launch around zero instead of the closed orbit");
  cmd->add_option("-o,--output", a->output, "output directory (fma.csv, fma.npz, summary.json, fma.png)");
  cmd->add_flag("--plots,!--no-plots", a->plots, "write PNG plots (python3 + matplotlib)");
  add_common_options(*cmd, a->common);
  cmd->callback([a] {
    const int rc = run_fma(*a);
    if (rc != kOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ft::cli
