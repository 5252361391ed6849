// XYShift (elements/xy_shift.h): x -= dx, y -= dy; symplecticity.
#include <doctest/doctest.h>

#include <cmath>

#include "support/element_testing.h"
#include "xy_shift.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xy_shift.
namespace test_xy_shift {

using namespace ft_test;

TEST_CASE("XYShift: descriptor and defaults") {
  const ft_element_type_desc& d = ft_element_descriptor_XYShift();
  CHECK(d.flags == FT_THIN);
  const XYShift s = with_defaults<XYShift>(d);
  CHECK(s.dx == 0.0);
  CHECK(s.dy == 0.0);
}

TEST_CASE("XYShift: x -= dx, y -= dy, nothing else") {
  XYShift s{};
  s.dx = 1.5e-3;
  s.dy = -0.7e-3;
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    XYShift_track(s, p);
    CHECK(close(p.x, c.x - 1.5e-3, 1e-15, 1e-19));
    CHECK(close(p.y, c.y + 0.7e-3, 1e-15, 1e-19));
    CHECK(p.px == c.px);
    CHECK(p.py == c.py);
    CHECK(p.zeta == c.zeta);
    CHECK(p.delta == c.delta);
  }
}

TEST_CASE("XYShift: symplectic") {
  XYShift s{};
  s.dx = 2e-3;
  s.dy = 1e-3;
  for (const Case& c : cases()) {
    CHECK(symplecticity_error(jacobian(s, XYShift_track, canonical(c), c.beta0)) < kSymplecticTolerance);
  }
}

}  // namespace test_xy_shift
