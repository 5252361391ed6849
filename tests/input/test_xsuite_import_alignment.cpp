// Xsuite import of misaligned elements (shift_x, shift_y, shift_s, rot_s_rad, the legacy
// _sin_rot_s/_cos_rot_s pair, ...) and of RFMultipole, LimitRectEllipse and LimitPolygon:
// the converted definitions, the tracking of a misaligned line against the same line with
// explicit XYShift/SRotation elements, and bad input.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "fusetrack/tracker.h"
#include "fusetrack/xsuite_import.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_import_alignment.
namespace test_xsuite_import_alignment {

using ft::test::builtin_registry;
using ft::test::error_message;
using json = nlohmann::ordered_json;

namespace {

json convert(const std::string& text) { return ft::xsuite_to_fusetrack(json::parse(text), "line.json", {}); }

std::string line_of(const std::string& elements, const std::string& names) {
  return R"({"__class__": "Line", "elements": )" + elements + R"(, "element_names": )" + names +
         R"(, "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": [2e9]}})";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("Xsuite import: misalignments become the generic transformation fields") {
  const json out = convert(line_of(
      R"({"q": {"__class__": "Quadrupole", "length": 0.5, "k1": 0.3, "shift_x": 1e-3, "_shift_y": -2e-4,
               "rot_s_rad": 0.02, "shift_s": 0.0, "rot_shift_anchor": 0.0},
          "m": {"__class__": "Multipole", "knl": [0.0, 0.1], "_sin_rot_s": 0.1, "_cos_rot_s": 0.99498743710662},
          "n": {"__class__": "Multipole", "knl": [0.0, 0.1], "_sin_rot_s": -99.0, "_cos_rot_s": 0.0},
          "a": {"__class__": "LimitEllipse", "a_squ": 1e-4, "b_squ": 4e-5, "rot_s_rad": 0.3, "shift_y": 1e-3}})",
      R"(["q", "m", "n", "a"])"));
  const json& e = out.at("elements");
  CHECK(e.at("q").at("shift_x") == 1e-3);
  CHECK(e.at("q").at("shift_y") == -2e-4);
  CHECK(e.at("q").at("rot_s_rad") == 0.02);
  CHECK_FALSE(e.at("q").contains("shift_s"));  // zero: not written
  CHECK(e.at("m").at("rot_s_rad").get<double>() == std::atan2(0.1, 0.99498743710662));
  CHECK_FALSE(e.at("n").contains("rot_s_rad"));  // _sin_rot_s < -2: not set
  CHECK(e.at("a").at("rot_s_rad") == 0.3);
  const ft::Lattice lattice = ft::lattice_from_json(out, "line.json", builtin_registry());
  REQUIRE(lattice.transform(0) != nullptr);
  CHECK(lattice.transform(0)->shift_y == -2e-4);
}

TEST_CASE("Xsuite import: a misaligned line tracks as the same line with explicit XYShift and SRotation") {
  const double psi = 0.05;
  const json moved = convert(line_of(
      R"({"d": {"__class__": "Drift", "length": 2.0},
          "q": {"__class__": "Multipole", "knl": [0.0, 0.2, 1.5], "shift_x": 0.001, "shift_y": -0.0005, "rot_s_rad": 0.05}})",
      R"(["d", "q", "d"])"));
  // SRotation takes degrees: the conversion round trip can change the last bit of sin and cos, so
  // the comparison is to rounding (the bitwise comparison with hand-set sines is in
  // tests/lattices/test_element_transforms.cpp).
  const json by_hand = convert(line_of(
      R"({"d": {"__class__": "Drift", "length": 2.0},
          "q": {"__class__": "Multipole", "knl": [0.0, 0.2, 1.5]},
          "s_in": {"__class__": "XYShift", "dx": 0.001, "dy": -0.0005},
          "r_in": {"__class__": "SRotation", "angle": )" + fmt::format("{:.17g}", psi * 180.0 / M_PI) + R"(},
          "r_out": {"__class__": "SRotation", "angle": )" + fmt::format("{:.17g}", -psi * 180.0 / M_PI) + R"(},
          "s_out": {"__class__": "XYShift", "dx": -0.001, "dy": 0.0005}})",
      R"(["d", "s_in", "r_in", "q", "r_out", "s_out", "d"])"));
  const ft::Lattice a = ft::lattice_from_json(moved, "moved", builtin_registry());
  const ft::Lattice b = ft::lattice_from_json(by_hand, "by_hand", builtin_registry());
  ft::Particles p = ft::make_grid(a.reference().beta0(), -3e-3, 3e-3, 7, -2e-3, 2e-3, 5, 1e-3);
  ft::Particles pa = p, pb = p;
  ft::TrackOptions o;
  o.turns = 10;
  ft::make_cpu_backend(a)->track(pa, o);
  ft::make_cpu_backend(b)->track(pb, o);
  for (size_t i = 0; i < p.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(pa.x[i] - pb.x[i]) < 1e-14);
    CHECK(std::fabs(pa.px[i] - pb.px[i]) < 1e-14);
    CHECK(std::fabs(pa.y[i] - pb.y[i]) < 1e-14);
    CHECK(std::fabs(pa.py[i] - pb.py[i]) < 1e-14);
  }
}

TEST_CASE("Xsuite import: RFMultipole, LimitRectEllipse, LimitPolygon") {
  const json out = convert(line_of(
      R"({"crab": {"__class__": "RFMultipole", "voltage": 0.0, "frequency": 400.79e6, "ksl": [2e-5], "ps": [90.0],
                  "_order": 0, "inv_factorial_order": 1.0},
          "re": {"__class__": "LimitRectEllipse", "max_x": 0.022, "max_y": 0.0175, "a_squ": 0.000484, "b_squ": 0.000484,
                 "a_b_squ": 2.34256e-7},
          "poly": {"__class__": "LimitPolygon", "x_vertices": [-0.02, 0.02, 0.02, -0.02],
                   "y_vertices": [-0.01, -0.01, 0.01, 0.01], "x_normal": [0, 1, 0, -1], "y_normal": [-1, 0, 1, 0],
                   "resc_fac": 1.0, "rot_s_rad": 0.1}})",
      R"(["crab", "re", "poly"])"));
  const json& e = out.at("elements");
  CHECK(e.at("crab").at("type") == "RFMultipole");
  CHECK(e.at("crab").at("ksl") == json::array({2e-5}));
  CHECK(e.at("crab").at("ps") == json::array({90.0}));
  CHECK(e.at("crab").at("order") == 0);
  CHECK(e.at("re").at("type") == "LimitRectEllipse");
  CHECK(e.at("re").at("a").get<double>() == std::sqrt(0.000484));
  CHECK(e.at("poly").at("n_vertices") == 4);
  CHECK(e.at("poly").at("rot_s_rad") == 0.1);
  const ft::Lattice lattice = ft::lattice_from_json(out, "line.json", builtin_registry());
  CHECK(lattice.sequence().size() == 3);
}

TEST_CASE("Xsuite import: bad alignment and aperture input is named") {
  const std::string mismatch = error_message([] {
    convert(line_of(R"({"m": {"__class__": "Multipole", "knl": [0.0, 0.1], "rot_s_rad": 0.5, "_sin_rot_s": 0.1,
                            "_cos_rot_s": 0.99498743710662}})",
                    R"(["m"])"));
  });
  CHECK(contains(mismatch, "line.json"));
  CHECK(contains(mismatch, "'m'"));
  CHECK(contains(mismatch, "rot_s_rad"));
  const std::string thick_cavity = error_message([] {
    convert(line_of(R"({"c": {"__class__": "Cavity", "voltage": 1e5, "frequency": 1e8, "length": 1.0, "shift_x": 1e-3}})",
                    R"(["c"])"));
  });
  CHECK(contains(thick_cavity, "'c'"));
  CHECK(contains(thick_cavity, "shift_x"));
  CHECK(contains(thick_cavity, "misaligned thick Cavity"));
  const std::string short_polygon = error_message([] {
    convert(line_of(R"({"p": {"__class__": "LimitPolygon", "x_vertices": [0.0, 1.0], "y_vertices": [0.0, 1.0]}})",
                    R"(["p"])"));
  });
  CHECK(contains(short_polygon, "'p'"));
  CHECK(contains(short_polygon, "x_vertices"));
  CHECK(contains(short_polygon, "at least 3"));
  const std::string uneven = error_message([] {
    convert(line_of(R"({"p": {"__class__": "LimitPolygon", "x_vertices": [0.0, 1.0, 1.0], "y_vertices": [0.0, 1.0]}})",
                    R"(["p"])"));
  });
  CHECK(contains(uneven, "y_vertices"));
  const std::string abs_time = error_message([] {
    convert(line_of(R"({"r": {"__class__": "RFMultipole", "frequency": 1e8, "knl": [1e-5], "absolute_time": 1}})",
                    R"(["r"])"));
  });
  CHECK(contains(abs_time, "RFMultipole.absolute_time = 1"));
  const std::string high_order = error_message([] {
    convert(line_of(R"({"r": {"__class__": "RFMultipole", "frequency": 1e8, "knl": [0, 0, 0, 0, 0, 0, 0.1]}})",
                    R"(["r"])"));
  });
  CHECK(contains(high_order, "knl[6]"));
}

}  // namespace test_xsuite_import_alignment
