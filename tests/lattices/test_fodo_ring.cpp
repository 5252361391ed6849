// The bundled FODO ring (lattices/fodo_ring.json: 16 cells of thin quadrupoles k1l = +-0.18 1/m,
// L = 5 m apart, start at the centre of a QF) against thin-lens optics written out here:
//   sin(mu / 2) = L k1l / 2 per cell,  Q = 16 mu / 2 pi,
//   beta_max / min = L_cell (1 +- sin(mu / 2)) / sin(mu) at the QF / QD centre, L_cell = 2 L
// (Wolski 2014, sec. 2.4; K. Wille, "The Physics of Particle Accelerators", sec. 3.13).
// On momentum the expanded drift is x += L px / (1 + delta) with delta = 0 exactly and rvv = 1,
// so the transverse one-turn matrix is the thin-lens product exactly (to rounding).
#include <doctest/doctest.h>

#include <array>
#include <cmath>

#include "fusetrack/optics.h"
#include "support/thin_lens.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_fodo_ring.
namespace test_fodo_ring {

using namespace ft;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kL = 5.0;       // distance between quadrupole centres [m]
constexpr double kK1l = 0.18;    // full quadrupole strength [1/m]
constexpr int kCells = 16;
constexpr double kMass = 938272088.16, kP0c = 2e9;  // lattices/fodo_ring.json reference [eV]

using ft::test::M2;
using ft::test::drift;
using ft::test::kick;
using ft::test::mul;

/// One turn of the thin-lens ring in one plane (sign +1: x, -1: y). The first element acts first.
M2 ring_matrix(double sign) {
  const M2 cell = mul(kick(sign * kK1l / 2), mul(drift(kL), mul(kick(-sign * kK1l), mul(drift(kL), kick(sign * kK1l / 2)))));
  M2 m{{{1.0, 0.0}, {0.0, 1.0}}};
  for (int c = 0; c < kCells; ++c) m = mul(cell, m);
  return m;
}

double mu_cell() { return 2.0 * std::asin(kL * kK1l / 2.0); }
double q_thin_lens() {
  const double q = kCells * mu_cell() / (2.0 * kPi);
  return q - std::floor(q);
}

OpticsOptions options() { return OpticsOptions{}; }

}  // namespace

TEST_CASE("FODO ring: the 4D one-turn matrix is the thin-lens product, exactly on momentum") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  std::string reason;
  const OneTurnMap map = compute_one_turn_map(lattice, options(), &reason);
  CAPTURE(reason);
  CHECK_FALSE(map.six_d);  // no RF: the longitudinal motion is not bounded
  for (int k = 0; k < 6; ++k) CHECK(map.closed_orbit[static_cast<size_t>(k)] == 0.0);
  const M2 mx = ring_matrix(+1.0), my = ring_matrix(-1.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK(map.matrix[i][j] == doctest::Approx(mx[i][j]).epsilon(1e-12));
      CHECK(map.matrix[2 + i][2 + j] == doctest::Approx(my[i][j]).epsilon(1e-12));
      CHECK(std::fabs(map.matrix[i][2 + j]) <= 1e-15);  // no x-y coupling
      CHECK(std::fabs(map.matrix[2 + i][j]) <= 1e-15);
    }
  // No dispersion (no bends) and no dependence of x, y on zeta or pzeta on momentum.
  for (int i = 0; i < 4; ++i) {
    CHECK(std::fabs(map.matrix[i][4]) <= 1e-15);
    CHECK(std::fabs(map.matrix[i][5]) <= 1e-12);
  }
  // Longitudinal: zeta advances by C / gamma0^2 per unit pzeta (expanded drift,
  // d(1/rvv)/d pzeta = -1/gamma0^2), pzeta is constant.
  const double gamma0 = std::sqrt(kP0c * kP0c + kMass * kMass) / kMass;
  const double circumference = kCells * 2.0 * kL;
  CHECK(map.matrix[4][5] == doctest::Approx(circumference / (gamma0 * gamma0)).epsilon(1e-8));
  CHECK(map.matrix[4][4] == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(map.matrix[5][5] == 1.0);
  for (int k = 0; k < 5; ++k) CHECK(map.matrix[5][k] == 0.0);
}

TEST_CASE("FODO ring: tunes from the one-turn matrix equal the thin-lens formula") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  const LinearOptics o = compute_linear_optics(lattice, options());
  const double q = q_thin_lens();  // 0.377216...
  CAPTURE(q);
  CHECK(std::fabs(o.qx - q) < 1e-12);
  CHECK(std::fabs(o.qy - q) < 1e-12);
  CHECK(std::isnan(o.qs));
  CHECK_FALSE(o.six_d);
  // Q and not 1 - Q: the thin-lens formula gives the phase advance itself (M12 > 0).
  CHECK(o.qx < 0.5);
}

TEST_CASE("FODO ring: beta and alpha at the QF centre equal the thin-lens values") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  const LinearOptics o = compute_linear_optics(lattice, options());
  const double mu = mu_cell(), l_cell = 2.0 * kL;
  const double beta_max = l_cell * (1.0 + std::sin(mu / 2.0)) / std::sin(mu);
  const double beta_min = l_cell * (1.0 - std::sin(mu / 2.0)) / std::sin(mu);
  CAPTURE(beta_max);
  CAPTURE(beta_min);
  CHECK(o.beta_x == doctest::Approx(beta_max).epsilon(1e-11));
  CHECK(o.beta_y == doctest::Approx(beta_min).epsilon(1e-11));
  CHECK(std::fabs(o.alpha_x) < 1e-12);  // symmetry point
  CHECK(std::fabs(o.alpha_y) < 1e-12);
  CHECK(o.gamma_x == doctest::Approx(1.0 / beta_max).epsilon(1e-11));
  CHECK(o.gamma_y == doctest::Approx(1.0 / beta_min).epsilon(1e-11));
  // No bends: no dispersion.
  CHECK(std::fabs(o.dx) < 1e-12);
  CHECK(std::fabs(o.dpx) < 1e-12);
  CHECK(std::fabs(o.dy) < 1e-12);
  // Beam size for eps_n = 2.5 um: sigma = sqrt(beta eps_n / (beta0 gamma0)), beta0 gamma0 = p0c / mass0.
  const BeamSizes s = beam_sizes(o, 2.5e-6, 1.0e-6);
  CHECK(s.sigma_x == doctest::Approx(std::sqrt(beta_max * 2.5e-6 / (kP0c / kMass))).epsilon(1e-11));
  CHECK(s.sigma_y == doctest::Approx(std::sqrt(beta_min * 1.0e-6 / (kP0c / kMass))).epsilon(1e-11));
  CHECK(s.sigma_px == doctest::Approx(std::sqrt(2.5e-6 / (kP0c / kMass) / beta_max)).epsilon(1e-11));
}

TEST_CASE("FODO ring: the one-turn matrix is symplectic, M^T J M = J") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  const OneTurnMap map = compute_one_turn_map(lattice, options());
  double worst = 0.0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      // (M^T J M)_ij = sum_k M_{2k,i} M_{2k+1,j} - M_{2k+1,i} M_{2k,j}
      double s = 0.0;
      for (int k = 0; k < 3; ++k) s += map.matrix[2 * k][i] * map.matrix[2 * k + 1][j] - map.matrix[2 * k + 1][i] * map.matrix[2 * k][j];
      const double jij = (j == i + 1 && i % 2 == 0) ? 1.0 : (i == j + 1 && j % 2 == 0) ? -1.0 : 0.0;
      worst = std::max(worst, std::fabs(s - jij));
    }
  CAPTURE(worst);
  CHECK(worst < 1e-9);
}

TEST_CASE("FODO ring: the tune from 1024 turns of tracking agrees with the matrix tune to < 1e-6") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  const LinearOptics o = compute_linear_optics(lattice, options());
  const TrackedTunes t = tunes_by_tracking(lattice, o, 1024, options());
  CAPTURE(t.qx - o.qx);
  CAPTURE(t.qy - o.qy);
  CHECK(t.turns == 1024);
  CHECK(std::fabs(t.qx - o.qx) < 1e-6);
  CHECK(std::fabs(t.qy - o.qy) < 1e-6);
  CHECK(std::fabs(t.qx - q_thin_lens()) < 1e-6);
  CHECK(std::isnan(t.qs));
}

}  // namespace test_fodo_ring
