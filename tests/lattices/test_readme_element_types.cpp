// The README's table of built-in element types is the output of `fusetrack info --markdown` (written
// from the registry), so that it cannot drift from the types the built-in plugin registers.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_readme_element_types.
namespace test_readme_element_types {

namespace {

const char* const kBegin = "<!-- element-types begin: fusetrack info --markdown -->\n";
const char* const kEnd = "<!-- element-types end -->";

std::string readme_table() {
  std::ifstream in(ft::test::source_path("README.md"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t begin = s.find(kBegin);
  const size_t end = s.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin) return "<markers missing>";
  return s.substr(begin + std::string(kBegin).size(), end - begin - std::string(kBegin).size());
}

}  // namespace

TEST_CASE("README: the table of built-in element types equals `fusetrack info --markdown`") {
  const auto [rc, table] = ft::test::run_command(ft::test::fusetrack_binary() + " info --markdown");
  REQUIRE(rc == 0);
  // Every header of elements/ registers one type; the table names each (independent of the registry's order).
  for (const char* type : {"Drift",
                           "DriftExact",
                           "Multipole",
                           "Quadrupole",
                           "Sextupole",
                           "Bend",
                           "ThickMultipole",
                           "RFMultipole",
                           "Corrector",
                           "Cavity",
                           "DipoleEdge",
                           "SRotation",
                           "XYShift",
                           "LimitRect",
                           "LimitEllipse",
                           "LimitCircle",
                           "LimitRacetrack",
                           "LimitPolygon",
                           "LimitRectEllipse",
                           "Marker",
                           "LongitudinalImpedance"}) {
    CAPTURE(type);
    CHECK(table.find("| `" + std::string(type) + "` |") != std::string::npos);
  }
  INFO("regenerate the README's table with: ./build/bin/fusetrack info --markdown");
  CHECK(readme_table() == table);
}

}  // namespace test_readme_element_types
