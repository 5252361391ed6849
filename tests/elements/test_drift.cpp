// Drift (elements/drift.h): expanded drift formula, symplecticity, reversibility.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "drift.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_drift.
namespace test_drift {

using namespace ft_test;

TEST_CASE("Drift: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_Drift();
  CHECK(d.flags == FT_THICK);
  REQUIRE(d.length_field >= 0);
  CHECK(std::string(d.fields[d.length_field].name) == "length");
}

TEST_CASE("Drift: expanded-drift formula") {
  for (const double length : {1.3, -0.4}) {
    for (const Case& c : cases()) {
      CAPTURE(c.delta);
      CAPTURE(c.beta0);
      Drift e{};
      e.length = length;
      ft::ParticleView p = particle(c);
      Drift_track(e, p);
      // x' = px / (1 + delta); zeta += L (1 - (1 + (x'^2 + y'^2)/2) beta0 / beta).
      const double xp = c.px / (1.0 + c.delta), yp = c.py / (1.0 + c.delta);
      const double rvv = rvv_from(c.delta, ptau_from_delta(c.delta, c.beta0), c.beta0);
      CHECK(close(p.x, c.x + length * xp, 1e-15, 1e-19));
      CHECK(close(p.y, c.y + length * yp, 1e-15, 1e-19));
      CHECK(close(p.zeta, c.zeta + length * (1.0 - (1.0 + 0.5 * (xp * xp + yp * yp)) / rvv), 1e-14, 4e-16 * std::fabs(length)));
      CHECK(p.px == c.px);
      CHECK(p.py == c.py);
      CHECK(p.delta == c.delta);
    }
  }
}

TEST_CASE("Drift: symplectic") {
  Drift e{};
  e.length = 2.5;
  for (const Case& c : cases()) {
    CAPTURE(c.beta0);
    CHECK(symplecticity_error(jacobian(e, Drift_track, canonical(c), c.beta0)) < kSymplecticTolerance);
  }
}

TEST_CASE("Drift: L then -L returns to the start") {
  Drift fwd{}, bwd{};
  fwd.length = 3.7;
  bwd.length = -3.7;
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    Drift_track(fwd, p);
    CHECK(std::fabs(p.x - c.x) > 1e-6);  // it moved
    Drift_track(bwd, p);
    CHECK(close(p.x, c.x, 1e-14, 1e-17));
    CHECK(close(p.y, c.y, 1e-14, 1e-17));
    CHECK(close(p.zeta, c.zeta, 1e-14, 1e-17));
  }
}

}  // namespace test_drift
