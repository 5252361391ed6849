// The set-up of a study of lattice variants on several threads: a variants file's
// "variants" list parsed in pieces, the variants built in parallel, and the DA study's frames; each
// against the one-piece, one-after-the-other result (the whole file parsed by parse_json_file).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/variants.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_variants_setup.
namespace test_variants_setup {

using namespace ft;
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

/// The same variants: names, parameter bytes and transformation blocks.
void check_same(const LatticeVariants& a, const LatticeVariants& b) {
  REQUIRE(a.size() == b.size());
  CHECK(a.names == b.names);
  for (size_t v = 0; v < a.size(); ++v) {
    const Lattice &la = a.lattices[v], &lb = b.lattices[v];
    REQUIRE(la.param_byte_count() == lb.param_byte_count());
    CHECK(std::memcmp(la.param_bytes(), lb.param_bytes(), la.param_byte_count()) == 0);
    REQUIRE(la.definitions().size() == lb.definitions().size());
    for (uint32_t d = 0; d < la.definitions().size(); ++d) {
      const std::vector<uint64_t>* ta = la.transform_block(d);
      const std::vector<uint64_t>* tb = lb.transform_block(d);
      CHECK((ta == nullptr) == (tb == nullptr));
      if (ta && tb) CHECK(*ta == *tb);
    }
  }
}

}  // namespace

TEST_CASE("Variants file in pieces: the list parsed on several threads gives what the whole file parsed gives") {
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");
  // Names with the characters the splitter must see through (brackets, commas, quotes, escapes),
  // a key "variants" inside a string and inside a variant, and a key after the list.
  const std::string text = R"({"fusetrack_variants": 1, "description": "a \"variants\": [list], {x}",
  "variants": [
    {"name": "a],[{\"b\\", "elements": [{"name": "qd", "add": {"knl": [0, 0.004]}}]} ,
    {"name": "plain", "comment": {"variants": [1, 2]}, "elements": [{"match": "s[fd].*", "set": {"shift_x": 1e-4}}]},
    {"name": "third,]", "elements": []}
  ],
  "scans": [{"name": "sf_half", "field": "knl", "index": 2, "values": [2.0, 2.6]}]}
)";
  const std::string file = ft::test::write_temp_file("variants_setup_pieces.json", text);
  const LatticeVariants read = load_variants(base, {file}, ft::test::builtin_registry());
  const LatticeVariants whole = variants_from_json(base, parse_json_file(file), file);
  REQUIRE(whole.size() == 6);
  CHECK(whole.names[0] == "a],[{\"b\\/knl[2]=2");
  check_same(read, whole);
  fs::remove(file);
}

TEST_CASE("Variants file in pieces: bad JSON inside one variant gets the whole file's message (line and column)") {
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const std::vector<std::string> bad = {
      // a syntax error in the second variant
      "{\"fusetrack_variants\": 1, \"variants\": [\n {\"name\": \"a\"},\n {\"name\": \"b\" \"elements\": []},\n"
      " {\"name\": \"c\"}]}\n",
      // a key twice in the third variant
      "{\"fusetrack_variants\": 1, \"variants\": [\n {\"name\": \"a\"},\n {\"name\": \"b\"},\n"
      " {\"name\": \"c\", \"name\": \"d\"}]}\n",
      // a number that is not finite
      "{\"fusetrack_variants\": 1, \"variants\": [{\"name\": \"a\"},\n {\"name\": \"b\", \"elements\": "
      "[{\"name\": \"qd\", \"set\": {\"shift_x\": 1e999}}]}]}\n",
      // an empty entry, and an unterminated list
      "{\"fusetrack_variants\": 1, \"variants\": [{\"name\": \"a\"},, {\"name\": \"b\"}]}",
      "{\"fusetrack_variants\": 1, \"variants\": [{\"name\": \"a\"}, {\"name\": \"b\"}",
      // the top-level object's keys are still checked
      "{\"fusetrack_variants\": 1, \"variants\": [{\"name\": \"a\"}, {\"name\": \"b\"}], \"fusetrack_variants\": 1}"};
  for (size_t k = 0; k < bad.size(); ++k) {
    const std::string file = ft::test::write_temp_file(fmt::format("variants_setup_bad{}.json", k), bad[k]);
    const std::string expected = ft::test::error_message([&] { parse_json_file(file); });
    INFO(k, ": ", expected);
    REQUIRE(!expected.empty());
    CHECK(ft::test::error_message([&] { load_variants(base, {file}, ft::test::builtin_registry()); }) == expected);
    fs::remove(file);
  }
}

TEST_CASE("Variants built in parallel: of several bad variants the first in the file is named") {
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const std::string e = ft::test::error_message([&] {
    variants_from_json(base, json::parse(R"({"fusetrack_variants": 1, "variants": [{"name": "fine"},
        {"name": "first_bad", "elements": [{"name": "nowhere", "set": {"shift_x": 1e-4}}]},
        {"name": "fine_too"},
        {"name": "second_bad", "elements": [{"name": "qd", "set": {"no_such_field": 1}}]}],
        "scans": [{"name": "sf_half", "field": "knl", "index": 2, "values": [2.0, 2.6]}]})"),
                       "seeds.json");
  });
  INFO(e);
  CHECK(e.find("variant 'first_bad'") != std::string::npos);
  CHECK(e.find("second_bad") == std::string::npos);
  // A knob value that fails only in some combinations: the first combination in order is named.
  const std::string k = ft::test::error_message([&] {
    variants_from_json(base, json::parse(R"({"fusetrack_variants": 1, "variants": [{"name": "a"}, {"name": "b"}],
        "scans": [{"name": "qd", "field": "order", "values": [1, 2.5, 3.5]}]})"),
                       "knobs.json");
  });
  INFO(k);
  CHECK(k.find("variant 'a'") != std::string::npos);
  CHECK(k.find("variant 'b'") == std::string::npos);
}

}  // namespace test_variants_setup
