// Marker (elements/marker.h): no effect, one unused field.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "marker.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_marker.
namespace test_marker {

using namespace ft_test;

TEST_CASE("Marker: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_Marker();
  CHECK(d.flags == FT_THIN);
  CHECK(d.field_count == 1);
  CHECK(std::string(d.fields[0].name) == "tag");
  CHECK(d.fields[0].has_default == 1);
  CHECK(d.length_field == -1);
}

TEST_CASE("Marker: leaves every particle field bit-identical") {
  Marker m = with_defaults<Marker>(ft_element_descriptor_Marker());
  m.tag = 7;
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    const ft::ParticleView before = p;
    Marker_track(m, p);
    // bitwise, field by field (the struct has padding)
    const double* a[10] = {&p.x, &p.px, &p.y, &p.py, &p.zeta, &p.delta, &p.ptau, &p.rpp, &p.rvv, &p.beta0};
    const double* b[10] = {&before.x, &before.px, &before.y, &before.py, &before.zeta,
                           &before.delta, &before.ptau, &before.rpp, &before.rvv, &before.beta0};
    for (int i = 0; i < 10; ++i) CHECK(std::memcmp(a[i], b[i], sizeof(double)) == 0);
    CHECK(p.state == before.state);
  }
}

}  // namespace test_marker
