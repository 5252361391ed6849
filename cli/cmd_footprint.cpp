// fusetrack footprint LATTICE (--emittances enx eny | --geometric-emittances ex ey) -o DIR: the tune footprint
//   of any lattice (detuning with amplitude from octupoles, space charge, beam-beam lenses): NAFF tunes of a
//   polar grid of amplitudes in units of the rms beam sizes (ft::tune_footprint) into DIR/footprint.csv,
//   DIR/footprint.json and DIR/footprint.png (fusetrack.plot.footprint). The reference optics (tunes, closed
//   orbit, beam sizes) are those of the bare ring: space-charge elements removed (remove_space_charge) and
//   beam-beam lenses switched off (without_beam_beam_lenses). `fusetrack spacecharge footprint` is the same
//   command (add_footprint_subcommand).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/space_charge_install.h"

namespace ft::cli {

namespace {

struct FootprintArgs {
  CommonOptions common;
  std::string lattice;
  std::vector<double> emittances, geometric_emittances;
  double max_sigma = 4.0, min_sigma = 0.05;
  int amplitudes = 12, angles = 7;
  int64_t turns = 1024;
  double zeta = 0.0, delta = 0.0;
  bool force_4d = false;
  bool plot = true;
  std::string output;
};

// The bare ring of `lattice` and what was taken out of it for its optics.
struct BareRing {
  LinearOptics optics;
  size_t space_charge_removed = 0, lenses_off = 0;
};

BareRing bare_ring_optics(const Lattice& lattice, const FootprintArgs& a, ElementRegistry& registry) {
  OpticsOptions oo;
  oo.force_4d = a.force_4d;
  oo.threads = threads_per_rank(a.common);
  BareRing bare;
  const nlohmann::ordered_json doc = remove_space_charge(lattice, a.lattice, &bare.space_charge_removed);
  const Lattice without_sc =
      bare.space_charge_removed > 0 ? lattice_from_json(doc, a.lattice + " (space charge removed)", registry) : lattice;
  bare.optics = compute_linear_optics(without_beam_beam_lenses(without_sc, &bare.lenses_off), oo);
  return bare;
}

FootprintOptions footprint_options(const FootprintArgs& a) {
  const bool normalized = !a.emittances.empty(), geometric = !a.geometric_emittances.empty();
  if (normalized == geometric)
    throw InputError(InputLocation("--emittances"),
                     "give either --emittances eps_nx eps_ny (normalized, with the lattice's reference energy) or "
                     "--geometric-emittances eps_x eps_y [m rad]");
  const std::vector<double>& e = normalized ? a.emittances : a.geometric_emittances;
  const char* option = normalized ? "--emittances" : "--geometric-emittances";
  if (e.size() != 2) throw InputError(InputLocation(option), "expects two values: x and y [m rad]");
  if (!(e[0] > 0.0) || !(e[1] > 0.0) || !std::isfinite(e[0]) || !std::isfinite(e[1]))
    throw InputError(InputLocation(option), fmt::format("the emittances must be positive, got {} and {}", e[0], e[1]));
  FootprintOptions o;
  (normalized ? o.emittance_nx : o.emittance_x) = e[0];
  (normalized ? o.emittance_ny : o.emittance_y) = e[1];
  o.max_sigma = a.max_sigma;
  o.min_sigma = a.min_sigma;
  o.amplitudes = a.amplitudes;
  o.angles = a.angles;
  o.turns = a.turns;
  o.zeta_offset = a.zeta;
  o.delta_offset = a.delta;
  o.threads = threads_per_rank(a.common);
  o.fma = parse_fma(a.common.fma);
  return o;
}

std::string footprint_csv(const TuneFootprint& fp, const LinearOptics& optics, const std::string& lattice) {
  std::string text = fmt::format(
      "# tune footprint of {} ({} turns, NAFF); lattice tunes qx {:.10f} qy {:.10f}; "
      "sigma_x {:.6e} m, sigma_y {:.6e} m at the start\n",
      lattice, fp.turns, optics.qx, optics.qy, fp.sigma_x, fp.sigma_y);
  text += "amplitude_x,amplitude_y,qx,qy,lost_turn\n";
  for (size_t i = 0; i < fp.qx.size(); ++i)
    text += fmt::format("{:.6g},{:.6g},{:.12g},{:.12g},{}\n", fp.amplitude_x[i], fp.amplitude_y[i], fp.qx[i], fp.qy[i],
                        fp.lost_turn[i]);
  return text;
}

nlohmann::ordered_json footprint_json(const TuneFootprint& fp, const LinearOptics& optics, const FootprintOptions& o,
                                      const std::string& lattice) {
  auto finite_or_null = [](const std::vector<double>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const double x : v) a.push_back(std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json());
    return a;
  };
  nlohmann::ordered_json j;
  j["lattice"] = lattice;
  j["turns"] = fp.turns;
  j["lattice_tunes"] = {optics.qx, optics.qy};
  j["sigma_x"] = fp.sigma_x;
  j["sigma_y"] = fp.sigma_y;
  if (o.emittance_x > 0.0)
    j["geometric_emittances"] = {o.emittance_x, o.emittance_y};
  else
    j["normalized_emittances"] = {o.emittance_nx, o.emittance_ny};
  j["amplitude_x"] = fp.amplitude_x;
  j["amplitude_y"] = fp.amplitude_y;
  j["qx"] = finite_or_null(fp.qx);
  j["qy"] = finite_or_null(fp.qy);
  j["lost_turn"] = fp.lost_turn;
  return j;
}

void run_footprint(const FootprintArgs& a) {
  const FootprintOptions o = footprint_options(a);
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  const BareRing bare = bare_ring_optics(lattice, a, registry);
  std::filesystem::create_directories(a.output);
  const std::string csv = (std::filesystem::path(a.output) / "footprint.csv").string();
  const std::string json = (std::filesystem::path(a.output) / "footprint.json").string();
  check_output_path(csv, "--output");
  auto backend = make_backend(lattice, a.common);
  const TuneFootprint fp = tune_footprint(lattice, bare.optics, *backend, o);
  write_file_atomically(csv, footprint_csv(fp, bare.optics, a.lattice));
  write_file_atomically(json, footprint_json(fp, bare.optics, o, a.lattice).dump(1) + "\n");
  std::vector<std::string> taken_out;
  if (bare.space_charge_removed > 0)
    taken_out.push_back(fmt::format("its {} space-charge elements", bare.space_charge_removed));
  if (bare.lenses_off > 0) taken_out.push_back(fmt::format("its {} beam-beam lenses", bare.lenses_off));
  fmt::print("lattice   {}: tunes qx {:.6f}, qy {:.6f}{} ({})\n", a.lattice, bare.optics.qx, bare.optics.qy,
             taken_out.empty()
                 ? ""
                 : " without " + taken_out.front() + (taken_out.size() > 1 ? " and " + taken_out.back() : ""),
             backend->name());
  size_t lost = 0;
  double min_qx = 1.0, max_qx = 0.0, min_qy = 1.0, max_qy = 0.0;
  for (size_t i = 0; i < fp.qx.size(); ++i) {
    if (fp.lost_turn[i] >= 0) {
      ++lost;
      continue;
    }
    min_qx = std::min(min_qx, fp.qx[i]);
    max_qx = std::max(max_qx, fp.qx[i]);
    min_qy = std::min(min_qy, fp.qy[i]);
    max_qy = std::max(max_qy, fp.qy[i]);
  }
  fmt::print("footprint {} particles ({} amplitudes up to {} sigma x {} angles), {} turns: {} lost\n", fp.qx.size(),
             o.amplitudes, o.max_sigma, o.angles, fp.turns, lost);
  if (lost < fp.qx.size())
    fmt::print("          qx {:.6f} .. {:.6f}, qy {:.6f} .. {:.6f}\n", min_qx, max_qx, min_qy, max_qy);
  fmt::print("written   {}, {}\n", csv, json);
  if (a.plot) {
    const std::string png = (std::filesystem::path(a.output) / "footprint.png").string();
    if (run_plot_script("footprint", {csv, png}, "the plot " + png + " is")) fmt::print("plot      {}\n", png);
  }
}

}  // namespace

CLI::App* add_footprint_subcommand(CLI::App& parent, const std::string& name, const std::string& description) {
  auto fp = std::make_shared<FootprintArgs>();
  CLI::App* cmd = parent.add_subcommand(name, description);
  cmd->add_option("lattice", fp->lattice, "lattice file (any format fusetrack reads)")->required();
  CLI::Option* normalized =
      cmd->add_option("--emittances", fp->emittances, "normalized rms emittances eps_nx eps_ny [m rad]")->expected(2);
  cmd->add_option("--geometric-emittances", fp->geometric_emittances, "geometric rms emittances eps_x eps_y [m rad]")
      ->expected(2)
      ->excludes(normalized);
  cmd->add_option("--max-sigma", fp->max_sigma, "largest amplitude [rms beam sizes] (default 4)");
  cmd->add_option("--min-sigma", fp->min_sigma,
                  "smallest amplitude in each plane [rms beam sizes] (default 0.05; e.g. 1e-3 for the tune shift "
                  "at the centre)");
  cmd->add_option("--amplitudes", fp->amplitudes, "amplitude steps (default 12)");
  cmd->add_option("--angles", fp->angles, "angles from the x axis to the y axis (default 7)");
  cmd->add_option("-n,--turns", fp->turns, "turns for the frequency analysis (default 1024, >= 16)");
  cmd->add_option("--zeta", fp->zeta, "zeta of the particles from the closed orbit [m] (default 0: the bunch centre)");
  cmd->add_option("--delta", fp->delta, "delta of the particles from the closed orbit (default 0)");
  cmd->add_flag("--4d", fp->force_4d, "optics with delta frozen (as `fusetrack optics --4d`)");
  cmd->add_flag("!--no-plot", fp->plot, "write footprint.csv and footprint.json only");
  cmd->add_option("-o,--output", fp->output, "directory for footprint.csv, footprint.json and footprint.png")
      ->required();
  add_common_options(*cmd, fp->common);
  cmd->callback([fp] { run_footprint(*fp); });
  return cmd;
}

void add_footprint_command(CLI::App& app) {
  add_footprint_subcommand(app, "footprint",
                           "tune footprint of any lattice: NAFF tunes of a polar grid of amplitudes in rms beam sizes "
                           "(octupoles, space charge, beam-beam lenses; docs: Colliders, Space charge)");
}

}  // namespace ft::cli
