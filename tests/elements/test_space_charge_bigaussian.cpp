// SpaceChargeBiGaussian (elements/space_charge_bigaussian.h): the field against an independent
// quadrature of the field of a Gaussian charge (round, flat, tall and near-round beams), the round-limit
// continuity, the kick's scale and line density, the linear (Laslett) gradient at the centre, the
// transverse symplecticity and reversibility, bad input naming the element and the field, and the
// Laslett tune shift of small-amplitude particles tracked through rings with the elements installed.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "fusetrack/error.h"
#include "fusetrack/optics.h"
#include "fusetrack/space_charge_install.h"
#include "space_charge_bigaussian.h"
#include "support/element_testing.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_space_charge_bigaussian.
namespace test_space_charge_bigaussian {

using namespace ft_test;

namespace {

constexpr long double kPiL = 3.141592653589793238462643383279502884L;

/// K(x, y) of the unit-normalised Gaussian with sizes sx, sy, by direct quadrature of
///   K(r) = int rho(r') (r - r') / |r - r'|^2 d^2 r'
/// in polar coordinates around the field point, r' = r + t (cos th, sin th): the 1 / |r - r'| singularity
/// cancels against the area element, K = -int_0^{2 pi} (cos th, sin th) I(th) d th with
/// I(th) = int_0^inf rho(r + t e_th) dt, a Gaussian integral in t done in closed form (erfc), and the
/// periodic, smooth th integral by the trapezoidal rule (spectrally accurate), in long double. Nothing of the
/// element (Bassetti-Erskine, Faddeeva function, round-beam formula) is used.
void quadrature_field(double x, double y, double sx, double sy, double& kx, double& ky, int n_theta = 8192) {
  const long double ix2 = 1.0L / ((long double)sx * sx), iy2 = 1.0L / ((long double)sy * sy);
  const long double norm = 1.0L / (2.0L * kPiL * sx * sy);
  const long double c0 = (long double)x * x * ix2 + (long double)y * y * iy2;
  long double sum_x = 0.0L, sum_y = 0.0L;
  for (int k = 0; k < n_theta; ++k) {
    const long double th = 2.0L * kPiL * (k + 0.5L) / n_theta;
    const long double c = std::cos(th), s = std::sin(th);
    // rho(r + t e) = norm exp(-(A t^2 + 2 B t + C) / 2)
    const long double a = c * c * ix2 + s * s * iy2;
    const long double b = x * c * ix2 + y * s * iy2;
    const long double z = b / std::sqrt(2.0L * a);
    const long double integral =
        norm * std::exp(-0.5L * (c0 - b * b / a)) * std::sqrt(kPiL / (2.0L * a)) * std::erfc(z);
    sum_x += c * integral;
    sum_y += s * integral;
  }
  const long double dth = 2.0L * kPiL / n_theta;
  kx = static_cast<double>(-sum_x * dth);
  ky = static_cast<double>(-sum_y * dth);
}

SpaceChargeBiGaussian make_sc(double sx, double sy, double n = 1e11, double length = 1.0, double sigma_z = 0.2,
                              double beta0 = 0.5) {
  SpaceChargeBiGaussian e = with_defaults<SpaceChargeBiGaussian>(ft_element_descriptor_SpaceChargeBiGaussian());
  e.length = length;
  e.number_of_particles = n;
  e.sigma_z = sigma_z;
  e.sigma_x = sx;
  e.sigma_y = sy;
  SpaceChargeBiGaussian_prepare(e, reference_proton(beta0));
  return e;
}

/// Largest |K - K_quadrature| / |K_quadrature| over points from 1e-3 to 8 sigma in 13 directions outside the
/// core (max_rel), and over the core points (rho^2 < 1e-5: the element's first-order series, max_core).
struct FieldError {
  double max_rel = 0.0, max_core = 0.0;
  int points = 0, core_points = 0;
};
FieldError field_error(double sx, double sy) {
  const SpaceChargeBiGaussian e = make_sc(sx, sy);
  FieldError r;
  const double s = std::fmax(sx, sy);
  for (const double amp : {1e-3, 3e-3, 0.02, 0.1, 0.4, 0.9, 1.5, 2.5, 4.0, 8.0}) {
    for (int k = 0; k < 13; ++k) {
      const double th = 2.0 * 3.141592653589793 * k / 13.0 + 0.1;
      const double x = amp * sx * std::cos(th), y = amp * sy * std::sin(th);
      double kx, ky, qx, qy;
      SpaceChargeBiGaussian_field(e, x, y, kx, ky);
      quadrature_field(x, y, sx, sy, qx, qy);
      const double rel = std::hypot(kx - qx, ky - qy) / std::hypot(qx, qy);
      const double rho2 = x * x / (2 * sx * sx) + y * y / (2 * sy * sy);
      if (rho2 < 1e-5 && e.mode != 0) {
        r.max_core = std::fmax(r.max_core, rel);
        ++r.core_points;
      } else {
        r.max_rel = std::fmax(r.max_rel, rel);
        ++r.points;
      }
    }
  }
  (void)s;
  return r;
}

}  // namespace

TEST_CASE("SpaceChargeBiGaussian: descriptor (thin, Xsuite field names, units, derived constants)") {
  const ft_element_type_desc& d = ft_element_descriptor_SpaceChargeBiGaussian();
  CHECK(d.flags == (FT_THIN | FT_LARGE_CODE));  // thin; kept out of large baked kernels
  for (const char* f : {"length", "number_of_particles", "sigma_z", "sigma_x", "sigma_y"}) {
    CAPTURE(f);
    REQUIRE(find_field(d, f) != nullptr);
    CHECK(find_field(d, f)->has_default == 0);
  }
  CHECK(std::string(find_field(d, "sigma_x")->unit) == "m");
  CHECK(std::string(find_field(d, "number_of_particles")->unit) == "1");
  CHECK(find_field(d, "min_sigma_diff")->default_value == 1e-10);
  CHECK(find_field(d, "kick_factor")->flags == FT_FIELD_DERIVED);
  CHECK(find_field(d, "mode")->type == FT_FIELD_INT32);
}

TEST_CASE("SpaceChargeBiGaussian: the quadrature reference reproduces the closed-form round field") {
  // Round Gaussian: K = r (1 - exp(-r^2 / (2 sigma^2))) / r^2, an exact independent formula.
  const double sigma = 2e-3;
  double worst = 0.0;
  for (const double r : {1e-6, 1e-4, 1e-3, 3e-3, 1e-2}) {
    const double x = 0.6 * r, y = -0.8 * r;
    double qx, qy;
    quadrature_field(x, y, sigma, sigma, qx, qy);
    const double f = -std::expm1(-r * r / (2 * sigma * sigma)) / (r * r);
    worst = std::fmax(worst, std::hypot(qx - f * x, qy - f * y) / (f * r));
  }
  MESSAGE(fmt::format("quadrature vs closed-form round field: max relative error {:.2e}", worst));
  CHECK(worst < 1e-12);
}

TEST_CASE("SpaceChargeBiGaussian: field against 2D quadrature of the Gaussian charge (round, flat, tall)") {
  // Tolerances: 1e-12 for the round formula and Bassetti-Erskine; the core series' truncation, rho^4 / 2 < 5e-11;
  // a beam made round by the 1e-8 rule carries the size difference (5e-9) into the field.
  struct Shape {
    double sx, sy;
    const char* what;
    double tolerance;
  };
  for (const Shape& sh : {Shape{2e-3, 2e-3, "round", 1e-12}, Shape{3e-3, 2e-3, "flat 3:2", 1e-12},
                          Shape{6e-3, 1.2e-3, "flat 5:1", 1e-12}, Shape{1e-3, 4e-3, "tall 1:4 (x and y swapped)", 1e-12},
                          Shape{2e-3, 2e-3 * (1 - 5e-9), "round by the 1e-8 rule (sizes 5e-9 apart)", 5e-9}}) {
    const std::string label = sh.what;
    CAPTURE(label);
    const FieldError r = field_error(sh.sx, sh.sy);
    MESSAGE(fmt::format("{}: {} points, max relative error {:.2e}; core series: {} points, {:.2e}", sh.what, r.points,
                        r.max_rel, r.core_points, r.max_core));
    CHECK(r.max_rel < sh.tolerance);
    CHECK(r.max_core < 5e-11);
  }
}

TEST_CASE("SpaceChargeBiGaussian: the round limit is continuous (near-round beams)") {
  // sigma_y = sigma_x (1 - eps): round below 1e-8 (or below min_sigma_diff = 1e-10 m, 5e-8 here), Bassetti-Erskine
  // above, each against the quadrature.
  const double sx = 2e-3;
  double worst = 0.0;
  for (const double eps : {1e-10, 5e-9, 2e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3}) {
    const double sy = sx * (1.0 - eps);
    const SpaceChargeBiGaussian e = make_sc(sx, sy);
    CHECK(e.mode == (eps <= 1e-8 || sx - sy < e.min_sigma_diff ? 0 : 1));
    for (const double amp : {0.01, 0.5, 1.0, 3.0}) {
      const double x = amp * sx * 0.8, y = amp * sy * 0.6;
      double kx, ky, qx, qy;
      SpaceChargeBiGaussian_field(e, x, y, kx, ky);
      quadrature_field(x, y, sx, sy, qx, qy);
      const double rel = std::hypot(kx - qx, ky - qy) / std::hypot(qx, qy);
      worst = std::fmax(worst, rel);
    }
  }
  MESSAGE(fmt::format("near-round beams (relative size difference 1e-10 .. 1e-3): max relative field error {:.2e}",
                      worst));
  CHECK(worst < 3e-8);
  // xfields' absolute threshold: |sigma_x - sigma_y| < min_sigma_diff is round.
  SpaceChargeBiGaussian e = with_defaults<SpaceChargeBiGaussian>(ft_element_descriptor_SpaceChargeBiGaussian());
  e.length = 1.0, e.number_of_particles = 1e10, e.sigma_z = 0.1, e.sigma_x = 2e-3, e.sigma_y = 1.9e-3;
  e.min_sigma_diff = 2e-4;
  SpaceChargeBiGaussian_prepare(e, reference_proton(0.5));
  CHECK(e.mode == 0);
  CHECK(e.half_inv_a2 == doctest::Approx(1.0 / (2.0 * 1.95e-3 * 1.95e-3)).epsilon(1e-15));
}

TEST_CASE("SpaceChargeBiGaussian: linear gradient at the centre (the Laslett form)") {
  for (const auto& [sx, sy] : {std::pair<double, double>{3e-3, 1e-3}, {1e-3, 3e-3}, {2e-3, 2e-3}}) {
    const SpaceChargeBiGaussian e = make_sc(sx, sy);
    const double h = 1e-9;
    double kx, ky, dummy;
    SpaceChargeBiGaussian_field(e, h, 0.0, kx, dummy);
    SpaceChargeBiGaussian_field(e, 0.0, h, dummy, ky);
    CHECK(kx / h == doctest::Approx(1.0 / (sx * (sx + sy))).epsilon(1e-12));
    CHECK(ky / h == doctest::Approx(1.0 / (sy * (sx + sy))).epsilon(1e-12));
    SpaceChargeBiGaussian_field(e, 0.0, 0.0, kx, ky);
    CHECK(kx == 0.0);
    CHECK(ky == 0.0);
  }
}

TEST_CASE("SpaceChargeBiGaussian: kick = 2 r0 N L lambda(zeta) K / (beta0^2 gamma0^3), px and py only") {
  const double n = 8e12, length = 2.5, sigma_z = 15.0, sx = 4e-3, sy = 2.5e-3;
  for (const double beta0 : {0.3, kBetaHalf, 0.9}) {
    CAPTURE(beta0);
    SpaceChargeBiGaussian e = with_defaults<SpaceChargeBiGaussian>(ft_element_descriptor_SpaceChargeBiGaussian());
    e.length = length, e.number_of_particles = n, e.sigma_z = sigma_z, e.sigma_x = sx, e.sigma_y = sy;
    e.z0 = 1.5, e.mean_x = 1e-4, e.mean_y = -2e-4;
    SpaceChargeBiGaussian_prepare(e, reference_proton(beta0));
    const double gamma0 = 1.0 / std::sqrt(1.0 - beta0 * beta0);
    const double r_proton = 1.5346982671888944e-18;  // classical proton radius [m] (CODATA)
    for (const double zeta : {1.5, -3.0, 20.0}) {
      const double x = 5e-3, y = -1e-3;
      ft::ParticleView p = particle(x, 1e-4, y, -2e-4, zeta, 1e-3, beta0);
      const ft::ParticleView p0 = p;
      SpaceChargeBiGaussian_track(e, p);
      const double lambda =
          n / (std::sqrt(2 * 3.141592653589793) * sigma_z) * std::exp(-(zeta - 1.5) * (zeta - 1.5) / (2 * sigma_z * sigma_z));
      double qx, qy;
      quadrature_field(x - 1e-4, y + 2e-4, sx, sy, qx, qy);
      const double f = 2.0 * r_proton * length * lambda / (beta0 * beta0 * gamma0 * gamma0 * gamma0);
      CHECK(p.px - p0.px == doctest::Approx(f * qx).epsilon(1e-9));
      CHECK(p.py - p0.py == doctest::Approx(f * qy).epsilon(1e-9));
      CHECK(p.px - p0.px > 0.0);  // like charges repel: outward
      CHECK(p.py - p0.py < 0.0);
      CHECK(p.x == p0.x);
      CHECK(p.y == p0.y);
      CHECK(p.zeta == p0.zeta);
      CHECK(p.delta == p0.delta);
      CHECK(p.rvv == p0.rvv);
    }
  }
  // No particles, no kick (bit for bit).
  SpaceChargeBiGaussian e = make_sc(2e-3, 1e-3, 0.0);
  ft::ParticleView p = particle(1e-3, 2e-4, 1e-3, -1e-4, 0.0, 0.0, 0.5);
  SpaceChargeBiGaussian_track(e, p);
  CHECK(p.px == 2e-4);
  CHECK(p.py == -1e-4);
}

TEST_CASE("SpaceChargeBiGaussian: transverse map symplectic, reversed by the opposite kick") {
  for (const auto& [sx, sy] : {std::pair<double, double>{3e-3, 1e-3}, {2e-3, 2e-3}, {1e-3, 2e-3}}) {
    const SpaceChargeBiGaussian e = make_sc(sx, sy, 1e11, 5.0);  // gradients ~0.5 at beta0 = 0.5
    SpaceChargeBiGaussian back = e;
    back.kick_factor = -e.kick_factor;  // the element of length -L
    for (const Case& c : cases()) {
      CAPTURE(c.x);
      // 4x4 (x, px, y, py) block at fixed zeta: the kick derives from a potential.
      const Mat6 m = jacobian(e, SpaceChargeBiGaussian_track, canonical(c), c.beta0, 1e-7);
      double err = 0.0;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          // (M^T J M)_ij for the 4x4 block
          double s = 0.0;
          for (int k = 0; k < 2; ++k) s += m[2 * k][i] * m[2 * k + 1][j] - m[2 * k + 1][i] * m[2 * k][j];
          const double jij = (i % 2 == 0 && j == i + 1) ? 1.0 : ((i % 2 == 1 && j == i - 1) ? -1.0 : 0.0);
          err = std::fmax(err, std::fabs(s - jij));
        }
      CHECK(err < 1e-9);
      ft::ParticleView p = particle(c);
      SpaceChargeBiGaussian_track(e, p);
      CHECK(p.px != c.px);
      SpaceChargeBiGaussian_track(back, p);
      CHECK(close(p.px, c.px, 1e-15, 1e-18));
      CHECK(close(p.py, c.py, 1e-15, 1e-18));
      CHECK(p.x == c.x);
    }
  }
}

TEST_CASE("SpaceChargeBiGaussian: bad input names the element and the field") {
  const nlohmann::ordered_json good = {{"length", 1.0},    {"number_of_particles", 1e11}, {"sigma_z", 0.2},
                                       {"sigma_x", 2e-3},  {"sigma_y", 1e-3}};
  CHECK_NOTHROW(ft::test::single_element_lattice("SpaceChargeBiGaussian", good));
  struct Bad {
    const char* field;
    double value;
  };
  for (const Bad& b : {Bad{"sigma_x", 0.0}, Bad{"sigma_x", -1e-3}, Bad{"sigma_y", 0.0}, Bad{"sigma_z", 0.0},
                       Bad{"sigma_z", -0.1}, Bad{"number_of_particles", -1.0}, Bad{"length", -1.0},
                       Bad{"min_sigma_diff", -1e-3}}) {
    CAPTURE(b.field);
    nlohmann::ordered_json f = good;
    f[b.field] = b.value;
    const std::string msg =
        ft::test::error_message([&] { ft::test::single_element_lattice("SpaceChargeBiGaussian", f); });
    CAPTURE(msg);
    CHECK(msg.find("element") != std::string::npos);
    CHECK(msg.find("SpaceChargeBiGaussian") != std::string::npos);
    CHECK(msg.find(std::string("field '") + b.field + "'") != std::string::npos);
  }
  // A required field missing, and an unknown one, are loader errors naming the field.
  nlohmann::ordered_json missing = good;
  missing.erase("sigma_y");
  CHECK(ft::test::error_message([&] { ft::test::single_element_lattice("SpaceChargeBiGaussian", missing); })
            .find("sigma_y") != std::string::npos);
  nlohmann::ordered_json extra = good;
  extra["sigma"] = 1e-3;
  CHECK(ft::test::error_message([&] { ft::test::single_element_lattice("SpaceChargeBiGaussian", extra); })
            .find("sigma") != std::string::npos);
}

// ------------------------------------------------------------------------------------------------
// Laslett tune shift. N elements installed around a ring (ft::install_space_charge, beam sizes from the
// optics), small-amplitude particles (x, y = 0.01 sigma at the start, zeta at the bunch centre) tracked
// 1024 turns, tunes from NAFF (ft::tunes_by_tracking), against the incoherent tune shift of a Gaussian
// bunch to first order in the perturbation (K. Schindl, "Space charge", CAS CERN-2006-002, with the
// element's kick; the smooth-focusing form of Laslett's):
//   dQ_x = -r0 N / ((2 pi)^(3/2) sigma_z beta0^2 gamma0^3) sum_k beta_x,k L_k / (sigma_x,k (sigma_x,k + sigma_y,k)),
// written here from the installed elements' optics and the classical proton radius, independently of the
// library's own sum. The formula's neglected second-order terms are ~dQ / (2 Q) relative (< 1% here).

namespace {

struct LaslettResult {
  double measured_x, measured_y, formula_x, formula_y, matrix_x, matrix_y;
};

LaslettResult laslett_case(const ft::Lattice& bare, const ft::SpaceChargeInstallOptions& o) {
  const ft::InstalledSpaceCharge sc = ft::install_space_charge(bare, o, ft::test::builtin_registry(), "ring");
  const ft::Lattice ring = ft::lattice_from_json(sc.lattice, "ring+sc", ft::test::builtin_registry());
  const ft::LinearOptics bare_optics = ft::compute_linear_optics(bare);
  const ft::LinearOptics sc_optics = ft::compute_linear_optics(ring);
  const double bg = bare.reference().beta0() * bare.reference().gamma0();
  ft::OpticsOptions oo;
  // x = a sqrt(beta_x): 0.01 of the smaller beam size
  oo.tracking_amplitude = 0.01 * std::sqrt(std::fmin(o.eps_nx, o.eps_ny) / bg);
  const ft::TrackedTunes bare_t = ft::tunes_by_tracking(bare, bare_optics, 1024, oo);
  const ft::TrackedTunes sc_t = ft::tunes_by_tracking(ring, sc_optics, 1024, oo);
  const double r_proton = 1.5346982671888944e-18;  // classical proton radius [m], CODATA
  const double beta0 = bare.reference().beta0(), gamma0 = bare.reference().gamma0();
  const double factor = -r_proton * o.intensity /
                        (std::pow(2.0 * 3.141592653589793, 1.5) * o.sigma_zeta * beta0 * beta0 * gamma0 * gamma0 * gamma0);
  double sx = 0.0, sy = 0.0, length = 0.0;
  for (const ft::SpaceChargeKick& k : sc.kicks) {
    sx += k.beta_x * k.length / (k.sigma_x * (k.sigma_x + k.sigma_y));
    sy += k.beta_y * k.length / (k.sigma_y * (k.sigma_x + k.sigma_y));
    length += k.length;
  }
  CHECK(length == doctest::Approx(bare.circumference()).epsilon(1e-12));
  CHECK(sc.laslett_dqx == doctest::Approx(factor * sx).epsilon(1e-12));
  CHECK(sc.laslett_dqy == doctest::Approx(factor * sy).epsilon(1e-12));
  return {sc_t.qx - bare_t.qx, sc_t.qy - bare_t.qy, factor * sx, factor * sy, sc_optics.qx - bare_optics.qx,
          sc_optics.qy - bare_optics.qy};
}

void report(const char* ring, const LaslettResult& r) {
  MESSAGE(fmt::format("{}: dQx tracked (NAFF) {:.6f}, Laslett {:.6f}, ratio {:.4f} (one-turn matrix {:.6f}); dQy tracked "
                      "{:.6f}, Laslett {:.6f}, ratio {:.4f} (matrix {:.6f})",
                      ring, r.measured_x, r.formula_x, r.measured_x / r.formula_x, r.matrix_x, r.measured_y,
                      r.formula_y, r.measured_y / r.formula_y, r.matrix_y));
  CHECK(std::fabs(r.measured_x / r.formula_x - 1.0) < 0.03);
  CHECK(std::fabs(r.measured_y / r.formula_y - 1.0) < 0.03);
}

}  // namespace

TEST_CASE("SpaceChargeBiGaussian: Laslett tune shift in the FODO ring (64 elements, flat beam)") {
  const ft::Lattice bare = ft::test::bundled_lattice("fodo_ring.json");
  ft::SpaceChargeInstallOptions o;
  o.elements = 64;  // every 2.5 m: half at the thin quadrupoles, half splitting the drifts
  o.intensity = 2e10;
  o.eps_nx = 2e-6;
  o.eps_ny = 1e-6;
  o.sigma_zeta = 1.0;
  const LaslettResult r = laslett_case(bare, o);
  CHECK(r.formula_x < -0.01);
  report("FODO ring, 64 elements", r);
}

TEST_CASE("SpaceChargeBiGaussian: Laslett tune shift in the PS Booster (128 elements, dispersion)") {
  const std::string path = ft::test::require_shared("lattices/xsuite/psb_injection.json");
  const ft::Lattice bare = ft::load_lattice(path, ft::test::builtin_registry());
  ft::SpaceChargeInstallOptions o;
  o.elements = 128;
  o.intensity = 2.5e10;
  o.eps_nx = 1.5e-6;
  o.eps_ny = 1.0e-6;
  o.sigma_zeta = 10.0;
  o.delta_rms = 1e-3;
  const LaslettResult r = laslett_case(bare, o);
  CHECK(r.formula_x < -0.01);
  report("PS Booster, 128 elements", r);
}

}  // namespace test_space_charge_bigaussian
