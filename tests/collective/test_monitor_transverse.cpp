// Transverse moments of the bunch monitor: betatron emittances with the dispersive part removed,
// against a particle set whose emittance is known by construction. Particles sit on one betatron
// ellipse at equally spaced phases, x_b = sqrt(2 J beta) cos(phi), px_b = -sqrt(2 J / beta)
// (sin(phi) + alpha cos(phi)), so that <x_b^2> = J beta, <x_b px_b> = -J alpha, <px_b^2> = J gamma and
// the rms emittance is J; delta alternates +-sigma_delta (uncorrelated with the phases), and the
// dispersion adds D delta to x and D' delta to px.
#include <doctest/doctest.h>

#include <cmath>

#include "fusetrack/monitor.h"
#include "fusetrack/particles.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_monitor_transverse.
namespace test_monitor_transverse {

TEST_CASE("bunch monitor: transverse emittances with the dispersion removed") {
  const size_t n = 1000;
  const double pi = 3.14159265358979323846;
  const double jx = 2e-6, jy = 5e-7, bx = 8.0, ax = -1.2, by = 3.0, ay = 0.7;
  const double dx = 2.5, dpx = 0.3, sigma_delta = 1e-3, beta0 = 0.8;
  ft::Particles p(n, beta0);
  for (size_t k = 0; k < n; ++k) {
    const double phi = 2.0 * pi * static_cast<double>(k) / static_cast<double>(n);
    const double psi = phi + 0.4;  // y: another phase origin
    const double delta = (k % 2 == 0 ? 1.0 : -1.0) * sigma_delta;
    const double x = std::sqrt(2 * jx * bx) * std::cos(phi), px = -std::sqrt(2 * jx / bx) * (std::sin(phi) + ax * std::cos(phi));
    const double y = std::sqrt(2 * jy * by) * std::cos(psi), py = -std::sqrt(2 * jy / by) * (std::sin(psi) + ay * std::cos(psi));
    p.set(k, 1e-3 + x + dx * delta, px + dpx * delta, -2e-4 + y, py, 0.0, delta);
  }
  const ft::BunchMoments m = ft::bunch_moments(p, 1e9);
  CHECK(m.alive == static_cast<int64_t>(n));
  CHECK(m.mean_x == doctest::Approx(1e-3).epsilon(1e-12));
  CHECK(m.mean_y == doctest::Approx(-2e-4).epsilon(1e-12));
  CHECK(m.emittance_x == doctest::Approx(jx).epsilon(1e-10));
  CHECK(m.emittance_y == doctest::Approx(jy).epsilon(1e-10));
  // rms_x includes the dispersive part: sqrt(J beta + D^2 sigma_delta^2).
  CHECK(m.rms_x == doctest::Approx(std::sqrt(jx * bx + dx * dx * sigma_delta * sigma_delta)).epsilon(1e-10));
  CHECK(m.rms_y == doctest::Approx(std::sqrt(jy * by)).epsilon(1e-10));
  const double beta_gamma = beta0 / std::sqrt(1.0 - beta0 * beta0);
  CHECK(m.emittance_nx == doctest::Approx(jx * beta_gamma).epsilon(1e-10));
  CHECK(m.emittance_ny == doctest::Approx(jy * beta_gamma).epsilon(1e-10));

  // A lost particle does not count.
  p.state[0] = 0;
  CHECK(ft::bunch_moments(p, 1e9).alive == static_cast<int64_t>(n - 1));
}

}  // namespace test_monitor_transverse
