// LimitRacetrack (elements/limit_racetrack.h): straight edges, rounded corners, boundary
// (inside), NaN (lost), prepare checks.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "limit_racetrack.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_limit_racetrack.
namespace test_limit_racetrack {

using namespace ft_test;

namespace {
bool survives(const LimitRacetrack& e, double x, double y) {
  ft::ParticleView p = particle(x, 0.0, y, 0.0, 0.0, 2e-3, kBetaHalf);
  LimitRacetrack_track(e, p);
  CHECK(p.state == (p.alive() ? ft::kAlive : ft::kLostOnAperture));
  return p.alive();
}
// Dyadic numbers so that the boundary tests are exact: x in [-1, 2], y in [-0.5, 1.5],
// corner ellipses a = 0.625 (= 5/8), b = 0.5.
LimitRacetrack make_racetrack(double a = 0.625, double b = 0.5) {
  LimitRacetrack e = with_defaults<LimitRacetrack>(ft_element_descriptor_LimitRacetrack());
  e.min_x = -1.0;
  e.max_x = 2.0;
  e.min_y = -0.5;
  e.max_y = 1.5;
  e.a = a;
  e.b = b;
  LimitRacetrack_prepare(e, reference_proton(0.9));
  return e;
}
// Inside the corner ellipse centred (cx, cy)? (independent formula: (dx/a)^2 + (dy/b)^2 <= 1)
bool in_corner(double dx, double dy, double a, double b) { return (dx / a) * (dx / a) + (dy / b) * (dy / b) <= 1.0; }
}  // namespace

TEST_CASE("LimitRacetrack: descriptor and defaults") {
  const ft_element_type_desc& d = ft_element_descriptor_LimitRacetrack();
  CHECK(d.flags == FT_THIN);
  const LimitRacetrack e = with_defaults<LimitRacetrack>(d);
  CHECK(e.max_x == 1e10);
  CHECK(e.a == 0.0);
  CHECK(survives(e, 100.0, -100.0));
}

TEST_CASE("LimitRacetrack: rectangle part") {
  const LimitRacetrack e = make_racetrack();
  CHECK(survives(e, 0.5, 0.5));
  CHECK(survives(e, 2.0, 0.5));   // right edge, between the corners
  CHECK(survives(e, -1.0, 0.5));  // left edge
  CHECK(survives(e, 0.5, 1.5));   // top edge
  CHECK(survives(e, 0.5, -0.5));  // bottom edge
  CHECK_FALSE(survives(e, std::nextafter(2.0, 3.0), 0.5));
  CHECK_FALSE(survives(e, 0.5, std::nextafter(-0.5, -1.0)));
  CHECK_FALSE(survives(e, 2.5, 0.5));
  CHECK_FALSE(survives(e, 0.5, 1.6));
}

TEST_CASE("LimitRacetrack: rounded corners") {
  const double a = 0.625, b = 0.5;
  const LimitRacetrack e = make_racetrack(a, b);
  // corner ellipse centres: x = 2 - a = 1.375 or -1 + a = -0.375; y = 1.5 - b = 1 or -0.5 + b = 0
  const double cx[2] = {1.375, -0.375}, sx[2] = {1.0, -1.0};
  const double cy[2] = {1.0, 0.0}, sy[2] = {1.0, -1.0};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      // the rectangle's corner itself is cut off
      CHECK_FALSE(survives(e, cx[i] + sx[i] * a, cy[j] + sy[j] * b));
      // near the corner ellipse (dx/a)^2 + (dy/b)^2 = 1 with dx = 0.6 a: dy = 0.8 b = 0.4
      CHECK(in_corner(0.375, 0.39, a, b));
      CHECK(survives(e, cx[i] + sx[i] * 0.375, cy[j] + sy[j] * 0.39));
      CHECK_FALSE(in_corner(0.375, 0.41, a, b));
      CHECK_FALSE(survives(e, cx[i] + sx[i] * 0.375, cy[j] + sy[j] * 0.41));
      // exactly on the corner ellipse with dyadic numbers (a = b = 0.625, 3-4-5 / 8):
      const LimitRacetrack round = make_racetrack(0.625, 0.625);
      const double rcx = i == 0 ? 1.375 : -0.375, rcy = j == 0 ? 0.875 : 0.125;
      CHECK(survives(round, rcx + sx[i] * 0.375, rcy + sy[j] * 0.5));
      CHECK_FALSE(survives(round, std::nextafter(rcx + sx[i] * 0.375, sx[i] * 10.0), rcy + sy[j] * 0.5));
    }
  }
}

TEST_CASE("LimitRacetrack: a = b = 0 is LimitRect, NaN is lost") {
  const LimitRacetrack e = make_racetrack(0.0, 0.0);
  CHECK(survives(e, 2.0, 1.5));
  CHECK(survives(e, -1.0, -0.5));
  CHECK_FALSE(survives(e, std::nextafter(2.0, 3.0), 1.5));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const LimitRacetrack r = make_racetrack();
  CHECK_FALSE(survives(r, nan, 0.5));
  CHECK_FALSE(survives(r, 0.5, nan));
  CHECK_FALSE(survives(r, nan, nan));
}

TEST_CASE("LimitRacetrack: prepare checks (as xtrack's constructor)") {
  LimitRacetrack e = make_racetrack();
  e.a = 1.6;  // > (max_x - min_x) / 2 = 1.5
  CHECK_THROWS_AS(LimitRacetrack_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e = make_racetrack();
  e.b = -0.1;
  CHECK_THROWS_AS(LimitRacetrack_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e = make_racetrack();
  e.min_y = 2.0;
  CHECK_THROWS_AS(LimitRacetrack_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e = make_racetrack();
  e.a = 1.5;  // exactly half the width is allowed
  CHECK_NOTHROW(LimitRacetrack_prepare(e, reference_proton(0.9)));
}

}  // namespace test_limit_racetrack
