// LimitEllipse (elements/limit_ellipse.h): inside, outside, boundary (inside), NaN (lost).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "limit_ellipse.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_limit_ellipse.
namespace test_limit_ellipse {

using namespace ft_test;

namespace {
bool survives(const LimitEllipse& e, double x, double y) {
  ft::ParticleView p = particle(x, 2e-4, y, 0.0, -0.01, -1e-3, kBetaUltraRelativistic);
  LimitEllipse_track(e, p);
  CHECK(p.state == (p.alive() ? ft::kAlive : ft::kLostOnAperture));
  CHECK((p.y == y || (std::isnan(p.y) && std::isnan(y))));  // apertures never move particles
  return p.alive();
}
LimitEllipse make_ellipse(double a, double b) {
  LimitEllipse e{};
  e.a = a;
  e.b = b;
  LimitEllipse_prepare(e, reference_proton(0.9));
  return e;
}
}  // namespace

TEST_CASE("LimitEllipse: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_LimitEllipse();
  CHECK(d.flags == FT_THIN);
  CHECK(find_field(d, "a")->has_default == 0);
  CHECK(find_field(d, "a_b_squ")->flags == FT_FIELD_DERIVED);
}

TEST_CASE("LimitEllipse: inside / outside / boundary / NaN") {
  const double a = 0.03, b = 0.01;
  const LimitEllipse e = make_ellipse(a, b);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(survives(e, 0.0, 0.0));
  // (x/a)^2 + (y/b)^2 = 0.98 and 1.02 along a diagonal direction
  const double t = 0.6;
  CHECK(survives(e, std::sqrt(0.98) * a * std::cos(t), std::sqrt(0.98) * b * std::sin(t)));
  CHECK_FALSE(survives(e, std::sqrt(1.02) * a * std::cos(t), std::sqrt(1.02) * b * std::sin(t)));
  // inside the bounding box but outside the ellipse
  CHECK_FALSE(survives(e, 0.9 * a, 0.9 * b));
  // on the axes' ends: exactly on the boundary -> inside
  CHECK(survives(e, a, 0.0));
  CHECK(survives(e, -a, 0.0));
  CHECK(survives(e, 0.0, b));
  CHECK(survives(e, 0.0, -b));
  CHECK_FALSE(survives(e, std::nextafter(a, 1.0), 0.0));
  CHECK_FALSE(survives(e, 0.0, std::nextafter(-b, -1.0)));
  CHECK_FALSE(survives(e, nan, 0.0));
  CHECK_FALSE(survives(e, 0.0, nan));
}

TEST_CASE("LimitEllipse: prepare rejects non-positive semi-axes") {
  LimitEllipse e{};
  e.a = 0.0;
  e.b = 0.01;
  CHECK_THROWS_AS(LimitEllipse_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e.a = 0.01;
  e.b = -0.01;
  CHECK_THROWS_AS(LimitEllipse_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e.b = 0.02;
  CHECK_NOTHROW(LimitEllipse_prepare(e, reference_proton(0.9)));
  CHECK(e.a_b_squ == (0.01 * 0.01) * (0.02 * 0.02));
}

}  // namespace test_limit_ellipse
