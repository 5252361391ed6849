// The BeamBeam4D example plugin (plugins/beambeam4d): w(z), the Gaussian field, the kick factor and
// the linear beam-beam tune shift. Every expected number is computed here, independently of the
// plugin's formulas:
//  - w(z): the trapezoidal rule for (i/pi) int exp(-t^2) / (z - t) dt with the pole correction of
//    Matta & Reichel (Math. Comp. 25 (1971) 339), and the Laplace continued fraction for large |z|,
//    in long double (the plugin uses Weideman's rational approximation in double);
//  - the field: the 1D integral representation of the field of a 2D Gaussian charge distribution,
//      Kx = x int_0^inf exp(-x^2/(2 sx^2 + q) - y^2/(2 sy^2 + q)) / ((2 sx^2 + q)^(3/2) (2 sy^2 + q)^(1/2)) dq
//    (Ky: exponents 1/2, 3/2, times y), by the trapezoidal rule in s = log q in long double (the
//    integrand is analytic and bounded in |Im s| < pi/2 and decays exponentially at both ends, so the
//    error is ~ exp(-pi^2 / h));
//  - the tune shift: xi = N r0 beta* / (4 pi beta0 gamma0 sigma^2) with r0 from e, eps0 and m c^2.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <random>

#include "../../plugins/beambeam4d/beam_beam_4d.h"
#include "plugins/plugin_test_support.h"
#include "support/element_testing.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_beambeam4d.
namespace test_beambeam4d {

using namespace ft;
using cld = std::complex<long double>;

namespace {

constexpr long double kPi = 3.141592653589793238462643383279502884L;
constexpr double kElementaryCharge = 1.602176634e-19;  // C (exact)
constexpr double kEpsilon0 = 8.8541878128e-12;         // F/m (CODATA 2018)
constexpr double kProtonMass = 938.27208816e6;         // eV (CODATA 2018)

/// w(z), Im z >= 0, |z| <= 12: trapezoidal rule with step h on nodes t_k = k h + d, corrected for the
/// pole of 1 / (z - t):  w(z) = (i h / pi) sum_k exp(-t_k^2) / (z - t_k) - 2 exp(-z^2) q / (1 - q),
/// q = exp(2 pi i (z - d) / h), error ~ exp(-pi^2 / h^2). d in {0, h/2} keeps z away from the nodes.
cld w_trapezoid(long double x, long double y) {
  const long double h = 0.25L;
  const long double frac = x / h - std::floor(x / h);
  const long double d = (frac >= 0.25L && frac <= 0.75L) ? 0.0L : h / 2;
  const cld z(x, y);
  cld sum = 0.0L;
  for (int k = -48; k <= 48; ++k) {
    const long double t = k * h + d;
    sum += std::exp(-t * t) / (z - t);
  }
  sum *= cld(0.0L, h / kPi);
  // exp(-z^2) q / (1 - q) with the two exponentials combined (no overflow for large y)
  const cld iq = cld(0.0L, 2.0L * kPi / h) * (z - d);
  const cld corr = 2.0L * std::exp(-z * z + iq) / (1.0L - std::exp(iq));
  return sum - corr;
}

/// w(z) for large |z| (>= 12), Im z >= 0: Laplace's continued fraction
/// w = (i / sqrt(pi)) / (z - (1/2) / (z - 1 / (z - (3/2) / (z - ...)))).
cld w_continued_fraction(long double x, long double y) {
  const cld z(x, y);
  cld t = z;
  for (int n = 400; n >= 1; --n) t = z - (0.5L * n) / t;
  return cld(0.0L, 1.0L / std::sqrt(kPi)) / t;
}

cld w_reference(long double x, long double y) {
  return std::hypot(x, y) <= 12.0L ? w_trapezoid(x, y) : w_continued_fraction(x, y);
}

struct Field {
  long double x, y;
};

/// The field of the unit-normalised Gaussian with sizes sx, sy at (x, y), [1/m], by quadrature.
Field field_reference(long double x, long double y, long double sx, long double sy) {
  const long double A0 = 2 * sx * sx, B0 = 2 * sy * sy, r2 = x * x + y * y;
  const long double lo = std::log(std::min({A0, B0, r2 > 0 ? r2 : A0})) - 50.0L;
  const long double hi = std::log(std::max({A0, B0, r2})) + 50.0L;
  const long double h = 0.125L;
  long double ix = 0, iy = 0;
  for (long double s = lo; s <= hi; s += h) {
    const long double q = std::exp(s);
    const long double A = A0 + q, B = B0 + q;
    const long double g = q * std::exp(-x * x / A - y * y / B) / std::sqrt(A * B);
    ix += g / A;
    iy += g / B;
  }
  return {x * ix * h, y * iy * h};
}

ft_reference reference(double p0c, double mass0 = kProtonMass) {
  ft_reference r{};
  r.mass0 = mass0;
  r.q0 = 1.0;
  r.p0c = p0c;
  r.energy0 = std::sqrt(p0c * p0c + mass0 * mass0);
  r.gamma0 = r.energy0 / mass0;
  r.beta0 = p0c / r.energy0;
  return r;
}

BeamBeam4D make_bb(double sx, double sy, double n = 1.15e11, double q_strong = 1.0, double x_offset = 0.0,
                   double y_offset = 0.0, double beta_strong = 1.0, int subtract = 0,
                   const ft_reference& ref = reference(7e12)) {
  BeamBeam4D e = ft_test::with_defaults<BeamBeam4D>(ft_element_descriptor_BeamBeam4D());
  e.intensity = n;
  e.q_strong = q_strong;
  e.sigma_x = sx;
  e.sigma_y = sy;
  e.x_offset = x_offset;
  e.y_offset = y_offset;
  e.beta_strong = beta_strong;
  e.subtract_dipole = subtract;
  BeamBeam4D_prepare(e, ref);
  return e;
}

Field plugin_field(const BeamBeam4D& e, double x, double y) {
  double kx, ky;
  bb4d_field_xy(e, x, y, kx, ky);
  return {kx, ky};
}

/// |K - K_ref| / |K_ref| (vector norms).
double relative_error(const Field& k, const Field& ref) {
  return static_cast<double>(std::hypot(k.x - ref.x, k.y - ref.y) / std::hypot(ref.x, ref.y));
}

/// Sample points in units of the sizes, from the core to the far tails, all four quadrants.
std::vector<std::pair<double, double>> sample_points(double sx, double sy, unsigned seed) {
  std::vector<std::pair<double, double>> pts;
  const double u[] = {0.0, 1e-7, 1e-3, 0.02, 0.0706, 0.0708, 0.0999, 0.1001, 0.2, 0.5, 1.0, 1.7, 3.0, 6.0, 12.0};
  for (double a : u)
    for (double b : u)
      if (a != 0.0 || b != 0.0) pts.push_back({a * sx, b * sy});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-8.0, 8.0), logu(-6.0, 2.0);
  for (int i = 0; i < 150; ++i) pts.push_back({uni(rng) * sx, uni(rng) * sy});
  for (int i = 0; i < 60; ++i) pts.push_back({std::pow(10.0, logu(rng)) * sx * (i % 2 ? 1 : -1),
                                                std::pow(10.0, logu(rng)) * sy * (i % 3 ? 1 : -1)});
  return pts;
}

/// Relative tolerance on the field vector against the quadrature. The Bassetti-Erskine bracket
/// loses ~ eps_w / rho^2 just outside the core, rho^2 = 5e-3 (up to 1.5e-13 seen); elsewhere ~1e-15.
constexpr double kFieldTolerance = 2.5e-13;

}  // namespace

TEST_CASE("Faddeeva w(z): Weideman N = 40 against an independent long-double evaluation") {
  double worst = 0.0;
  std::string worst_at;
  auto check_at = [&](double x, double y) {
    double wr, wi;
    bb4d_faddeeva_w(x, y, wr, wi);
    const cld ref = w_reference(x, y);
    const double err = static_cast<double>(std::abs(cld(wr, wi) - ref) / std::abs(ref));
    if (err > worst) {
      worst = err;
      worst_at = fmt::format("z = {} + {} i", x, y);
    }
  };
  for (int i = 0; i <= 96; ++i)
    for (int j = 0; j <= 96; ++j) check_at(i * 0.125, j * 0.125);  // [0, 12]^2, axes included
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> logu(-9.0, 8.0), ang(0.0, 1.5707963267948966);
  for (int i = 0; i < 4000; ++i) {
    const double r = std::pow(10.0, logu(rng)), a = ang(rng);
    check_at(r * std::cos(a), r * std::sin(a));
    check_at(r, 0.0);
    check_at(0.0, r);
  }
  MESSAGE("largest relative error of w(z): ", worst, " at ", worst_at);
  CHECK(worst < 3e-15);

  // Exact properties: w(0) = 1, w(i y) = erfcx(y) is real, w(x) has Re = exp(-x^2).
  double wr, wi;
  bb4d_faddeeva_w(0.0, 0.0, wr, wi);
  CHECK(std::fabs(wr - 1.0) <= 2e-16);
  CHECK(wi == 0.0);
  for (double y : {1e-6, 0.3, 1.0, 2.5, 7.0, 20.0}) {
    bb4d_faddeeva_w(0.0, y, wr, wi);
    const long double erfcx = std::exp(static_cast<long double>(y) * y) * std::erfc(static_cast<long double>(y));
    CHECK(wi == 0.0);
    CHECK(ft_test::close(wr, static_cast<double>(erfcx), 3e-15));
  }
  for (double x : {0.1, 0.9, 2.0, 3.5}) {
    bb4d_faddeeva_w(x, 0.0, wr, wi);
    CHECK(std::fabs(wr - std::exp(-x * x)) <= 3e-15 * std::hypot(wr, wi));
  }
}

TEST_CASE("field of the Gaussian bunch against numerical integration, round to flat") {
  const double s = 16.7e-6;
  struct Shape {
    double sx, sy;
  };
  const Shape shapes[] = {
      {s, s},                      // round: closed form
      {s * (1 + 1e-14), s},        // near-round: Bassetti-Erskine with |z| up to ~1e8
      {s * (1 + 1e-9), s},         //
      {s * (1 + 1e-5), s},         //
      {s * 1.01, s},               //
      {2 * s, s},                  // elliptic
      {s, 3 * s},                  // sigma_y > sigma_x: x and y swap roles
      {10 * s, s},                 // flat
      {s, 1000 * s},               // very flat, vertical
  };
  for (const Shape& shape : shapes) {
    const BeamBeam4D e = make_bb(shape.sx, shape.sy);
    CAPTURE(shape.sx);
    CAPTURE(shape.sy);
    CHECK(e.mode == (shape.sx == shape.sy ? 0 : (shape.sx > shape.sy ? 1 : 2)));
    double worst = 0.0, worst_core = 0.0;
    std::string worst_at;
    const double sa = std::max(shape.sx, shape.sy), sb = std::min(shape.sx, shape.sy);
    for (const auto& [x, y] : sample_points(shape.sx, shape.sy, 11)) {
      const double err = relative_error(plugin_field(e, x, y), field_reference(x, y, shape.sx, shape.sy));
      if (err > worst) {
        worst = err;
        worst_at = fmt::format("({:.3g}, {:.3g}) sigma", x / shape.sx, y / shape.sy);
      }
      // The core of an elliptic beam (the series region of the plugin): truncation only, ~1e-14.
      const double a = shape.sx >= shape.sy ? x : y, b = shape.sx >= shape.sy ? y : x;
      if (e.mode != 0 && a * a / (2 * sa * sa) + b * b / (2 * sb * sb) < 5e-3) worst_core = std::max(worst_core, err);
    }
    MESSAGE(fmt::format("sigma_x / sigma_y = {:.15g}: largest relative field error {:.3g} at {}, in the core {:.3g}",
                        shape.sx / shape.sy, worst, worst_at, worst_core));
    CHECK(worst < kFieldTolerance);
    CHECK(worst_core < 2e-14);
  }
}

TEST_CASE("far field: the field of a line charge, 1/r") {
  for (auto [sx, sy] : {std::pair{20e-6, 20e-6}, std::pair{30e-6, 10e-6}, std::pair{5e-6, 50e-6}}) {
    const BeamBeam4D e = make_bb(sx, sy);
    const double sigma = std::max(sx, sy);
    for (double r : {50.0, 1e3, 1e5}) {
      for (double angle : {0.0, 0.4, 1.2, 2.9, -2.0}) {
        const double x = r * sigma * std::cos(angle), y = r * sigma * std::sin(angle);
        const Field k = plugin_field(e, x, y);
        const Field line{x / (x * x + y * y), y / (x * x + y * y)};
        // Deviation from the line charge: the quadrupole term, |sx^2 - sy^2| / r^2 relative.
        const double bound = 1e-14 + 2.0 * std::fabs(sx * sx - sy * sy) / (x * x + y * y);
        CAPTURE(r);
        CAPTURE(angle);
        CHECK(relative_error(k, line) <= bound);
        if (sx == sy) CHECK(relative_error(k, line) <= 1e-15);  // exp(-r^2 / 2 sigma^2) underflows
      }
    }
  }
}

TEST_CASE("round and flat limits") {
  const double s = 20e-6;
  const BeamBeam4D round = make_bb(s, s);
  SUBCASE("sigma_x -> sigma_y: the elliptic field tends to the round closed form") {
    for (double eps : {1e-15, 1e-12, 1e-9, 1e-6}) {
      const BeamBeam4D near_x = make_bb(s * (1 + eps), s);
      const BeamBeam4D near_y = make_bb(s, s * (1 + eps));
      CHECK(near_x.mode == 1);
      CHECK(near_y.mode == 2);
      for (auto [x, y] : {std::pair{0.3 * s, 0.1 * s}, std::pair{1e-3 * s, 2e-3 * s}, std::pair{-2.5 * s, 1.5 * s},
                          std::pair{0.0, 4.0 * s}}) {
        const Field kr = plugin_field(round, x, y);
        CAPTURE(eps);
        CAPTURE(x / s);
        CAPTURE(y / s);
        CHECK(relative_error(plugin_field(near_x, x, y), kr) <= 2.0 * eps + 1e-13);
        CHECK(relative_error(plugin_field(near_y, x, y), kr) <= 2.0 * eps + 1e-13);
      }
    }
  }
  SUBCASE("sigma_y -> 0: a Gaussian ribbon, Kx(x, 0) = sqrt(pi/2) Im w(x / (sqrt(2) sx)) / sx") {
    // First-order correction for a finite sigma_y (from the integral representation at y = 0):
    //   Kx(x, 0; sy) = Kx(x, 0; 0) - 2 sqrt(2) sy x exp(-x^2 / (2 sx^2)) / (2 sx^2)^(3/2) + O(sy^2).
    const double sx = 20e-6, sy = 20e-12;
    const BeamBeam4D flat = make_bb(sx, sy);
    for (double u : {1e-4, 0.03, 0.3, 1.0, 2.2, 5.0, 40.0}) {
      const double x = u * sx;
      const long double ribbon =
          std::sqrt(kPi / 2) * w_reference(x / (std::sqrt(2.0L) * sx), 0.0L).imag() / sx -
          2 * std::sqrt(2.0L) * sy * x * std::exp(-0.5L * u * u) / std::pow(2.0L * sx * sx, 1.5L);
      const Field k = plugin_field(flat, x, 0.0);
      CAPTURE(u);
      CHECK(k.y == 0.0);
      CHECK(ft_test::close(k.x, static_cast<double>(ribbon), 1e-9));
      CHECK(plugin_field(flat, -x, 0.0).x == -k.x);  // odd in x
    }
  }
}

TEST_CASE("r -> 0: zero kick, no NaN, the linear slope of the core") {
  const double s = 16.7e-6;
  for (auto [sx, sy] : {std::pair{s, s}, std::pair{2 * s, s}, std::pair{s, 2 * s}, std::pair{s * (1 + 1e-12), s}}) {
    const BeamBeam4D e = make_bb(sx, sy);
    CAPTURE(sx / sy);
    const Field k0 = plugin_field(e, 0.0, 0.0);
    CHECK(k0.x == 0.0);
    CHECK(k0.y == 0.0);
    // The core slope: Kx ~ x / (sx (sx + sy)), Ky ~ y / (sy (sx + sy)) (round: r / (2 s^2)).
    for (double r : {1e-300, 1e-200, 4.9e-324, 1e-20, 1e-12 * s}) {
      const Field k = plugin_field(e, r, -r);
      CAPTURE(r);
      CHECK(std::isfinite(k.x));
      CHECK(std::isfinite(k.y));
      if (r > 1e-300) {
        CHECK(ft_test::close(k.x, r / (sx * (sx + sy)), 1e-14));
        CHECK(ft_test::close(k.y, -r / (sy * (sx + sy)), 1e-14));
      }
    }
    // Through the element: a particle on the axis of the strong beam gets no kick.
    ft::ParticleView p = ft_test::particle(0.0, 1e-6, 0.0, -2e-6, 0.0, 0.0, 0.999);
    BeamBeam4D_track(e, p);
    CHECK(p.px == 1e-6);
    CHECK(p.py == -2e-6);
  }
}

TEST_CASE("kick factor: the classical 2 N r0 / (beta0 gamma0), charges and the strong beam's speed") {
  const double n = 1.15e11;
  const ft_reference ref = reference(7e12);
  // r0 = e^2 / (4 pi eps0 m c^2) = e / (4 pi eps0 m[eV]) in metres.
  const double r0 = kElementaryCharge / (4.0 * static_cast<double>(kPi) * kEpsilon0 * kProtonMass);
  CHECK(ft_test::close(r0, 1.534698e-18, 1e-6));  // the proton classical radius (PDG: 1.534698e-18 m)
  const BeamBeam4D pp = make_bb(20e-6, 20e-6, n);
  CHECK(ft_test::close(pp.kick_factor, 2.0 * n * r0 / (ref.beta0 * ref.gamma0), 1e-14));

  // Opposite charges attract: the kick changes sign; half the charge, half the kick.
  CHECK(make_bb(20e-6, 20e-6, n, -1.0).kick_factor == -pp.kick_factor);
  CHECK(ft_test::close(make_bb(20e-6, 20e-6, n, 0.5).kick_factor, 0.5 * pp.kick_factor, 1e-15));

  // A slow strong beam, beta_s = beta0 = 0.6: the electric and magnetic forces add as (1 + beta0 beta_s) and the
  // passage lasts 1 / ((beta0 + beta_s) c):  F_k = 2 N r0 / (beta0 gamma0) (1 + beta0^2) / (2 beta0).
  const ft_reference slow = reference(kProtonMass * 0.6 / 0.8);  // beta0 = 0.6, gamma0 = 1.25
  CHECK(ft_test::close(slow.beta0, 0.6, 1e-15));
  const BeamBeam4D b = make_bb(20e-6, 20e-6, n, 1.0, 0.0, 0.0, 0.6, 0, slow);
  CHECK(ft_test::close(b.kick_factor, 2.0 * n * r0 / (0.6 * 1.25) * (1.0 + 0.36) / 1.2, 1e-14));

  // The track function: px += F_k Kx, py += F_k Ky, independent of delta.
  const BeamBeam4D e = make_bb(30e-6, 10e-6, n);
  for (double delta : {0.0, 1e-3, -2e-3}) {
    ft::ParticleView p = ft_test::particle(15e-6, 1e-7, -7e-6, 2e-7, 0.01, delta, ref.beta0);
    const ft::ParticleView before = p;
    BeamBeam4D_track(e, p);
    const Field k = field_reference(15e-6, -7e-6, 30e-6, 10e-6);
    CHECK(ft_test::close(p.px - before.px, static_cast<double>(e.kick_factor * k.x), 1e-12));
    CHECK(ft_test::close(p.py - before.py, static_cast<double>(e.kick_factor * k.y), 1e-12));
    CHECK(p.px - before.px > 0.0);  // repulsive (same-sign charges), outward
    CHECK(p.py - before.py < 0.0);
    CHECK(p.x == before.x);
    CHECK(p.y == before.y);
    CHECK(p.zeta == before.zeta);
    CHECK(p.delta == before.delta);
  }
}

TEST_CASE("separation: the field is centred on the strong beam, subtract_dipole removes the orbit kick") {
  const double sx = 30e-6, sy = 12e-6, xo = 45e-6, yo = -20e-6;
  const BeamBeam4D centred = make_bb(sx, sy);
  const BeamBeam4D offset = make_bb(sx, sy, 1.15e11, 1.0, xo, yo);
  const BeamBeam4D subtracted = make_bb(sx, sy, 1.15e11, 1.0, xo, yo, 1.0, 1);
  for (auto [x, y] : {std::pair{0.0, 0.0}, std::pair{10e-6, 5e-6}, std::pair{-60e-6, 30e-6}}) {
    ft::ParticleView a = ft_test::particle(x, 0.0, y, 0.0, 0.0, 0.0, 0.999);
    ft::ParticleView b = ft_test::particle(x - xo, 0.0, y - yo, 0.0, 0.0, 0.0, 0.999);
    ft::ParticleView c = a;
    BeamBeam4D_track(offset, a);
    BeamBeam4D_track(centred, b);
    BeamBeam4D_track(subtracted, c);
    CHECK(a.px == b.px);
    CHECK(a.py == b.py);
    const Field k0 = field_reference(-xo, -yo, sx, sy);  // the kick on the reference orbit
    CHECK(ft_test::close(c.px, a.px - static_cast<double>(offset.kick_factor * k0.x), 1e-12, 1e-17));
    CHECK(ft_test::close(c.py, a.py - static_cast<double>(offset.kick_factor * k0.y), 1e-12, 1e-17));
  }
  ft::ParticleView on_orbit = ft_test::particle(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.999);
  BeamBeam4D_track(subtracted, on_orbit);
  CHECK(on_orbit.px == 0.0);
  CHECK(on_orbit.py == 0.0);
}

TEST_CASE("bad parameters are rejected by prepare") {
  auto error_of = [](double sx, double sy, double beta_s, int subtract) {
    return ft::test::error_message([&] { make_bb(sx, sy, 1e11, 1.0, 0.0, 0.0, beta_s, subtract); });
  };
  CHECK(error_of(0.0, 1e-5, 1.0, 0).find("sigma_x must be positive") != std::string::npos);
  CHECK(error_of(1e-5, -1e-5, 1.0, 0).find("sigma_y must be positive") != std::string::npos);
  CHECK(error_of(1e-5, 1e-5, 1.5, 0).find("beta_strong must be in (0, 1]") != std::string::npos);
  CHECK(error_of(1e-5, 1e-5, 1.0, 2).find("subtract_dipole must be 0 or 1") != std::string::npos);
  CHECK(error_of(1e-5, 2e-5, 1.0, 1).empty());
}

}  // namespace test_beambeam4d
