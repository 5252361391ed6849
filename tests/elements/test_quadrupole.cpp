// Quadrupole (elements/quadrupole.h): exact chromatic linear map (transverse by the textbook
// matrices, zeta by numerical integration of the path length), skew kicks, convergence of the
// sliced skew quadrupole to the exact rotated solution, symplecticity, reversibility.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "quadrupole.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_quadrupole.
namespace test_quadrupole {

using namespace ft_test;

namespace {
Quadrupole make_quad(double length, double k1, double k1s = 0.0, int num_slices = -1) {
  Quadrupole q = with_defaults<Quadrupole>(ft_element_descriptor_Quadrupole());
  q.length = length;
  q.k1 = k1;
  q.k1s = k1s;
  if (num_slices > 0) q.num_slices = num_slices;
  Quadrupole_prepare(q, reference_proton(0.9));
  return q;
}

// u(s) = u0 C(s) + u0' S(s) for u'' = -K u, K = k / (1 + delta).
struct Plane {
  double c, s, dc, ds;  // C(s), S(s) and their derivatives
};
Plane plane(double K, double s) {
  if (K > 0) {
    const double w = std::sqrt(K);
    return {std::cos(w * s), std::sin(w * s) / w, -w * std::sin(w * s), std::cos(w * s)};
  }
  if (K < 0) {
    const double w = std::sqrt(-K);
    return {std::cosh(w * s), std::sinh(w * s) / w, w * std::sinh(w * s), std::cosh(w * s)};
  }
  return {1.0, s, 0.0, 1.0};
}

// The exact normal-quadrupole map over s, written from the equations of motion
//   x'' = -k1/(1+delta) x, y'' = +k1/(1+delta) y, dzeta/ds = 1 - (1 + (x'^2 + y'^2)/2) / rvv,
// with the path-length integral done by composite Simpson quadrature (2000 intervals).
ft::ParticleView exact_quad(double k1, double s, ft::ParticleView p) {
  const double opd = 1.0 + p.delta;
  const double kx = k1 / opd;
  const double x0 = p.x, xp0 = p.px / opd, y0 = p.y, yp0 = p.py / opd;
  auto slopes2 = [&](double t) {
    const Plane a = plane(kx, t), b = plane(-kx, t);
    const double xp = x0 * a.dc + xp0 * a.ds, yp = y0 * b.dc + yp0 * b.ds;
    return xp * xp + yp * yp;
  };
  const int n = 2000;
  double integral = slopes2(0.0) + slopes2(s);
  for (int i = 1; i < n; ++i) integral += (i % 2 ? 4.0 : 2.0) * slopes2(s * i / n);
  integral *= s / (3.0 * n);
  const Plane a = plane(kx, s), b = plane(-kx, s);
  const double rvv = rvv_from(p.delta, ptau_from_delta(p.delta, p.beta0), p.beta0);
  p.x = x0 * a.c + xp0 * a.s;
  p.px = opd * (x0 * a.dc + xp0 * a.ds);
  p.y = y0 * b.c + yp0 * b.s;
  p.py = opd * (y0 * b.dc + yp0 * b.ds);
  p.zeta += s - (s + 0.5 * integral) / rvv;
  return p;
}

void check_close(const ft::ParticleView& a, const ft::ParticleView& b, double rel, double abs_tol) {
  CHECK(close(a.x, b.x, rel, abs_tol));
  CHECK(close(a.px, b.px, rel, abs_tol));
  CHECK(close(a.y, b.y, rel, abs_tol));
  CHECK(close(a.py, b.py, rel, abs_tol));
  CHECK(close(a.zeta, b.zeta, rel, abs_tol));
  CHECK(a.delta == b.delta);
}
}  // namespace

TEST_CASE("Quadrupole: descriptor and defaults") {
  const ft_element_type_desc& d = ft_element_descriptor_Quadrupole();
  CHECK(d.flags == FT_THICK);
  REQUIRE(d.length_field >= 0);
  const Quadrupole q = with_defaults<Quadrupole>(d);
  CHECK(q.k1s == 0.0);
  CHECK(q.num_slices == 1);
  CHECK(find_field(d, "k1")->has_default == 0);
  CHECK(find_field(d, "num_slices")->type == FT_FIELD_INT32);
}

TEST_CASE("Quadrupole: exact chromatic linear map (focusing and defocusing)") {
  for (const double k1 : {0.35, -0.35, 2.0}) {
    for (const Case& c : cases()) {
      CAPTURE(k1);
      CAPTURE(c.delta);
      CAPTURE(c.beta0);
      const double length = 1.7;
      ft::ParticleView p = particle(c);
      Quadrupole_track(make_quad(length, k1), p);
      check_close(p, exact_quad(k1, length, particle(c)), 1e-13, 1e-18);
    }
  }
}

TEST_CASE("Quadrupole: k1 = 0 is the expanded drift") {
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    Quadrupole_track(make_quad(2.0, 0.0), p);
    const double xp = c.px / (1.0 + c.delta), yp = c.py / (1.0 + c.delta);
    const double rvv = rvv_from(c.delta, ptau_from_delta(c.delta, c.beta0), c.beta0);
    CHECK(close(p.x, c.x + 2.0 * xp, 1e-15, 1e-19));
    CHECK(close(p.y, c.y + 2.0 * yp, 1e-15, 1e-19));
    CHECK(p.px == c.px);
    CHECK(close(p.zeta, c.zeta + 2.0 * (1.0 - (1.0 + 0.5 * (xp * xp + yp * yp)) / rvv), 1e-14, 1e-15));
  }
}

TEST_CASE("Quadrupole: skew gradient as thin kicks between half maps") {
  const double length = 1.2, k1 = 0.4, k1s = 0.15;
  for (const int n : {1, 3}) {
    for (const Case& c : cases()) {
      CAPTURE(n);
      CAPTURE(c.beta0);
      ft::ParticleView p = particle(c);
      Quadrupole_track(make_quad(length, k1, k1s, n), p);
      // n x [ M(L/2n), px += k1s (L/n) y, py += k1s (L/n) x, M(L/2n) ]
      ft::ParticleView e = particle(c);
      for (int i = 0; i < n; ++i) {
        e = exact_quad(k1, length / (2 * n), e);
        const double x = e.x, y = e.y;
        e.px += k1s * length / n * y;
        e.py += k1s * length / n * x;
        e = exact_quad(k1, length / (2 * n), e);
      }
      check_close(p, e, 1e-13, 1e-18);
    }
  }
}

TEST_CASE("Quadrupole: sliced pure skew quadrupole converges to the rotated normal quadrupole") {
  // H_skew = -k1s x y = -(k1s/2)(u^2 - v^2) with u = (x + y)/sqrt2, v = (y - x)/sqrt2: a normal
  // quadrupole of gradient -k1s in the frame rotated by 45 degrees.
  const double length = 1.0, k1s = 0.5;
  const Case c = cases()[2];
  const double r = std::sqrt(0.5);
  ft::ParticleView rot = particle(c);
  rot.x = r * (c.x + c.y);
  rot.y = r * (c.y - c.x);
  rot.px = r * (c.px + c.py);
  rot.py = r * (c.py - c.px);
  rot = exact_quad(-k1s, length, rot);
  ft::ParticleView ref = rot;
  ref.x = r * (rot.x - rot.y);
  ref.y = r * (rot.x + rot.y);
  ref.px = r * (rot.px - rot.py);
  ref.py = r * (rot.px + rot.py);

  double err[2];
  int i = 0;
  for (const int n : {10, 100}) {
    ft::ParticleView p = particle(c);
    Quadrupole_track(make_quad(length, 0.0, k1s, n), p);
    err[i++] = std::fabs(p.x - ref.x) + std::fabs(p.px - ref.px) + std::fabs(p.y - ref.y) + std::fabs(p.py - ref.py) +
               std::fabs(p.zeta - ref.zeta);
  }
  CHECK(err[1] < 3e-8);  // coordinates ~1e-3, (L/n)^2 k1s^2 / 12 ~ 2e-6 relative
  // second order: 10x the slices, ~100x smaller error
  CHECK(err[1] < err[0] / 50.0);
  CHECK(err[1] > err[0] / 200.0);
}

TEST_CASE("Quadrupole: symplectic") {
  for (const double k1s : {0.0, 0.2}) {
    for (const double k1 : {0.8, -0.5}) {
      for (const Case& c : cases()) {
        CAPTURE(k1);
        CAPTURE(k1s);
        CAPTURE(c.beta0);
        const Quadrupole q = make_quad(1.5, k1, k1s, 2);
        CHECK(symplecticity_error(jacobian(q, Quadrupole_track, canonical(c), c.beta0)) < kSymplecticTolerance);
      }
    }
  }
}

TEST_CASE("Quadrupole: L then -L returns to the start (exact map, symmetric splitting with k1s)") {
  for (const double k1s : {0.0, 0.3}) {
    for (const Case& c : cases()) {
      CAPTURE(k1s);
      CAPTURE(c.beta0);
      ft::ParticleView p = particle(c);
      Quadrupole_track(make_quad(2.3, 0.6, k1s, 3), p);
      CHECK(std::fabs(p.x - c.x) > 1e-5);
      Quadrupole_track(make_quad(-2.3, 0.6, k1s, 3), p);
      CHECK(close(p.x, c.x, 1e-14, 1e-17));
      CHECK(close(p.px, c.px, 1e-14, 1e-17));
      CHECK(close(p.y, c.y, 1e-14, 1e-17));
      CHECK(close(p.py, c.py, 1e-14, 1e-17));
      CHECK(close(p.zeta, c.zeta, 1e-14, 1e-17));
    }
  }
}

TEST_CASE("Quadrupole: prepare rejects num_slices < 1") {
  Quadrupole q = make_quad(1.0, 0.1);
  q.num_slices = 0;
  CHECK_THROWS_AS(Quadrupole_prepare(q, reference_proton(0.9)), std::invalid_argument);
}

}  // namespace test_quadrupole
