// Large lattices and line expansion: a 10^5-element lattice loads correctly; repeat counts are
// validated; a sequence that would expand beyond kMaxSequenceLength is refused before anything is
// allocated; lines that contain themselves are refused. Speed is measured by
// bench/cpu/lattice_loading.py, not here.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_lattice_scale.
namespace test_lattice_scale {

using ft::test::builtin_registry;
using ft::test::write_temp_file;

namespace {

const char* kReference = R"("reference": {"mass0": 938272088.16, "q0": 1, "p0c": 2e9})";

/// The message of the ft::InputError that loading `text` gives (fails the test on no error or on
/// another exception).
std::string input_error(const std::string& name, const std::string& text) {
  const std::string path = write_temp_file(name, text);
  try {
    ft::load_lattice(path, builtin_registry());
  } catch (const ft::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not an InputError: " << e.what());
  }
  FAIL("no error for " << name);
  return "";
}

/// As input_error, but loads in a child process limited to 1 GB of data and 30 s, so that a
/// loader that tried to expand the sequence fails the test instead of hanging or exhausting the
/// machine. Returns the InputError message, or a description of how the child ended.
std::string bounded_input_error(const std::string& name, const std::string& text) {
  const std::string path = write_temp_file(name, text);
  builtin_registry();  // load the plugins before forking
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    rlimit lim{1UL << 30, 1UL << 30};
    setrlimit(RLIMIT_DATA, &lim);
    alarm(30);
    std::string out;
    int rc = 3;
    try {
      ft::load_lattice(path, builtin_registry());
      out = "no error";
    } catch (const ft::InputError& e) {
      out = e.what();
      rc = 0;
    } catch (const std::exception& e) {
      out = std::string("not an InputError: ") + e.what();
      rc = 2;
    }
    if (write(fds[1], out.data(), out.size()) < 0) rc = 4;
    close(fds[1]);
    _exit(rc);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return fmt::format("child killed by signal {} (hang or out of memory)", WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fmt::format("child exit {}: {}", WEXITSTATUS(status), out);
  return out;
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

std::string lattice(const std::string& elements, const std::string& lines, const std::string& sequence) {
  return std::string("{") + kReference + ", \"elements\": " + elements +
         (lines.empty() ? "" : ", \"lines\": " + lines) + ", \"sequence\": " + sequence + "}";
}

const char* kCell = R"({"d": {"type": "Drift", "length": 1.0}, "m": {"type": "Marker"}})";

}  // namespace

TEST_CASE("a lattice of 10^5 distinct elements loads: definitions, sequence and s positions") {
  constexpr int n = 100000;
  std::string text = std::string("{") + kReference + ", \"elements\": {";
  double expected_circumference = 0.0;
  for (int i = 0; i < n; ++i) {
    // Every third element a marker, the others drifts of distinct lengths.
    if (i % 3 == 2) {
      text += fmt::format("{}\"e{}\": {{\"type\": \"Marker\"}}", i ? ", " : "", i);
    } else {
      const double length = 0.5 + 1e-6 * i;
      expected_circumference += length;
      text += fmt::format("{}\"e{}\": {{\"type\": \"Drift\", \"length\": {:.17g}}}", i ? ", " : "", i, length);
    }
  }
  text += "}, \"sequence\": [";
  for (int i = 0; i < n; ++i) text += fmt::format("{}\"e{}\"", i ? ", " : "", i);
  text += "]}";
  const std::string path = write_temp_file("scale_1e5.json", text);
  const ft::Lattice l = ft::load_lattice(path, builtin_registry());
  REQUIRE(l.definitions().size() == n);
  REQUIRE(l.sequence().size() == n);
  double s = 0.0;
  bool in_order = true, positions = true;
  for (int i = 0; i < n; ++i) {
    const auto& entry = l.sequence()[static_cast<size_t>(i)];
    in_order = in_order && entry.definition == static_cast<uint32_t>(i) &&
               l.definitions()[entry.definition].name == fmt::format("e{}", i);
    positions = positions && entry.s == s;  // the same sum in the same order: exact
    if (i % 3 != 2) s += 0.5 + 1e-6 * i;
  }
  CHECK(in_order);
  CHECK(positions);
  CHECK(l.circumference() == doctest::Approx(expected_circumference).epsilon(1e-12));
  CHECK(l.find_definition("e0") == 0);
  CHECK(l.find_definition("e99999") == 99999);
  CHECK(l.find_definition("e100000") == -1);
  CHECK(l.sequence()[3].s == doctest::Approx(0.5 + 0.500001));
}

TEST_CASE("nested lines expand in order with the right counts") {
  const std::string path = write_temp_file(
      "nested_lines.json",
      lattice(R"({"a": {"type": "Drift", "length": 1.0}, "b": {"type": "Drift", "length": 2.0},
                   "m": {"type": "Marker"}})",
              R"({"inner": ["a", {"line": "b", "repeat": 2}], "outer": [{"line": "inner", "repeat": 3}, "m"]})",
              R"([{"line": "outer", "repeat": 2}, "a"])"));
  const ft::Lattice l = ft::load_lattice(path, builtin_registry());
  std::string names;
  for (const auto& e : l.sequence()) names += l.definitions()[e.definition].name;
  CHECK(names == "abbabbabbmabbabbabbma");
  CHECK(l.circumference() == doctest::Approx(2 * 3 * 5.0 + 1.0));
  CHECK(l.sequence().back().s == doctest::Approx(30.0));
}

TEST_CASE("bad repeat counts name the file, the line and the field") {
  SUBCASE("negative") {
    const std::string msg = input_error("repeat_negative.json",
                                        lattice(kCell, R"({"cell": ["d", "m"]})", R"([{"line": "cell", "repeat": -3}])"));
    CHECK(has(msg, "repeat_negative.json"));
    CHECK(has(msg, "field 'sequence[0].repeat'"));
    CHECK(has(msg, "'cell'"));
    CHECK(has(msg, "must be a positive integer, got -3"));
  }
  SUBCASE("zero") {
    const std::string msg = input_error(
        "repeat_zero.json", lattice(kCell, R"({"cell": ["d", {"line": "m", "repeat": 0}]})", R"([{"line": "cell"}])"));
    CHECK(has(msg, "repeat_zero.json"));
    CHECK(has(msg, "field 'lines.cell[1].repeat'"));
    CHECK(has(msg, "'m'"));
    CHECK(has(msg, "got 0"));
  }
  SUBCASE("not an integer") {
    const std::string msg = input_error("repeat_fraction.json",
                                        lattice(kCell, R"({"cell": ["d", "m"]})", R"([{"line": "cell", "repeat": 2.5}])"));
    CHECK(has(msg, "field 'sequence[0].repeat'"));
    CHECK(has(msg, "'cell'"));
    CHECK(has(msg, "got 2.5"));
  }
  SUBCASE("a string") {
    const std::string msg = input_error("repeat_string.json",
                                        lattice(kCell, R"({"cell": ["d", "m"]})", R"([{"line": "cell", "repeat": "3"}])"));
    CHECK(has(msg, "field 'sequence[0].repeat'"));
    CHECK(has(msg, "got a string"));
  }
  SUBCASE("larger than an integer") {
    const std::string msg = input_error(
        "repeat_huge.json", lattice(kCell, R"({"cell": ["d", "m"]})", R"([{"line": "cell", "repeat": 18446744073709551615}])"));
    CHECK(has(msg, "field 'sequence[0].repeat'"));
    CHECK(has(msg, "18446744073709551615"));
  }
  SUBCASE("misspelt key") {
    const std::string msg = input_error("repeat_misspelt.json",
                                        lattice(kCell, R"({"cell": ["d", "m"]})", R"([{"line": "cell", "repet": 3}])"));
    CHECK(has(msg, "field 'sequence[0].repet'"));
    CHECK(has(msg, "unknown field"));
  }
}

TEST_CASE("a line repeated 10^12 times is refused before expansion") {
  const std::string msg = bounded_input_error(
      "repeat_1e12.json", lattice(kCell, R"({"cell": ["d", "m"]})", R"([{"line": "cell", "repeat": 1000000000000}])"));
  CHECK(has(msg, "repeat_1e12.json"));
  CHECK(has(msg, "field 'sequence[0].repeat'"));
  CHECK(has(msg, "line 'cell' repeated 1000000000000 times expands to 2000000000000 element passes"));
  CHECK(has(msg, fmt::format("the limit is {}", ft::kMaxSequenceLength)));
}

TEST_CASE("three nested lines repeated 1000 times each are refused before expansion") {
  const std::string msg = bounded_input_error(
      "nested_1e9.json", lattice(kCell, R"({"l1": ["d", "m"], "l2": [{"line": "l1", "repeat": 1000}],
                                            "l3": [{"line": "l2", "repeat": 1000}]})",
                                 R"(["m", {"line": "l3", "repeat": 1000}])"));
  CHECK(has(msg, "nested_1e9.json"));
  CHECK(has(msg, "field 'sequence[1].repeat'"));
  CHECK(has(msg, "line 'l3' repeated 1000 times expands to 2000000000 element passes per turn (2000000 per repetition)"));
}

TEST_CASE("many entries each below the limit, together above it, are refused") {
  const std::string msg = bounded_input_error(
      "sum_over_limit.json",
      lattice(kCell, R"({"big": [{"line": "d", "repeat": 60000000}]})", R"([{"line": "big"}, "m", {"line": "big"}])"));
  CHECK(has(msg, "field 'sequence'"));
  CHECK(has(msg, "the sequence expands to more than 100000000 element passes per turn"));
  CHECK(has(msg, "after entry [2]"));
}

TEST_CASE("recursive lines are refused") {
  SUBCASE("a line containing itself") {
    const std::string msg = input_error("self_line.json", lattice(kCell, R"({"cell": ["d", "cell"]})", R"(["cell"])"));
    CHECK(has(msg, "self_line.json"));
    CHECK(has(msg, "field 'lines.cell[1]'"));
    CHECK(has(msg, "line 'cell' contains itself ('cell' -> 'cell')"));
  }
  SUBCASE("through another line") {
    const std::string msg = input_error(
        "cycle_lines.json",
        lattice(kCell, R"({"a": ["d", {"line": "b", "repeat": 2}], "b": ["m", "a"]})", R"([{"line": "a", "repeat": 4}])"));
    CHECK(has(msg, "field 'lines.b[1]'"));
    CHECK(has(msg, "line 'a' contains itself ('a' -> 'b' -> 'a')"));
  }
}

TEST_CASE("a line body that is not an array names the line") {
  const std::string msg = input_error("line_not_array.json", lattice(kCell, R"({"cell": "d"})", R"(["cell"])"));
  CHECK(has(msg, "field 'lines.cell'"));
  CHECK(has(msg, "line 'cell' must be an array"));
}

TEST_CASE("an element name defined twice in the file is refused") {
  const std::string msg = input_error(
      "duplicate_element.json",
      lattice(R"({"d": {"type": "Drift", "length": 1.0}, "m": {"type": "Marker"}, "d": {"type": "Drift", "length": 2.0}})",
              "", R"(["d", "m"])"));
  CHECK(has(msg, "duplicate_element.json"));
  CHECK(has(msg, "element 'd'"));
  CHECK(has(msg, "defined twice"));
}

TEST_CASE("a repeated key elsewhere in the file is refused") {
  const std::string msg = input_error(
      "duplicate_key.json", lattice(R"({"d": {"type": "Drift", "length": 1.0, "length": 2.0}})", "", R"(["d"])"));
  CHECK(has(msg, "duplicate_key.json"));
  CHECK(has(msg, "field 'elements.d.length'"));
  CHECK(has(msg, "appears twice"));
}

TEST_CASE("an empty line repeated absurdly often is refused") {
  const std::string msg = bounded_input_error(
      "empty_line.json", lattice(kCell, R"({"nothing": []})", R"(["m", {"line": "nothing", "repeat": 1000000000000}])"));
  CHECK(has(msg, "field 'sequence[1].repeat'"));
  CHECK(has(msg, "the repeat count 1000000000000 of 'nothing' is larger than the whole sequence may be"));
}

}  // namespace test_lattice_scale
