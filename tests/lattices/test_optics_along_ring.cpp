// Optics along the ring (ft::compute_twiss_table) against results computed here by other means:
// - uncoupled rings: Courant-Snyder propagation of (beta, alpha) with 2x2 transfer matrices
//   written out here (thin lenses, thick quadrupoles), the phase advance per element
//   atan2(m12, beta m11 - alpha m12), the closed forms of the thin FODO cell (beta at QF and QD,
//   sin(mu/2) = L k1l / 2) and the periodic thin-lens dispersion;
// - coupled rings (skew quadrupoles, tilted quadrupoles): at every position the one-turn matrix
//   M_s = R_s M_0 R_s^-1 from 4x4 matrices written out here, its mode tunes from tr M and tr M^2,
//   and the Mais-Ripken beta functions from the real projectors on each mode,
//   Pi_k = (M + M^-1 - u_j) / (u_k - u_j) (u = 2 cos mu), Sigma_k = (M Pi_k - cos mu_k Pi_k) S^T /
//   sin mu_k: beta_kx = Sigma_k[0][0], alpha_kx = -Sigma_k[0][1] (no eigenvectors, no propagation);
// - real lattices: the Twiss parameters of the one-turn map of the same ring entered at another
//   element (compute_linear_optics of a rotated sequence);
// plus periodicity, the values at the start against compute_linear_optics, CSV and NPZ files,
// the command line and its bad options.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <complex>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/optics.h"
#include "fusetrack/xsuite_import.h"
#include "support/lattice_builders.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_optics_along_ring.
namespace test_optics_along_ring {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;

// ---- 4x4 transverse matrices with a delta column (the 4D map at fixed delta, linearised) ----
using M4 = std::array<std::array<double, 4>, 4>;
struct Map {
  M4 m{};
  std::array<double, 4> d{};  // d(x, px, y, py) / d delta
};

Map identity() {
  Map r;
  for (size_t i = 0; i < 4; ++i) r.m[i][i] = 1.0;
  return r;
}
M4 mul(const M4& a, const M4& b) {
  M4 c{};
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j)
      for (size_t k = 0; k < 4; ++k) c[i][j] += a[i][k] * b[k][j];
  return c;
}
/// `a` after `b`.
Map mul(const Map& a, const Map& b) {
  Map c;
  c.m = mul(a.m, b.m);
  for (size_t i = 0; i < 4; ++i) {
    c.d[i] = a.d[i];
    for (size_t k = 0; k < 4; ++k) c.d[i] += a.m[i][k] * b.d[k];
  }
  return c;
}
/// Inverse of a symplectic 4x4: -S M^T S.
M4 symplectic_inverse(const M4& m) {
  const M4 s = {{{0, 1, 0, 0}, {-1, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, -1, 0}}};
  M4 mt{};
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j) mt[i][j] = m[j][i];
  M4 r = mul(s, mul(mt, s));
  for (auto& row : r)
    for (double& v : row) v = -v;
  return r;
}

Map drift(double l) {
  Map r = identity();
  r.m[0][1] = l;
  r.m[2][3] = l;
  return r;
}
/// Thin multipole (fusetrack Multipole, length 0): px += -k1l x + k1sl y + theta delta,
/// py += k1l y + k1sl x (knl = {theta, k1l}, ksl = {0, k1sl}, hxl = theta).
Map thin(double k1l, double k1sl = 0.0, double theta = 0.0) {
  Map r = identity();
  r.m[1][0] = -k1l;
  r.m[1][2] = k1sl;
  r.m[3][2] = k1l;
  r.m[3][0] = k1sl;
  r.d[1] = theta;
  return r;
}
/// SRotation by `deg` degrees: x <- c x + s y, y <- -s x + c y, the same for px, py.
Map rotation(double deg) {
  const double c = std::cos(deg / 180.0 * kPi), s = std::sin(deg / 180.0 * kPi);
  Map r;
  r.m[0][0] = c;
  r.m[0][2] = s;
  r.m[2][0] = -s;
  r.m[2][2] = c;
  r.m[1][1] = c;
  r.m[1][3] = s;
  r.m[3][1] = -s;
  r.m[3][3] = c;
  return r;
}
/// Thick quadrupole (on momentum): focusing plane cos/sin, defocusing cosh/sinh, K = k1.
Map thick_quad(double l, double k1) {
  Map r;
  auto plane = [&](double kk, size_t o) {
    const double w = std::sqrt(std::fabs(kk));
    double c, s, sp;  // C, S, C'
    if (kk > 0) {
      c = std::cos(w * l);
      s = std::sin(w * l) / w;
      sp = -w * std::sin(w * l);
    } else {
      c = std::cosh(w * l);
      s = std::sinh(w * l) / w;
      sp = w * std::sinh(w * l);
    }
    r.m[o][o] = c;
    r.m[o][o + 1] = s;
    r.m[o + 1][o] = sp;
    r.m[o + 1][o + 1] = c;
  };
  plane(k1, 0);
  plane(-k1, 2);
  return r;
}

/// A lattice built element by element together with the matrices of its elements.
struct RingBuilder {
  json doc;
  std::vector<Map> maps;
  RingBuilder() {
    doc["fusetrack_lattice"] = 1;
    doc["reference"] = {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", 2e9}};
    doc["elements"] = json::object();
    doc["sequence"] = json::array();
  }
  void define(const std::string& name, const json& def) { doc["elements"][name] = def; }
  void add(const std::string& name, const Map& m) {
    REQUIRE(doc["elements"].contains(name));
    doc["sequence"].push_back(name);
    maps.push_back(m);
  }
  Lattice lattice(const std::string& what) const { return lattice_from_json(doc, what, test::builtin_registry()); }
  /// R_k: the product of the first k element maps (k = 0..N).
  std::vector<Map> partial_products() const {
    std::vector<Map> r{identity()};
    for (const auto& m : maps) r.push_back(mul(m, r.back()));
    return r;
  }
};

/// Steps for linear test rings: the Jacobians are exact up to rounding (~1e-16 / step).
OpticsOptions linear_options() {
  OpticsOptions o;
  o.steps = {1e-5, 1e-6, 1e-5, 1e-6, 1e-5, 1e-6};
  return o;
}

// ---- uncoupled expectations ----
struct Twiss2 {
  double beta, alpha, mu;  // mu in turns
};
/// Propagates (beta, alpha) by a 2x2 block; the phase advance atan2(m12, m11 beta - m12 alpha).
Twiss2 propagate(const Twiss2& t, double m11, double m12, double m21, double m22) {
  const double gamma = (1.0 + t.alpha * t.alpha) / t.beta;
  Twiss2 r;
  r.beta = m11 * m11 * t.beta - 2.0 * m11 * m12 * t.alpha + m12 * m12 * gamma;
  r.alpha = -m11 * m21 * t.beta + (m11 * m22 + m12 * m21) * t.alpha - m12 * m22 * gamma;
  r.mu = t.mu + std::atan2(m12, m11 * t.beta - m12 * t.alpha) / (2.0 * kPi);
  return r;
}

/// Checks an uncoupled table against the Courant-Snyder propagation with the element matrices,
/// started from the periodic solution of the full product.
void check_uncoupled_against_matrices(const TwissTable& t, const RingBuilder& b, double tol) {
  const auto r = b.partial_products();
  const M4& m = r.back().m;
  Twiss2 tx{}, ty{};
  for (size_t p = 0; p < 2; ++p) {
    const size_t o = 2 * p;
    const double c = 0.5 * (m[o][o] + m[o + 1][o + 1]);
    const double s = std::copysign(std::sqrt(1.0 - c * c), m[o][o + 1]);
    Twiss2& tw = p == 0 ? tx : ty;
    tw = {m[o][o + 1] / s, (m[o][o] - m[o + 1][o + 1]) / (2.0 * s), 0.0};
  }
  REQUIRE(t.size() == b.maps.size() + 1);
  for (size_t row = 0; row < t.size(); ++row) {
    if (row > 0) {
      const M4& e = b.maps[row - 1].m;
      tx = propagate(tx, e[0][0], e[0][1], e[1][0], e[1][1]);
      ty = propagate(ty, e[2][2], e[2][3], e[3][2], e[3][3]);
    }
    CAPTURE(row);
    CHECK(t.beta_x[row] == doctest::Approx(tx.beta).epsilon(tol));
    CHECK(t.beta_y[row] == doctest::Approx(ty.beta).epsilon(tol));
    CHECK(std::fabs(t.alpha_x[row] - tx.alpha) < tol * (1.0 + std::fabs(tx.alpha)));
    CHECK(std::fabs(t.alpha_y[row] - ty.alpha) < tol * (1.0 + std::fabs(ty.alpha)));
    CHECK(std::fabs(t.mu_x[row] - tx.mu) < tol);
    CHECK(std::fabs(t.mu_y[row] - ty.mu) < tol);
    CHECK(t.beta_1x[row] == t.beta_x[row]);
    CHECK(t.beta_2y[row] == t.beta_y[row]);
    CHECK(t.beta_1y[row] == 0.0);
    CHECK(t.beta_2x[row] == 0.0);
  }
}

void check_periodic(const TwissTable& t, double tol) {
  const size_t n = t.size() - 1;
  CHECK(t.beta_x[n] == doctest::Approx(t.beta_x[0]).epsilon(tol));
  CHECK(t.beta_y[n] == doctest::Approx(t.beta_y[0]).epsilon(tol));
  CHECK(std::fabs(t.alpha_x[n] - t.alpha_x[0]) < tol * (1.0 + std::fabs(t.alpha_x[0])));
  CHECK(std::fabs(t.alpha_y[n] - t.alpha_y[0]) < tol * (1.0 + std::fabs(t.alpha_y[0])));
  CHECK(std::fabs(t.beta_1y[n] - t.beta_1y[0]) < tol * t.beta_1x[0]);
  CHECK(std::fabs(t.beta_2x[n] - t.beta_2x[0]) < tol * t.beta_2y[0]);
  const double dscale = 1.0 + std::fabs(t.dx[0]);
  CHECK(std::fabs(t.dx[n] - t.dx[0]) < tol * dscale);
  CHECK(std::fabs(t.dpx[n] - t.dpx[0]) < tol * dscale);
  CHECK(std::fabs(t.dy[n] - t.dy[0]) < tol * dscale);
  CHECK(std::fabs(t.dpy[n] - t.dpy[0]) < tol * dscale);
  CHECK(std::fabs(t.x[n] - t.x[0]) < 1e-10);
  CHECK(std::fabs(t.px[n] - t.px[0]) < 1e-10);
  CHECK(t.periodicity_error < tol);
  // The phase advances never decrease, except at a frame rotation in a coupled ring (the phase
  // of v_1x, v_2y changes when x and y are mixed by the rotation).
  for (size_t r = 1; r < t.size(); ++r) {
    CAPTURE(r);
    if (t.type[r] != "SRotation") {
      CHECK(t.mu_x[r] >= t.mu_x[r - 1] - 1e-12);
      CHECK(t.mu_y[r] >= t.mu_y[r - 1] - 1e-12);
    }
    CHECK(t.s[r] >= t.s[r - 1]);
  }
  CHECK(t.s[n] == doctest::Approx(t.circumference).epsilon(1e-12));
}

/// The start of the table against compute_linear_optics (the same orbit, the one-turn map).
void check_start_against_linear_optics(const TwissTable& t, const LinearOptics& o, double tol) {
  CHECK(t.beta_x[0] == doctest::Approx(o.beta_x).epsilon(tol));
  CHECK(t.beta_y[0] == doctest::Approx(o.beta_y).epsilon(tol));
  CHECK(std::fabs(t.alpha_x[0] - o.alpha_x) < tol * (1.0 + std::fabs(o.alpha_x)));
  CHECK(std::fabs(t.alpha_y[0] - o.alpha_y) < tol * (1.0 + std::fabs(o.alpha_y)));
  CHECK(std::fabs(t.dx[0] - o.dx) < tol * (1.0 + std::fabs(o.dx)));
  CHECK(std::fabs(t.dpx[0] - o.dpx) < tol * (1.0 + std::fabs(o.dpx)));
  CHECK(std::fabs(t.q1 - std::floor(t.q1) - o.qx) < tol);
  CHECK(std::fabs(t.q2 - std::floor(t.q2) - o.qy) < tol);
  CHECK(t.x[0] == o.closed_orbit[0]);
  CHECK(t.y[0] == o.closed_orbit[2]);
  CHECK(t.delta[0] == o.closed_orbit[5]);
}

// ---- thin FODO (bundled fodo_ring.json: 16 cells, k1l = +-0.18 1/m, 5 m drifts) ----
constexpr double kL = 5.0, kK1l = 0.18;
constexpr int kCells = 16;

RingBuilder thin_fodo(int cells, double k1f, double k1d, double theta = 0.0) {
  RingBuilder b;
  b.define("qf_half", {{"type", "Multipole"}, {"knl", {theta / 2, k1f / 2}}, {"hxl", theta / 2}});
  b.define("qd", {{"type", "Multipole"}, {"knl", {theta, -k1d}}, {"hxl", theta}});
  b.define("d", {{"type", "Drift"}, {"length", kL}});
  for (int c = 0; c < cells; ++c) {
    b.add("qf_half", thin(k1f / 2, 0.0, theta / 2));
    b.add("d", drift(kL));
    b.add("qd", thin(-k1d, 0.0, theta));
    b.add("d", drift(kL));
    b.add("qf_half", thin(k1f / 2, 0.0, theta / 2));
  }
  return b;
}

// ---- coupled expectations: Mais-Ripken parameters of the one-turn matrix at one position ----
/// The two modes in no particular order (u of the larger first), with the x block of their
/// projectors (2 for a pure x mode, 0 for a pure y mode).
struct ModeOptics {
  double beta_x[2], alpha_x[2], beta_y[2], alpha_y[2];
  double cos_mu[2], x_part[2];
};

ModeOptics mode_optics(const M4& m) {
  const M4 mi = symplectic_inverse(m);
  const M4 m2 = mul(m, m);
  double tr = 0.0, tr2 = 0.0;
  for (size_t i = 0; i < 4; ++i) {
    tr += m[i][i];
    tr2 += m2[i][i];
  }
  // u1 + u2 = tr M, u1^2 + u2^2 = tr M^2 + 4 (eigenvalues e^{+-i mu_k}).
  const double prod = 0.5 * (tr * tr - tr2 - 4.0);
  const double disc = std::sqrt(tr * tr / 4.0 - prod);
  const double u[2] = {tr / 2.0 + disc, tr / 2.0 - disc};
  double x_part[2], cos_mu[2];
  M4 sigma[2];
  for (size_t k = 0; k < 2; ++k) {
    const double uk = u[k], uj = u[1 - k];
    M4 pi{};
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 4; ++j) pi[i][j] = (m[i][j] + mi[i][j] - (i == j ? uj : 0.0)) / (uk - uj);
    const M4 mp = mul(m, pi);
    const double c = uk / 2.0;
    // Sigma = J S^T with J = (M Pi - cos Pi) / sin; S^T = [[0, -1], [1, 0]] per plane:
    // Sigma[i][0] = J[i][1], Sigma[i][1] = -J[i][0] (and the same for y).
    auto make_sigma = [&](double sin_mu) {
      M4 j{}, sg{};
      for (size_t a = 0; a < 4; ++a)
        for (size_t b = 0; b < 4; ++b) j[a][b] = (mp[a][b] - c * pi[a][b]) / sin_mu;
      for (size_t a = 0; a < 4; ++a) {
        sg[a][0] = j[a][1];
        sg[a][1] = -j[a][0];
        sg[a][2] = j[a][3];
        sg[a][3] = -j[a][2];
      }
      return sg;
    };
    const double s = std::sqrt(1.0 - c * c);
    M4 sg = make_sigma(s);
    if (sg[0][0] + sg[2][2] < 0.0) sg = make_sigma(-s);  // Sigma is positive semi-definite
    sigma[k] = sg;
    x_part[k] = pi[0][0] + pi[1][1];
    cos_mu[k] = c;
  }
  ModeOptics r{};
  for (size_t k = 0; k < 2; ++k) {
    r.beta_x[k] = sigma[k][0][0];
    r.alpha_x[k] = -sigma[k][0][1];
    r.beta_y[k] = sigma[k][2][2];
    r.alpha_y[k] = -sigma[k][2][3];
    r.cos_mu[k] = cos_mu[k];
    r.x_part[k] = x_part[k];
  }
  return r;
}

/// Dispersion at a position: (I - M) D = d of the one-turn map there.
std::array<double, 4> periodic_dispersion(const Map& one_turn) {
  // Gaussian elimination on 4x4.
  std::array<std::array<double, 5>, 4> a{};
  for (size_t i = 0; i < 4; ++i) {
    for (size_t k = 0; k < 4; ++k) a[i][k] = (i == k ? 1.0 : 0.0) - one_turn.m[i][k];
    a[i][4] = one_turn.d[i];
  }
  for (size_t c = 0; c < 4; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < 4; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    std::swap(a[p], a[c]);
    for (size_t r = 0; r < 4; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < 5; ++k) a[r][k] -= f * a[c][k];
    }
  }
  return {a[0][4] / a[0][0], a[1][4] / a[1][1], a[2][4] / a[2][2], a[3][4] / a[3][3]};
}

/// Every row of a table against the one-turn matrix re-diagonalised there: the dispersion, and
/// (when `betas`; the projectors need distinct mode tunes) the Mais-Ripken parameters, each of the
/// table's modes compared with the matrix's mode of the same tune (cos 2 pi Q). Mode 1 must be the
/// one with the larger x part at the start.
void check_against_one_turn_matrices(const TwissTable& t, const RingBuilder& b, double tol, bool betas = true) {
  const auto r = b.partial_products();
  REQUIRE(t.size() == r.size());
  const Map& ring = r.back();
  const double table_cos[2] = {std::cos(2.0 * kPi * t.q1), std::cos(2.0 * kPi * t.q2)};
  for (size_t row = 0; row < t.size(); ++row) {
    CAPTURE(row);
    // One-turn map at the position: R_s M_0 R_s^-1, R_s^-1 = (Rm^-1, -Rm^-1 Rd).
    Map inv;
    inv.m = symplectic_inverse(r[row].m);
    for (size_t i = 0; i < 4; ++i) {
      inv.d[i] = 0.0;
      for (size_t k = 0; k < 4; ++k) inv.d[i] -= inv.m[i][k] * r[row].d[k];
    }
    const Map at = mul(r[row], mul(ring, inv));
    const auto d = periodic_dispersion(at);
    const double got[4] = {t.dx[row], t.dpx[row], t.dy[row], t.dpy[row]};
    for (size_t i = 0; i < 4; ++i) CHECK(std::fabs(got[i] - d[i]) < tol * (1.0 + std::fabs(d[i])));
    if (!betas) continue;
    const ModeOptics mo = mode_optics(at.m);
    // Which matrix mode has the tune of the table's mode 1.
    const size_t m1 = std::fabs(mo.cos_mu[0] - table_cos[0]) <= std::fabs(mo.cos_mu[1] - table_cos[0]) ? 0 : 1;
    const size_t m2 = 1 - m1;
    CHECK(mo.cos_mu[m1] == doctest::Approx(table_cos[0]).epsilon(tol));
    CHECK(mo.cos_mu[m2] == doctest::Approx(table_cos[1]).epsilon(tol));
    if (row == 0) CHECK(mo.x_part[m1] >= mo.x_part[m2] - 1e-9);
    const double scale = std::max(mo.beta_x[m1], mo.beta_y[m2]);
    CHECK(std::fabs(t.beta_1x[row] - mo.beta_x[m1]) < tol * scale);
    CHECK(std::fabs(t.beta_1y[row] - mo.beta_y[m1]) < tol * scale);
    CHECK(std::fabs(t.beta_2x[row] - mo.beta_x[m2]) < tol * scale);
    CHECK(std::fabs(t.beta_2y[row] - mo.beta_y[m2]) < tol * scale);
    CHECK(std::fabs(t.alpha_1x[row] - mo.alpha_x[m1]) < tol * (1.0 + std::fabs(mo.alpha_x[m1])));
    CHECK(std::fabs(t.alpha_1y[row] - mo.alpha_y[m1]) < tol * (1.0 + std::fabs(mo.alpha_y[m1])));
    CHECK(std::fabs(t.alpha_2x[row] - mo.alpha_x[m2]) < tol * (1.0 + std::fabs(mo.alpha_x[m2])));
    CHECK(std::fabs(t.alpha_2y[row] - mo.alpha_y[m2]) < tol * (1.0 + std::fabs(mo.alpha_y[m2])));
    CHECK(t.beta_x[row] == t.beta_1x[row]);
    CHECK(t.beta_y[row] == t.beta_2y[row]);
  }
}

/// Thin FODO ring with different horizontal and vertical tunes, thin bends at the quadrupoles,
/// one skew quadrupole and one quadrupole tilted by SRotations (or by its rot_s_rad field).
RingBuilder coupled_ring(double k1sl, double tilt_deg, bool tilt_as_field = false) {
  const double theta = 2.0 * kPi / 24.0;  // 12 cells, bends at QF (two halves) and QD
  RingBuilder b;
  const double k1f = 0.20, k1d = 0.16;
  b.define("qf_half", {{"type", "Multipole"}, {"knl", {theta / 4, k1f / 2}}, {"hxl", theta / 4}});
  b.define("qd", {{"type", "Multipole"}, {"knl", {theta / 2, -k1d}}, {"hxl", theta / 2}});
  b.define("d", {{"type", "Drift"}, {"length", kL / 2}});
  b.define("skew", {{"type", "Multipole"}, {"knl", {0.0, 0.0}}, {"ksl", {0.0, k1sl}}});
  b.define("rot_in", {{"type", "SRotation"}, {"angle", tilt_deg}});
  b.define("rot_out", {{"type", "SRotation"}, {"angle", -tilt_deg}});
  b.define("qt", {{"type", "Multipole"}, {"knl", {0.0, 0.03}}});
  b.define("qt_tilted", {{"type", "Multipole"}, {"knl", {0.0, 0.03}}, {"rot_s_rad", tilt_deg / 180.0 * kPi}});
  for (int c = 0; c < 12; ++c) {
    b.add("qf_half", thin(k1f / 2, 0.0, theta / 4));
    b.add("d", drift(kL / 2));
    if (c == 3) b.add("skew", thin(0.0, k1sl));
    b.add("d", drift(kL / 2));
    b.add("qd", thin(-k1d, 0.0, theta / 2));
    b.add("d", drift(kL / 2));
    if (c == 8 && tilt_as_field) {
      // rot_s_rad = psi: SRotation(psi), the element, SRotation(-psi) (xtrack's frame change).
      b.add("qt_tilted", mul(rotation(-tilt_deg), mul(thin(0.03), rotation(tilt_deg))));
    } else if (c == 8) {
      b.add("rot_in", rotation(tilt_deg));
      b.add("qt", thin(0.03));
      b.add("rot_out", rotation(-tilt_deg));
    }
    b.add("d", drift(kL / 2));
    b.add("qf_half", thin(k1f / 2, 0.0, theta / 4));
  }
  return b;
}

/// The same ring entered at sequence entry `k`, in fusetrack's format.
Lattice rotated(const Lattice& lattice, size_t k) {
  json doc = lattice_to_json(lattice);
  auto& seq = doc["sequence"];
  std::vector<json> items(seq.begin(), seq.end());
  std::rotate(items.begin(), items.begin() + static_cast<long>(k), items.end());
  doc["sequence"] = items;
  return lattice_from_json(doc, "rotated", test::builtin_registry());
}

/// The table at the entrance of element k (row k) against the one-turn map of the ring entered
/// there (the same closed orbit, another finite-difference probe of the whole turn).
void check_against_rotated(const Lattice& lattice, const TwissTable& t, size_t k, const OpticsOptions& options,
                           double tol) {
  CAPTURE(k);
  const LinearOptics o = compute_linear_optics(rotated(lattice, k), options);
  CHECK(t.beta_x[k] == doctest::Approx(o.beta_x).epsilon(tol));
  CHECK(t.beta_y[k] == doctest::Approx(o.beta_y).epsilon(tol));
  CHECK(std::fabs(t.alpha_x[k] - o.alpha_x) < tol * (1.0 + std::fabs(o.alpha_x)));
  CHECK(std::fabs(t.alpha_y[k] - o.alpha_y) < tol * (1.0 + std::fabs(o.alpha_y)));
  CHECK(std::fabs(t.dx[k] - o.dx) < tol * (1.0 + std::fabs(o.dx)));
  CHECK(std::fabs(t.dpx[k] - o.dpx) < tol * (1.0 + std::fabs(o.dpx)));
  CHECK(std::fabs(t.x[k] - o.closed_orbit[0]) < 1e-9);
  CHECK(std::fabs(t.px[k] - o.closed_orbit[1]) < 1e-9);
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("Twiss along the thin FODO ring: closed forms at QF and QD, phase advance per cell, propagation") {
  const RingBuilder b = thin_fodo(kCells, kK1l, kK1l);
  const Lattice lattice = b.lattice("thin_fodo");
  const TwissTable t = compute_twiss_table(lattice, linear_options());
  // Thin FODO cell: sin(mu/2) = L k1l / 2, beta at QF / QD = 2 L (1 +- sin(mu/2)) / sin mu.
  const double mu = 2.0 * std::asin(kL * kK1l / 2.0);
  const double beta_qf = 2.0 * kL * (1.0 + std::sin(mu / 2.0)) / std::sin(mu);
  const double beta_qd = 2.0 * kL * (1.0 - std::sin(mu / 2.0)) / std::sin(mu);
  REQUIRE(t.size() == 5 * kCells + 1);
  for (int c = 0; c < kCells; ++c) {
    const size_t qf = static_cast<size_t>(5 * c);  // row before the cell's first qf_half: the QF centre
    const size_t qd = qf + 3;                      // row after its QD
    CAPTURE(c);
    CHECK(t.beta_x[qf] == doctest::Approx(beta_qf).epsilon(1e-10));
    CHECK(t.beta_y[qf] == doctest::Approx(beta_qd).epsilon(1e-10));
    CHECK(std::fabs(t.alpha_x[qf]) < 1e-10);
    CHECK(t.beta_x[qd] == doctest::Approx(beta_qd).epsilon(1e-10));
    CHECK(t.beta_y[qd] == doctest::Approx(beta_qf).epsilon(1e-10));
    CHECK(t.mu_x[qf + 5] - t.mu_x[qf] == doctest::Approx(mu / (2.0 * kPi)).epsilon(1e-10));
    CHECK(t.mu_y[qf + 5] - t.mu_y[qf] == doctest::Approx(mu / (2.0 * kPi)).epsilon(1e-10));
    CHECK(t.name[qf + 1] == "qf_half");
    CHECK(t.type[qf + 1] == "Multipole");
    CHECK(t.s[qd] == doctest::Approx(2.0 * kL * c + kL).epsilon(1e-14));
  }
  CHECK(t.name[0] == "_start");
  CHECK(t.q1 == doctest::Approx(kCells * mu / (2.0 * kPi)).epsilon(1e-10));
  CHECK(t.q1 > 1.0);  // the integer part is kept
  CHECK(t.max_coupling == 0.0);
  CHECK(t.dx[0] == 0.0);
  check_uncoupled_against_matrices(t, b, 1e-9);
  check_periodic(t, 1e-9);
  check_start_against_linear_optics(t, compute_linear_optics(lattice, linear_options()), 1e-9);
}

TEST_CASE("Twiss along a thick-quadrupole FODO ring (sliced): exact thick matrices, periodic cell values") {
  // Cell: QF/2 (2 slices), drift, QD (4 slices), drift, QF/2 (2 slices); k1 = +-0.05 1/m^2.
  const double lq = 1.0, k1 = 0.05, ld = 4.0;
  RingBuilder b;
  b.define("qf_slice", {{"type", "Quadrupole"}, {"length", lq / 4}, {"k1", k1}});
  b.define("qd_slice", {{"type", "Quadrupole"}, {"length", lq / 4}, {"k1", -k1}});
  b.define("d", {{"type", "Drift"}, {"length", ld}});
  b.define("m", {{"type", "Marker"}});
  for (int c = 0; c < 10; ++c) {
    for (int i = 0; i < 2; ++i) b.add("qf_slice", thick_quad(lq / 4, k1));
    b.add("d", drift(ld));
    for (int i = 0; i < 4; ++i) b.add("qd_slice", thick_quad(lq / 4, -k1));
    b.add("d", drift(ld));
    for (int i = 0; i < 2; ++i) b.add("qf_slice", thick_quad(lq / 4, k1));
    b.add("m", identity());
  }
  const Lattice lattice = b.lattice("thick_fodo");
  const TwissTable t = compute_twiss_table(lattice, linear_options());
  // Periodic cell from the QF centre: beta = m12 / sin mu of the cell's exact matrix.
  Map cell = identity();
  for (size_t e = 0; e < 11; ++e) cell = mul(b.maps[e], cell);
  const double cos_mu = 0.5 * (cell.m[0][0] + cell.m[1][1]);
  const double sin_mu = std::sqrt(1.0 - cos_mu * cos_mu);
  const double cos_mu_y = 0.5 * (cell.m[2][2] + cell.m[3][3]);
  for (int c = 0; c < 10; ++c) {
    const size_t row = static_cast<size_t>(11 * c);
    CAPTURE(c);
    CHECK(t.beta_x[row] == doctest::Approx(cell.m[0][1] / sin_mu).epsilon(1e-9));
    CHECK(std::fabs(t.alpha_x[row]) < 1e-9);
    CHECK(std::cos(2.0 * kPi * (t.mu_x[row + 11] - t.mu_x[row])) == doctest::Approx(cos_mu).epsilon(1e-9));
    CHECK(std::cos(2.0 * kPi * (t.mu_y[row + 11] - t.mu_y[row])) == doctest::Approx(cos_mu_y).epsilon(1e-9));
  }
  check_uncoupled_against_matrices(t, b, 1e-9);
  check_periodic(t, 1e-9);
}

TEST_CASE("Weak-focusing ring of thick combined-function sector bends: constant beta, dispersion, phase advance") {
  // A ring of identical sector bends (radius R, field index n: k1 = -n / R^2) focuses as
  // Kx = (1 - n) / R^2, Ky = n / R^2: beta_x = 1 / sqrt(Kx), beta_y = 1 / sqrt(Ky), alpha = 0,
  // D_x = h / Kx = R / (1 - n), mu = s sqrt(K) / 2 pi, Qx = sqrt(1 - n), Qy = sqrt(n) (the
  // classical weak-focusing betatron; Wolski 2014, sec. 3.1). Model 2 integrates the linear part
  // exactly; model 0 (AT's BndMPoleSymplectic4Pass) to 4th order in its 10 steps.
  const double radius = 10.0, n_index = 0.4;
  const int bends = 16;
  const double angle = 2.0 * kPi / bends, length = radius * angle;
  const double kx = (1.0 - n_index) / (radius * radius), ky = n_index / (radius * radius);
  for (int model : {2, 0}) {
    CAPTURE(model);
    const double tol = model == 2 ? 1e-9 : 1e-5;
    RingBuilder b;
    b.define("b", {{"type", "Bend"},
                   {"length", length},
                   {"angle", angle},
                   {"k1", -n_index / (radius * radius)},
                   {"model", model}});
    for (int i = 0; i < bends; ++i) b.doc["sequence"].push_back("b");
    const TwissTable t = compute_twiss_table(b.lattice("weak_focusing"), linear_options());
    REQUIRE(t.size() == static_cast<size_t>(bends + 1));
    for (size_t r = 0; r < t.size(); ++r) {
      CAPTURE(r);
      CHECK(t.beta_x[r] == doctest::Approx(1.0 / std::sqrt(kx)).epsilon(tol));
      CHECK(t.beta_y[r] == doctest::Approx(1.0 / std::sqrt(ky)).epsilon(tol));
      CHECK(std::fabs(t.alpha_x[r]) < tol);
      CHECK(std::fabs(t.alpha_y[r]) < tol);
      CHECK(t.dx[r] == doctest::Approx(radius / (1.0 - n_index)).epsilon(tol));
      CHECK(std::fabs(t.dpx[r]) < tol);
      CHECK(t.mu_x[r] == doctest::Approx(t.s[r] * std::sqrt(kx) / (2.0 * kPi)).epsilon(tol));
      CHECK(t.mu_y[r] == doctest::Approx(t.s[r] * std::sqrt(ky) / (2.0 * kPi)).epsilon(tol));
      CHECK(t.type[r] == (r == 0 ? "" : "Bend"));
    }
    CHECK(t.q1 == doctest::Approx(std::sqrt(1.0 - n_index)).epsilon(tol));
    CHECK(t.q2 == doctest::Approx(std::sqrt(n_index)).epsilon(tol));
    check_periodic(t, tol);
  }
}

TEST_CASE("Dispersion along a ring of thin bends: periodic thin-lens values at QF and QD, and at every element") {
  const double theta = 2.0 * kPi / (2 * kCells);
  const RingBuilder b = thin_fodo(kCells, kK1l, kK1l, theta);
  const Lattice lattice = b.lattice("bend_fodo");
  const TwissTable t = compute_twiss_table(lattice, linear_options());
  // Periodic solution of the cell's matrices written out here, and the classic thin-lens FODO
  // closed form (S. Y. Lee, "Accelerator Physics", sec. 2.IV), with L the half-cell length and
  // theta the bend per half cell: D_QF,QD = L theta (1 +- sin(mu/2) / 2) / sin^2(mu/2).
  const double mu = 2.0 * std::asin(kL * kK1l / 2.0);
  CHECK(t.q1 == doctest::Approx(kCells * mu / (2.0 * kPi)).epsilon(1e-10));
  Map cell = identity();
  for (size_t e = 0; e < 5; ++e) cell = mul(b.maps[e], cell);
  const auto d_qf = periodic_dispersion(cell);
  const Map half = mul(b.maps[2], mul(b.maps[1], b.maps[0]));
  const double d_qd = half.m[0][0] * d_qf[0] + half.m[0][1] * d_qf[1] + half.d[0];
  const double sh = std::sin(mu / 2.0);
  CHECK(d_qf[0] == doctest::Approx(kL * theta * (1.0 + sh / 2.0) / (sh * sh)).epsilon(1e-12));
  CHECK(d_qd == doctest::Approx(kL * theta * (1.0 - sh / 2.0) / (sh * sh)).epsilon(1e-12));
  for (int c = 0; c < kCells; ++c) {
    const size_t qf = static_cast<size_t>(5 * c);
    CAPTURE(c);
    CHECK(t.dx[qf] == doctest::Approx(d_qf[0]).epsilon(1e-9));
    CHECK(std::fabs(t.dpx[qf]) < 1e-10);
    CHECK(t.dx[qf + 3] == doctest::Approx(d_qd).epsilon(1e-9));
    CHECK(t.dy[qf] == 0.0);
  }
  check_against_one_turn_matrices(t, b, 1e-9, false);  // Qx = Qy: the betas are checked above
  check_uncoupled_against_matrices(t, b, 1e-9);
  check_periodic(t, 1e-9);
  check_start_against_linear_optics(t, compute_linear_optics(lattice, linear_options()), 1e-9);
}

TEST_CASE(
    "Coupled ring (skew quadrupole, tilted quadrupole): Mais-Ripken betas against the one-turn matrix at every "
    "element") {
  const RingBuilder b = coupled_ring(0.02, 20.0);
  const Lattice lattice = b.lattice("coupled");
  const TwissTable t = compute_twiss_table(lattice, linear_options());
  CHECK(t.max_coupling > 0.01);  // really coupled
  bool cross_terms = false;
  for (size_t r = 0; r < t.size(); ++r) cross_terms |= t.beta_1y[r] > 0.01 * t.beta_1x[r];
  CHECK(cross_terms);
  double dy_max = 0.0;
  for (double v : t.dy) dy_max = std::max(dy_max, std::fabs(v));
  CHECK(dy_max > 1e-3);  // vertical dispersion from the coupling of the bends' dispersion
  check_against_one_turn_matrices(t, b, 1e-8);
  check_periodic(t, 1e-8);
  // The mode tunes against the Edwards-Teng eigen-tunes of the one-turn matrix.
  const LinearOptics o = compute_linear_optics(lattice, linear_options());
  CHECK(std::fabs(t.q1 - std::floor(t.q1) - o.qx) < 1e-9);
  CHECK(std::fabs(t.q2 - std::floor(t.q2) - o.qy) < 1e-9);
}

TEST_CASE("Element transformations: a tilted quadrupole (rot_s_rad) and a shifted one (shift_x, shift_y)") {
  // Tilt given as the element's rot_s_rad: the same optics as with SRotation elements around it.
  const RingBuilder field = coupled_ring(0.0, 20.0, true);
  const TwissTable tf = compute_twiss_table(field.lattice("tilt_field"), linear_options());
  CHECK(tf.max_coupling > 0.01);
  check_against_one_turn_matrices(tf, field, 1e-8);
  check_periodic(tf, 1e-8);
  const TwissTable te = compute_twiss_table(coupled_ring(0.0, 20.0, false).lattice("tilt_elements"), linear_options());
  CHECK(tf.q1 == doctest::Approx(te.q1).epsilon(1e-12));
  CHECK(tf.q2 == doctest::Approx(te.q2).epsilon(1e-12));

  // A thin quadrupole k1l displaced by (dx, dy) kicks as px += k1l dx, py -= k1l dy on top of its
  // focusing: the closed orbit equals that of the aligned ring with those dipole kicks
  // (Multipole knl[0] = -k1l dx, ksl[0] = -k1l dy right after the quadrupole).
  const double dx = 2e-4, dy = -1e-4, k1l = 0.03;
  auto ring = [&](bool shifted) {
    RingBuilder b = coupled_ring(0.0, 0.0);
    if (shifted) {
      b.define("qs", {{"type", "Multipole"}, {"knl", {0.0, k1l}}, {"shift_x", dx}, {"shift_y", dy}});
      b.add("qs", thin(k1l));
    } else {
      b.define("q", {{"type", "Multipole"}, {"knl", {0.0, k1l}}});
      b.define("kick", {{"type", "Multipole"}, {"knl", {-k1l * dx}}, {"ksl", {-k1l * dy}}});
      b.add("q", thin(k1l));
      b.add("kick", identity());
    }
    return b.lattice(shifted ? "shifted" : "kicked");
  };
  const TwissTable ts = compute_twiss_table(ring(true), linear_options());
  const TwissTable tk = compute_twiss_table(ring(false), linear_options());
  REQUIRE(ts.size() + 1 == tk.size());
  double orbit = 0.0;
  for (size_t r = 0; r < ts.size(); ++r) {
    CAPTURE(r);
    const size_t k = r + 1 == ts.size() ? r + 1 : r;  // the shifted quadrupole's exit: after the kick
    CHECK(std::fabs(ts.x[r] - tk.x[k]) < 1e-15);
    CHECK(std::fabs(ts.y[r] - tk.y[k]) < 1e-15);
    CHECK(std::fabs(ts.px[r] - tk.px[k]) < 1e-15);
    CHECK(std::fabs(ts.py[r] - tk.py[k]) < 1e-15);
    CHECK(ts.beta_x[r] == doctest::Approx(tk.beta_x[k]).epsilon(1e-9));
    CHECK(ts.beta_y[r] == doctest::Approx(tk.beta_y[k]).epsilon(1e-9));
    orbit = std::max(orbit, std::fabs(ts.x[r]) + std::fabs(ts.y[r]));
  }
  CHECK(orbit > 1e-5);  // the displacement really moves the orbit
  check_periodic(ts, 1e-9);
}

TEST_CASE("The uncoupled case is the limit of the coupled normal form") {
  // A skew quadrupole of 1e-9 1/m: mode 1 in x equals the uncoupled beta_x to ~1e-9.
  const RingBuilder weak = coupled_ring(1e-9, 0.0);
  const RingBuilder none = coupled_ring(0.0, 0.0);
  const TwissTable tw = compute_twiss_table(weak.lattice("weak"), linear_options());
  const TwissTable t0 = compute_twiss_table(none.lattice("none"), linear_options());
  CHECK(t0.max_coupling == 0.0);
  CHECK(tw.max_coupling > 0.0);
  CHECK(tw.max_coupling < 1e-12);
  REQUIRE(tw.size() == t0.size());
  for (size_t r = 0; r < tw.size(); ++r) {
    CAPTURE(r);
    CHECK(tw.beta_1x[r] == doctest::Approx(t0.beta_x[r]).epsilon(1e-8));
    CHECK(tw.beta_2y[r] == doctest::Approx(t0.beta_y[r]).epsilon(1e-8));
    CHECK(std::fabs(tw.alpha_1x[r] - t0.alpha_x[r]) < 1e-8);
    CHECK(std::fabs(tw.mu_x[r] - t0.mu_x[r]) < 1e-8);
    CHECK(std::fabs(tw.mu_y[r] - t0.mu_y[r]) < 1e-8);
    CHECK(std::fabs(tw.dx[r] - t0.dx[r]) < 1e-8);
  }
  check_uncoupled_against_matrices(t0, none, 1e-9);
}

TEST_CASE("On the difference resonance (Qx = Qy and a skew quadrupole): fully mixed modes, still exact") {
  // The symmetric thin FODO has Qx = Qy; a skew quadrupole splits the mode tunes and mixes the
  // planes fully (beta_1y ~ beta_1x).
  RingBuilder b = thin_fodo(kCells, kK1l, kK1l);
  b.define("skew", {{"type", "Multipole"}, {"knl", {0.0, 0.0}}, {"ksl", {0.0, 1e-2}}});
  b.add("skew", thin(0.0, 1e-2));
  const TwissTable t = compute_twiss_table(b.lattice("resonance"), linear_options());
  CHECK(t.max_coupling > 0.3);
  CHECK(std::fabs(t.q1 - t.q2) > 1e-4);
  check_against_one_turn_matrices(t, b, 1e-8);
  check_periodic(t, 1e-8);
}

// ---- total tunes ----

/// Thin FODO ring (16 cells, k1l = +0.22 / -0.16 1/m): fractional tunes 0.330 and 0.364 (0.03 apart,
/// near the difference resonance), with one skew quadrupole k1sl at the end.
RingBuilder close_tune_ring(double k1sl) {
  RingBuilder b = thin_fodo(kCells, 0.22, 0.16);
  b.define("skew", {{"type", "Multipole"}, {"knl", {0.0, 0.0}}, {"ksl", {0.0, k1sl}}});
  b.add("skew", thin(0.0, k1sl));
  return b;
}

/// Full phase advances (mu_x, mu_y) [turns] of an uncoupled ring from the element matrices
/// (Courant-Snyder propagation, each element's atan2 step), started at the periodic solution.
std::array<double, 2> uncoupled_phase_advance(const RingBuilder& b) {
  const M4 m = b.partial_products().back().m;  // a copy: partial_products() returns a temporary
  Twiss2 tw[2];
  for (size_t p = 0; p < 2; ++p) {
    const size_t o = 2 * p;
    const double c = 0.5 * (m[o][o] + m[o + 1][o + 1]);
    const double s = std::copysign(std::sqrt(1.0 - c * c), m[o][o + 1]);
    tw[p] = {m[o][o + 1] / s, (m[o][o] - m[o + 1][o + 1]) / (2.0 * s), 0.0};
  }
  for (const Map& e : b.maps) {
    tw[0] = propagate(tw[0], e.m[0][0], e.m[0][1], e.m[1][0], e.m[1][1]);
    tw[1] = propagate(tw[1], e.m[2][2], e.m[2][3], e.m[3][2], e.m[3][3]);
  }
  return {tw[0].mu, tw[1].mu};
}

/// Fractional eigen-tunes of the 4x4 one-turn matrix of the test's element matrices (tr M and tr M^2,
/// acos in [0, 1/2]: these rings have m12, m34 > 0), the one nearest `q_near` first.
std::array<double, 2> matrix_eigen_tunes(const RingBuilder& b, double q_near) {
  const ModeOptics mo = mode_optics(b.partial_products().back().m);
  double q[2];
  for (size_t k = 0; k < 2; ++k) q[k] = std::acos(mo.cos_mu[k]) / (2.0 * kPi);
  if (std::fabs(q[1] - q_near) < std::fabs(q[0] - q_near)) std::swap(q[0], q[1]);
  return {q[0], q[1]};
}

TEST_CASE(
    "Total tunes of a coupled ring: the matrix's eigen-tunes plus the uncoupled ring's phase-advance integers, "
    "continuous as the skew quadrupole vanishes") {
  const RingBuilder none = close_tune_ring(0.0);
  const std::array<double, 2> mu0 = uncoupled_phase_advance(none);
  const double nx = std::floor(mu0[0]), ny = std::floor(mu0[1]);
  REQUIRE(nx == 3.0);  // Qx ~ 3.33, Qy ~ 1.36: the integers differ, the fractions are close
  REQUIRE(ny == 1.0);
  const TwissTable t0 = compute_twiss_table(none.lattice("uncoupled"), linear_options());
  CHECK(t0.max_coupling == 0.0);
  CHECK(std::fabs(t0.qx_total - mu0[0]) < 1e-9);
  CHECK(std::fabs(t0.qy_total - mu0[1]) < 1e-9);

  // The skew quadrupole from strong (tune split 0.05 against 0.03 uncoupled) to 1e-6.
  double last_dx = std::numeric_limits<double>::infinity(), last_dy = last_dx;
  for (double k1sl : {2e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-5, 1e-6}) {
    CAPTURE(k1sl);
    const RingBuilder b = close_tune_ring(k1sl);
    const Lattice lattice = b.lattice("coupled");
    const LinearOptics o = compute_linear_optics(lattice, linear_options());
    const TwissTable t = compute_twiss_table(lattice, o, linear_options());
    // The summary's fractional tunes are the eigen-tunes of the one-turn matrix.
    const auto q = matrix_eigen_tunes(b, mu0[0] - nx);
    CHECK(std::fabs(o.qx - q[0]) < 1e-9);
    CHECK(std::fabs(o.qy - q[1]) < 1e-9);
    // Total tunes: those fractions and the integers of the uncoupled ring (no resonance crossed),
    // equal to the accumulated phase advance of each mode.
    CHECK(t.qx_total == doctest::Approx(nx + q[0]).epsilon(1e-12));
    CHECK(t.qy_total == doctest::Approx(ny + q[1]).epsilon(1e-12));
    CHECK(std::fabs(t.q1 - t.qx_total) < 1e-9);
    CHECK(std::fabs(t.q2 - t.qy_total) < 1e-9);
    // Continuity: the coupled total tunes approach the uncoupled ones as k1sl -> 0 (shift ~ k1sl^2).
    const double dx = std::fabs(t.qx_total - mu0[0]), dy = std::fabs(t.qy_total - mu0[1]);
    CHECK(dx <= last_dx);
    CHECK(dy <= last_dy);
    last_dx = dx;
    last_dy = dy;
    if (k1sl == 2e-2) {
      CHECK(std::fabs(t.qy_total - t.qx_total) > 0.04);  // really coupled: the modes repel
      CHECK(t.max_coupling > 0.05);
      // The tunes of tracked particles (NAFF on 1024 turns) are those of the summary.
      const TrackedTunes tr = tunes_by_tracking(lattice, o, 1024, linear_options());
      CHECK(std::fabs(tr.qx - o.qx) < 1e-6);
      CHECK(std::fabs(tr.qy - o.qy) < 1e-6);
    }
  }
  CHECK(last_dx < 1e-9);
  CHECK(last_dy < 1e-9);
}

/// The eigenvalues of a real 4x4 matrix: Durand-Kerner iteration on det(M - z) (complex Gaussian
/// elimination, no characteristic polynomial), started on a circle of radius 1.1.
std::array<std::complex<double>, 4> eigenvalues_4x4(const M4& m) {
  using C = std::complex<double>;
  auto det = [&](C z) {
    std::array<std::array<C, 4>, 4> a{};
    for (size_t i = 0; i < 4; ++i)
      for (size_t k = 0; k < 4; ++k) a[i][k] = m[i][k] - (i == k ? z : C(0.0));
    C d = 1.0;
    for (size_t c = 0; c < 4; ++c) {
      size_t p = c;
      for (size_t r = c + 1; r < 4; ++r)
        if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
      if (p != c) {
        std::swap(a[p], a[c]);
        d = -d;
      }
      d *= a[c][c];
      for (size_t r = c + 1; r < 4; ++r) {
        const C f = a[r][c] / a[c][c];
        for (size_t k = c; k < 4; ++k) a[r][k] -= f * a[c][k];
      }
    }
    return d;
  };
  std::array<C, 4> z{};
  for (size_t k = 0; k < 4; ++k) z[k] = std::polar(1.1, 0.4 + 1.5 * static_cast<double>(k));
  for (int it = 0; it < 500; ++it) {
    for (size_t k = 0; k < 4; ++k) {
      C den = 1.0;
      for (size_t j = 0; j < 4; ++j)
        if (j != k) den *= z[k] - z[j];
      z[k] -= det(z[k]) / den;
    }
  }
  return z;
}

TEST_CASE("HL-LHC at collision (beam-beam lenses replaced by markers, crab cavities on): total tunes 62.31 and 60.32") {
  const std::string path = test::require_shared("lattices/xsuite/hllhc14_with_beambeam.json");
  const auto t0 = std::chrono::steady_clock::now();
  // The beam-beam lenses become markers: the optics of the bare ring.
  nlohmann::ordered_json doc;
  {
    std::ifstream in(path);
    in >> doc;
  }
  for (auto& [name, element] : doc.at("line").at("elements").items())
    if (element.at("__class__").get<std::string>().rfind("BeamBeam", 0) == 0)
      element = nlohmann::ordered_json{{"__class__", "Marker"}};
  const Lattice lattice = lattice_from_json(xsuite_to_fusetrack(doc, path, {}), path, test::builtin_registry());
  OpticsOptions options;
  options.force_4d = true;
  const LinearOptics o = compute_linear_optics(lattice, options);
  const TwissTable t = compute_twiss_table(lattice, o, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(
      fmt::format("HL-LHC: {} elements, optics and table in {:.2f} s, Q {:.10f} {:.10f}, coupling {:.3g}, checks "
                  "{:.1e} {:.1e} {:.1e}",
                  t.size() - 1, seconds, t.qx_total, t.qy_total, t.max_coupling, t.orbit_closure, t.matrix_mismatch,
                  t.periodicity_error));
  // The working point of the HL-LHC v1.4 collision optics, Q = (62.31, 60.32); the crab cavities
  // (zeta-dependent kicks, which make the 4D map slightly non-symplectic) move it by < 1e-5.
  CHECK(std::fabs(t.qx_total - 62.31) < 1e-5);
  CHECK(std::fabs(t.qy_total - 60.32) < 1e-5);
  // The fractions are the eigen-tunes of the one-turn matrix, the integers the phase advance.
  CHECK(t.qx_total - 62.0 == doctest::Approx(o.qx).epsilon(1e-12));
  CHECK(t.qy_total - 60.0 == doctest::Approx(o.qy).epsilon(1e-12));
  CHECK(std::fabs(t.q1 - t.qx_total) < 1e-7);
  CHECK(std::fabs(t.q2 - t.qy_total) < 1e-7);
  CHECK(t.max_coupling > 1e-3);  // a coupled ring
  CHECK(t.periodicity_error < 1e-9);
  // The crab cavities make the 4D map (delta frozen) slightly non-symplectic: its eigenvalues leave
  // the unit circle (|lambda| - 1 ~ 1e-6) and the Edwards-Teng formula. The summary's tunes are the
  // arguments of the eigenvalues (found here by another method) and those of tracked particles.
  M4 m{};
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k) m[i][k] = o.map_4d.matrix[i][k];
  double q_matrix[2] = {-1.0, -1.0}, off_circle = 0.0;
  for (const auto& z : eigenvalues_4x4(m)) {
    if (z.imag() <= 0.0) continue;
    const double q = std::arg(z) / (2.0 * kPi);
    q_matrix[std::fabs(q - o.qx) < std::fabs(q - o.qy) ? 0 : 1] = q;
    off_circle = std::max(off_circle, std::fabs(std::abs(z) - 1.0));
  }
  MESSAGE(fmt::format("HL-LHC 4D map: eigenvalues off the unit circle by {:.2e}", off_circle));
  CHECK(std::fabs(o.qx - q_matrix[0]) < 1e-10);
  CHECK(std::fabs(o.qy - q_matrix[1]) < 1e-10);
  const TrackedTunes tracked = tunes_by_tracking(lattice, o, 256, options);
  CHECK(std::fabs(tracked.qx - o.qx) < 1e-9);
  CHECK(std::fabs(tracked.qy - o.qy) < 1e-9);
}

TEST_CASE("Twiss table of a ring with RF (6D closed orbit): the same transverse optics as in 4D") {
  const Lattice lattice = test::bundled_lattice("sextupole_rf_ring.json");
  const LinearOptics o6 = compute_linear_optics(lattice, OpticsOptions{});
  REQUIRE(o6.six_d);
  const TwissTable t6 = compute_twiss_table(lattice, o6, OpticsOptions{});
  OpticsOptions four;
  four.force_4d = true;
  const TwissTable t4 = compute_twiss_table(lattice, four);
  CHECK(t6.six_d);
  CHECK_FALSE(t4.six_d);
  for (size_t r = 0; r < t6.size(); ++r) {
    CHECK(t6.beta_x[r] == doctest::Approx(t4.beta_x[r]).epsilon(1e-7));
    CHECK(t6.beta_y[r] == doctest::Approx(t4.beta_y[r]).epsilon(1e-7));
  }
  check_periodic(t6, 1e-8);
  check_start_against_linear_optics(t6, o6, 1e-8);
}

TEST_CASE("Real lattices: PSB and CLIC damping ring along the ring against the one-turn map entered elsewhere") {
  for (const char* file : {"psb_injection.json", "clic_damping_ring.json"}) {
    CAPTURE(file);
    const std::string path = test::require_shared(std::string("lattices/xsuite/") + file);
    const Lattice lattice = load_lattice(path, test::builtin_registry());
    const OpticsOptions options;
    const LinearOptics o = compute_linear_optics(lattice, options);
    const auto t0 = std::chrono::steady_clock::now();
    const TwissTable t = compute_twiss_table(lattice, o, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(fmt::format("{}: {} elements, table in {:.3f} s, Q1 {:.6f}, Q2 {:.6f}, checks {:.1e} {:.1e} {:.1e}", file,
                        t.size() - 1, seconds, t.q1, t.q2, t.orbit_closure, t.matrix_mismatch, t.periodicity_error));
    check_start_against_linear_optics(t, o, 1e-7);
    check_periodic(t, 1e-7);
    const size_t n = t.size() - 1;
    for (size_t k : {n / 3, (2 * n) / 3}) check_against_rotated(lattice, t, k, options, 1e-6);
  }
}

TEST_CASE("Twiss table files: CSV round trip, NPZ read by NumPy, bad extension") {
  const RingBuilder b = coupled_ring(0.02, 20.0);
  const TwissTable t = compute_twiss_table(b.lattice("coupled"), linear_options());
  const auto dir = test::temp_dir("twiss_files");
  const std::string csv = (dir / "t.csv").string();
  write_twiss_table(csv, t);
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  const auto names = split_csv_line(header);
  const auto columns = t.numeric_columns();
  REQUIRE(names.size() == columns.size() + 2);
  CHECK(names[0] == "name");
  CHECK(names[1] == "type");
  size_t rows = 0;
  while (std::getline(in, line)) {
    const auto f = split_csv_line(line);
    REQUIRE(f.size() == names.size());
    CHECK(f[0] == t.name[rows]);
    CHECK(f[1] == t.type[rows]);
    for (size_t c = 0; c < columns.size(); ++c) {
      CHECK(names[c + 2] == columns[c].first);
      CHECK(std::stod(f[c + 2]) == (*columns[c].second)[rows]);  // %.17g is exact
    }
    ++rows;
  }
  CHECK(rows == t.size());

  const std::string npz = (dir / "t.npz").string();
  write_twiss_table(npz, t);
  const std::string script = fmt::format(
      "import numpy as n; d = n.load('{}'); print(d['name'][0], d['name'][3], d['type'][3], len(d['s']), "
      "repr(float(d['beta_1y'][5])), repr(float(d['mu_y'][-1])))",
      npz);
  bool read_back = false;
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    const auto [rc, out] = test::run_command(std::string(python) + " -c \"" + script + "\"");
    if (rc != 0 && out.find("No module named") != std::string::npos) continue;
    CAPTURE(out);
    REQUIRE(rc == 0);
    // Python's repr of a float and fmt's "{}" are both the shortest round-trip form.
    const std::string expect =
        fmt::format("_start {} {} {} {} {}\n", t.name[3], t.type[3], t.size(), t.beta_1y[5], t.mu_y.back());
    CHECK(out == expect);
    read_back = true;
    break;
  }
  if (!read_back) MESSAGE("no python3 with numpy: the NPZ is not read back");

  try {
    write_twiss_table((dir / "t.txt").string(), t, "--twiss-table");
    FAIL("no error for a .txt table");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("--twiss-table") != std::string::npos);
    CHECK(std::string(e.what()).find(".csv or .npz") != std::string::npos);
  }
}

TEST_CASE("Twiss table: bad options and an unstable ring are refused with clear errors") {
  const Lattice lattice = thin_fodo(4, kK1l, kK1l).lattice("fodo4");
  OpticsOptions bad;
  bad.steps[1] = -1.0;
  try {
    (void)compute_twiss_table(lattice, bad);
    FAIL("no error for a negative step");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("step for px") != std::string::npos);
  }
  // Focusing too strong: k1l L / 2 > 1.
  const Lattice unstable = thin_fodo(4, 0.5, 0.5).lattice("unstable");
  CHECK_THROWS_AS((void)compute_twiss_table(unstable, linear_options()), Error);
  // Optics of another lattice: the element-by-element pass does not reproduce its one-turn map.
  const LinearOptics other = compute_linear_optics(thin_fodo(4, 0.1, 0.1).lattice("other"), linear_options());
  try {
    (void)compute_twiss_table(lattice, other, linear_options());
    FAIL("no error for optics of another lattice");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("disagrees with tracking whole turns") != std::string::npos);
  }
}

// ---- the command line ----

TEST_CASE("fusetrack optics --twiss-table / --plot: files, summary, exit code 2 on bad options") {
  const std::string exe = test::fusetrack_binary();
  const auto dir = test::temp_dir("optics_table_cli");
  const std::string lattice = test::source_path("lattices/fodo_ring.json");
  const std::string csv = (dir / "fodo.csv").string(), png = (dir / "fodo.png").string();
  const auto [rc, out] =
      test::run_command(exe + " optics " + lattice + " --tracking-turns 0 --twiss-table " + csv + " --plot " + png);
  CAPTURE(out);
  REQUIRE(rc == 0);
  CHECK(out.find("along ring") != std::string::npos);
  CHECK(out.find("twiss table") != std::string::npos);
  std::ifstream in(csv);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  CHECK(header.rfind("name,type,s,x,px,y,py,zeta,delta,beta_x,alpha_x,mu_x,beta_y", 0) == 0);
  CHECK(first.rfind("_start,,0,", 0) == 0);
  if (out.find("no python3 with matplotlib") == std::string::npos) {
    REQUIRE(std::filesystem::exists(png));
    CHECK(std::filesystem::file_size(png) > 10000);
  }
  // The library's table for the same file, first data row.
  const TwissTable t = compute_twiss_table(test::bundled_lattice("fodo_ring.json"));
  CHECK(std::stod(split_csv_line(first)[9]) == t.beta_x[0]);

  // --plot alone (the table goes to a temporary file).
  const std::string png2 = (dir / "only.png").string();
  const auto [rc2, out2] = test::run_command(exe + " optics " + lattice + " --tracking-turns 0 --plot " + png2);
  CAPTURE(out2);
  CHECK(rc2 == 0);
  if (out2.find("no python3 with matplotlib") == std::string::npos) CHECK(std::filesystem::exists(png2));

  const auto [rc3, out3] = test::run_command(exe + " optics " + lattice + " --twiss-table " + (dir / "t.txt").string());
  CAPTURE(out3);
  CHECK(rc3 == 2);
  CHECK(out3.find("--twiss-table") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "t.txt"));
  const auto [rc4, out4] = test::run_command(exe + " optics " + lattice + " --plot " + (dir / "p.jpg").string());
  CAPTURE(out4);
  CHECK(rc4 == 2);
  CHECK(out4.find("--plot") != std::string::npos);
  const auto [rc5, out5] = test::run_command(exe + " optics " + lattice + " --twiss-table");
  CHECK(rc5 != 0);
}

}  // namespace test_optics_along_ring
