// Bend (elements/bend.h): each model against the analytic linear transfer matrix of a sector bend
// with gradient and edges (written here from the linearised equations of motion), 4th-order
// convergence of the Forest-Ruth integrator, symplecticity, reversibility and bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "bend.h"
#include "support/convergence.h"
#include "support/element_testing.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_bend.
namespace test_bend {

using namespace ft_test;

namespace {

struct BendSpec {
  double length = 1.5, angle = 0.15, k1 = -0.4, k2 = 0.0, k1s = 0.0, k2s = 0.0;
  double e1 = 0.0, e2 = 0.0, hgap = 0.0, fint = 0.0;
  int model = 0, integrator = 0, num_slices = 0;
};

Bend make_bend(const BendSpec& s) {
  Bend b = with_defaults<Bend>(ft_element_descriptor_Bend());
  b.length = s.length;
  b.angle = s.angle;
  b.k1 = s.k1;
  b.k2 = s.k2;
  b.k1s = s.k1s;
  b.k2s = s.k2s;
  b.edge_entry_angle = s.e1;
  b.edge_exit_angle = s.e2;
  b.edge_entry_hgap = b.edge_exit_hgap = s.hgap;
  b.edge_entry_fint = b.edge_exit_fint = s.fint;
  b.model = s.model;
  b.integrator = s.integrator;
  b.num_slices = s.num_slices;
  Bend_prepare(b, reference_proton(0.9));
  return b;
}

/// u'' = -K u over s: (C, S, C', S') and the integrals int C, int S.
struct Plane {
  double c, s, dc, ds, int_c, int_s;
};
Plane plane(double K, double s) {
  if (K > 0) {
    const double w = std::sqrt(K);
    return {std::cos(w * s), std::sin(w * s) / w, -w * std::sin(w * s), std::cos(w * s), std::sin(w * s) / w,
            (1 - std::cos(w * s)) / K};
  }
  if (K < 0) {
    const double w = std::sqrt(-K);
    return {std::cosh(w * s), std::sinh(w * s) / w, w * std::sinh(w * s), std::cosh(w * s), std::sinh(w * s) / w,
            (1 - std::cosh(w * s)) / K};
  }
  return {1.0, s, 0.0, 1.0, s, s * s / 2};
}

/// The linear matrix at the reference orbit, in (x, px, y, py, zeta, pzeta), of a sector bend
/// (k0 = h) with gradient k1 and linear edges. Linearised equations (delta ~ pzeta, px ~ x'):
///   x'' = -(h^2 + k1) x + h delta,  y'' = k1 y,  zeta' = delta / gamma0^2 - h x.
Mat6 analytic_matrix(const BendSpec& s, double beta0) {
  const double L = s.length, h = s.angle / s.length;
  const Plane px = plane(h * h + s.k1, L), py = plane(-s.k1, L);
  const double K = h * h + s.k1;
  const double gamma2 = 1.0 / (1.0 - beta0 * beta0);
  // dispersion D = h int_0^L S(L - t) dt = h (1 - C) / K, D' = h S, int_0^L D = h (L - S) / K
  const double D = K != 0 ? h * (1 - px.c) / K : h * L * L / 2;
  const double dD = h * px.s;
  const double int_D = K != 0 ? h * (L - px.s) / K : h * L * L * L / 6;
  Mat6 body{};
  body[0] = {px.c, px.s, 0, 0, 0, D};
  body[1] = {px.dc, px.ds, 0, 0, 0, dD};
  body[2] = {0, 0, py.c, py.s, 0, 0};
  body[3] = {0, 0, py.dc, py.ds, 0, 0};
  body[4] = {-h * px.int_c, -h * px.int_s, 0, 0, 1, L / gamma2 - h * int_D};
  body[5] = {0, 0, 0, 0, 0, 1};
  auto edge = [&](double e) {
    Mat6 m{};
    for (int i = 0; i < 6; ++i) m[i][i] = 1;
    m[1][0] = h * std::tan(e);
    m[3][2] = -h * std::tan(e - 2 * h * s.hgap * s.fint * (1 + std::sin(e) * std::sin(e)) / std::cos(e));
    return m;
  };
  auto mul = [](const Mat6& a, const Mat6& b) {
    Mat6 c{};
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j)
        for (int k = 0; k < 6; ++k) c[i][j] += a[i][k] * b[k][j];
    return c;
  };
  return mul(edge(s.e2), mul(body, edge(s.e1)));
}

double max_diff(const Mat6& a, const Mat6& b) {
  double d = 0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) d = std::fmax(d, std::fabs(a[i][j] - b[i][j]));
  return d;
}

const Vec6 kOrigin{0, 0, 0, 0, 0, 0};

}  // namespace

TEST_CASE("Bend: descriptor and defaults") {
  const ft_element_type_desc& d = ft_element_descriptor_Bend();
  CHECK(d.flags == FT_THICK);
  const Bend b = with_defaults<Bend>(d);
  CHECK(b.k0_from_h == 1);
  CHECK(b.edge_entry_active == 1);
  CHECK(b.edge_exit_active == 1);
  CHECK(b.model == 0);
  CHECK(find_field(d, "length")->has_default == 0);
  CHECK(find_field(d, "num_kicks")->flags == FT_FIELD_DERIVED);
}

TEST_CASE("Bend: linear matrix of each model against the analytic sector bend with gradient and edges") {
  BendSpec s;
  s.e1 = 0.05;
  s.e2 = 0.08;
  s.hgap = 0.02;
  s.fint = 0.5;
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    for (const double k1 : {-0.4, 0.0, 0.9}) {
      CAPTURE(beta0);
      CAPTURE(k1);
      s.k1 = k1;
      const Mat6 expected = analytic_matrix(s, beta0);
      // mat-kick-mat: the linear map is exact (finite-difference noise only).
      s.model = 2;
      s.integrator = 3;
      s.num_slices = 1;
      CHECK(max_diff(jacobian(make_bend(s), Bend_track, kOrigin, beta0), expected) < 1e-9);
      // Forest-Ruth (4th order) with the expanded model: the largest error, 6.8e-6 at 20 steps
      // (vertical, k1 = 0.9), falls as n^-4: 8.4e-8 at 60, 5.2e-9 at 120.
      s.model = 0;
      s.integrator = 0;
      s.num_slices = 120;
      CHECK(max_diff(jacobian(make_bend(s), Bend_track, kOrigin, beta0), expected) < 1e-8);
      // xtrack's default (rot-kick-rot, yoshida4): the same linear optics (30 slices of 7 kicks).
      s.model = 1;
      s.integrator = 2;
      s.num_slices = 210;
      CHECK(max_diff(jacobian(make_bend(s), Bend_track, kOrigin, beta0), expected) < 1e-8);
    }
  }
}

TEST_CASE("Bend: Forest-Ruth converges with the 4th power of the step (error ratio ~16 per doubling)") {
  BendSpec s;
  s.k2 = 40.0;  // strong sextupole, large amplitude: a non-linear map
  s.k1s = 0.05;
  const Case c{4.0e-3, 1.0e-3, -3.0e-3, 5.0e-4, 0.0, 1.0e-3, kBetaUltraRelativistic};
  for (const int model : {0, 1}) {
    CAPTURE(model);
    s.model = model;
    s.num_slices = 256;
    ft::ParticleView ref = particle(c);
    Bend_track(make_bend(s), ref);
    const auto track = [&](int n) {
      s.num_slices = n;
      ft::ParticleView p = particle(c);
      Bend_track(make_bend(s), p);
      return p;
    };
    check_convergence_order(errors_at({4, 8, 16}, ref, track), 4);
  }
}

TEST_CASE("Bend: xtrack integrators (uniform: 2nd order) converge to the Forest-Ruth result") {
  BendSpec s;
  s.k2 = 10.0;
  const Case c = cases()[1];
  s.num_slices = 200;
  ft::ParticleView ref = particle(c);
  Bend_track(make_bend(s), ref);
  s.integrator = 3;
  const auto track = [&](int n) {
    s.num_slices = n;
    ft::ParticleView p = particle(c);
    Bend_track(make_bend(s), p);
    return p;
  };
  check_convergence_order(errors_at({20, 40}, ref, track), 2, 0.125);
  for (const int integrator : {1, 2}) {
    s.integrator = integrator;
    s.num_slices = 280;
    ft::ParticleView p = particle(c);
    Bend_track(make_bend(s), p);
    CHECK(distance(p, ref) < 1e-8);  // teapot: 2nd order, 1.3e-8 at 140 kicks
  }
}

TEST_CASE("Bend: exact rot-kick-rot and expanded model agree to second order in the amplitude") {
  // The Hamiltonians differ by terms of third order (h x p^2, the square root): scaling the
  // amplitude by 1/2 must shrink the difference of the two models by ~4 relative to the motion.
  BendSpec s;
  s.num_slices = 100;
  double diff[2];
  for (int i = 0; i < 2; ++i) {
    const double a = i == 0 ? 2e-3 : 1e-3;
    const Case c{a, 0.3 * a, a, -0.2 * a, 0.0, 0.0, kBetaUltraRelativistic};
    s.model = 0;
    s.integrator = 0;
    ft::ParticleView p0 = particle(c);
    Bend_track(make_bend(s), p0);
    s.model = 1;
    s.integrator = 2;
    ft::ParticleView p1 = particle(c);
    Bend_track(make_bend(s), p1);
    diff[i] = distance(p0, p1) / a;
  }
  CHECK(diff[0] / diff[1] > 1.8);
  CHECK(diff[0] / diff[1] < 2.2);
}

TEST_CASE("Bend: symplectic (every model, integrator, skew and non-linear terms)") {
  BendSpec s;
  s.k2 = 5.0;
  s.k1s = 0.1;
  s.k2s = -2.0;
  s.e1 = 0.04;
  s.e2 = -0.03;
  s.hgap = 0.02;
  s.fint = 0.6;
  for (const int model : {0, 1, 2}) {
    for (const int integrator : {0, 1, 2, 3}) {
      for (const Case& c : cases()) {
        CAPTURE(model);
        CAPTURE(integrator);
        CAPTURE(c.beta0);
        s.model = model;
        s.integrator = integrator;
        s.num_slices = 5;
        CHECK(symplecticity_error(jacobian(make_bend(s), Bend_track, canonical(c), c.beta0)) <
              kSymplecticTolerance);
      }
    }
  }
}

TEST_CASE("Bend: tracking with -length and -angle returns the particle (symmetric schemes)") {
  BendSpec s;
  s.k2 = 8.0;
  s.k1s = 0.1;
  for (const int model : {0, 1, 2}) {
    for (const int integrator : {0, 1, 2, 3}) {
      for (const Case& c : cases()) {
        CAPTURE(model);
        CAPTURE(integrator);
        s.model = model;
        s.integrator = integrator;
        s.num_slices = 7;
        s.length = 1.5;
        s.angle = 0.15;
        Bend fwd = make_bend(s);
        fwd.edge_entry_active = fwd.edge_exit_active = 0;
        s.length = -1.5;
        s.angle = -0.15;
        Bend back = make_bend(s);
        back.edge_entry_active = back.edge_exit_active = 0;
        ft::ParticleView p = particle(c);
        Bend_track(fwd, p);
        CHECK(std::fabs(p.x - c.x) > 1e-5);
        Bend_track(back, p);
        CHECK(close(p.x, c.x, 1e-12, 1e-16));
        CHECK(close(p.px, c.px, 1e-12, 1e-16));
        CHECK(close(p.y, c.y, 1e-12, 1e-16));
        CHECK(close(p.py, c.py, 1e-12, 1e-16));
        CHECK(close(p.zeta, c.zeta, 1e-12, 1e-15));
      }
    }
  }
}

TEST_CASE("Bend: k0 != h leaves the reference off axis by the analytic amount") {
  // Expanded model, k1 = 0, a field error dk0: x'' = -h k0 x + (h - k0) from x = x' = 0 gives
  // x(L) = (h - k0)(1 - cos(w L)) / w^2, w^2 = h k0.
  Bend b = with_defaults<Bend>(ft_element_descriptor_Bend());
  b.length = 2.0;
  b.angle = 0.2;
  b.k0_from_h = 0;
  b.k0 = 0.1 * 1.001;
  b.num_slices = 40;
  b.edge_entry_active = b.edge_exit_active = 0;
  Bend_prepare(b, reference_proton(0.9));
  ft::ParticleView p = particle(0, 0, 0, 0, 0, 0, kBetaUltraRelativistic);
  Bend_track(b, p);
  const double w2 = 0.1 * b.k0;
  CHECK(close(p.x, (0.1 - b.k0) * (1 - std::cos(std::sqrt(w2) * 2.0)) / w2, 1e-9));
}

TEST_CASE("Bend: prepare rejects invalid settings, naming the field") {
  auto error = [](void (*change)(Bend&)) {
    Bend b = with_defaults<Bend>(ft_element_descriptor_Bend());
    b.length = 1.0;
    b.angle = 0.1;
    change(b);
    return ft::test::error_message([&] { Bend_prepare(b, reference_proton(0.9)); });
  };
  CHECK(error([](Bend& b) { b.model = 3; }).find("model = 3") != std::string::npos);
  CHECK(error([](Bend& b) { b.integrator = 4; }).find("integrator = 4") != std::string::npos);
  CHECK(error([](Bend& b) { b.num_slices = -2; }).find("num_slices = -2") != std::string::npos);
  CHECK(error([](Bend& b) { b.k0 = 0.3; }).find("k0_from_h") != std::string::npos);
  CHECK(error([](Bend& b) { b.length = 0.0; }).find("length must be non-zero") != std::string::npos);
  CHECK(error([](Bend& b) { b.edge_exit_active = 2; }).find("edge_exit_active") != std::string::npos);
  CHECK(error([](Bend&) {}).empty());
}

TEST_CASE("Bend: a lattice with a bad Bend names the file, the element and the field") {
  const char* reference = R"("fusetrack_lattice": 1, "reference": {"mass0": 510998.95, "q0": -1, "p0c": 3e9})";
  const std::string bad_model = ft::test::write_temp_file(
      "bad_bend_model.json", std::string("{") + reference +
                                 R"(, "elements": {"b1": {"type": "Bend", "length": 1.0, "angle": 0.1, "model": 7}},
          "sequence": ["b1"]})");
  std::string msg = ft::test::error_message([&] { ft::load_lattice(bad_model, ft::test::builtin_registry()); });
  CHECK(msg.find("bad_bend_model.json") != std::string::npos);
  CHECK(msg.find("b1") != std::string::npos);
  CHECK(msg.find("model = 7") != std::string::npos);
  const std::string missing = ft::test::write_temp_file(
      "bad_bend_missing.json",
      std::string("{") + reference + R"(, "elements": {"b1": {"type": "Bend", "angle": 0.1}}, "sequence": ["b1"]})");
  msg = ft::test::error_message([&] { ft::load_lattice(missing, ft::test::builtin_registry()); });
  CHECK(msg.find("bad_bend_missing.json") != std::string::npos);
  CHECK(msg.find("'b1'") != std::string::npos);
  CHECK(msg.find("field 'length'") != std::string::npos);
}

}  // namespace test_bend
