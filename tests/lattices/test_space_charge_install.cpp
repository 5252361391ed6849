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
  CHECK(text2.find("removed   24 SpaceChargeBiGaussian") != std::string::npos);
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
}

}  // namespace test_space_charge_install
