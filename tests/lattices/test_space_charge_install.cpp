// Installing frozen space charge around a ring (fusetrack/space_charge_install.h): without intensity the
// installed lattice has the original circumference, tunes and optics; the beam sizes come from the optics at
// each element; remove_space_charge restores the original sequence and definitions; bad input is named; the
// `fusetrack spacecharge` command.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <functional>

#include "fusetrack/error.h"
#include "fusetrack/optics.h"
#include "fusetrack/particles.h"
#include "fusetrack/tracker.h"
#include "fusetrack/space_charge_install.h"
#include "support/lattice_builders.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_space_charge_install.
namespace test_space_charge_install {

using namespace ft;

namespace {

SpaceChargeInstallOptions options(int64_t n, double intensity) {
  SpaceChargeInstallOptions o;
  o.elements = n;
  o.intensity = intensity;
  o.eps_nx = 2e-6;
  o.eps_ny = 1e-6;
  o.sigma_zeta = 1.0;
  o.delta_rms = 1e-3;
  return o;
}

/// Installs, checks circumference, tunes and beta functions without intensity, and that remove restores
/// the original lattice document.
void check_round_trip(const Lattice& bare, const SpaceChargeInstallOptions& o, const char* what) {
  const std::string label = what;
  CAPTURE(label);
  const InstalledSpaceCharge sc = install_space_charge(bare, o, test::builtin_registry(), what);
  REQUIRE(sc.kicks.size() == (o.positions.empty() ? static_cast<size_t>(o.elements) : o.positions.size()));
  SpaceChargeInstallOptions zero = o;
  zero.intensity = 0.0;
  const InstalledSpaceCharge sc0 = install_space_charge(bare, zero, test::builtin_registry(), what);
  const Lattice with = lattice_from_json(sc0.lattice, what, test::builtin_registry());
  size_t pieces = 0;  // definitions of split-drift pieces in the sequence
  for (const auto& name : sc0.lattice.at("sequence")) pieces += name.get<std::string>().find("|sc_split") != std::string::npos;
  CHECK(with.sequence().size() == bare.sequence().size() - sc0.split_drifts + pieces + sc0.kicks.size());
  CHECK(std::fabs(with.circumference() - bare.circumference()) < 1e-12 * bare.circumference());
  const LinearOptics a = compute_linear_optics(bare), b = compute_linear_optics(with);
  MESSAGE(fmt::format("{}: {} elements, {} drifts split, C {:.12f} -> {:.12f} m, Qx {:.12f} -> {:.12f}, Qy {:.12f} -> "
                      "{:.12f}",
                      what, sc0.kicks.size(), sc0.split_drifts, bare.circumference(), with.circumference(), a.qx, b.qx,
                      a.qy, b.qy));
  CHECK(std::fabs(a.qx - b.qx) < 1e-10);
  CHECK(std::fabs(a.qy - b.qy) < 1e-10);
  // The sizes: sigma^2 = beta eps_n / (beta0 gamma0) + (D delta_rms)^2 with the optics at the element, which
  // equal the bare ring's at the same s (the bare table's row at the nearest entry exit with s <= s_k, carried
  // through the drift by the free-space beta function).
  const TwissTable t = compute_twiss_table(bare);
  const double bg = bare.reference().beta0() * bare.reference().gamma0();
  double length = 0.0;
  for (const SpaceChargeKick& k : sc.kicks) {
    length += k.length;
    CHECK(k.sigma_x == doctest::Approx(std::sqrt(k.beta_x * o.eps_nx / bg + std::pow(k.dx * o.delta_rms, 2))).epsilon(1e-14));
    CHECK(k.sigma_y == doctest::Approx(std::sqrt(k.beta_y * o.eps_ny / bg + std::pow(k.dy * o.delta_rms, 2))).epsilon(1e-14));
    // the last row at or before s_k, then a drift of ds: beta(ds) = beta - 2 alpha ds + gamma ds^2
    size_t row = 0;
    while (row + 1 < t.size() && t.s[row + 1] <= k.s + 1e-9) ++row;
    const double ds = k.s - t.s[row];
    const double bx = t.beta_x[row], ax = t.alpha_x[row], by = t.beta_y[row], ay = t.alpha_y[row];
    const double beta_x = bx - 2 * ax * ds + (1 + ax * ax) / bx * ds * ds;
    const double beta_y = by - 2 * ay * ds + (1 + ay * ay) / by * ds * ds;
    CHECK(k.beta_x == doctest::Approx(beta_x).epsilon(1e-7));
    CHECK(k.beta_y == doctest::Approx(beta_y).epsilon(1e-7));
    const double dx = t.dx[row] + t.dpx[row] * ds;
    CHECK(std::fabs(k.dx - dx) < 1e-6 * (1.0 + std::fabs(dx)));
  }
  CHECK(length == doctest::Approx(bare.circumference()).epsilon(1e-12));
  // remove restores the original sequence and definitions.
  const Lattice installed = lattice_from_json(sc.lattice, what, test::builtin_registry());
  size_t removed = 0;
  const nlohmann::ordered_json back = remove_space_charge(installed, what, &removed);
  CHECK(removed == sc.kicks.size());
  const nlohmann::ordered_json original = lattice_to_json(bare);
  CHECK(back.at("sequence") == original.at("sequence"));
  CHECK(back.at("elements") == original.at("elements"));
  CHECK(back == original);
}

}  // namespace

TEST_CASE("spacecharge install: FODO ring, equal spacing (at thin quadrupoles and inside drifts)") {
  const Lattice bare = test::bundled_lattice("fodo_ring.json");
  check_round_trip(bare, options(64, 2e10), "fodo 64");
  check_round_trip(bare, options(7, 2e10), "fodo 7");    // all but s = 0 inside drifts: six are split
  check_round_trip(bare, options(1, 2e10), "fodo 1");    // one element of the whole circumference
  SpaceChargeInstallOptions two = options(0, 2e10);
  two.positions = {1.0, 1.5, 2.0, 80.0};  // three in the same drift: it is cut into four pieces
  check_round_trip(bare, two, "fodo positions");
  const InstalledSpaceCharge sc = install_space_charge(bare, two, test::builtin_registry(), "fodo");
  CHECK(sc.split_drifts == 1);
  CHECK(sc.kicks[0].length == doctest::Approx(0.5 * (1.5 - (80.0 - 160.0))));
  CHECK(sc.kicks[1].length == doctest::Approx(0.5));
  CHECK(sc.kicks[3].length == doctest::Approx(0.5 * ((1.0 + 160.0) - 2.0)));
  for (const SpaceChargeKick& k : sc.kicks) CHECK(k.shift == 0.0);
  CHECK(sc.lattice.at("elements").contains("d|sc_split0_1of4"));
  CHECK(sc.lattice.at("elements").at("d|sc_split0_2of4").at("length").get<double>() == doctest::Approx(0.5));
}

TEST_CASE("spacecharge install: thick magnets (light-source ring): positions inside them move to their nearer end") {
  const Lattice bare = test::bundled_lattice("mba_light_source.json");
  check_round_trip(bare, options(50, 1e10), "mba 50");
  // A position in the middle third of a thick non-drift element moves to the nearer end.
  size_t e = 0;
  while (e < bare.sequence().size() &&
         !(bare.element(e).type->thick && bare.element(e).type->name != "Drift" &&
           bare.element(e).type->name != "DriftExact" && bare.field(bare.sequence()[e].definition, "length") > 0.2))
    ++e;
  REQUIRE(e < bare.sequence().size());
  const double start = bare.sequence()[e].s, len = bare.field(bare.sequence()[e].definition, "length");
  SpaceChargeInstallOptions o = options(0, 1e10);
  o.positions = {start + 0.3 * len, start + 0.8 * len};
  const InstalledSpaceCharge sc = install_space_charge(bare, o, test::builtin_registry(), "mba");
  CHECK(sc.kicks[0].s == start);
  CHECK(sc.kicks[1].s == doctest::Approx(start + len).epsilon(1e-15));
  CHECK(sc.kicks[0].shift == doctest::Approx(-0.3 * len));
  CHECK(sc.kicks[1].shift == doctest::Approx(0.2 * len));
  CHECK(sc.split_drifts == 0);
  check_round_trip(bare, o, "mba moved");
}

TEST_CASE("spacecharge install: PS Booster (Xsuite line, 6D optics, dispersion)") {
  const std::string path = test::require_shared("lattices/xsuite/psb_injection.json");
  const Lattice bare = load_lattice(path, test::builtin_registry());
  check_round_trip(bare, options(160, 2.5e10), "psb 160");
}

TEST_CASE("spacecharge install: particle-in-cell elements at the frozen elements' places, fixed or adapted grids") {
  const Lattice bare = test::bundled_lattice("fodo_ring.json");
  const SpaceChargeInstallOptions frozen_options = options(7, 2e10);
  const InstalledSpaceCharge frozen = install_space_charge(bare, frozen_options, test::builtin_registry(), "fodo");
  for (const double fixed : {0.0, 5.0}) {
    SpaceChargeInstallOptions o = frozen_options;
    o.pic = true;
    o.pic_model = "3D";
    o.pic_nodes = {16, 24, 8};
    o.pic_extent_sigmas = 4.5;
    o.pic_fixed_sigmas = fixed;
    const InstalledSpaceCharge pic = install_space_charge(bare, o, test::builtin_registry(), "fodo");
    CAPTURE(fixed);
    // The same sequence (names, split drifts), positions, lengths and optics as the frozen install.
    CHECK(pic.lattice.at("sequence") == frozen.lattice.at("sequence"));
    REQUIRE(pic.kicks.size() == frozen.kicks.size());
    for (size_t k = 0; k < pic.kicks.size(); ++k) {
      const SpaceChargeKick &a = pic.kicks[k], &b = frozen.kicks[k];
      CHECK(a.s == b.s);
      CHECK(a.length == b.length);
      CHECK(a.sigma_x == b.sigma_x);
      CHECK(a.sigma_y == b.sigma_y);
      const auto& def = pic.lattice.at("elements").at(a.name);
      CHECK(def.at("type") == "SpaceChargePIC");
      CHECK(def.at("length").get<double>() == a.length);
      CHECK(def.at("intensity").get<double>() == o.intensity);
      CHECK(def.at("model") == "3D");
      CHECK(def.at("nodes_x") == 16);
      CHECK(def.at("nodes_y") == 24);
      CHECK(def.at("nodes_zeta") == 8);
      CHECK(def.at("extent_sigmas").get<double>() == 4.5);
      if (fixed > 0.0) {
        CHECK(def.at("x_min").get<double>() == doctest::Approx(a.mean_x - 5.0 * a.sigma_x));
        CHECK(def.at("x_max").get<double>() == doctest::Approx(a.mean_x + 5.0 * a.sigma_x));
        CHECK(def.at("y_max").get<double>() - def.at("y_min").get<double>() == doctest::Approx(10.0 * a.sigma_y));
        CHECK(def.at("zeta_max").get<double>() == doctest::Approx(pic.z0 + 5.0 * o.sigma_zeta));
        CHECK(def.at("zeta_min").get<double>() == doctest::Approx(pic.z0 - 5.0 * o.sigma_zeta));
      } else {
        CHECK_FALSE(def.contains("x_min"));  // adapted every turn
      }
    }
    // It loads and tracks (CPU, a short run), and remove restores the bare ring.
    const Lattice installed = lattice_from_json(pic.lattice, "fodo_pic.json", test::builtin_registry());
    Particles p(200, installed.reference().beta0());
    for (size_t i = 0; i < p.size(); ++i)
      p.set(i, 1e-3 * std::sin(0.1 * static_cast<double>(i)), 0.0, 1e-3 * std::cos(0.3 * static_cast<double>(i)), 0.0,
            0.2 * std::sin(0.7 * static_cast<double>(i)), 0.0);
    TrackOptions t;
    t.turns = 2;
    t.warnings = false;
    make_cpu_backend(installed)->track(p, t);
    CHECK(p.alive_count() == p.size());
    size_t removed = 0;
    CHECK(remove_space_charge(installed, "fodo_pic.json", &removed) == lattice_to_json(bare));
    CHECK(removed == 7);
    // Installing again over PIC elements is refused.
    const std::string again = test::error_message(
        [&] { install_space_charge(installed, frozen_options, test::builtin_registry(), "fodo_pic.json"); });
    CHECK(again.find("remove them first") != std::string::npos);
  }
}

TEST_CASE("spacecharge install: bad input names the option or the element") {
  const Lattice bare = test::bundled_lattice("fodo_ring.json");
  auto message = [&](const SpaceChargeInstallOptions& o) {
    return test::error_message([&] { install_space_charge(bare, o, test::builtin_registry(), "fodo.json"); });
  };
  struct Case {
    std::function<void(SpaceChargeInstallOptions&)> change;
    const char* expected;
  };
  const Case cases[] = {
      {[](SpaceChargeInstallOptions& o) { o.elements = 0; }, "--elements"},
      {[](SpaceChargeInstallOptions& o) { o.positions = {10.0, 5.0}; }, "--positions[1]"},
      {[](SpaceChargeInstallOptions& o) { o.positions = {160.0}; }, "--positions[0]"},
      {[](SpaceChargeInstallOptions& o) { o.positions = {-1.0}; }, "--positions[0]"},
      {[](SpaceChargeInstallOptions& o) { o.intensity = -1.0; }, "--intensity"},
      {[](SpaceChargeInstallOptions& o) { o.eps_nx = 0.0; }, "--emittances[0]"},
      {[](SpaceChargeInstallOptions& o) { o.eps_ny = -1e-6; }, "--emittances[1]"},
      {[](SpaceChargeInstallOptions& o) { o.sigma_zeta = 0.0; }, "--sigma-zeta"},
      {[](SpaceChargeInstallOptions& o) { o.delta_rms = -1e-3; }, "--delta-rms"},
      {[](SpaceChargeInstallOptions& o) { o.prefix = "qd"; }, "qd"},
      {[](SpaceChargeInstallOptions& o) { o.pic = true, o.pic_model = "2D"; }, "--pic-model"},
      {[](SpaceChargeInstallOptions& o) { o.pic = true, o.pic_nodes = {64, 1, 32}; }, "--nodes[1]"},
      {[](SpaceChargeInstallOptions& o) { o.pic = true, o.pic_extent_sigmas = 0.0; }, "--extent-sigmas"},
      {[](SpaceChargeInstallOptions& o) { o.pic = true, o.pic_fixed_sigmas = -1.0; }, "--fixed-grid-sigmas"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expected);
    SpaceChargeInstallOptions o = options(8, 1e10);
    c.change(o);
    if (std::string(c.expected) == "qd") {
      // a name PREFIX_k that is taken
      nlohmann::ordered_json doc = lattice_to_json(bare);
      doc["elements"]["qd_3"] = {{"type", "Marker"}};
      const Lattice taken = lattice_from_json(doc, "taken.json", test::builtin_registry());
      const std::string msg = test::error_message([&] { install_space_charge(taken, o, test::builtin_registry(), "taken.json"); });
      CHECK(msg.find("qd_3") != std::string::npos);
      continue;
    }
    const std::string msg = message(o);
    CAPTURE(msg);
    CHECK(msg.find("fodo.json") != std::string::npos);
    CHECK(msg.find(c.expected) != std::string::npos);
  }
  // Installing twice is refused, naming the element found.
  // 6 elements every 26.7 m: four of them split a drift in two
  const InstalledSpaceCharge sc = install_space_charge(bare, options(6, 1e10), test::builtin_registry(), "fodo.json");
  const Lattice once = lattice_from_json(sc.lattice, "once.json", test::builtin_registry());
  const std::string msg = message(options(4, 1e10));
  CHECK(msg.empty());
  const std::string twice =
      test::error_message([&] { install_space_charge(once, options(4, 1e10), test::builtin_registry(), "once.json"); });
  CHECK(twice.find("sc_0") != std::string::npos);
  CHECK(twice.find("remove them first") != std::string::npos);
  // remove: a piece of a split drift missing.
  nlohmann::ordered_json broken = sc.lattice;
  nlohmann::ordered_json seq = nlohmann::ordered_json::array();
  bool dropped = false;
  for (const auto& name : broken.at("sequence")) {
    if (!dropped && name.get<std::string>().find("of2") != std::string::npos &&
        name.get<std::string>().find("_2of2") != std::string::npos) {
      dropped = true;
      continue;
    }
    seq.push_back(name);
  }
  REQUIRE(dropped);
  broken["sequence"] = seq;
  const Lattice bad = lattice_from_json(broken, "broken.json", test::builtin_registry());
  const std::string rm = test::error_message([&] { remove_space_charge(bad, "broken.json"); });
  CAPTURE(rm);
  CHECK(rm.find("broken.json") != std::string::npos);
  CHECK(rm.find("split drift") != std::string::npos);
}

TEST_CASE("fusetrack spacecharge install / remove (command line)") {
  const auto dir = test::temp_dir("spacecharge_cli");
  const std::string lattice = test::source_path("lattices/fodo_ring.json");
  const std::string out = (dir / "sc.json").string(), back = (dir / "back.json").string();
  const auto r1 = test::run_command(fmt::format(
      "{} spacecharge install {} --elements 24 --intensity 2e10 --emittances 2e-6 1e-6 --sigma-zeta 1 --delta-rms 1e-3 "
      "-o {}",
      test::fusetrack_binary(), lattice, out));
  const std::string text = r1.second;
  CAPTURE(text);
  REQUIRE(r1.first == 0);
  CHECK(text.find("installed 24 SpaceChargeBiGaussian elements (sc_0 ... sc_23), 16 drifts split") != std::string::npos);
  CHECK(text.find("laslett   dQx = -") != std::string::npos);
  const Lattice installed = load_lattice(out, test::builtin_registry());
  CHECK(installed.sequence().size() == test::bundled_lattice("fodo_ring.json").sequence().size() + 24 + 16);
  const auto r2 = test::run_command(fmt::format("{} spacecharge remove {} -o {}", test::fusetrack_binary(), out, back));
  const std::string text2 = r2.second;
  CAPTURE(text2);
  REQUIRE(r2.first == 0);
  CHECK(text2.find("removed   24 space-charge elements") != std::string::npos);
  const Lattice restored = load_lattice(back, test::builtin_registry());
  CHECK(lattice_to_json(restored) == lattice_to_json(test::bundled_lattice("fodo_ring.json")));
  // Bad input: exit code 2, the option named.
  const auto [rc3, text3] = test::run_command(fmt::format(
      "{} spacecharge install {} --elements 4 --intensity 1e10 --emittances 2e-6 0 --sigma-zeta 1 -o {}",
      test::fusetrack_binary(), lattice, out));
  CHECK(rc3 == 2);
  CHECK(text3.find("--emittances[1]") != std::string::npos);
  const auto [rc4, text4] = test::run_command(
      fmt::format("{} spacecharge install {} --intensity 1e10 --emittances 2e-6 1e-6 --sigma-zeta 1 -o {}",
                  test::fusetrack_binary(), lattice, out));
  CHECK(rc4 == 2);
  CHECK(text4.find("--elements") != std::string::npos);
  // Particle-in-cell elements: --model pic and its grid.
  const std::string pic = (dir / "pic.json").string();
  const auto [rc5, text5] = test::run_command(fmt::format(
      "{} spacecharge install {} --elements 8 --intensity 2e10 --emittances 2e-6 1e-6 --sigma-zeta 1 --model pic "
      "--pic-model 2.5D --nodes 32 16 8 --fixed-grid-sigmas 6 -o {}",
      test::fusetrack_binary(), lattice, pic));
  CAPTURE(text5);
  REQUIRE(rc5 == 0);
  CHECK(text5.find("installed 8 SpaceChargePIC (2.5D, 32 x 16 x 8 nodes, grids fixed at +- 6 rms) elements") !=
        std::string::npos);
  const Lattice pic_lattice = load_lattice(pic, test::builtin_registry());
  size_t pic_elements = 0;
  for (size_t e = 0; e < pic_lattice.sequence().size(); ++e) pic_elements += pic_lattice.element(e).type->name == "SpaceChargePIC";
  CHECK(pic_elements == 8);
  const auto [rc6, text6] = test::run_command(fmt::format(
      "{} spacecharge install {} --elements 8 --intensity 2e10 --emittances 2e-6 1e-6 --sigma-zeta 1 --model pic "
      "--nodes 32 1 8 -o {}",
      test::fusetrack_binary(), lattice, pic));
  CHECK(rc6 == 2);
  CHECK(text6.find("--nodes[1]") != std::string::npos);
}

}  // namespace test_space_charge_install
