// Checks of the shared test helpers themselves (tests/support/element_testing.h): the
// ptau <-> delta conversions against particle.h, and that the symplectic check both accepts
// symplectic maps and rejects non-symplectic ones.
#include <doctest/doctest.h>

#include <cmath>

#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_element_testing.
namespace test_element_testing {

using namespace ft_test;

TEST_CASE("element_testing: ptau <-> delta conversions agree with particle.h") {
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf, 0.1}) {
    for (const double delta : {-1e-2, -1e-3, 0.0, 1e-6, 1e-3, 5e-2}) {
      CAPTURE(beta0);
      CAPTURE(delta);
      const double ptau = ptau_from_delta(delta, beta0);
      CHECK(close(delta_from_ptau(ptau, beta0), delta, 1e-14, 1e-300));
      // Energy from both sides: E / (P0 c) = ptau + 1/beta0 = sqrt((1 + delta)^2 + 1/(beta0 gamma0)^2).
      const double lhs = ptau + 1.0 / beta0;
      const double rhs = std::sqrt((1.0 + delta) * (1.0 + delta) + 1.0 / (beta0 * beta0) - 1.0);
      CHECK(close(lhs, rhs, 1e-15));
      const ft::ParticleView a = particle(0.0, 0.0, 0.0, 0.0, 0.0, delta, beta0);
      const ft::ParticleView b = ft::make_particle(0.0, 0.0, 0.0, 0.0, 0.0, delta, beta0);
      // particle.h (like xtrack) forms ptau beta0 = sqrt(...) - 1: absolute rounding ~2e-16 / beta0.
      CHECK(close(a.ptau, b.ptau, 1e-15, 1e-15 / beta0));
      CHECK(close(a.rpp, b.rpp, 1e-15));
      CHECK(close(a.rvv, b.rvv, 1e-15));
    }
  }
}

TEST_CASE("element_testing: canonical round trip") {
  for (const Case& c : cases()) {
    const Vec6 z = canonical(c);
    const ft::ParticleView p = from_canonical(z, c.beta0);
    CHECK(close(p.delta, c.delta, 1e-14, 1e-19));
    CHECK(p.x == c.x);
    CHECK(p.py == c.py);
    CHECK(p.zeta == c.zeta);
  }
}

namespace {
// Test-only maps: a symplectic one (a rotation in (x, px) and a shear (zeta, pzeta) -> zeta),
// and non-symplectic ones (a scaling of x alone, a damping of pzeta).
struct TestMap {
  int kind;
};
void TestMap_track(const TestMap& m, ft::ParticleView& p) {
  if (m.kind == 0) {
    const double c = std::cos(0.3), s = std::sin(0.3);
    const double x = p.x;
    p.x = c * x + s * p.px;
    p.px = -s * x + c * p.px;
    p.zeta += 0.7 * p.ptau / p.beta0;
  } else if (m.kind == 1) {
    p.x *= 1.001;
  } else {
    const double ptau = 0.999 * p.ptau;
    p.delta = ft_test::delta_from_ptau(ptau, p.beta0);
    p.ptau = ptau;
  }
}
}  // namespace

TEST_CASE("element_testing: symplecticity check accepts symplectic and rejects other maps") {
  const Case c = cases()[3];
  TestMap good{0};
  const Mat6 mg = jacobian(good, TestMap_track, canonical(c), c.beta0);
  CHECK(symplecticity_error(mg) < kSymplecticTolerance);
  CHECK(std::fabs(mg[0][0] - std::cos(0.3)) < 1e-11);
  CHECK(std::fabs(mg[1][0] + std::sin(0.3)) < 1e-11);
  CHECK(std::fabs(mg[4][5] - 0.7) < 1e-11);
  CHECK(std::fabs(mg[4][4] - 1.0) < 1e-11);
  for (int kind : {1, 2}) {
    CAPTURE(kind);
    TestMap bad{kind};
    CHECK(symplecticity_error(jacobian(bad, TestMap_track, canonical(c), c.beta0)) > 1e-4);
  }
}

}  // namespace test_element_testing
