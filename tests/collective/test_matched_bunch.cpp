// Matched longitudinal bunches: the RF bucket measured by tracking against the textbook
// stationary bucket; the potential-well distortion of a Gaussian bunch by an inductive impedance
// against the Haissinski equation solved independently (pointwise, with a Lambert W of our own);
// and the matched bunch tracked with the impedance keeps its rms length.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "collective/longitudinal_ring.h"
#include "fusetrack/longitudinal.h"
#include "fusetrack/monitor.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_matched_bunch.
namespace test_matched_bunch {

using namespace ft;
using ft::test::LongitudinalRing;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kC = 299792458.0;
constexpr double kE = 1.602176634e-19;

/// Principal branch W0(x), x >= -1/e: Halley's iteration on w e^w = x (Corless et al., "On the
/// Lambert W function", Adv. Comput. Math. 5 (1996) 329, eq. 5.9), started from the branch-point
/// series near -1/e and from log(1 + x) elsewhere.
double lambert_w0(double x) {
  const double e = std::exp(1.0);
  if (!(x >= -1.0 / e - 1e-15)) return std::nan("");  // outside the domain of W0
  double w;
  if (x < -0.25) {
    const double p = std::sqrt(std::max(2.0 * (e * x + 1.0), 0.0));
    w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p;
  } else {
    w = std::log1p(x);
  }
  for (int it = 0; it < 100; ++it) {
    const double ew = std::exp(w);
    const double f = w * ew - x;
    if (f == 0.0) break;
    const double wp1 = w + 1.0;
    if (wp1 == 0.0) break;
    const double step = f / (ew * wp1 - (w + 2.0) * f / (2.0 * wp1));
    w -= step;
    if (std::fabs(step) <= 1e-15 * (1.0 + std::fabs(w))) break;
  }
  return w;
}

struct Haissinski {
  std::vector<double> z, lambda, lambda0;  // distorted and zero-current line densities [1/m]
  double theta = 0.0;                       // K0 in energy units [eV m]
  double k = 0.0;                           // [m]
};

/// The Haissinski equation for a Gaussian (thermal) bunch in the RF potential of one cavity
/// Delta E = q V sin(lag - k_rf zeta) and a purely inductive impedance, written from scratch:
/// V_ind(t) = -L dI/dt (L = (Z/n) / omega_0, I = q e N lambda_t), which in zeta (t = -zeta /
/// (beta0 c)) is V_ind = L q e N (beta0 c)^2 lambda'(zeta). With Phi(zeta) = sign(eta) integral
/// Delta E_total dzeta [eV m] the equilibrium is lambda ~ exp(-Phi / Theta):
///   lambda exp(K lambda) = A exp(-Phi_rf / Theta),  K = sign(eta) q^2 e N L (beta0 c)^2 / Theta,
/// so lambda = W0(K A exp(-Phi_rf / Theta)) / K pointwise and A is fixed by the normalisation.
/// Theta is set so that the zero-current line density exp(-Phi_rf / Theta) over the bucket has
/// the rms sigma0 (as the generator defines it).
Haissinski haissinski(const LongitudinalRing& r, double circumference, double sign_eta, double sigma0) {
  const double mass = 938272088.16;
  const double beta0 = r.p0c / std::sqrt(r.p0c * r.p0c + mass * mass);
  const double k_rf = 2.0 * kPi * r.harmonic / circumference;
  const double half_bucket = kPi / k_rf;
  Haissinski h;
  const size_t n = 40001;
  for (size_t i = 0; i < n; ++i) h.z.push_back(-half_bucket + 2.0 * half_bucket * static_cast<double>(i) / (n - 1));
  // Phi_rf = sign(eta) integral q V sin(lag - k z) dz = q V (1 - cos k z) / k for the stable lag
  // (0 below transition, 180 deg above): the same expression on both sides.
  std::vector<double> phi(n);
  for (size_t i = 0; i < n; ++i) phi[i] = r.voltage * (1.0 - std::cos(k_rf * h.z[i])) / k_rf;
  auto integrate = [&](const std::vector<double>& f) {
    double s = 0.0;
    for (size_t i = 1; i < n; ++i) s += 0.5 * (f[i] + f[i - 1]) * (h.z[i] - h.z[i - 1]);
    return s;
  };
  auto rms_of = [&](const std::vector<double>& l) {
    std::vector<double> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = l[i];
      b[i] = l[i] * h.z[i] * h.z[i];
    }
    return std::sqrt(integrate(b) / integrate(a));  // symmetric: mean 0
  };
  auto zero_current = [&](double theta) {
    std::vector<double> l(n);
    for (size_t i = 0; i < n; ++i) l[i] = std::exp(-phi[i] / theta);
    return l;
  };
  double lo = 1e-6 * r.voltage, hi = 1e3 * r.voltage;
  for (int it = 0; it < 200; ++it) {
    const double mid = std::sqrt(lo * hi);
    (rms_of(zero_current(mid)) < sigma0 ? lo : hi) = mid;
  }
  h.theta = std::sqrt(lo * hi);
  h.lambda0 = zero_current(h.theta);
  const double norm0 = integrate(h.lambda0);
  for (double& v : h.lambda0) v /= norm0;
  const double inductance = r.z_over_n * circumference / (2.0 * kPi * beta0 * kC);
  h.k = sign_eta * kE * r.intensity * inductance * beta0 * kC * beta0 * kC / h.theta;
  auto solve = [&](double a) {
    std::vector<double> l(n);
    for (size_t i = 0; i < n; ++i) l[i] = lambert_w0(h.k * a * std::exp(-phi[i] / h.theta)) / h.k;
    return l;
  };
  // integral of lambda increases with A: bisection.
  double alo = 1e-6, ahi = 1e3;
  if (h.k < 0.0) ahi = std::min(ahi, 1.0 / (std::exp(1.0) * -h.k));  // W0 needs K A >= -1/e
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (alo + ahi);
    (integrate(solve(mid)) < 1.0 ? alo : ahi) = mid;
  }
  h.lambda = solve(0.5 * (alo + ahi));
  const double norm = integrate(h.lambda);
  for (double& v : h.lambda) v /= norm;
  return h;
}

double interpolate(const std::vector<double>& x, const std::vector<double>& y, double t) {
  if (t <= x.front()) return y.front();
  if (t >= x.back()) return y.back();
  const size_t j = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), t) - x.begin());
  const double w = (t - x[j - 1]) / (x[j] - x[j - 1]);
  return y[j - 1] + (y[j] - y[j - 1]) * w;
}

}  // namespace

TEST_CASE("Lambert W0 of our own against its definition and known values") {
  for (double x : {-1.0 / std::exp(1.0), -0.3, -0.1, 0.0, 0.5, 1.0, 10.0, 1e3}) {
    const double w = lambert_w0(x);
    CHECK(std::fabs(w * std::exp(w) - x) <= 1e-13 * std::max(1.0, std::fabs(x)) + 1e-9 * (x < -0.36 ? 1 : 0));
  }
  CHECK(ft::test::rel_diff(lambert_w0(1.0), 0.5671432904097838) < 1e-15);  // the omega constant
  CHECK(ft::test::rel_diff(lambert_w0(std::exp(1.0)), 1.0) < 1e-15);
}

TEST_CASE("RF bucket by tracking: the stationary bucket of one cavity against the textbook formulas") {
  // Lee, Accelerator Physics, eqs. 3.32-3.38: bucket half-height delta_max = 2 sqrt(q V / (2 pi h
  // |eta| beta^2 E)), small-amplitude Q_s = sqrt(h |eta| q V / (2 pi beta^2 E)) (smooth; the linear
  // map gives cos 2 pi Q_s = 1 - 2 pi^2 Q_s,smooth^2), eta = -1 / gamma^2 without bends.
  LongitudinalRing r;
  r.voltage = 1e5;
  const Lattice lattice = ft::test::longitudinal_ring(r);
  const RfBucket b = compute_rf_bucket(lattice);
  const double mass = 938272088.16, e0 = std::sqrt(r.p0c * r.p0c + mass * mass);
  const double gamma = e0 / mass, beta = r.p0c / e0;
  const double eta = -1.0 / (gamma * gamma);
  const double c = 160.0;
  CHECK(ft::test::rel_diff(b.circumference, c) < 1e-14);
  CHECK(ft::test::rel_diff(b.eta, eta) < 1e-7);  // optics: five-point finite differences
  CHECK(std::fabs(b.zeta_s) < 1e-9);
  // Unstable fixed points at +-C / (2h), from linear interpolation at a zero of sin: O(h^3).
  CHECK(ft::test::rel_diff(b.zeta_left, -c / (2 * r.harmonic)) < 1e-9);
  CHECK(ft::test::rel_diff(b.zeta_right, c / (2 * r.harmonic)) < 1e-9);
  const double delta_max = 2.0 * std::sqrt(r.voltage / (2 * kPi * r.harmonic * std::fabs(eta) * beta * beta * e0));
  // Trapezoidal integral of sin over 8001 points: (k h)^2 / 12 = 5e-8 relative in U.
  CHECK(ft::test::rel_diff(b.delta_max, delta_max) < 1e-7);
  const double qs_smooth = std::sqrt(r.harmonic * std::fabs(eta) * r.voltage / (2 * kPi * beta * beta * e0));
  const double qs_map = std::acos(1.0 - 2.0 * kPi * kPi * qs_smooth * qs_smooth) / (2 * kPi);
  CHECK(ft::test::rel_diff(b.qs, qs_map) < 1e-7);
  MESSAGE(fmt::format("bucket: zeta in [{:.9g}, {:.9g}] m, delta_max {:.6e} (formula {:.6e}), Qs {:.8e} (map {:.8e})",
                      b.zeta_left, b.zeta_right, b.delta_max, delta_max, b.qs, qs_map));
}

TEST_CASE("matched bunch without impedance: sampled moments and the linear matching condition") {
  // Small bunch (k sigma = 0.03): sigma_delta = sigma_zeta 2 pi Q_s,smooth / (|eta| C) up to the
  // RF non-linearity, (k sigma)^2 / 2 = 5e-4 relative.
  LongitudinalRing r;
  const Lattice lattice = ft::test::longitudinal_ring(r);
  for (const char* dist : {"gaussian", "parabolic"}) {
    MatchedBunchOptions o;
    o.distribution = dist;
    o.sigma_zeta = 0.2;
    o.seed = 11;
    const size_t n = 100000;
    const MatchedBunch m = generate_matched_bunch(lattice, n, o);
    const RfBucket& b = m.report.bucket;
    const double w_smooth = std::sqrt(std::fabs(b.eta) * b.circumference * b.kappa);
    const double expected = 0.2 * w_smooth / (std::fabs(b.eta) * b.circumference);
    CHECK(ft::test::rel_diff(m.report.sigma_zeta, 0.2) < 1e-6);
    CHECK(ft::test::rel_diff(m.report.sigma_delta, expected) < 2e-3);
    // Statistics of N samples: rms to 1 / sqrt(2 N) (Gaussian) = 0.22%; 4 sigma.
    CHECK(ft::test::rel_diff(m.report.sigma_zeta_sample, 0.2) < 9e-3);
    CHECK(ft::test::rel_diff(m.report.sigma_delta_sample, m.report.sigma_delta) < 9e-3);
    // Parabolic line density: the half-length is sqrt(5) sigma and nothing lies beyond it.
    if (std::string(dist) == "parabolic") {
      double zmax = 0.0;
      for (double z : m.particles.zeta) zmax = std::max(zmax, std::fabs(z));
      CHECK(zmax <= std::sqrt(5.0) * 0.2 * 1.002);
      CHECK(zmax >= std::sqrt(5.0) * 0.2 * 0.98);
    }
    MESSAGE(fmt::format("{}: sigma_delta {:.6e} (linear matching {:.6e}), samples {:.5f} m / {:.6e}", dist,
                        m.report.sigma_delta, expected, m.report.sigma_zeta_sample, m.report.sigma_delta_sample));
  }
}

TEST_CASE("potential-well distortion by an inductive impedance against the Haissinski equation (Lambert W)") {
  // Below transition (the ring as it is, eta < 0: the bunch shortens) and above (the same ring
  // with eta forced positive and the cavity at 180 deg in the smooth model: it lengthens).
  for (int above = 0; above < 2; ++above) {
    LongitudinalRing r;
    r.voltage = 1e6;
    r.intensity = 1e12;
    r.z_over_n = 100.0;
    r.lag = above ? 180.0 : 0.0;
    const Lattice lattice = ft::test::longitudinal_ring(r);
    MatchedBunchOptions o;
    o.distribution = "gaussian";
    o.sigma_zeta = 1.0;
    o.potential_well = true;
    if (above) o.bucket.eta = 0.18;
    const MatchedBunch m = generate_matched_bunch(lattice, 1000, o);
    const MatchedBunchReport& rep = m.report;
    REQUIRE(rep.converged);
    const Haissinski ref = haissinski(r, 160.0, above ? 1.0 : -1.0, 1.0);
    double peak = 0.0, diff = 0.0, distortion = 0.0;
    for (size_t i = 0; i < rep.zeta.size(); ++i) {
      const double l = interpolate(ref.z, ref.lambda, rep.zeta[i]);
      peak = std::max(peak, l);
      diff = std::max(diff, std::fabs(rep.line_density[i] - l));
      distortion = std::max(distortion, std::fabs(interpolate(ref.z, ref.lambda0, rep.zeta[i]) - l));
    }
    double peak_k = 0.0;
    for (double l : ref.lambda) peak_k = std::max(peak_k, std::fabs(ref.k * l));
    MESSAGE(fmt::format("{} transition: K lambda_peak = {:.3f}, {} iterations, sigma {:.6f} m (zero current {:.6f}); "
                        "max |lambda - Haissinski| / peak = {:.3e}, distortion itself {:.3e}",
                        above ? "above" : "below", ref.k * peak, rep.iterations, rep.sigma_zeta, rep.sigma_zeta_rf,
                        diff / peak, distortion / peak));
    // The distortion is large enough for the comparison to mean something.
    CHECK(distortion / peak > 0.05);
    // Discretisation of the slicing (256 slices over 12 m, dz / sigma = 0.047): the linear deposit and
    // the interpolation of the voltage between slice centres err by ~(dz / sigma)^2 / 8 = 3e-4 of
    // the induced voltage, which is ~|K| lambda ~ 0.4 of the potential: ~1e-4 in lambda; 1e-3 allows 10x.
    CHECK(diff / peak < 1e-3);
    if (above)
      CHECK(rep.sigma_zeta > rep.sigma_zeta_rf);
    else
      CHECK(rep.sigma_zeta < rep.sigma_zeta_rf);
  }
}

TEST_CASE("the matched bunch with potential-well distortion stays at its rms length when tracked") {
  LongitudinalRing r;
  r.voltage = 1e6;
  r.intensity = 1e12;
  r.z_over_n = 100.0;
  r.n_slices = 128;
  const Lattice lattice = ft::test::longitudinal_ring(r);
  const size_t n = 40000;
  const int64_t turns = 300;  // Q_s = 0.008: 2.4 synchrotron periods, 5 of a mismatch oscillation
  auto track_rms = [&](bool potential_well) {
    MatchedBunchOptions o;
    o.sigma_zeta = 1.0;
    o.potential_well = potential_well;
    o.seed = 5;
    MatchedBunch m = generate_matched_bunch(lattice, n, o);
    auto backend = make_cpu_backend(lattice);
    MonitorOptions mo;
    mo.progress = "off";
    BunchMonitor monitor(lattice, mo);
    TrackOptions t;
    t.turns = turns;
    monitor.attach(t, *backend);
    monitor.record(0, m.particles, backend.get());
    backend->track(m.particles, t);
    double worst = 0.0;
    const double s0 = monitor.moments().front().rms_zeta;  // of the particles tracked
    for (const BunchMoments& mm : monitor.moments()) worst = std::max(worst, std::fabs(mm.rms_zeta / s0 - 1.0));
    MESSAGE(fmt::format("potential well {}: sigma {:.5f} m (generator {:.5f} m), after {} turns {:.5f} m, largest "
                        "relative excursion {:.3e}",
                        potential_well ? "on " : "off", s0, m.report.sigma_zeta, turns,
                        monitor.moments().back().rms_zeta, worst));
    return worst;
  };
  const double matched = track_rms(true);
  const double unmatched = track_rms(false);
  // Matched: only the sampling noise of N = 4e4 particles (rms to ~1 / sqrt(2 N) = 0.35%) and the
  // slow heating by the profile noise remain. Mismatched (zero-current bunch): the rms oscillates by
  // about the length change of the potential well (~10%).
  CHECK(matched < 0.01);
  CHECK(unmatched > 3.0 * matched);
}

}  // namespace test_matched_bunch
