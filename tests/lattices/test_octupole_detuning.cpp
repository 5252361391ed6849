// Detuning with amplitude from a thin octupole in the lattice: tunes from tracking (the
// footprint's NAFF, ft::tune_footprint) against the first-order formula.
//
// A thin Multipole with knl[3] = K3L [m^-3] (MAD-X convention: Delta px + i Delta py ... with
// Delta px = -Re[K3L (x + i y)^3] / 3!, Delta py = +Im[K3L (x + i y)^3] / 3!) is the kick of
//   H = (K3L / 24) (x^4 - 6 x^2 y^2 + y^4)      (Delta px = -dH/dx, Delta py = -dH/dy).
// With x = sqrt(2 Jx beta_x) cos(phi_x) (y alike), averaging over the phases (<cos^4> = 3/8,
// <cos^2 cos^2> = 1/4): <H> = (K3L / 24) (3/2 beta_x^2 Jx^2 - 6 beta_x beta_y Jx Jy + 3/2 beta_y^2 Jy^2),
// and dQ = (1 / 2 pi) d<H>/dJ per turn, so
//   dQx = a_xx Jx + a_xy Jy,  dQy = a_xy Jx + a_yy Jy,
//   a_xx = K3L beta_x^2 / (16 pi),  a_xy = -K3L beta_x beta_y / (8 pi),  a_yy = K3L beta_y^2 / (16 pi)
// (first order in K3L; e.g. J. Gareyte, J.-P. Koutchouk, F. Ruggiero, LHC Project Report 136 (1997),
// S. Y. Lee, "Accelerator Physics", sec. 2.IV). J = (gamma x^2 + 2 alpha x px + beta px^2) / 2 [m].
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/optics.h"
#include "support/lattice_builders.h"
#include "support/thin_lens.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_octupole_detuning.
namespace test_octupole_detuning {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kCell = 10.0;                 // [m] thin-lens FODO cell
constexpr double kF = 0.26, kD = -0.24;        // integrated k1 [1/m] of QF (two halves) and QD
constexpr int kCells = 6;

// The ring: the octupole at the start (at the centre of QF), then 6 cells qf/2 d qd d qf/2, no RF (4D).
ft::Lattice octupole_ring(double k3l) {
  nlohmann::ordered_json doc = {
      {"fusetrack_lattice", 1},
      {"reference", {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", 2e9}}},
      {"elements",
       {{"oct", {{"type", "Multipole"}, {"knl", {0.0, 0.0, 0.0, k3l}}}},
        {"qf_half", {{"type", "Multipole"}, {"knl", {0.0, kF / 2}}}},
        {"qd", {{"type", "Multipole"}, {"knl", {0.0, kD}}}},
        {"d", {{"type", "Drift"}, {"length", kCell / 2}}}}},
      {"lines", {{"cell", {"qf_half", "d", "qd", "d", "qf_half"}}}},
      {"sequence", {"oct", {{"line", "cell"}, {"repeat", kCells}}}}};
  return ft::lattice_from_json(doc, "octupole_ring", ft::test::builtin_registry());
}

struct ThinOptics {
  double beta, tune;  // beta at the start [m], fractional tune
};

// Independent of the library's optics: the 2x2 thin-lens matrices (plane +1: x, -1: y).
ThinOptics thin_optics(int plane) {
  using namespace ft::test;
  const M2 half = kick(plane * kF / 2), d = drift(kCell / 2);
  const M2 cell = mul(half, mul(d, mul(kick(plane * kD), mul(d, half))));
  const double mu = std::acos(0.5 * (cell[0][0] + cell[1][1]));  // cell phase in (0, pi): stable FODO
  const double beta = cell[0][1] / std::sin(mu);
  const double q = kCells * mu / (2 * kPi);
  return {beta, q - std::floor(q)};
}

// Least squares of dq_i = a J1_i + b J2_i (no constant term).
std::pair<double, double> fit_two(const std::vector<double>& j1, const std::vector<double>& j2,
                                  const std::vector<double>& dq) {
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (size_t i = 0; i < dq.size(); ++i) {
    s11 += j1[i] * j1[i];
    s12 += j1[i] * j2[i];
    s22 += j2[i] * j2[i];
    r1 += j1[i] * dq[i];
    r2 += j2[i] * dq[i];
  }
  const double det = s11 * s22 - s12 * s12;
  return {(r1 * s22 - r2 * s12) / det, (s11 * r2 - s12 * r1) / det};
}

}  // namespace

TEST_CASE("Octupole detuning with amplitude: a_xx, a_xy, a_yy from tracked tunes against K3L beta^2 / (16 pi)") {
  const ThinOptics ox = thin_optics(+1), oy = thin_optics(-1);
  REQUIRE(ox.tune > 0.3);  // 0.385 / 0.189: away from the octupole's resonances 4Qx, 4Qy, 2Qx +- 2Qy
  std::vector<std::array<double, 4>> ratios;  // fitted / formula per sign of K3L
  for (const double k3l : {400.0, -400.0}) {
    CAPTURE(k3l);
    const ft::Lattice ring = octupole_ring(k3l);
    const ft::LinearOptics optics = ft::compute_linear_optics(ring);
    // The linear optics of the ring (octupole off at zero amplitude) as the thin-lens matrices give.
    CHECK(std::fabs(optics.qx - ox.tune) < 1e-10);
    CHECK(std::fabs(optics.qy - oy.tune) < 1e-10);
    CHECK(std::fabs(optics.beta_x / ox.beta - 1) < 1e-10);
    // Actions up to J = 9 eps / 2 = 1e-6 m (x = 5.7 mm at beta_x 16.1 m): |dQ| <= 2.4e-3.
    const double bg = ring.reference().beta0() * ring.reference().gamma0();
    const double eps = 2e-6 / 9.0;  // geometric [m]
    ft::FootprintOptions fo;
    fo.emittance_nx = eps * bg;
    fo.emittance_ny = eps * bg;
    fo.max_sigma = 3.0;
    fo.min_sigma = 0.05;
    fo.amplitudes = 6;
    fo.angles = 5;
    fo.turns = 2048;
    auto backend = ft::make_cpu_backend(ring);
    const ft::TuneFootprint fp = ft::tune_footprint(ring, optics, *backend, fo);
    std::vector<double> jx, jy, dqx, dqy;
    for (size_t i = 0; i < fp.qx.size(); ++i) {
      REQUIRE(fp.lost_turn[i] == -1);
      // x = a_x sigma_x on the ellipse's axis: J = a_x^2 eps / 2, whatever beta and alpha.
      jx.push_back(fp.amplitude_x[i] * fp.amplitude_x[i] * eps / 2);
      jy.push_back(fp.amplitude_y[i] * fp.amplitude_y[i] * eps / 2);
      dqx.push_back(fp.qx[i] - ox.tune);
      dqy.push_back(fp.qy[i] - oy.tune);
    }
    const auto [a_xx, a_xy] = fit_two(jx, jy, dqx);
    const auto [a_yx, a_yy] = fit_two(jx, jy, dqy);
    const double e_xx = k3l * ox.beta * ox.beta / (16 * kPi);
    const double e_xy = -k3l * ox.beta * oy.beta / (8 * kPi);
    const double e_yy = k3l * oy.beta * oy.beta / (16 * kPi);
    MESSAGE(fmt::format("K3L {:+g}: a_xx {:.5e} (formula {:.5e}), a_xy {:.5e} / a_yx {:.5e} ({:.5e}), a_yy {:.5e} ({:.5e}) [1/m]",
                        k3l, a_xx, e_xx, a_xy, a_yx, e_xy, a_yy, e_yy));
    CHECK(std::fabs(a_xx / e_xx - 1) < 0.03);
    CHECK(std::fabs(a_xy / e_xy - 1) < 0.03);
    CHECK(std::fabs(a_yx / e_xy - 1) < 0.03);
    CHECK(std::fabs(a_yy / e_yy - 1) < 0.03);
    ratios.push_back({a_xx / e_xx, a_xy / e_xy, a_yx / e_xy, a_yy / e_yy});
  }
  // The terms of second order in K3L (0.5 % here) change sign with K3L: the mean of the two signs
  // isolates the first-order coefficient.
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    CHECK(std::fabs(0.5 * (ratios[0][k] + ratios[1][k]) - 1) < 2e-3);
  }
}

}  // namespace test_octupole_detuning
