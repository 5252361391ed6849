// Xsuite line JSON import (framework/src/xsuite_import.cpp): hand-written lines in both layouts,
// omitted zero fields, complex numbers, repeated and unused names, unknown classes (error or
// markers), unsupported fields, too-long knl, bad particle_ref, and the converted lattice tracking.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/tracker.h"
#include "fusetrack/xsuite_import.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_import.
namespace test_xsuite_import {

using ft::test::builtin_registry;
using ft::test::error_message;
using ft::test::write_temp_file;
using json = nlohmann::ordered_json;

namespace {

// A small ring in the current layout (xtrack Line.to_dict()): every element class the importer
// maps, a name used four times, two elements that the sequence never uses (one of an unknown
// class), fields Xsuite omitted because they are 0, and complex numbers with zero imaginary part.
const char* kLine = R"({
  "__class__": "Line",
  "elements": {
    "start": {"__class__": "Marker"},
    "d1": {"__class__": "Drift", "length": 1.5},
    "qf": {"__class__": "Multipole", "knl": [0.0, 0.1], "order": 1, "length": 0.5,
           "knl_rel": [0.0], "ksl_rel": [0.0]},
    "b1": {"__class__": "Multipole", "knl": [0.01], "hxl": 0.01, "length": 1.0},
    "e1": {"__class__": "DipoleEdge", "k": 0.01, "e1": 0.005},
    "qd": {"__class__": "Multipole", "knl": [0.0, -0.1], "ksl": [0.0, {"__complex__": [0.001, 0.0]}], "order": 1},
    "rf": {"__class__": "Cavity", "voltage": 1e4, "frequency": {"__complex__": [2e6, 0.0]}, "lag": 180},
    "ap": {"__class__": "LimitRect", "min_x": -0.05, "max_x": 0.05},
    "el": {"__class__": "LimitEllipse", "a_squ": 0.0025, "b_squ": 0.0016, "a_b_squ": 4e-6},
    "unused_wire": {"__class__": "Wire", "current": 1.0},
    "unused_drift": {"__class__": "Drift", "length": 99.0}
  },
  "element_names": ["start", "d1", "qf", "d1", "b1", "e1", "d1", "qd", "d1", "rf", "ap", "el"],
  "config": {"XTRACK_MULTIPOLE_NO_SYNRAD": true, "XTRACK_GLOBAL_XY_LIMIT": 0.5},
  "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": [2e9], "beta0": [0.905]}
})";

json convert(const std::string& text, const ft::XsuiteImportOptions& options = {}) {
  return ft::xsuite_to_fusetrack(json::parse(text), "line.json", options);
}

std::string convert_error(const std::string& text, const ft::XsuiteImportOptions& options = {}) {
  return error_message([&] { convert(text, options); });
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A line of the given elements (JSON object text) and sequence (JSON array text).
std::string line_of(const std::string& elements, const std::string& names,
                    const std::string& particle = R"({"mass0": 938272088.16, "q0": 1.0, "p0c": [2e9]})") {
  return R"({"__class__": "Line", "elements": )" + elements + R"(, "element_names": )" + names +
         R"(, "particle_ref": )" + particle + "}";
}

std::vector<std::string> sequence_names(const ft::Lattice& lattice) {
  std::vector<std::string> out;
  for (const auto& entry : lattice.sequence()) out.push_back(lattice.definitions()[entry.definition].name);
  return out;
}

}  // namespace

TEST_CASE("is_xsuite_line recognises both Xsuite layouts and not fusetrack's format") {
  CHECK(ft::is_xsuite_line(json::parse(kLine)));
  CHECK(ft::is_xsuite_line(json::parse(R"({"line": {"elements": [], "element_names": []}, "particle": {}})")));
  CHECK_FALSE(ft::is_xsuite_line(json::parse(R"({"reference": {"mass0": 1, "q0": 1, "p0c": 1},
      "elements": {"d": {"type": "Drift", "length": 1}}, "sequence": ["d"]})")));
  CHECK_FALSE(ft::is_xsuite_line(json::parse("[1, 2]")));
}

TEST_CASE("current layout: sequence, repeated and unused names, omitted zeros, complex values") {
  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.warnings = &warnings;
  const json out = convert(kLine, options);
  CHECK(warnings.empty());

  // The sequence is element_names; definitions once per name in order of first use; unused
  // elements (also of unknown classes) are dropped.
  const json names = json::parse(kLine).at("element_names");
  CHECK(out.at("sequence") == names);
  std::vector<std::string> defined;
  for (const auto& [name, def] : out.at("elements").items()) {
    (void)def;
    defined.push_back(name);
  }
  CHECK(defined == std::vector<std::string>{"start", "d1", "qf", "b1", "e1", "qd", "rf", "ap", "el"});

  const json& e = out.at("elements");
  CHECK(e.at("start") == json{{"type", "Marker"}});
  CHECK(e.at("d1") == json{{"type", "Drift"}, {"length", 1.5}});
  // Multipole: Xsuite's order written out; ksl omitted by Xsuite written as zeros; the complex
  // ksl[1] read as its real part.
  CHECK(e.at("qf").at("order") == 1);
  CHECK(e.at("qf").at("knl") == json::array({0.0, 0.1}));
  CHECK(e.at("qf").at("ksl") == json::array({0.0, 0.0}));
  CHECK(e.at("qf").at("hxl") == 0.0);
  CHECK(e.at("qf").at("length") == 0.5);
  CHECK(e.at("qd").at("ksl") == json::array({0.0, 0.001}));
  CHECK(e.at("b1").at("order") == 0);  // omitted order, one knl entry
  CHECK(e.at("b1").at("knl") == json::array({0.01}));
  CHECK(e.at("b1").at("hxl") == 0.01);
  // DipoleEdge: hgap, fint, e1_fd omitted by Xsuite (zero) are written as 0.
  CHECK(e.at("e1") ==
        json{{"type", "DipoleEdge"}, {"k", 0.01}, {"e1", 0.005}, {"hgap", 0.0}, {"fint", 0.0}, {"e1_fd", 0.0}});
  CHECK(
      e.at("rf") ==
      json{
          {"type", "Cavity"}, {"voltage", 1e4}, {"frequency", 2e6}, {"lag", 180.0}, {"phase", 0.0}, {"harmonic", 0.0}});
  // LimitRect: omitted limits are xtrack's field defaults, +-UNLIMITED = 1e10 m (not 0).
  CHECK(e.at("ap") ==
        json{{"type", "LimitRect"}, {"min_x", -0.05}, {"max_x", 0.05}, {"min_y", -1e10}, {"max_y", 1e10}});
  // LimitEllipse: a = sqrt(a_squ), b = sqrt(b_squ).
  CHECK(e.at("el").at("a").get<double>() == doctest::Approx(0.05).epsilon(1e-15));
  CHECK(e.at("el").at("b").get<double>() == doctest::Approx(0.04).epsilon(1e-15));

  CHECK(out.at("reference") == json{{"mass0", 938272088.16}, {"q0", 1.0}, {"p0c", 2e9}});
  CHECK(out.at("global_aperture") == json{{"x", 0.5}, {"y", 0.5}});
}

TEST_CASE("the converted lattice loads, keeps the sequence and tracks") {
  // Through load_lattice, which detects the Xsuite layout itself.
  const std::string path = write_temp_file("xsuite_line.json", kLine);
  const ft::Lattice lattice = ft::load_lattice(path, builtin_registry());
  const json doc = json::parse(kLine);
  const auto expected = doc.at("element_names").get<std::vector<std::string>>();
  CHECK(sequence_names(lattice) == expected);
  CHECK(lattice.circumference() == doctest::Approx(6.0).epsilon(1e-15));  // four 1.5 m drifts, thin rest
  CHECK(lattice.limits().x == 0.5);
  CHECK(lattice.reference().p0c == 2e9);
  CHECK(lattice.field(static_cast<uint32_t>(lattice.find_definition("qd")), "ksl", 1) == 0.001);
  CHECK(lattice.field(static_cast<uint32_t>(lattice.find_definition("qf")), "order") == 1);

  ft::Particles particles(4, lattice.reference().beta0());
  for (size_t i = 0; i < 4; ++i)
    particles.set(i, 1e-4 * static_cast<double>(i + 1), 0.0, -2e-4 * static_cast<double>(i), 1e-5, 0.0, 1e-4);
  ft::TrackOptions options;
  options.turns = 20;
  ft::make_cpu_backend(lattice)->track(particles, options);
  CHECK(particles.alive_count() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(std::isfinite(particles.x[i]));
    CHECK(std::fabs(particles.x[i]) < 0.01);
    CHECK(particles.delta[i] != 1e-4);  // the cavity acted
  }
}

TEST_CASE("older layout {line: {elements: [...], element_names}, particle} gives the same lattice") {
  const std::string old_layout = R"({
    "line": {
      "elements": [
        {"__class__": "Drift", "length": 2.0},
        {"__class__": "Multipole", "knl": [0.0, 0.2], "ksl": [0.0, 0.0]},
        {"__class__": "Drift", "length": 2.0},
        {"__class__": "Marker"}
      ],
      "element_names": ["d", "q", "d", "m"]
    },
    "particle": {"mass0": 510998.95, "q0": -1.0, "p0c": [1e9], "x": [0.0]}
  })";
  const std::string new_layout = line_of(
      R"({"d": {"__class__": "Drift", "length": 2.0}, "q": {"__class__": "Multipole", "knl": [0.0, 0.2], "order": 1},
          "m": {"__class__": "Marker"}})",
      R"(["d", "q", "d", "m"])", R"({"mass0": 510998.95, "q0": -1.0, "p0c": 1e9})");
  const json a = convert(old_layout);
  const json b = convert(new_layout);
  CHECK(a.at("elements") == b.at("elements"));
  CHECK(a.at("sequence") == b.at("sequence"));
  CHECK(a.at("reference") == b.at("reference"));
  CHECK(a.at("reference").at("q0") == -1.0);
  CHECK(a.at("elements").at("q").at("order") == 1);
  // Neither has a config: a Line's default global aperture is 1 m.
  CHECK(a.at("global_aperture").at("x") == 1.0);
  CHECK(b.at("global_aperture").at("y") == 1.0);
  const ft::Lattice lattice = ft::lattice_from_json(a, "old.json", builtin_registry());
  CHECK(lattice.sequence().size() == 4);
  CHECK(lattice.circumference() == 4.0);
}

TEST_CASE("a list of elements repeating a name with different contents: the last wins, with a warning") {
  const std::string text = R"({"line": {"elements": [{"__class__": "Drift", "length": 1.0},
      {"__class__": "Drift", "length": 3.0}], "element_names": ["d", "d"]},
      "particle": {"mass0": 938272088.16, "q0": 1, "p0c": 1e9}})";
  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.warnings = &warnings;
  const json out = convert(text, options);
  CHECK(out.at("elements").at("d").at("length") == 3.0);
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "last entry"));
  const std::string bad = R"({"line": {"elements": [{"__class__": "Drift", "length": 1.0}],
      "element_names": ["d", "d"]}, "particle": {"mass0": 938272088.16, "q0": 1, "p0c": 1e9}})";
  const std::string msg = convert_error(bad);
  CHECK(contains(msg, "field 'line.elements'"));
  CHECK(contains(msg, "1 elements for 2 names"));
}

TEST_CASE("complex numbers: a non-zero imaginary part is an error naming element and field") {
  const std::string msg = convert_error(line_of(
      R"({"d": {"__class__": "Drift", "length": 1.0},
          "qf": {"__class__": "Multipole", "knl": [0.0, {"__complex__": [0.1, 0.002]}]}})",
      R"(["d", "qf"])"));
  CHECK(contains(msg, "line.json: element #1 'qf' (Multipole), field 'knl[1]'"));
  CHECK(contains(msg, "non-zero imaginary part"));
  const std::string msg2 =
      convert_error(line_of(R"({"d": {"__class__": "Drift", "length": {"__complex__": [1.0]}}})", R"(["d"])"));
  CHECK(contains(msg2, "element #0 'd' (Drift), field 'length'"));
  CHECK(contains(msg2, "__complex__"));
  // Complex numbers in particle_ref too.
  const json out = convert(line_of(R"({"d": {"__class__": "Drift", "length": 1.0}})", R"(["d"])",
                                   R"({"mass0": 938272088.16, "q0": 1, "p0c": [{"__complex__": [3e9, 0.0]}]})"));
  CHECK(out.at("reference").at("p0c") == 3e9);
}

TEST_CASE("unknown classes are listed with their counts, with the option they become markers") {
  const std::string text = line_of(
      R"({"d": {"__class__": "Drift", "length": 1.0},
          "sol1": {"__class__": "Solenoid", "length": 2.0, "ks": 0.1},
          "sol2": {"__class__": "Solenoid", "length": 1.0, "ks": -0.1},
          "w": {"__class__": "Wire", "current": 5.0},
          "never": {"__class__": "Undulator"}})",
      R"(["d", "sol1", "d", "sol1", "w", "sol2", "d"])");
  const std::string msg = convert_error(text);
  CHECK(contains(msg, "line.json: element #1 'sol1' (Solenoid)"));
  CHECK(contains(msg, "unsupported Xsuite element classes: Solenoid (3), Wire (1)"));
  CHECK(contains(msg, "#4 'w' (Wire)"));
  CHECK_FALSE(contains(msg, "Undulator"));  // not used by the sequence

  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.replace_unknown_with_markers = true;
  options.warnings = &warnings;
  const json out = convert(text, options);
  CHECK(out.at("sequence") == json::parse(R"(["d", "sol1", "d", "sol1", "w", "sol2", "d"])"));
  CHECK(out.at("elements").at("sol1") == json{{"type", "Marker"}});
  CHECK(out.at("elements").at("sol2") == json{{"type", "Marker"}});
  CHECK(out.at("elements").at("w") == json{{"type", "Marker"}});
  REQUIRE(warnings.size() == 2);
  CHECK(contains(warnings[0], "3 Xsuite elements of unsupported class Solenoid replaced by markers"));
  CHECK(contains(warnings[0], "lengths are dropped"));
  CHECK(contains(warnings[1], "1 Xsuite element of unsupported class Wire replaced by markers"));
  CHECK_FALSE(contains(warnings[1], "lengths"));
  const ft::Lattice lattice = ft::lattice_from_json(out, "line.json", builtin_registry());
  CHECK(lattice.sequence().size() == 7);
  CHECK(lattice.circumference() == 3.0);
}

TEST_CASE("fields that change the physics are reported together, with counts, markers do not hide them") {
  const std::string text = line_of(
      R"({"m1": {"__class__": "Multipole", "knl": [0.0, 0.1], "hyl": 0.001},
          "m2": {"__class__": "Multipole", "knl": [0.0, 0.1], "isthick": true},
          "e": {"__class__": "DipoleEdge", "k": 0.1, "e1": 0.1, "model": "full"},
          "c": {"__class__": "Cavity", "voltage": 1e5, "frequency": 1e6, "absolute_time": 1},
          "d": {"__class__": "Drift", "length": 1.0, "mystery": 3},
          "w": {"__class__": "Wire"}})",
      R"(["d", "m1", "m1", "m2", "e", "c", "w"])");
  for (const bool replace : {false, true}) {
    CAPTURE(replace);
    ft::XsuiteImportOptions options;
    options.replace_unknown_with_markers = replace;
    const std::string msg = convert_error(text, options);
    CHECK(contains(msg, "line.json: element #0 'd' (Drift), field 'mystery'"));
    CHECK(contains(msg, "Multipole.hyl = 0.001"));
    CHECK(contains(msg, "2 elements, first #1 'm1'"));
    CHECK(contains(msg, "Multipole.isthick = true"));
    CHECK(contains(msg, "DipoleEdge.model = \"full\""));
    CHECK(contains(msg, "only the linear DipoleEdge model"));
    CHECK(contains(msg, "Cavity.absolute_time = 1"));
    CHECK(contains(msg, "Drift.mystery = 3"));
    CHECK(contains(msg, "unsupported Xsuite element classes: Wire (1)") == !replace);
  }
  // Zero values of the same fields are fine, and "suppressed" edges do nothing: markers.
  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.warnings = &warnings;
  const json out = convert(
      line_of(
          R"({"m": {"__class__": "Multipole", "knl": [0.0, 0.1], "shift_x": 0.0, "_rot_s_rad": 0.0, "mystery": 0},
          "e": {"__class__": "DipoleEdge", "k": 0.1, "model": "suppressed"}})",
          R"(["m", "e"])"),
      options);
  CHECK(out.at("elements").at("e") == json{{"type", "Marker"}});
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "suppressed"));
}

TEST_CASE("a knl longer than fusetrack supports is an error naming the element") {
  const std::string msg = convert_error(line_of(
      R"({"d": {"__class__": "Drift", "length": 1.0},
          "m7": {"__class__": "Multipole", "knl": [0, 0, 0, 0, 0, 0, 0.5]}})",
      R"(["d", "m7"])"));
  CHECK(contains(msg, "line.json: element #1 'm7' (Multipole), field 'knl'"));
  CHECK(contains(msg, "multipole order 6"));
  CHECK(contains(msg, "maximum order 5"));
  // The order alone can also be too high (Xsuite pads knl to order + 1 entries).
  const std::string msg2 =
      convert_error(line_of(R"({"m": {"__class__": "Multipole", "knl": [0.1], "order": 8}})", R"(["m"])"));
  CHECK(contains(msg2, "element #0 'm' (Multipole), field 'order'"));
  CHECK(contains(msg2, "multipole order 8"));
  // Order 5 is supported and kept.
  const json out =
      convert(line_of(R"({"m": {"__class__": "Multipole", "knl": [0, 0, 0, 0, 0, 0.5], "ksl": [0.1]}})", R"(["m"])"));
  CHECK(out.at("elements").at("m").at("order") == 5);
  CHECK(out.at("elements").at("m").at("ksl") == json::array({0.1, 0.0, 0.0, 0.0, 0.0, 0.0}));
}

TEST_CASE("bad particle_ref: missing or invalid fields are named") {
  const std::string elements = R"({"d": {"__class__": "Drift", "length": 1.0}})";
  const std::string seq = R"(["d"])";
  std::string msg = convert_error(line_of(elements, seq, R"({"mass0": 938272088.16, "q0": 1})"));
  CHECK(contains(msg, "line.json, field 'particle_ref.p0c'"));
  CHECK(contains(msg, "required field is missing"));
  msg = convert_error(line_of(elements, seq, R"({"mass0": 938272088.16, "q0": 1, "p0c": []})"));
  CHECK(contains(msg, "field 'particle_ref.p0c'"));
  CHECK(contains(msg, "empty"));
  msg = convert_error(line_of(elements, seq, R"({"mass0": "proton", "q0": 1, "p0c": [1e9]})"));
  CHECK(contains(msg, "field 'particle_ref.mass0'"));
  CHECK(contains(msg, "expected a number, got a string"));
  msg = convert_error(line_of(elements, seq, R"({"mass0": 938272088.16, "q0": 1, "p0c": [-1e9]})"));
  CHECK(contains(msg, "field 'particle_ref.p0c'"));
  CHECK(contains(msg, "must be positive"));
  msg = convert_error(line_of(elements, seq, R"({"mass0": 938272088.16, "q0": [0.0], "p0c": [1e9]})"));
  CHECK(contains(msg, "field 'particle_ref.q0'"));
  msg = convert_error(R"({"elements": {"d": {"__class__": "Drift", "length": 1.0}}, "element_names": ["d"]})");
  CHECK(contains(msg, "line.json, field 'particle_ref'"));
  CHECK(contains(msg, "reference particle is missing"));
  // A particle_ref naming an entry of env_particles.
  const json out = convert(R"({"elements": {"d": {"__class__": "Drift", "length": 1.0}}, "element_names": ["d"],
      "particle_ref": "ref", "env_particles": {"ref": {"mass0": 938272088.16, "q0": 1, "p0c": [7e9]}}})");
  CHECK(out.at("reference").at("p0c") == 7e9);
}

TEST_CASE("a sequence name without an element is an error naming its position") {
  const std::string msg = convert_error(line_of(R"({"d": {"__class__": "Drift", "length": 1.0}})", R"(["d", "nope"])"));
  CHECK(contains(msg, "line.json: element #1 'nope', field 'element_names[1]'"));
  CHECK(contains(msg, "not defined"));
}

TEST_CASE("a thick Xsuite cavity becomes drift(L/2), kick, drift(L/2)") {
  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.warnings = &warnings;
  const json out = convert(line_of(R"({"d": {"__class__": "Drift", "length": 10.0},
      "rf": {"__class__": "Cavity", "voltage": 1e5, "harmonic": 4, "length": 0.2}})",
                                   R"(["d", "rf", "d"])"),
                           options);
  CHECK(out.at("sequence") == json::parse(R"(["d", "rf/half_drift", "rf", "rf/half_drift", "d"])"));
  CHECK(out.at("elements").at("rf/half_drift") == json{{"type", "Drift"}, {"length", 0.1}});
  CHECK(out.at("elements").at("rf").at("harmonic") == 4.0);
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "1 thick Xsuite Cavity"));
  const ft::Lattice lattice = ft::lattice_from_json(out, "line.json", builtin_registry());
  CHECK(lattice.circumference() == doctest::Approx(20.2).epsilon(1e-15));
}

TEST_CASE("drift models and XTRACK_USE_EXACT_DRIFTS") {
  const std::string elements = R"({"a": {"__class__": "Drift", "length": 1.0},
      "b": {"__class__": "Drift", "length": 1.0, "model": "exact"},
      "c": {"__class__": "DriftExact", "length": 2.0}})";
  const json out = convert(line_of(elements, R"(["a", "b", "c"])"));
  CHECK(out.at("elements").at("a").at("type") == "Drift");
  CHECK(out.at("elements").at("b").at("type") == "DriftExact");
  CHECK(out.at("elements").at("c") == json{{"type", "DriftExact"}, {"length", 2.0}});
  json doc = json::parse(line_of(elements, R"(["a"])"));
  doc["config"] = {{"XTRACK_USE_EXACT_DRIFTS", true}, {"XTRACK_GLOBAL_XY_LIMIT", 1.0}};
  CHECK(ft::xsuite_to_fusetrack(doc, "line.json", {}).at("elements").at("a").at("type") == "DriftExact");
}

TEST_CASE("global aperture from config.XTRACK_GLOBAL_XY_LIMIT") {
  json doc = json::parse(line_of(R"({"d": {"__class__": "Drift", "length": 1.0}})", R"(["d"])"));
  CHECK(ft::xsuite_to_fusetrack(doc, "line.json", {}).at("global_aperture").at("x") == 1.0);  // no config
  doc["config"] = {{"XTRACK_GLOBAL_XY_LIMIT", 0.25}};
  CHECK(ft::xsuite_to_fusetrack(doc, "line.json", {}).at("global_aperture") == json{{"x", 0.25}, {"y", 0.25}});
  // A config without the flag: Xsuite applies no global aperture (TrackerConfig replaced).
  doc["config"] = {{"XTRACK_MULTIPOLE_NO_SYNRAD", true}};
  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.warnings = &warnings;
  const json out = ft::xsuite_to_fusetrack(doc, "line.json", options);
  CHECK(out.at("global_aperture").at("x") == std::numeric_limits<double>::max());
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "no global aperture"));
  doc["config"] = {{"XTRACK_GLOBAL_XY_LIMIT", -1.0}};
  const std::string msg = error_message([&] { ft::xsuite_to_fusetrack(doc, "line.json", {}); });
  CHECK(contains(msg, "field 'config.XTRACK_GLOBAL_XY_LIMIT'"));
}

TEST_CASE("SRotation angle in degrees, from angle or from cos_z and sin_z") {
  const double c30 = std::cos(30.0 / 180.0 * 3.141592653589793);
  const json out =
      convert(line_of(R"({"r1": {"__class__": "SRotation", "angle": 30.0, "cos_z": )" + json(c30).dump() + R"(},
          "r2": {"__class__": "SRotation", "cos_z": 0.0, "sin_z": 1.0},
          "r3": {"__class__": "SRotation", "cos_z": -1.0},
          "s": {"__class__": "XYShift", "dx": 0.001}})",
                      R"(["r1", "r2", "r3", "s"])"));
  CHECK(out.at("elements").at("r1") == json{{"type", "SRotation"}, {"angle", 30.0}});
  CHECK(out.at("elements").at("r2").at("angle").get<double>() == doctest::Approx(90.0).epsilon(1e-15));
  CHECK(out.at("elements").at("r3").at("angle").get<double>() == doctest::Approx(180.0).epsilon(1e-15));
  CHECK(out.at("elements").at("s") == json{{"type", "XYShift"}, {"dx", 0.001}, {"dy", 0.0}});
  const std::string msg =
      convert_error(line_of(R"({"r": {"__class__": "SRotation", "angle": 30.0, "cos_z": 0.5}})", R"(["r"])"));
  CHECK(contains(msg, "element #0 'r' (SRotation), field 'cos_z'"));
  CHECK(contains(msg, "does not match angle"));
}

TEST_CASE("Replica elements resolve to their parent, quadrupoles and sextupoles keep Xsuite's default model") {
  const json out = convert(line_of(
      R"({"q": {"__class__": "Quadrupole", "length": 0.5, "k1": 0.3},
          "q_copy": {"__class__": "Replica", "parent_name": "q"},
          "s": {"__class__": "Sextupole", "length": 0.2, "k2": 1.5, "num_multipole_kicks": 4, "model": "adaptive"},
          "loop": {"__class__": "Replica", "parent_name": "loop"}})",
      R"(["q", "q_copy", "s"])"));
  CHECK(out.at("elements").at("q_copy") == out.at("elements").at("q"));
  CHECK(out.at("elements").at("q") ==
        json{{"type", "Quadrupole"}, {"length", 0.5}, {"k1", 0.3}, {"k1s", 0.0}, {"num_slices", 1}});
  CHECK(out.at("elements").at("s") ==
        json{{"type", "Sextupole"}, {"length", 0.2}, {"k2", 1.5}, {"k2s", 0.0}, {"num_slices", 4}});
  const std::string msg =
      convert_error(line_of(R"({"loop": {"__class__": "Replica", "parent_name": "loop"}})", R"(["loop"])"));
  CHECK(contains(msg, "circular"));
  const std::string msg2 = convert_error(line_of(
      R"({"q": {"__class__": "Quadrupole", "length": 0.5, "k1": 0.3, "model": "drift-kick-drift-exact", "edge_entry_active": 1}})",
      R"(["q"])"));
  CHECK(contains(msg2, "Quadrupole.model"));
  CHECK(contains(msg2, "Quadrupole.edge_entry_active"));
}

TEST_CASE("radiation_flag: kept on the magnets that radiate, refused with a reason elsewhere") {
  // A line whose config does not compile the radiation out (Xsuite's default Line config does).
  const auto radiating = [](const std::string& elements, const std::string& names) {
    const std::string line = line_of(elements, names);
    return line.substr(0, line.size() - 1) + R"(, "config": {"XTRACK_MULTIPOLE_NO_SYNRAD": false}})";
  };
  const json doc = convert(radiating(R"({"b": {"__class__": "Multipole", "knl": [0.01], "hxl": 0.01, "length": 1.0,
                                         "radiation_flag": 2},
                                   "s": {"__class__": "Bend", "length": 1.0, "angle": 0.01, "radiation_flag": 1}})",
                                     R"(["b", "s"])"));
  CHECK(doc["elements"]["b"]["radiation"] == 2);
  CHECK(doc["elements"]["s"]["radiation"] == 1);
  const std::string quad = convert_error(
      radiating(R"({"q": {"__class__": "Quadrupole", "length": 0.5, "k1": 0.1, "radiation_flag": 1}})", R"(["q"])"));
  CHECK(contains(quad, "radiation_flag"));
  CHECK(contains(quad, "synchrotron radiation is modelled in Bend, Multipole and Octupole only"));
  const std::string taper = convert_error(radiating(
      R"({"b": {"__class__": "Multipole", "knl": [0.01], "hxl": 0.01, "length": 1.0, "radiation_flag": 1,
              "delta_taper": 1e-3}})",
      R"(["b"])"));
  CHECK(contains(taper, "tapering (delta_taper) is not modelled"));
}

}  // namespace test_xsuite_import
