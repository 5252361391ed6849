// The weak-strong beam-beam lenses BeamBeamBiGaussian2D and BeamBeamBiGaussian3D
// (elements/beambeam_bigaussian_2d.h, elements/beambeam_bigaussian_3d.h): the 2D kick against the round
// beam's closed form and, for flat and coupled beams, against a quadrature of the field's integral
// representation written here; the 3D lens with one slice and no crossing angle against the 2D lens and the
// synchro-beam drift to the collision point; the symplecticity of the 3D lens with a crossing angle,
// hourglass and coupling; bad input naming the element and the field.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "beambeam_bigaussian_2d.h"
#include "beambeam_bigaussian_3d.h"
#include "support/element_testing.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_beambeam_lenses.
namespace test_beambeam_lenses {

using namespace ft_test;

namespace {

constexpr double kElementaryCharge = 1.602176634e-19;  // C
constexpr double kEpsilon0 = 8.8541878128e-12;         // F/m
constexpr double kPi = 3.14159265358979323846;

/// The kick per partner particle, q0 q_s e (1 + beta0 beta_s) / (2 pi eps0 p0c (beta0 + beta_s)) [m], of a
/// relativistic partner moving against the beam (electric and magnetic forces of the passage).
double kick_per_particle(double q0, double q_s, double p0c, double beta0, double beta_s) {
  return q0 * q_s * kElementaryCharge / (2.0 * kPi * kEpsilon0 * p0c) * (1.0 + beta0 * beta_s) / (beta0 + beta_s);
}

/// K = (Kx, Ky) of the unit-normalised Gaussian with variances (sx2, sy2), by quadrature of
///   Kx = x int_0^inf exp(-x^2 / A - y^2 / B) A^(-3/2) B^(-1/2) dq,  A = 2 sx2 + q,  B = 2 sy2 + q
/// (Ky: the exponents of A and B swapped, times y), with q = c v / (1 - v), c = 2 max(sx2, sy2), and
/// composite Simpson in v on [0, 1] (the integrand is smooth and finite at v = 1), in long double.
void quadrature_field(double x, double y, double sx2, double sy2, double& kx, double& ky) {
  const long double c = 2.0L * std::fmax(sx2, sy2);
  const int n = 200000;  // even
  long double sum_x = 0.0L, sum_y = 0.0L;
  for (int k = 0; k <= n; ++k) {
    const long double v = static_cast<long double>(k) / n;
    long double fx = 0.0L, fy = 0.0L;
    if (k < n) {
      const long double q = c * v / (1.0L - v);
      const long double dq_dv = c / ((1.0L - v) * (1.0L - v));
      const long double a = 2.0L * sx2 + q, b = 2.0L * sy2 + q;
      const long double g = std::exp(-(long double)x * x / a - (long double)y * y / b) / std::sqrt(a * b) * dq_dv;
      fx = g / a;
      fy = g / b;
    } else {  // v -> 1: g / a -> 1 / c (q -> infinity)
      fx = fy = 1.0L / c;
    }
    const long double w = (k == 0 || k == n) ? 1.0L : (k % 2 ? 4.0L : 2.0L);
    sum_x += w * fx;
    sum_y += w * fy;
  }
  kx = static_cast<double>(x * sum_x / (3.0L * n));
  ky = static_cast<double>(y * sum_y / (3.0L * n));
}

BeamBeamBiGaussian2D make_2d(double sx2, double sy2, double n_particles, double beta0, double sxy = 0.0) {
  BeamBeamBiGaussian2D e = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
  e.other_beam_q0 = 1.0;
  e.other_beam_num_particles = n_particles;
  e.other_beam_Sigma_11 = sx2;
  e.other_beam_Sigma_33 = sy2;
  e.other_beam_Sigma_13 = sxy;
  BeamBeamBiGaussian2D_prepare(e, reference_proton(beta0));
  return e;
}

BeamBeamBiGaussian3D with_defaults_3d() {
  return with_defaults<BeamBeamBiGaussian3D>(ft_element_descriptor_BeamBeamBiGaussian3D());
}

const auto track_2d = [](const BeamBeamBiGaussian2D& e, ft::ParticleView& p) { BeamBeamBiGaussian2D_track(e, p); };
const auto track_3d = [](const BeamBeamBiGaussian3D& e, ft::ParticleView& p) { BeamBeamBiGaussian3D_track(e, p); };

}  // namespace

TEST_CASE("BeamBeamBiGaussian2D: round beam against (1 - exp(-r^2 / 2 sigma^2)) / r, with shifts, scale and dipole") {
  const double beta0 = kBetaUltraRelativistic, sigma = 1e-3, n = 1e11;
  BeamBeamBiGaussian2D e = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
  e.other_beam_q0 = 1.0;
  e.other_beam_num_particles = n;
  e.other_beam_Sigma_11 = e.other_beam_Sigma_33 = sigma * sigma;
  e.other_beam_beta0 = 0.8;
  e.scale_strength = 0.5;
  e.ref_shift_x = 1e-4;
  e.other_beam_shift_x = 2e-4;
  e.ref_shift_y = -3e-4;
  e.other_beam_shift_y = 5e-5;
  e.post_subtract_px = 2e-10;
  e.post_subtract_py = -1e-10;
  const ft_reference ref = reference_proton(beta0);
  BeamBeamBiGaussian2D_prepare(e, ref);
  const double strength = kick_per_particle(1.0, 0.5, ref.p0c, beta0, 0.8) * n;
  const double xc = 3e-4, yc = -2.5e-4;
  int checked = 0;
  for (const double r_over_sigma : {0.01, 0.3, 1.0, 2.5, 8.0})
    for (int k = 0; k < 7; ++k) {
      const double th = 0.4 + k * 2.0 * kPi / 7.0;
      const double dx = r_over_sigma * sigma * std::cos(th), dy = r_over_sigma * sigma * std::sin(th);
      const double r2 = dx * dx + dy * dy;
      const double radial = -std::expm1(-r2 / (2.0 * sigma * sigma)) / r2;  // (1 - exp(-r^2 / 2 s^2)) / r^2
      const ft::ParticleView p0 = particle(xc + dx, 0.0, yc + dy, 0.0, 0.01, 1e-3, beta0);
      const ft::ParticleView p = tracked(e, track_2d, p0);
      CAPTURE(r_over_sigma);
      CAPTURE(k);
      CHECK(close(p.px, strength * dx * radial - 0.5 * 2e-10, 1e-12, 1e-30));
      CHECK(close(p.py, strength * dy * radial + 0.5 * 1e-10, 1e-12, 1e-30));
      CHECK(p.x == p0.x);
      CHECK(p.y == p0.y);
      CHECK(p.zeta == p0.zeta);
      CHECK(p.delta == p0.delta);
      ++checked;
    }
  CHECK(checked == 35);
  // Same-sign charges repel: a particle right of the partner is kicked further right.
  const ft::ParticleView p = tracked(e, track_2d, particle(xc + sigma, 0.0, yc, 0.0, 0.0, 0.0, beta0));
  CHECK(p.px + 0.5 * 2e-10 > 0.0);
}

TEST_CASE("BeamBeamBiGaussian2D: flat, tall and coupled beams against a quadrature of the field") {
  const double beta0 = kBetaHalf, n = 3e10;
  const ft_reference ref = reference_proton(beta0);
  const double strength = kick_per_particle(1.0, 1.0, ref.p0c, beta0, 1.0) * n;
  struct Beam {
    double sx2, sy2;
  };
  double worst = 0.0;
  for (const Beam b : {Beam{4e-6, 1e-6}, Beam{1e-6, 9e-6}, Beam{2.5e-7, 2.5e-5}}) {
    const BeamBeamBiGaussian2D e = make_2d(b.sx2, b.sy2, n, beta0);
    const double s = std::sqrt(std::fmax(b.sx2, b.sy2));
    for (const double amp : {0.05, 0.7, 1.6, 4.0})
      for (int k = 0; k < 5; ++k) {
        const double th = 0.3 + k * 1.1;
        const double x = amp * s * std::cos(th), y = amp * s * std::sin(th);
        double kx, ky;
        quadrature_field(x, y, b.sx2, b.sy2, kx, ky);
        const ft::ParticleView p = tracked(e, track_2d, particle(x, 0.0, y, 0.0, 0.0, 0.0, beta0));
        const double scale = strength * std::hypot(kx, ky);
        worst = std::fmax(worst, std::fabs(p.px - strength * kx) / scale);
        worst = std::fmax(worst, std::fabs(p.py - strength * ky) / scale);
      }
  }
  MESSAGE(fmt::format("largest |dp - quadrature| / |dp|: {:.3g}", worst));
  CHECK(worst < 1e-9);
  // Coupled: the Gaussian of covariance [[sx2, sxy], [sxy, sy2]] is the uncoupled one of its principal
  // variances l1, l2 rotated by theta, tan(2 theta) = 2 sxy / (sx2 - sy2); its field is the rotated field.
  const double sx2 = 4e-6, sy2 = 1e-6, sxy = 1e-6;
  const BeamBeamBiGaussian2D e = make_2d(sx2, sy2, n, beta0, sxy);
  const double theta = 0.5 * std::atan2(2.0 * sxy, sx2 - sy2);
  const double c = std::cos(theta), si = std::sin(theta);
  const double l1 = c * c * sx2 + 2.0 * c * si * sxy + si * si * sy2;
  const double l2 = si * si * sx2 - 2.0 * c * si * sxy + c * c * sy2;
  double worst_coupled = 0.0;
  for (int k = 0; k < 6; ++k) {
    const double x = 2e-3 * std::cos(0.2 + k), y = 1.5e-3 * std::sin(0.2 + k);
    double ku, kv;
    quadrature_field(c * x + si * y, -si * x + c * y, l1, l2, ku, kv);
    const double kx = c * ku - si * kv, ky = si * ku + c * kv;
    const ft::ParticleView p = tracked(e, track_2d, particle(x, 0.0, y, 0.0, 0.0, 0.0, beta0));
    const double scale = strength * std::hypot(kx, ky);
    worst_coupled =
        std::fmax(worst_coupled, std::fmax(std::fabs(p.px - strength * kx), std::fabs(p.py - strength * ky)) / scale);
  }
  MESSAGE(fmt::format("coupled: largest |dp - quadrature| / |dp|: {:.3g}", worst_coupled));
  CHECK(worst_coupled < 1e-9);
}

TEST_CASE("BeamBeamBiGaussian3D: one slice, no crossing angle, equals the 2D lens plus Hirata's energy change") {
  const double beta0 = kBetaUltraRelativistic, n = 1e11, sx2 = 2e-6, sy2 = 0.5e-6;
  const ft_reference ref = reference_proton(beta0);
  BeamBeamBiGaussian2D e2 = with_defaults<BeamBeamBiGaussian2D>(ft_element_descriptor_BeamBeamBiGaussian2D());
  e2.other_beam_q0 = 1.0;
  e2.other_beam_num_particles = n;
  e2.other_beam_Sigma_11 = sx2;
  e2.other_beam_Sigma_33 = sy2;
  e2.other_beam_shift_x = 2e-4;
  e2.other_beam_shift_y = -1e-4;
  BeamBeamBiGaussian2D_prepare(e2, ref);
  BeamBeamBiGaussian3D e3 = with_defaults_3d();
  e3.other_beam_q0 = 1.0;
  e3.num_slices_other_beam = 1;
  e3.slices_other_beam_num_particles[0] = n;
  e3.slices_other_beam_Sigma_11_star[0] = sx2;
  e3.slices_other_beam_Sigma_33_star[0] = sy2;
  e3.other_beam_shift_x = 2e-4;
  e3.other_beam_shift_y = -1e-4;
  BeamBeamBiGaussian3D_prepare(e3, ref);
  // The 2D lens's partner moves at beta_s = 1 here, as the 3D lens's always does.
  for (const Case& c : cases()) {
    if (c.beta0 != beta0) continue;
    // At zeta = 0 the collision point is the slice centre (S = 0): the same transverse kick.
    const ft::ParticleView p0 = particle(c.x, c.px, c.y, c.py, 0.0, c.delta, beta0);
    const ft::ParticleView p2 = tracked(e2, track_2d, p0);
    const ft::ParticleView p3 = tracked(e3, track_3d, p0);
    CHECK(close(p3.x, p2.x, 1e-15, 1e-19));  // (x - shift) + shift
    CHECK(close(p3.y, p2.y, 1e-15, 1e-19));
    CHECK(close(p3.px, p2.px, 1e-15, 1e-20));
    CHECK(close(p3.py, p2.py, 1e-15, 1e-20));
    CHECK(p3.zeta == p0.zeta);
    // pzeta += (1/2) [dpx (px + dpx / 2) + dpy (py + dpy / 2)] (Hirata et al. 1993, eq. (13) with S = 0).
    const double dpx = p2.px - p0.px, dpy = p2.py - p0.py;
    const double dpzeta = 0.5 * (dpx * (p0.px + 0.5 * dpx) + dpy * (p0.py + 0.5 * dpy));
    CHECK(close(p3.ptau / beta0 - p0.ptau / beta0, dpzeta, 1e-6, 5e-19));
    // Away from the slice centre, with no hourglass (Sigma_12 = Sigma_22 = 0): drift to S = zeta / 2, the
    // kick there, drift back with the new momenta.
    const double zeta = 0.06, S = 0.5 * zeta;
    const ft::ParticleView q0 = particle(c.x, c.px, c.y, c.py, zeta, c.delta, beta0);
    const ft::ParticleView at_s = particle(c.x + c.px * S, c.px, c.y + c.py * S, c.py, 0.0, c.delta, beta0);
    const ft::ParticleView kicked = tracked(e2, track_2d, at_s);
    const ft::ParticleView q3 = tracked(e3, track_3d, q0);
    CHECK(close(q3.px, kicked.px, 1e-14, 1e-20));
    CHECK(close(q3.py, kicked.py, 1e-14, 1e-20));
    CHECK(close(q3.x, at_s.x - kicked.px * S, 1e-13, 1e-20));
    CHECK(close(q3.y, at_s.y - kicked.py * S, 1e-13, 1e-20));
  }
}

TEST_CASE("BeamBeamBiGaussian3D: symplectic with crossing angle, hourglass, coupling and three slices") {
  for (const double beta0 : {kBetaUltraRelativistic, kBetaHalf}) {
    BeamBeamBiGaussian3D e = with_defaults_3d();
    e.other_beam_q0 = 1.0;
    e.phi = 0.02;
    e.alpha = 0.7;
    e.num_slices_other_beam = 3;
    const double zeta_c[3] = {0.05, 0.0, -0.05};
    for (int i = 0; i < 3; ++i) {
      e.slices_other_beam_num_particles[i] = 4e11 + 1e11 * i;
      e.slices_other_beam_zeta_center_star[i] = zeta_c[i];
      e.slices_other_beam_x_center_star[i] = 1e-4 * i;
      e.slices_other_beam_px_center_star[i] = -2e-5;
      e.slices_other_beam_y_center_star[i] = -5e-5;
      e.slices_other_beam_Sigma_11_star[i] = 1.0e-6;
      e.slices_other_beam_Sigma_12_star[i] = 2.0e-6;
      e.slices_other_beam_Sigma_22_star[i] = 1.0e-4;
      e.slices_other_beam_Sigma_33_star[i] = 0.6e-6;
      e.slices_other_beam_Sigma_34_star[i] = -1.0e-6;
      e.slices_other_beam_Sigma_44_star[i] = 0.8e-4;
      e.slices_other_beam_Sigma_13_star[i] = 0.1e-6;
      e.slices_other_beam_Sigma_14_star[i] = 0.2e-6;
      e.slices_other_beam_Sigma_23_star[i] = -0.1e-6;
      e.slices_other_beam_Sigma_24_star[i] = 0.5e-5;
    }
    e.ref_shift_x = 1e-4;
    e.ref_shift_px = 2e-4;
    e.ref_shift_zeta = 1e-3;
    e.ref_shift_pzeta = 1e-4;
    e.post_subtract_px = 1e-6;
    BeamBeamBiGaussian3D_prepare(e, reference_proton(beta0));
    for (const Case& c : cases()) {
      if (c.beta0 != beta0) continue;
      const Vec6 z0 = {c.x * 0.5, c.px, c.y * 0.5, c.py, c.zeta, canonical(c)[5]};
      const ft::ParticleView before = from_canonical(z0, beta0);
      const ft::ParticleView after = tracked(e, track_3d, before);
      CHECK(std::fabs(after.px - before.px) > 1e-7);  // a real kick
      const double err = symplecticity_error(jacobian(e, track_3d, z0, beta0, 1e-6));
      CAPTURE(beta0);
      CAPTURE(c.zeta);
      CHECK(err < kSymplecticTolerance);
    }
  }
}

TEST_CASE("BeamBeamBiGaussian3D: consecutive lenses of the slices equal one lens of them all") {
  // Slices 0..2 in one lens (no post_subtract), 3..4 in the next: boost, shifts and their inverses
  // cancel between the two, so the pair is the five-slice lens.
  const double beta0 = kBetaHalf;
  BeamBeamBiGaussian3D all = with_defaults_3d();
  all.other_beam_q0 = 1.0;
  all.phi = 0.01;
  all.alpha = 0.4;
  all.num_slices_other_beam = 5;
  for (int i = 0; i < 5; ++i) {
    all.slices_other_beam_num_particles[i] = 2e10 * (1 + i);
    all.slices_other_beam_zeta_center_star[i] = 0.04 - 0.02 * i;
    all.slices_other_beam_x_center_star[i] = 1e-5 * i;
    all.slices_other_beam_Sigma_11_star[i] = 1e-6 * (1.0 + 0.1 * i);
    all.slices_other_beam_Sigma_12_star[i] = 1e-6;
    all.slices_other_beam_Sigma_22_star[i] = 1e-4;
    all.slices_other_beam_Sigma_33_star[i] = 0.5e-6;
    all.slices_other_beam_Sigma_44_star[i] = 1e-4;
  }
  all.ref_shift_x = 2e-4;
  all.other_beam_shift_y = -1e-4;
  all.ref_shift_pzeta = 1e-4;
  all.post_subtract_px = 3e-7;
  all.post_subtract_pzeta = 1e-9;
  BeamBeamBiGaussian3D head = all, tail = all;
  head.num_slices_other_beam = 3;
  tail.num_slices_other_beam = 2;
  double* head_arrays[] = {head.slices_other_beam_num_particles, head.slices_other_beam_zeta_center_star,
                           head.slices_other_beam_x_center_star, head.slices_other_beam_Sigma_11_star,
                           head.slices_other_beam_Sigma_12_star, head.slices_other_beam_Sigma_22_star,
                           head.slices_other_beam_Sigma_33_star, head.slices_other_beam_Sigma_44_star};
  double* tail_arrays[] = {tail.slices_other_beam_num_particles, tail.slices_other_beam_zeta_center_star,
                           tail.slices_other_beam_x_center_star, tail.slices_other_beam_Sigma_11_star,
                           tail.slices_other_beam_Sigma_12_star, tail.slices_other_beam_Sigma_22_star,
                           tail.slices_other_beam_Sigma_33_star, tail.slices_other_beam_Sigma_44_star};
  for (int a = 0; a < 8; ++a) {
    for (int i = 0; i < 2; ++i) tail_arrays[a][i] = tail_arrays[a][i + 3];
    for (int i = 3; i < FT_BEAMBEAM_3D_MAX_SLICES; ++i) head_arrays[a][i] = 0.0;
    for (int i = 2; i < FT_BEAMBEAM_3D_MAX_SLICES; ++i) tail_arrays[a][i] = 0.0;
  }
  head.post_subtract_px = head.post_subtract_pzeta = 0.0;
  const ft_reference ref = reference_proton(beta0);
  BeamBeamBiGaussian3D_prepare(all, ref);
  BeamBeamBiGaussian3D_prepare(head, ref);
  BeamBeamBiGaussian3D_prepare(tail, ref);
  for (const Case& c : cases()) {
    if (c.beta0 != beta0) continue;
    const ft::ParticleView p0 = particle(c.x * 0.5, c.px, c.y * 0.5, c.py, c.zeta, c.delta, beta0);
    const ft::ParticleView one = tracked(all, track_3d, p0);
    const ft::ParticleView two = tracked(tail, track_3d, tracked(head, track_3d, p0));
    const Vec6 a = canonical(one), b = canonical(two), z0 = canonical(p0);
    for (int k = 0; k < 6; ++k) {
      CAPTURE(k);
      CHECK(std::fabs(a[k] - z0[k]) > 0.0);
      CHECK(close(a[k], b[k], 1e-12, 1e-17));
    }
  }
}

TEST_CASE("BeamBeamBiGaussian2D and 3D: bad input names the element and the field") {
  const auto message = [](const std::string& type, const nlohmann::ordered_json& fields) {
    return ft::test::error_message([&] { ft::test::single_element_lattice(type, fields); });
  };
  const nlohmann::ordered_json lens2d = {{"other_beam_q0", 1.0},
                                         {"other_beam_num_particles", 1e11},
                                         {"other_beam_Sigma_11", 1e-6},
                                         {"other_beam_Sigma_33", 1e-6}};
  CHECK_NOTHROW(ft::test::single_element_lattice("BeamBeamBiGaussian2D", lens2d));
  for (const auto& [field, value] : std::vector<std::pair<std::string, double>>{{"other_beam_Sigma_11", 0.0},
                                                                                {"other_beam_Sigma_33", -1e-6},
                                                                                {"other_beam_num_particles", -1.0},
                                                                                {"other_beam_Sigma_13", 2e-6},
                                                                                {"other_beam_beta0", 0.0}}) {
    nlohmann::ordered_json f = lens2d;
    f[field] = value;
    const std::string msg = message("BeamBeamBiGaussian2D", f);
    CAPTURE(msg);
    CHECK(msg.find("BeamBeamBiGaussian2D") != std::string::npos);
    CHECK(msg.find(field) != std::string::npos);
  }
  const nlohmann::ordered_json lens3d = {{"other_beam_q0", 1.0},
                                         {"num_slices_other_beam", 2},
                                         {"phi", 1e-4},
                                         {"slices_other_beam_num_particles", {1e11, 1e11}},
                                         {"slices_other_beam_zeta_center_star", {0.01, -0.01}},
                                         {"slices_other_beam_Sigma_11_star", {1e-6, 1e-6}},
                                         {"slices_other_beam_Sigma_33_star", {1e-6, 1e-6}}};
  CHECK_NOTHROW(ft::test::single_element_lattice("BeamBeamBiGaussian3D", lens3d));
  struct Bad {
    std::string field;
    nlohmann::ordered_json value;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{{"num_slices_other_beam", 1, "beyond num_slices_other_beam"},
                                       {"num_slices_other_beam", 9, "outside [1, 8]"},
                                       {"num_slices_other_beam", 0, "outside [1, 8]"},
                                       {"slices_other_beam_Sigma_11_star", {1e-6, 0.0}, "must be > 0"},
                                       {"slices_other_beam_Sigma_22_star", {-1e-6, 0.0}, "must be >= 0"},
                                       {"slices_other_beam_num_particles", {1e11, -1.0}, "must be >= 0"},
                                       {"slices_other_beam_Sigma_13_star", {0.0, 1e-6}, "positive definite"},
                                       {"phi", 2.0, "|phi| < 1.5"}}) {
    nlohmann::ordered_json f = lens3d;
    f[b.field] = b.value;
    const std::string msg = message("BeamBeamBiGaussian3D", f);
    CAPTURE(msg);
    CHECK(msg.find("BeamBeamBiGaussian3D") != std::string::npos);
    CHECK(msg.find(b.field == "num_slices_other_beam" && b.value == 1 ? "slices_other_beam_num_particles[1]"
                                                                      : b.field) != std::string::npos);
    CHECK(msg.find(b.says) != std::string::npos);
  }
  // More array entries than the element holds: the loader names the field.
  nlohmann::ordered_json f = lens3d;
  f["slices_other_beam_zeta_center_star"] = std::vector<double>(9, 0.0);
  const std::string msg = message("BeamBeamBiGaussian3D", f);
  CAPTURE(msg);
  CHECK(msg.find("slices_other_beam_zeta_center_star") != std::string::npos);
}

}  // namespace test_beambeam_lenses
