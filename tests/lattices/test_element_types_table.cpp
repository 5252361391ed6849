// `fusetrack info --markdown` writes the table of built-in element types from the registry; the
// documentation's element reference is generated from the same registry (docs/generate_reference.py),
// so neither can drift from the types the built-in plugin registers. This checks that every element
// header registers its type.
#include <doctest/doctest.h>

#include <string>

#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_element_types_table.
namespace test_element_types_table {

TEST_CASE("fusetrack info --markdown: the table names every built-in element type") {
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
                           "LongitudinalImpedance",
                           "LongitudinalDrift",
                           "SpaceChargeBiGaussian",
                           "BeamBeamBiGaussian2D",
                           "BeamBeamBiGaussian3D",
                           "SpaceChargePIC",
                           "TransverseWake",
                           "TransverseDamper"}) {
    CAPTURE(type);
    CHECK(table.find("| `" + std::string(type) + "` |") != std::string::npos);
  }
}

}  // namespace test_element_types_table
