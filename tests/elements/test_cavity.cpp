// Cavity (elements/cavity.h): energy gain q0 V sin(lag - 2 pi f zeta / (beta0 c)), consistency of
// delta, ptau, rpp, rvv after the kick, harmonic -> frequency, prepare errors, symplecticity.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "cavity.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_cavity.
namespace test_cavity {

using namespace ft_test;

namespace {
constexpr double kC = 299792458.0;
constexpr double kPi = 3.14159265358979323846;

Cavity make_cavity(double voltage, double frequency, double lag_deg, double harmonic, const ft_reference& ref) {
  Cavity c = with_defaults<Cavity>(ft_element_descriptor_Cavity());
  c.voltage = voltage;
  c.frequency = frequency;
  c.lag = lag_deg;
  c.harmonic = harmonic;
  Cavity_prepare(c, ref);
  return c;
}

// delta, ptau, rpp, rvv mutually consistent (formulas of element_testing.h, not particle.h).
// particle.h forms ptau beta0 = sqrt(...) - 1 and delta = sqrt(...) - 1 as xtrack does, so
// delta carries an absolute rounding of a few 1e-16.
void check_consistent(const ft::ParticleView& p) {
  CHECK(close(p.delta, delta_from_ptau(p.ptau, p.beta0), 1e-14, 1e-15));
  CHECK(close(p.rpp, 1.0 / (1.0 + p.delta), 1e-15));
  CHECK(close(p.rvv, (1.0 + p.delta) / (1.0 + p.beta0 * p.ptau), 1e-15));
}
}  // namespace

TEST_CASE("Cavity: descriptor") {
  const ft_element_type_desc& d = ft_element_descriptor_Cavity();
  CHECK(d.flags == FT_THIN);
  CHECK(d.length_field == -1);
  CHECK((d.prepare != nullptr));
  CHECK(find_field(d, "voltage")->has_default == 0);
  CHECK(std::string(find_field(d, "lag")->unit) == "deg");
  CHECK(std::string(find_field(d, "frequency")->unit) == "Hz");
  CHECK(find_field(d, "harmonic")->default_value == 0.0);
  CHECK(find_field(d, "k_rf")->flags == FT_FIELD_DERIVED);
  CHECK(find_field(d, "energy_kick")->flags == FT_FIELD_DERIVED);
}

TEST_CASE("Cavity: energy gain equals q0 V sin(phase), particle stays consistent") {
  const double voltage = 6.0e6, frequency = 400.79e6;
  for (const double lag : {180.0, 30.0, -75.0}) {
    for (const Case& c : cases()) {
      CAPTURE(lag);
      CAPTURE(c.delta);
      CAPTURE(c.beta0);
      const ft_reference ref = reference_proton(c.beta0);
      const Cavity cav = make_cavity(voltage, frequency, lag, 0.0, ref);
      ft::ParticleView p = particle(c);
      const double ptau0 = p.ptau;
      Cavity_track(cav, p);
      // phase seen by a particle at zeta: lag - 2 pi f t, t = zeta / (beta0 c) ahead of the reference
      const double phase = lag * kPi / 180.0 - 2.0 * kPi * frequency * c.zeta / (c.beta0 * kC);
      const double gain_ev = ref.q0 * voltage * std::sin(phase);
      // E - E0 = ptau p0c; the kick adds its rounding ~1e-16 E0 (see check_consistent).
      CHECK(close((p.ptau - ptau0) * ref.p0c, gain_ev, 1e-13, 1e-15 * ref.energy0));
      check_consistent(p);
      CHECK(p.px == c.px);
      CHECK(p.py == c.py);
      CHECK(p.x == c.x);
      CHECK(p.zeta == c.zeta);
    }
  }
}

TEST_CASE("Cavity: synchronous particle gains q0 V sin(lag) per passage") {
  const ft_reference ref = reference_proton(kBetaHalf);
  const Cavity cav = make_cavity(1.0e5, 1.0e6, 30.0, 0.0, ref);
  ft::ParticleView p = particle(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, kBetaHalf);
  Cavity_track(cav, p);
  // abs tolerance: particle.h add_to_energy rounds (dE/E0 + 1) - 1, ~1e-16 E0
  CHECK(close(p.ptau * ref.p0c, 0.5e5, 1e-13, 1e-15 * ref.energy0));
  check_consistent(p);
  Cavity_track(cav, p);
  CHECK(close(p.ptau * ref.p0c, 1.0e5, 1e-13, 2e-15 * ref.energy0));
}

TEST_CASE("Cavity: harmonic gives f = h beta0 c / circumference") {
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    const double circumference = 6911.5;
    const ft_reference ref = reference_proton(beta0, circumference);
    const Cavity by_h = make_cavity(2.0e6, 0.0, 0.0, 4620.0, ref);
    const Cavity by_f = make_cavity(2.0e6, 4620.0 * beta0 * kC / circumference, 0.0, 0.0, ref);
    CHECK(close(by_h.k_rf, 2.0 * kPi * 4620.0 / circumference, 1e-14));
    CHECK(close(by_h.k_rf, by_f.k_rf, 1e-14));
    CHECK(by_h.energy_kick == by_f.energy_kick);
  }
}

TEST_CASE("Cavity: charge enters as |q0| (xtrack), scaled by the charge state") {
  ft_reference ref = reference_proton(kBetaHalf);
  const Cavity pos = make_cavity(1.0e6, 2.0e8, 45.0, 0.0, ref);
  ref.q0 = -1.0;
  const Cavity neg = make_cavity(1.0e6, 2.0e8, 45.0, 0.0, ref);
  ref.q0 = 3.0;
  const Cavity ion = make_cavity(1.0e6, 2.0e8, 45.0, 0.0, ref);
  CHECK(neg.energy_kick == pos.energy_kick);
  CHECK(close(ion.energy_kick, 3.0 * pos.energy_kick, 1e-15));
  CHECK(close(pos.energy_kick, 1.0e6 / ref.energy0, 1e-15));
}

TEST_CASE("Cavity: prepare errors name the field") {
  const ft_reference ring = reference_proton(0.9, 1000.0);
  const ft_reference no_ring = reference_proton(0.9, 0.0);
  Cavity c = with_defaults<Cavity>(ft_element_descriptor_Cavity());
  c.voltage = 1e6;
  c.harmonic = 10.0;
  try {
    Cavity_prepare(c, no_ring);
    FAIL("no exception for harmonic without circumference");
  } catch (const std::invalid_argument& ex) {
    CHECK(std::string(ex.what()).find("harmonic") != std::string::npos);
    CHECK(std::string(ex.what()).find("circumference") != std::string::npos);
  }
  CHECK_NOTHROW(Cavity_prepare(c, ring));

  c.harmonic = 0.0;
  c.frequency = 0.0;
  try {
    Cavity_prepare(c, ring);
    FAIL("no exception for voltage without frequency or harmonic");
  } catch (const std::invalid_argument& ex) {
    CHECK(std::string(ex.what()).find("frequency") != std::string::npos);
  }
  c.voltage = 0.0;
  CHECK_NOTHROW(Cavity_prepare(c, ring));  // an idle cavity needs no frequency

  c.voltage = 1e6;
  c.frequency = 1e8;
  c.harmonic = 10.0;
  CHECK_THROWS_AS(Cavity_prepare(c, ring), std::invalid_argument);

  // Through the C ABI wrapper of element.h: non-zero return and the message.
  c.frequency = 0.0;
  const ft_element_type_desc& d = ft_element_descriptor_Cavity();
  ft_error err{};
  CHECK(d.prepare(&c, &no_ring, &err) != 0);
  CHECK(std::string(err.message).find("harmonic") != std::string::npos);
  CHECK(d.prepare(&c, &ring, &err) == 0);
}

TEST_CASE("Cavity: symplectic") {
  for (const Case& c : cases()) {
    CAPTURE(c.beta0);
    const Cavity cav = make_cavity(8.0e6, 4.0e8, 150.0, 0.0, reference_proton(c.beta0));
    const Mat6 j = jacobian(cav, Cavity_track, canonical(c), c.beta0);
    CHECK(symplecticity_error(j) < kSymplecticTolerance);
    CHECK(std::fabs(j[5][4]) > 1e-5);  // d pzeta / d zeta: the kick depends on zeta
  }
}

}  // namespace test_cavity
