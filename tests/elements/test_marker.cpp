// Marker (elements/marker.h): no effect, one unused field.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "marker.h"
#include "support/element_testing.h"

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
    CHECK(std::memcmp(&p, &before, sizeof(p)) == 0);
  }
}
