// Analytic instability references (fusetrack/instability_theory.h) against independent results:
// Sacherer's mode 0 at zero chromaticity against the rigid flat bunch on a short wake, the sign of
// head-tail damping with chromaticity, the coupled-bunch tune shift of point bunches against the
// direct time-domain sum of the wake over the train's history, the one-sideband resistive-wall rate
// against the full sum, the damper against the iterated centroid map, and the growth fit on signals
// of known rate.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>

#include "fusetrack/error.h"
#include "fusetrack/instability_theory.h"
#include "fusetrack/transverse_wakes.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_instability_theory.
namespace test_instability_theory {

using namespace ft;
using namespace ft::instability;

namespace {
constexpr double kPi = 3.14159265358979323846;
constexpr double kE = 1.602176634e-19, kC = 299792458.0;

// An SPS-like proton beam at 26 GeV.
RingBeam sps_like() {
  RingBeam b;
  b.gamma = 27.7;
  b.intensity = 1.5e11;
  b.revolution_frequency = 43347.0;
  b.tune = 26.18;
  b.synchrotron_tune = 0.0059;
  b.eta = 1.8e-3;
  return b;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("instability theory: Sacherer mode 0 at zero chromaticity is the rigid flat-bunch shift") {
  // A broadband resonator far above the bunch spectrum acts as a short wake of integral
  // integral W dt = -i Z(0) = R / Q_r: each particle is kicked by (q e)^2 N lambda(t) (R / Q_r) <x> / (p0 v),
  // and a flat bunch of full length tau (lambda = 1 / tau) shifts by
  //   dQ = -(q e)^2 N (R / Q_r) beta_smooth / (4 pi p0 v tau),  beta_smooth = R_ring / Q = v / (omega0 Q).
  RingBeam b = sps_like();
  const double tau = 2e-9, r = 10e6, qr = 1.0, f_r = 50.0 / tau;  // Z_perp(0) = i R / Q_r
  const wakes::Resonator bb(r, f_r, qr);
  auto z = [&](double f) { return bb.impedance(wakes::Component::dipolar_x, f); };
  const SachererResult s = sacherer(b, z, tau, 0);
  const double m0 = b.mass * kE / (kC * kC), v = b.beta0() * kC, p0 = b.gamma * m0 * v;
  const double w0 = 2.0 * kPi * b.revolution_frequency;
  const double expected = -(kE * kE) * b.intensity * (r / qr) * (v / (w0 * b.tune)) / (4.0 * kPi * p0 * v * tau);
  MESSAGE("Sacherer dQ " << s.tune_shift << ", rigid flat bunch " << expected << " (relative difference "
                         << s.tune_shift.real() / expected - 1.0 << "), Z_eff " << s.effective_impedance);
  CHECK(s.tune_shift.real() == doctest::Approx(expected).epsilon(0.01));
  CHECK(std::fabs(s.tune_shift.imag()) < 1e-3 * std::fabs(s.tune_shift.real()));
  // |m| = 1 has half the prefactor and a smaller effective impedance
  const SachererResult s1 = sacherer(b, z, tau, 1);
  CHECK(std::abs(s1.tune_shift) < std::abs(s.tune_shift));
}

TEST_CASE("instability theory: head-tail mode 0 is damped for Q' > 0 above transition and grows for Q' < 0") {
  RingBeam b = sps_like();
  const double tau = 4 * 0.7e-9;
  const wakes::Resonator bb(10e6, 1.3e9, 1.0);
  auto z = [&](double f) { return bb.impedance(wakes::Component::dipolar_x, f); };
  double previous = 0.0;
  for (double qp : {-5.0, -2.0, 0.0, 2.0, 5.0}) {
    b.chromaticity = qp;
    const SachererResult s = sacherer(b, z, tau, 0);
    MESSAGE("Q' = " << qp << ": dQ " << s.tune_shift << ", growth " << s.growth_rate << " 1/s, "
                    << s.growth_rate_per_turn << " 1/turn");
    if (qp > 0) CHECK(s.growth_rate < 0.0);
    if (qp < 0) CHECK(s.growth_rate > 0.0);
    if (qp != -5.0) CHECK(s.growth_rate < previous);  // monotonic over this range
    previous = s.growth_rate;
    CHECK(s.growth_rate_per_turn == doctest::Approx(s.growth_rate / b.revolution_frequency));
  }
  // below transition the sign flips
  b.eta = -b.eta;
  b.chromaticity = 2.0;
  CHECK(sacherer(b, z, tau, 0).growth_rate > 0.0);
}

TEST_CASE("instability theory: coupled-bunch tune shift equals the time-domain sum over the train") {
  // M point bunches and a resonator whose wake lasts a few turns: dQ_mu = -beta K S / (4 pi),
  // S = sum_{k>=1} W(k T_b) e^{-i omega_mu k T_b}, summed directly (independent of the impedance).
  RingBeam b = sps_like();
  b.bunches = 4;
  const double f0 = b.revolution_frequency, tb = 1.0 / (b.bunches * f0), beta_x = 40.0;
  const wakes::Resonator res(1e8, 3.37 * f0, 200.0);  // decay time 2Q / omega_r ~ 19 turns
  auto z = [&](double f) { return res.impedance(wakes::Component::dipolar_x, f); };
  const double k = kE * b.intensity / (b.beta0() * b.p0c());
  for (int mu = 0; mu < b.bunches; ++mu) {
    const double w = 2.0 * kPi * (mu + b.tune) * f0;
    Complex s(0.0, 0.0);
    for (int n = 1; n < 400 * b.bunches; ++n)
      s += res.wake(wakes::Component::dipolar_x, n * tb) * std::exp(Complex(0.0, -w * n * tb));
    const Complex direct = -beta_x * k * s / (4.0 * kPi);
    const Complex poisson = coupled_bunch_tune_shift(b, z, beta_x, mu, 2e4 * b.bunches * f0);
    MESSAGE("mu " << mu << ": direct " << direct << ", Poisson " << poisson << ", |difference| / |direct| "
                   << std::abs(poisson - direct) / std::abs(direct));
    CHECK(std::abs(poisson - direct) < 1e-3 * std::abs(direct));
  }
}

TEST_CASE("instability theory: resistive-wall coupled-bunch growth, one sideband against the full sum") {
  RingBeam b = sps_like();
  const double beta_x = 40.0;
  const wakes::ResistiveWall rw(0.02, 6911.0, 1.4e6);  // stainless-steel-like SPS pipe
  auto z = [&](double f) { return rw.impedance(wakes::Component::dipolar_x, f); };
  // M >> 1: the sideband at -(1 - frac Q) f0 dominates the sum (with M = 1 the one at +frac Q f0 = +0.18 f0
  // is nearer to zero and the single point bunch is stable, as the full sum says)
  for (int m : {72, 288}) {
    b.bunches = m;
    const double one = resistive_wall_growth_rate(b, z, beta_x);
    double best = -1e300;
    int best_mu = -1;
    for (int mu = 0; mu < m; ++mu) {
      const double rate = -2.0 * kPi * b.revolution_frequency *
                          coupled_bunch_tune_shift(b, z, beta_x, mu, 2e3 * m * b.revolution_frequency).imag();
      if (rate > best) {
        best = rate;
        best_mu = mu;
      }
    }
    MESSAGE("M = " << m << ": one sideband " << one << " 1/s, full sum " << best << " 1/s (mode " << best_mu
                    << "), relative difference " << one / best - 1.0);
    // the most unstable mode has its sideband at -(1 - frac Q) f0: mu + Q = -0.82 mod M
    CHECK((best_mu + 26 + 1) % m == 0);
    CHECK(best == doctest::Approx(one).epsilon(0.02));
  }
}

TEST_CASE("instability theory: the ideal damper against the iterated centroid map") {
  for (double turns : {20.0, 100.0}) {
    const double g = damper_gain(turns), mu = 2.0 * kPi * 0.31;
    double x = 1e-3, px = 0.0;
    std::vector<double> t, s;
    for (int n = 0; n < 400; ++n) {
      t.push_back(n);
      s.push_back(x);
      const double xn = std::cos(mu) * x + std::sin(mu) * px, pn = -std::sin(mu) * x + std::cos(mu) * px;
      x = xn;
      px = pn * (1.0 - g);
    }
    const GrowthFit fit = fit_exponential_growth(t, s);
    MESSAGE("damping time " << turns << " turns: fitted rate " << fit.rate << " +- " << fit.rate_error
                            << ", exact " << -damper_amplitude_rate_per_turn(g) << ", 1/turns " << -1.0 / turns);
    CHECK(-fit.rate == doctest::Approx(damper_amplitude_rate_per_turn(g)).epsilon(1e-3));
    CHECK(-fit.rate == doctest::Approx(1.0 / turns).epsilon(0.05));
  }
  CHECK(error_of([] { damper_gain(0.5); }).find("at least one turn") != std::string::npos);
  CHECK(error_of([] { damper_amplitude_rate_per_turn(1.5); }).find("gain") != std::string::npos);
}

TEST_CASE("instability theory: the growth fit recovers known rates from noisy signals") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 1.0);
  for (double rate : {2e-3, -5e-3, 1e-4}) {
    std::vector<double> t, s;
    for (int n = 0; n < 3000; ++n) {
      t.push_back(n);
      s.push_back(1e-4 * std::exp(rate * n) * std::cos(2.0 * kPi * 0.2731 * n + 0.4) * (1.0 + 0.01 * noise(rng)));
    }
    const GrowthFit fit = fit_exponential_growth(t, s, 100, 2900);
    MESSAGE("rate " << rate << ": fitted " << fit.rate << " +- " << fit.rate_error << " (" << fit.points << " peaks)");
    CHECK(std::fabs(fit.rate - rate) < 5e-5);
    CHECK(std::fabs(fit.rate - rate) < 5.0 * fit.rate_error + 1e-6);
  }
  CHECK(error_of([] { fit_exponential_growth({0, 1, 2}, {1, 1, 1}); }).find("peaks") != std::string::npos);
}

TEST_CASE("instability theory: Sacherer's short-bunch limit against the point-bunch coupled-bunch rate") {
  // Two independent formulas: Sacherer's (sinusoidal mode 0, bunch much shorter than 1 / f of the
  // resistive wall's dominant sidebands) and the rigid point bunches derived from the wake sum, with the
  // smooth beta = R / Q = beta0 c / (omega0 Q) that Sacherer's formula assumes. In this limit Z_eff sum_p h
  // -> h(0) sum_p Z, sum_p h -> integral h d omega / (M omega0), so the ratio of the growth rates is
  // 4 / J with J = integral (1 + cos pi x) / (x^2 - 1)^2 dx = pi^2 / 2: 8 / pi^2 (the sinusoidal mode's
  // dipole moment is not that of a rigid bunch).
  RingBeam b = sps_like();
  b.bunches = 18;
  const wakes::ResistiveWall rw(0.02, 6911.0, 1.4e6);
  auto z = [&](double f) { return rw.impedance(wakes::Component::dipolar_x, f); };
  const double w0 = 2.0 * kPi * b.revolution_frequency, beta_smooth = b.beta0() * kC / (w0 * b.tune);
  int mu_s = -1;
  const SachererResult s = sacherer_most_unstable(b, z, 0.05e-9, 0, &mu_s);
  double best = -1e300;
  int mu_p = -1;
  for (int mu = 0; mu < b.bunches; ++mu) {
    const double rate = -w0 * coupled_bunch_tune_shift(b, z, beta_smooth, mu, 4e3 * b.bunches * b.revolution_frequency).imag();
    if (rate > best) {
      best = rate;
      mu_p = mu;
    }
  }
  MESSAGE("Sacherer " << s.growth_rate << " 1/s (mode " << mu_s << "), point bunches " << best << " 1/s (mode "
                      << mu_p << "), ratio " << s.growth_rate / best << ", 8/pi^2 = " << 8.0 / (kPi * kPi));
  CHECK(mu_s == mu_p);
  CHECK(s.growth_rate / best == doctest::Approx(8.0 / (kPi * kPi)).epsilon(0.01));
}

}  // namespace test_instability_theory
