// ThickMultipole (elements/thick_multipole.h): a thick quadrupole against its analytic matrix,
// 4th-order convergence of Forest-Ruth, xtrack's uniform integrator against the Sextupole
// element, symplecticity, reversibility and bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "sextupole.h"
#include "support/convergence.h"
#include "support/element_testing.h"
#include "support/registry.h"
#include "thick_multipole.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_thick_multipole.
namespace test_thick_multipole {

using namespace ft_test;

namespace {

ThickMultipole make_multipole(double length, int integrator, int num_slices, double k1, double k2 = 0, double k3 = 0,
                              double j2 = 0, double j3 = 0) {
  ThickMultipole m = with_defaults<ThickMultipole>(ft_element_descriptor_ThickMultipole());
  m.length = length;
  m.kn[1] = k1;
  m.kn[2] = k2;
  m.kn[3] = k3;
  m.ks[2] = j2;
  m.ks[3] = j3;
  m.integrator = integrator;
  m.num_slices = num_slices;
  ThickMultipole_prepare(m, reference_proton(0.9));
  return m;
}

}  // namespace

TEST_CASE("ThickMultipole: quadrupole linear matrix (Forest-Ruth, 4th order)") {
  // Forest-Ruth's error falls as n^-4 (next test): 1.5e-6 at 20 steps here, so ~2.4e-9 at 100.
  const double L = 0.8, k1 = 1.7;
  const double w = std::sqrt(k1);
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    const Mat6 m = jacobian(make_multipole(L, 0, 100, k1), ThickMultipole_track, Vec6{0, 0, 0, 0, 0, 0}, beta0);
    const double gamma2 = 1.0 / (1.0 - beta0 * beta0);
    CHECK(std::fabs(m[0][0] - std::cos(w * L)) < 1e-8);
    CHECK(std::fabs(m[0][1] - std::sin(w * L) / w) < 1e-8);
    CHECK(std::fabs(m[1][0] + w * std::sin(w * L)) < 1e-8);
    CHECK(std::fabs(m[2][2] - std::cosh(w * L)) < 1e-8);
    CHECK(std::fabs(m[2][3] - std::sinh(w * L) / w) < 1e-8);
    CHECK(std::fabs(m[3][2] - w * std::sinh(w * L)) < 1e-8);
    CHECK(std::fabs(m[4][5] - L / gamma2) < 1e-9);
    CHECK(std::fabs(m[0][2]) < 1e-12);
    CHECK(std::fabs(m[4][0]) < 1e-9);
  }
}

TEST_CASE("ThickMultipole: Forest-Ruth error ratio ~16 per doubling of the steps") {
  const Case c{5e-3, 1e-3, -4e-3, 5e-4, 0.0, 1e-3, kBetaUltraRelativistic};
  ft::ParticleView ref = particle(c);
  ThickMultipole_track(make_multipole(0.5, 0, 256, 0.8, 60.0, 2000.0, 10.0, -500.0), ref);
  const auto track = [&](int n) {
    ft::ParticleView p = particle(c);
    ThickMultipole_track(make_multipole(0.5, 0, n, 0.8, 60.0, 2000.0, 10.0, -500.0), p);
    return p;
  };
  check_convergence_order(errors_at({2, 4, 8}, ref, track), 4);
}

TEST_CASE("ThickMultipole: the uniform integrator is xtrack's drift-kick-drift (the Sextupole element)") {
  for (const Case& c : cases()) {
    for (const int n : {1, 4}) {
      Sextupole s = with_defaults<Sextupole>(ft_element_descriptor_Sextupole());
      s.length = 0.3;
      s.k2 = 12.0;
      s.k2s = -3.0;
      s.num_slices = n;
      Sextupole_prepare(s, reference_proton(0.9));
      ft::ParticleView a = particle(c);
      Sextupole_track(s, a);
      ft::ParticleView b = particle(c);
      ThickMultipole_track(make_multipole(0.3, 3, n, 0.0, 12.0, 0.0, -3.0), b);
      CHECK(distance(a, b) < 1e-17);
    }
  }
}

TEST_CASE("ThickMultipole: symplectic and reversible for every integrator") {
  for (const int integrator : {0, 1, 2, 3}) {
    for (const Case& c : cases()) {
      CAPTURE(integrator);
      const ThickMultipole m = make_multipole(0.4, integrator, 3, -0.9, 30.0, 500.0, 5.0, 100.0);
      CHECK(symplecticity_error(jacobian(m, ThickMultipole_track, canonical(c), c.beta0)) < kSymplecticTolerance);
      ft::ParticleView p = particle(c);
      ThickMultipole_track(m, p);
      CHECK(std::fabs(p.x - c.x) > 1e-6);
      ThickMultipole_track(make_multipole(-0.4, integrator, 3, -0.9, 30.0, 500.0, 5.0, 100.0), p);
      CHECK(close(p.x, c.x, 1e-12, 1e-17));
      CHECK(close(p.px, c.px, 1e-12, 1e-17));
      CHECK(close(p.y, c.y, 1e-12, 1e-17));
      CHECK(close(p.py, c.py, 1e-12, 1e-17));
      CHECK(close(p.zeta, c.zeta, 1e-12, 1e-16));
    }
  }
}

TEST_CASE("ThickMultipole: automatic slices and bad input") {
  CHECK(make_multipole(1.0, 0, 0, 0.1).num_kicks == 10);  // AT's NumIntSteps default
  CHECK(make_multipole(1.0, 3, 0, 0.1).num_kicks == 1);   // xtrack: one kick for a straight magnet
  ThickMultipole m = with_defaults<ThickMultipole>(ft_element_descriptor_ThickMultipole());
  m.length = 1.0;
  m.integrator = 9;
  CHECK(ft::test::error_message([&] { ThickMultipole_prepare(m, reference_proton(0.9)); }).find("integrator = 9") !=
        std::string::npos);
  m.integrator = 0;
  m.num_slices = -1;
  CHECK(ft::test::error_message([&] { ThickMultipole_prepare(m, reference_proton(0.9)); }).find("num_slices = -1") !=
        std::string::npos);
}

}  // namespace test_thick_multipole
