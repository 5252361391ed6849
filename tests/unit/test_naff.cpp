// NAFF (fusetrack/naff.h) on turn-by-turn data of linear maps whose tunes are known by
// construction: a Courant-Snyder rotation (one line), and a coupled 4D map built as V R V^-1 from
// two normal-mode rotations (two lines in each plane, four in the raw x - i px). The turns needed
// for 1e-10 were measured with the coupled signal (Q1 = 0.3123..., Q2 = 0.2234..., amplitude ratio
// 0.19): Hann order 1 alone leaves the other line's leakage, 3.8e-8 at 256 turns and 7.9e-11 at 1024;
// order 2 gives 5e-10 at 256 and 6e-14 at 1024; the joint refinement (each line refined on the
// signal less the others' fit) reaches rounding at 256 turns with order 1.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/naff.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_naff.
namespace test_naff {

using Complex = std::complex<double>;
constexpr double kTwoPi = 6.283185307179586476925;

/// Courant-Snyder parameters of one plane.
struct Twiss {
  double beta, alpha;
};

/// Normalised (X, P) -> physical (u, pu) and back (the Floquet transformation of one plane).
std::array<double, 2> to_physical(const Twiss& t, double X, double P) {
  const double sb = std::sqrt(t.beta);
  return {sb * X, (P - t.alpha * X) / sb};
}
std::array<double, 2> to_normal(const Twiss& t, double u, double pu) {
  const double sb = std::sqrt(t.beta);
  return {u / sb, (t.alpha * u + t.beta * pu) / sb};
}

/// A rotation by 2 pi q of normalised coordinates: X - i P -> e^{2 pi i q} (X - i P).
std::array<double, 2> rotate(double q, double X, double P) {
  const double c = std::cos(kTwoPi * q), s = std::sin(kTwoPi * q);
  return {c * X + s * P, -s * X + c * P};
}

/// The coupled one-turn map M = V R V^-1 on (x, px, y, py): R rotates the normal modes by q1 and
/// q2, V = B C with C a rotation by theta in the (x, y) and (px, py) planes (symplectic) and B the
/// per-plane Floquet transformations. Iterated turn by turn from `start`.
struct CoupledMap {
  double q1, q2, theta;
  Twiss tx, ty;

  std::array<double, 4> turn(const std::array<double, 4>& v) const {
    const auto nx = to_normal(tx, v[0], v[1]), ny = to_normal(ty, v[2], v[3]);
    const double c = std::cos(theta), s = std::sin(theta);
    // C^-1: modes from the normalised (x, y).
    const auto m1 = rotate(q1, c * nx[0] - s * ny[0], c * nx[1] - s * ny[1]);
    const auto m2 = rotate(q2, s * nx[0] + c * ny[0], s * nx[1] + c * ny[1]);
    const auto x = to_physical(tx, c * m1[0] + s * m2[0], c * m1[1] + s * m2[1]);
    const auto y = to_physical(ty, -s * m1[0] + c * m2[0], -s * m1[1] + c * m2[1]);
    return {x[0], x[1], y[0], y[1]};
  }
};

/// Turn-by-turn (x, px) of `turns` turns (turn 0 is the start).
void track(const CoupledMap& map, std::array<double, 4> v, size_t turns, std::vector<double>& x,
           std::vector<double>& px) {
  for (size_t n = 0; n < turns; ++n) {
    x.push_back(v[0]);
    px.push_back(v[1]);
    v = map.turn(v);
  }
}

/// The line of `lines` nearest `frequency`.
ft::NaffLine nearest(const std::vector<ft::NaffLine>& lines, double frequency) {
  ft::NaffLine best = lines.front();
  for (const auto& l : lines)
    if (std::fabs(l.frequency - frequency) < std::fabs(best.frequency - frequency)) best = l;
  return best;
}

TEST_CASE("NAFF: the tune of a linear rotation map, above and below one half") {
  const Twiss twiss{17.5, -2.1};
  for (const double q : {0.2731234567, 0.7312345678, 0.0412345678}) {
    CAPTURE(q);
    // One plane of the map (no coupling): X - i P starts at sqrt(2J) e^{i phi0}.
    const CoupledMap map{q, 0.17, 0.0, twiss, {5.0, 0.0}};
    const double two_j = 2.0 * 1.3e-6, phi0 = 0.4;
    const auto start_x = to_physical(twiss, std::sqrt(two_j) * std::cos(phi0), -std::sqrt(two_j) * std::sin(phi0));
    std::vector<double> x, px;
    track(map, {start_x[0], start_x[1], 0.0, 0.0}, 1024, x, px);
    const auto lines = ft::naff(ft::betatron_signal(x, px, twiss.beta, twiss.alpha));
    REQUIRE(lines.size() == 1u);
    CHECK(std::fabs(lines[0].frequency - q) < 1e-10);
    // z_n = sqrt(2J) e^{i (2 pi q n + phi0)}: the amplitude and phase.
    CHECK(std::abs(lines[0].amplitude - std::polar(std::sqrt(two_j), phi0)) < 1e-8 * std::sqrt(two_j));
    // Without the optics (raw x - i px) the sense of rotation still gives q, not 1 - q; the mirror
    // line at 1 - q is found and fitted as the second one.
    ft::NaffOptions raw;
    raw.frequencies = 2;
    raw.joint_refinements = 2;
    const auto raw_lines = ft::naff(ft::betatron_signal(x, px), raw);
    REQUIRE(raw_lines.size() == 2u);
    CHECK(std::fabs(raw_lines[0].frequency - q) < 1e-10);
    CHECK(std::fabs(raw_lines[1].frequency - (1.0 - q)) < 1e-10);
    CHECK(std::abs(raw_lines[0].amplitude) > std::abs(raw_lines[1].amplitude));
  }
}

TEST_CASE("NAFF: two tunes of a coupled linear map") {
  const CoupledMap map{0.3123456789, 0.2234567891, 0.35, {12.0, -1.3}, {4.0, 0.7}};
  const double a1 = 1e-3, a2 = 4e-4, phi1 = 0.3, phi2 = -1.1;  // normal-mode amplitudes sqrt(2 J_k), phases
  // Normal modes X_k - i P_k = a_k e^{i phi_k}, then V.
  const double c = std::cos(map.theta), s = std::sin(map.theta);
  const double X1 = a1 * std::cos(phi1), P1 = -a1 * std::sin(phi1), X2 = a2 * std::cos(phi2), P2 = -a2 * std::sin(phi2);
  const auto x0 = to_physical(map.tx, c * X1 + s * X2, c * P1 + s * P2);
  const auto y0 = to_physical(map.ty, -s * X1 + c * X2, -s * P1 + c * P2);
  // Expected lines of the normalised x signal: q1 with c a1 e^{i phi1}, q2 with s a2 e^{i phi2}.
  const Complex line1 = c * std::polar(a1, phi1), line2 = s * std::polar(a2, phi2);

  auto check_lines = [&](const std::vector<ft::NaffLine>& lines) {
    const ft::NaffLine l1 = nearest(lines, map.q1), l2 = nearest(lines, map.q2);
    CHECK(std::fabs(l1.frequency - map.q1) < 1e-10);
    CHECK(std::fabs(l2.frequency - map.q2) < 1e-10);
    CHECK(std::abs(l1.amplitude - line1) < 1e-7 * a1);
    CHECK(std::abs(l2.amplitude - line2) < 1e-7 * a1);
  };
  SUBCASE("Hann order 2, 1024 turns, Gram-Schmidt only") {
    std::vector<double> x, px;
    track(map, {x0[0], x0[1], y0[0], y0[1]}, 1024, x, px);
    ft::NaffOptions o;
    o.window_order = 2;
    o.frequencies = 2;
    const auto lines = ft::naff(ft::betatron_signal(x, px, map.tx.beta, map.tx.alpha), o);
    REQUIRE(lines.size() == 2u);
    CHECK(std::abs(lines[0].amplitude) > std::abs(lines[1].amplitude));  // found strongest first
    check_lines(lines);
  }
  SUBCASE("Hann order 1, 256 turns: the first line's leakage bias, removed by the joint refinement") {
    std::vector<double> x, px;
    track(map, {x0[0], x0[1], y0[0], y0[1]}, 256, x, px);
    const auto z = ft::betatron_signal(x, px, map.tx.beta, map.tx.alpha);
    ft::NaffOptions o;
    o.frequencies = 2;
    // The leakage of the other line shifts the maximum by far more than 1e-10 at 256 turns.
    CHECK(std::fabs(nearest(ft::naff(z, o), map.q1).frequency - map.q1) > 1e-9);
    o.joint_refinements = 2;
    check_lines(ft::naff(z, o));
  }
  SUBCASE("raw x - i px: four lines (+-q1, +-q2), 512 turns") {
    std::vector<double> x, px;
    track(map, {x0[0], x0[1], y0[0], y0[1]}, 512, x, px);
    ft::NaffOptions o;
    o.frequencies = 4;
    o.joint_refinements = 2;
    const auto lines = ft::naff(ft::betatron_signal(x, px), o);
    REQUIRE(lines.size() == 4u);
    for (const double q : {map.q1, map.q2, 1.0 - map.q1, 1.0 - map.q2}) {
      CAPTURE(q);
      CHECK(std::fabs(nearest(lines, q).frequency - q) < 1e-10);
    }
  }
}

TEST_CASE("NAFF: two lines of amplitudes 1 and 0.1, both recovered") {
  const double q1 = 0.3141592653, q2 = 0.2718281828;
  const Complex a1 = std::polar(1.0, 0.2), a2 = std::polar(0.1, -1.3);
  std::vector<Complex> z(1024);
  for (size_t n = 0; n < z.size(); ++n) {
    const double t = static_cast<double>(n);
    z[n] = a1 * std::polar(1.0, kTwoPi * q1 * t) + a2 * std::polar(1.0, kTwoPi * q2 * t);
  }
  ft::NaffOptions o;
  o.frequencies = 2;
  o.joint_refinements = 1;
  const auto lines = ft::naff(z, o);
  REQUIRE(lines.size() == 2u);
  // The stronger line first, then the weaker one after the Gram-Schmidt subtraction.
  CHECK(std::fabs(lines[0].frequency - q1) < 1e-10);
  CHECK(std::fabs(lines[1].frequency - q2) < 1e-10);
  CHECK(std::abs(lines[0].amplitude - a1) < 1e-8);
  CHECK(std::abs(lines[1].amplitude - a2) < 1e-8);
}

/// 4x4 matrices on (x, px, y, py), row order.
using Matrix4 = std::array<double, 16>;

Matrix4 multiply(const Matrix4& a, const Matrix4& b) {
  Matrix4 c{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k) c[4 * i + j] += a[4 * i + k] * b[4 * k + j];
  return c;
}

Matrix4 identity4() {
  Matrix4 m{};
  for (int i = 0; i < 4; ++i) m[5 * i] = 1.0;
  return m;
}

/// Drift of length l, thin normal quadrupole k1l (px -= k1l x, py += k1l y), thin skew quadrupole
/// k1sl (px += k1sl y, py += k1sl x).
Matrix4 drift(double l) {
  Matrix4 m = identity4();
  m[1] = m[11] = l;
  return m;
}
Matrix4 thin_quadrupole(double k1l) {
  Matrix4 m = identity4();
  m[4] = -k1l;
  m[14] = k1l;
  return m;
}
Matrix4 thin_skew_quadrupole(double k1sl) {
  Matrix4 m = identity4();
  m[6] = k1sl;
  m[12] = k1sl;
  return m;
}

TEST_CASE("NAFF: the two mode tunes of a coupled 4D map equal its eigenvalue phases") {
  // A FODO cell with a skew quadrupole; turn = the cell.
  Matrix4 m = identity4();
  for (const Matrix4& e :
       {thin_quadrupole(0.9), drift(1.0), thin_skew_quadrupole(0.08), drift(0.4), thin_quadrupole(-0.6), drift(1.4)})
    m = multiply(e, m);
  // Eigenvalues e^{+-i mu_1}, e^{+-i mu_2} of a symplectic 4x4 M: s_k = 2 cos mu_k are the roots of
  // s^2 - tr(M) s + ((tr M)^2 - tr(M^2) - 4) / 2 = 0 (tr M = s_1 + s_2, tr M^2 = s_1^2 + s_2^2 - 4).
  const Matrix4 m2 = multiply(m, m);
  double trace = 0.0, trace2 = 0.0;
  for (int i = 0; i < 4; ++i) {
    trace += m[5 * i];
    trace2 += m2[5 * i];
  }
  const double product = 0.5 * (trace * trace - trace2 - 4.0);
  const double discriminant = trace * trace - 4.0 * product;
  REQUIRE(discriminant > 0.0);
  const double s1 = 0.5 * (trace + std::sqrt(discriminant)), s2 = 0.5 * (trace - std::sqrt(discriminant));
  REQUIRE(std::fabs(s1) < 2.0);
  REQUIRE(std::fabs(s2) < 2.0);
  const double eigen_q[2] = {std::acos(0.5 * s1) / kTwoPi, std::acos(0.5 * s2) / kTwoPi};  // in (0, 1/2)
  REQUIRE(std::fabs(eigen_q[0] - eigen_q[1]) > 0.01);
  // Turn by turn from a start that excites both modes; the raw u - i pu of each plane carries both
  // modes' lines at +-q: four lines, fitted jointly.
  std::array<double, 4> v{1e-3, 0.0, 5e-4, 0.0};
  std::vector<double> x, px, y, py;
  for (size_t n = 0; n < 1024; ++n) {
    x.push_back(v[0]);
    px.push_back(v[1]);
    y.push_back(v[2]);
    py.push_back(v[3]);
    std::array<double, 4> next{};
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 4; ++k) next[i] += m[4 * i + k] * v[k];
    v = next;
  }
  ft::NaffOptions o;
  o.frequencies = 4;
  o.joint_refinements = 2;
  for (const auto& signal : {ft::betatron_signal(x, px), ft::betatron_signal(y, py)}) {
    const auto lines = ft::naff(signal, o);
    for (const double q : eigen_q) {
      CAPTURE(q);
      double nearest_distance = 1.0;
      for (const auto& l : lines)
        nearest_distance = std::min(nearest_distance, std::fabs(std::min(l.frequency, 1.0 - l.frequency) - q));
      CHECK(nearest_distance < 1e-10);
    }
  }
}

TEST_CASE("NAFF: the amplitude of a pure line for every window order") {
  const double q = 0.1234567, a = 2.5;
  std::vector<Complex> z(300);
  for (size_t n = 0; n < z.size(); ++n) z[n] = std::polar(a, kTwoPi * q * static_cast<double>(n) + 0.7);
  for (int p = 0; p <= 4; ++p) {
    CAPTURE(p);
    ft::NaffOptions o;
    o.window_order = p;
    const auto lines = ft::naff(z, o);
    CHECK(std::fabs(lines[0].frequency - q) < 1e-12);
    CHECK(std::abs(lines[0].amplitude - std::polar(a, 0.7)) < 1e-10);
  }
}

TEST_CASE("NAFF: bad signals and options are refused") {
  CHECK_THROWS_AS(ft::naff(std::vector<Complex>(15, Complex(1.0, 0.0))), ft::Error);
  CHECK_THROWS_AS(ft::naff(std::vector<Complex>(64, Complex(0.0, 0.0))), ft::Error);
  std::vector<Complex> z(64, Complex(1.0, 0.0));
  z[10] = Complex(std::numeric_limits<double>::quiet_NaN(), 0.0);
  CHECK_THROWS_AS(ft::naff(z), ft::Error);
  ft::NaffOptions o;
  o.window_order = -1;
  CHECK_THROWS_AS(ft::Naff(64, o), ft::Error);
  o.window_order = 1;
  o.frequencies = 0;
  CHECK_THROWS_AS(ft::Naff(64, o), ft::Error);
  CHECK_THROWS_AS(ft::betatron_signal({1.0}, {1.0}, -1.0, 0.0), ft::Error);
}

}  // namespace test_naff
