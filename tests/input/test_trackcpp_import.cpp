// trackcpp / AT flat-file import (framework/src/io/trackcpp_import.cpp):
//  - the fixture ring tests/input/fixtures/trackcpp_ring.txt, written by trackcpp's own
//    write_flat_file (trackcpp master 26e69c1, built outside this repository, the ring made with its
//    Element factories marker, bpm, drift, quadrupole, sextupole, rbend, corrector, rfcavity): the
//    fields at their default left out as trackcpp leaves them out (drifts without hmin / vmin, no
//    phase_lag 0, no nr_steps 1), polynom lines ending in a space, its header lines. The ring (drifts,
//    quadrupoles, sextupoles with
//    skew terms, a combined-function bend with edges and fringe fields, a corrector, a thick cavity,
//    markers, rectangle/ellipse/rhombus apertures, a displaced quadrupole, a tilted sextupole, a
//    displaced and tilted bend) tracks bit for bit as the fusetrack lattice built here by hand from
//    the mapping rules (kn = n! PolynomB[n], hgap = gap / 2, phase = pi - phase_lag, ...), and has
//    the same tunes;
//  - single pass methods against trackcpp's formulas written out here (drift, StrMPoleSymplectic4,
//    BndMPoleSymplectic4 with edges, corrector, cavity), on momentum where the models agree exactly;
//  - trackcpp's reading rules: every field optional with trackcpp's default, unknown keys warned
//    about once, a repeated field's last value, polynom lines without trailing whitespace, hmin set
//    from hmax, header words, and header values given by the import options;
//  - bad input named with the file, the element, the field and the line;
//  - the `fusetrack import` command on a trackcpp file and on an Xsuite line.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/lattice_file.h"
#include "fusetrack/optics.h"
#include "fusetrack/trackcpp_import.h"
#include "fusetrack/tracker.h"
#include "support/process.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_trackcpp_import.
namespace test_trackcpp_import {

using ft::test::builtin_registry;
using ft::test::error_message;
using ft::test::write_temp_file;
using json = nlohmann::ordered_json;

namespace {

const double kPi = 3.141592653589793;

std::string fixture_path() { return ft::test::source_path("tests/input/fixtures/trackcpp_ring.txt"); }

ft::Lattice imported_fixture(std::vector<std::string>* warnings = nullptr) {
  ft::TrackcppImportOptions options;
  options.warnings = warnings;
  return ft::lattice_from_json(ft::import_trackcpp_file(fixture_path(), options), fixture_path(), builtin_registry());
}

/// The fixture ring built by hand with fusetrack elements, from the mapping rules of
/// fusetrack/trackcpp_import.h applied to the values written in the fixture.
ft::Lattice hand_built_fixture() {
  json elements = json::object();
  json sequence = json::array();
  int counter = 0;
  auto add = [&](const json& def) {
    const std::string name = fmt::format("e{}", counter++);
    elements[name] = def;
    sequence.push_back(name);
  };
  auto drift = [&](double length) {
    add({{"type", "Drift"}, {"length", length}});
    // hmax 0.012, vmax 0.006 without hmin, vmin: trackcpp's hmin = -hmax, vmin = -vmax
    add({{"type", "LimitRect"}, {"min_x", -0.012}, {"max_x", 0.012}, {"min_y", -0.006}, {"max_y", 0.006}});
  };
  // vchamber 2 over hmin -0.011, hmax 0.013, vmin -0.005, vmax 0.005: an ellipse about the box's centre
  const json ellipse = {{"type", "LimitEllipse"},
                        {"a", (0.013 + 0.011) / 2},
                        {"b", (0.005 + 0.005) / 2},
                        {"shift_x", (0.013 - 0.011) / 2}};
  auto multipole = [](double length, std::vector<double> kn, std::vector<double> ks, int steps) {
    return json{{"type", "ThickMultipole"}, {"length", length},   {"kn", kn}, {"ks", ks},
                {"integrator", 0},          {"num_slices", steps}};
  };
  const double angle = kPi / 4;
  // PolynomB = (0, -0.35, -0.8, 0, 30): k1 = -0.35, k2 = 2! (-0.8), K4 L = 4! 30 L.
  const json bend = {{"type", "Bend"},
                     {"length", 1.0},
                     {"angle", angle},
                     {"k1", -0.35},
                     {"k2", 2.0 * -0.8},
                     {"knl", {0.0, 0.0, 0.0, 0.0, 24.0 * 30.0 * 1.0}},
                     {"model", 0},
                     {"integrator", 0},
                     {"num_slices", 20},
                     {"edge_entry_angle", angle / 2},
                     {"edge_exit_angle", angle / 2},
                     {"edge_entry_hgap", 0.028 / 2},
                     {"edge_exit_hgap", 0.028 / 2},
                     {"edge_entry_fint", 0.5},
                     {"edge_exit_fint", 0.45}};
  // vchamber 1 (rhombus) over |x| < 0.02, |y| < 0.008
  const json rhombus = {{"type", "LimitPolygon"},
                        {"n_vertices", 4},
                        {"x_vertices", {0.02, 0.0, -0.02, 0.0}},
                        {"y_vertices", {0.0, 0.008, 0.0, -0.008}}};
  for (int cell = 0; cell < 4; ++cell) {
    add({{"type", "Marker"}});
    drift(1.0);
    json qf = multipole(0.25, {0.0, 2.4}, {}, 10);
    if (cell == 1) {  // t_in = (-2e-4, 0, 1e-4, 0, 0, 0): the quadrupole moved by (2e-4, -1e-4)
      qf["shift_x"] = 2e-4;
      qf["shift_y"] = -1e-4;
    }
    add(qf);
    add(ellipse);
    drift(0.25);
    json sf = multipole(0.1, {0.0, 0.0, 2.0 * 18.0}, {0.0, 0.01}, 4);
    if (cell == 2) sf["rot_s_rad"] = std::atan2(std::sin(0.02), std::cos(0.02));  // r_in's rotation angle
    add(sf);
    drift(0.25);
    if (cell == 3) {  // t_in = (1e-4, 0, -3e-4, ...), rotation by -0.01, around the bend in its local frames
      const double degrees = std::atan2(std::sin(-0.01), std::cos(-0.01)) * 180.0 / kPi;
      add({{"type", "XYShift"}, {"dx", -1e-4}, {"dy", 3e-4}});
      add({{"type", "SRotation"}, {"angle", degrees}});
      add(bend);
      add({{"type", "SRotation"}, {"angle", -degrees}});
      add({{"type", "XYShift"}, {"dx", 1e-4}, {"dy", -3e-4}});
    } else {
      add(bend);
    }
    add(rhombus);
    drift(0.25);
    add(multipole(0.1, {0.0, 0.0, 2.0 * -22.0, 6.0 * 50.0}, {}, 4));
    drift(0.25);
    add(multipole(0.25, {0.0, -1.0}, {}, 10));
    add(ellipse);
    if (cell == 0) {
      add({{"type", "Corrector"}, {"length", 0.1}, {"hkick", 2e-5}, {"vkick", -1e-5}});
      drift(0.9);
    } else if (cell == 2) {
      const double circumference = 4 * (1 + .25 + .25 + .1 + .25 + 1 + .25 + .1 + .25 + .25 + 1);
      add({{"type", "Drift"}, {"length", 0.1}});
      add({{"type", "Cavity"}, {"voltage", 8e5}, {"frequency", 40 * 299792458.0 / circumference}, {"phase", kPi}});
      add({{"type", "Drift"}, {"length", 0.1}});
      drift(0.8);
    } else {
      drift(1.0);
    }
  }
  add({{"type", "Marker"}});
  const double mass0 = 9.1093837015e-31 * 299792458.0 * 299792458.0 / 1.602176634e-19;
  const json doc = {{"fusetrack_lattice", 1},
                    {"reference", {{"mass0", mass0}, {"q0", -1.0}, {"p0c", std::sqrt((3e9 - mass0) * (3e9 + mass0))}}},
                    {"global_aperture", {{"x", 1e300}, {"y", 1e300}}},
                    {"elements", elements},
                    {"sequence", sequence}};
  return ft::lattice_from_json(doc, "hand_built", builtin_registry());
}

ft::Particles start_particles(double beta0) {
  ft::Particles p(0, beta0);
  p.resize(14);
  for (size_t i = 0; i < 12; ++i) {
    const double a = 1e-4 * (static_cast<double>(i) - 5.5);
    p.set(i, a, 1e-5 * std::cos(3.0 * a), -0.6 * a, 2e-5 * std::sin(7.0 * i), 1e-3 * a, (i % 3) * 2e-4 - 2e-4);
  }
  p.set(12, 11.5e-3, 0, 0, 0, 0, 0);  // lost on an aperture in the first turns
  p.set(13, 0, 0, 5.5e-3, 1e-3, 0, 0);
  return p;
}

ft::Particles track_cpu(const ft::Lattice& lattice, ft::Particles p, int64_t turns) {
  ft::TrackOptions o;
  o.turns = turns;
  o.threads = 1;
  ft::make_cpu_backend(lattice)->track(p, o);
  return p;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("trackcpp import: the fixture ring tracks bit for bit as the hand-built fusetrack lattice") {
  std::vector<std::string> warnings;
  const ft::Lattice imported = imported_fixture(&warnings);
  const ft::Lattice by_hand = hand_built_fixture();
  CHECK(imported.sequence().size() == by_hand.sequence().size());
  CHECK(imported.circumference() == doctest::Approx(18.8).epsilon(1e-15));
  CHECK(imported.reference().p0c == by_hand.reference().p0c);
  // The only warning: the chromatic factor of the bend edges.
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "1 / (1 + delta)"));
  CHECK(contains(warnings[0], "4 elements, first #6 'B'"));

  const ft::Particles start = start_particles(imported.reference().beta0());
  const ft::Particles a = track_cpu(imported, start, 40);
  const ft::Particles b = track_cpu(by_hand, start, 40);
  REQUIRE(a.size() == b.size());
  size_t alive = 0, lost = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a.x[i] == b.x[i]);
    CHECK(a.px[i] == b.px[i]);
    CHECK(a.y[i] == b.y[i]);
    CHECK(a.py[i] == b.py[i]);
    CHECK(a.zeta[i] == b.zeta[i]);
    CHECK(a.delta[i] == b.delta[i]);
    CHECK(a.state[i] == b.state[i]);
    CHECK(a.lost_turn[i] == b.lost_turn[i]);
    CHECK(a.lost_element[i] == b.lost_element[i]);
    (a.state[i] > 0 ? alive : lost) += 1;
  }
  CHECK(alive >= 10);  // the comparison covers tracked particles ...
  CHECK(lost >= 2);    // ... and aperture losses (rectangle and ellipse)
  CHECK(a.state[12] == ft::kLostOnAperture);
  CHECK(a.state[13] == ft::kLostOnAperture);
}

TEST_CASE("trackcpp import: the linear optics of the fixture ring equal those of the hand-built lattice") {
  const ft::LinearOptics a = ft::compute_linear_optics(imported_fixture());
  const ft::LinearOptics b = ft::compute_linear_optics(hand_built_fixture());
  CHECK(a.six_d);  // cavity_on true: a stable 6D ring
  CHECK(a.qx == b.qx);
  CHECK(a.qy == b.qy);
  CHECK(a.qs == b.qs);
  CHECK(a.beta_x == b.beta_x);
  CHECK(a.beta_y == b.beta_y);
  // Sanity: a stable ring with the tunes of this fixture and a bend-dominated dispersion.
  CHECK(a.qx > 0.6);
  CHECK(a.qx < 0.8);
  CHECK(a.qy > 0.55);
  CHECK(a.qy < 0.75);
  CHECK(a.qs > 0.0);
  CHECK(a.dx > 1.0);
}

// ---- single pass methods against trackcpp's formulas (trackcpp passmethods.hpp, AT 1.3) ----

namespace {

struct Pos {
  double rx, px, ry, py, de, dl;
};

void tc_drift(Pos& p, double length) {  // trackcpp drift()
  const double pnorm = 1 / (1 + p.de);
  const double norml = length * pnorm;
  p.rx += norml * p.px;
  p.ry += norml * p.py;
  p.dl += 0.5 * norml * pnorm * (p.px * p.px + p.py * p.py);
}

void tc_polykick(const Pos& p, const std::vector<double>& a, const std::vector<double>& b, double& re, double& im) {
  const int n = static_cast<int>(b.size());
  re = b[n - 1];
  im = a[n - 1];
  for (int i = n - 2; i >= 0; --i) {
    const double r = re * p.rx - im * p.ry + b[i];
    im = im * p.rx + re * p.ry + a[i];
    re = r;
  }
}

// Forest-Ruth coefficients as AT writes them.
const double kDrift1 = 0.6756035959798286638, kDrift2 = -0.1756035959798286639;
const double kKick1 = 1.351207191959657328, kKick2 = -1.702414383919314656;

void tc_mpole(Pos& p, double length, int steps, const std::vector<double>& a, const std::vector<double>& b,
              double irho) {
  auto kick = [&](double l) {
    double re, im;
    tc_polykick(p, a, b, re, im);
    if (irho == 0.0) {  // strthinkick
      p.px -= l * re;
      p.py += l * im;
    } else {  // bndthinkick
      const double de = p.de;
      p.px -= l * (re - (de - p.rx * irho) * irho);
      p.py += l * im;
      p.dl += l * irho * p.rx;
    }
  };
  const double sl = length / steps;
  for (int i = 0; i < steps; ++i) {
    tc_drift(p, sl * kDrift1);
    kick(sl * kKick1);
    tc_drift(p, sl * kDrift2);
    kick(sl * kKick2);
    tc_drift(p, sl * kDrift2);
    kick(sl * kKick1);
    tc_drift(p, sl * kDrift1);
  }
}

void tc_edge(Pos& p, double irho, double edge, double fint, double gap) {  // trackcpp edge_fringe()
  const double fx = irho * std::tan(edge) / (1 + p.de);
  const double psi_bar = edge - irho * gap * fint * (1 + std::sin(edge) * std::sin(edge)) / std::cos(edge) / (1 + p.de);
  const double fy = irho * std::tan(psi_bar) / (1 + p.de);
  p.px += p.rx * fx;
  p.py -= p.ry * fy;
}

/// The one-element file, imported and tracked once by fusetrack, in trackcpp's coordinates
/// (zeta = -dl).
Pos fusetrack_pass(const std::string& element_lines, const Pos& in, bool cavity_on = false) {
  const std::string text = fmt::format("% energy 3e9 eV\n% cavity_on {}\nfam_name E\n{}", cavity_on, element_lines);
  const json doc = ft::trackcpp_to_fusetrack(text, "one.txt", {});
  const ft::Lattice lattice = ft::lattice_from_json(doc, "one.txt", builtin_registry());
  ft::Particles p(1, lattice.reference().beta0());
  p.set(0, in.rx, in.px, in.ry, in.py, -in.dl, in.de);
  p = track_cpu(lattice, p, 1);
  REQUIRE(p.state[0] > 0);
  return {p.x[0], p.px[0], p.y[0], p.py[0], p.delta[0], -p.zeta[0]};
}

void check_close(const Pos& a, const Pos& b, double tolerance) {
  CHECK(std::fabs(a.rx - b.rx) <= tolerance);
  CHECK(std::fabs(a.px - b.px) <= tolerance);
  CHECK(std::fabs(a.ry - b.ry) <= tolerance);
  CHECK(std::fabs(a.py - b.py) <= tolerance);
  CHECK(std::fabs(a.de - b.de) <= tolerance);
  CHECK(std::fabs(a.dl - b.dl) <= tolerance);
}

}  // namespace

TEST_CASE("trackcpp import: single pass methods agree with trackcpp's formulas on momentum") {
  // On momentum (de = 0 throughout) fusetrack's time of flight (particle velocity = reference
  // velocity) and its edge kicks (no 1/(1 + de)) are trackcpp's; the rest is rounding.
  const Pos start{1.2e-3, -3e-4, -8e-4, 2e-4, 0.0, 1e-4};
  const std::vector<double> a = {0.0, 0.02, 0.5, 0.0, 0.0, 3.0};
  const std::vector<double> b = {0.0, 1.7, -12.0, 40.0, 300.0, -2e3};
  SUBCASE("drift_pass") {
    Pos ref = start;
    tc_drift(ref, 2.3);
    check_close(fusetrack_pass("length 2.3\npass_method drift_pass\n", start), ref, 1e-15);
  }
  SUBCASE("str_mpole_symplectic4_pass") {
    Pos ref = start;
    tc_mpole(ref, 0.4, 7, a, b, 0.0);
    const std::string lines =
        "length 0.4\npass_method str_mpole_symplectic4_pass\nnr_steps 7\npolynom_a 1 0.02 2 0.5 5 3.0 \n"
        "polynom_b 1 1.7 2 -12 3 40 4 300 5 -2e3 \n";
    check_close(fusetrack_pass(lines, start), ref, 1e-15);
  }
  SUBCASE("bnd_mpole_symplectic4_pass with edges and fringe fields") {
    const double angle = 0.12, length = 1.4, gap = 0.03;
    const double irho = angle / length;
    Pos ref = start;
    const std::vector<double> bb = {0.0, -0.6, 3.0, 0.0, 0.0, 0.0};
    const std::vector<double> aa = {0.0, 0.01, 0.0, 0.0, 0.0, 0.0};
    tc_edge(ref, irho, 0.05, 0.6, gap);
    tc_mpole(ref, length, 12, aa, bb, irho);
    tc_edge(ref, irho, 0.07, 0.4, gap);
    const std::string lines =
        "length 1.4\npass_method bnd_mpole_symplectic4_pass\nnr_steps 12\nangle 0.12\nangle_in 0.05\n"
        "angle_out 0.07\ngap 0.03\nfint_in 0.6\nfint_out 0.4\npolynom_a 1 0.01 \npolynom_b 1 -0.6 2 3.0 \n";
    check_close(fusetrack_pass(lines, start), ref, 1e-15);
  }
  SUBCASE("corrector_pass") {
    const double hkick = 3e-4, vkick = -2e-4, length = 0.3;
    Pos ref = start;              // trackcpp pm_corrector_pass
    const double norml = length;  // de = 0
    ref.dl += norml * 0.5 *
              (hkick * hkick / 3.0 + vkick * vkick / 3.0 + ref.px * ref.px + ref.py * ref.py + ref.px * hkick +
               ref.py * vkick);
    ref.rx += norml * (ref.px + 0.5 * hkick);
    ref.px += hkick;
    ref.ry += norml * (ref.py + 0.5 * vkick);
    ref.py += vkick;
    check_close(fusetrack_pass("length 0.3\npass_method corrector_pass\nhkick 3e-4\nvkick -2e-4\n", start), ref, 1e-16);
  }
  SUBCASE("cavity_pass (thin): the energy kick and its phase convention") {
    // trackcpp: de += -(V/E0) sin(2 pi f dl / c - phase_lag). fusetrack adds the energy (ptau) and
    // uses zeta / beta0: the same to 1/gamma0^2 (3e-8 relative at 3 GeV).
    const double voltage = 2e6, frequency = 5e8, lag = 0.3;
    for (const double dl : {0.0, 0.05, -0.12}) {
      Pos in = start;
      in.dl = dl;
      Pos ref = in;
      ref.de += -(voltage / 3e9) * std::sin(2 * kPi * frequency * dl / 299792458.0 - lag);
      const Pos out =
          fusetrack_pass("length 0\npass_method cavity_pass\nvoltage 2e6\nfrequency 5e8\nphase_lag 0.3\n", in, true);
      CAPTURE(dl);
      CHECK(std::fabs(out.de - ref.de) <= 1e-7 * std::fabs(ref.de - in.de) + 1e-18);
      CHECK(out.rx == in.rx);
      CHECK(std::fabs(out.dl - in.dl) < 1e-15);
    }
  }
}

// ---- bad input ----

namespace {

// Lines: 1 energy, 2 fam_name D, 3 length, 4 pass_method, 5 fam_name Q, 6 length, 7 pass_method, 8 polynom_b
const std::string kSmall =
    "% energy 3e9 eV\n"
    "fam_name D\n"
    "length 1.0\n"
    "pass_method drift_pass\n"
    "fam_name Q\n"
    "length 0.5\n"
    "pass_method str_mpole_symplectic4_pass\n"
    "polynom_b 1 1.5 \n";  // trackcpp's writer ends every pair with a space

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string import_error(const std::string& text, const ft::TrackcppImportOptions& options = {}) {
  return error_message([&] { ft::trackcpp_to_fusetrack(text, "small.txt", options); });
}

}  // namespace

TEST_CASE("trackcpp import: the small file converts and loads") {
  const json doc = ft::trackcpp_to_fusetrack(kSmall, "small.txt", {});
  const ft::Lattice lattice = ft::lattice_from_json(doc, "small.txt", builtin_registry());
  CHECK(lattice.sequence().size() == 2);
  CHECK(doc["elements"]["Q"]["kn"][1] == 1.5);
  CHECK(doc["elements"]["Q"]["num_slices"] == 1);  // trackcpp's default nr_steps
  CHECK(ft::is_trackcpp_flat_file(kSmall));
  CHECK_FALSE(ft::is_trackcpp_flat_file("{\"elements\": {}}"));
  CHECK_FALSE(ft::is_trackcpp_flat_file("# only a comment\n"));
}

TEST_CASE("trackcpp import: bad input names the file, the element, the field and the line") {
  struct Case {
    const char* what;
    std::string text;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"unknown pass method",
       replace(kSmall, "str_mpole_symplectic4_pass", "foo_pass"),
       {"small.txt: element #1 'Q' (foo_pass), field 'pass_method': line 7:",
        "foo_pass (unknown to trackcpp, 1 element, first #1 'Q')", "fusetrack imports identity_pass"}},
      {"unsupported pass methods, all listed",
       replace(replace(kSmall, "str_mpole_symplectic4_pass", "kicktable_pass"), "drift_pass", "matrix_pass"),
       {"element #0 'D' (matrix_pass), field 'pass_method': line 4:",
        "matrix_pass (1 element, first #0 'D'), kicktable_pass (1 element, first #1 'Q')"}},
      {"malformed line: polynom_b without pairs",
       replace(kSmall, "polynom_b 1 1.5", "polynom_b 1 1.5 2"),
       {"element #1 'Q' (str_mpole_symplectic4_pass), field 'polynom_b': line 8: expected 'order value' pairs"}},
      {"malformed line: fam_name with two words",
       replace(kSmall, "fam_name Q", "fam_name Q R"),
       {"small.txt: element #1, field 'fam_name': line 5: expected 'fam_name NAME'"}},
      {"malformed line: a field before any element",
       "% energy 3e9 eV\nlength 1.0\n" + kSmall.substr(16),
       {"small.txt, field 'length': line 2: 'length 1.0' comes before the first 'fam_name' line"}},
      {"malformed line: a field without a value",
       replace(kSmall, "length 0.5", "length"),
       {"element #1 'Q', field 'length': line 6: the field has no value"}},
      {"missing header: energy",
       kSmall.substr(16),
       {"small.txt, field 'energy': the header line '% energy VALUE eV' (the beam energy) is missing"}},
      {"bad number: length",
       replace(kSmall, "length 0.5", "length 0.5x"),
       {"element #1 'Q' (str_mpole_symplectic4_pass), field 'length': line 6: '0.5x' is not a finite number"}},
      {"bad number: polynom_b value",
       replace(kSmall, "polynom_b 1 1.5", "polynom_b 1 abc"),
       {"field 'polynom_b': line 8: the value 'abc' of order 1 is not a finite number"}},
      {"bad number: nr_steps",
       replace(kSmall, "polynom_b", "nr_steps 2.5\npolynom_b"),
       {"field 'nr_steps': line 8: expected one integer, got '2.5'"}},
      {"bad number: energy",
       replace(kSmall, "3e9", "3e9x"),
       {"small.txt, field 'energy': line 1: '3e9x' is not a number"}},
      {"bad number: infinity",
       replace(kSmall, "length 0.5", "length inf"),
       {"field 'length': line 6: 'inf' is not a finite number"}},
      {"a multipole order fusetrack does not have",
       replace(kSmall, "polynom_b 1 1.5", "polynom_b 1 1.5 7 2.0"),
       {"field 'polynom_b': line 8: order 7 is 2 but fusetrack's magnets go to order 5"}},
      {"t_out that does not undo t_in",
       replace(kSmall, "polynom_b", "t_in -1e-4 0 0 0 0 0\nt_out 2e-4 0 0 0 0 0\npolynom_b"),
       {"element #1 'Q' (str_mpole_symplectic4_pass), field 't_out': line 9: t_out = (0.0002, 0) in x, y is not "
        "-t_in"}},
      {"t_in changing a momentum",
       replace(kSmall, "polynom_b", "t_in 0 1e-6 0 0 0 0\npolynom_b"),
       {"field 't_in': line 8: component 1 (px) is 1e-06"}},
      {"r_in that is not a rotation about s",
       replace(kSmall, "polynom_b", "ry|r_in 0.1 0 1 0 0 0\npolynom_b"),
       {"field 'ry|r_in': line 8: r_in[2][0] = 0.1"}},
      {"an aperture shape fusetrack does not have",
       replace(replace(kSmall, "% energy 3e9 eV", "% energy 3e9 eV\n% vchamber_on true"), "polynom_b",
               "vchamber 3\nhmax 0.01\nvmax 0.01\npolynom_b"),
       {"field 'vchamber': line 9: vchamber = 3: only 0 (rectangle), 1 (rhombus) and 2 (ellipse)"}},
      {"identity_pass with a length",
       replace(kSmall, "pass_method drift_pass", "pass_method identity_pass"),
       {"element #0 'D' (identity_pass), field 'length': line 3: identity_pass with length 1 m"}},
  };
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const std::string message = import_error(c.text);
    CAPTURE(message);
    CHECK_FALSE(message.empty());
    for (const std::string& part : c.expected) CHECK(contains(message, part));
  }
}

TEST_CASE("trackcpp import: what trackcpp ignores is ignored with a warning, cavity_on false gives drifts") {
  std::vector<std::string> warnings;
  ft::TrackcppImportOptions options;
  options.warnings = &warnings;
  options.ignore_radiation = true;
  const std::string text =
      "% energy 3e9 eV\n% radiation_on 1\n% cavity_on false\n"
      "fam_name QH\nlength 0.5\npass_method str_mpole_symplectic4_pass\nhkick 1e-4\npolynom_b 1 1.0 \n"
      "fam_name QH\nlength 0.5\npass_method str_mpole_symplectic4_pass\nhkick 2e-4\npolynom_b 1 1.0 \n"
      "fam_name QH\nlength 0.5\npass_method str_mpole_symplectic4_pass\npolynom_b 1 1.1 \n"
      "fam_name RF\nlength 0.4\npass_method cavity_pass\nvoltage 1e6\nfrequency 5e8\n"
      "fam_name M\nlength 0\npass_method identity_pass\nt_in 1e-3 0 0 0 0 0\nhmax 0.01\n";
  const json doc = ft::trackcpp_to_fusetrack(text, "ignored.txt", options);
  const std::string all = fmt::format("{}", fmt::join(warnings, "\n"));
  CAPTURE(all);
  CHECK(contains(all, "radiation_on = 1 ignored"));
  CHECK(contains(all,
                 "field 'hkick' ignored, as trackcpp's str_mpole_symplectic4_pass ignores it (2 elements, "
                 "first #0 'QH')"));
  CHECK(contains(all, "cavities tracked as drifts"));
  CHECK(contains(all, "field 't_in' ignored, as trackcpp's identity_pass ignores it"));
  CHECK(contains(all, "apertures (hmin, hmax, vmin, vmax, vchamber) ignored"));
  // Two distinct definitions of QH (the hkick is ignored, the strength differs), named apart.
  CHECK(doc["sequence"] == json({"QH", "QH", "QH#2", "RF", "M"}));
  CHECK(doc["elements"]["QH#2"]["kn"][1] == 1.1);
  CHECK(doc["elements"]["RF"]["type"] == "Drift");
  CHECK(doc["elements"]["RF"]["length"] == 0.4);
}

// ---- trackcpp's reading rules (read_flat_file_trackcpp, Element defaults in elements.h) ----
// The expected values below are those trackcpp's own read_flat_file gives for the same text
// (checked once with trackcpp master 26e69c1 built outside this repository).

namespace {

struct Imported {
  json doc;
  std::vector<std::string> warnings;
  std::string all() const { return fmt::format("{}", fmt::join(warnings, "\n")); }
};

Imported import_text(const std::string& text, ft::TrackcppImportOptions options = {}) {
  Imported r;
  options.warnings = &r.warnings;
  r.doc = ft::trackcpp_to_fusetrack(text, "rules.txt", options);
  return r;
}

}  // namespace

TEST_CASE("trackcpp import: every field is optional with trackcpp's default") {
  // A marker and a BPM without a length line, an element with neither length nor pass_method
  // (trackcpp's Element: length 0, pass_method drift_pass), a quadrupole without nr_steps (1).
  const Imported r = import_text(
      "% energy 3e9 eV\n"
      "fam_name M\npass_method identity_pass\n"
      "fam_name BPM\npass_method identity_pass\n"
      "fam_name NOTHING\n"
      "fam_name Q\nlength 0.2\npass_method str_mpole_symplectic4_pass\npolynom_b 1 2.0 \n");
  CAPTURE(r.all());
  CHECK(r.doc["elements"]["M"] == json({{"type", "Marker"}}));
  CHECK(r.doc["elements"]["BPM"] == json({{"type", "Marker"}}));
  CHECK(r.doc["elements"]["NOTHING"] == json({{"type", "Drift"}, {"length", 0.0}}));
  CHECK(r.doc["elements"]["Q"]["num_slices"] == 1);
  CHECK(r.doc["elements"]["Q"]["kn"][1] == 2.0);
  REQUIRE(r.warnings.size() == 1);
  CHECK(contains(r.warnings[0],
                 "rules.txt: line 6: no pass_method: trackcpp's default drift_pass (1 element, first #2 'NOTHING')"));
  // Header values are optional too (harmonic number 0, cavity_on / vchamber_on false), but the energy.
  CHECK(contains(r.doc["description"].get<std::string>(), "harmonic number 0, cavity_on false, vchamber_on false"));
}

TEST_CASE("trackcpp import: an unknown key is warned about once, with the file and the line, and ignored") {
  const Imported r = import_text(
      "% energy 3e9 eV\n"
      "fam_name D\nlength 1.0\npass_method drift_pass\nmy_tag 12\n"
      "fam_name D2\nlength 2.0\npass_method drift_pass\nmy_tag 13\ncolour red\n");
  CAPTURE(r.all());
  REQUIRE(r.warnings.size() == 2);
  CHECK(contains(r.warnings[0], "rules.txt: line 5: unknown field 'my_tag' in element #0 'D' ignored"));
  CHECK(contains(r.warnings[1], "rules.txt: line 10: unknown field 'colour' in element #1 'D2' ignored"));
  CHECK(r.doc["elements"]["D2"]["length"] == 2.0);
}

TEST_CASE("trackcpp import: polynom lines are read as trackcpp's stream loop reads them") {
  // trackcpp reads "ORDER VALUE" pairs while the stream is not at its end, and drops a pair whose
  // value ends the line: a line without trailing whitespace loses its last pair.
  const Imported r = import_text(
      "% energy 3e9 eV\n"
      "fam_name WRITTEN\nlength 0.1\npass_method str_mpole_symplectic4_pass\npolynom_b 1 2.0 2 30.0 \n"
      "fam_name BY_HAND\nlength 0.1\npass_method str_mpole_symplectic4_pass\npolynom_b 1 2.0 2 30.0\n"
      "fam_name CRLF\r\nlength 0.1\r\npass_method str_mpole_symplectic4_pass\r\npolynom_b 1 2.0 2 30.0\r\n"
      "fam_name TWICE\nlength 0.1\npass_method str_mpole_symplectic4_pass\npolynom_b 1 2.0 \npolynom_b 2 5.0 \n");
  CAPTURE(r.all());
  const json& e = r.doc["elements"];
  CHECK(e["WRITTEN"]["kn"] == json({0.0, 2.0, 2.0 * 30.0, 0.0, 0.0, 0.0}));
  CHECK(e["BY_HAND"]["kn"] == json({0.0, 2.0, 0.0, 0.0, 0.0, 0.0}));      // the sextupole term is lost
  CHECK(e["CRLF"]["kn"] == e["WRITTEN"]["kn"]);                           // '\r' is whitespace to trackcpp
  CHECK(e["TWICE"]["kn"] == json({0.0, 2.0, 2.0 * 5.0, 0.0, 0.0, 0.0}));  // a second line adds its pairs
  REQUIRE(r.warnings.size() == 1);
  CHECK(contains(r.warnings[0], "rules.txt: line 9: the last pair of a polynom_b line is dropped"));
  CHECK(contains(r.warnings[0], "(1 element, first #1 'BY_HAND')"));
}

TEST_CASE("trackcpp import: hmin and vmin as trackcpp's reader sets them, a repeated field's last value") {
  // An hmax line sets hmin = -hmax unless an hmin line came since the last hmax line, even in an
  // earlier element (trackcpp's found_hmin is not reset by fam_name).
  const Imported r = import_text(
      "% energy 3e9 eV\n% vchamber_on true\n"
      "fam_name A\nlength 1\npass_method drift_pass\nhmin -0.01\n"  // hmin alone
      "fam_name B\nlength 1\npass_method drift_pass\nhmax 0.02\n"   // found_hmin still set: hmin stays
      "fam_name C\nlength 1\npass_method drift_pass\nhmax 0.03\n"   // hmin = -hmax
      "fam_name D\nlength 1\npass_method drift_pass\nhmax 0.04\nvmin -0.001\nvmax 0.002\nlength 2\n");
  CAPTURE(r.all());
  const json& e = r.doc["elements"];
  const double unlimited = std::numeric_limits<double>::max();
  CHECK(e["A/aperture"] == json({{"type", "LimitRect"},
                                 {"min_x", -0.01},
                                 {"max_x", unlimited},
                                 {"min_y", -unlimited},
                                 {"max_y", unlimited}}));
  CHECK(e["B/aperture"]["min_x"] == -unlimited);
  CHECK(e["B/aperture"]["max_x"] == 0.02);
  CHECK(e["C/aperture"]["min_x"] == -0.03);
  CHECK(e["D/aperture"]["min_x"] == -0.04);
  CHECK(e["D/aperture"]["min_y"] == -0.001);
  CHECK(e["D/aperture"]["max_y"] == 0.002);
  CHECK(e["D"]["length"] == 2.0);  // the last of two length lines
  CHECK(contains(r.all(), "rules.txt: line 10: hmin stays unlimited although hmax is given: the hmin line on line 6"));
  CHECK(contains(r.all(),
                 "rules.txt: line 21: field 'length' given twice in one element (first on line 16): the last value "
                 "counts"));
}

TEST_CASE("trackcpp import: header words as trackcpp reads them") {
  SUBCASE("booleans: only 'true' is true") {
    const Imported r = import_text(
        "% energy 3e9 eV\n% cavity_on True\nfam_name RF\npass_method cavity_pass\nvoltage 1e6\nfrequency 5e8\n");
    CHECK(r.doc["elements"]["RF"]["type"] == "Marker");  // a cavity tracked as a drift of length 0
    CHECK(contains(r.all(), "rules.txt: line 2: '% cavity_on True' reads as false"));
  }
  SUBCASE("radiation_on: a number, 'true' = 1, any other word 0") {
    const Imported r = import_text("% energy 3e9 eV\n% radiation_on damping\nfam_name D\n");
    CHECK(contains(r.all(), "'% radiation_on damping' reads as 0"));
    CHECK_FALSE(r.doc.contains("radiation"));
    const Imported on = import_text("% energy 3e9 eV\n% radiation_on true\nfam_name D\n");
    CHECK(on.doc["radiation"] == "mean");
  }
  SUBCASE("the key is the word after a lone '%': a glued '%energy' line is ignored") {
    std::vector<std::string> warnings;
    ft::TrackcppImportOptions options;
    options.warnings = &warnings;
    const std::string message =
        error_message([&] { ft::trackcpp_to_fusetrack("%energy 3e9 eV\nfam_name D\n", "rules.txt", options); });
    CHECK(contains(message, "the header line '% energy VALUE eV' (the beam energy) is missing"));
    REQUIRE(warnings.size() == 1);
    CHECK(contains(warnings[0], "line 1: header line '%energy 3e9 eV' ignored"));
  }
}

TEST_CASE("trackcpp import: header values given by the import options replace the file's") {
  const double mass0 = 9.1093837015e-31 * 299792458.0 * 299792458.0 / 1.602176634e-19;
  ft::TrackcppImportOptions options;
  ft::set_trackcpp_header_value(options.header, "cavity_on=false", "--trackcpp-header");
  ft::set_trackcpp_header_value(options.header, "vchamber_on=false", "--trackcpp-header");
  ft::set_trackcpp_header_value(options.header, "energy=2.5e9", "--trackcpp-header");
  const json doc = ft::import_trackcpp_file(fixture_path(), options);
  for (const auto& [name, def] : doc["elements"].items()) {
    CAPTURE(name);
    CHECK(def["type"] != "Cavity");
    CHECK(def["type"].get<std::string>().rfind("Limit", 0) == std::string::npos);
  }
  CHECK(doc["elements"]["RF"] == json({{"type", "Drift"}, {"length", 0.2}}));
  CHECK(doc["reference"]["p0c"] == std::sqrt((2.5e9 - mass0) * (2.5e9 + mass0)));
  CHECK(contains(doc["description"].get<std::string>(), "(energy, cavity_on, vchamber_on set by the import options)"));

  // radiation_on 1 (damping) imports as the lattice-wide "radiation": "mean", 2 (full) as "quantum";
  // the header value radiation_on=0 and --ignore-radiation turn it off.
  const std::string radiating = "% energy 3e9 eV\n% radiation_on 2\nfam_name D\nlength 1\n";
  CHECK(ft::trackcpp_to_fusetrack(radiating, "r.txt", ft::TrackcppImportOptions{})["radiation"] == "quantum");
  ft::TrackcppImportOptions no_radiation;
  ft::set_trackcpp_header_value(no_radiation.header, "radiation_on=0", "test");
  const json off = ft::trackcpp_to_fusetrack(radiating, "r.txt", no_radiation);
  CHECK(off["elements"]["D"]["length"] == 1.0);
  CHECK_FALSE(off.contains("radiation"));
  ft::TrackcppImportOptions ignored;
  ignored.ignore_radiation = true;
  CHECK_FALSE(ft::trackcpp_to_fusetrack(radiating, "r.txt", ignored).contains("radiation"));

  ft::TrackcppHeaderValues values;
  auto error_of = [&](const std::string& assignment) {
    return error_message([&] { ft::set_trackcpp_header_value(values, assignment, "--trackcpp-header"); });
  };
  CHECK(contains(error_of("cavity=true"), "--trackcpp-header, field 'cavity': unknown header key"));
  CHECK(contains(error_of("cavity_on=yes"), "field 'cavity_on': expected true or false, got 'yes'"));
  CHECK(contains(error_of("radiation_on=3"), "expected 0 (off), 1 (damping) or 2 (full)"));
  CHECK(contains(error_of("energy"), "expected KEY=VALUE"));
  CHECK(contains(error_of("energy=1e5"), "expected the total electron energy in eV"));
}

// ---- the command line ----

TEST_CASE("trackcpp import: `fusetrack import` detects trackcpp and Xsuite files") {
  const std::string fusetrack = ft::test::fusetrack_binary();
  const auto dir = ft::test::temp_dir("trackcpp_cli");
  const std::string out = (dir / "ring.json").string();
  {
    const auto [rc, text] = ft::test::run_command(fusetrack + " import " + fixture_path() + " -o " + out);
    CAPTURE(text);
    CHECK(rc == 0);
    CHECK(contains(text, "(trackcpp flat file)"));
    CHECK(contains(text, "Bend 4"));
    CHECK(contains(text, "warning: "));
    // The written file is the library's conversion.
    const ft::Lattice written = ft::load_lattice(out, builtin_registry());
    CHECK(written.sequence().size() == imported_fixture().sequence().size());
  }
  {  // header values from the command line instead of the file's
    const auto [rc, text] =
        ft::test::run_command(fusetrack + " import " + fixture_path() +
                              " --trackcpp-header cavity_on=false --trackcpp-header vchamber_on=false -o " + out);
    CAPTURE(text);
    CHECK(rc == 0);
    CHECK_FALSE(contains(text, "Cavity"));
    CHECK_FALSE(contains(text, "LimitRect"));
    CHECK(contains(text, "Drift 25"));  // 24 drifts and the thick cavity
    const auto [rc2, text2] =
        ft::test::run_command(fusetrack + " import " + fixture_path() + " --trackcpp-header cavity=on -o " + out);
    CHECK(rc2 == 2);
    CHECK(contains(text2, "--trackcpp-header, field 'cavity': unknown header key"));
  }
  {
    const std::string xsuite =
        write_temp_file("cli_line.json",
                        R"({"__class__": "Line", "elements": {"d": {"__class__": "Drift", "length": 2.0},
            "q": {"__class__": "Multipole", "knl": [0.0, 0.1]}}, "element_names": ["d", "q", "d"],
            "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": 2e9}})");
    for (const char* command : {" import ", " import-xsuite "}) {
      const auto [rc, text] = ft::test::run_command(fusetrack + command + xsuite + " -o " + out);
      CAPTURE(text);
      CHECK(rc == 0);
      CHECK(contains(text, "(Xsuite line, 3 elements)"));
    }
    const auto [rc, text] = ft::test::run_command(fusetrack + " import " + xsuite + " --ignore-radiation -o " + out);
    CHECK(rc == 2);
    CHECK(contains(text, "--ignore-radiation applies to trackcpp flat files only"));
    const auto [rc3, text3] =
        ft::test::run_command(fusetrack + " import " + xsuite + " --trackcpp-header cavity_on=true -o " + out);
    CHECK(rc3 == 2);
    CHECK(contains(text3, "--trackcpp-header applies to trackcpp flat files only"));
  }
  {
    const std::string bad = write_temp_file("cli_bad.txt", replace(kSmall, "drift_pass", "magic_pass"));
    const auto [rc, text] = ft::test::run_command(fusetrack + " import " + bad + " -o " + out);
    CHECK(rc == 2);
    CHECK(contains(text, "cli_bad.txt: element #0 'D' (magic_pass), field 'pass_method': line 4"));
    const std::string neither = write_temp_file("cli_neither.txt", "hello\n");
    const auto [rc2, text2] = ft::test::run_command(fusetrack + " import " + neither + " -o " + out);
    CHECK(rc2 == 2);
    CHECK(contains(text2, "neither an Xsuite line JSON"));
  }
}

TEST_CASE("load_lattice reads a trackcpp flat file directly: the same lattice as the import") {
  const ft::Lattice direct = ft::load_lattice(fixture_path(), builtin_registry());
  const ft::Lattice imported =
      ft::lattice_from_json(ft::import_trackcpp_file(fixture_path(), {}), fixture_path(), builtin_registry());
  CHECK(ft::lattice_to_json(direct) == ft::lattice_to_json(imported));
  CHECK(direct.sequence().size() == imported.sequence().size());
}

TEST_CASE("load_lattice with the importers' options: header values of a trackcpp file, warnings") {
  ft::LatticeFileOptions options;
  std::vector<std::string> warnings;
  options.trackcpp.warnings = &warnings;
  ft::set_trackcpp_header_value(options.trackcpp.header, "cavity_on=false", "test");
  const ft::Lattice lattice = ft::load_lattice(fixture_path(), builtin_registry(), options);
  const ft::Lattice plain = ft::load_lattice(fixture_path(), builtin_registry());
  auto count = [](const ft::Lattice& l, const std::string& type) {
    size_t n = 0;
    for (const auto& entry : l.sequence()) n += l.definitions()[entry.definition].type->name == type;
    return n;
  };
  CHECK(count(plain, "Cavity") == 1);
  CHECK(count(lattice, "Cavity") == 0);
  CHECK(lattice.sequence().size() == plain.sequence().size() - 2);  // Drift(L/2), Cavity, Drift(L/2) -> Drift
  CHECK(lattice.circumference() == doctest::Approx(plain.circumference()).epsilon(1e-15));
  CHECK(contains(fmt::format("{}", fmt::join(warnings, "\n")), "cavities tracked as drifts"));
  const ft::LatticeDocument document = ft::read_lattice_document(fixture_path(), options);
  CHECK(document.format == ft::LatticeFileFormat::trackcpp_flat_file);
  CHECK(document.source_elements == 51);
}

}  // namespace test_trackcpp_import
