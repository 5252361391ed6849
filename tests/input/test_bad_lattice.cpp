// Every class of bad lattice input gives one clear error naming the file, the element and the
// field. Each test checks the parts of the message a user needs to find the mistake.
#include <doctest/doctest.h>

#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_bad_lattice.
namespace test_bad_lattice {

using ft::test::builtin_registry;
using ft::test::error_message;
using ft::test::write_temp_file;

namespace {

const char* kReference = R"("reference": {"mass0": 938272088.16, "q0": 1, "p0c": 2e9})";

std::string load_error(const std::string& name, const std::string& text) {
  const std::string path = write_temp_file(name, text);
  return error_message([&] { ft::load_lattice(path, builtin_registry()); });
}

}  // namespace

TEST_CASE("a valid lattice loads (control case for the bad-input tests)") {
  const std::string path = write_temp_file("good.json", std::string("{") + kReference + R"(,
    "elements": {"d": {"type": "Drift", "length": 1.5}, "m": {"type": "Marker"}},
    "sequence": ["d", "m", "d"]})");
  const ft::Lattice lattice = ft::load_lattice(path, builtin_registry());
  CHECK(lattice.sequence().size() == 3);
  CHECK(lattice.circumference() == doctest::Approx(3.0));
}

TEST_CASE("unknown element type lists the registered types") {
  const std::string msg = load_error("unknown_type.json", std::string("{") + kReference + R"(,
    "elements": {"wig": {"type": "Wiggler", "length": 1}}, "sequence": ["wig"]})");
  CHECK(msg.find("unknown_type.json") != std::string::npos);
  CHECK(msg.find("'wig'") != std::string::npos);
  CHECK(msg.find("unknown element type 'Wiggler'") != std::string::npos);
  CHECK(msg.find("registered types:") != std::string::npos);
  CHECK(msg.find("Drift") != std::string::npos);
  CHECK(msg.find("plugins searched in") != std::string::npos);
}

TEST_CASE("missing required field") {
  const std::string msg = load_error("missing_field.json", std::string("{") + kReference + R"(,
    "elements": {"d1": {"type": "Drift"}}, "sequence": ["d1"]})");
  CHECK(msg.find("missing_field.json") != std::string::npos);
  CHECK(msg.find("'d1' (Drift)") != std::string::npos);
  CHECK(msg.find("field 'length'") != std::string::npos);
  CHECK(msg.find("required field is missing") != std::string::npos);
}

TEST_CASE("extra (unknown) field names the valid ones") {
  const std::string msg = load_error("extra_field.json", std::string("{") + kReference + R"(,
    "elements": {"d1": {"type": "Drift", "lenght": 1.0}}, "sequence": ["d1"]})");
  CHECK(msg.find("'d1' (Drift)") != std::string::npos);
  CHECK(msg.find("field 'lenght'") != std::string::npos);
  CHECK(msg.find("unknown field") != std::string::npos);
  CHECK(msg.find("length") != std::string::npos);
}

TEST_CASE("mistyped field") {
  const std::string msg = load_error("mistyped.json", std::string("{") + kReference + R"(,
    "elements": {"d1": {"type": "Drift", "length": "1.0"}}, "sequence": ["d1"]})");
  CHECK(msg.find("field 'length'") != std::string::npos);
  CHECK(msg.find("expected double number, got a string") != std::string::npos);
}

TEST_CASE("non-finite number") {
  // JSON has no literal for infinity; an overflowing literal is how one reaches a parser.
  const std::string msg = load_error("nonfinite.json", std::string("{") + kReference + R"(,
    "elements": {"d1": {"type": "Drift", "length": 1e999}}, "sequence": ["d1"]})");
  CHECK(msg.find("nonfinite.json") != std::string::npos);
  CHECK(msg.find("field 'length'") != std::string::npos);
  CHECK(msg.find("not a finite number") != std::string::npos);
}

TEST_CASE("negative length") {
  const std::string msg = load_error("negative.json", std::string("{") + kReference + R"(,
    "elements": {"d0": {"type": "Drift", "length": 1.0}, "d1": {"type": "Drift", "length": -0.5}},
    "sequence": ["d0", "d1"]})");
  CHECK(msg.find("element #1 'd1' (Drift)") != std::string::npos);
  CHECK(msg.find("field 'length'") != std::string::npos);
  CHECK(msg.find("must not be negative") != std::string::npos);
}

TEST_CASE("radiation: an unknown lattice-wide mode and an element's out-of-range switch are named") {
  const std::string mode = load_error("radiation_mode.json", std::string("{") + kReference + R"(,
    "radiation": "on", "elements": {"d1": {"type": "Drift", "length": 1.0}}, "sequence": ["d1"]})");
  CHECK(mode.find("radiation_mode.json") != std::string::npos);
  CHECK(mode.find("field 'radiation'") != std::string::npos);
  CHECK(mode.find("expected \"off\", \"mean\" or \"quantum\", got \"on\"") != std::string::npos);
  const std::string field = load_error("radiation_field.json", std::string("{") + kReference + R"(,
    "elements": {"b": {"type": "Bend", "length": 1.0, "angle": 0.1, "radiation": 3}}, "sequence": ["b"]})");
  CHECK(field.find("'b' (Bend)") != std::string::npos);
  CHECK(field.find("radiation = 3 is not one of 0 (off), 1 (mean), 2 (quantum)") != std::string::npos);
}

TEST_CASE("empty sequence") {
  const std::string msg = load_error("empty.json", std::string("{") + kReference + R"(,
    "elements": {"d1": {"type": "Drift", "length": 1.0}}, "sequence": []})");
  CHECK(msg.find("empty.json") != std::string::npos);
  CHECK(msg.find("field 'sequence'") != std::string::npos);
  CHECK(msg.find("sequence is empty") != std::string::npos);
}

TEST_CASE("truncated JSON gives line and column") {
  const std::string msg = load_error("truncated.json", std::string("{") + kReference + ",\n" +
                                                           "  \"elements\": {\"d1\": {\"type\": \"Drift\",\n"
                                                           "  \"length\": 1.0");
  CHECK(msg.find("truncated.json") != std::string::npos);
  CHECK(msg.find("invalid JSON at line 3, column 16") != std::string::npos);
}

TEST_CASE("undefined name in the sequence gives its position") {
  const std::string msg = load_error("undefined.json", std::string("{") + kReference + R"(,
    "elements": {"d1": {"type": "Drift", "length": 1.0}}, "sequence": ["d1", "qf"]})");
  CHECK(msg.find("field 'sequence[1]'") != std::string::npos);
  CHECK(msg.find("'qf' is neither a defined element nor a line") != std::string::npos);
}

TEST_CASE("reference particle errors name the field") {
  const std::string msg = load_error("reference.json", R"({"reference": {"mass0": 938272088.16, "q0": 1},
    "elements": {"d1": {"type": "Drift", "length": 1.0}}, "sequence": ["d1"]})");
  CHECK(msg.find("field 'reference.p0c'") != std::string::npos);
  CHECK(msg.find("required field is missing") != std::string::npos);
  const std::string msg2 = load_error("reference2.json", R"({"reference": {"mass0": -1, "q0": 1, "p0c": 1e9},
    "elements": {"d1": {"type": "Drift", "length": 1.0}}, "sequence": ["d1"]})");
  CHECK(msg2.find("field 'reference.mass0'") != std::string::npos);
  CHECK(msg2.find("must be positive") != std::string::npos);
}

TEST_CASE("a missing file is named") {
  const std::string msg = error_message([] { ft::load_lattice("/nonexistent/ring.json", builtin_registry()); });
  CHECK(msg.find("/nonexistent/ring.json") != std::string::npos);
  CHECK(msg.find("cannot open file") != std::string::npos);
}

TEST_CASE("a lattice naming a plugin that does not exist") {
  const std::string msg = load_error("badplugin.json", std::string("{") + kReference + R"(,
    "plugins": ["no_such_plugin.so"],
    "elements": {"d1": {"type": "Drift", "length": 1.0}}, "sequence": ["d1"]})");
  CHECK(msg.find("field 'plugins[0]'") != std::string::npos);
  CHECK(msg.find("no_such_plugin.so") != std::string::npos);
  CHECK(msg.find("does not exist") != std::string::npos);
}

}  // namespace test_bad_lattice
