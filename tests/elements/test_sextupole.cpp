// Sextupole (elements/sextupole.h): drift-kick-drift slices written out, k2 = 0 drift,
// symplecticity, reversibility.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "sextupole.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_sextupole.
namespace test_sextupole {

using namespace ft_test;

namespace {
Sextupole make_sext(double length, double k2, double k2s = 0.0, int num_slices = -1) {
  Sextupole s = with_defaults<Sextupole>(ft_element_descriptor_Sextupole());
  s.length = length;
  s.k2 = k2;
  s.k2s = k2s;
  if (num_slices > 0) s.num_slices = num_slices;
  Sextupole_prepare(s, reference_proton(0.9));
  return s;
}

// Expanded drift: x += s px/(1+delta), zeta += s (1 - (1 + (x'^2 + y'^2)/2) / rvv).
void drift(double s, ft::ParticleView& p) {
  const double xp = p.px / (1.0 + p.delta), yp = p.py / (1.0 + p.delta);
  const double rvv = rvv_from(p.delta, ptau_from_delta(p.delta, p.beta0), p.beta0);
  p.x += s * xp;
  p.y += s * yp;
  p.zeta += s * (1.0 - (1.0 + 0.5 * (xp * xp + yp * yp)) / rvv);
}

// Thin sextupole: B_y + i B_x ~ (k2 + i k2s)(x + i y)^2 / 2, i.e.
// px -= kl (x^2 - y^2)/2 - ksl x y,  py += kl x y + ksl (x^2 - y^2)/2.
void kick(double kl, double ksl, ft::ParticleView& p) {
  const double x = p.x, y = p.y;
  p.px -= 0.5 * kl * (x * x - y * y) - ksl * x * y;
  p.py += kl * x * y + 0.5 * ksl * (x * x - y * y);
}
}  // namespace

TEST_CASE("Sextupole: descriptor and defaults") {
  const ft_element_type_desc& d = ft_element_descriptor_Sextupole();
  CHECK(d.flags == FT_THICK);
  REQUIRE(d.length_field >= 0);
  const Sextupole s = with_defaults<Sextupole>(d);
  CHECK(s.num_slices == 1);
  CHECK(s.k2s == 0.0);
}

TEST_CASE("Sextupole: n x (drift L/2n, kick, drift L/2n)") {
  const double length = 0.8, k2 = 30.0, k2s = -12.0;
  for (const int n : {1, 4}) {
    for (const Case& c : cases()) {
      CAPTURE(n);
      CAPTURE(c.delta);
      CAPTURE(c.beta0);
      ft::ParticleView p = particle(c);
      Sextupole_track(make_sext(length, k2, k2s, n), p);
      ft::ParticleView e = particle(c);
      for (int i = 0; i < n; ++i) {
        drift(length / (2 * n), e);
        kick(k2 * length / n, k2s * length / n, e);
        drift(length / (2 * n), e);
      }
      CHECK(close(p.x, e.x, 1e-14, 1e-19));
      CHECK(close(p.px, e.px, 1e-13, 1e-19));
      CHECK(close(p.y, e.y, 1e-14, 1e-19));
      CHECK(close(p.py, e.py, 1e-13, 1e-19));
      CHECK(close(p.zeta, e.zeta, 1e-14, 1e-15));
      CHECK(p.delta == c.delta);
    }
  }
}

TEST_CASE("Sextupole: k2 = k2s = 0 is the expanded drift") {
  const Case c = cases()[2];
  ft::ParticleView p = particle(c);
  Sextupole_track(make_sext(1.1, 0.0), p);
  ft::ParticleView e = particle(c);
  drift(1.1, e);
  CHECK(close(p.x, e.x, 1e-15, 1e-19));
  CHECK(close(p.zeta, e.zeta, 1e-14, 1e-15));
  CHECK(p.px == c.px);
}

TEST_CASE("Sextupole: symplectic") {
  for (const int n : {1, 3}) {
    for (const Case& c : cases()) {
      CAPTURE(n);
      CAPTURE(c.beta0);
      const Sextupole s = make_sext(0.5, 40.0, 10.0, n);
      CHECK(symplecticity_error(jacobian(s, Sextupole_track, canonical(c), c.beta0)) < kSymplecticTolerance);
    }
  }
}

TEST_CASE("Sextupole: L then -L returns to the start") {
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    Sextupole_track(make_sext(0.9, 50.0, 5.0, 3), p);
    Sextupole_track(make_sext(-0.9, 50.0, 5.0, 3), p);
    CHECK(close(p.x, c.x, 1e-14, 1e-17));
    CHECK(close(p.px, c.px, 1e-14, 1e-17));
    CHECK(close(p.y, c.y, 1e-14, 1e-17));
    CHECK(close(p.py, c.py, 1e-14, 1e-17));
    CHECK(close(p.zeta, c.zeta, 1e-14, 1e-17));
  }
}

TEST_CASE("Sextupole: prepare rejects num_slices < 1") {
  Sextupole s = make_sext(1.0, 1.0);
  s.num_slices = -2;
  CHECK_THROWS_AS(Sextupole_prepare(s, reference_proton(0.9)), std::invalid_argument);
}

}  // namespace test_sextupole
