// Linear optics from the one-turn map (framework/src/analysis/optics/) against thin-lens results written
// out here: the closed orbit of a ring with a steering error, the natural chromaticity
// xi = -(1/4 pi) sum k1l beta, the sextupole chromaticity +(1/4 pi) sum k2l beta D, dispersion and
// momentum compaction alpha_c = (1/C) sum theta D of thin bends (Wolski 2014, sec. 3.2-3.4;
// S. Y. Lee, "Accelerator Physics", sec. 2.IV), the tune of turn-by-turn data, the Edwards-Teng
// coupled tunes, the Gaussian generator's moments, error cases, and the real PSB and CLIC
// lattices (matrix tunes vs tracking tunes).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/optics.h"
#include "fusetrack/tracker.h"
#include "support/lattice_builders.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_optics.
namespace test_optics {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kL = 5.0;     // quadrupole spacing [m]
constexpr double kK1l = 0.18;  // full quadrupole strength [1/m]
constexpr int kCells = 16;
constexpr double kTheta = 2.0 * kPi / (2 * kCells);  // thin bend at every quadrupole [rad]

// ---- thin-lens matrices (first element acts first in the products below) ----
using M2 = std::array<std::array<double, 2>, 2>;
using M3 = std::array<std::array<double, 3>, 3>;  // (x, px, delta)

M2 mul(const M2& a, const M2& b) {
  M2 c{};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) c[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j];
  return c;
}
M3 mul(const M3& a, const M3& b) {
  M3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) c[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
  return c;
}
M2 drift2(double l) { return M2{{{1.0, l}, {0.0, 1.0}}}; }
M2 kick2(double k1l) { return M2{{{1.0, 0.0}, {-k1l, 1.0}}}; }
M3 drift3(double l) { return M3{{{1.0, l, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}}}; }
/// Thin quadrupole k1l with a thin bend theta (knl[0] = hxl = theta): px += -k1l x + theta delta.
M3 kick3(double k1l, double theta) { return M3{{{1.0, 0.0, 0.0}, {-k1l, 1.0, theta}, {0.0, 0.0, 1.0}}}; }

double mu_cell() { return 2.0 * std::asin(kL * kK1l / 2.0); }
double beta_max() { return 2.0 * kL * (1.0 + std::sin(mu_cell() / 2.0)) / std::sin(mu_cell()); }
double beta_min() { return 2.0 * kL * (1.0 - std::sin(mu_cell() / 2.0)) / std::sin(mu_cell()); }

/// Periodic dispersion of the thin FODO cell with bends theta/2 + theta/2 at QF and theta at QD:
/// at the QF centre (the cell's start) and at the QD.
struct ThinDispersion {
  double at_qf, at_qd;
};
ThinDispersion thin_dispersion() {
  const M3 first_half = mul(drift3(kL), kick3(kK1l / 2, kTheta / 2));
  const M3 second_half = mul(kick3(kK1l / 2, kTheta / 2), mul(drift3(kL), kick3(-kK1l, kTheta)));
  const M3 cell = mul(second_half, first_half);
  // (I - M2x2) (D, D') = (m13, m23)
  const double a = 1 - cell[0][0], b = -cell[0][1], c = -cell[1][0], d = 1 - cell[1][1];
  const double det = a * d - b * c;
  const double dq = (d * cell[0][2] - b * cell[1][2]) / det;
  const double dpq = (-c * cell[0][2] + a * cell[1][2]) / det;
  const double at_qd = first_half[0][0] * dq + first_half[0][1] * dpq + first_half[0][2];
  return {dq, at_qd};
}

/// The FODO ring with thin bends at every quadrupole (knl[0] = hxl, zero length: no weak
/// focusing) and thin sextupoles k2l_f (split in halves) at QF and k2l_d at QD.
Lattice bend_ring(double k2l_f, double k2l_d) {
  json doc;
  doc["fusetrack_lattice"] = 1;
  doc["reference"] = {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", 2e9}};
  json& e = doc["elements"];
  e["qf_half"] = {{"type", "Multipole"}, {"knl", {kTheta / 2, kK1l / 2}}, {"hxl", kTheta / 2}};
  e["qd"] = {{"type", "Multipole"}, {"knl", {kTheta, -kK1l}}, {"hxl", kTheta}};
  e["sf_half"] = {{"type", "Multipole"}, {"knl", {0.0, 0.0, k2l_f / 2}}};
  e["sd"] = {{"type", "Multipole"}, {"knl", {0.0, 0.0, k2l_d}}};
  e["d"] = {{"type", "Drift"}, {"length", kL}};
  doc["lines"]["cell"] = {"qf_half", "sf_half", "d", "qd", "sd", "d", "sf_half", "qf_half"};
  doc["sequence"] = json::array({json{{"line", "cell"}, {"repeat", kCells}}});
  return lattice_from_json(doc, "bend_ring", test::builtin_registry());
}

/// Finite-difference steps for the thin-lens test rings: with no strong non-linearity the
/// truncation error is negligible at 1e-5 m / 1e-6, and the rounding of px at the thin bends
/// (px - knl[0] + hxl, ~1e-17 absolute) then costs ~1e-12 in the tunes instead of ~1e-9 with
/// the defaults (sized for rings like the CLIC damping ring; see OpticsOptions::steps).
OpticsOptions thin_lens_options() {
  OpticsOptions o;
  o.steps = {1e-5, 1e-6, 1e-5, 1e-6, 1e-5, 1e-6};
  // Linear lattices: large steps (no truncation; the rounding of thin bends, ~1e-17 absolute, is
  // 1e-11 of them) for the final matrix as well (x ~ 4e-5 m, px ~ 2e-6 at beta ~ 18 m).
  o.normalized_step = 1e-5;
  return o;
}

/// The bundled FODO ring with a thin horizontal steering kick px -= theta after the first drift.
Lattice steering_ring(double theta) {
  json doc = test::parse_bundled("fodo_ring.json");
  doc["elements"]["kick"] = {{"type", "Multipole"}, {"knl", {theta}}, {"hxl", 0.0}};
  doc["sequence"] = json::array({"qf_half", "d", "kick", "qd", "d", "qf_half", json{{"line", "cell"}, {"repeat", kCells - 1}}, "end"});
  return lattice_from_json(doc, "fodo_ring+kick", test::builtin_registry());
}

}  // namespace

TEST_CASE("Closed orbit of a FODO ring with a steering error: map(co) = co and the thin-lens orbit") {
  const double theta = 1e-4;
  const Lattice lattice = steering_ring(theta);
  const OneTurnMap map = compute_one_turn_map(lattice, OpticsOptions{});
  REQUIRE_FALSE(map.six_d);
  const auto& co = map.closed_orbit;
  CAPTURE(co[0]);
  CAPTURE(co[1]);
  CHECK(map.residual <= 1e-14);
  // Independent check: one turn of the CPU backend maps co onto itself.
  Particles p(1, lattice.reference().beta0());
  p.set(0, co[0], co[1], co[2], co[3], co[4], co[5]);
  make_cpu_backend(lattice)->track(p, TrackOptions{});
  CHECK(std::fabs(p.x[0] - co[0]) < 1e-12);
  CHECK(std::fabs(p.px[0] - co[1]) < 1e-12);
  CHECK(p.y[0] == 0.0);
  CHECK(p.py[0] == 0.0);
  CHECK(p.delta[0] == 0.0);
  // Thin-lens orbit at the start: z = M_after (M_before z + (0, -theta)), M = M_after M_before.
  const M2 before = mul(drift2(kL), kick2(kK1l / 2));
  const M2 cell = mul(kick2(kK1l / 2), mul(drift2(kL), mul(kick2(-kK1l), mul(drift2(kL), kick2(kK1l / 2)))));
  M2 ring{{{1.0, 0.0}, {0.0, 1.0}}};
  for (int c = 0; c < kCells; ++c) ring = mul(cell, ring);
  // M_after = ring before^-1 (before is unimodular)
  const M2 before_inv{{{before[1][1], -before[0][1]}, {-before[1][0], before[0][0]}}};
  const M2 after = mul(ring, before_inv);
  const double kx = after[0][1] * (-theta), kpx = after[1][1] * (-theta);
  const double a = 1 - ring[0][0], b = -ring[0][1], c = -ring[1][0], d = 1 - ring[1][1];
  const double det = a * d - b * c;
  const double x_co = (d * kx - b * kpx) / det, px_co = (-c * kx + a * kpx) / det;
  CHECK(co[0] == doctest::Approx(x_co).epsilon(1e-10));
  CHECK(co[1] == doctest::Approx(px_co).epsilon(1e-10));
  CHECK(std::fabs(co[0]) > 1e-5);  // a real orbit, not a trivial zero
  // No RF: a 6D fixed point does not exist (the orbit's path length shifts zeta every turn).
  const std::string msg = test::error_message([&] { compute_one_turn_map_6d(lattice, OpticsOptions{}); });
  CAPTURE(msg);
  CHECK(msg.find("singular") != std::string::npos);
}

TEST_CASE("Natural chromaticity of the thin FODO ring: -(1/4 pi) sum k1l beta") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  const LinearOptics o = compute_linear_optics(lattice, OpticsOptions{});
  // x: QF (k1l = +0.18 in two halves) at beta_max, QD (-0.18) at beta_min; y: the other way round
  // with the vertical focusing -k1l.
  const double xi_x = -(1.0 / (4 * kPi)) * kCells * (kK1l * beta_max() - kK1l * beta_min());
  const double xi_y = (1.0 / (4 * kPi)) * kCells * (kK1l * beta_min() - kK1l * beta_max());
  // The same from the exact thin-lens tune: the expanded drift makes every kick k1l / (1 + delta),
  // Q(delta) = (16 / pi) asin(L k1l / (2 (1 + delta))), Q' = -(16 / pi) a / sqrt(1 - a^2).
  const double a = kL * kK1l / 2.0;
  const double xi_exact = -(kCells / kPi) * a / std::sqrt(1.0 - a * a);
  CAPTURE(o.dqx);
  CAPTURE(xi_x);
  CHECK(xi_x == doctest::Approx(xi_exact).epsilon(1e-13));  // the two formulas agree
  CHECK(o.dqx < 0.0);
  CHECK(o.dqy < 0.0);
  CHECK(o.dqx == doctest::Approx(xi_x).epsilon(1e-8));
  CHECK(o.dqy == doctest::Approx(xi_y).epsilon(1e-8));
  CHECK(o.chrom_points == 5);
}

TEST_CASE("Thin bends: dispersion, momentum compaction (1/C) sum theta D, slip factor") {
  const Lattice lattice = bend_ring(0.0, 0.0);
  const LinearOptics o = compute_linear_optics(lattice, thin_lens_options());
  const ThinDispersion d = thin_dispersion();
  CAPTURE(d.at_qf);
  CAPTURE(d.at_qd);
  CHECK(o.dx == doctest::Approx(d.at_qf).epsilon(1e-8));
  CHECK(std::fabs(o.dpx) < 1e-9);  // symmetry point
  CHECK(std::fabs(o.dy) < 1e-12);
  const double circumference = kCells * 2 * kL;
  const double alpha_c = kCells * (kTheta * d.at_qf + kTheta * d.at_qd) / circumference;
  const double gamma0 = std::sqrt(2e9 * 2e9 + 938272088.16 * 938272088.16) / 938272088.16;
  CAPTURE(alpha_c);
  CHECK(o.alpha_c == doctest::Approx(alpha_c).epsilon(1e-8));
  CHECK(o.eta == doctest::Approx(alpha_c - 1.0 / (gamma0 * gamma0)).epsilon(1e-8));
  CHECK(o.gamma_tr == doctest::Approx(1.0 / std::sqrt(alpha_c)).epsilon(1e-8));
  // Zero-length bends do not focus: the optics and the natural chromaticity are the FODO's.
  CHECK(o.beta_x == doctest::Approx(beta_max()).epsilon(1e-10));
  const double xi = -(1.0 / (4 * kPi)) * kCells * kK1l * (beta_max() - beta_min());
  CHECK(o.dqx == doctest::Approx(xi).epsilon(1e-7));
  CHECK(o.dqy == doctest::Approx(xi).epsilon(1e-7));
}

TEST_CASE("Sextupoles change the chromaticity by +-(1/4 pi) sum k2l beta D") {
  const double k2l_f = 0.12, k2l_d = -0.2;  // [1/m^2]
  const LinearOptics bare = compute_linear_optics(bend_ring(0.0, 0.0), thin_lens_options());
  const LinearOptics sext = compute_linear_optics(bend_ring(k2l_f, k2l_d), thin_lens_options());
  const ThinDispersion d = thin_dispersion();
  // A sextupole at dispersion D is a quadrupole k1l = k2l D delta on the off-momentum orbit.
  const double dxi_x = (1.0 / (4 * kPi)) * kCells * (k2l_f * beta_max() * d.at_qf + k2l_d * beta_min() * d.at_qd);
  const double dxi_y = -(1.0 / (4 * kPi)) * kCells * (k2l_f * beta_min() * d.at_qf + k2l_d * beta_max() * d.at_qd);
  CAPTURE(dxi_x);
  CAPTURE(dxi_y);
  CAPTURE(sext.dqx - bare.dqx);
  CAPTURE(sext.dqy - bare.dqy);
  CHECK(std::fabs(dxi_x) > 1.0);  // a sizeable change
  CHECK(sext.dqx - bare.dqx == doctest::Approx(dxi_x).epsilon(1e-7));
  CHECK(sext.dqy - bare.dqy == doctest::Approx(dxi_y).epsilon(1e-7));
  // The linear optics on momentum are untouched by the sextupoles (zero closed orbit); they
  // enter the finite differences only at O(h^2 k2l^2 beta^3) ~ 1e-10.
  CHECK(std::fabs(sext.qx - bare.qx) < 1e-9);
  CHECK(sext.dx == doctest::Approx(bare.dx).epsilon(1e-9));
  // With the default steps (rounding at the bends ~1e-9 in the tunes): Q' to ~1e-5.
  const LinearOptics bare_d = compute_linear_optics(bend_ring(0.0, 0.0), OpticsOptions{});
  const LinearOptics sext_d = compute_linear_optics(bend_ring(k2l_f, k2l_d), OpticsOptions{});
  CHECK(sext_d.dqx - bare_d.dqx == doctest::Approx(dxi_x).epsilon(1e-5));
  CHECK(sext_d.dqy - bare_d.dqy == doctest::Approx(dxi_y).epsilon(1e-5));
}

TEST_CASE("tune_from_tracking: normalized turn-by-turn signal, Q vs 1 - Q, accuracy") {
  const size_t n = 1000;
  for (const double q : {0.3141592653589793, 0.8123456789, 0.0312345, 0.4987654}) {
    const double beta = 7.3, alpha = -1.3, phase = 0.4;
    std::vector<double> x(n), px(n), x2(n), px2(n);
    for (size_t i = 0; i < n; ++i) {
      const double ph = 2 * kPi * q * static_cast<double>(i) + phase;
      x[i] = 1e-3 * std::sqrt(beta) * std::cos(ph);
      px[i] = -1e-3 * (std::sin(ph) + alpha * std::cos(ph)) / std::sqrt(beta);
      // plus a weaker second harmonic (a sextupole-like distortion)
      const double ph2 = 2 * ph;
      x2[i] = x[i] + 5e-5 * std::sqrt(beta) * std::cos(ph2);
      px2[i] = px[i] - 5e-5 * (std::sin(ph2) + alpha * std::cos(ph2)) / std::sqrt(beta);
    }
    CAPTURE(q);
    const double q_norm = tune_from_tracking(x, px, beta, alpha);
    const double q_raw = tune_from_tracking(x, px);
    const double q_two = tune_from_tracking(x2, px2, beta, alpha);
    CAPTURE(q_norm - q);
    CAPTURE(q_raw - q);
    CAPTURE(q_two - q);
    CHECK(std::fabs(q_norm - q) < 1e-10);
    // Without the Twiss normalisation the mirror line at 1 - Q remains (amplitude ratio
    // (sqrt(beta) - 1/sqrt(beta)) / (sqrt(beta) + 1/sqrt(beta)) here): still Q, not 1 - Q (the
    // sense of rotation), accurate unless Q is near 0 or 1/2 where the mirror line is close.
    const double near_edge = std::min(std::fabs(q - 0.5), std::min(q, 1.0 - q));
    CHECK(std::fabs(q_raw - q) < (near_edge > 0.05 ? 1e-6 : 1e-4));
    CHECK(std::fabs(q_two - q) < 1e-8);
  }
  const std::vector<double> few(10, 1.0);
  CHECK(test::error_message([&] { tune_from_tracking(few, few); }).find("16") != std::string::npos);
}

TEST_CASE("transverse_tunes: Edwards-Teng eigen-tunes of a coupled matrix are its eigenvalues") {
  // A coupled symplectic 4x4 built from drifts, quadrupoles and skew quadrupoles (px -= k x - s y,
  // py += s x + k y), embedded in a 6x6.
  using M4 = std::array<std::array<double, 4>, 4>;
  auto mul4 = [](const M4& a, const M4& b) {
    M4 c{};
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 4; ++k) c[i][j] += a[i][k] * b[k][j];
    return c;
  };
  M4 m{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}};
  const double ks[6] = {0.31, -0.27, 0.18, -0.35, 0.22, -0.2}, ss[6] = {0.01, 0.0, -0.02, 0.0, 0.015, 0.0};
  for (int rep = 0; rep < 3; ++rep)
    for (int e = 0; e < 6; ++e) {
      const M4 d{{{1, 2.0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 2.0}, {0, 0, 0, 1}}};
      const M4 q{{{1, 0, 0, 0}, {-ks[e], 1, ss[e], 0}, {0, 0, 1, 0}, {ss[e], 0, ks[e], 1}}};
      m = mul4(q, mul4(d, m));
    }
  Matrix6 m6{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) m6[i][j] = m[i][j];
  m6[4][4] = m6[5][5] = 1.0;
  // Characteristic polynomial lambda^4 - e1 lambda^3 + e2 lambda^2 - e1 lambda + 1 (symplectic):
  // with u = lambda + 1/lambda, u^2 - e1 u + e2 - 2 = 0; e1 = trace, e2 = sum of principal 2x2 minors.
  double e1 = 0, e2 = 0;
  for (int i = 0; i < 4; ++i) {
    e1 += m[i][i];
    for (int j = i + 1; j < 4; ++j) e2 += m[i][i] * m[j][j] - m[i][j] * m[j][i];
  }
  const double disc = e1 * e1 - 4 * (e2 - 2);
  REQUIRE(disc > 0);
  const double u_a = (e1 + std::sqrt(disc)) / 2, u_b = (e1 - std::sqrt(disc)) / 2;
  REQUIRE(std::fabs(u_a) < 2);
  REQUIRE(std::fabs(u_b) < 2);
  const auto q = transverse_tunes(m6);
  const double c0 = std::cos(2 * kPi * q[0]), c1 = std::cos(2 * kPi * q[1]);
  CAPTURE(q[0]);
  CAPTURE(q[1]);
  // Each mode's cos mu is one of the roots, the x-like mode the one closer to the x block's trace.
  const double tra = m[0][0] + m[1][1];
  const double ux = std::fabs(u_a - tra) < std::fabs(u_b - tra) ? u_a : u_b;
  const double uy = ux == u_a ? u_b : u_a;
  CHECK(2 * c0 == doctest::Approx(ux).epsilon(1e-12));
  CHECK(2 * c1 == doctest::Approx(uy).epsilon(1e-12));
  // An unstable matrix is reported.
  Matrix6 bad = m6;
  bad[0][0] = 3.0;
  bad[1][1] = 1.0 / 3.0;
  bad[0][1] = bad[1][0] = 0.0;
  for (int i = 0; i < 2; ++i)
    for (int j = 2; j < 4; ++j) bad[i][j] = bad[j][i] = 0.0;
  CHECK(test::error_message([&] { transverse_tunes(bad); }).find("unstable") != std::string::npos);
}

TEST_CASE("make_gaussian: matched moments around the closed orbit with dispersion, reproducible for a seed") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  // Optics set by hand (the generator's input), not computed.
  LinearOptics o;
  o.beta0 = lattice.reference().beta0();
  o.gamma0 = lattice.reference().gamma0();
  o.closed_orbit = {1e-3, -2e-5, -5e-4, 1e-5, 0.02, 1e-4};
  o.beta_x = 12.0, o.alpha_x = -1.5, o.gamma_x = (1 + 1.5 * 1.5) / 12.0;
  o.beta_y = 4.0, o.alpha_y = 0.7, o.gamma_y = (1 + 0.7 * 0.7) / 4.0;
  o.dx = 2.0, o.dpx = 0.3, o.dy = 0.0, o.dpy = 0.0;
  const double bg = 2e9 / 938272088.16;  // beta0 gamma0 = p0c / mass0
  const double eps_nx = 2.5e-6, eps_ny = 1.5e-6, sz = 0.05, sd = 1e-3;
  const double ex = eps_nx / bg, ey = eps_ny / bg;
  const size_t n = 200000;
  const Particles p = make_gaussian(lattice, o, n, eps_nx, eps_ny, sz, sd, 42);
  REQUIRE(p.size() == n);
  // Moments about the closed orbit.
  auto mean = [&](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  const std::vector<double>* c[6] = {&p.x, &p.px, &p.y, &p.py, &p.zeta, &p.delta};
  double m[6], cov[6][6];
  for (int k = 0; k < 6; ++k) m[k] = mean(*c[k]);
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b) {
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += ((*c[a])[i] - m[a]) * ((*c[b])[i] - m[b]);
      cov[a][b] = s / static_cast<double>(n);
    }
  // Expected: betatron sigma matrix eps [[beta, -alpha], [-alpha, gamma]] plus D D^T sigma_delta^2.
  double want[6][6] = {};
  want[0][0] = o.beta_x * ex + o.dx * o.dx * sd * sd;
  want[0][1] = want[1][0] = -o.alpha_x * ex + o.dx * o.dpx * sd * sd;
  want[1][1] = o.gamma_x * ex + o.dpx * o.dpx * sd * sd;
  want[2][2] = o.beta_y * ey;
  want[2][3] = want[3][2] = -o.alpha_y * ey;
  want[3][3] = o.gamma_y * ey;
  want[4][4] = sz * sz;
  want[5][5] = sd * sd;
  want[0][5] = want[5][0] = o.dx * sd * sd;
  want[1][5] = want[5][1] = o.dpx * sd * sd;
  // Statistical tolerance: a covariance estimate has a standard deviation of about
  // sqrt((c_aa c_bb + c_ab^2) / n) <= sqrt(2 / n) sqrt(c_aa c_bb); allow 5 of them.
  for (int a = 0; a < 6; ++a) {
    CAPTURE(a);
    const double s_a = std::sqrt(want[a][a]);
    CHECK(std::fabs(m[a] - o.closed_orbit[static_cast<size_t>(a)]) < 5.0 * s_a / std::sqrt(static_cast<double>(n)));
    for (int b = 0; b < 6; ++b) {
      CAPTURE(b);
      const double scale = std::sqrt(want[a][a] * want[b][b]);
      CHECK(std::fabs(cov[a][b] - want[a][b]) < 5.0 * std::sqrt(2.0 / static_cast<double>(n)) * scale);
    }
  }
  // Reproducible for a seed; another seed gives other particles.
  const Particles again = make_gaussian(lattice, o, 100, eps_nx, eps_ny, sz, sd, 42);
  const Particles other = make_gaussian(lattice, o, 100, eps_nx, eps_ny, sz, sd, 43);
  for (size_t i = 0; i < 100; ++i) CHECK(again.x[i] == p.x[i]);
  CHECK(other.x[0] != p.x[0]);
  CHECK(test::error_message([&] { make_gaussian(lattice, o, 10, -1.0, eps_ny, sz, sd, 1); }).find("eps_nx") !=
        std::string::npos);
}

TEST_CASE("Optics errors: an unstable ring and bad options") {
  json doc = test::parse_bundled("fodo_ring.json");
  doc["elements"]["qf_half"]["knl"] = {0.0, 0.21};  // L k1l / 2 = 1.05 > 1: no periodic solution
  doc["elements"]["qd"]["knl"] = {0.0, -0.42};
  const Lattice unstable = lattice_from_json(doc, "unstable", test::builtin_registry());
  const std::string msg = test::error_message([&] { compute_linear_optics(unstable, OpticsOptions{}); });
  CAPTURE(msg);
  CHECK(msg.find("unstable") != std::string::npos);

  OpticsOptions bad;
  bad.steps[4] = 0.0;
  const Lattice fodo = test::bundled_lattice("fodo_ring.json");
  const std::string msg2 = test::error_message([&] { compute_linear_optics(fodo, bad); });
  CAPTURE(msg2);
  CHECK(msg2.find("zeta") != std::string::npos);
  OpticsOptions bad_delta;
  bad_delta.delta_chrom = -1e-4;
  CHECK(test::error_message([&] { compute_linear_optics(fodo, bad_delta); }).find("delta_chrom") != std::string::npos);
}

TEST_CASE("4D optics off momentum: delta0 moves the closed orbit along the dispersion") {
  const Lattice lattice = bend_ring(0.12, -0.2);
  OpticsOptions o;
  o.delta0 = 1e-4;
  const OneTurnMap m = compute_one_turn_map(lattice, o);
  REQUIRE_FALSE(m.six_d);
  CHECK(m.closed_orbit[5] == 1e-4);
  // x_co = D delta0 + O(delta0^2) (second-order dispersion from the sextupoles: ~1e-4 relative)
  CHECK(m.closed_orbit[0] == doctest::Approx(thin_dispersion().at_qf * 1e-4).epsilon(1e-3));
}

// ---- the real lattices of ../shared/lattices/xsuite ----

namespace {

/// Loads a shared Xsuite lattice; the test is reported skipped (exit 77) when it is absent.
bool load_shared(const std::string& name, Lattice& lattice) {
  lattice = load_lattice(test::require_shared("lattices/xsuite/" + name), test::builtin_registry());
  return true;
}

void check_matrix_vs_tracking_tunes(const std::string& name) {
  Lattice lattice;
  if (!load_shared(name, lattice)) return;
  const LinearOptics o = compute_linear_optics(lattice, OpticsOptions{});
  const TrackedTunes t = tunes_by_tracking(lattice, o, 1024, OpticsOptions{});
  CAPTURE(o.mode_reason);
  CAPTURE(o.qx);
  CAPTURE(o.qy);
  CAPTURE(t.qx);
  CAPTURE(t.qy);
  CHECK(std::fabs(t.qx - o.qx) < 1e-4);
  CHECK(std::fabs(t.qy - o.qy) < 1e-4);
  MESSAGE(fmt::format("{}: {}; Qx {:.10f} (tracking {:+.1e}), Qy {:.10f} (tracking {:+.1e}), Qs {:.8f} (tracking "
                      "{:.8f}), Q'x {:.6f}, Q'y {:.6f}, alpha_c {:.8e}, beta_x {:.6f} m, beta_y {:.6f} m, Dx {:.6f} m",
                      name, o.mode_reason, o.qx, t.qx - o.qx, o.qy, t.qy - o.qy, o.qs, t.qs, o.dqx, o.dqy, o.alpha_c,
                      o.beta_x, o.beta_y, o.dx));
}

}  // namespace

TEST_CASE("PSB at injection: tunes from the one-turn matrix agree with tracking to < 1e-4") {
  check_matrix_vs_tracking_tunes("psb_injection.json");
}

TEST_CASE("CLIC damping ring: tunes from the one-turn matrix agree with tracking to < 1e-4") {
  check_matrix_vs_tracking_tunes("clic_damping_ring.json");
}

// ---- the command line ----

using ft::test::run_command;

TEST_CASE("fusetrack optics: summary and JSON for the FODO and RF rings, exit code 2 on bad input") {
  const std::string exe = test::build_path("bin/fusetrack");
  const auto dir = test::temp_dir("optics_cli");
  const std::string json_path = (dir / "fodo.json").string();
  const auto [rc, out] = run_command(exe + " optics " + test::source_path("lattices/fodo_ring.json") + " -o " + json_path);
  CAPTURE(out);
  REQUIRE(rc == 0);
  CHECK(out.find("tunes") != std::string::npos);
  CHECK(out.find("chromaticity") != std::string::npos);
  const json j = json::parse(std::ifstream(json_path));
  const double a = kL * kK1l / 2.0;
  double q = kCells * 2.0 * std::asin(a) / (2 * kPi);
  q -= std::floor(q);
  CHECK(j.at("method").get<std::string>() == "4d");
  CHECK(std::fabs(j.at("tunes").at("qx").get<double>() - q) < 1e-12);
  CHECK(std::fabs(j.at("tunes_from_tracking").at("qy").get<double>() - q) < 1e-6);
  CHECK(j.at("tunes").at("qs").is_null());
  CHECK(j.at("twiss").at("betx").get<double>() == doctest::Approx(beta_max()).epsilon(1e-10));
  CHECK(j.at("one_turn_matrix").at("rows").size() == 6);
  CHECK(j.at("chromaticity").at("dqx").get<double>() < 0.0);
  CHECK(j.at("longitudinal").at("gamma_tr").is_null());

  const std::string rf_path = (dir / "rf.json").string();
  const auto [rc2, out2] = run_command(exe + " optics " + test::source_path("lattices/sextupole_rf_ring.json") +
                                       " --tracking-turns 0 -o " + rf_path);
  CAPTURE(out2);
  REQUIRE(rc2 == 0);
  const json j2 = json::parse(std::ifstream(rf_path));
  CHECK(j2.at("method").get<std::string>() == "6d");
  CHECK(j2.at("tunes").at("qs").get<double>() > 0.011);
  CHECK_FALSE(j2.contains("tunes_from_tracking"));
  const auto [rc3, out3] = run_command(exe + " optics " + test::source_path("lattices/sextupole_rf_ring.json") +
                                       " --4d --tracking-turns 0 -o " + rf_path);
  REQUIRE(rc3 == 0);
  CHECK(json::parse(std::ifstream(rf_path)).at("method").get<std::string>() == "4d");

  const auto [rc4, out4] = run_command(exe + " optics " + test::source_path("lattices/fodo_ring.json") +
                                       " --tracking-turns 5");
  CAPTURE(out4);
  CHECK(rc4 == 2);  // bad input
  CHECK(out4.find("--tracking-turns") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Accuracy of the one-turn matrix: its tunes against the tunes of tracked particles.

namespace {

/// A symplectic matrix in (x, px, y, py, zeta, pzeta) that couples every plane: thin kicks
/// px += a y, py += a x (skew quadrupole), px += b zeta, pzeta += b x (crab-like), then drifts
/// x += l px, zeta += l pzeta. Each factor is symplectic, so is the product.
Matrix6 coupling_transform(double a, double b, double l) {
  auto identity = [] {
    Matrix6 m{};
    for (size_t i = 0; i < 6; ++i) m[i][i] = 1.0;
    return m;
  };
  Matrix6 skew = identity(), crab = identity(), drift = identity();
  skew[1][2] = a;
  skew[3][0] = a;
  crab[1][4] = b;
  crab[5][0] = b;
  drift[0][1] = l;
  drift[4][5] = l;
  auto mul = [](const Matrix6& p, const Matrix6& q) {
    Matrix6 r{};
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 6; ++j)
        for (size_t k = 0; k < 6; ++k) r[i][j] += p[i][k] * q[k][j];
    return r;
  };
  return mul(drift, mul(crab, skew));
}

/// The inverse of a symplectic matrix: -J A^T J.
Matrix6 symplectic_inverse(const Matrix6& a) {
  Matrix6 r{};
  // (J A^T J)_{ij} with J = diag(J2, J2, J2), J2 = [[0, 1], [-1, 0]]: r = -J A^T J.
  auto jv = [](size_t i, size_t k) { return (i % 2 == 0 && k == i + 1) ? 1.0 : (i % 2 == 1 && k + 1 == i) ? -1.0 : 0.0; };
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = 0; j < 6; ++j) {
      double s = 0.0;
      for (size_t k = 0; k < 6; ++k)
        for (size_t l = 0; l < 6; ++l) s += jv(i, k) * a[l][k] * jv(l, j);
      r[i][j] = -s;
    }
  return r;
}

}  // namespace

TEST_CASE("6D eigen-tunes: A R A^-1 with known rotations, all planes coupled, and decoupled planes") {
  const double qx = 0.31, qy = 0.27, qs = 0.012;
  const double betas[3] = {12.0, 3.0, 40.0};
  const double tunes[3] = {qx, qy, qs};
  Matrix6 r{};
  for (size_t p = 0; p < 3; ++p) {
    const double mu = 2.0 * kPi * tunes[p], b = betas[p];
    r[2 * p][2 * p] = std::cos(mu);
    r[2 * p][2 * p + 1] = b * std::sin(mu);
    r[2 * p + 1][2 * p] = -std::sin(mu) / b;
    r[2 * p + 1][2 * p + 1] = std::cos(mu);
  }
  auto mul = [](const Matrix6& p, const Matrix6& q) {
    Matrix6 m{};
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 6; ++j)
        for (size_t k = 0; k < 6; ++k) m[i][j] += p[i][k] * q[k][j];
    return m;
  };
  // Uncoupled: exact.
  auto q0 = eigen_tunes_6d(r, 0.3, 0.3);
  CHECK(std::fabs(q0[0] - qx) < 1e-14);
  CHECK(std::fabs(q0[1] - qy) < 1e-14);
  CHECK(std::fabs(q0[2] - qs) < 1e-14);
  // All three planes coupled: the eigenvalues are those of R.
  const Matrix6 a = coupling_transform(0.05, 0.002, 1.5);
  const Matrix6 m = mul(a, mul(r, symplectic_inverse(a)));
  CHECK(std::fabs(m[0][2]) > 1e-3);  // really coupled
  CHECK(std::fabs(m[0][4]) > 1e-4);
  const auto q = eigen_tunes_6d(m, 0.3, 0.3);
  CHECK(std::fabs(q[0] - qx) < 1e-11);
  CHECK(std::fabs(q[1] - qy) < 1e-11);
  CHECK(std::fabs(q[2] - qs) < 1e-11);
  // Mirror tunes (Q > 0.5) follow the hints.
  const auto qm = eigen_tunes_6d(m, 0.7, 0.6);
  CHECK(std::fabs(qm[0] - (1.0 - qx)) < 1e-11);
  // Equal transverse tunes, y alone, x coupled to s only: exact (no double root of the cubic).
  Matrix6 r2 = r;
  for (size_t i = 2; i < 4; ++i)
    for (size_t j = 2; j < 4; ++j) r2[i][j] = r[i - 2][j - 2];
  const Matrix6 a2 = coupling_transform(0.0, 0.002, 1.5);
  const auto q2 = eigen_tunes_6d(mul(a2, mul(r2, symplectic_inverse(a2))), 0.3, 0.3);
  CHECK(std::fabs(q2[0] - qx) < 1e-11);
  CHECK(std::fabs(q2[1] - qx) < 1e-14);
  CHECK(std::fabs(q2[2] - qs) < 1e-11);
}

TEST_CASE("tune_from_tracking: error below 1e-9 with a coupled line of 1e-4 at 0.04 (1024 turns)") {
  // Linear motion in the normalized frame: z_n = e^{i 2 pi Q n} plus the other mode's line. The
  // Hann-windowed NAFF maximum of a pure line is exact; a second line of relative amplitude r at
  // distance d shifts it by ~ r / (N^3 d^3) (the window's side-lobe slope), ~1e-13 here.
  const double q = 0.3123456789, q2 = 0.2723456789;
  for (int n : {1024, 4096}) {
    std::vector<double> x(static_cast<size_t>(n)), px(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const double ph = 2.0 * kPi * q * i, ph2 = 2.0 * kPi * q2 * i + 0.3;
      x[static_cast<size_t>(i)] = std::cos(ph) + 1e-4 * std::cos(ph2);
      px[static_cast<size_t>(i)] = -std::sin(ph) - 1e-4 * std::sin(ph2);
    }
    CAPTURE(n);
    CHECK(std::fabs(tune_from_tracking(x, px) - q) < 1e-9);
  }
}

TEST_CASE("Matrix tunes equal tracked tunes to 1e-8 on every bundled ring and the Xsuite PSB and CLIC DR") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(ft::test::source_path("lattices")))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  // The real rings of ../shared: the test is skipped, never passed, without them.
  for (const char* x : {"psb_injection.json", "clic_damping_ring.json"})
    files.push_back(ft::test::require_shared(std::string("lattices/xsuite/") + x));
  int checked = 0;
  for (const auto& file : files) {
    const Lattice lattice = load_lattice(file, ft::test::builtin_registry());
    if (std::filesystem::path(file).filename() == "longitudinal_only_bench_ring.json") {
      // A longitudinal-only model (LongitudinalDrift, RF, impedance): no transverse focusing, so no
      // transverse optics; the solver says so instead of returning tunes.
      CHECK_THROWS_WITH(compute_linear_optics(lattice, OpticsOptions{}), doctest::Contains("unstable"));
      continue;
    }
    for (bool force_4d : {false, true}) {
      OpticsOptions options;
      options.force_4d = force_4d;
      const LinearOptics o = compute_linear_optics(lattice, options);
      const TrackedTunes t = tunes_by_tracking(lattice, o, 1024, options);
      const double mqx = o.six_d ? o.qx_6d : o.qx, mqy = o.six_d ? o.qy_6d : o.qy;
      CAPTURE(file);
      CAPTURE(force_4d);
      MESSAGE(fmt::format("{} {}: Qx {:.12f} (tracked {:+.1e}), Qy {:.12f} (tracked {:+.1e})", file,
                          o.six_d ? "6D" : "4D", mqx, t.qx - mqx, mqy, t.qy - mqy));
      CHECK(std::fabs(t.qx - mqx) < 1e-8);
      CHECK(std::fabs(t.qy - mqy) < 1e-8);
      ++checked;
    }
  }
  CHECK(checked == 2 * static_cast<int>(files.size() - 1));  // every file but the longitudinal-only ring, 4D and 6D
}

TEST_CASE("Total tunes of the bundled FODO ring: cells times the thin-lens phase advance per cell") {
  const Lattice lattice = test::bundled_lattice("fodo_ring.json");
  const TwissTable t = compute_twiss_table(lattice);
  const double q = kCells * mu_cell() / (2.0 * kPi);  // 2.377...
  CHECK(q > 2.0);
  CHECK(std::fabs(t.qx_total - q) < 1e-10);
  CHECK(std::fabs(t.qy_total - q) < 1e-10);
}

TEST_CASE("Element stepping of the Twiss table equals the whole-turn kernel for every registered type") {
  const auto types = ft::test::builtin_registry().types();
  REQUIRE(types.size() >= 10);
  int checked = 0;
  for (const ElementType* type : types) {
    if (type->is_collective()) continue;
    CAPTURE(type->name);
    bool built = false;
    for (const auto& fields : ft::test::sample_candidates(*type, 0.5)) {
      Lattice lattice(ReferenceParticle{938272088.16, 1.0, 2e9});
      try {
        lattice.append(lattice.define("e", *type, fields, InputLocation("t")));
        lattice.prepare();
      } catch (const InputError&) {
        continue;
      }
      built = true;
      // Off axis in every coordinate, so that zeta- and delta-dependent kicks count.
      const std::array<double, 6> z = {1e-3, -2e-4, -5e-4, 1e-4, 2e-2, 3e-4};
      const double d = element_stepping_mismatch(lattice, 0, z);
      CHECK(d < 1e-12);
      ++checked;
      break;
    }
    CHECK(built);
  }
  CHECK(checked >= 10);
}

}  // namespace test_optics
