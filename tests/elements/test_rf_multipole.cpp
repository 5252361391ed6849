// RFMultipole (elements/rf_multipole.h) against the kick written independently with complex
// numbers (std::complex, std::pow, std::tgamma), the crab cavity's symplecticity
// (Panofsky-Wenzel consistency of its transverse and energy kicks), and bad input.
#include <doctest/doctest.h>

#include <complex>
#include <stdexcept>

#include "rf_multipole.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_rf_multipole.
namespace test_rf_multipole {

using namespace ft_test;

namespace {

RFMultipole make(const ft_reference& /*ref*/, double voltage, double frequency, double lag) {
  RFMultipole e = with_defaults<RFMultipole>(ft_element_descriptor_RFMultipole());
  e.voltage = voltage;
  e.frequency = frequency;
  e.lag = lag;
  return e;
}

/// The documented kick, evaluated independently: returns (dpx, dpy, dE [eV]).
std::array<double, 3> expected_kick(const RFMultipole& e, const ft_reference& ref, const ft::ParticleView& p) {
  const double pi = std::acos(-1.0), c = 299792458.0;
  const double w = 2.0 * pi * e.frequency / c;
  const double tau = p.zeta / ref.beta0;
  const std::complex<double> z(p.x, p.y);
  double dpx = 0.0, dpy = 0.0, de = e.voltage * std::sin(e.lag * pi / 180.0 + e.phase - w * tau);
  for (int n = 0; n <= FT_RF_MULTIPOLE_MAX_ORDER; ++n) {
    const double phi = e.pn[n] * pi / 180.0 + e.phase_n[n] - w * tau;
    const double psi = e.ps[n] * pi / 180.0 + e.phase_s[n] - w * tau;
    const std::complex<double> zn = std::pow(z, n) / std::tgamma(n + 1.0);
    const std::complex<double> zn1 = zn * z;
    dpx += -(std::cos(phi) * e.knl[n] * zn.real() - std::cos(psi) * e.ksl[n] * zn.imag());
    dpy += std::cos(psi) * e.ksl[n] * zn.real() + std::cos(phi) * e.knl[n] * zn.imag();
    de += -w * ref.p0c * (std::sin(phi) * e.knl[n] * zn1.real() - std::sin(psi) * e.ksl[n] * zn1.imag());
  }
  return {dpx, dpy, std::fabs(ref.q0) * de};
}

}  // namespace

TEST_CASE("RFMultipole: kicks equal the formula written with complex numbers") {
  for (const Case& c : cases()) {
    const ft_reference ref = reference_proton(c.beta0);
    RFMultipole e = make(ref, 2e6, 400.79e6, 30.0);
    e.phase = 0.1;
    const double knl[] = {1e-4, 2e-3, -3e-2, 0.5, 0.0, 4.0};
    const double ksl[] = {-2e-4, 1e-3, 5e-2, 0.0, -2.0, 0.0};
    for (int n = 0; n <= 5; ++n) {
      e.knl[n] = knl[n];
      e.ksl[n] = ksl[n];
      e.pn[n] = 10.0 * n - 90.0;
      e.ps[n] = 25.0 - 7.0 * n;
      e.phase_n[n] = 0.01 * n;
      e.phase_s[n] = -0.02 * n;
    }
    RFMultipole_prepare(e, ref);
    CHECK(e.kick_order == 5);
    const ft::ParticleView before = particle(c);
    ft::ParticleView p = before;
    RFMultipole_track(e, p);
    const auto k = expected_kick(e, ref, before);
    CHECK(close(p.px - before.px, k[0], 1e-12, 1e-19));
    CHECK(close(p.py - before.py, k[1], 1e-12, 1e-19));
    // Energy: ptau beta0 gains dE / E0.
    CHECK(close((p.ptau - before.ptau) * ref.beta0, k[2] / ref.energy0, 1e-9, 1e-19));
    CHECK(p.x == before.x);
    CHECK(p.y == before.y);
    CHECK(p.zeta == before.zeta);
    CHECK(close(p.rpp, 1.0 / (1.0 + p.delta), 1e-15));
  }
}

TEST_CASE("RFMultipole: a crab cavity (order 0) is symplectic, its kick vanishes at the crossing phase") {
  for (const Case& c : cases()) {
    const ft_reference ref = reference_proton(c.beta0);
    RFMultipole e = make(ref, 0.0, 400.79e6, 0.0);
    e.ksl[0] = 2e-5;  // vertical crab
    e.ps[0] = 90.0;
    RFMultipole_prepare(e, ref);
    const Mat6 m = jacobian(e, RFMultipole_track, canonical(c), c.beta0);
    CHECK(symplecticity_error(m) < kSymplecticTolerance);
    // At zeta = 0 with ps = 90 deg the crab kick is cos(pi/2) ~ 0: the reference is not deflected.
    ft::ParticleView p = particle(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, c.beta0);
    RFMultipole_track(e, p);
    CHECK(std::fabs(p.py) < 1e-20);
    // A particle ahead (zeta > 0) gets a vertical kick of the sign of sin(w zeta / beta0) ksl.
    ft::ParticleView q = particle(0.0, 0.0, 0.0, 0.0, 0.05, 0.0, c.beta0);
    RFMultipole_track(e, q);
    CHECK(q.py > 0.0);
  }
}

TEST_CASE("RFMultipole: bad input") {
  const ft_reference ref = reference_proton(0.9);
  RFMultipole e = make(ref, 1e6, 1e8, 0.0);
  e.order = 7;
  CHECK_THROWS_AS(RFMultipole_prepare(e, ref), std::invalid_argument);
  e.order = 1;
  e.knl[3] = 1.0;  // above the declared order
  CHECK_THROWS_AS(RFMultipole_prepare(e, ref), std::invalid_argument);
  e.knl[3] = 0.0;
  e.frequency = -1.0;
  CHECK_THROWS_AS(RFMultipole_prepare(e, ref), std::invalid_argument);
  e.frequency = 1e8;
  CHECK_NOTHROW(RFMultipole_prepare(e, ref));
}

}  // namespace test_rf_multipole
