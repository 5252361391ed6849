// LongitudinalImpedance with DEFAULT settings (no frequency_resolution) on a smooth Gaussian bunch
// (the integer profile of exact slice probabilities: no shot noise) against the analytic induced
// voltage of a Gaussian line density (Chao 1993, ch. 2):
//   V(t) = -q e N integral Z(f) exp(-2 pi^2 f^2 sigma_t^2) exp(2 pi i f t) df
//        = -2 q e N integral_0^inf Re[Z(f) e^{2 pi i f t}] exp(-2 pi^2 f^2 sigma_t^2) df,
// computed here by Simpson's rule from Z written out independently, for the sources of the bundled
// PS example (lattices/ps_injection_longitudinal.json): the 1 GHz Q = 1 broadband resonator, the
// Q = 50 narrowband resonator at 3.17 MHz (bandwidth 32 kHz) and the inductive Z/n = -60 Ohm, with
// its slicing (500 slices over +-45 m, dt = 0.63 ns) and sigma_zeta = 6 m. Both methods: within 1%
// of the peak (before the defaults were made safe: frequency 2.6x, time 94x the peak).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/collective.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_impedance_defaults.
namespace test_impedance_defaults {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kC = 299792458.0;                           // [m/s]
constexpr double kElementaryCharge = 1.602176634e-19;        // [C]
constexpr double kMass = 938272088.16, kP0c = 2784300000.0;  // PS injection protons [eV]
constexpr double kCircumference = 628.3185307179587;         // [m]
constexpr double kSigmaZeta = 6.0;                           // [m]
constexpr double kIntensity = 1.6e12;

double beta0() { return kP0c / std::sqrt(kP0c * kP0c + kMass * kMass); }
double sigma_t() { return kSigmaZeta / (beta0() * kC); }

struct Source {  // Z(f), f >= 0, written out independently of the element
  std::function<std::complex<double>(double)> impedance;
  json definition;
  const char* name;
};

Source resonator(double r, double fr, double q) {
  return {[=](double f) {
            return f == 0 ? std::complex<double>(0.0) : r / std::complex<double>(1.0, q * (f / fr - fr / f));
          },
          {{"type", "Resonator"}, {"r_shunt", r}, {"frequency", fr}, {"q", q}, {"multi_turn", false}},
          "resonator"};
}

Source inductive(double z_over_n) {
  const double f_rev = beta0() * kC / kCircumference;
  return {[=](double f) { return std::complex<double>(0.0, z_over_n * f / f_rev); },
          {{"type", "InductiveImpedance"}, {"z_over_n", z_over_n}},
          "inductive"};
}

/// V(t) by Simpson's rule on [0, 12 / (pi sigma_t)] (the Gaussian factor < e^-70 beyond) with a step
/// of 2 kHz (the narrowest feature, the 32 kHz bandwidth, spans 16 steps; for each of the three sources
/// this differs from a 100 Hz step by less than 2e-15 of the peak voltage, checked once on 41 times).
double analytic_voltage(const Source& s, double t, double st = sigma_t()) {
  const double upper = 12.0 / (kPi * st);
  const int intervals = 2 * static_cast<int>(upper / 4000.0);
  const double h = upper / intervals;
  double sum = 0;
  for (int k = 0; k <= intervals; ++k) {
    const double f = k * h;
    const double g = (s.impedance(f) * std::exp(std::complex<double>(0.0, 2 * kPi * f * t))).real() *
                     std::exp(-2 * kPi * kPi * f * f * st * st);
    sum += (k == 0 || k == intervals ? 1.0 : k % 2 ? 4.0 : 2.0) * g;
  }
  return -2.0 * kElementaryCharge * kIntensity * sum * h / 3.0;
}

Lattice ps_like_lattice(const std::vector<Source>& sources, const std::string& method, double filter_cutoff = 0) {
  json definitions = json::array();
  for (const Source& s : sources) definitions.push_back(s.definition);
  json elements = {{"imp",
                    {{"type", "LongitudinalImpedance"},
                     {"n_slices", 500},
                     {"zeta_min", -45.0},
                     {"zeta_max", 45.0},
                     {"intensity", kIntensity},
                     {"method", method},
                     {"sources", definitions}}},
                   {"ring", {{"type", "Drift"}, {"length", kCircumference}}}};
  if (filter_cutoff > 0)
    elements["imp"]["profile_filter"] = {{"type", "gaussian"}, {"cutoff_frequency", filter_cutoff}};
  const json j = {{"fusetrack_lattice", 1},
                  {"reference", {{"mass0", kMass}, {"q0", 1}, {"p0c", kP0c}}},
                  {"elements", elements},
                  {"sequence", {"imp", "ring"}}};
  return lattice_from_json(j, "impedance_defaults_test", test::builtin_registry());
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// The integer profile of exact slice probabilities of a Gaussian bunch (no shot noise).
std::vector<uint64_t> smooth_gaussian_profile(const SliceGrid& g, double n_macro) {
  const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
  std::vector<uint64_t> counts(static_cast<size_t>(g.n_slices));
  for (int i = 0; i < g.n_slices; ++i) {
    const double lo = g.zeta_min + i * dz;
    const double p = normal_cdf((lo + dz) / kSigmaZeta) - normal_cdf(lo / kSigmaZeta);
    counts[static_cast<size_t>(i)] = static_cast<uint64_t>(std::llround(n_macro * double(kProfileUnit) * p));
  }
  return counts;
}

/// The PS example's three sources.
std::vector<Source> ps_sources() {
  return {resonator(33e3, 1e9, 1.0), resonator(30e3, 3169100.0, 50.0), inductive(-60.0)};
}

double analytic_sum(const std::vector<Source>& sources, double t, double st) {
  double v = 0;
  for (const Source& s : sources) v += analytic_voltage(s, t, st);
  return v;
}

/// The element's field [V] on the slice centres (zeta order) for the smooth Gaussian profile of 10^6
/// macroparticles; `g` receives the slicing.
std::vector<double> smooth_bunch_field(const Lattice& lattice, SliceGrid& g) {
  const double n_macro = 1e6;
  CollectiveSolver solver(lattice, 0, FmaMode::Off, static_cast<size_t>(n_macro));
  g = solver.slice_grid();
  std::vector<uint64_t> counts = smooth_gaussian_profile(g, n_macro);
  std::vector<double> field(counts.size());
  solver.solve(counts.data(), field.data());
  return field;
}

}  // namespace

TEST_CASE("LongitudinalImpedance defaults: smooth Gaussian bunch against the analytic induced voltage, both methods") {
  const Source sources[] = {resonator(33e3, 1e9, 1.0), resonator(30e3, 3169100.0, 50.0), inductive(-60.0)};
  for (const Source& s : sources)
    for (const std::string method : {"time", "frequency"}) {
      const Lattice lattice = ps_like_lattice({s}, method);
      SliceGrid g;
      const std::vector<double> field = smooth_bunch_field(lattice, g);
      const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
      double peak = 0, worst = 0;
      for (int i = 0; i < g.n_slices; ++i) {
        const double zeta = g.zeta_min + (i + 0.5) * dz;
        if (std::fabs(zeta) > 5 * kSigmaZeta) continue;  // where the bunch is
        const double v = analytic_voltage(s, -zeta / (beta0() * kC));
        peak = std::max(peak, std::fabs(v));
        worst = std::max(worst, std::fabs(field[static_cast<size_t>(i)] - v));
      }
      MESSAGE(std::string(s.name), " ", s.definition.dump(), ", ", method, ": peak ", peak, " V, max deviation ", worst,
              " V (", 100 * worst / peak, " % of the peak)");
      CHECK(peak > 0);
      CHECK(worst < 0.01 * peak);
    }
}

// The Gaussian profile filter (cutoff f_c at -3 dB: sigma_g = sqrt(ln 2) / (2 pi f_c)) on a Gaussian
// bunch of sigma_t gives the unfiltered voltage of a Gaussian of sigma_eff^2 = sigma_t^2 + sigma_g^2
// (the product of the two Gaussian spectra): the smooth profile against that analytic voltage, both
// methods, all three PS sources summed, within 1% of the peak. Then the shot noise of 10^4
// macroparticles (the documentation's PS example): the rms deviation from the smooth voltage, with and
// without the filter.
TEST_CASE(
    "LongitudinalImpedance profile_filter: filtered smooth bunch = analytic voltage of the widened Gaussian, shot "
    "noise of 10^4 macroparticles suppressed") {
  const double cutoff = 30e6;  // [Hz] 4x the bunch's spectral width 1 / (2 pi sigma_t) = 7.5 MHz
  const double sigma_g = std::sqrt(std::log(2.0)) / (2 * kPi * cutoff);
  const double sigma_eff = std::sqrt(sigma_t() * sigma_t() + sigma_g * sigma_g);
  const std::vector<Source> sources = ps_sources();
  std::vector<double> filtered_analytic;  // per slice (both methods share the grid; NaN: not compared)
  for (const std::string method : {"time", "frequency"}) {
    SliceGrid g;
    const std::vector<double> field = smooth_bunch_field(ps_like_lattice(sources, method, cutoff), g);
    const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
    double peak = 0, worst = 0;
    for (int i = 0; i < g.n_slices; ++i) {
      const double zeta = g.zeta_min + (i + 0.5) * dz;
      if (std::fabs(zeta) > 5 * kSigmaZeta) continue;
      filtered_analytic.resize(static_cast<size_t>(g.n_slices), std::nan(""));
      double& v = filtered_analytic[static_cast<size_t>(i)];
      if (std::isnan(v)) v = analytic_sum(sources, -zeta / (beta0() * kC), sigma_eff);
      peak = std::max(peak, std::fabs(v));
      worst = std::max(worst, std::fabs(field[static_cast<size_t>(i)] - v));
    }
    MESSAGE("filtered (f_c = 30 MHz), ", method, ": peak ", peak, " V, max deviation ", worst, " V (",
            100 * worst / peak, " % of the peak)");
    CHECK(peak > 0);
    CHECK(worst < 0.01 * peak);
  }

  // Shot noise: 10^4 macroparticles drawn from the Gaussian (fixed seed, Box-Muller on a 64-bit LCG),
  // binned to the nearest slice, each carrying N / 10^4 real particles.
  const double n_macro = 1e4;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(state >> 11) + 0.5) * 0x1.0p-53;
  };
  const Lattice plain = ps_like_lattice(sources, "frequency");
  CollectiveSolver plain_solver(plain, 0, FmaMode::Off, static_cast<size_t>(n_macro));
  CollectiveSolver filtered_solver(ps_like_lattice(sources, "frequency", cutoff), 0, FmaMode::Off,
                                   static_cast<size_t>(n_macro));
  const SliceGrid g = plain_solver.slice_grid();
  const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
  std::vector<uint64_t> counts(static_cast<size_t>(g.n_slices), 0);
  for (int k = 0; k < static_cast<int>(n_macro) / 2; ++k) {
    const double r = std::sqrt(-2 * std::log(uniform())), phase = 2 * kPi * uniform();
    for (double zeta : {kSigmaZeta * r * std::cos(phase), kSigmaZeta * r * std::sin(phase)}) {
      const long bin = static_cast<long>(std::floor((zeta - g.zeta_min) / dz));
      if (bin >= 0 && bin < g.n_slices) counts[static_cast<size_t>(bin)] += kProfileUnit;
    }
  }
  std::vector<double> plain_field(counts.size()), filtered_field(counts.size());
  plain_solver.solve(counts.data(), plain_field.data());
  filtered_solver.solve(counts.data(), filtered_field.data());
  double peak = 0, plain_rms = 0, filtered_rms = 0;
  int inside = 0;
  for (int i = 0; i < g.n_slices; ++i) {
    const double zeta = g.zeta_min + (i + 0.5) * dz;
    if (std::fabs(zeta) > 2 * kSigmaZeta) continue;  // the core, where the kicks matter
    const double t = -zeta / (beta0() * kC);
    const double smooth = analytic_sum(sources, t, sigma_t());
    const double smooth_filtered = filtered_analytic.at(static_cast<size_t>(i));  // the grid of the first part
    peak = std::max(peak, std::fabs(smooth));
    plain_rms += std::pow(plain_field[static_cast<size_t>(i)] - smooth, 2);
    filtered_rms += std::pow(filtered_field[static_cast<size_t>(i)] - smooth_filtered, 2);
    ++inside;
  }
  plain_rms = std::sqrt(plain_rms / inside);
  filtered_rms = std::sqrt(filtered_rms / inside);
  MESSAGE("10^4 macroparticles, |zeta| < 2 sigma: smooth peak ", peak, " V; rms noise without filter ", plain_rms,
          " V (", plain_rms / peak, " of the peak), with f_c = 30 MHz ", filtered_rms, " V (", filtered_rms / peak,
          ")");
  CHECK(plain_rms > peak);           // the unfiltered voltage of 10^4 particles is mostly noise
  CHECK(filtered_rms < 0.1 * peak);  // filtered: the physics shows
}

// A long-memory resonator (the benchmark ring's Q = 500 at 13.6 MHz: its wake decays by e in 12 us,
// 5 turns of this ring) with DEFAULT settings and multi-turn memory, the same smooth Gaussian profile
// solved turn after turn: after K solves the field is the bunch's own wake of this turn plus the K - 1
// earlier turns. Analytic, for W(t > 0) = Re(c e^{st}) (s = -alpha + i omega, c = 2 alpha R (1 + i
// alpha / omega): Chao 1993, eq. 2.84):
//   V(t) = -e N [ integral_{-inf}^{t} lambda(t') W(t - t') dt'
//                 + Re( c e^{st} e^{s^2 sigma_t^2 / 2} sum_{k=1}^{K-1} e^{s k T0} ) ],
// the first term by Simpson's rule in time, the second from the Gaussian's moment-generating function
// (each earlier turn's bunch lies wholly before t). Both methods within 1% of the peak; the frequency
// method keeps the smallest zero-padded FFT (its window's wraps of the resonator are removed exactly).
TEST_CASE(
    "LongitudinalImpedance defaults: a long-memory resonator's multi-turn wake against the analytic sum over "
    "turns, both methods, with the smallest FFT") {
  const double r_shunt = 1000.0, fr = 13.6e6, q = 500.0;
  const double omega_r = 2 * kPi * fr, alpha = omega_r / (2 * q), omega = std::sqrt(omega_r * omega_r - alpha * alpha);
  const std::complex<double> s(-alpha, omega), c(2 * alpha * r_shunt, 2 * alpha * r_shunt * alpha / omega);
  const auto wake = [&](double tau) { return (c * std::exp(s * tau)).real(); };  // tau > 0
  const double st = sigma_t(), t_rev = kCircumference / (beta0() * kC);
  const int turns = 300;
  // The single-pass integral by Simpson's rule over t' in [-10 sigma_t, t] (4000 intervals).
  const auto single_pass = [&](double t) {
    const double lo = -10 * st;
    if (t <= lo) return 0.0;
    const int intervals = 4000;
    const double h = (t - lo) / intervals;
    double sum = 0;
    for (int k = 0; k <= intervals; ++k) {
      const double tp = lo + k * h;
      const double density = std::exp(-tp * tp / (2 * st * st)) / (std::sqrt(2 * kPi) * st);
      const double w = k == intervals ? wake(0.0) : wake(t - tp);  // W(0+) at the end point
      sum += (k == 0 || k == intervals ? 1.0 : k % 2 ? 4.0 : 2.0) * density * w;
    }
    return sum * h / 3.0;
  };
  std::complex<double> turns_sum(0.0, 0.0);
  for (int k = 1; k < turns; ++k) turns_sum += std::exp(s * (k * t_rev));
  const auto analytic = [&](double t) {
    const double memory = (c * std::exp(s * t) * std::exp(s * s * st * st / 2.0) * turns_sum).real();
    return -kElementaryCharge * kIntensity * (single_pass(t) + memory);
  };
  const Source source{
      nullptr, {{"type", "Resonator"}, {"r_shunt", r_shunt}, {"frequency", fr}, {"q", q}}, "long-memory resonator"};
  for (const std::string method : {"time", "frequency"}) {
    const Lattice lattice = ps_like_lattice({source}, method);
    const double n_macro = 1e6;
    CollectiveSolver solver(lattice, 0, FmaMode::Off, static_cast<size_t>(n_macro));
    const SliceGrid g = solver.slice_grid();
    if (method == "frequency") CHECK(solver.fft_length() == 1024);  // 2 x 500 slices, rounded up to 2^k
    const std::vector<uint64_t> counts = smooth_gaussian_profile(g, n_macro);
    std::vector<double> field(counts.size());
    for (int k = 0; k < turns; ++k) solver.solve(counts.data(), field.data());
    const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
    double peak = 0, worst = 0, memory_peak = 0;
    for (int i = 0; i < g.n_slices; ++i) {
      const double zeta = g.zeta_min + (i + 0.5) * dz;
      if (std::fabs(zeta) > 5 * kSigmaZeta) continue;
      const double t = -zeta / (beta0() * kC);
      const double v = analytic(t);
      peak = std::max(peak, std::fabs(v));
      memory_peak = std::max(memory_peak, std::fabs(v + kElementaryCharge * kIntensity * single_pass(t)));
      worst = std::max(worst, std::fabs(field[static_cast<size_t>(i)] - v));
    }
    MESSAGE("Q = 500 resonator, ", method, ", after ", turns, " turns: peak ", peak, " V (earlier turns ", memory_peak,
            " V), max deviation ", worst, " V (", 100 * worst / peak, " % of the peak)");
    CHECK(memory_peak > 0.5 * peak);  // the earlier turns matter
    CHECK(worst < 0.01 * peak);
  }
}

}  // namespace test_impedance_defaults
