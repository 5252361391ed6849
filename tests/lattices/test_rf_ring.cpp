// The bundled non-linear ring with RF (lattices/sextupole_rf_ring.json): 16 cells of thin
// quadrupoles and sextupoles, no bends, one thin cavity of 1 MV at harmonic h = 8 and lag 0
// (below transition), at the end of the ring.
//
// Longitudinal expectations, written out here:
// - no bends: alpha_c = 0, so the slip factor is eta = -1 / gamma0^2 (zeta = s - beta0 c t,
//   dzeta = -eta C delta per turn);
// - smooth approximation (Wolski 2014, sec. 5.1; MAD-X physics guide):
//     Qs = sqrt(h |q0| V |eta| cos(phi_s) / (2 pi beta0^2 E0)),  phi_s = 0;
// - the ring is really a drift of C / gamma0^2 in (zeta, pzeta) followed by one kick
//   pzeta += (|q0| V / E0) sin(-k zeta) / beta0^2 with k = 2 pi h / C: its linear one-turn matrix
//   [[1, C|eta|], [-K, 1 - K C |eta|]], K = |q0| V k / (E0 beta0^2), has
//     cos(2 pi Qs) = 1 - K C |eta| / 2 = 1 - pi h |q0| V |eta| / (beta0^2 E0),
//   which differs from the smooth formula (2 pi Qs)^2 = K C |eta| by the factor
//   (2 pi Qs / 2) / sin(2 pi Qs / 2) ~ 1 + (2 pi Qs)^2 / 24 ~ 1 + 2.1e-4 here: the discrete kick
//   map vs the continuous focusing of the smooth model.
#include <doctest/doctest.h>

#include <array>
#include <cmath>

#include "fusetrack/optics.h"
#include "support/thin_lens.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_rf_ring.
namespace test_rf_ring {

using namespace ft;

namespace {

constexpr double kPi = 3.14159265358979323846;
// lattices/sextupole_rf_ring.json
constexpr double kMass = 938272088.16, kP0c = 2e9, kQ0 = 1.0;  // [eV], [eV], [e]
constexpr double kVoltage = 1e6, kHarmonic = 8.0;              // [V], [1]
constexpr int kCells = 16;
constexpr double kCellLength = 0.1 + 4.9 + 0.1 + 4.9 + 0.1;  // ds d ds d ds [m]

struct Reference {
  double e0, gamma0, beta0, circumference, eta;
};
Reference reference() {
  Reference r;
  r.e0 = std::sqrt(kP0c * kP0c + kMass * kMass);
  r.gamma0 = r.e0 / kMass;
  r.beta0 = kP0c / r.e0;
  r.circumference = kCells * kCellLength;
  r.eta = -1.0 / (r.gamma0 * r.gamma0);
  return r;
}

double qs_smooth(const Reference& r) {
  return std::sqrt(kHarmonic * kQ0 * kVoltage * std::fabs(r.eta) / (2.0 * kPi * r.beta0 * r.beta0 * r.e0));
}

double qs_one_kick(const Reference& r) {
  const double c = 1.0 - kPi * kHarmonic * kQ0 * kVoltage * std::fabs(r.eta) / (r.beta0 * r.beta0 * r.e0);
  return std::acos(c) / (2.0 * kPi);
}

using ft::test::M2;
using ft::test::drift;
using ft::test::kick;
using ft::test::mul;

/// Transverse thin-lens tune of the ring (the sextupoles act only off the zero closed orbit):
/// cell qf/2, 0.1, 4.9, qd, 0.1, 4.9, 0.1, qf/2; sign +1: x, -1: y.
double transverse_tune(double sign) {
  const double kf = sign * 0.18, kd = -sign * 0.18;
  M2 cell = kick(kf / 2);
  for (const M2& m : {drift(0.1), drift(4.9), kick(kd), drift(0.1), drift(4.9), drift(0.1), kick(kf / 2)})
    cell = mul(m, cell);
  M2 ring{{{1.0, 0.0}, {0.0, 1.0}}};
  for (int c = 0; c < kCells; ++c) ring = mul(cell, ring);
  const double cos_mu = 0.5 * (ring[0][0] + ring[1][1]);
  double q = std::atan2(std::copysign(std::sqrt(1.0 - cos_mu * cos_mu), ring[0][1]), cos_mu) / (2.0 * kPi);
  return q < 0.0 ? q + 1.0 : q;
}

}  // namespace

TEST_CASE("RF ring: the optics are 6D and the slip factor is -1/gamma0^2 (no bends)") {
  const Lattice lattice = test::bundled_lattice("sextupole_rf_ring.json");
  const Reference r = reference();
  REQUIRE(lattice.circumference() == doctest::Approx(r.circumference).epsilon(1e-14));
  const LinearOptics o = compute_linear_optics(lattice, OpticsOptions{});
  CAPTURE(o.mode_reason);
  CHECK(o.six_d);
  CAPTURE(o.eta);
  CAPTURE(r.eta);
  CHECK(o.eta == doctest::Approx(r.eta).epsilon(1e-9));
  CHECK(std::fabs(o.alpha_c) < 1e-10);
  CHECK(std::isnan(o.gamma_tr));  // no transition
  // lag 0 below transition: the synchronous particle sits at zeta = 0, delta = 0.
  for (int k = 0; k < 6; ++k) CHECK(std::fabs(o.closed_orbit[static_cast<size_t>(k)]) < 1e-15);
  // The 4D tunes: the thin-lens product (the sextupoles do nothing on the zero orbit; they
  // enter the finite differences at O(h^2 k2l^2 beta^3) ~ 1e-11 with the default steps).
  CHECK(std::fabs(o.qx - transverse_tune(+1.0)) < 1e-9);
  CHECK(std::fabs(o.qy - transverse_tune(-1.0)) < 1e-9);
}

TEST_CASE("RF ring: the 6x6 matrix is the drift-kick map in (zeta, pzeta) and symplectic") {
  const Lattice lattice = test::bundled_lattice("sextupole_rf_ring.json");
  const Reference r = reference();
  const OneTurnMap map = compute_one_turn_map(lattice, OpticsOptions{});
  REQUIRE(map.six_d);
  const double k_rf = 2.0 * kPi * kHarmonic / r.circumference;
  const double kick_slope = kQ0 * kVoltage / r.e0 * k_rf / (r.beta0 * r.beta0);  // K = -d pzeta / d zeta
  const double drift = r.circumference * std::fabs(r.eta);                      // C |eta| = d zeta / d pzeta
  CHECK(map.matrix[4][5] == doctest::Approx(drift).epsilon(1e-8));
  CHECK(map.matrix[5][4] == doctest::Approx(-kick_slope).epsilon(1e-6));
  CHECK(map.matrix[5][5] == doctest::Approx(1.0 - kick_slope * drift).epsilon(1e-9));
  CHECK(map.matrix[4][4] == doctest::Approx(1.0).epsilon(1e-12));
  double worst = 0.0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double s = 0.0;
      for (int k = 0; k < 3; ++k)
        s += map.matrix[2 * k][i] * map.matrix[2 * k + 1][j] - map.matrix[2 * k + 1][i] * map.matrix[2 * k][j];
      const double jij = (j == i + 1 && i % 2 == 0) ? 1.0 : (i == j + 1 && j % 2 == 0) ? -1.0 : 0.0;
      worst = std::max(worst, std::fabs(s - jij));
    }
  CAPTURE(worst);
  CHECK(worst < 1e-9);
}

TEST_CASE("RF ring: synchrotron tune from the matrix and from tracking vs the analytic formulas") {
  const Lattice lattice = test::bundled_lattice("sextupole_rf_ring.json");
  const Reference r = reference();
  const LinearOptics o = compute_linear_optics(lattice, OpticsOptions{});
  REQUIRE(o.six_d);
  const TrackedTunes t = tunes_by_tracking(lattice, o, 1024, OpticsOptions{});
  const double smooth = qs_smooth(r), exact = qs_one_kick(r);  // 0.011263, 0.011265
  CAPTURE(smooth);
  CAPTURE(exact);
  CAPTURE(o.qs);
  CAPTURE(t.qs);
  // Within 1% of the smooth approximation ...
  CHECK(std::fabs(o.qs / smooth - 1.0) < 0.01);
  CHECK(std::fabs(t.qs / smooth - 1.0) < 0.01);
  // ... which is low by (2 pi Qs)^2 / 24 relative to the discrete one-kick map ...
  const double theta = 2.0 * kPi * exact;
  CHECK(std::fabs(exact / smooth - 1.0 - theta * theta / 24.0) < 1e-7);
  // ... and the one-kick map is what the matrix and tracking reproduce.
  CHECK(std::fabs(o.qs / exact - 1.0) < 1e-7);
  CHECK(std::fabs(t.qs / exact - 1.0) < 1e-6);
  // The transverse tunes from tracking (6D, with sextupoles at ~4e-8 m amplitude).
  CHECK(std::fabs(t.qx - o.qx) < 1e-9);
  CHECK(std::fabs(t.qy - o.qy) < 1e-9);
}

TEST_CASE("RF ring: --4d freezes delta: no synchrotron tune, same transverse optics") {
  const Lattice lattice = test::bundled_lattice("sextupole_rf_ring.json");
  OpticsOptions forced;
  forced.force_4d = true;
  const LinearOptics o4 = compute_linear_optics(lattice, forced);
  const LinearOptics o6 = compute_linear_optics(lattice, OpticsOptions{});
  CHECK_FALSE(o4.six_d);
  CHECK(std::isnan(o4.qs));
  CHECK(o4.map.matrix[5][4] == 0.0);  // the cavity's kick is undone
  CHECK(o4.map.matrix[5][5] == 1.0);
  CHECK(std::fabs(o4.qx - o6.qx) < 1e-12);
  CHECK(std::fabs(o4.qy - o6.qy) < 1e-12);
  CHECK(o4.eta == doctest::Approx(reference().eta).epsilon(1e-9));
  // Tracking with delta frozen (the turn is split at the cavity) gives the same tunes.
  const TrackedTunes t = tunes_by_tracking(lattice, o4, 512, forced);
  CHECK(std::fabs(t.qx - o4.qx) < 1e-9);
  CHECK(std::fabs(t.qy - o4.qy) < 1e-9);
}

}  // namespace test_rf_ring
