// LimitRectEllipse (elements/limit_rect_ellipse.h): inside both shapes, outside the rectangle
// only, outside the ellipse only, boundaries (inside), NaN (lost), bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "limit_rect_ellipse.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_limit_rect_ellipse.
namespace test_limit_rect_ellipse {

using namespace ft_test;

namespace {
LimitRectEllipse make(double max_x, double max_y, double a, double b) {
  LimitRectEllipse e{};
  e.max_x = max_x;
  e.max_y = max_y;
  e.a = a;
  e.b = b;
  LimitRectEllipse_prepare(e, reference_proton(0.9));
  return e;
}
bool survives(const LimitRectEllipse& e, double x, double y) {
  ft::ParticleView p = particle(x, 1e-4, y, 0.0, 0.0, 0.0, kBetaUltraRelativistic);
  LimitRectEllipse_track(e, p);
  return p.alive();
}
}  // namespace

TEST_CASE("LimitRectEllipse: alive iff inside the rectangle and the ellipse") {
  // An LHC-like beam screen: |x| <= 22 mm, |y| <= 17.5 mm, circle of radius 22 mm.
  const double mx = 0.022, my = 0.0175, a = 0.022, b = 0.022;
  const LimitRectEllipse e = make(mx, my, a, b);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // A grid, each point against the two shapes written out.
  for (int i = -30; i <= 30; ++i)
    for (int j = -30; j <= 30; ++j) {
      const double x = 0.0253 * i / 30.0, y = 0.0241 * j / 30.0;
      const bool inside = std::fabs(x) <= mx && std::fabs(y) <= my && (x * x) / (a * a) + (y * y) / (b * b) <= 1.0 - 1e-12;
      const bool outside = std::fabs(x) > mx || std::fabs(y) > my || (x * x) / (a * a) + (y * y) / (b * b) > 1.0 + 1e-12;
      if (inside) CHECK(survives(e, x, y));
      if (outside) CHECK_FALSE(survives(e, x, y));
    }
  CHECK(survives(e, mx, 0.0));       // on the rectangle's (and circle's) edge: inside
  CHECK(survives(e, 0.0, my));
  CHECK_FALSE(survives(e, 0.0, std::nextafter(my, 1.0)));  // outside the rectangle, inside the circle
  CHECK_FALSE(survives(e, 0.016, 0.016));                  // inside the rectangle, outside the circle
  CHECK_FALSE(survives(e, nan, 0.0));
  CHECK_FALSE(survives(e, 0.0, nan));
}

TEST_CASE("LimitRectEllipse: bad input") {
  LimitRectEllipse e{};
  e.max_x = 0.01;
  e.max_y = 0.01;
  e.a = 0.01;
  e.b = 0.0;
  CHECK_THROWS_AS(LimitRectEllipse_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e.b = 0.01;
  e.max_y = -1.0;
  CHECK_THROWS_AS(LimitRectEllipse_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e.max_y = 0.01;
  CHECK_NOTHROW(LimitRectEllipse_prepare(e, reference_proton(0.9)));
  CHECK(e.a_b_squ == (0.01 * 0.01) * (0.01 * 0.01));
}

}  // namespace test_limit_rect_ellipse
