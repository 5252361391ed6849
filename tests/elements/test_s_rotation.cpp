// SRotation (elements/s_rotation.h): rotation of (x, y) and (px, py) by angle [deg], xtrack sign
// convention, symplecticity, inverse.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "s_rotation.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_s_rotation.
namespace test_s_rotation {

using namespace ft_test;

namespace {
SRotation make_rot(double angle_deg) {
  SRotation r = with_defaults<SRotation>(ft_element_descriptor_SRotation());
  r.angle = angle_deg;
  SRotation_prepare(r, reference_proton(0.9));
  return r;
}
}  // namespace

TEST_CASE("SRotation: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_SRotation();
  CHECK(d.flags == FT_THIN);
  CHECK(std::string(find_field(d, "angle")->unit) == "deg");
  CHECK(find_field(d, "cos_z")->flags == FT_FIELD_DERIVED);
  CHECK(find_field(d, "sin_z")->flags == FT_FIELD_DERIVED);
}

TEST_CASE("SRotation: x' = cos x + sin y, y' = -sin x + cos y, same for momenta") {
  for (const double angle : {17.0, -120.0}) {
    const double t = angle * 3.14159265358979323846 / 180.0;
    const SRotation r = make_rot(angle);
    CHECK(close(r.cos_z, std::cos(t), 1e-15));
    CHECK(close(r.sin_z, std::sin(t), 1e-15));
    for (const Case& c : cases()) {
      ft::ParticleView p = particle(c);
      SRotation_track(r, p);
      CHECK(close(p.x, std::cos(t) * c.x + std::sin(t) * c.y, 1e-14, 1e-19));
      CHECK(close(p.y, -std::sin(t) * c.x + std::cos(t) * c.y, 1e-14, 1e-19));
      CHECK(close(p.px, std::cos(t) * c.px + std::sin(t) * c.py, 1e-14, 1e-19));
      CHECK(close(p.py, -std::sin(t) * c.px + std::cos(t) * c.py, 1e-14, 1e-19));
      CHECK(p.zeta == c.zeta);
      CHECK(p.delta == c.delta);
    }
  }
  SUBCASE("90 degrees: (x, y) -> (y, -x)") {
    ft::ParticleView p = particle(1e-3, 0.0, 2e-3, 0.0, 0.0, 0.0, 0.9);
    SRotation_track(make_rot(90.0), p);
    CHECK(close(p.x, 2e-3, 1e-15, 1e-18));
    CHECK(close(p.y, -1e-3, 1e-15, 1e-18));
  }
}

TEST_CASE("SRotation: angle then -angle is the identity") {
  for (const Case& c : cases()) {
    ft::ParticleView p = particle(c);
    SRotation_track(make_rot(33.0), p);
    SRotation_track(make_rot(-33.0), p);
    CHECK(close(p.x, c.x, 1e-15, 1e-19));
    CHECK(close(p.y, c.y, 1e-15, 1e-19));
    CHECK(close(p.px, c.px, 1e-15, 1e-19));
    CHECK(close(p.py, c.py, 1e-15, 1e-19));
  }
}

TEST_CASE("SRotation: symplectic") {
  const SRotation r = make_rot(25.0);
  for (const Case& c : cases()) {
    const Mat6 j = jacobian(r, SRotation_track, canonical(c), c.beta0);
    CHECK(symplecticity_error(j) < kSymplecticTolerance);
    CHECK(std::fabs(j[0][2] - std::sin(25.0 * 3.14159265358979323846 / 180.0)) < 1e-10);
  }
}

}  // namespace test_s_rotation
