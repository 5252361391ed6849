// The linear beam-beam tune shift from tracking: one BeamBeam4D (plugin beambeam4d) followed by a
// linear one-turn map with beta* and tunes Q0 at the interaction point (plugin taylor_map), tracked
// by the CPU backend through a lattice, as a user would.
//
// Expected (computed here): a head-on round beam of N particles with rms size sigma kicks like a
// thin lens with dpx = k x, k = 2 N r0 / (beta0 gamma0) / (2 sigma^2) (same-sign charges: defocusing),
// r0 = e^2 / (4 pi eps0 m c^2). The one-turn matrix R(mu0) [[1, 0], [k, 1]] has
//   cos mu = cos mu0 + (k beta* / 2) sin mu0 = cos mu0 + 2 pi xi sin mu0,
//   xi = N r0 beta* / (4 pi beta0 gamma0 sigma^2),
// so to first order dQ = -xi (Chao & Tigner, Handbook of Accelerator Physics, sec. 2.5.1). For an
// elliptic beam the core slopes are 1 / (sx (sx + sy)) and 1 / (sy (sx + sy)):
//   xi_x = N r0 beta*_x / (2 pi beta0 gamma0 sx (sx + sy)), xi_y likewise with sy.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <nlohmann/json.hpp>

#include "plugins/plugin_test_support.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_beam_beam_tune.
namespace test_beam_beam_tune {

using namespace ft;
using ft::plugin_test::example_plugin;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kElementaryCharge = 1.602176634e-19;  // C
constexpr double kEpsilon0 = 8.8541878128e-12;         // F/m
constexpr double kProtonMass = 938.27208816e6;         // eV

struct Optics {
  double beta_x, q_x, beta_y, q_y;
};

/// TaylorMap fields of uncoupled rotations with the given beta functions (alpha = 0) and tunes.
json rotation_map(const Optics& o) {
  const double cx = std::cos(2 * kPi * o.q_x), sx = std::sin(2 * kPi * o.q_x);
  const double cy = std::cos(2 * kPi * o.q_y), sy = std::sin(2 * kPi * o.q_y);
  json output = json::array(), exponents = json::array(), coefficients = json::array();
  auto term = [&](int out, int var, double c) {
    output.push_back(out);
    for (int j = 0; j < 6; ++j) exponents.push_back(j == var ? 1 : 0);
    coefficients.push_back(c);
  };
  term(0, 0, cx), term(0, 1, o.beta_x * sx), term(1, 0, -sx / o.beta_x), term(1, 1, cx);
  term(2, 2, cy), term(2, 3, o.beta_y * sy), term(3, 2, -sy / o.beta_y), term(3, 3, cy);
  return {{"output", output}, {"exponents", exponents}, {"coefficients", coefficients}};
}

struct Ring {
  std::unique_ptr<ElementRegistry> registry;
  Lattice lattice;
};

Ring collider(double intensity, double sigma_x, double sigma_y, const Optics& optics) {
  Ring r{ft::plugin_test::registry_with({example_plugin("beambeam4d"), example_plugin("taylor_map")}), Lattice()};
  r.lattice = Lattice(ReferenceParticle{kProtonMass, 1.0, 7e12});
  const InputLocation at("test");
  r.lattice.append(r.lattice.define("ip", r.registry->get("BeamBeam4D", at),
                                    {{"intensity", intensity}, {"q_strong", 1.0}, {"sigma_x", sigma_x},
                                     {"sigma_y", sigma_y}},
                                    at));
  r.lattice.append(r.lattice.define("arc", r.registry->get("TaylorMap", at), rotation_map(optics), at));
  r.lattice.prepare();
  return r;
}

/// The 4x4 one-turn matrix at the IP from tracking: central differences of one turn.
std::array<std::array<double, 4>, 4> one_turn_matrix(const Lattice& lattice, double step) {
  Particles p(8, lattice.reference().beta0());
  for (int j = 0; j < 4; ++j)
    for (int s = 0; s < 2; ++s) {
      double c[4] = {0, 0, 0, 0};
      c[j] = s ? -step : step;
      p.set(2 * j + s, c[0], c[1], c[2], c[3], 0.0, 0.0);
    }
  ft::plugin_test::track_cpu(lattice, p, 1);
  std::array<std::array<double, 4>, 4> m{};
  for (int j = 0; j < 4; ++j) {
    double plus[6], minus[6];
    p.coordinates(2 * j, plus);
    p.coordinates(2 * j + 1, minus);
    for (int i = 0; i < 4; ++i) m[i][j] = (plus[i] - minus[i]) / (2 * step);
  }
  return m;
}

/// Tune of a turn-by-turn signal: the maximum of the Hann-windowed spectrum, refined by golden
/// section around the largest DFT bin.
double spectral_tune(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<double> windowed(n);
  for (size_t k = 0; k < n; ++k) windowed[k] = std::sin(kPi * k / n) * std::sin(kPi * k / n) * x[k];
  auto amplitude = [&](double q) {
    const std::complex<double> step = std::exp(std::complex<double>(0, -2 * kPi * q));
    std::complex<double> s = 0, phase = 1;
    for (size_t k = 0; k < n; ++k, phase *= step) s += windowed[k] * phase;
    return std::abs(s);
  };
  double best = 0, best_q = 0;
  for (size_t b = 1; b < n / 2; ++b)
    if (const double a = amplitude(static_cast<double>(b) / n); a > best) best = a, best_q = static_cast<double>(b) / n;
  double lo = best_q - 1.0 / n, hi = best_q + 1.0 / n;
  const double g = (std::sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 80; ++it) {
    const double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    if (amplitude(a) > amplitude(b))
      hi = b;  // the maximum lies in [lo, b]
    else
      lo = a;  // the maximum lies in [a, hi]
  }
  return (lo + hi) / 2;
}

double tune_of(double cos_mu) { return std::acos(cos_mu) / (2 * kPi); }  // for tunes in (0, 1/2)

}  // namespace

TEST_CASE("linear beam-beam tune shift of a round beam from tracking") {
  const double n = 1.15e11, sigma = 16.7e-6;
  const Optics optics{0.55, 0.31, 0.55, 0.32};
  Ring ring = collider(n, sigma, sigma, optics);
  const ReferenceParticle& ref = ring.lattice.reference();
  const double r0 = kElementaryCharge / (4 * kPi * kEpsilon0 * kProtonMass);
  const double xi = n * r0 * optics.beta_x / (4 * kPi * ref.beta0() * ref.gamma0() * sigma * sigma);
  MESSAGE("round beam: xi = ", xi);
  CHECK(xi > 3e-3);  // LHC-like: a visible shift
  CHECK(xi < 4e-3);

  // One-turn matrix: the exact thin-lens result, and the first-order dQ = -xi.
  const auto m = one_turn_matrix(ring.lattice, 1e-5 * sigma);
  for (int plane = 0; plane < 2; ++plane) {
    const double q0 = plane == 0 ? optics.q_x : optics.q_y;
    const double mu0 = 2 * kPi * q0;
    const double cos_mu = (m[2 * plane][2 * plane] + m[2 * plane + 1][2 * plane + 1]) / 2;
    const double expected_cos = std::cos(mu0) + 2 * kPi * xi * std::sin(mu0);
    CAPTURE(plane);
    CHECK(std::fabs(cos_mu - expected_cos) < 1e-9);
    const double dq = tune_of(cos_mu) - q0;
    MESSAGE(fmt::format("plane {}: Q0 = {}, dQ from the one-turn matrix = {:.9f}, -xi = {:.9f}", plane, q0, dq, -xi));
    CHECK(dq < 0.0);                                    // same-sign beams defocus
    CHECK(std::fabs(dq + xi) < 0.02 * xi);             // first order in xi
    // The planes are uncoupled.
    CHECK(std::fabs(m[2 * plane][2 * (1 - plane)]) < 1e-9);
  }

  // Multi-turn: the spectral tune of a small-amplitude particle (in the linear core).
  const int turns = 2048;
  Particles p(1, ref.beta0());
  p.set(0, 1e-3 * sigma, 0.0, 1e-3 * sigma, 0.0, 0.0, 0.0);
  std::vector<double> xs, ys;
  TrackOptions o;
  o.turns = turns;
  o.callback_every = 1;
  o.callback = [&](int64_t, const Particles& now) {
    xs.push_back(now.x[0]);
    ys.push_back(now.y[0]);
    return true;
  };
  make_cpu_backend(ring.lattice)->track(p, o);
  REQUIRE(xs.size() == static_cast<size_t>(turns));
  for (int plane = 0; plane < 2; ++plane) {
    const double q0 = plane == 0 ? optics.q_x : optics.q_y;
    const double exact = tune_of(std::cos(2 * kPi * q0) + 2 * kPi * xi * std::sin(2 * kPi * q0));
    const double measured = spectral_tune(plane == 0 ? xs : ys);
    MESSAGE(fmt::format("plane {}: tracked tune {:.9f}, thin-lens tune {:.9f}, Q0 - xi = {:.9f}", plane, measured,
                        exact, q0 - xi));
    CHECK(std::fabs(measured - exact) < 1e-6);
    CHECK(std::fabs((measured - q0) + xi) < 0.02 * xi);
  }
}

TEST_CASE("linear beam-beam tune shift of a flat beam from tracking") {
  const double n = 1.15e11, sx = 25e-6, sy = 10e-6;
  const Optics optics{0.4, 0.28, 0.4, 0.31};
  Ring ring = collider(n, sx, sy, optics);
  const ReferenceParticle& ref = ring.lattice.reference();
  const double r0 = kElementaryCharge / (4 * kPi * kEpsilon0 * kProtonMass);
  const double xi_x = n * r0 * optics.beta_x / (2 * kPi * ref.beta0() * ref.gamma0() * sx * (sx + sy));
  const double xi_y = n * r0 * optics.beta_y / (2 * kPi * ref.beta0() * ref.gamma0() * sy * (sx + sy));
  const auto m = one_turn_matrix(ring.lattice, 1e-5 * sy);
  for (int plane = 0; plane < 2; ++plane) {
    const double q0 = plane == 0 ? optics.q_x : optics.q_y;
    const double xi = plane == 0 ? xi_x : xi_y;
    const double cos_mu = (m[2 * plane][2 * plane] + m[2 * plane + 1][2 * plane + 1]) / 2;
    CAPTURE(plane);
    CHECK(std::fabs(cos_mu - (std::cos(2 * kPi * q0) + 2 * kPi * xi * std::sin(2 * kPi * q0))) < 1e-9);
    const double dq = tune_of(cos_mu) - q0;
    MESSAGE(fmt::format("flat beam, plane {}: dQ = {:.9f}, -xi = {:.9f}", plane, dq, -xi));
    CHECK(std::fabs(dq + xi) < 0.03 * xi);
  }
  CHECK(xi_y > 2 * xi_x);  // the narrow plane sees the stronger lens
}

}  // namespace test_beam_beam_tune
