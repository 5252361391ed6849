// fusetrack radiation: the synchrotron radiation integrals of a ring from its optics and the
// equilibrium they give (ft::radiation_integrals): energy loss per turn, damping partitions and
// times, natural emittance, energy spread; the synchrotron tune, closed orbit and bunch length of
// the ring with the mean radiation.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/radiation_integrals.h"

namespace ft::cli {

namespace {

struct RadiationArgs {
  CommonOptions common;
  std::string lattice;
  std::string output;
};

void run_radiation(const RadiationArgs& a) {
  if (!a.output.empty()) check_output_path(a.output, "--output");
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  OpticsOptions options;
  options.threads = a.common.threads;
  const RadiationIntegrals r = radiation_integrals(lattice, options);
  static const char* const kModes[3] = {"off", "mean", "quantum"};
  fmt::print("lattice      {} ({} elements, {} bends, circumference {:.10g} m; tracking radiation: {})\n", a.lattice,
             lattice.sequence().size(), r.bends, r.circumference, kModes[static_cast<int>(lattice_radiation(lattice))]);
  fmt::print("integrals    I1 {:.10e} m, I2 {:.10e} 1/m, I3 {:.10e} 1/m^2, I4 {:.10e} 1/m, I5 {:.10e} 1/m\n", r.i1,
             r.i2, r.i3, r.i4, r.i5);
  fmt::print("energy loss  U0 {:.10g} eV per turn (E0 {:.10g} eV)\n", r.energy_loss_per_turn, r.energy0);
  fmt::print("partitions   Jx {:.8f}, Jy {:.8f}, Jzeta {:.8f}\n", r.j_x, r.j_y, r.j_zeta);
  fmt::print("damping      tau_x {:.6e} s, tau_y {:.6e} s, tau_zeta {:.6e} s ({:.6g}, {:.6g}, {:.6g} turns)\n",
             r.damping_time_x, r.damping_time_y, r.damping_time_zeta, r.damping_turns_x, r.damping_turns_y,
             r.damping_turns_zeta);
  const auto size = [](double value, const char* unit, const char* partition) {
    return std::isfinite(value) ? fmt::format("{:.6e}{}", value, unit)
                                : fmt::format("none ({} <= 0: anti-damped)", partition);
  };
  fmt::print("equilibrium  emittance_x {}, sigma_delta {}\n", size(r.emittance_x, " m", "J_x"),
             size(r.sigma_delta, "", "J_zeta"));
  fmt::print("compaction   alpha_c = I1 / C = {:.10g}\n", r.momentum_compaction);
  fmt::print("rf           V {:.10g} V, synchronous phase asin(U0 / V) {:.6g} deg\n", r.rf_voltage,
             r.synchronous_phase * 57.29577951308232);
  if (r.longitudinal) {
    const auto& c = r.closed_orbit;
    fmt::print(
        "closed orbit with mean radiation: x {:.6e} m, px {:.6e}, y {:.6e} m, py {:.6e}, zeta {:.6e} m, "
        "delta {:.6e}\n",
        c[0], c[1], c[2], c[3], c[4], c[5]);
    fmt::print("bunch        Qs {:.8g}, beta_s {:.6g} m, equilibrium sigma_zeta {:.6e} m\n", r.synchrotron_tune,
               r.beta_s, r.bunch_length);
  } else {
    fmt::print("bunch        no longitudinal equilibrium: {}\n", r.longitudinal_reason);
  }
  if (a.output.empty()) return;
  nlohmann::ordered_json j;
  j["lattice"] = a.lattice;
  const nlohmann::ordered_json body = radiation_integrals_to_json(r);
  for (auto it = body.begin(); it != body.end(); ++it) j[it.key()] = it.value();
  std::ofstream out(a.output);
  out << j.dump(2) << "\n";
  if (!out) throw Error(fmt::format("{}: write failed", a.output));
  fmt::print("output       {}\n", a.output);
}

}  // namespace

void add_radiation_command(CLI::App& app) {
  auto args = std::make_shared<RadiationArgs>();
  CLI::App* cmd = app.add_subcommand(
      "radiation",
      "synchrotron radiation integrals I1..I5 from the optics; energy loss per turn, damping partitions and times, "
      "equilibrium emittance, energy spread and bunch length, the closed orbit with the mean radiation");
  cmd->add_option("lattice", args->lattice, "lattice file (fusetrack JSON, Xsuite line JSON or trackcpp flat file)")
      ->required();
  cmd->add_option("-o,--output", args->output, "write the results as JSON");
  add_common_options(*cmd, args->common, false);
  cmd->callback([args] { run_radiation(*args); });
}

}  // namespace ft::cli
