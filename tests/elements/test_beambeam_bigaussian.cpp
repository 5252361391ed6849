// Weak-strong beam-beam lenses (elements/beambeam_bigaussian_2d.h, elements/beambeam_bigaussian_3d.h): the 2D
// kick against the closed-form field of a round Gaussian and against a quadrature of the Bassetti-Erskine
// integral for flat and tall beams, the offsets and the post-subtracted kick, the 3D lens with one slice and no
// crossing against the 2D lens and its energy change against Hirata's formula, the symplecticity of the 6D map
// with a crossing angle and several coupled slices (beta0 near 1 and 1/2), consecutive lenses against one lens
// of all their slices, and bad input naming the field.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "beambeam_bigaussian_2d.h"
#include "beambeam_bigaussian_3d.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_beambeam_bigaussian.
namespace test_beambeam_bigaussian {

using namespace ft_test;

namespace {

constexpr double kElementaryCharge = 1.602176634e-19;  // C
constexpr double kEpsilon0 = 8.8541878128e-12;         // F/m
constexpr double kPi = 3.14159265358979323846;

/// Kick per unit field of N partner particles of charge q_other (e) moving at beta_other c against the
/// tracked beam: the electric plus magnetic force of the counter-moving bunch integrated over the
/// passage, q0 q_other e N (1 + beta0 beta_other) / (2 pi eps0 p0c (beta0 + beta_other)).
double kick_scale(const ft_reference& ref, double q_other, double n, double beta_other) {
  return ref.q0 * q_other * n * kElementaryCharge / (2.0 * kPi * kEpsilon0 * ref.p0c) * (1.0 + ref.beta0 * beta_other) /
         (ref.beta0 + beta_other);
}

/// Field of the unit-normalised round Gaussian of rms size sigma: K = r (1 - exp(-r^2 / (2 sigma^2))) / r^2.
void round_field(double x, double y, double sigma, double& kx, double& ky) {
  const double r2 = x * x + y * y;
  const double f = -std::expm1(-r2 / (2.0 * sigma * sigma)) / r2;
  kx = x * f;
  ky = y * f;
}

/// Field of the unit-normalised Gaussian with sizes sx, sy from the integral representation (Bassetti &
/// Erskine 1980, eq. (7)):
///   Kx = x int_0^inf exp(-x^2 / A - y^2 / B) A^(-3/2) B^(-1/2) dq,  A = 2 sx^2 + q,  B = 2 sy^2 + q
/// (Ky alike with the roles swapped), mapped to s in (0, 1] by A = a / s^2 (a = 2 sx^2 for Kx, B = b / s^2
/// for Ky) so that the integrand is smooth and bounded, integrated by the composite Simpson rule in long double.
/// Nothing of the element (Faddeeva function, round formula, core series) is used.
long double field_component(long double u, long double v, long double su, long double sv, int n = 4000) {
  const long double a = 2.0L * su * su, b = 2.0L * sv * sv;
  const auto f = [&](long double s) {
    if (s == 0.0L) return 0.0L;
    const long double q = a * (1.0L / (s * s) - 1.0L);
    const long double bb = b + q;
    // dq = 2 a / s^3 ds, A^(-3/2) = s^3 / a^(3/2)
    return std::exp(-u * u * s * s / a - v * v / bb) * 2.0L / std::sqrt(a) / std::sqrt(bb);
  };
  long double sum = f(0.0L) + f(1.0L);
  for (int k = 1; k < n; ++k) sum += (k % 2 ? 4.0L : 2.0L) * f(static_cast<long double>(k) / n);
  return u * sum / (3.0L * n);
}

BeamBeamBiGaussian2D make_2d(double sigma_11, double sigma_33, const ft_reference& ref, double n = 1.5e11,
                             double beta_other = 1.0) {
  BeamBeamBiGaussian2D e = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
  e.other_beam_num_particles = n;
  e.other_beam_q0 = 1.0;
  e.other_beam_Sigma_11 = sigma_11;
  e.other_beam_Sigma_33 = sigma_33;
  e.other_beam_beta0 = beta_other;
  BeamBeamBiGaussian2D_prepare(e, ref);
  return e;
}

BeamBeamBiGaussian3D base_3d() {
  BeamBeamBiGaussian3D e = with_defaults<BeamBeamBiGaussian3D>(ft_element_descriptor_BeamBeamBiGaussian3D());
  e.other_beam_q0 = 1.0;
  return e;
}

template <class F>
std::string prepare_error(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& ex) {
    return ex.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("BeamBeamBiGaussian2D: round beam against the closed form, with offsets and the post-subtracted kick") {
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    const ft_reference ref = reference_proton(beta0);
    const double sigma = 3e-4, beta_other = 0.8;
    BeamBeamBiGaussian2D e = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
    e.other_beam_num_particles = 2e11;
    e.other_beam_q0 = -1.0;  // opposite charges attract
    e.other_beam_Sigma_11 = e.other_beam_Sigma_33 = sigma * sigma;
    e.other_beam_beta0 = beta_other;
    e.ref_shift_x = 1e-5;
    e.other_beam_shift_x = -4e-5;
    e.ref_shift_y = 2e-5;
    e.other_beam_shift_y = 3e-5;
    e.post_subtract_px = 1e-7;
    e.post_subtract_py = -2e-7;
    e.scale_strength = 0.7;
    BeamBeamBiGaussian2D_prepare(e, ref);
    const double k = 0.7 * kick_scale(ref, -1.0, 2e11, beta_other);
    double worst = 0.0;
    for (const double amp : {1e-3, 0.3, 1.0, 2.5, 6.0, 40.0}) {
      for (int dir = 0; dir < 7; ++dir) {
        const double th = 0.3 + 0.9 * dir;
        const double xb = amp * sigma * std::cos(th), yb = amp * sigma * std::sin(th);
        ft::ParticleView p = particle(xb + 1e-5 - 4e-5, 1e-5, yb + 2e-5 + 3e-5, -2e-5, 0.01, 1e-4, beta0);
        const ft::ParticleView before = p;
        BeamBeamBiGaussian2D_track(e, p);
        double kx, ky;
        round_field(xb, yb, sigma, kx, ky);
        const double dpx = p.px - before.px + 0.7e-7, dpy = p.py - before.py - 1.4e-7;
        worst = std::fmax(worst, std::fabs(dpx - k * kx) / (std::fabs(k) * std::hypot(kx, ky)));
        worst = std::fmax(worst, std::fabs(dpy - k * ky) / (std::fabs(k) * std::hypot(kx, ky)));
        CHECK(p.x == before.x);
        CHECK(p.y == before.y);
        CHECK(p.zeta == before.zeta);
        CHECK(p.delta == before.delta);
        CHECK(dpx * kx < 0.0);  // opposite charges attract: the kick points back to the partner
      }
    }
    MESSAGE(fmt::format("round beam, beta0 {}: largest relative kick error {:.2e}", beta0, worst));
    CHECK(worst < 1e-9);
  }
}

TEST_CASE("BeamBeamBiGaussian2D: flat and tall beams against a quadrature of the Bassetti-Erskine integral") {
  const ft_reference ref = reference_proton(kBetaUltraRelativistic);
  for (const auto& [sx, sy] : {std::pair<double, double>{4e-4, 1e-4}, {1.2e-4, 3e-4}, {2e-4, 1.9e-4}}) {
    const BeamBeamBiGaussian2D e = make_2d(sx * sx, sy * sy, ref);
    const double k = kick_scale(ref, 1.0, 1.5e11, 1.0);
    double worst = 0.0;
    for (const double amp : {0.01, 0.5, 1.0, 2.0, 4.0, 8.0}) {
      for (int dir = 0; dir < 5; ++dir) {
        const double th = 0.2 + 1.3 * dir;
        const double x = amp * sx * std::cos(th), y = amp * sy * std::sin(th);
        ft::ParticleView p = particle(x, 0.0, y, 0.0, 0.0, 0.0, ref.beta0);
        BeamBeamBiGaussian2D_track(e, p);
        const double kx = static_cast<double>(field_component(x, y, sx, sy));
        const double ky = static_cast<double>(field_component(y, x, sy, sx));
        const double scale = std::fabs(k) * std::hypot(kx, ky);
        worst = std::fmax(worst, std::fmax(std::fabs(p.px - k * kx), std::fabs(p.py - k * ky)) / scale);
      }
    }
    MESSAGE(fmt::format("sigma {} x {}: largest relative kick error {:.2e}", sx, sy, worst));
    CHECK(worst < 1e-9);
  }
}

TEST_CASE("BeamBeamBiGaussian2D: a coupled partner kicks as the uncoupled one in its rotated frame") {
  const ft_reference ref = reference_proton(kBetaUltraRelativistic);
  const double sa = 4e-4, sb = 1.5e-4, theta = 0.35;
  const double c = std::cos(theta), s = std::sin(theta);
  // covariance of the beam with sizes (sa, sb) along axes rotated by theta
  const double s11 = c * c * sa * sa + s * s * sb * sb, s33 = s * s * sa * sa + c * c * sb * sb;
  const double s13 = c * s * (sa * sa - sb * sb);
  BeamBeamBiGaussian2D e = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
  e.other_beam_num_particles = 1.5e11;
  e.other_beam_q0 = 1.0;
  e.other_beam_Sigma_11 = s11;
  e.other_beam_Sigma_33 = s33;
  e.other_beam_Sigma_13 = s13;
  BeamBeamBiGaussian2D_prepare(e, ref);
  const double k = kick_scale(ref, 1.0, 1.5e11, 1.0);
  for (const auto& [x, y] : {std::pair<double, double>{3e-4, 1e-4}, {-2e-4, 4e-4}, {5e-5, -6e-4}}) {
    ft::ParticleView p = particle(x, 0.0, y, 0.0, 0.0, 0.0, ref.beta0);
    BeamBeamBiGaussian2D_track(e, p);
    const double u = c * x + s * y, v = -s * x + c * y;
    const double ku = static_cast<double>(field_component(u, v, sa, sb));
    const double kv = static_cast<double>(field_component(v, u, sb, sa));
    CHECK(close(p.px, k * (c * ku - s * kv), 1e-9));
    CHECK(close(p.py, k * (s * ku + c * kv), 1e-9));
  }
}

TEST_CASE("BeamBeamBiGaussian3D: one slice and no crossing gives the transverse kick of the 2D lens") {
  const ft_reference ref = reference_proton(kBetaUltraRelativistic);
  const double s11 = 9e-8, s33 = 2.5e-8;
  const BeamBeamBiGaussian2D lens2 = make_2d(s11, s33, ref, 1.2e11, 1.0);
  BeamBeamBiGaussian3D lens3 = base_3d();
  lens3.num_slices_other_beam = 1;
  lens3.slices_other_beam_num_particles[0] = 1.2e11;
  lens3.slices_other_beam_Sigma_11_star[0] = s11;
  lens3.slices_other_beam_Sigma_33_star[0] = s33;
  BeamBeamBiGaussian3D_prepare(lens3, ref);
  for (const auto& [x, y] : {std::pair<double, double>{3e-4, 1e-4}, {-2e-5, 4e-4}, {1e-6, -2e-6}, {2e-3, 1e-3}}) {
    ft::ParticleView p2 = particle(x, 0.0, y, 0.0, 0.0, 0.0, ref.beta0);
    ft::ParticleView p3 = p2;
    BeamBeamBiGaussian2D_track(lens2, p2);
    BeamBeamBiGaussian3D_track(lens3, p3);
    CHECK(close(p3.px, p2.px, 1e-14));
    CHECK(close(p3.py, p2.py, 1e-14));
    CHECK(close(p3.x, p2.x, 1e-15));
    CHECK(close(p3.y, p2.y, 1e-15));
  }
}

TEST_CASE("BeamBeamBiGaussian3D: the 6D map with a crossing angle and coupled slices is symplectic") {
  // In the canonical coordinates (x, px, y, py, zeta, pzeta), ultra-relativistic and at beta0 = 1/2.
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    CAPTURE(beta0);
    const ft_reference ref = reference_proton(beta0);
    BeamBeamBiGaussian3D e = base_3d();
    e.phi = 5e-3;
    e.alpha = 0.4;
    e.num_slices_other_beam = 3;
    const double zeta_c[3] = {-0.04, 0.0, 0.05}, weight[3] = {0.3, 0.45, 0.25};
    for (int i = 0; i < 3; ++i) {
      e.slices_other_beam_num_particles[i] = weight[i] * 2e11;
      e.slices_other_beam_zeta_center_star[i] = zeta_c[i];
      e.slices_other_beam_x_center_star[i] = 1e-5 * (i - 1);
      e.slices_other_beam_px_center_star[i] = 2e-6 * i;
      e.slices_other_beam_y_center_star[i] = -5e-6 * i;
      e.slices_other_beam_py_center_star[i] = -1e-6;
      e.slices_other_beam_Sigma_11_star[i] = 4e-8 * (1.0 + 0.1 * i);
      e.slices_other_beam_Sigma_12_star[i] = -2e-9;
      e.slices_other_beam_Sigma_22_star[i] = 1e-8;
      e.slices_other_beam_Sigma_33_star[i] = 1e-8;
      e.slices_other_beam_Sigma_34_star[i] = 1e-9;
      e.slices_other_beam_Sigma_44_star[i] = 2e-8;
      if (i == 1) {  // a coupled slice
        e.slices_other_beam_Sigma_13_star[i] = 5e-9;
        e.slices_other_beam_Sigma_14_star[i] = 1e-10;
        e.slices_other_beam_Sigma_23_star[i] = -2e-10;
        e.slices_other_beam_Sigma_24_star[i] = 3e-10;
      }
    }
    e.ref_shift_x = 2e-5;
    e.ref_shift_px = 1e-6;
    e.ref_shift_zeta = 1e-4;
    e.ref_shift_pzeta = 3e-5;
    e.other_beam_shift_y = -1e-5;
    e.post_subtract_px = 1e-8;
    e.post_subtract_pzeta = -1e-9;
    BeamBeamBiGaussian3D_prepare(e, ref);
    const Vec6 points[] = {{1.5e-4, 2e-5, -8e-5, 1e-5, 0.02, 3e-4},
                           {-2e-4, -1e-5, 1.2e-4, -3e-5, -0.03, -5e-4},
                           {3e-5, 0.0, 2e-5, 0.0, 0.0, 0.0},
                           {6e-4, 4e-5, -4e-4, 2e-5, 0.06, 1e-3}};
    for (const Vec6& z : points) {
      CAPTURE(z[0]);
      const Mat6 m = jacobian(e, BeamBeamBiGaussian3D_track, z, ref.beta0, 1e-6);
      // The lens acts: a kick (px gradient) and a change of energy with x (the longitudinal field).
      CHECK(std::fabs(m[1][0]) > 1e-4);
      CHECK(std::fabs(m[5][0]) > 1e-9);
      const double err = symplecticity_error(m);
      MESSAGE(fmt::format("beta0 {}: max |J^T S J - S| = {:.2e}", beta0, err));
      CHECK(err < kSymplecticTolerance);
    }
  }
}

TEST_CASE("BeamBeamBiGaussian3D: one slice at the collision point changes pzeta by Hirata's energy kick") {
  // No crossing, no hourglass, the particle at the slice centre (S = 0): after the transverse kick
  // (dpx, dpy) of the slice, pzeta += (1/2) [dpx (px + dpx / 2) + dpy (py + dpy / 2)] (Hirata, Moshammer,
  // Ruggiero 1993, eq. (13) with S = 0; xfields' dpzeta), pzeta = ptau / beta0, at beta0 = 1/2 too.
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    CAPTURE(beta0);
    const ft_reference ref = reference_proton(beta0);
    BeamBeamBiGaussian3D lens = base_3d();
    lens.num_slices_other_beam = 1;
    lens.slices_other_beam_num_particles[0] = 1e11;
    lens.slices_other_beam_Sigma_11_star[0] = 4e-8;
    lens.slices_other_beam_Sigma_33_star[0] = 1e-8;
    BeamBeamBiGaussian3D_prepare(lens, ref);
    for (const auto& [x, px] : {std::pair<double, double>{2e-4, 3e-5}, {-1e-4, -2e-5}, {5e-4, 1e-4}}) {
      const ft::ParticleView p0 = particle(x, px, -0.5 * x, 0.5 * px, 0.0, 1e-4, beta0);
      ft::ParticleView p = p0;
      BeamBeamBiGaussian3D_track(lens, p);
      const double dpx = p.px - p0.px, dpy = p.py - p0.py;
      const double expected = 0.5 * (dpx * (p0.px + 0.5 * dpx) + dpy * (p0.py + 0.5 * dpy));
      CHECK(std::fabs(dpx) > 1e-7);
      CHECK(close(p.ptau / beta0 - p0.ptau / beta0, expected, 1e-6, 1e-18));
      CHECK(close(p.delta, delta_from_ptau(p.ptau, beta0), 1e-15, 1e-19));
      CHECK(p.zeta == p0.zeta);
    }
  }
}

TEST_CASE("BeamBeamBiGaussian3D: consecutive lenses of the slices equal one lens of them all") {
  // Slices 0..2 in one lens (no post_subtract), 3..4 in the next: the boost, the shifts and their inverses
  // cancel between the two, so the pair is the five-slice lens (to rounding).
  const double beta0 = kBetaHalf;
  const ft_reference ref = reference_proton(beta0);
  BeamBeamBiGaussian3D all = base_3d(), head = base_3d(), tail = base_3d();
  for (BeamBeamBiGaussian3D* e : {&all, &head, &tail}) {
    e->phi = 0.01;
    e->alpha = 0.4;
    e->ref_shift_x = 2e-4;
    e->other_beam_shift_y = -1e-4;
    e->ref_shift_pzeta = 1e-4;
  }
  all.num_slices_other_beam = 5;
  head.num_slices_other_beam = 3;
  tail.num_slices_other_beam = 2;
  for (int i = 0; i < 5; ++i) {
    BeamBeamBiGaussian3D& part = i < 3 ? head : tail;
    const int j = i < 3 ? i : i - 3;
    for (BeamBeamBiGaussian3D* e : {&all, &part}) {
      const int k = e == &all ? i : j;
      e->slices_other_beam_num_particles[k] = 2e10 * (1 + i);
      e->slices_other_beam_zeta_center_star[k] = 0.04 - 0.02 * i;
      e->slices_other_beam_x_center_star[k] = 1e-5 * i;
      e->slices_other_beam_Sigma_11_star[k] = 1e-6 * (1.0 + 0.1 * i);
      e->slices_other_beam_Sigma_12_star[k] = 1e-6;
      e->slices_other_beam_Sigma_22_star[k] = 1e-4;
      e->slices_other_beam_Sigma_33_star[k] = 0.5e-6;
      e->slices_other_beam_Sigma_44_star[k] = 1e-4;
    }
  }
  all.post_subtract_px = tail.post_subtract_px = 3e-7;
  all.post_subtract_pzeta = tail.post_subtract_pzeta = 1e-9;
  BeamBeamBiGaussian3D_prepare(all, ref);
  BeamBeamBiGaussian3D_prepare(head, ref);
  BeamBeamBiGaussian3D_prepare(tail, ref);
  for (const Case& c : cases()) {
    if (c.beta0 != beta0) continue;
    const ft::ParticleView p0 = particle(c.x * 0.5, c.px, c.y * 0.5, c.py, c.zeta, c.delta, beta0);
    ft::ParticleView one = p0, two = p0;
    BeamBeamBiGaussian3D_track(all, one);
    BeamBeamBiGaussian3D_track(head, two);
    BeamBeamBiGaussian3D_track(tail, two);
    const Vec6 a = canonical(one), b = canonical(two), z0 = canonical(p0);
    for (int k = 0; k < 6; ++k) {
      CAPTURE(k);
      CHECK(a[k] != z0[k]);
      CHECK(close(a[k], b[k], 1e-12, 1e-17));
    }
  }
}

TEST_CASE("BeamBeamBiGaussian2D and 3D: bad input names the field") {
  const ft_reference ref = reference_proton(kBetaUltraRelativistic);
  const auto error_2d = [&](auto change) {
    BeamBeamBiGaussian2D e = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
    e.other_beam_num_particles = 1e11;
    e.other_beam_q0 = 1.0;
    e.other_beam_Sigma_11 = e.other_beam_Sigma_33 = 1e-8;
    change(e);
    return prepare_error([&] { BeamBeamBiGaussian2D_prepare(e, ref); });
  };
  CHECK(error_2d([](BeamBeamBiGaussian2D&) {}) == "(no error)");
  CHECK(error_2d([](BeamBeamBiGaussian2D& e) { e.other_beam_Sigma_11 = 0.0; }).find("other_beam_Sigma_11 = 0") !=
        std::string::npos);
  CHECK(error_2d([](BeamBeamBiGaussian2D& e) { e.other_beam_Sigma_33 = -1e-8; }).find("other_beam_Sigma_33") !=
        std::string::npos);
  CHECK(error_2d([](BeamBeamBiGaussian2D& e) { e.other_beam_Sigma_13 = 2e-8; }).find("other_beam_Sigma_13") !=
        std::string::npos);
  CHECK(error_2d([](BeamBeamBiGaussian2D& e) { e.ref_shift_y = std::nan(""); }).find("ref_shift_y = nan") !=
        std::string::npos);
  CHECK(error_2d([](BeamBeamBiGaussian2D& e) { e.other_beam_beta0 = 0.0; }).find("other_beam_beta0") !=
        std::string::npos);

  const auto error_3d = [&](auto change) {
    BeamBeamBiGaussian3D e = base_3d();
    e.num_slices_other_beam = 2;
    for (int i = 0; i < 2; ++i) {
      e.slices_other_beam_num_particles[i] = 1e11;
      e.slices_other_beam_Sigma_11_star[i] = e.slices_other_beam_Sigma_33_star[i] = 1e-8;
    }
    change(e);
    return prepare_error([&] { BeamBeamBiGaussian3D_prepare(e, ref); });
  };
  CHECK(error_3d([](BeamBeamBiGaussian3D&) {}) == "(no error)");
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) {
          e.slices_other_beam_Sigma_33_star[1] = 0.0;
        }).find("slices_other_beam_Sigma_33_star[1] = 0") != std::string::npos);
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) {
          e.slices_other_beam_Sigma_11_star[0] = -1e-8;
        }).find("slices_other_beam_Sigma_11_star[0]") != std::string::npos);
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) {
          e.slices_other_beam_x_center_star[1] = std::nan("");
        }).find("slices_other_beam_x_center_star[1] = nan") != std::string::npos);
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) {
          e.slices_other_beam_num_particles[2] = 1e11;
        }).find("slices_other_beam_num_particles[2]") != std::string::npos);
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) { e.num_slices_other_beam = 0; }).find("num_slices_other_beam = 0") !=
        std::string::npos);
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) { e.phi = 2.0; }).find("phi") != std::string::npos);
  CHECK(error_3d([](BeamBeamBiGaussian3D& e) { e.post_subtract_pzeta = INFINITY; }).find("post_subtract_pzeta") !=
        std::string::npos);
}

}  // namespace test_beambeam_bigaussian
