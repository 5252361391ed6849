// LimitCircle (elements/limit_circle.h): inside, outside, boundary (inside), NaN (lost).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "limit_circle.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_limit_circle.
namespace test_limit_circle {

using namespace ft_test;

namespace {
bool survives(const LimitCircle& e, double x, double y) {
  ft::ParticleView p = particle(x, 0.0, y, 1e-4, 0.0, 0.0, kBetaHalf);
  LimitCircle_track(e, p);
  CHECK(p.state == (p.alive() ? ft::kAlive : ft::kLostOnAperture));
  return p.alive();
}
LimitCircle make_circle(double r) {
  LimitCircle e{};
  e.radius = r;
  LimitCircle_prepare(e, reference_proton(0.9));
  return e;
}
}  // namespace

TEST_CASE("LimitCircle: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_LimitCircle();
  CHECK(d.flags == FT_THIN);
  CHECK(find_field(d, "radius")->has_default == 0);
  CHECK(find_field(d, "radius_squ")->flags == FT_FIELD_DERIVED);
}

TEST_CASE("LimitCircle: inside / outside / boundary / NaN") {
  const double r = 0.025;
  const LimitCircle e = make_circle(r);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(survives(e, 0.0, 0.0));
  CHECK(survives(e, 0.99 * r * std::cos(1.0), 0.99 * r * std::sin(1.0)));
  CHECK_FALSE(survives(e, 1.01 * r * std::cos(1.0), 1.01 * r * std::sin(1.0)));
  CHECK_FALSE(survives(e, 0.8 * r, 0.8 * r));  // inside the square, outside the circle
  CHECK(survives(e, r, 0.0));
  CHECK(survives(e, 0.0, -r));
  CHECK_FALSE(survives(e, std::nextafter(r, 1.0), 0.0));
  // an exactly representable boundary point off the axes: 3-4-5 triangle scaled by 1/8
  const LimitCircle f = make_circle(0.625);
  CHECK(survives(f, 0.375, 0.5));
  CHECK(survives(f, -0.375, -0.5));
  CHECK_FALSE(survives(f, std::nextafter(0.375, 1.0), 0.5));
  CHECK_FALSE(survives(e, nan, 0.0));
  CHECK_FALSE(survives(e, 0.0, nan));
}

TEST_CASE("LimitCircle: prepare rejects a non-positive radius") {
  LimitCircle e{};
  e.radius = 0.0;
  CHECK_THROWS_AS(LimitCircle_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e.radius = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(LimitCircle_prepare(e, reference_proton(0.9)), std::invalid_argument);
}

}  // namespace test_limit_circle
