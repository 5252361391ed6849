// fusetrack spacecharge install LATTICE (--elements N | --positions s...) --intensity N --emittances enx eny
//   --sigma-zeta S --delta-rms D [--model pic ...] -o OUT.json: frozen space-charge elements (SpaceChargeBiGaussian)
//   around the ring with the beam sizes from the optics at each, or particle-in-cell ones (SpaceChargePIC) at the
//   same places (fusetrack/space_charge_install.h, docs: Space charge); prints each element and the
//   Laslett tune shifts.
// fusetrack spacecharge remove LATTICE -o OUT.json: the lattice without them, split drifts joined again.
// fusetrack spacecharge footprint LATTICE --emittances enx eny -o DIR: the tune footprint (NAFF tunes of a
//   polar grid of amplitudes, ft::tune_footprint): the command `fusetrack footprint` (cmd_footprint.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/space_charge_install.h"

namespace ft::cli {

namespace {

struct InstallArgs {
  CommonOptions common;
  std::string lattice;
  int64_t elements = 0;
  std::vector<double> positions;
  double intensity = -1.0;
  std::vector<double> emittances;
  double sigma_zeta = 0.0;
  double delta_rms = 0.0;
  double z0 = 0.0;
  bool z0_given = false;
  bool force_4d = false;
  std::string prefix = "sc";
  std::string output;
  std::string model = "frozen";
  std::string pic_model = "2.5D";
  std::vector<int> nodes = {64, 64, 32};
  double extent_sigmas = 6.0, fixed_sigmas = 0.0;
};

struct RemoveArgs {
  CommonOptions common;
  std::string lattice;
  std::string output;
};

void run_install(const InstallArgs& a) {
  if ((a.elements > 0) == !a.positions.empty())
    throw InputError(InputLocation("fusetrack spacecharge install"),
                     "give either --elements N (equal spacing) or --positions s1 s2 ... [m]");
  if (a.emittances.size() != 2)
    throw InputError(InputLocation("--emittances"), "expects two values: eps_nx eps_ny [m rad]");
  check_output_file(a.output, "--output");
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  SpaceChargeInstallOptions o;
  o.elements = a.elements;
  o.positions = a.positions;
  o.intensity = a.intensity;
  o.eps_nx = a.emittances[0];
  o.eps_ny = a.emittances[1];
  o.sigma_zeta = a.sigma_zeta;
  o.delta_rms = a.delta_rms;
  if (a.z0_given) o.z0 = a.z0;
  o.prefix = a.prefix;
  o.optics.force_4d = a.force_4d;
  o.optics.threads = threads_per_rank(a.common);
  o.pic = a.model == "pic";
  o.pic_model = a.pic_model;
  if (a.nodes.size() != 3) throw InputError(InputLocation("--nodes"), "expects three values: nodes in x, y and zeta");
  o.pic_nodes = {a.nodes[0], a.nodes[1], a.nodes[2]};
  o.pic_extent_sigmas = a.extent_sigmas;
  o.pic_fixed_sigmas = a.fixed_sigmas;
  const InstalledSpaceCharge sc = install_space_charge(lattice, o, registry, a.lattice);
  write_file_atomically(a.output, sc.lattice.dump(1) + "\n");

  fmt::print("lattice   {} ({} elements, C = {:.6f} m)\n", a.lattice, lattice.sequence().size(), sc.circumference);
  fmt::print(
      "installed {} {} elements ({} ... {}), {} drifts split\n", sc.kicks.size(),
      o.pic ? fmt::format("SpaceChargePIC ({}, {} x {} x {} nodes, {})", o.pic_model, o.pic_nodes[0], o.pic_nodes[1],
                          o.pic_nodes[2],
                          o.pic_fixed_sigmas > 0.0 ? fmt::format("grids fixed at +- {:.4g} rms", o.pic_fixed_sigmas)
                                                   : fmt::format("grids adapted to +- {:.4g} rms", o.pic_extent_sigmas))
            : std::string("SpaceChargeBiGaussian"),
      sc.kicks.front().name, sc.kicks.back().name, sc.split_drifts);
  fmt::print(
      "bunch     N = {:.6g}, eps_n = ({:.4g}, {:.4g}) m rad, sigma_zeta = {:.6g} m, delta_rms = {:.4g}, z0 = {:.6g} "
      "m\n",
      o.intensity, o.eps_nx, o.eps_ny, o.sigma_zeta, o.delta_rms, sc.z0);
  fmt::print("    {:<12} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}\n", "name", "s [m]", "L [m]", "beta_x",
             "beta_y", "D_x [m]", "shift [m]", "sigma_x", "sigma_y");
  const size_t shown = std::min<size_t>(sc.kicks.size(), 12);
  for (size_t k = 0; k < sc.kicks.size(); ++k) {
    if (k == shown && k + 1 < sc.kicks.size()) {
      fmt::print("    ... ({} more)\n", sc.kicks.size() - shown - 1);
      k = sc.kicks.size() - 1;
    }
    const SpaceChargeKick& s = sc.kicks[k];
    fmt::print("    {:<12} {:>11.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.3g} {:>11.4e} {:>11.4e}\n", s.name,
               s.s, s.length, s.beta_x, s.beta_y, s.dx, s.shift, s.sigma_x, s.sigma_y);
  }
  double max_shift = 0.0;
  for (const SpaceChargeKick& s : sc.kicks) max_shift = std::max(max_shift, std::fabs(s.shift));
  if (max_shift > 0.0)
    fmt::print("moved     positions inside thick non-drift elements to their nearer end: up to {:.4g} m\n", max_shift);
  fmt::print("laslett   dQx = {:.6g}, dQy = {:.6g} (small amplitudes at the bunch centre, first order)\n",
             sc.laslett_dqx, sc.laslett_dqy);
  fmt::print("written   {}\n", a.output);
}

void run_remove(const RemoveArgs& a) {
  check_output_file(a.output, "--output");
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = load_lattice(a.lattice, registry);
  size_t removed = 0;
  const nlohmann::ordered_json doc = remove_space_charge(lattice, a.lattice, &removed);
  write_file_atomically(a.output, doc.dump(1) + "\n");
  fmt::print("removed   {} space-charge elements from {} ({} -> {} elements)\n", removed, a.lattice,
             lattice.sequence().size(), doc.at("sequence").size());
  fmt::print("written   {}\n", a.output);
}

}  // namespace

void add_spacecharge_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("spacecharge",
                         "install frozen (SpaceChargeBiGaussian) or particle-in-cell (SpaceChargePIC) space-charge "
                         "elements around a ring, remove them, or compute a tune footprint (docs: Space charge)");
  cmd->require_subcommand(1);

  auto in = std::make_shared<InstallArgs>();
  CLI::App* install = cmd->add_subcommand(
      "install", "N elements at equal spacing or at given positions, beam sizes from the optics at each");
  install->add_option("lattice", in->lattice, "lattice file (any format fusetrack reads)")->required();
  install->add_option("--elements", in->elements, "number of elements at equal spacing s_k = k C / N");
  install->add_option("--positions", in->positions, "positions [m] in [0, C), increasing (instead of --elements)")
      ->expected(1, -1);
  install->add_option("--intensity", in->intensity, "real particles in the bunch")->required();
  install->add_option("--emittances", in->emittances, "normalized rms emittances eps_nx eps_ny [m rad]")
      ->expected(2)
      ->required();
  install->add_option("--sigma-zeta", in->sigma_zeta, "rms bunch length [m]")->required();
  install->add_option("--delta-rms", in->delta_rms, "rms momentum spread (beam size += dispersion), default 0");
  CLI::Option* z0 = install->add_option("--z0", in->z0, "bunch centre in zeta [m] (default: the closed orbit's)");
  install->add_flag("--4d", in->force_4d, "optics with delta frozen (as `fusetrack optics --4d`)");
  install->add_option("--prefix", in->prefix, "element names PREFIX_k (default sc)");
  install->add_option("-o,--output", in->output, "lattice to write (fusetrack JSON)")->required();
  install->add_option("--model", in->model, "frozen (SpaceChargeBiGaussian, default) or pic (SpaceChargePIC)")
      ->check(CLI::IsMember({"frozen", "pic"}));
  install->add_option("--pic-model", in->pic_model, "PIC elements: 2.5D (default) or 3D");
  install->add_option("--nodes", in->nodes, "PIC elements: grid nodes in x, y, zeta (default 64 64 32)")->expected(3);
  install->add_option("--extent-sigmas", in->extent_sigmas,
                      "PIC elements with adapted grids: the bunch's mean +- this many rms (default 6)");
  install->add_option("--fixed-grid-sigmas", in->fixed_sigmas,
                      "PIC elements: fixed grids at the closed orbit +- this many rms beam sizes from the optics "
                      "(zeta: z0 +- this many sigma_zeta); default 0: grids adapted to the bunch every turn");
  install->add_option("--plugin", in->common.plugins, "load an element plugin (.so); repeatable");
  install->add_option("--threads", in->common.threads, "CPU threads for the optics (0: all)");
  install->callback([in, z0] {
    in->z0_given = z0->count() > 0;
    run_install(*in);
  });

  auto rm = std::make_shared<RemoveArgs>();
  add_footprint_subcommand(*cmd, "footprint",
                           "tune footprint: NAFF tunes of a polar grid of amplitudes (space charge, octupoles, "
                           "beam-beam); the same as `fusetrack footprint`");

  CLI::App* remove = cmd->add_subcommand(
      "remove", "remove every SpaceChargeBiGaussian and SpaceChargePIC, joining split drifts again");
  remove->add_option("lattice", rm->lattice, "lattice file")->required();
  remove->add_option("-o,--output", rm->output, "lattice to write (fusetrack JSON)")->required();
  remove->add_option("--plugin", rm->common.plugins, "load an element plugin (.so); repeatable");
  remove->callback([rm] { run_remove(*rm); });
}

}  // namespace ft::cli
