// fusetrack momentum-acceptance LATTICE: the local momentum acceptance at chosen elements by tracking,
// and the Touschek lifetime from it when the bunch is given (or taken from the radiation equilibrium).
#include <fmt/format.h>

#include <cmath>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/momentum_acceptance.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/radiation_integrals.h"

namespace ft::cli {

namespace {

struct MomentumAcceptanceArgs {
  CommonOptions common;
  std::string lattice;
  MomentumAcceptanceConfig config;
  std::vector<std::string> at;
  std::vector<double> s_range;  // min max
  std::vector<double> limits;   // x px y py zeta delta
  std::string output;
  bool plots = true;
  // The bunch of the Touschek lifetime (all or none).
  double emittance_x = 0.0, emittance_y = 0.0, sigma_delta = 0.0, sigma_zeta = 0.0, bunch_population = 0.0;
  // Or the radiation equilibrium's bunch (ft::equilibrium_touschek_beam).
  bool equilibrium_beam = false;
  double coupling = -1.0;
};

bool option_given(const CLI::App& cmd, const char* name) { return cmd.get_option(name)->count() > 0; }

/// Whether the Touschek bunch comes from the radiation equilibrium: --equilibrium-beam, or a radiating
/// lattice with --bunch-population and none of --emittance-x, --sigma-delta, --sigma-zeta. Checks the
/// options that go with it (InputError naming them).
bool use_equilibrium_beam(const CLI::App& cmd, const MomentumAcceptanceArgs& a, const Lattice& lattice) {
  const bool measured =
      option_given(cmd, "--emittance-x") || option_given(cmd, "--sigma-delta") || option_given(cmd, "--sigma-zeta");
  const bool radiating = lattice_radiation(lattice) != RadiationMode::off;
  if (!a.equilibrium_beam && !(radiating && !measured && option_given(cmd, "--bunch-population"))) {
    if (option_given(cmd, "--coupling")) {
      InputLocation at;
      at.field = "--coupling";
      throw InputError(at,
                       "goes with the equilibrium beam (--equilibrium-beam, or a radiating lattice without "
                       "--emittance-x, --sigma-delta and --sigma-zeta)");
    }
    return false;
  }
  InputLocation at;
  if (measured) {
    at.field = "--equilibrium-beam";
    throw InputError(at,
                     "takes emittance_x, sigma_delta and sigma_zeta from the radiation integrals: leave out "
                     "--emittance-x, --sigma-delta and --sigma-zeta");
  }
  if (!option_given(cmd, "--bunch-population")) {
    at.field = "--bunch-population";
    throw InputError(at, "the equilibrium beam's Touschek lifetime needs the particles per bunch; missing");
  }
  if (option_given(cmd, "--coupling") == option_given(cmd, "--emittance-y")) {
    at.field = "--coupling, --emittance-y";
    throw InputError(at,
                     "the equilibrium beam needs exactly one of the coupling ratio eps_y / eps_x and the "
                     "vertical emittance");
  }
  if (option_given(cmd, "--coupling") && !(a.coupling >= 0.0 && std::isfinite(a.coupling))) {
    at.field = "--coupling";
    throw InputError(at, fmt::format("must be finite and >= 0, got {}", a.coupling));
  }
  return true;
}

/// The radiation equilibrium's bunch (printed), option names in its errors.
TouschekBeam radiation_equilibrium_beam(const MomentumAcceptanceArgs& a, const Lattice& lattice,
                                        const OpticsOptions& optics) {
  const RadiationIntegrals r = radiation_integrals(lattice, optics);
  TouschekBeam beam;
  try {
    beam = equilibrium_touschek_beam(r, a.bunch_population, a.coupling, a.emittance_y);
  } catch (const InputError& e) {
    InputLocation at;
    at.field = e.where().field == "radiation" ? "--equilibrium-beam" : "--" + e.where().field;
    for (char& c : at.field)
      if (c == '_') c = '-';
    throw InputError(at, e.problem());
  }
  fmt::print(
      "equilibrium beam (radiation integrals): emittance_x {:.6e} m, emittance_y {:.6e} m, sigma_delta {:.6e}, "
      "sigma_zeta {:.6e} m (natural emittance {:.6e} m, Qs {:.6g}), {:.6g} particles per bunch\n",
      beam.emittance_x, beam.emittance_y, beam.sigma_delta, beam.sigma_zeta, r.emittance_x, r.synchrotron_tune,
      beam.bunch_population);
  return beam;
}

/// The Touschek bunch when any of its options is given; InputError naming the missing ones.
bool touschek_beam_from_options(const CLI::App& cmd, const MomentumAcceptanceArgs& a, TouschekBeam& beam) {
  const std::vector<const char*> names = {"--emittance-x", "--emittance-y", "--sigma-delta", "--sigma-zeta",
                                          "--bunch-population"};
  std::string missing;
  size_t given = 0;
  for (const char* name : names) {
    if (cmd.get_option(name)->count() > 0)
      ++given;
    else
      missing += (missing.empty() ? "" : ", ") + std::string(name);
  }
  if (given == 0) return false;
  if (given < names.size()) {
    InputLocation at;
    at.field = missing;
    throw InputError(at,
                     "the Touschek lifetime needs all of --emittance-x, --emittance-y, --sigma-delta, "
                     "--sigma-zeta and --bunch-population; missing");
  }
  beam = {a.emittance_x, a.emittance_y, a.sigma_delta, a.sigma_zeta, a.bunch_population};
  try {
    validate_touschek_beam(beam);
  } catch (const InputError& e) {
    InputLocation at;
    at.field = "--" + e.where().field;
    for (char& c : at.field)
      if (c == '_') c = '-';
    throw InputError(at, e.problem());
  }
  return true;
}

/// The library's option names as the command line spells them.
MomentumAcceptanceConfig checked_config(const MomentumAcceptanceConfig& c) {
  try {
    validate_momentum_acceptance_config(c);
  } catch (const InputError& e) {
    InputLocation at;
    at.field = "--" + e.where().field;
    for (char& ch : at.field)
      if (ch == '_') ch = '-';
    throw InputError(at, e.problem());
  }
  return c;
}

void print_acceptance(const MomentumAcceptance& lma) {
  fmt::print("{:>12} {:>8} {:<24} {:>12} {:>12}\n", "s [m]", "element", "name", "delta+", "delta-");
  for (size_t k = 0; k < lma.element.size(); ++k)
    fmt::print(
        "{:>12.6g} {:>8} {:<24} {:>12.6g} {:>12.6g}{}\n", lma.s[k], lma.element[k], lma.name[k], lma.positive[k],
        lma.negative[k],
        std::isnan(lma.positive_lost[k]) || std::isnan(lma.negative_lost[k]) ? "  (no loss up to delta_max)" : "");
}

int run_momentum_acceptance(const CLI::App& cmd, MomentumAcceptanceArgs& a) {
  MomentumAcceptanceConfig c = checked_config(a.config);
  c.fma = parse_fma(a.common.fma);
  c.threads = threads_per_rank(a.common);
  if (!a.output.empty()) check_output_directory(a.output, "--output");
  ElementRegistry registry;
  load_plugins(registry, a.common);
  Lattice lattice = load_lattice(a.lattice, registry);
  TouschekBeam beam;
  const bool from_equilibrium = use_equilibrium_beam(cmd, a, lattice);
  const bool touschek = from_equilibrium || touschek_beam_from_options(cmd, a, beam);
  if (from_equilibrium) beam = radiation_equilibrium_beam(a, lattice, c.optics);
  if (!a.limits.empty()) {
    InputLocation at;
    at.field = "--limit";
    if (a.limits.size() != 6) throw InputError(at, "expects six values: x px y py zeta delta (0: no limit)");
    GlobalLimits limits = lattice.limits();
    for (size_t k = 0; k < 6; ++k) {
      if (!(a.limits[k] >= 0.0)) throw InputError(at, "limits must not be negative");
      limits.turn_limit[k] = a.limits[k];
    }
    lattice.set_limits(limits);
  }
  AcceptancePositions where;
  where.names = a.at;
  where.names_label = "--at";
  where.s_range_label = "--s-range";
  if (!a.s_range.empty()) {
    where.has_s_range = true;
    where.s_min = a.s_range.at(0);
    where.s_max = a.s_range.at(1);
  }
  const std::vector<size_t> positions = select_acceptance_positions(lattice, where);
  auto backend = make_backend(lattice, a.common);
  fmt::print("momentum acceptance of {}: {} positions, {} turns, delta_max {}, precision {}, backend {}\n", a.lattice,
             positions.size(), c.turns, c.delta_max, c.precision, backend->name());
  const MomentumAcceptance lma = compute_momentum_acceptance(lattice, *backend, positions, c);
  print_acceptance(lma);
  fmt::print("closed orbit {} ({}); {} rounds, {} trial particles, {} launches, tracking {:.2f} s\n",
             lma.six_d ? "6D" : "4D", lma.mode_reason, lma.rounds, lma.particles_tracked, lma.launches, lma.seconds);
  fmt::print("acceptance: last surviving offset before the first loss (stable islands beyond it not counted)\n");
  TouschekLifetime lifetime;
  if (touschek) {
    const TwissTable twiss = compute_twiss_table(lattice);
    lifetime = touschek_lifetime(lattice, twiss, lma, beam);
    fmt::print(
        "Touschek lifetime (Piwinski): {:.6g} s = {:.4g} h over {:.6g} m (rates: delta+ {:.4g} 1/s, delta- "
        "{:.4g} 1/s)\n",
        lifetime.lifetime, lifetime.lifetime / 3600.0, lifetime.span_length, lifetime.rate_positive,
        lifetime.rate_negative);
  }
  if (a.output.empty()) return kOk;
  write_momentum_acceptance(a.output, lma, c, touschek ? &lifetime : nullptr, touschek ? &beam : nullptr, a.lattice);
  fmt::print("results: {0}/momentum_acceptance.csv, {0}/summary.json{1}\n", a.output,
             touschek ? fmt::format(", {}/touschek_rate.csv", a.output) : "");
  if (a.plots) run_plot_script("momentum_acceptance", {a.output}, "the momentum acceptance plot is");
  return kOk;
}

}  // namespace

void add_momentum_acceptance_command(CLI::App& app) {
  auto a = std::make_shared<MomentumAcceptanceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "momentum-acceptance",
      "local momentum acceptance at chosen elements by tracking; the Touschek lifetime from it (Piwinski)");
  cmd->add_option("lattice", a->lattice, "lattice file")->required();
  cmd->add_option("--at", a->at,
                  "elements: names or regular expressions matched against whole names (default: every element)");
  cmd->add_option("--s-range", a->s_range, "elements whose entrance lies in [S_MIN, S_MAX] [m]")->expected(2);
  cmd->add_option("-n,--turns", a->config.turns, "turns from each element (default 1000)");
  cmd->add_option("--precision", a->config.precision, "width of the final bracket in delta (default 1e-4)");
  cmd->add_option("--delta-max", a->config.delta_max, "largest offset tried per sign (default 0.05)");
  cmd->add_option("--coarse-steps", a->config.coarse_steps, "trials per sign of the first, coarse round (default 10)");
  cmd->add_option("--refine-points", a->config.refine_points,
                  "trials per bracket in each refinement round (default 3)");
  cmd->add_option("--limit", a->limits,
                  "per-turn limits |x| |px| |y| |py| |zeta| |delta| (0: none); without radiation a particle outside "
                  "a stationary RF bucket is lost only on such a limit, e.g. |zeta| at half the RF wavelength")
      ->expected(6);
  cmd->add_option("--emittance-x", a->emittance_x, "Touschek: geometric horizontal emittance [m]");
  cmd->add_option("--emittance-y", a->emittance_y, "Touschek: geometric vertical emittance [m]");
  cmd->add_option("--sigma-delta", a->sigma_delta, "Touschek: rms relative momentum spread");
  cmd->add_option("--sigma-zeta", a->sigma_zeta, "Touschek: rms bunch length [m]");
  cmd->add_option("--bunch-population", a->bunch_population, "Touschek: particles per bunch");
  cmd->add_flag("--equilibrium-beam", a->equilibrium_beam,
                "Touschek: emittance_x, sigma_delta and sigma_zeta of the radiation equilibrium (as `fusetrack "
                "radiation`; the default for a radiating lattice given --bunch-population alone of the bunch), with "
                "--bunch-population and --coupling or --emittance-y");
  cmd->add_option("--coupling", a->coupling,
                  "Touschek, equilibrium beam: emittance ratio kappa = eps_y / eps_x; eps_x = eps0 / (1 + kappa), "
                  "eps_y = kappa eps0 / (1 + kappa)");
  cmd->add_option("-o,--output", a->output, "output directory (table, summary, plot)");
  cmd->add_flag("--plots,!--no-plots", a->plots, "write a PNG plot (python3 + matplotlib)");
  add_common_options(*cmd, a->common);
  cmd->callback([a, cmd] {
    const int rc = run_momentum_acceptance(*cmd, *a);
    if (rc != kOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ft::cli
