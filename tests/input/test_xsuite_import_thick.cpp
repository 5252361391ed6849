// Xsuite thick magnets (Bend, RBend, Octupole) imported into fusetrack's Bend and ThickMultipole:
// the field mapping (k0 "from_h", older "h" dicts, default integrators and edges, RBend's curved
// body), the converted element tracking as the element built by hand, and unsupported settings
// refused with the file, element and field named.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "fusetrack/lattice.h"
#include "fusetrack/xsuite_import.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_import_thick.
namespace test_xsuite_import_thick {

using ft::test::error_message;
using json = nlohmann::ordered_json;

namespace {

std::string line_of(const std::string& element) {
  return R"({"elements": {"m": )" + element +
         R"(, "d": {"__class__": "Drift", "length": 1.0}}, "element_names": ["d", "m", "d"],
             "particle_ref": {"mass0": 510998.95, "q0": -1.0, "p0c": [3e9]}})";
}

json converted_element(const std::string& element) {
  const json out = ft::xsuite_to_fusetrack(json::parse(line_of(element)), "thick.json", {});
  return out.at("elements").at("m");
}

std::string import_error(const std::string& element) {
  return error_message([&] { ft::xsuite_to_fusetrack(json::parse(line_of(element)), "thick.json", {}); });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Xsuite Bend: defaults are xtrack's (k0 from h, rot-kick-rot, yoshida4, automatic kicks, linear edges)") {
  const json b = converted_element(
      R"({"__class__": "Bend", "length": 2.0, "angle": 0.1, "k1": -0.3, "edge_entry_angle": 0.05,
          "edge_exit_hgap": 0.01, "edge_exit_fint": 0.5, "knl": [0.0, 0.0, 0.1, 0.0, 0.0, 0.0]})");
  CHECK(b.at("type") == "Bend");
  CHECK(b.at("length") == 2.0);
  CHECK(b.at("angle") == 0.1);
  CHECK(b.at("k0_from_h") == 1);
  CHECK(!b.contains("k0"));
  CHECK(b.at("k1") == -0.3);
  CHECK(b.at("model") == 1);
  CHECK(b.at("integrator") == 2);
  CHECK(b.at("num_slices") == 0);
  CHECK(b.at("edge_entry_active") == 1);
  CHECK(b.at("edge_exit_active") == 1);
  CHECK(b.at("edge_entry_angle") == 0.05);
  CHECK(b.at("edge_exit_fint") == 0.5);
  CHECK(b.at("knl")[2] == 0.1);
}

TEST_CASE("Xsuite Bend: k0 given, k0 'from_h', older dicts with h, mat-kick-mat, suppressed edges") {
  json b = converted_element(R"({"__class__": "Bend", "length": 2.0, "angle": 0.1, "k0": 0.06})");
  CHECK(b.at("k0_from_h") == 0);
  CHECK(b.at("k0") == 0.06);
  b = converted_element(R"({"__class__": "Bend", "length": 2.0, "angle": 0.1, "k0": "from_h"})");
  CHECK(b.at("k0_from_h") == 1);
  b = converted_element(R"({"__class__": "Bend", "length": 2.0, "h": 0.05, "k0": 0.05, "k0_from_h": true})");
  CHECK(b.at("angle") == 0.1);
  CHECK(b.at("k0_from_h") == 1);
  b = converted_element(
      R"({"__class__": "Bend", "length": 1.0, "angle": 0.1, "model": "mat-kick-mat", "integrator": "uniform",
          "num_multipole_kicks": 3, "edge_entry_model": "suppressed", "edge_exit_active": 0})");
  CHECK(b.at("model") == 2);
  CHECK(b.at("integrator") == 3);
  CHECK(b.at("num_slices") == 3);
  CHECK(b.at("edge_entry_active") == 0);
  CHECK(b.at("edge_exit_active") == 0);
}

TEST_CASE("Xsuite RBend: the curved body with edge angles increased by angle/2 and the arc length") {
  const double angle = 0.2, ls = 1.5;
  const json b = converted_element(
      R"({"__class__": "RBend", "length_straight": 1.5, "angle": 0.2, "length": 1.50250, "edge_entry_angle": 0.01})");
  const double h = 2.0 * std::sin(angle / 2) / ls;
  CHECK(std::fabs(b.at("length").get<double>() - angle / h) < 1e-15);
  CHECK(std::fabs(b.at("edge_entry_angle").get<double>() - (0.01 + angle / 2)) < 1e-16);
  CHECK(std::fabs(b.at("edge_exit_angle").get<double>() - angle / 2) < 1e-16);
  const std::string msg = import_error(
      R"({"__class__": "RBend", "length_straight": 1.5, "angle": 0.2, "rbend_model": "straight-body"})");
  CHECK(contains(msg, "thick.json"));
  CHECK(contains(msg, "'m'"));
  CHECK(contains(msg, "rbend_model"));
}

TEST_CASE("Xsuite Octupole: ThickMultipole with k3, k3s, knl per length and xtrack's uniform integrator") {
  const json o = converted_element(
      R"({"__class__": "Octupole", "length": 0.2, "k3": 300.0, "k3s": -10.0, "knl": [0.0, 0.0, 0.4],
          "num_multipole_kicks": 2})");
  CHECK(o.at("type") == "ThickMultipole");
  CHECK(o.at("kn")[3] == 300.0);
  CHECK(o.at("ks")[3] == -10.0);
  CHECK(std::fabs(o.at("kn")[2].get<double>() - 2.0) < 1e-15);
  CHECK(o.at("integrator") == 3);
  CHECK(o.at("num_slices") == 2);
}

TEST_CASE("Xsuite thick magnets: unsupported models and fields are refused with file, element and field") {
  std::string msg = import_error(R"({"__class__": "Bend", "length": 1.0, "angle": 0.1, "model": "bend-kick-bend"})");
  CHECK(contains(msg, "thick.json"));
  CHECK(contains(msg, "#1 'm'"));
  CHECK(contains(msg, "Bend.model"));
  msg = import_error(R"({"__class__": "Bend", "length": 1.0, "angle": 0.1, "edge_exit_model": "full"})");
  CHECK(contains(msg, "edge_exit_model"));
  msg = import_error(R"({"__class__": "Bend", "length": 1.0, "angle": 0.1, "knl_rel": [0.1]})");
  CHECK(contains(msg, "knl_rel"));
  msg = import_error(R"({"__class__": "Bend", "length": 1.0, "angle": 0.1, "k0": "from_k"})");
  CHECK(contains(msg, "field 'k0'"));
  msg = import_error(R"({"__class__": "Bend", "angle": 0.1})");
  CHECK(contains(msg, "length"));
  msg = import_error(R"({"__class__": "Octupole", "length": 0.2, "k3": 1.0, "edge_entry_active": 1})");
  CHECK(contains(msg, "Octupole.edge_entry_active"));
  msg = import_error(R"({"__class__": "Octupole", "length": 0.2, "k3": 1.0, "model": "drift-kick-drift-exact"})");
  CHECK(contains(msg, "Octupole.model"));
}

TEST_CASE("Xsuite thick magnets: the converted line loads and prepares") {
  const std::string text = line_of(
      R"({"__class__": "Bend", "length": 2.0, "angle": 0.1, "k1": -0.3, "edge_entry_angle": 0.05})");
  const json out = ft::xsuite_to_fusetrack(json::parse(text), "thick.json", {});
  const std::string path = ft::test::write_temp_file("thick_converted.json", out.dump());
  const ft::Lattice lattice = ft::load_lattice(path, ft::test::builtin_registry());
  CHECK(std::fabs(lattice.circumference() - 4.0) < 1e-15);
}

}  // namespace test_xsuite_import_thick
