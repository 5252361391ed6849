// Multipole (elements/multipole.h): thin kick by the series sum, hxl curvature terms, order
// handling, symplecticity with and without hxl.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>

#include "multipole.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_multipole.
namespace test_multipole {

using namespace ft_test;

namespace {
Multipole make_multipole(const double (&knl)[6], const double (&ksl)[6], double hxl, double length) {
  Multipole m = with_defaults<Multipole>(ft_element_descriptor_Multipole());
  for (int n = 0; n < 6; ++n) {
    m.knl[n] = knl[n];
    m.ksl[n] = ksl[n];
  }
  m.hxl = hxl;
  m.length = length;
  Multipole_prepare(m, reference_proton(0.9));
  return m;
}

// The kick written as the series: px -= Re S, py += Im S, S = sum_n (knl_n + i ksl_n) (x + i y)^n / n!
std::complex<double> series(const double (&knl)[6], const double (&ksl)[6], double x, double y) {
  std::complex<double> s = 0.0, z = 1.0;
  double factorial = 1.0;
  for (int n = 0; n < 6; ++n) {
    if (n > 0) factorial *= n;
    s += std::complex<double>(knl[n], ksl[n]) * z / factorial;
    z *= std::complex<double>(x, y);
  }
  return s;
}

const double kKnl[6] = {1.0e-4, 0.03, -0.8, 25.0, -2.0e3, 4.0e5};
const double kKsl[6] = {-2.0e-5, 0.01, 0.5, -12.0, 1.5e3, -1.0e5};
}  // namespace

TEST_CASE("Multipole: descriptor (thin, arrays, order, derived 1/order!)") {
  const ft_element_type_desc& d = ft_element_descriptor_Multipole();
  CHECK(d.flags == FT_THIN);
  const ft_field_desc* knl = find_field(d, "knl");
  REQUIRE(knl != nullptr);
  CHECK(knl->count == FT_MULTIPOLE_MAX_ORDER + 1);
  CHECK(knl->type == FT_FIELD_DOUBLE);
  REQUIRE(find_field(d, "ksl") != nullptr);
  REQUIRE(find_field(d, "hxl") != nullptr);
  CHECK(find_field(d, "hxl")->count == 1);
  const ft_field_desc* order = find_field(d, "order");
  REQUIRE(order != nullptr);
  CHECK(order->type == FT_FIELD_INT32);
  CHECK(order->default_value == -1);  // automatic: highest non-zero coefficient
  REQUIRE(find_field(d, "inv_factorial_order") != nullptr);
  CHECK(find_field(d, "inv_factorial_order")->flags == FT_FIELD_DERIVED);
  CHECK(std::string(find_field(d, "length")->unit) == "m");
}

TEST_CASE("Multipole: kick equals the series (x + i y)^n / n! for all orders") {
  const double zero[6] = {0, 0, 0, 0, 0, 0};
  for (const Case& c : cases()) {
    CAPTURE(c.delta);
    CAPTURE(c.beta0);
    const Multipole m = make_multipole(kKnl, kKsl, 0.0, 0.0);
    ft::ParticleView p = particle(c);
    Multipole_track(m, p);
    const std::complex<double> s = series(kKnl, kKsl, c.x, c.y);
    CHECK(close(p.px, c.px - s.real(), 1e-14, 1e-19));
    CHECK(close(p.py, c.py + s.imag(), 1e-14, 1e-19));
    CHECK(p.x == c.x);
    CHECK(p.y == c.y);
    CHECK(p.zeta == c.zeta);
    CHECK(p.delta == c.delta);
    // A pure normal quadrupole kick: px -= k1l x, py += k1l y (independent of delta).
    double k1[6] = {0, 0.05, 0, 0, 0, 0};
    ft::ParticleView q = particle(c);
    Multipole_track(make_multipole(k1, zero, 0.0, 0.0), q);
    CHECK(close(q.px, c.px - 0.05 * c.x, 1e-15, 1e-20));
    CHECK(close(q.py, c.py + 0.05 * c.y, 1e-15, 1e-20));
  }
}

TEST_CASE("Multipole: hxl curvature terms and zeta update") {
  const double hxl = 2.0e-3, length = 1.5, h = hxl / length;
  for (const Case& c : cases()) {
    CAPTURE(c.delta);
    CAPTURE(c.beta0);
    const Multipole m = make_multipole(kKnl, kKsl, hxl, length);
    ft::ParticleView p = particle(c);
    Multipole_track(m, p);
    const std::complex<double> s = series(kKnl, kKsl, c.x, c.y);
    const double rvv = rvv_from(c.delta, ptau_from_delta(c.delta, c.beta0), c.beta0);
    // H = -h x (1 + delta) + h k0l x^2/2 + h k1l (x^3/3 - x y^2/2)  (MAD-8 physics manual 5.15)
    const double px = c.px - s.real() + hxl * (1.0 + c.delta) - h * kKnl[0] * c.x - h * kKnl[1] * (c.x * c.x - 0.5 * c.y * c.y);
    const double py = c.py + s.imag() + h * kKnl[1] * c.x * c.y;
    CHECK(close(p.px, px, 1e-14, 1e-19));
    CHECK(close(p.py, py, 1e-14, 1e-19));
    CHECK(close(p.zeta, c.zeta - hxl * c.x / rvv, 1e-14, 1e-19));
    CHECK(p.x == c.x);
    CHECK(p.delta == c.delta);
  }
  SUBCASE("length = 0: only the hxl (1 + delta) and zeta terms") {
    const Case c = cases()[3];
    const Multipole m = make_multipole(kKnl, kKsl, hxl, 0.0);
    ft::ParticleView p = particle(c);
    Multipole_track(m, p);
    const std::complex<double> s = series(kKnl, kKsl, c.x, c.y);
    const double rvv = rvv_from(c.delta, ptau_from_delta(c.delta, c.beta0), c.beta0);
    CHECK(close(p.px, c.px - s.real() + hxl * (1.0 + c.delta), 1e-14, 1e-19));
    CHECK(close(p.py, c.py + s.imag(), 1e-14, 1e-19));
    CHECK(close(p.zeta, c.zeta - hxl * c.x / rvv, 1e-14, 1e-19));
  }
}

TEST_CASE("Multipole: order") {
  double knl[6] = {1e-4, 0.02, 0.3, 0, 0, 0};
  const double ksl[6] = {0, 0, -0.1, 0, 0, 0};
  Multipole m = with_defaults<Multipole>(ft_element_descriptor_Multipole());
  for (int n = 0; n < 6; ++n) {
    m.knl[n] = knl[n];
    m.ksl[n] = ksl[n];
  }
  m.order = 2;
  Multipole_prepare(m, reference_proton(0.9));
  CHECK(m.inv_factorial_order == 0.5);
  const Case c = cases()[1];
  ft::ParticleView p = particle(c);
  Multipole_track(m, p);
  const std::complex<double> s = series(knl, ksl, c.x, c.y);
  CHECK(close(p.px, c.px - s.real(), 1e-14, 1e-19));
  CHECK(close(p.py, c.py + s.imag(), 1e-14, 1e-19));

  m.order = FT_MULTIPOLE_MAX_ORDER;
  Multipole_prepare(m, reference_proton(0.9));
  CHECK(m.inv_factorial_order == 1.0 / 120.0);

  m.order = 1;  // knl[2] = 0.3 would be ignored
  CHECK_THROWS_AS(Multipole_prepare(m, reference_proton(0.9)), std::invalid_argument);
  m.order = FT_MULTIPOLE_MAX_ORDER + 1;
  CHECK_THROWS_AS(Multipole_prepare(m, reference_proton(0.9)), std::invalid_argument);
  m.order = -2;
  CHECK_THROWS_AS(Multipole_prepare(m, reference_proton(0.9)), std::invalid_argument);

  // Automatic order: the highest non-zero coefficient (here 2), and the same kick as order 2.
  m.order = -1;
  Multipole_prepare(m, reference_proton(0.9));
  CHECK(m.kick_order == 2);
  CHECK(m.inv_factorial_order == 0.5);
  ft::ParticleView q = particle(c);
  Multipole_track(m, q);
  CHECK(q.px == p.px);
  CHECK(q.py == p.py);
}

TEST_CASE("Multipole: symplectic, with and without hxl") {
  for (const double hxl : {0.0, 5.0e-3}) {
    for (const Case& c : cases()) {
      CAPTURE(hxl);
      CAPTURE(c.beta0);
      const Multipole m = make_multipole(kKnl, kKsl, hxl, 2.0);
      const Mat6 j = jacobian(m, Multipole_track, canonical(c), c.beta0);
      CHECK(symplecticity_error(j) < kSymplecticTolerance);
      CHECK(std::fabs(j[1][0]) > 1e-3);  // the map is not the identity
    }
  }
}

}  // namespace test_multipole
