// The 6D beam-beam core (fusetrack/device/beambeam6d.h) and the luminosity of a crossing
// (fusetrack/beambeam.h). Expected values come from elsewhere:
//  - the weak-strong BeamBeam4D plugin (its own tests check it against numerical integration) for
//    the one-slice, head-on, frozen-partner kick;
//  - the linear beam-beam parameter xi = N r0 beta* / (2 pi gamma sigma_x (sigma_x + sigma_y)) (e.g.
//    Chao & Tigner, Handbook of Accelerator Physics, sec. 2.5.1; round: N r0 beta* / (4 pi gamma sigma^2)),
//    with r0 from e, eps0, m c^2;
//  - symplecticity J^T S J = S of a numerical Jacobian (central differences);
//  - the Gaussian overlap L = N1 N2 / (4 pi sx sy), the hourglass factor
//      R = int exp(-s^2 / sz^2) / (sqrt(pi) sz sqrt((1 + s^2/bx^2)(1 + s^2/by^2))) ds
//    (Furman, "Hourglass effects for asymmetric colliders", PAC 1991) integrated here by Simpson's rule,
//    and Piwinski's factor 1 / sqrt(1 + (sz tan(phi) / sx)^2).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "../../plugins/beambeam4d/beam_beam_4d.h"
#include "fusetrack/beambeam.h"
#include "fusetrack/codegen.h"
#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/nvrtc_compiler.h"
#include "support/element_testing.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_beambeam6d.
namespace test_beambeam6d {

using namespace ft;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kElementaryCharge = 1.602176634e-19;  // C (exact)
constexpr double kEpsilon0 = 8.8541878128e-12;         // F/m (CODATA 2018)
constexpr double kProtonMass = 938.27208816e6;         // eV (CODATA 2018)

using Vec6 = std::array<double, 6>;

struct Reference {
  double p0c, gamma0, beta0;
};
Reference proton(double p0c) {
  const double e0 = std::sqrt(p0c * p0c + kProtonMass * kProtonMass);
  return {p0c, e0 / kProtonMass, p0c / e0};
}

Bb6dParams params(double phi, double alpha, int longitudinal, const Reference& ref, double q_partner = 1.0) {
  Bb6dParams p{};
  p.phi = phi;
  p.alpha = alpha;
  p.longitudinal = longitudinal;
  bb6d_prepare_params(p, 1.0, ref.p0c, ref.beta0, q_partner, 1.0);
  return p;
}

Bb6dSlice slice(double n, double sx2, double sy2, double zeta = 0.0) {
  Bb6dSlice s{};
  s.n_particles = n;
  s.sigma_11 = sx2;
  s.sigma_33 = sy2;
  s.zeta = zeta;
  return s;
}

/// The slice rotated about s by theta (c = cos, s = sin): centroid and every moment of (x, px, y, py),
/// (x, y) -> (c x - s y, s x + c y) and (px, py) alike.
Bb6dSlice rotated(const Bb6dSlice& v, double c, double s) {
  Bb6dSlice r = v;
  r.x = c * v.x - s * v.y, r.y = s * v.x + c * v.y;
  r.px = c * v.px - s * v.py, r.py = s * v.px + c * v.py;
  // covariance of (x, px, y, py) under M = [[c,0,-s,0],[0,c,0,-s],[s,0,c,0],[0,s,0,c]]: R = M V M^T
  const double V[4][4] = {{v.sigma_11, v.sigma_12, v.sigma_13, v.sigma_14},
                          {v.sigma_12, v.sigma_22, v.sigma_23, v.sigma_24},
                          {v.sigma_13, v.sigma_23, v.sigma_33, v.sigma_34},
                          {v.sigma_14, v.sigma_24, v.sigma_34, v.sigma_44}};
  const double M[4][4] = {{c, 0, -s, 0}, {0, c, 0, -s}, {s, 0, c, 0}, {0, s, 0, c}};
  double R[4][4] = {};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 4; ++l) R[i][j] += M[i][k] * V[k][l] * M[j][l];
  r.sigma_11 = R[0][0], r.sigma_12 = R[0][1], r.sigma_13 = R[0][2], r.sigma_14 = R[0][3];
  r.sigma_22 = R[1][1], r.sigma_23 = R[1][2], r.sigma_24 = R[1][3];
  r.sigma_33 = R[2][2], r.sigma_34 = R[2][3], r.sigma_44 = R[3][3];
  return r;
}

Vec6 track(const Bb6dParams& p, const std::vector<Bb6dSlice>& slices, Vec6 z) {
  bb6d_track(p, slices.data(), static_cast<int>(slices.size()), z[0], z[1], z[2], z[3], z[4], z[5]);
  return z;
}

}  // namespace

TEST_CASE("one slice, head-on, frozen partner: the kick of the BeamBeam4D plugin") {
  const Reference ref = proton(7e12);
  ft_reference r{};
  r.mass0 = kProtonMass;
  r.q0 = 1.0;
  r.p0c = ref.p0c;
  r.energy0 = std::sqrt(ref.p0c * ref.p0c + kProtonMass * kProtonMass);
  r.gamma0 = ref.gamma0;
  r.beta0 = ref.beta0;
  const double n = 1.15e11;
  std::mt19937_64 rng(7);
  for (const auto& [sx, sy] : {std::pair{16e-6, 16e-6}, std::pair{16e-6, 5e-6}, std::pair{3e-6, 20e-6}}) {
    BeamBeam4D e = ft_test::with_defaults<BeamBeam4D>(ft_element_descriptor_BeamBeam4D());
    e.intensity = n;
    e.q_strong = 1.0;
    e.sigma_x = sx;
    e.sigma_y = sy;
    BeamBeam4D_prepare(e, r);
    const Bb6dParams p = params(0.0, 0.0, 0, ref);
    const std::vector<Bb6dSlice> strong{slice(n, sx * sx, sy * sy, 0.3)};
    std::uniform_real_distribution<double> u(-6.0, 6.0);
    int compared = 0;
    for (int k = 0; k < 2000; ++k) {
      const double x = u(rng) * sx, y = u(rng) * sy;
      if (x * x / (2 * sx * sx) + y * y / (2 * sy * sy) < 5e-3) continue;  // the plugin's own core series
      ft::ParticleView pv = ft_test::particle(x, 1e-6, y, -2e-6, 0.01, 1e-4, ref.beta0);
      BeamBeam4D_track(e, pv);
      const Vec6 out = track(p, strong, {x, 1e-6, y, -2e-6, 0.01, 1e-4});
      const double scale = std::hypot(pv.px - 1e-6, pv.py + 2e-6);
      CHECK(std::fabs(out[1] - pv.px) <= 1e-14 * scale);
      CHECK(std::fabs(out[3] - pv.py) <= 1e-14 * scale);
      CHECK(out[0] == x);
      CHECK(out[2] == y);
      CHECK(out[4] == 0.01);
      CHECK(out[5] == 1e-4);
      ++compared;
    }
    CHECK(compared > 1500);
  }
}

TEST_CASE("field slope at the centre: the core series against 1 / (sigma_x (sigma_x + sigma_y))") {
  // Kx = x / (sx (sx + sy)) + O(x^3): the linear field of a Gaussian (Chao & Tigner sec. 2.5.1).
  for (const auto& [sx, sy] : {std::pair{16e-6, 16e-6}, std::pair{16e-6, 4e-6}, std::pair{2e-6, 9e-6}}) {
    double kx, ky, gx, gy;
    const double h = 1e-6;
    bb6d_gauss_field(h * sx, h * sy, sx * sx, sy * sy, kx, ky, gx, gy);
    CHECK(kx / (h * sx) == doctest::Approx(1.0 / (sx * (sx + sy))).epsilon(1e-11));
    CHECK(ky / (h * sy) == doctest::Approx(1.0 / (sy * (sx + sy))).epsilon(1e-11));
    // and continuity across the core boundary rho^2 = 1e-5 (series vs Bassetti-Erskine / round form)
    const double r_in = std::sqrt(2.0 * 0.99e-5), r_out = std::sqrt(2.0 * 1.01e-5);
    double kx_in, ky_in, kx_out, ky_out;
    bb6d_gauss_field(r_in * sx / std::sqrt(2.0), r_in * sy / std::sqrt(2.0), sx * sx, sy * sy, kx_in, ky_in, gx, gy);
    bb6d_gauss_field(r_out * sx / std::sqrt(2.0), r_out * sy / std::sqrt(2.0), sx * sx, sy * sy, kx_out, ky_out, gx,
                     gy);
    CHECK(kx_out / kx_in == doctest::Approx(r_out / r_in).epsilon(2e-5));
  }
}

TEST_CASE("G = dU/dSigma: against a finite difference of the field in the size (Gx = -(1/2) dKx/dx)") {
  // U's derivative in Sigma_11 equals -(1/2) dKx/dx; check against the field at two x (independent of
  // the G formulas) for round, elliptic and core points.
  for (const auto& [sx, sy] : {std::pair{10e-6, 10e-6}, std::pair{10e-6, 4e-6}, std::pair{3e-6, 8e-6}}) {
    for (const auto& [ux, uy] : {std::pair{0.7, 0.4}, std::pair{2.5, -1.2}, std::pair{1e-3, 2e-3}}) {
      const double x = ux * sx, y = uy * sy, hx = 1e-4 * sx, hy = 1e-4 * sy;
      double kx, ky, gx, gy, kxp, kyp, kxm, kym, t0, t1;
      bb6d_gauss_field(x, y, sx * sx, sy * sy, kx, ky, gx, gy);
      bb6d_gauss_field(x + hx, y, sx * sx, sy * sy, kxp, t0, t0, t1);
      bb6d_gauss_field(x - hx, y, sx * sx, sy * sy, kxm, t0, t0, t1);
      const double dkx_dx = (kxp - kxm) / (2 * hx);
      bb6d_gauss_field(x, y + hy, sx * sx, sy * sy, t0, kyp, t0, t1);
      bb6d_gauss_field(x, y - hy, sx * sx, sy * sy, t0, kym, t0, t1);
      const double dky_dy = (kyp - kym) / (2 * hy);
      CHECK(gx == doctest::Approx(-0.5 * dkx_dx).epsilon(1e-6));
      CHECK(gy == doctest::Approx(-0.5 * dky_dy).epsilon(1e-6));
    }
  }
}

TEST_CASE("linear beam-beam parameter: the small-amplitude tune shift equals xi, round and flat") {
  // One-turn linear map at the IP (beta* = beta, alpha = 0, tune q0) and one beam-beam crossing of
  // opposite charges (focusing): the tune from the trace of the numerical one-turn Jacobian.
  const Reference ref = proton(450e9);
  const double n = 5e7;  // small xi, so that the exact thin-lens tune shift equals xi to O(xi)
  const double q0 = 0.31;
  const double r0 = kElementaryCharge / (4 * kPi * kEpsilon0 * kProtonMass);  // e^2 / (4 pi eps0 m c^2) [m]
  struct Case {
    double sx, sy, beta_x, beta_y;
    int longitudinal;
    int n_slices;
  };
  for (const Case c : {Case{16e-6, 16e-6, 0.5, 0.5, 0, 1}, Case{40e-6, 4e-6, 2.0, 0.05, 0, 1},
                       Case{16e-6, 16e-6, 5.0, 5.0, 1, 5}, Case{40e-6, 8e-6, 20.0, 10.0, 1, 7}}) {
    const Bb6dParams p = params(0.0, 0.0, c.longitudinal, ref, -1.0);
    std::vector<Bb6dSlice> slices;
    const double sigma_z = 0.005;  // << beta*: no hourglass
    for (int i = 0; i < c.n_slices; ++i) {
      const double z = c.n_slices == 1 ? 0.0 : sigma_z * (2.0 * i / (c.n_slices - 1) - 1.0);
      Bb6dSlice s = slice(n / c.n_slices, c.sx * c.sx, c.sy * c.sy, -z);
      s.sigma_22 = c.sx * c.sx / (c.beta_x * c.beta_x);
      s.sigma_44 = c.sy * c.sy / (c.beta_y * c.beta_y);
      slices.push_back(s);
    }
    const auto one_turn = [&](Vec6 z) {
      z = track(p, slices, z);
      const double mu = 2 * kPi * q0;
      const double x = z[0], px = z[1], y = z[2], py = z[3];
      z[0] = std::cos(mu) * x + c.beta_x * std::sin(mu) * px;
      z[1] = -std::sin(mu) / c.beta_x * x + std::cos(mu) * px;
      z[2] = std::cos(mu) * y + c.beta_y * std::sin(mu) * py;
      z[3] = -std::sin(mu) / c.beta_y * y + std::cos(mu) * py;
      return z;
    };
    const double hx = 1e-4 * c.sx, hy = 1e-4 * c.sy;
    const auto derivative = [&](int coord, int wrt, double h) {
      Vec6 a{}, b{};
      a[wrt] = h;
      b[wrt] = -h;
      return (one_turn(a)[coord] - one_turn(b)[coord]) / (2 * h);
    };
    const double trace_x = derivative(0, 0, hx) + derivative(1, 1, hx / c.beta_x);
    const double trace_y = derivative(2, 2, hy) + derivative(3, 3, hy / c.beta_y);
    const double dq_x = std::acos(trace_x / 2) / (2 * kPi) - q0;
    const double dq_y = std::acos(trace_y / 2) / (2 * kPi) - q0;
    const double xi_x = n * r0 * c.beta_x / (2 * kPi * ref.gamma0 * c.sx * (c.sx + c.sy));
    const double xi_y = n * r0 * c.beta_y / (2 * kPi * ref.gamma0 * c.sy * (c.sx + c.sy));
    INFO("sx " << c.sx << " sy " << c.sy << " slices " << c.n_slices << " dq " << dq_x << " " << dq_y << " xi " << xi_x
               << " " << xi_y);
    CHECK(std::fabs(dq_x / xi_x - 1.0) < 0.02);
    CHECK(std::fabs(dq_y / xi_y - 1.0) < 0.02);
  }
}

TEST_CASE("boost and inverse boost are inverses") {
  const Reference ref = proton(7e12);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g(0.0, 1.0);
  for (const auto& [phi, alpha] : {std::pair{0.0, 0.0}, std::pair{142.5e-6, 0.0}, std::pair{0.015, 1.5707963267948966},
                                   std::pair{0.1, 0.7}, std::pair{-0.03, -2.0}}) {
    const Bb6dParams p = params(phi, alpha, 1, ref);
    for (int k = 0; k < 1000; ++k) {
      const Vec6 scale{1e-4, 1e-4, 1e-4, 1e-4, 0.05, 1e-3};
      Vec6 z;
      for (int i = 0; i < 6; ++i) z[i] = scale[i] * g(rng);
      Vec6 w = z;
      bb6d_boost(p, w[0], w[1], w[2], w[3], w[4], w[5]);
      bb6d_boost_inverse(p, w[0], w[1], w[2], w[3], w[4], w[5]);
      // relative to the vector's size: x* mixes in zeta tan(phi), so x returns with the rounding of that
      double size = 0.0;
      for (int i = 0; i < 6; ++i) size = std::fmax(size, std::fabs(z[i]));
      for (int i = 0; i < 6; ++i) CHECK(std::fabs(w[i] - z[i]) <= 1e-15 * size);
    }
  }
}

TEST_CASE("the boost is conformally symplectic: J^T S J = S / cos(phi), so boost-kick-inverse is symplectic") {
  // The head-on frame's momenta and zeta are scaled by 1 / cos(phi) (HMR eqs. (2)-(4) at px = py =
  // delta = 0), so the boost multiplies the symplectic form by that constant; conjugating a symplectic
  // kick with it gives a symplectic map (the test of the full map above).
  const Reference ref = proton(7e12);
  for (const auto& [phi, alpha] : {std::pair{0.01, 0.0}, std::pair{0.1, 0.7}}) {
    const Bb6dParams p = params(phi, alpha, 1, ref);
    const Vec6 z0{1e-4, 2e-4, -1e-4, 3e-4, 0.05, 1e-3};
    const Vec6 step{1e-9, 1e-9, 1e-9, 1e-9, 1e-6, 1e-8};
    const auto boosted = [&](int j, double k) {
      Vec6 a = z0;
      a[j] += k * step[j];
      bb6d_boost(p, a[0], a[1], a[2], a[3], a[4], a[5]);
      return a;
    };
    double jac[6][6];
    for (int j = 0; j < 6; ++j) {
      const Vec6 f1 = boosted(j, 1), fm1 = boosted(j, -1), f2 = boosted(j, 2), fm2 = boosted(j, -2);
      for (int i = 0; i < 6; ++i) jac[i][j] = (8.0 * (f1[i] - fm1[i]) - (f2[i] - fm2[i])) / (12.0 * step[j]);
    }
    double worst = 0.0;
    for (int a = 0; a < 6; ++a) {
      for (int b = 0; b < 6; ++b) {
        double m = 0.0;
        for (int k = 0; k < 3; ++k) m += jac[2 * k][a] * jac[2 * k + 1][b] - jac[2 * k + 1][a] * jac[2 * k][b];
        const double expected = (b == a + 1 && a % 2 == 0) ? 1.0 : (a == b + 1 && b % 2 == 0) ? -1.0 : 0.0;
        worst = std::fmax(worst, std::fabs(m - expected / std::cos(phi)));
      }
    }
    MESSAGE("boost phi " << phi << " alpha " << alpha << ": max |J^T S J - S / cos(phi)| = " << worst);
    CHECK(worst < 1e-8);
  }
}

TEST_CASE("boost: to first order x* = x + zeta tan(phi), zeta* = zeta / cos(phi), px* = px / cos(phi)") {
  // The reference orbit of the bunch is tilted by the crossing angle in the head-on frame (HMR eq. (4)
  // at px = py = delta = 0: exact).
  const Reference ref = proton(7e12);
  const double phi = 0.02;
  const Bb6dParams p = params(phi, 0.0, 1, ref);
  double x = 1e-5, px = 0.0, y = 2e-5, py = 0.0, zeta = 0.03, delta = 0.0;
  bb6d_boost(p, x, px, y, py, zeta, delta);
  CHECK(x == doctest::Approx(1e-5 + 0.03 * std::tan(phi)).epsilon(1e-14));
  CHECK(zeta == doctest::Approx(0.03 / std::cos(phi)).epsilon(1e-14));
  CHECK(y == doctest::Approx(2e-5).epsilon(1e-14));
  CHECK(px == 0.0);
  CHECK(delta == 0.0);
}

TEST_CASE("the synchro-beam map with crossing angle and hourglass is symplectic, uncoupled and coupled slices") {
  const Reference ref = proton(50e9);
  for (const bool coupled : {false, true})
  for (const auto& [phi, alpha] : {std::pair{0.0, 0.0}, std::pair{0.01, 0.0}, std::pair{0.02, 0.6}}) {
    const Bb6dParams p = params(phi, alpha, 1, ref);
    // 5 slices of a bunch with waist sizes 20 um x 8 um at beta* 0.3 / 0.1 m, waists shifted, offsets.
    std::vector<Bb6dSlice> slices;
    for (int i = 0; i < 5; ++i) {
      const double z = 0.04 * (2 - i);  // head first
      Bb6dSlice s = slice(2e10 * (1 + 0.1 * i), 4e-10, 0.64e-10, z);
      s.sigma_12 = -2e-10 * (0.1 + 0.02 * i);
      s.sigma_22 = 4e-10 / 0.09;
      s.sigma_34 = 0.64e-10 * 0.2;
      s.sigma_44 = 0.64e-10 / 0.01;
      s.x = 3e-6 * (i - 2);
      s.px = 1e-6 * i;
      s.y = -2e-6;
      s.py = 5e-7 * (i - 1);
      s.delta = 1e-4;
      if (coupled) {  // x-y correlations that change along s: the uncoupled frame turns with S
        s.sigma_13 = 0.3 * std::sqrt(s.sigma_11 * s.sigma_33);
        s.sigma_14 = 0.2 * std::sqrt(s.sigma_11 * s.sigma_44);
        s.sigma_23 = -0.1 * std::sqrt(s.sigma_22 * s.sigma_33);
        s.sigma_24 = 0.25 * std::sqrt(s.sigma_22 * s.sigma_44);
      }
      slices.push_back(s);
    }
    const Vec6 z0{12e-6, 3e-5, -5e-6, -4e-5, 0.03, 2e-4};
    // canonical normalisation per plane so that all entries are O(1): q / sqrt(b), p sqrt(b)
    const Vec6 norm{std::sqrt(0.3),     1 / std::sqrt(0.3), std::sqrt(0.1),
                    1 / std::sqrt(0.1), std::sqrt(500.0),   1 / std::sqrt(500.0)};
    const Vec6 step{1e-4 * 20e-6, 1e-4 * 7e-5, 1e-4 * 8e-6, 1e-4 * 8e-5, 1e-4 * 0.05, 1e-4 * 1e-4};
    // five-point central differences (error O(h^4))
    const auto shifted = [&](int j, double k) {
      Vec6 a = z0;
      a[j] += k * step[j];
      return track(p, slices, a);
    };
    double jac[6][6];
    for (int j = 0; j < 6; ++j) {
      const Vec6 f1 = shifted(j, 1), fm1 = shifted(j, -1), f2 = shifted(j, 2), fm2 = shifted(j, -2);
      for (int i = 0; i < 6; ++i)
        jac[i][j] = (8.0 * (f1[i] - fm1[i]) - (f2[i] - fm2[i])) / (12.0 * step[j]) * norm[j] / norm[i];
    }
    // the map is not trivial: the kick moves px by O(its size) and delta
    const Vec6 out = track(p, slices, z0);
    CHECK(std::fabs(out[1] - z0[1]) > 1e-6);
    CHECK(std::fabs(out[5] - z0[5]) > 1e-9);
    double worst = 0.0;
    for (int a = 0; a < 6; ++a) {
      for (int b = 0; b < 6; ++b) {
        double m = 0.0;
        for (int k = 0; k < 3; ++k) m += jac[2 * k][a] * jac[2 * k + 1][b] - jac[2 * k + 1][a] * jac[2 * k][b];
        const double expected = (b == a + 1 && a % 2 == 0) ? 1.0 : (a == b + 1 && b % 2 == 0) ? -1.0 : 0.0;
        worst = std::fmax(worst, std::fabs(m - expected));
      }
    }
    MESSAGE(std::string(coupled ? "coupled " : "uncoupled ") << "phi " << phi << " alpha " << alpha << ": max |J^T S J - S| = " << worst);
    CHECK(worst < 1e-9);
  }
}

namespace {

/// Slices of a Gaussian bunch (sigma_z, n_slices over +-6 sigma_z), waist at the IP with beta* bx, by
/// and rms sizes sx, sy; zeta in the lab frame, then moved into the head-on frame by the boost of the
/// bunch's reference orbit (its tilt) when phi != 0.
std::vector<Bb6dSlice> gaussian_bunch(double n, double sx, double sy, double bx, double by, double sigma_z,
                                      int n_slices, const Bb6dParams& p) {
  std::vector<Bb6dSlice> out;
  const double w = 12.0 * sigma_z / n_slices;
  for (int i = 0; i < n_slices; ++i) {
    const double lo = -6.0 * sigma_z + i * w, hi = lo + w;
    const double frac = 0.5 * (std::erf(hi / (std::sqrt(2.0) * sigma_z)) - std::erf(lo / (std::sqrt(2.0) * sigma_z)));
    Bb6dSlice s = slice(n * frac, sx * sx, sy * sy, 0.5 * (lo + hi));
    s.sigma_22 = bx > 0 ? sx * sx / (bx * bx) : 0.0;
    s.sigma_44 = by > 0 ? sy * sy / (by * by) : 0.0;
    double x = 0, px = 0, y = 0, py = 0, zeta = s.zeta, delta = 0;
    bb6d_boost(p, x, px, y, py, zeta, delta);
    s.x = x;
    s.y = y;
    s.zeta = zeta;
    out.push_back(s);
  }
  return out;
}

/// Furman's hourglass factor by Simpson's rule on [-10 sz, 10 sz].
double hourglass_factor(double sigma_z, double bx, double by) {
  const int m = 20000;
  const double a = -10 * sigma_z, h = 20 * sigma_z / m;
  double sum = 0.0;
  for (int k = 0; k <= m; ++k) {
    const double s = a + k * h;
    const double f = std::exp(-s * s / (sigma_z * sigma_z)) /
                     (std::sqrt(kPi) * sigma_z * std::sqrt((1 + s * s / (bx * bx)) * (1 + s * s / (by * by))));
    sum += f * (k == 0 || k == m ? 1.0 : (k % 2 ? 4.0 : 2.0));
  }
  return sum * h / 3;
}

}  // namespace

TEST_CASE("luminosity per crossing: Gaussian overlap, hourglass, crossing angle (Piwinski)") {
  const Reference ref = proton(7e12);
  const double n1 = 1.15e11, n2 = 0.9e11, sx = 16e-6, sy = 7e-6;
  const double head_on = n1 * n2 / (4 * kPi * sx * sy);
  const Bb6dParams flat = params(0.0, 0.0, 1, ref);
  SUBCASE("no hourglass") {
    const auto b1 = gaussian_bunch(n1, sx, sy, 0, 0, 0.08, 40, flat);
    const auto b2 = gaussian_bunch(n2, sx, sy, 0, 0, 0.08, 40, flat);
    CHECK(luminosity_per_crossing(b1, b2) == doctest::Approx(head_on).epsilon(1e-8));  // tails beyond 6 sigma: 2e-9
  }
  SUBCASE("hourglass") {
    for (const auto& [bx, by] : {std::pair{0.15, 0.15}, std::pair{0.5, 0.05}}) {
      const double sigma_z = 0.08;
      const auto b1 = gaussian_bunch(n1, sx, sy, bx, by, sigma_z, 200, flat);
      const auto b2 = gaussian_bunch(n2, sx, sy, bx, by, sigma_z, 200, flat);
      const double r = hourglass_factor(sigma_z, bx, by);
      INFO("beta* " << bx << " " << by << " R " << r);
      CHECK(r < 0.9);  // a real reduction
      CHECK(luminosity_per_crossing(b1, b2) / head_on == doctest::Approx(r).epsilon(0.01));
    }
  }
  SUBCASE("crossing angle") {
    for (const double phi : {142.5e-6, 285e-6}) {
      const double sigma_z = 0.0755;
      const Bb6dParams crossing = params(phi, 0.0, 1, ref);
      const auto b1 = gaussian_bunch(n1, sx, sy, 0, 0, sigma_z, 300, crossing);
      const auto b2 = gaussian_bunch(n2, sx, sy, 0, 0, sigma_z, 300, crossing);
      const double piwinski = 1.0 / std::sqrt(1.0 + std::pow(sigma_z * std::tan(phi) / sx, 2));
      INFO("phi " << phi << " Piwinski " << piwinski);
      CHECK(piwinski < 0.85);
      CHECK(luminosity_per_crossing(b1, b2) / head_on == doctest::Approx(piwinski).epsilon(0.01));
    }
  }
  SUBCASE("bad input") {
    std::vector<Bb6dSlice> bad = gaussian_bunch(n1, sx, sy, 0, 0, 0.08, 4, flat);
    bad[2].sigma_13 = std::sqrt(bad[2].sigma_11 * bad[2].sigma_33);  // a degenerate (x, y) covariance
    CHECK_THROWS_AS(luminosity_per_crossing(bad, bad), std::invalid_argument);
    CHECK_THROWS_AS(luminosity_per_crossing({}, bad), std::invalid_argument);
  }
  SUBCASE("coupled slices: a bunch rotated about s by theta0 overlaps a rotated partner as the unrotated ones") {
    const double theta0 = 0.37, c = std::cos(theta0), s = std::sin(theta0);
    auto b1 = gaussian_bunch(n1, sx, 0.4 * sx, 0.5, 0.2, 0.08, 7, flat);
    auto b2 = gaussian_bunch(n2, 0.8 * sx, 0.3 * sx, 0.3, 0.25, 0.08, 7, flat);
    for (auto& v : b2) v.x = 0.5 * sx, v.y = -0.2 * sx, v.px = 1e-7, v.py = -2e-7;
    const double plain = luminosity_per_crossing(b1, b2);
    for (auto* bunch : {&b1, &b2})
      for (auto& v : *bunch) v = rotated(v, c, s);
    const double turned = luminosity_per_crossing(b1, b2);
    MESSAGE("overlap " << plain << ", both bunches rotated by 0.37 rad: " << turned);
    CHECK(turned == doctest::Approx(plain).epsilon(1e-12));
  }
}

TEST_CASE("coupled slices: the map of a partner and a particle both rotated about s is the rotated map") {
  // An uncoupled flat bunch with hourglass, 5 slices, crossing angle 0: rotate the partner's slices
  // and the particle by theta0 about s; the map's result, rotated back, must equal the unrotated map's
  // (x, px, y, py) and its energy change. The coupled path (rotated frame, turning frame) against the
  // uncoupled one.
  const Reference ref = proton(450e9);
  const Bb6dParams p = params(0.0, 0.0, 1, ref);
  std::vector<Bb6dSlice> slices;
  for (int i = 0; i < 5; ++i) {
    Bb6dSlice s = slice(3e10, 4e-10, 0.36e-10, 0.05 * (2 - i));
    s.sigma_12 = 1e-10, s.sigma_22 = 4e-10 / 0.04, s.sigma_34 = -2e-12, s.sigma_44 = 0.36e-10 / 0.01;
    s.x = 2e-6 * (i - 2), s.px = 3e-7, s.y = -1e-6, s.py = 2e-7 * i;
    slices.push_back(s);
  }
  for (const double theta0 : {0.2, -0.9, 1.3}) {
    const double c = std::cos(theta0), s = std::sin(theta0);
    std::vector<Bb6dSlice> turned;
    for (const Bb6dSlice& v : slices) turned.push_back(rotated(v, c, s));
    for (const Vec6 z0 : {Vec6{15e-6, 2e-5, -4e-6, 3e-5, 0.02, 1e-4}, Vec6{-3e-6, -1e-5, 9e-6, 0.0, -0.07, 0.0}}) {
      const Vec6 plain = track(p, slices, z0);
      Vec6 zr = z0;
      zr[0] = c * z0[0] - s * z0[2], zr[2] = s * z0[0] + c * z0[2];
      zr[1] = c * z0[1] - s * z0[3], zr[3] = s * z0[1] + c * z0[3];
      const Vec6 out = track(p, turned, zr);
      Vec6 back = out;  // rotate back by -theta0
      back[0] = c * out[0] + s * out[2], back[2] = -s * out[0] + c * out[2];
      back[1] = c * out[1] + s * out[3], back[3] = -s * out[1] + c * out[3];
      for (int k : {1, 3}) CHECK(std::fabs(back[k] - plain[k]) < 1e-10 * std::fabs(plain[k] - z0[k]));
      for (int k : {0, 2}) CHECK(std::fabs(back[k] - plain[k]) < 1e-12 * std::fabs(plain[k]) + 1e-20);
      CHECK(std::fabs((back[5] - z0[5]) - (plain[5] - z0[5])) < 1e-9 * std::fabs(plain[5] - z0[5]));
      CHECK(std::fabs(plain[5] - z0[5]) > 1e-12);
    }
  }
}

TEST_CASE("NVRTC compiles the 6D beam-beam header (one source for CPU and GPU)") {
  KernelSource src;
  src.name = "fusetrack_beambeam6d_test.cu";
  src.headers = framework_device_headers();
  src.text = R"(#include "fusetrack/device/beambeam6d.h"
extern "C" __global__ void fusetrack_bb6d(Bb6dParams p, const Bb6dSlice* slices, int n_slices, double* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double* q = c + 6 * i;
  bb6d_track(p, slices, n_slices, q[0], q[1], q[2], q[3], q[4], q[5]);
}
)";
  CompiledKernel k;
  CHECK_NOTHROW(k = KernelCompiler("off").compile(src, 90));
  CHECK(!k.cubin.empty());
}

}  // namespace test_beambeam6d
