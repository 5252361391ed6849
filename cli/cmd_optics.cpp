// fusetrack optics LATTICE: closed orbit, one-turn matrix and linear optics at the start of the
// lattice (ft::compute_linear_optics), tunes from tracking, a readable summary and JSON; with
// --twiss-table / --plot the optics at every element (ft::compute_twiss_table) as CSV or NPZ and
// a plot of the beta functions and the dispersion (fusetrack.plot.optics).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/output_files.h"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"

namespace ft::cli {

namespace {

struct OpticsArgs {
  CommonOptions common;
  std::string lattice;
  std::string output;
  bool force_4d = false;
  double delta0 = 0.0;
  int64_t tracking_turns = 1024;
  std::string twiss_table;  // --twiss-table out.csv|out.npz
  std::string plot;         // --plot out.png|.pdf|.svg
  bool strict = false;      // --strict: a tune disagreement is an error
  double normalized_step = OpticsOptions{}.normalized_step;
};

bool has_extension(const std::string& path, std::initializer_list<const char*> extensions) {
  const std::string ext = std::filesystem::path(path).extension().string();
  for (const char* e : extensions)
    if (ext == e) return true;
  return false;
}


/// Plots a Twiss table file with fusetrack.plot.optics.
void plot_twiss_table(const std::string& table_file, const std::string& plot, const std::string& title) {
  if (run_plot_script("optics", {table_file, plot, "--title", title}, "the plot " + plot + " is"))
    fmt::print("plot         {}\n", plot);
}

void run_twiss_table(const OpticsArgs& a, const TwissTable& t, double seconds) {
  fmt::print("along ring   {} rows (start + {} elements) in {:.3f} s; phase advance mu_x {:.10f}, mu_y {:.10f}; "
             "max coupling {:.3g}\n",
             t.size(), t.size() - 1, seconds, t.q1, t.q2, t.max_coupling);
  fmt::print("             checks: orbit closure {:.1e}, matrix vs one-turn map {:.1e}, periodicity {:.1e}\n",
             t.orbit_closure, t.matrix_mismatch, t.periodicity_error);
  std::string table_file = a.twiss_table;
  if (!a.twiss_table.empty()) {
    write_twiss_table(a.twiss_table, t, "--twiss-table");
    fmt::print("twiss table  {}\n", a.twiss_table);
  }
  if (a.plot.empty()) return;
  if (table_file.empty()) {
    table_file = (std::filesystem::temp_directory_path() / fmt::format("fusetrack_twiss_{}.npz", getpid())).string();
    write_twiss_table(table_file, t);
  }
  plot_twiss_table(table_file, a.plot, std::filesystem::path(a.lattice).filename().string());
  if (a.twiss_table.empty()) std::filesystem::remove(table_file);
}

std::string num(double v, const char* spec = "{:.10g}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : std::string("-");
}

void run_optics(const OpticsArgs& a) {
  if (!a.output.empty()) check_output_file(a.output, "--output");
  if (a.tracking_turns > 0 && a.tracking_turns < 16) {
    InputLocation at;
    at.field = "--tracking-turns";
    throw InputError(at, fmt::format("needs 0 (no tracking) or at least 16 turns, got {}", a.tracking_turns));
  }
  if (!a.twiss_table.empty() && !has_extension(a.twiss_table, {".csv", ".npz"})) {
    InputLocation at;
    at.field = "--twiss-table";
    throw InputError(at, fmt::format("'{}': the file name must end in .csv or .npz", a.twiss_table));
  }
  if (!a.plot.empty() && !has_extension(a.plot, {".png", ".pdf", ".svg"})) {
    InputLocation at;
    at.field = "--plot";
    throw InputError(at, fmt::format("'{}': the file name must end in .png, .pdf or .svg", a.plot));
  }
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  OpticsOptions options;
  options.force_4d = a.force_4d;
  options.delta0 = a.delta0;
  options.threads = a.common.threads;
  options.normalized_step = a.normalized_step;
  const LinearOptics o = compute_linear_optics(lattice, options);
  if (o.six_d && a.delta0 != 0.0)
    fmt::print(stderr, "note: --delta0 applies to the 4D method only (the RF fixes delta in 6D); add --4d to use it\n");
  TrackedTunes tracked;
  const bool with_tracking = a.tracking_turns > 0;
  if (with_tracking) tracked = tunes_by_tracking(lattice, o, a.tracking_turns, options);

  // The table along the ring gives the integer part of the tunes (phase advance); without
  // --twiss-table / --plot a failure there only costs the total tunes.
  const bool want_table = !a.twiss_table.empty() || !a.plot.empty();
  TwissTable table;
  double table_seconds = 0.0;
  std::string table_error;
  {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      table = compute_twiss_table(lattice, o, options);
    } catch (const Error& e) {
      if (want_table) throw;
      table_error = e.what();
    }
    table_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const bool have_totals = table_error.empty();

  const auto& ref = lattice.reference();
  fmt::print("lattice      {} ({} elements, circumference {:.10g} m)\n", a.lattice, lattice.sequence().size(),
             o.circumference);
  fmt::print("reference    mass0 {:.10g} eV, q0 {:g}, p0c {:.10g} eV, beta0 {:.12g}, gamma0 {:.12g}\n", ref.mass0,
             ref.q0, ref.p0c, o.beta0, o.gamma0);
  fmt::print("method       {}\n", o.mode_reason);
  fmt::print("closed orbit x {:.6e} m, px {:.6e}, y {:.6e} m, py {:.6e}, zeta {:.6e} m, delta {:.6e}\n",
             o.closed_orbit[0], o.closed_orbit[1], o.closed_orbit[2], o.closed_orbit[3], o.closed_orbit[4],
             o.closed_orbit[5]);
  fmt::print("             max |map(co) - co| = {:.2e} after {} Newton iterations\n", o.map.residual,
             o.map.iterations);
  fmt::print("one-turn matrix ({}; x, px, y, py, zeta, pzeta):\n", o.six_d ? "6D" : "4D, delta fixed");
  for (const auto& row : o.map.matrix)
    fmt::print("  {:>15.8e} {:>15.8e} {:>15.8e} {:>15.8e} {:>15.8e} {:>15.8e}\n", row[0], row[1], row[2], row[3],
               row[4], row[5]);
  // The tunes of the method's map: in 6D the eigen-tunes of the 6x6 matrix (synchro-betatron
  // coupling included, as Xsuite's and MAD-X's 6D twiss), in 4D those of the 4D matrix.
  const double mqx = o.six_d ? o.qx_6d : o.qx, mqy = o.six_d ? o.qy_6d : o.qy, mqs = o.six_d ? o.qs_6d : o.qs;
  fmt::print("tunes        Qx {:.10f}  Qy {:.10f}  Qs {}   ({})\n", mqx, mqy, num(mqs, "{:.10f}"),
             o.six_d ? "eigen-tunes of the 6D one-turn matrix" : "4D one-turn matrix, delta fixed");
  if (o.six_d)
    fmt::print("             Qx {:.10f}  Qy {:.10f}             (4D map, delta frozen: chromaticity and Twiss below)\n",
               o.qx, o.qy);
  if (have_totals)
    fmt::print("total tunes  Qx {:.10f}  Qy {:.10f}   (integer part from the phase advance along the ring, 4D)\n",
               table.qx_total, table.qy_total);
  else
    fmt::print(stderr, "warning: no total tunes (the element-by-element pass failed: {})\n", table_error);
  bool tune_check_failed = false;
  if (with_tracking) {
    const double dqx = tracked.qx - mqx, dqy = tracked.qy - mqy, dqs = o.six_d ? tracked.qs - mqs : 0.0;
    fmt::print("             Qx {:.10f}  Qy {:.10f}  Qs {}   (tracking, {} turns; differences {:.1e}, {:.1e}{})\n",
               tracked.qx, tracked.qy, num(tracked.qs, "{:.10f}"), tracked.turns, dqx, dqy,
               o.six_d ? fmt::format(", {:.1e}", dqs) : std::string());
    // Transverse: the matrix and the tracked tunes agree to ~1e-10 on every bundled ring; 1e-7
    // leaves room for amplitude detuning and close lines, and catches any real disagreement. Qs
    // from a short record of a slow oscillation is less precise (NAFF error ~1e-8 / Qs turns).
    const double limit = 1e-7, limit_s = 1e-5;
    if (!(std::fabs(dqx) <= limit) || !(std::fabs(dqy) <= limit) || !(std::fabs(dqs) <= limit_s)) {
      tune_check_failed = true;
      fmt::print(stderr,
                 "WARNING: the tunes from tracking disagree with those of the one-turn matrix beyond tolerance "
                 "(|dQx| = {:.3g}, |dQy| = {:.3g}, |dQs| = {:.3g}; limits {:g} transverse, {:g} longitudinal): the "
                 "matrix tunes are not those of the ring's motion (non-linear at the probe amplitude, or the "
                 "finite-difference matrix is wrong)\n",
                 std::fabs(dqx), std::fabs(dqy), std::fabs(dqs), limit, limit_s);
    }
  }
  fmt::print("twiss        beta_x {:.8g} m, alpha_x {:.8g}, beta_y {:.8g} m, alpha_y {:.8g}\n", o.beta_x, o.alpha_x,
             o.beta_y, o.alpha_y);
  if (o.six_d) fmt::print("             beta_s {:.8g} m, alpha_s {:.8g}\n", o.beta_s, o.alpha_s);
  fmt::print("dispersion   Dx {:.8g} m, Dpx {:.8g}, Dy {:.8g} m, Dpy {:.8g}\n", o.dx, o.dpx, o.dy, o.dpy);
  fmt::print("chromaticity Q'x {:.8g}, Q'y {:.8g}  (4D map, five-point central differences over delta +- {:g}, "
             "+- {:g})\n",
             o.dqx, o.dqy, o.delta_chrom, 2 * o.delta_chrom);
  fmt::print("longitudinal slip factor eta {:.10g}, momentum compaction alpha_c {:.10g}, gamma_t {}\n", o.eta,
             o.alpha_c, num(o.gamma_tr));

  if (!a.output.empty()) {
    nlohmann::ordered_json j;
    j["lattice"] = a.lattice;
    j["reference"] = {{"mass0", ref.mass0}, {"q0", ref.q0}, {"p0c", ref.p0c}};
    const nlohmann::ordered_json oj = optics_to_json(o);
    for (auto it = oj.begin(); it != oj.end(); ++it) {
      if (it.key() == "reference") {
        for (auto r = it.value().begin(); r != it.value().end(); ++r) j["reference"][r.key()] = r.value();
      } else {
        j[it.key()] = it.value();
      }
    }
    if (with_tracking) {
      auto n = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
      j["tunes_from_tracking"] = {{"turns", tracked.turns},
                                  {"amplitude_sqrt_m", options.tracking_amplitude},
                                  {"qx", tracked.qx},
                                  {"qy", tracked.qy},
                                  {"qs", n(tracked.qs)},
                                  {"agrees_with_matrix", !tune_check_failed}};
    }
    if (have_totals) j["tunes"]["total"] = {{"qx", table.qx_total}, {"qy", table.qy_total}};
    const std::string tmp = a.output + ".tmp";
    {
      std::ofstream out(tmp);
      if (!out) throw Error(fmt::format("{}: cannot write file", a.output));
      out << j.dump(2) << "\n";
      if (!out) throw Error(fmt::format("{}: write failed", a.output));
    }
    if (std::rename(tmp.c_str(), a.output.c_str()) != 0) throw Error(fmt::format("{}: cannot write file", a.output));
    fmt::print("output       {}\n", a.output);
  }
  if (want_table) run_twiss_table(a, table, table_seconds);
  if (tune_check_failed && a.strict) throw Error("optics: the tunes from tracking disagree with the matrix (--strict)");
}

}  // namespace

void add_optics_command(CLI::App& app) {
  auto args = std::make_shared<OpticsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "optics",
      "closed orbit, one-turn matrix, tunes, Twiss, dispersion, chromaticity and slip factor at the start; optics "
      "at every element (--twiss-table, --plot)");
  cmd->add_option("lattice", args->lattice, "lattice file (fusetrack JSON or Xsuite line JSON)")->required();
  cmd->add_option("-o,--output", args->output, "write everything as JSON");
  cmd->add_flag("--4d", args->force_4d, "4D method (delta fixed) even when the ring has RF");
  cmd->add_option("--delta0", args->delta0, "momentum offset of the 4D closed orbit");
  cmd->add_option("--tracking-turns", args->tracking_turns,
                  "turns for the tunes from tracking (0: skip)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--twiss-table", args->twiss_table,
                  "optics at every element (start, then each element's exit): beta, alpha, phase advance, "
                  "dispersion, closed orbit, coupled (Mais-Ripken) betas; .csv or .npz");
  cmd->add_option("--normalized-step", args->normalized_step,
                  "normalized amplitude [sqrt(m)] of the finite-difference steps of the final one-turn matrix "
                  "(x: a sqrt(beta_x), px: a sqrt(gamma_x); 0: fixed steps, three-point)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--strict", args->strict,
               "exit with an error when the tunes from tracking disagree with the one-turn matrix (otherwise a "
               "warning)");
  cmd->add_option("--plot", args->plot, "plot beta functions and dispersion against s (.png, .pdf or .svg)");
  add_common_options(*cmd, args->common, false);
  cmd->callback([args] { run_optics(*args); });
}

}  // namespace ft::cli
