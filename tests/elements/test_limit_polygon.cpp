// LimitPolygon (elements/limit_polygon.h): convex and concave polygons against an independent
// winding-number test, NaN, and bad input (too few or too many vertices, zero area).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "limit_polygon.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_limit_polygon.
namespace test_limit_polygon {

using namespace ft_test;

namespace {
LimitPolygon make(const std::vector<double>& xs, const std::vector<double>& ys) {
  LimitPolygon e{};
  e.n_vertices = static_cast<int>(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    e.x_vertices[i] = xs[i];
    e.y_vertices[i] = ys[i];
  }
  LimitPolygon_prepare(e, reference_proton(0.9));
  return e;
}
bool survives(const LimitPolygon& e, double x, double y) {
  ft::ParticleView p = particle(x, 0.0, y, 0.0, 0.0, 0.0, kBetaUltraRelativistic);
  LimitPolygon_track(e, p);
  return p.alive();
}
/// Winding number by summed angles (independent of the crossing test): inside iff |sum| ~ 2 pi.
bool inside_by_angles(const std::vector<double>& xs, const std::vector<double>& ys, double x, double y) {
  double total = 0.0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const size_t j = (i + 1) % xs.size();
    const double a = std::atan2(ys[i] - y, xs[i] - x), b = std::atan2(ys[j] - y, xs[j] - x);
    double d = b - a;
    while (d > M_PI) d -= 2 * M_PI;
    while (d < -M_PI) d += 2 * M_PI;
    total += d;
  }
  return std::fabs(total) > M_PI;
}
}  // namespace

TEST_CASE("LimitPolygon: convex and concave shapes agree with a winding-number test") {
  const std::vector<std::vector<double>> shapes_x = {
      {-0.02, 0.02, 0.02, -0.02},                                   // rectangle
      {0.03, 0.0, -0.03, -0.01, 0.0, 0.01},                         // concave arrow, clockwise order irrelevant
      {0.0, 0.01, 0.03, 0.012, 0.02, 0.0, -0.02, -0.012, -0.03, -0.01}};  // star
  const std::vector<std::vector<double>> shapes_y = {
      {-0.01, -0.01, 0.01, 0.01},
      {0.0, 0.02, 0.0, 0.0, -0.02, 0.0},
      {0.03, 0.01, 0.01, -0.005, -0.03, -0.012, -0.03, -0.005, 0.01, 0.01}};
  for (size_t s = 0; s < shapes_x.size(); ++s) {
    CAPTURE(s);
    const LimitPolygon e = make(shapes_x[s], shapes_y[s]);
    int in = 0, out = 0;
    for (int i = -40; i <= 40; ++i)
      for (int j = -40; j <= 40; ++j) {
        const double x = 0.0351 * i / 40.0 + 1.3e-7, y = 0.0333 * j / 40.0 - 0.7e-7;  // off every edge
        const bool expected = inside_by_angles(shapes_x[s], shapes_y[s], x, y);
        CHECK(survives(e, x, y) == expected);
        (expected ? in : out)++;
      }
    CHECK(in > 50);
    CHECK(out > 50);
  }
  const LimitPolygon square = make({-0.02, 0.02, 0.02, -0.02}, {-0.01, -0.01, 0.01, 0.01});
  CHECK_FALSE(survives(square, std::numeric_limits<double>::quiet_NaN(), 0.0));
  CHECK_FALSE(survives(square, 0.0, std::numeric_limits<double>::quiet_NaN()));
}

TEST_CASE("LimitPolygon: bad input") {
  LimitPolygon e{};
  e.n_vertices = 2;
  e.x_vertices[0] = 1.0;
  e.y_vertices[1] = 1.0;
  CHECK_THROWS_AS(LimitPolygon_prepare(e, reference_proton(0.9)), std::invalid_argument);
  e.n_vertices = FT_LIMIT_POLYGON_MAX_VERTICES + 1;
  CHECK_THROWS_AS(LimitPolygon_prepare(e, reference_proton(0.9)), std::invalid_argument);
  // Vertices beyond n_vertices.
  LimitPolygon f{};
  f.n_vertices = 3;
  f.x_vertices[0] = 0.0;
  f.x_vertices[1] = 1.0;
  f.y_vertices[2] = 1.0;
  f.x_vertices[3] = 0.5;
  CHECK_THROWS_AS(LimitPolygon_prepare(f, reference_proton(0.9)), std::invalid_argument);
  f.x_vertices[3] = 0.0;
  CHECK_NOTHROW(LimitPolygon_prepare(f, reference_proton(0.9)));
  // Collinear vertices: no area.
  LimitPolygon g{};
  g.n_vertices = 3;
  g.x_vertices[1] = 1.0;
  g.x_vertices[2] = 2.0;
  CHECK_THROWS_AS(LimitPolygon_prepare(g, reference_proton(0.9)), std::invalid_argument);
}

}  // namespace test_limit_polygon
