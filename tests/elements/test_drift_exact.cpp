// DriftExact (elements/drift_exact.h): exact-drift formula, symplecticity, reversibility.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "drift_exact.h"
#include "drift.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_drift_exact.
namespace test_drift_exact {

using namespace ft_test;

TEST_CASE("DriftExact: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_DriftExact();
  CHECK(d.flags == FT_THICK);
  REQUIRE(d.length_field >= 0);
  CHECK(std::string(d.fields[d.length_field].name) == "length");
  CHECK((d.prepare == nullptr));
}

TEST_CASE("DriftExact: exact-drift formula") {
  for (const double length : {1.3, -0.4}) {
    for (const Case& c : cases()) {
      CAPTURE(c.delta);
      CAPTURE(c.beta0);
      DriftExact e{};
      e.length = length;
      ft::ParticleView p = particle(c);
      DriftExact_track(e, p);
      // Straight line at angles px/pz, py/pz; path length L (1 + delta) / pz at speed beta:
      // zeta += L - path * beta0 / beta.
      const double opd = 1.0 + c.delta;
      const double pz = std::sqrt(opd * opd - c.px * c.px - c.py * c.py);
      const double path = length * opd / pz;
      const double rvv = rvv_from(c.delta, ptau_from_delta(c.delta, c.beta0), c.beta0);
      CHECK(close(p.x, c.x + length * c.px / pz, 1e-15, 1e-19));
      CHECK(close(p.y, c.y + length * c.py / pz, 1e-15, 1e-19));
      CHECK(close(p.zeta, c.zeta + length - path / rvv, 1e-14, 4e-16 * std::fabs(length)));
      CHECK(p.px == c.px);
      CHECK(p.py == c.py);
    }
  }
}

TEST_CASE("DriftExact: differs from the expanded drift at large angles, agrees at small ones") {
  DriftExact ex{};
  Drift ap{};
  ex.length = ap.length = 1.0;
  ft::ParticleView a = particle(0.0, 0.1, 0.0, 0.0, 0.0, 0.0, kBetaUltraRelativistic);
  ft::ParticleView b = a;
  DriftExact_track(ex, a);
  Drift_track(ap, b);
  CHECK(std::fabs(a.x - b.x) > 1e-4);  // 0.1/sqrt(0.99) - 0.1 ~ 5e-4
  ft::ParticleView s = particle(0.0, 1e-6, 0.0, 0.0, 0.0, 0.0, kBetaUltraRelativistic);
  ft::ParticleView t = s;
  DriftExact_track(ex, s);
  Drift_track(ap, t);
  CHECK(close(s.x, t.x, 1e-11));
}

TEST_CASE("DriftExact: symplectic") {
  DriftExact e{};
  e.length = 2.5;
  for (const Case& c : cases()) {
    CAPTURE(c.beta0);
    CHECK(symplecticity_error(jacobian(e, DriftExact_track, canonical(c), c.beta0)) < kSymplecticTolerance);
  }
}

TEST_CASE("DriftExact: L then -L returns to the start") {
  DriftExact fwd{}, bwd{};
  fwd.length = 3.7;
  bwd.length = -3.7;
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    DriftExact_track(fwd, p);
    CHECK(std::fabs(p.x - c.x) > 1e-6);
    DriftExact_track(bwd, p);
    CHECK(close(p.x, c.x, 1e-14, 1e-17));
    CHECK(close(p.y, c.y, 1e-14, 1e-17));
    CHECK(close(p.zeta, c.zeta, 1e-14, 1e-17));
  }
}

}  // namespace test_drift_exact
