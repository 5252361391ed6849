// LimitRect (elements/limit_rect.h): inside, outside, boundary (inside), NaN (lost).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "limit_rect.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_limit_rect.
namespace test_limit_rect {

using namespace ft_test;

namespace {
bool survives(const LimitRect& e, double x, double y) {
  ft::ParticleView p = particle(x, 1e-4, y, -1e-4, 0.01, 1e-3, kBetaHalf);
  LimitRect_track(e, p);
  if (p.alive()) {
    CHECK(p.state == ft::kAlive);
  } else {
    CHECK(p.state == ft::kLostOnAperture);
  }
  CHECK((p.x == x || (std::isnan(p.x) && std::isnan(x))));  // apertures never move particles
  return p.alive();
}
LimitRect make_rect() {
  LimitRect e = with_defaults<LimitRect>(ft_element_descriptor_LimitRect());
  e.min_x = -0.02;
  e.max_x = 0.03;
  e.min_y = -0.01;
  e.max_y = 0.015;
  LimitRect_prepare(e, reference_proton(0.9));
  return e;
}
}  // namespace

TEST_CASE("LimitRect: defaults are xtrack's UNLIMITED = 1e10 m") {
  const ft_element_type_desc& d = ft_element_descriptor_LimitRect();
  CHECK(d.flags == FT_THIN);
  const LimitRect e = with_defaults<LimitRect>(d);
  CHECK(e.min_x == -1e10);
  CHECK(e.max_x == 1e10);
  CHECK(e.min_y == -1e10);
  CHECK(e.max_y == 1e10);
  CHECK(survives(e, 5.0, -7.0));
}

TEST_CASE("LimitRect: inside / outside / boundary / NaN") {
  const LimitRect e = make_rect();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(survives(e, 0.0, 0.0));
  CHECK(survives(e, 0.029, -0.0099));
  CHECK_FALSE(survives(e, 0.0301, 0.0));
  CHECK_FALSE(survives(e, -0.0201, 0.0));
  CHECK_FALSE(survives(e, 0.0, 0.0151));
  CHECK_FALSE(survives(e, 0.0, -0.0101));
  // exactly on each edge and corner: inside
  CHECK(survives(e, 0.03, 0.0));
  CHECK(survives(e, -0.02, 0.0));
  CHECK(survives(e, 0.0, 0.015));
  CHECK(survives(e, 0.0, -0.01));
  CHECK(survives(e, 0.03, 0.015));
  CHECK(survives(e, -0.02, -0.01));
  CHECK_FALSE(survives(e, nan, 0.0));
  CHECK_FALSE(survives(e, 0.0, nan));
  CHECK_FALSE(survives(e, std::numeric_limits<double>::infinity(), 0.0));
}

TEST_CASE("LimitRect: a lost particle stays lost") {
  const LimitRect e = make_rect();
  ft::ParticleView p = particle(0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.9);
  LimitRect_track(e, p);
  CHECK_FALSE(p.alive());
  p.x = 0.0;
  LimitRect_track(e, p);
  CHECK_FALSE(p.alive());
}

TEST_CASE("LimitRect: prepare rejects min > max") {
  LimitRect e = make_rect();
  e.min_x = 0.05;
  CHECK_THROWS_AS(LimitRect_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e = make_rect();
  e.max_y = -0.02;
  CHECK_THROWS_AS(LimitRect_prepare(e, reference_proton(0.9)), std::invalid_argument);
}

}  // namespace test_limit_rect
