// The LongitudinalImpedance element (elements/longitudinal_impedance.h) against independent
// results: the resonator's wake and impedance formulas (Chao 1993, ch. 2, in the e^{-i omega t}
// convention of the framework), the induced voltage of a Gaussian bunch by numerical quadrature of
// the wake convolution, the energy loss q^2 e N k_loss with k_loss integrated from Re Z, the
// inductive voltage -q e N L dlambda/dt, tables written from the resonator formula, and the
// messages of bad input.
//
// Common setup: protons at p0c = 2 GeV (beta0 = 0.905), a Gaussian bunch of sigma_zeta = 0.1 m
// (sigma_t = 0.37 ns), cuts at +-6 sigma with 400 slices (dz = 3 mm, dt = 11 ps), N = 1e11, and a
// broadband resonator f_r = 1 GHz, Q = 1 (alpha = 3.1e9 /s, decay time 0.32 ns ~ sigma_t).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "fusetrack/collective.h"
#include "fusetrack/error.h"
#include "support/paths.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_longitudinal_impedance.
namespace test_longitudinal_impedance {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kC = 299792458.0;                  // [m/s]
constexpr double kElementaryCharge = 1.602176634e-19;  // [C]
constexpr double kMass = 938272088.16, kP0c = 2e9;  // protons [eV]
constexpr double kSigmaZeta = 0.1;                  // [m]
constexpr double kIntensity = 1e11;                 // protons per bunch

double beta0() { return kP0c / std::sqrt(kP0c * kP0c + kMass * kMass); }
double sigma_t() { return kSigmaZeta / (beta0() * kC); }

/// The resonator written out independently of the element's code (Chao 1993, eqs. 2.82-2.84 with
/// j -> -i): Z(f) = R / (1 + i Q (f/f_r - f_r/f)),
/// W(t > 0) = 2 alpha R e^{-alpha t} (cos wt - alpha/w sin wt), or with cosh, sinh of
/// kappa = sqrt(alpha^2 - omega_r^2) t when Q < 1/2.
struct AnalyticResonator {
  double r_shunt, frequency, q;
  double alpha() const { return kPi * frequency / q; }
  double wake_after(double t) const {  // W(t) for t >= 0, the value just after the jump at t = 0
    const double wr = 2 * kPi * frequency, a = alpha();
    if (q > 0.5) {
      const double w = std::sqrt(wr * wr - a * a);
      return 2 * a * r_shunt * std::exp(-a * t) * (std::cos(w * t) - a / w * std::sin(w * t));
    }
    const double k = std::sqrt(a * a - wr * wr);
    return 2 * a * r_shunt * std::exp(-a * t) * (std::cosh(k * t) - a / k * std::sinh(k * t));
  }
  double wake_sample(double t) const { return t < 0 ? 0.0 : t == 0 ? alpha() * r_shunt : wake_after(t); }
  std::complex<double> impedance(double f) const {
    if (f == 0) return 0.0;
    return r_shunt / std::complex<double>(1.0, q * (f / frequency - frequency / f));
  }
};

const AnalyticResonator kBroadband{5e3, 1e9, 1.0};

json resonator_source(const AnalyticResonator& r, bool multi_turn = true) {
  json s = {{"type", "Resonator"}, {"r_shunt", r.r_shunt}, {"frequency", r.frequency}, {"q", r.q}};
  if (!multi_turn) s["multi_turn"] = false;
  return s;
}

struct ImpedanceLattice {
  json sources = json::array();
  std::string method = "time";
  int n_slices = 400;
  double zeta_min = -6 * kSigmaZeta, zeta_max = 6 * kSigmaZeta;
  double intensity = kIntensity;
  double circumference = 1000.0;  // [m] a drift after the impedance; 0: a marker only
};

json lattice_json(const ImpedanceLattice& o) {
  json elements = {{"imp",
                    {{"type", "LongitudinalImpedance"},
                     {"n_slices", o.n_slices},
                     {"zeta_min", o.zeta_min},
                     {"zeta_max", o.zeta_max},
                     {"intensity", o.intensity},
                     {"method", o.method},
                     {"sources", o.sources}}},
                   {"ring", {{"type", "Drift"}, {"length", o.circumference}}},
                   {"end", {{"type", "Marker"}}}};
  return {{"fusetrack_lattice", 1},
          {"reference", {{"mass0", kMass}, {"q0", 1}, {"p0c", kP0c}}},
          {"elements", elements},
          {"sequence", {"imp", o.circumference > 0 ? "ring" : "end"}}};
}

/// `file` names the lattice in messages and sets the directory that table paths are relative to.
Lattice make_lattice(const ImpedanceLattice& o, const std::string& file = "impedance_test") {
  return lattice_from_json(lattice_json(o), file, test::builtin_registry());
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// Integer profile of a Gaussian bunch (sigma_zeta, centred): round(N_macro * unit * probability
/// of each slice), as the deposit of very many particles would give.
std::vector<uint64_t> gaussian_counts(const SliceGrid& g, double n_macro) {
  std::vector<uint64_t> counts(static_cast<size_t>(g.n_slices));
  const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
  for (int i = 0; i < g.n_slices; ++i) {
    const double lo = g.zeta_min + i * dz;
    const double p = normal_cdf((lo + dz) / kSigmaZeta) - normal_cdf(lo / kSigmaZeta);
    counts[static_cast<size_t>(i)] =
        static_cast<uint64_t>(std::llround(n_macro * static_cast<double>(kProfileUnit) * p));
  }
  return counts;
}

double slice_time(const CollectiveSolver& s, int i) {  // arrival time of slice centre i (zeta order)
  const SliceGrid g = s.slice_grid();
  const double zeta = g.zeta_min + (i + 0.5) * (g.zeta_max - g.zeta_min) / g.n_slices;
  return -zeta / (beta0() * kC);
}

double simpson(const std::function<double(double)>& f, double a, double b, int intervals) {
  if (intervals % 2) ++intervals;
  const double h = (b - a) / intervals;
  double sum = f(a) + f(b);
  for (int k = 1; k < intervals; ++k) sum += (k % 2 ? 4.0 : 2.0) * f(a + k * h);
  return sum * h / 3.0;
}

double gaussian_density_t(double t) {  // lambda(t) [1/s]
  const double s = sigma_t();
  return std::exp(-0.5 * t * t / (s * s)) / (s * std::sqrt(2 * kPi));
}

/// V(t) = -q e N integral_0^inf W(u) lambda(t - u) du by Simpson's rule on [0, t + 10 sigma_t]
/// (lambda < e^-50 beyond), 40000 intervals: the integrand is smooth there (W taken from the
/// right at u = 0), so the quadrature error is far below the tolerances (checked by halving).
double induced_voltage_quadrature(const std::function<double(double)>& wake_after, double t) {
  const double upper = t + 10 * sigma_t();
  if (upper <= 0) return 0.0;
  const double integral = simpson([&](double u) { return wake_after(u) * gaussian_density_t(t - u); }, 0.0, upper, 40000);
  return -kElementaryCharge * kIntensity * integral;
}

struct Comparison {
  double max_abs_diff = 0, peak = 0;
  double relative() const { return max_abs_diff / peak; }
};

/// The solver's field for the Gaussian bunch against `expected(t)` on every slice centre.
Comparison solve_and_compare(const Lattice& lattice, const std::function<double(double)>& expected) {
  const double n_macro = 1e6;
  CollectiveSolver solver(lattice, 0, FmaMode::Off, static_cast<size_t>(n_macro));
  const auto counts = gaussian_counts(solver.slice_grid(), n_macro);
  std::vector<double> field(counts.size());
  solver.solve(counts.data(), field.data());
  Comparison c;
  for (int i = 0; i < solver.n_slices(); ++i) {
    const double v = expected(slice_time(solver, i));
    c.peak = std::max(c.peak, std::fabs(v));
    c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(field[static_cast<size_t>(i)] - v));
  }
  return c;
}

std::string input_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("LongitudinalImpedance: resonator wake samples equal the analytic wake (Q > 1/2 and Q < 1/2)") {
  // Same formula in double precision on both sides, written differently (the element uses the
  // two decaying exponentials for Q < 1/2): rounding only, 1e-12 of the peak 2 alpha R.
  for (const AnalyticResonator r : {AnalyticResonator{1e4, 2e8, 3.0}, AnalyticResonator{1e4, 2e8, 0.3}}) {
    ImpedanceLattice o;
    o.n_slices = 100;
    o.sources.push_back(resonator_source(r));
    const Lattice lattice = make_lattice(o);
    CollectiveSolver solver(lattice, 0, FmaMode::Off, 1000);
    const auto& kernel = solver.wake_kernel();
    const int n = solver.n_slices();
    REQUIRE(kernel.size() == static_cast<size_t>(2 * n - 1));
    const double peak = 2 * r.alpha() * r.r_shunt;
    double worst = 0;
    for (int k = -(n - 1); k <= n - 1; ++k)
      worst = std::max(worst, std::fabs(kernel[static_cast<size_t>(k + n - 1)] - r.wake_sample(k * solver.dt())));
    MESSAGE("Q = ", r.q, ": max |K_k - W(k dt)| / (2 alpha R) = ", worst / peak);
    CHECK(worst / peak < 1e-12);
    CHECK(kernel[static_cast<size_t>(n - 1)] == doctest::Approx(r.alpha() * r.r_shunt).epsilon(1e-14));  // half value
    CHECK(kernel[static_cast<size_t>(n - 2)] == 0.0);  // causal
  }
}

TEST_CASE("LongitudinalImpedance: resonator spectrum equals Z(m df) / (N dt), and Z is the Fourier transform of W") {
  const AnalyticResonator r{1e4, 2e8, 3.0};
  ImpedanceLattice o;
  o.method = "frequency";
  o.n_slices = 100;
  o.sources.push_back(resonator_source(r));
  const Lattice lattice = make_lattice(o);
  CollectiveSolver solver(lattice, 0, FmaMode::Off, 1000);
  const int N = solver.fft_length();
  const double dt = solver.dt(), df = 1.0 / (N * dt);
  // Default resolution: a window 1 / df over which the wake decays by e^-28 (or >= 2 n_slices
  // points), rounded up to a power of two.
  int expected_n = 1;
  while (expected_n < 2 * solver.n_slices() || expected_n * dt < 28.0 / r.alpha()) expected_n *= 2;
  REQUIRE(N == expected_n);
  REQUIRE(N > 256);  // longer than the bare zero-padded FFT: the Q = 3 wake outlasts 2 n_slices dt
  const auto& spectrum = solver.spectrum();
  // Same formula on both sides: rounding only, 1e-12 of R / (N dt).
  double worst = 0;
  for (int m = 1; m < N / 2; ++m) {
    const std::complex<double> z = r.impedance(m * df) / (N * dt);
    worst = std::max(worst, std::abs(std::complex<double>(spectrum[2 * m], spectrum[2 * m + 1]) - z));
    // The negative frequencies are the complex conjugates: Z(-f) = conj Z(f) for a real wake.
    const int neg = N - m;
    worst = std::max(worst, std::abs(std::complex<double>(spectrum[2 * neg], spectrum[2 * neg + 1]) - std::conj(z)));
  }
  MESSAGE("max |spectrum - Z/(N dt)| / (R/(N dt)) = ", worst / (r.r_shunt / (N * dt)));
  CHECK(worst / (r.r_shunt / (N * dt)) < 1e-12);
  // The sign convention: integral_0^inf W(t) e^{-2 pi i f t} dt by Simpson over 40 decay times
  // (e^-40 of the wake left out), 400000 intervals (h = 1e-4 / alpha: error ~ h^4 W'''' tiny),
  // equals the element's Z at f_r/2, f_r and 3 f_r to 1e-8 relative.
  for (double f : {0.5 * r.frequency, r.frequency, 3.0 * r.frequency}) {
    const double upper = 40.0 / r.alpha();
    const double re = simpson([&](double t) { return r.wake_after(t) * std::cos(2 * kPi * f * t); }, 0, upper, 400000);
    const double im = simpson([&](double t) { return -r.wake_after(t) * std::sin(2 * kPi * f * t); }, 0, upper, 400000);
    // the element's Z at an FFT bin close to f, compared with the analytic Z at that bin
    const int m = static_cast<int>(std::lround(f / df));
    const std::complex<double> z_element = std::complex<double>(spectrum[2 * m], spectrum[2 * m + 1]) * (N * dt);
    const double re_m = simpson([&](double t) { return r.wake_after(t) * std::cos(2 * kPi * m * df * t); }, 0, upper, 400000);
    const double im_m = simpson([&](double t) { return -r.wake_after(t) * std::sin(2 * kPi * m * df * t); }, 0, upper, 400000);
    MESSAGE("f = ", f, " Hz: Fourier integral of W ", re, " + ", im, "i, Z(f) ", r.impedance(f).real(), " + ",
            r.impedance(f).imag(), "i");
    CHECK(std::abs(std::complex<double>(re, im) - r.impedance(f)) < 1e-8 * r.r_shunt);
    CHECK(std::abs(std::complex<double>(re_m, im_m) - z_element) < 1e-8 * r.r_shunt);
  }
}

TEST_CASE("LongitudinalImpedance: induced voltage of a Gaussian bunch on a broadband resonator, both methods, "
          "against the quadrature of the wake convolution") {
  // Time method: sum_j W((r-j) dt) P_j (P_j the slice probability, W(0) the half value) is the
  // trapezoidal rule of integral_0^inf g(u) du, g(u) = W(u) lambda(t - u), whose Euler-Maclaurin
  // error is -(dt^2/12) g'(0+), g'(0+) = W'(0+) lambda(t) - W(0+) lambda'(t), W'(0+) = -4 alpha^2 R:
  // the voltage is off by +q e N (dt^2/12) g'(0+), at most 35 V = 1.3e-3 of the 26 kV peak here.
  // Checked: the deviation < 2e-3 of the peak, and < 2e-4 once that predicted term is added
  // (what remains: P_j vs lambda(t_j) dt, (dt/sigma_t)^2/24 ~ 4e-5, and higher orders).
  // Frequency method: circular convolution with Z sampled on df = 1/(1024 dt); the wake aliased
  // back after the padded window is e^{-alpha 624 dt} = e^-21, and above the Nyquist frequency
  // (45 GHz) the bunch spectrum is e^{-(2 pi 45 GHz sigma_t)^2 / 2} = 0: the samples of the
  // band-limited bunch are convolved exactly, leaving the O(dt^2) of P_j: tolerance 5e-4.
  const AnalyticResonator r = kBroadband;
  const auto expected = [&](double t) { return induced_voltage_quadrature([&](double u) { return r.wake_after(u); }, t); };
  for (const std::string method : {"time", "frequency"}) {
    ImpedanceLattice o;
    o.method = method;
    o.sources.push_back(resonator_source(r));
    const Lattice lattice = make_lattice(o);
    const Comparison c = solve_and_compare(lattice, expected);
    MESSAGE(method, ": peak induced voltage ", c.peak, " V, max deviation ", c.max_abs_diff, " V (", c.relative(),
            " of the peak)");
    CHECK(c.peak > 1e4);
    if (method == "frequency") {
      CHECK(c.relative() < 5e-4);
      continue;
    }
    CHECK(c.relative() < 2e-3);
    const double dt = CollectiveSolver(lattice, 0, FmaMode::Off, 1).dt();
    const auto corrected = [&](double t) {
      const double st = sigma_t();
      const double dlambda = -t / (st * st) * gaussian_density_t(t);
      const double g_prime = -4 * r.alpha() * r.alpha() * r.r_shunt * gaussian_density_t(t) - r.wake_after(0) * dlambda;
      return expected(t) + kElementaryCharge * kIntensity * dt * dt / 12 * g_prime;
    };
    const Comparison cc = solve_and_compare(lattice, corrected);
    MESSAGE("time, with the predicted trapezoid term: max deviation ", cc.max_abs_diff, " V (", cc.relative(), ")");
    CHECK(cc.relative() < 2e-4);
  }
}

TEST_CASE("LongitudinalImpedance: several sources add up") {
  // Two resonators in one element give the sum of the two single-resonator fields (linear
  // response, same discretisation): rounding only.
  const AnalyticResonator second{2e3, 3e8, 5.0};
  std::vector<double> fields[3];
  for (int variant = 0; variant < 3; ++variant) {
    ImpedanceLattice o;
    if (variant != 1) o.sources.push_back(resonator_source(kBroadband));
    if (variant != 0) o.sources.push_back(resonator_source(second));
    const Lattice lattice = make_lattice(o);
    CollectiveSolver solver(lattice, 0, FmaMode::Off, 1000000);
    const auto counts = gaussian_counts(solver.slice_grid(), 1e6);
    fields[variant].resize(counts.size());
    solver.solve(counts.data(), fields[variant].data());
  }
  double worst = 0, peak = 0;
  for (size_t i = 0; i < fields[0].size(); ++i) {
    worst = std::max(worst, std::fabs(fields[2][i] - fields[0][i] - fields[1][i]));
    peak = std::max(peak, std::fabs(fields[2][i]));
  }
  CHECK(worst / peak < 1e-12);
}

namespace {
/// Exact quantiles of the Gaussian bunch: zeta_i = sigma Phi^{-1}((i + 1/2) / n) (bisection),
/// so that the bunch has no sampling noise.
std::vector<double> gaussian_quantiles(size_t n) {
  std::vector<double> z(n);
  for (size_t i = 0; i < n; ++i) {
    const double p = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    double lo = -10, hi = 10;
    for (int it = 0; it < 60; ++it) {
      const double mid = 0.5 * (lo + hi);
      (normal_cdf(mid) < p ? lo : hi) = mid;
    }
    z[i] = kSigmaZeta * 0.5 * (lo + hi);
  }
  return z;
}
}  // namespace

TEST_CASE("LongitudinalImpedance: energy loss of a Gaussian bunch tracked one turn equals q^2 e N k_loss") {
  // k_loss = (1/pi) integral_0^inf Re Z(omega) e^{-omega^2 sigma_t^2} d omega (Chao 1993, eq.
  // 2.140 with the Gaussian spectrum), by Simpson over [0, 12/sigma_t] (e^-144 left out), 200000
  // intervals. Mean energy change per particle = -q0^2 e N k_loss [eV] (each particle gains q0 V,
  // V = -q0 e N W*lambda; the bunch average of W*lambda is the double integral = k_loss).
  // The bunch: 200000 particles at the Gaussian's quantiles (no sampling noise; the outermost at
  // 4.6 sigma), linear deposit on 400 slices, the voltage interpolated linearly at each particle:
  // O(dt^2) ~ 1e-4 besides the method's own term below.
  const AnalyticResonator r = kBroadband;
  const double st = sigma_t();
  const double k_loss =
      simpson([&](double w) { return r.impedance(w / (2 * kPi)).real() * std::exp(-w * w * st * st); }, 0.0,
              12.0 / st, 200000) / kPi;
  const double expected_loss = kElementaryCharge * kIntensity * k_loss;  // [eV], q0 = 1

  // Time method: the trapezoid's endpoint term (see the test above) adds
  // q e N (dt^2/12) |W'(0+)| integral lambda^2 dt = 3.6e-3 of the loss (W'(0+) = -4 alpha^2 R,
  // integral lambda^2 = 1/(2 sqrt(pi) sigma_t)): tolerance 5e-3, and 1e-3 once it is removed.
  // Frequency method: no such term; tolerance 1e-3.
  const double dt = (12 * kSigmaZeta / 400) / (beta0() * kC);
  const double endpoint_term = kElementaryCharge * kIntensity * dt * dt / 12 * 4 * r.alpha() * r.alpha() *
                               r.r_shunt / (2 * std::sqrt(kPi) * st);  // [eV]
  for (const std::string method : {"time", "frequency"}) {
    ImpedanceLattice o;
    o.method = method;
    o.circumference = 0;  // a marker only: no multi-turn memory
    o.sources.push_back(resonator_source(r, false));
    const Lattice lattice = make_lattice(o);
    const auto zetas = gaussian_quantiles(200000);
    Particles p(zetas.size(), lattice.reference().beta0());
    for (size_t i = 0; i < zetas.size(); ++i) p.set(i, 0, 0, 0, 0, zetas[i], 0);
    TrackOptions opt;
    opt.turns = 1;
    make_cpu_backend(lattice)->track(p, opt);
    double sum = 0;
    for (size_t i = 0; i < p.size(); ++i) sum += p.ptau[i] * kP0c;
    const double mean_change = sum / static_cast<double>(p.size());
    MESSAGE(method, ": k_loss = ", k_loss, " V/C; mean energy change ", mean_change, " eV, expected ", -expected_loss,
            " eV (relative difference ", mean_change / -expected_loss - 1, "); trapezoid term ", endpoint_term, " eV");
    CHECK(p.alive_count() == p.size());
    if (method == "time") {
      CHECK(mean_change == doctest::Approx(-expected_loss).epsilon(5e-3));
      CHECK(mean_change == doctest::Approx(-expected_loss - endpoint_term).epsilon(1e-3));
    } else {
      CHECK(mean_change == doctest::Approx(-expected_loss).epsilon(1e-3));
    }
  }
}

TEST_CASE("LongitudinalImpedance: inductive impedance gives -q e N L dlambda/dt") {
  // L = (Z/n) / omega_rev, omega_rev = 2 pi beta0 c / C. Time method: the central difference of
  // the slice probabilities, error (dt^2/6) d3lambda/dt3 + O(dt^2) of P_j; |d3lambda/dt3| over the
  // peak |dlambda/dt| reaches about 3/sigma_t^2, so ~ (dt/sigma_t)^2 / 2 = 4.5e-4 of the peak:
  // tolerance 1e-3. Frequency method: the spectral derivative of the same samples (exact for the
  // band-limited bunch), leaving the O(dt^2) of P_j ~ 1e-4: tolerance 5e-4.
  const double z_over_n = 10.0, circumference = 1000.0;
  const double inductance = z_over_n / (2 * kPi * beta0() * kC / circumference);
  const auto expected = [&](double t) {
    const double dlambda = -t / (sigma_t() * sigma_t()) * gaussian_density_t(t);
    return -kElementaryCharge * kIntensity * inductance * dlambda;
  };
  for (const std::string method : {"time", "frequency"}) {
    ImpedanceLattice o;
    o.method = method;
    o.circumference = circumference;
    o.sources.push_back({{"type", "InductiveImpedance"}, {"z_over_n", z_over_n}});
    const Comparison c = solve_and_compare(make_lattice(o), expected);
    MESSAGE(method, ": peak ", c.peak, " V, max deviation ", c.max_abs_diff, " V (", c.relative(), ")");
    CHECK(c.relative() < (method == "time" ? 1e-3 : 5e-4));
  }
}

TEST_CASE("LongitudinalImpedance: ImpedanceTable and WakeTable written from the resonator give its voltage") {
  // ImpedanceTable: f = 0 .. 40 GHz every 5 MHz (8001 rows). Linear interpolation error
  // (5 MHz)^2 Z'' / 8 ~ 1e-5 of R; the truncation at 40 GHz does not reach the bunch (its
  // spectrum there is e^{-(2 pi 40 GHz sigma_t)^2 / 2} = 0) and the band-limited table wake is
  // sampled exactly by the slices (Nyquist 45 GHz), so its time method has no trapezoid term at
  // the jump. WakeTable: t = 0 .. 40/alpha every 1 ps, interpolation error (omega_r 1 ps)^2 / 8
  // ~ 5e-6 of the peak. Against the quadrature: the resonator's tolerances (2e-3 time, 5e-4
  // frequency; see above). Against the Resonator source's own field (the same discretisation):
  // 1e-4, except the ImpedanceTable's time method, which lacks the resonator's 1.3e-3 trapezoid
  // term at the jump: 2e-3.
  const AnalyticResonator r = kBroadband;
  const auto dir = test::temp_dir("impedance_tables");
  {
    std::ofstream z(dir / "resonator_impedance.txt");
    z << "# frequency [Hz], Re Z [Ohm], Im Z [Ohm]\n";
    z.precision(17);
    for (int k = 0; k <= 8000; ++k) {
      const double f = k * 5e6;
      const auto v = r.impedance(f);
      z << f << ", " << v.real() << ", " << v.imag() << "\n";
    }
    std::ofstream w(dir / "resonator_wake.txt");
    w << "# time [s]  W [V/C]\n";
    w.precision(17);
    const double step = 1e-12;
    const int rows = static_cast<int>(40.0 / r.alpha() / step);
    for (int k = 0; k <= rows; ++k) w << k * step << " " << r.wake_after(k * step) << "\n";
  }
  const std::string lattice_file = (dir / "lattice.json").string();  // tables resolve next to it
  const auto expected = [&](double t) { return induced_voltage_quadrature([&](double u) { return r.wake_after(u); }, t); };
  for (const std::string method : {"time", "frequency"}) {
    std::vector<double> resonator_field;
    for (const std::string source : {"Resonator", "ImpedanceTable", "WakeTable"}) {
      ImpedanceLattice o;
      o.method = method;
      if (source == "Resonator")
        o.sources.push_back(resonator_source(r));
      else
        o.sources.push_back(
            {{"type", source},
             {"file", source == "ImpedanceTable" ? "resonator_impedance.txt" : "resonator_wake.txt"}});
      const Lattice lattice = make_lattice(o, lattice_file);
      const Comparison c = solve_and_compare(lattice, expected);
      // the field itself, against the resonator's
      CollectiveSolver solver(lattice, 0, FmaMode::Off, 1000000);
      const auto counts = gaussian_counts(solver.slice_grid(), 1e6);
      std::vector<double> field(counts.size());
      solver.solve(counts.data(), field.data());
      if (resonator_field.empty()) resonator_field = field;
      double diff = 0;
      for (size_t i = 0; i < field.size(); ++i) diff = std::max(diff, std::fabs(field[i] - resonator_field[i]));
      MESSAGE(method, " ", source, ": vs quadrature ", c.relative(), " of the peak ", c.peak, " V; vs Resonator ",
              diff / c.peak);
      CHECK(c.relative() < (method == "time" ? 2e-3 : 5e-4));
      CHECK(diff / c.peak < (method == "time" && source == "ImpedanceTable" ? 2e-3 : 1e-4));
    }
  }
}

TEST_CASE("LongitudinalImpedance: bad input names the lattice file, the element and the field") {
  const auto dir = test::temp_dir("impedance_bad_input");
  {
    std::ofstream(dir / "two_columns.txt") << "# f ReZ ImZ\n0 1 0\n1e6 2\n";
    std::ofstream(dir / "not_monotonic.txt") << "0 1 0\n2e6 1 0\n1e6 1 0\n";
    std::ofstream(dir / "nan.txt") << "0 1 0\n1e6 nan 0\n";
    std::ofstream(dir / "one_row.txt") << "0 1 0\n";
    std::ofstream(dir / "negative_time.txt") << "-1e-9 1\n0 1\n";
  }
  const json good_resonator = resonator_source(kBroadband);
  struct Case {
    const char* what;
    std::function<void(json& element)> edit;
    std::vector<std::string> expected;  // parts of the message, besides the file and the element
  };
  const std::vector<Case> cases = {
      {"missing table file",
       [](json& e) { e["sources"] = json::array({{{"type", "ImpedanceTable"}, {"file", "absent.txt"}}}); },
       {"field 'sources[0].file'", (dir / "absent.txt").string()}},
      {"wrong number of columns",
       [](json& e) { e["sources"] = json::array({{{"type", "ImpedanceTable"}, {"file", "two_columns.txt"}}}); },
       {"field 'sources[0].file'", "line 3", "expected 3 columns", "got 2"}},
      {"frequencies not increasing",
       [](json& e) { e["sources"] = json::array({{{"type", "ImpedanceTable"}, {"file", "not_monotonic.txt"}}}); },
       {"field 'sources[0].file'", "line 3", "increase"}},
      {"NaN in a table",
       [](json& e) { e["sources"] = json::array({{{"type", "ImpedanceTable"}, {"file", "nan.txt"}}}); },
       {"field 'sources[0].file'", "line 2", "not finite"}},
      {"one row", [](json& e) { e["sources"] = json::array({{{"type", "ImpedanceTable"}, {"file", "one_row.txt"}}}); },
       {"field 'sources[0].file'", "at least 2"}},
      {"negative time", [](json& e) { e["sources"] = json::array({{{"type", "WakeTable"}, {"file", "negative_time.txt"}}}); },
       {"field 'sources[0].file'", "line 1", ">= 0"}},
      {"n_slices 0", [](json& e) { e["n_slices"] = 0; }, {"n_slices", "got 0"}},
      {"n_slices negative", [](json& e) { e["n_slices"] = -4; }, {"n_slices", "got -4"}},
      {"inverted cuts",
       [](json& e) {
         e["zeta_min"] = 0.5;
         e["zeta_max"] = -0.5;
       },
       {"zeta_max", "zeta_min < zeta_max", "0.5", "-0.5"}},
      {"zero intensity", [](json& e) { e["intensity"] = 0.0; }, {"field 'intensity'", "must be positive, got 0"}},
      {"negative intensity", [](json& e) { e["intensity"] = -5.0; }, {"field 'intensity'", "got -5"}},
      {"negative shunt impedance",
       [&](json& e) {
         json s = good_resonator;
         s["r_shunt"] = -3.0;
         e["sources"] = json::array({good_resonator, s});
       },
       {"field 'sources[1].r_shunt'", "must be positive, got -3 Ohm"}},
      {"unknown source type",
       [](json& e) { e["sources"] = json::array({{{"type", "Wiggler"}}}); },
       {"field 'sources[0].type'", "'Wiggler'", "Resonator, InductiveImpedance, ImpedanceTable, WakeTable"}},
      {"unknown key",
       [&](json& e) {
         json s = good_resonator;
         s["shunt"] = 1.0;
         e["sources"] = json::array({s});
       },
       {"field 'sources[0].shunt'", "unknown key", "r_shunt"}},
      {"missing key",
       [&](json& e) {
         json s = good_resonator;
         s.erase("q");
         e["sources"] = json::array({s});
       },
       {"field 'sources[0].q'", "missing"}},
      {"wrong JSON type",
       [&](json& e) {
         json s = good_resonator;
         s["frequency"] = "1 GHz";
         e["sources"] = json::array({s});
       },
       {"field 'sources[0].frequency'", "expected a number", "a string"}},
      {"sources not a list", [](json& e) { e["sources"] = 3; }, {"field 'sources'", "list"}},
      {"unknown method", [](json& e) { e["method"] = "fft"; }, {"field 'method'", "\"time\" or \"frequency\""}},
      {"multi-turn memory without circumference",
       [&](json& e) { e["sources"] = json::array({good_resonator}); },
       {"field 'sources[0].multi_turn'", "circumference"}},
  };
  for (const Case& c : cases) {
    ImpedanceLattice o;
    o.circumference = std::string(c.what) == "multi-turn memory without circumference" ? 0.0 : 1000.0;
    o.sources.push_back(good_resonator);
    json doc = lattice_json(o);
    c.edit(doc["elements"]["imp"]);
    const std::string path = (dir / "lattice.json").string();
    std::ofstream(path) << doc.dump(2);
    const std::string msg = input_error_message([&] { load_lattice(path, test::builtin_registry()); });
    INFO(c.what, ": ", msg);
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("element 'imp' (LongitudinalImpedance)") != std::string::npos);
    for (const auto& part : c.expected) CHECK_MESSAGE(msg.find(part) != std::string::npos, "missing '", part, "'");
  }
}

}  // namespace test_longitudinal_impedance
