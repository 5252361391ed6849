// DipoleEdge (elements/dipole_edge.h): r21, r43 from k, e1, hgap, fint (MAD-X DIPEDGE linear
// model), the kicks, symplecticity.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "dipole_edge.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_dipole_edge.
namespace test_dipole_edge {

using namespace ft_test;

namespace {
DipoleEdge make_edge(double k, double e1, double hgap, double fint, double e1_fd = 0.0) {
  DipoleEdge d = with_defaults<DipoleEdge>(ft_element_descriptor_DipoleEdge());
  d.k = k;
  d.e1 = e1;
  d.hgap = hgap;
  d.fint = fint;
  d.e1_fd = e1_fd;
  DipoleEdge_prepare(d, reference_proton(0.9));
  return d;
}
}  // namespace

TEST_CASE("DipoleEdge: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_DipoleEdge();
  CHECK(d.flags == FT_THIN);
  CHECK(find_field(d, "r21")->flags == FT_FIELD_DERIVED);
  CHECK(find_field(d, "r43")->flags == FT_FIELD_DERIVED);
  CHECK(std::string(find_field(d, "e1")->unit) == "rad");
}

TEST_CASE("DipoleEdge: r21 = k tan e1, r43 = -k tan(e1 - psi) and the kicks") {
  const double k = 1.0 / 12.0, e1 = 0.07, hgap = 0.035, fint = 0.5;
  // psi = 2 k hgap fint (1 + sin^2 e1) / cos e1   (fringe-field correction of the vertical edge focusing)
  const double psi = 2.0 * k * hgap * fint * (1.0 + std::sin(e1) * std::sin(e1)) / std::cos(e1);
  const double r21 = k * std::tan(e1);
  const double r43 = -k * std::tan(e1 - psi);
  const DipoleEdge d = make_edge(k, e1, hgap, fint);
  CHECK(close(d.r21, r21, 1e-15));
  CHECK(close(d.r43, r43, 1e-14));
  for (const Case& c : cases()) {
    CAPTURE(c.beta0);
    ft::ParticleView p = particle(c);
    DipoleEdge_track(d, p);
    CHECK(close(p.px, c.px + r21 * c.x, 1e-14, 1e-20));
    CHECK(close(p.py, c.py + r43 * c.y, 1e-14, 1e-20));
    CHECK(p.x == c.x);
    CHECK(p.y == c.y);
    CHECK(p.zeta == c.zeta);
    CHECK(p.delta == c.delta);
  }
  SUBCASE("without fringe field the two planes are opposite") {
    const DipoleEdge h = make_edge(k, e1, 0.0, 0.0);
    CHECK(close(h.r43, -h.r21, 1e-15));
  }
  SUBCASE("e1_fd acts only in the vertical plane") {
    const DipoleEdge f = make_edge(k, e1, hgap, fint, 0.01);
    const double e1v = e1 + 0.01;
    const double psiv = 2.0 * k * hgap * fint * (1.0 + std::sin(e1v) * std::sin(e1v)) / std::cos(e1v);
    CHECK(close(f.r21, r21, 1e-15));
    CHECK(close(f.r43, -k * std::tan(e1v - psiv), 1e-14));
  }
}

TEST_CASE("DipoleEdge: symplectic") {
  const DipoleEdge d = make_edge(0.2, 0.15, 0.04, 0.6);
  for (const Case& c : cases()) {
    CAPTURE(c.beta0);
    const Mat6 j = jacobian(d, DipoleEdge_track, canonical(c), c.beta0);
    CHECK(symplecticity_error(j) < kSymplecticTolerance);
    CHECK(std::fabs(j[1][0] - d.r21) < 1e-10);
  }
}

}  // namespace test_dipole_edge
