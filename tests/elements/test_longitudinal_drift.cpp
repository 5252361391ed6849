// LongitudinalDrift (elements/longitudinal_drift.h): the arc's zeta slippage against the travel time of
// an off-momentum particle, its first-order slip factor eta = alpha_c - 1/gamma^2 (S.Y. Lee, sec. 2.II),
// and the Drift's zeta change of an on-axis particle when alpha_c = 0.
#include <doctest/doctest.h>

#include <cmath>

#include "drift.h"
#include "longitudinal_drift.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_longitudinal_drift.
namespace test_longitudinal_drift {

using namespace ft_test;

TEST_CASE("LongitudinalDrift: zeta += L - beta0 c t over the path L (1 + alpha_c delta + alpha_2 delta^2)") {
  for (const Case& c : cases()) {
    CAPTURE(c.delta);
    CAPTURE(c.beta0);
    LongitudinalDrift e{};
    e.length = 250.0;
    e.momentum_compaction = 3.1e-3;
    e.momentum_compaction_2 = -2e-3;
    ft::ParticleView p = particle(c);
    LongitudinalDrift_track(e, p);
    // Travel time of the path at speed beta c: beta0 c t = path * beta0 / beta (independent formula for beta).
    const double gamma0 = 1.0 / std::sqrt(1.0 - c.beta0 * c.beta0);
    const double p_over_m = (1.0 + c.delta) * c.beta0 * gamma0;  // P / (m c)
    const double beta = p_over_m / std::sqrt(1.0 + p_over_m * p_over_m);
    const double path = e.length * (1.0 + e.momentum_compaction * c.delta + e.momentum_compaction_2 * c.delta * c.delta);
    CHECK(close(p.zeta, c.zeta + e.length - path * c.beta0 / beta, 1e-12, 1e-12));
    CHECK(p.x == c.x);
    CHECK(p.px == c.px);
    CHECK(p.delta == c.delta);
  }
}

TEST_CASE("LongitudinalDrift: slip factor eta = alpha_c - 1/gamma0^2 for small delta, and the Drift at alpha_c = 0") {
  const double beta0 = 0.9, gamma0 = 1.0 / std::sqrt(1.0 - beta0 * beta0), length = 100.0, alpha_c = 0.02;
  LongitudinalDrift e{};
  e.length = length;
  e.momentum_compaction = alpha_c;
  const double delta = 1e-7;
  ft::ParticleView p = ft::make_particle(0, 0, 0, 0, 0, delta, beta0);
  LongitudinalDrift_track(e, p);
  // zeta changes by -eta L delta to first order.
  CHECK(p.zeta / delta == doctest::Approx(-(alpha_c - 1.0 / (gamma0 * gamma0)) * length).epsilon(1e-5));
  // alpha_c = 0 and px = py = 0: the Drift's zeta change.
  e.momentum_compaction = 0.0;
  for (const double d : {-3e-3, 0.0, 2e-3}) {
    ft::ParticleView a = ft::make_particle(0, 0, 0, 0, 0.1, d, beta0), b = a;
    LongitudinalDrift_track(e, a);
    Drift drift{};
    drift.length = length;
    Drift_track(drift, b);
    CHECK(close(a.zeta, b.zeta, 1e-15, 1e-16));
  }
}

}  // namespace test_longitudinal_drift
