// Corrector (elements/corrector.h): the exact flow against a finely integrated uniform dipole
// field (ThickMultipole with k0 = -hkick/L, j0 = vkick/L), the linear matrix, symplecticity and
// reversibility.
#include <doctest/doctest.h>

#include <cmath>

#include "corrector.h"
#include "support/element_testing.h"
#include "thick_multipole.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_corrector.
namespace test_corrector {

using namespace ft_test;

namespace {
Corrector make_corrector(double length, double hkick, double vkick) {
  Corrector c = with_defaults<Corrector>(ft_element_descriptor_Corrector());
  c.length = length;
  c.hkick = hkick;
  c.vkick = vkick;
  return c;
}
}  // namespace

TEST_CASE("Corrector: equals the integrated uniform dipole field") {
  for (const Case& c : cases()) {
    ft::ParticleView a = particle(c);
    Corrector_track(make_corrector(0.7, 2e-4, -1.5e-4), a);
    ThickMultipole m = with_defaults<ThickMultipole>(ft_element_descriptor_ThickMultipole());
    m.length = 0.7;
    m.kn[0] = -2e-4 / 0.7;
    m.ks[0] = -1.5e-4 / 0.7;
    m.num_slices = 50;
    ThickMultipole_prepare(m, reference_proton(0.9));
    ft::ParticleView b = particle(c);
    ThickMultipole_track(m, b);
    CHECK(close(a.x, b.x, 1e-12, 1e-18));
    CHECK(close(a.px, b.px, 1e-12, 1e-18));
    CHECK(close(a.y, b.y, 1e-12, 1e-18));
    CHECK(close(a.py, b.py, 1e-12, 1e-18));
    CHECK(close(a.zeta, b.zeta, 1e-12, 1e-15));  // zeta = L - L rv0v (...): ~1e-16 L cancellation
  }
}

TEST_CASE("Corrector: kick independent of delta, displacement x += L (px + hkick/2) / (1 + delta)") {
  ft::ParticleView p = particle(1e-3, 0.0, 0.0, 0.0, 0.0, 2e-3, kBetaHalf);
  Corrector_track(make_corrector(2.0, 1e-3, 0.0), p);
  CHECK(p.px == 1e-3);
  CHECK(close(p.x, 1e-3 + 2.0 * 0.5e-3 / 1.002, 1e-15));
  ft::ParticleView thin = particle(1e-3, 0.0, 0.0, 0.0, 0.0, 0.0, kBetaHalf);
  Corrector_track(make_corrector(0.0, 1e-3, 2e-3), thin);
  CHECK(thin.x == 1e-3);
  CHECK(thin.px == 1e-3);
  CHECK(thin.py == 2e-3);
}

TEST_CASE("Corrector: drift matrix, symplectic, inverse with -length and -kicks") {
  const Mat6 m = jacobian(make_corrector(1.3, 3e-4, 1e-4), Corrector_track, Vec6{0, 0, 0, 0, 0, 0}, kBetaHalf);
  CHECK(std::fabs(m[0][1] - 1.3) < 1e-9);
  CHECK(std::fabs(m[2][3] - 1.3) < 1e-9);
  CHECK(std::fabs(m[1][0]) < 1e-12);
  for (const Case& c : cases()) {
    CHECK(symplecticity_error(jacobian(make_corrector(1.3, 3e-4, 1e-4), Corrector_track, canonical(c), c.beta0)) <
          kSymplecticTolerance);
    ft::ParticleView p = particle(c);
    Corrector_track(make_corrector(1.3, 3e-4, 1e-4), p);
    Corrector_track(make_corrector(-1.3, -3e-4, -1e-4), p);
    CHECK(close(p.x, c.x, 1e-13, 1e-18));
    CHECK(close(p.px, c.px, 1e-13, 1e-18));
    CHECK(close(p.y, c.y, 1e-13, 1e-18));
    CHECK(close(p.py, c.py, 1e-13, 1e-18));
    CHECK(close(p.zeta, c.zeta, 1e-13, 1e-17));
  }
}

}  // namespace test_corrector
