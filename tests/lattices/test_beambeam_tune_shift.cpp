// Beam-beam tune shifts of the weak-strong lenses (BeamBeamBiGaussian2D, BeamBeamBiGaussian3D with one
// slice) in a linear ring: the tunes of a particle at 1e-3 sigma, tracked and analysed by NAFF
// (ft::tune_from_tracking), against closed forms.
//
// The ring: the lens at the centre of QF (alpha = 0), then 6 thin-lens FODO cells, tunes 0.31 / 0.32;
// beta at the lens and the bare tunes from the 2x2 thin-lens matrices (independent of the library's
// optics). Protons at 450 GeV/c against a partner of N particles of charge q_other e.
//
// Head-on (Gaussian of sizes sigma_x, sigma_y centred on the orbit): near the axis the lens is a thin
// quadrupole. The field of the unit-normalised Gaussian has dKx/dx = 1 / (sigma_x (sigma_x + sigma_y))
// at the centre (Bassetti & Erskine 1980; 1 / (2 sigma^2) for a round beam), and the kick of N particles
// moving at c against the beam per unit field is 2 N r0 q_other / (beta0 gamma) (electric plus magnetic
// force, (1 + beta0) / beta0 of the electric one, over the momentum beta0 gamma m c), so the focusing
// strength is k_x = -2 N r0 q_other / (beta0 gamma sigma_x (sigma_x + sigma_y)) and, with beta0 -> 1, the
// linear beam-beam parameter (e.g. A. W. Chao et al., "Handbook of Accelerator Physics and Engineering",
// sec. 2.5.1)
//   xi_x = k_x beta_x / (4 pi) = N r0 beta_x / (2 pi gamma sigma_x (sigma_x + sigma_y))   (times -q_other),
//   round: xi = N r0 beta / (4 pi gamma sigma^2);
// opposite charges focus (tune up), like charges defocus (tune down). A thin lens k at beta (alpha = 0)
// in a ring of tune Q gives the trace 2 cos(2 pi Q) - k beta sin(2 pi Q), so exactly
//   cos(2 pi Q') = cos(2 pi Q) - 2 pi xi sin(2 pi Q),
// and Q' - Q = xi (1 + O(pi xi cot(2 pi Q))). The exact tunes take k with beta0 gamma (1 - beta0 = 2e-6 here),
// the standard formulas gamma.
//
// Long-range (round partner at distance d in x, its dipole kick at the orbit post-subtracted so the
// closed orbit stays at zero): Kx(u, 0) = (1 - exp(-u^2 / (2 sigma^2))) / u, so with E = exp(-d^2 / (2
// sigma^2)) dKx/dx = -(1 - E) / d^2 + E / sigma^2 and dKy/dy = (1 - E) / d^2 at the orbit. The focusing
// strengths are k_x = (2 N r0 q_other / (beta0 gamma)) ((1 - E) / d^2 - E / sigma^2), k_y = -(2 N r0 q_other
// / (beta0 gamma)) (1 - E) / d^2, and at large d (E -> 0, beta0 -> 1)
//   dQx = +q_other N r0 beta_x / (2 pi gamma d^2),   dQy = -q_other N r0 beta_y / (2 pi gamma d^2):
// like charges focus in the plane of the separation and defocus in the other, opposite charges the reverse.
//
// Footprint (ft::tune_footprint, `fusetrack footprint`) of the head-on round lens, amplitudes in units of the
// partner's sigma: to first order in xi a particle of amplitude a sigma in x alone has (A. W. Chao et al.,
// "Handbook of Accelerator Physics and Engineering", sec. 2.5.1; the phase average of the kick's
// Fourier component)
//   dQx(a) = xi (4 / a^2) (1 - exp(-a^2 / 4) I0(a^2 / 4)),
// 1 - 3 a^2 / 16 near the axis, 0.836 at 1 sigma, 0.198 at 4 sigma: the shift falls with amplitude.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/optics.h"
#include "fusetrack/tracker.h"
#include "fusetrack/variants.h"
#include "support/lattice_builders.h"
#include "support/process.h"
#include "support/thin_lens.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_beambeam_tune_shift.
namespace test_beambeam_tune_shift {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kElementaryCharge = 1.602176634e-19;  // C
constexpr double kEpsilon0 = 8.8541878128e-12;         // F/m
constexpr double kProtonMass = 938272088.16;           // eV
constexpr double kP0c = 450e9;                         // eV
constexpr double kCell = 10.0;                         // [m] thin-lens FODO cell
constexpr double kF = 0.2536, kD = -0.2547;            // integrated k1 [1/m] of QF (two halves) and QD
constexpr int kCells = 6;
constexpr double kPartnerParticles = 1.1e11;

struct ThinOptics {
  double beta, tune;  // beta at the lens [m], fractional tune
};

// The 2x2 thin-lens matrices of the cells (plane +1: x, -1: y).
ThinOptics thin_optics(int plane) {
  using namespace ft::test;
  const M2 half = kick(plane * kF / 2), d = drift(kCell / 2);
  const M2 cell = mul(half, mul(d, mul(kick(plane * kD), mul(d, half))));
  const double mu = std::acos(0.5 * (cell[0][0] + cell[1][1]));
  const double beta = cell[0][1] / std::sin(mu);
  const double q = kCells * mu / (2 * kPi);
  return {beta, q - std::floor(q)};
}

// Classical radius of the proton e^2 / (4 pi eps0 m c^2) [m] and its Lorentz factor at kP0c.
double classical_radius() { return kElementaryCharge / (4.0 * kPi * kEpsilon0 * kProtonMass); }
double gamma0() { return std::sqrt(1.0 + (kP0c / kProtonMass) * (kP0c / kProtonMass)); }
double beta0() { return (kP0c / kProtonMass) / gamma0(); }

// The tune of a thin lens of beam-beam parameter xi (focusing for xi > 0) at alpha = 0 in a ring of tune q:
// cos(2 pi Q') = cos(2 pi q) - 2 pi xi sin(2 pi q), on the branch of q (here in (0, 1/2)).
double exact_tune(double q, double xi) {
  return std::acos(std::cos(2 * kPi * q) - 2 * kPi * xi * std::sin(2 * kPi * q)) / (2 * kPi);
}

nlohmann::ordered_json lens_ring_doc(const nlohmann::ordered_json& lens) {
  return {{"fusetrack_lattice", 1},
          {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", kP0c}}},
          {"elements",
           {{"lens", lens},
            {"qf_half", {{"type", "Multipole"}, {"knl", {0.0, kF / 2}}}},
            {"qd", {{"type", "Multipole"}, {"knl", {0.0, kD}}}},
            {"d", {{"type", "Drift"}, {"length", kCell / 2}}}}},
          {"lines", {{"cell", {"qf_half", "d", "qd", "d", "qf_half"}}}},
          {"sequence", {"lens", {{"line", "cell"}, {"repeat", kCells}}}}};
}

ft::Lattice lens_ring(const nlohmann::ordered_json& lens) {
  return ft::lattice_from_json(lens_ring_doc(lens), "lens_ring", ft::test::builtin_registry());
}

nlohmann::ordered_json lens_2d(double q_other, double sigma_x, double sigma_y, double shift_x = 0.0,
                               double subtract_px = 0.0) {
  return {{"type", "BeamBeamBiGaussian2D"},
          {"other_beam_num_particles", kPartnerParticles},
          {"other_beam_q0", q_other},
          {"other_beam_Sigma_11", sigma_x * sigma_x},
          {"other_beam_Sigma_33", sigma_y * sigma_y},
          {"other_beam_shift_x", shift_x},
          {"post_subtract_px", subtract_px}};
}

nlohmann::ordered_json lens_3d(double q_other, double sigma_x, double sigma_y) {
  return {{"type", "BeamBeamBiGaussian3D"},
          {"num_slices_other_beam", 1},
          {"other_beam_q0", q_other},
          {"slices_other_beam_num_particles", {kPartnerParticles}},
          {"slices_other_beam_Sigma_11_star", {sigma_x * sigma_x}},
          {"slices_other_beam_Sigma_33_star", {sigma_y * sigma_y}}};
}

struct Tunes {
  double qx, qy;
  double max_orbit;  // largest |x|, |y| of a particle started on the axis [m]
};

// NAFF tunes of a particle started at (x0, 0, y0, 0) on the axis of the lens (alpha = 0 there), 1024 turns,
// and the largest excursion of a particle started at zero (the closed orbit).
Tunes tracked_tunes(const ft::Lattice& ring, double x0, double y0, double beta_x, double beta_y) {
  ft::Particles p(2, ring.reference().beta0());
  p.set(0, x0, 0.0, y0, 0.0, 0.0, 0.0);
  p.set(1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  std::vector<double> xs{x0}, pxs{0.0}, ys{y0}, pys{0.0};
  double max_orbit = 0.0;
  ft::TrackOptions o;
  o.turns = 1024;
  o.threads = 1;
  o.callback_every = 1;
  o.callback = [&](int64_t, const ft::Particles& q) {
    xs.push_back(q.x[0]);
    pxs.push_back(q.px[0]);
    ys.push_back(q.y[0]);
    pys.push_back(q.py[0]);
    max_orbit = std::max({max_orbit, std::fabs(q.x[1]), std::fabs(q.y[1])});
    return true;
  };
  ft::make_cpu_backend(ring)->track(p, o);
  REQUIRE(p.state[0] > 0);
  return {ft::tune_from_tracking(xs, pxs, beta_x, 0.0), ft::tune_from_tracking(ys, pys, beta_y, 0.0), max_orbit};
}

}  // namespace

TEST_CASE("Head-on beam-beam lens: the small-amplitude tune shift is the beam-beam parameter xi") {
  const ThinOptics ox = thin_optics(+1), oy = thin_optics(-1);
  REQUIRE(std::fabs(ox.tune - 0.31) < 2e-3);
  REQUIRE(std::fabs(oy.tune - 0.32) < 2e-3);
  const double r0 = classical_radius(), gamma = gamma0();
  struct Beam {
    const char* what;
    double sigma_x, sigma_y;
  };
  // Round, flat and tall partners; xi_x from 1.8e-3 to 4.4e-3, xi_y from 5e-4 to 2.3e-3.
  for (const Beam& b : {Beam{"round", 3.6e-4, 3.6e-4}, Beam{"flat", 4.2e-4, 1.4e-4}, Beam{"tall", 2.6e-4, 5.2e-4}}) {
    const double xi_x = kPartnerParticles * r0 * ox.beta / (2 * kPi * gamma * b.sigma_x * (b.sigma_x + b.sigma_y));
    const double xi_y = kPartnerParticles * r0 * oy.beta / (2 * kPi * gamma * b.sigma_y * (b.sigma_x + b.sigma_y));
    if (b.sigma_x == b.sigma_y) {
      const double xi_round = kPartnerParticles * r0 * ox.beta / (4 * kPi * gamma * b.sigma_x * b.sigma_x);
      CHECK(std::fabs(xi_x / xi_round - 1) < 1e-14);
    }
    for (const double q_other : {-1.0, 1.0}) {
      for (const bool three_d : {false, true}) {
        if (three_d && b.sigma_x != b.sigma_y) continue;  // the 3D lens: the round one-slice case
        const ft::Lattice ring =
            lens_ring(three_d ? lens_3d(q_other, b.sigma_x, b.sigma_y) : lens_2d(q_other, b.sigma_x, b.sigma_y));
        // 1e-3 sigma: the detuning with amplitude is ~3e-7 of the shift.
        const Tunes t = tracked_tunes(ring, 1e-3 * b.sigma_x, 1e-3 * b.sigma_y, ox.beta, oy.beta);
        const double sign = -q_other;  // opposite charges focus
        const double dqx = t.qx - ox.tune, dqy = t.qy - oy.tune;
        const double exact_x = exact_tune(ox.tune, sign * xi_x / beta0()) - ox.tune;
        const double exact_y = exact_tune(oy.tune, sign * xi_y / beta0()) - oy.tune;
        MESSAGE(
            fmt::format("{} {} lens, q_other {:+g}: dQx {:+.6e} (xi_x {:.6e}, exact {:+.6e}), "
                        "dQy {:+.6e} (xi_y {:.6e}, exact {:+.6e}); dQ / xi - 1: {:+.2e}, {:+.2e}; "
                        "dQ / exact - 1: {:+.2e}, {:+.2e}",
                        three_d ? "3D" : "2D", b.what, q_other, dqx, xi_x, exact_x, dqy, xi_y, exact_y,
                        dqx / (sign * xi_x) - 1, dqy / (sign * xi_y) - 1, dqx / exact_x - 1, dqy / exact_y - 1));
        const std::string beam = b.what;
        CAPTURE(beam);
        CAPTURE(q_other);
        CAPTURE(three_d);
        CHECK(dqx * sign > 0.0);
        CHECK(dqy * sign > 0.0);
        CHECK(std::fabs(dqx / exact_x - 1) < 1e-6);
        CHECK(std::fabs(dqy / exact_y - 1) < 1e-6);
        CHECK(std::fabs(dqx / (sign * xi_x) - 1) < 0.01);
        CHECK(std::fabs(dqy / (sign * xi_y) - 1) < 0.01);
        CHECK(t.max_orbit == 0.0);
      }
    }
  }
}

TEST_CASE("Long-range beam-beam lens: tune shifts +-N r0 beta / (2 pi gamma d^2) of opposite signs in x and y") {
  const ThinOptics ox = thin_optics(+1), oy = thin_optics(-1);
  const double r0 = classical_radius(), gamma = gamma0();
  const double sigma = 3.6e-4;
  for (const double q_other : {1.0, -1.0}) {
    std::vector<double> scaled_x, scaled_y;  // d^2 dQ
    for (const double separation : {5.0, 7.0, 10.0, 14.0, 20.0}) {
      const double d = separation * sigma;
      const double e = std::exp(-d * d / (2 * sigma * sigma));
      const double kick_per_field = 2 * kPartnerParticles * r0 * q_other / (beta0() * gamma);
      // The partner at +d: the particle on the axis sees u = -d, Kx = -(1 - E) / d; subtracting that kick
      // keeps the closed orbit at zero.
      const double dipole = kick_per_field * -(1 - e) / d;
      const ft::Lattice ring = lens_ring(lens_2d(q_other, sigma, sigma, d, dipole));
      const Tunes t = tracked_tunes(ring, 1e-3 * sigma, 1e-3 * sigma, ox.beta, oy.beta);
      const double k_x = kick_per_field * ((1 - e) / (d * d) - e / (sigma * sigma));
      const double k_y = -kick_per_field * (1 - e) / (d * d);
      const double exact_x = exact_tune(ox.tune, k_x * ox.beta / (4 * kPi)) - ox.tune;
      const double exact_y = exact_tune(oy.tune, k_y * oy.beta / (4 * kPi)) - oy.tune;
      const double formula_x = q_other * kPartnerParticles * r0 * ox.beta / (2 * kPi * gamma * d * d);
      const double formula_y = -q_other * kPartnerParticles * r0 * oy.beta / (2 * kPi * gamma * d * d);
      const double dqx = t.qx - ox.tune, dqy = t.qy - oy.tune;
      MESSAGE(
          fmt::format("q_other {:+g}, d = {:g} sigma: dQx {:+.6e} (formula {:+.6e}, {:+.2e}; exact {:+.2e}), "
                      "dQy {:+.6e} (formula {:+.6e}, {:+.2e}; exact {:+.2e}); orbit {:.1e} m",
                      q_other, separation, dqx, formula_x, dqx / formula_x - 1, dqx / exact_x - 1, dqy, formula_y,
                      dqy / formula_y - 1, dqy / exact_y - 1, t.max_orbit));
      CAPTURE(q_other);
      CAPTURE(separation);
      CHECK(dqx * q_other > 0.0);  // like charges focus in the separation plane
      CHECK(dqy * q_other < 0.0);
      CHECK(std::fabs(dqx / exact_x - 1) < 1e-7);
      CHECK(std::fabs(dqy / exact_y - 1) < 1e-7);
      CHECK(std::fabs(dqx / formula_x - 1) < 0.01);
      CHECK(std::fabs(dqy / formula_y - 1) < 0.01);
      CHECK(t.max_orbit < 1e-18);  // the post-subtracted kick cancels the dipole kick
      scaled_x.push_back(dqx * d * d);
      scaled_y.push_back(dqy * d * d);
    }
    // 1 / d^2: d^2 dQ is the same at every separation.
    for (size_t i = 1; i < scaled_x.size(); ++i) {
      CHECK(std::fabs(scaled_x[i] / scaled_x[0] - 1) < 0.01);
      CHECK(std::fabs(scaled_y[i] / scaled_y[0] - 1) < 0.01);
    }
  }
}

namespace {

// First-order detuning of a round head-on lens, dQx(a) / xi for an amplitude a sigma in x alone.
double head_on_detuning(double a) {
  const double z = a * a / 4;
  return 4 / (a * a) * (1 - std::exp(-z) * std::cyl_bessel_i(0.0, z));
}

}  // namespace

TEST_CASE("Beam-beam footprint: the tune shift at the centre and the detuning with amplitude of a head-on lens") {
  const ThinOptics ox = thin_optics(+1), oy = thin_optics(-1);
  const double r0 = classical_radius(), gamma = gamma0();
  const double sigma = 3.6e-4, q_other = 1.0;  // like charges: the tunes fall
  const ft::Lattice ring = lens_ring(lens_2d(q_other, sigma, sigma));
  size_t lenses = 0;
  const ft::LinearOptics bare = ft::compute_linear_optics(ft::without_beam_beam_lenses(ring, &lenses));
  CHECK(lenses == 1u);
  CHECK(std::fabs(bare.qx - ox.tune) < 1e-10);  // the lens switched off: the ring's own optics
  CHECK(std::fabs(bare.beta_x / ox.beta - 1) < 1e-10);
  const double xi_x = kPartnerParticles * r0 * ox.beta / (4 * kPi * gamma * sigma * sigma);
  const double xi_y = kPartnerParticles * r0 * oy.beta / (4 * kPi * gamma * sigma * sigma);
  // Geometric emittances that make the tracked beam as large as the partner at the lens.
  ft::FootprintOptions o;
  o.emittance_x = sigma * sigma / ox.beta;
  o.emittance_y = sigma * sigma / oy.beta;
  o.turns = 1024;
  o.threads = 1;
  auto backend = ft::make_cpu_backend(ring);

  // The centre: one particle at (1.4e-3, 1.4e-3) sigma.
  o.amplitudes = 1;
  o.angles = 1;
  o.max_sigma = 2e-3;
  o.min_sigma = 1e-4;
  const ft::TuneFootprint centre = ft::tune_footprint(ring, bare, *backend, o);
  REQUIRE(centre.qx.size() == 1u);
  CHECK(std::fabs(centre.sigma_x / sigma - 1) < 1e-9);
  CHECK(std::fabs(centre.sigma_y / sigma - 1) < 1e-9);
  const double exact_x = exact_tune(ox.tune, -xi_x / beta0()), exact_y = exact_tune(oy.tune, -xi_y / beta0());
  MESSAGE(fmt::format("footprint centre: qx {:.9f} (exact {:.9f}), qy {:.9f} (exact {:.9f})", centre.qx[0], exact_x,
                      centre.qy[0], exact_y));
  CHECK(std::fabs((centre.qx[0] - ox.tune) / (exact_x - ox.tune) - 1) < 1e-6);
  CHECK(std::fabs((centre.qy[0] - oy.tune) / (exact_y - oy.tune) - 1) < 1e-6);

  // Along x (angle 0, a_y = 1e-3): 0.5 .. 4 sigma.
  o.amplitudes = 8;
  o.angles = 2;
  o.max_sigma = 4.0;
  o.min_sigma = 1e-3;
  const ft::TuneFootprint fp = ft::tune_footprint(ring, bare, *backend, o);
  const double shift_centre = centre.qx[0] - ox.tune;
  double previous = std::fabs(shift_centre);
  for (int k = 0; k < o.amplitudes; ++k) {
    const size_t i = static_cast<size_t>(k * o.angles);
    REQUIRE(fp.lost_turn[i] == -1);
    const double a = fp.amplitude_x[i], dqx = fp.qx[i] - ox.tune;
    const double ratio = dqx / shift_centre, expected = head_on_detuning(a);
    MESSAGE(fmt::format("a = {:.1f} sigma: dQx {:+.6e}, dQx / dQx(0) {:.5f} (first order {:.5f}, {:+.1e})", a, dqx,
                        ratio, expected, ratio / expected - 1));
    CAPTURE(a);
    CHECK(dqx < 0.0);
    CHECK(std::fabs(dqx) < previous);  // the shift falls with amplitude
    CHECK(std::fabs(ratio / expected - 1) < 0.01);
    previous = std::fabs(dqx);
  }
}

TEST_CASE("fusetrack footprint (command line) of a ring with a beam-beam lens, and bad input named") {
  const auto dir = ft::test::temp_dir("footprint_lens_cli");
  const std::string ring = (dir / "lens_ring.json").string(), out = (dir / "fp").string();
  const double sigma = 3.6e-4;
  std::ofstream(ring) << lens_ring_doc(lens_2d(1.0, sigma, sigma)).dump(1);
  const ThinOptics ox = thin_optics(+1), oy = thin_optics(-1);
  const std::string emittances = fmt::format("{:.17g} {:.17g}", sigma * sigma / ox.beta, sigma * sigma / oy.beta);
  const auto run = ft::test::run_command(fmt::format(
      "{} footprint {} --geometric-emittances {} --max-sigma 3 --min-sigma 1e-3 --amplitudes 3 --angles 2 -n 512 "
      "--device cpu --no-plot -o {}",
      ft::test::fusetrack_binary(), ring, emittances, out));
  CAPTURE(run.second);
  REQUIRE(run.first == 0);
  CHECK(run.second.find("without its 1 beam-beam lenses") != std::string::npos);
  CHECK(run.second.find("footprint 6 particles (3 amplitudes up to 3 sigma x 2 angles), 512 turns: 0 lost") !=
        std::string::npos);
  std::ifstream in(out + "/footprint.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(std::fabs(j.at("lattice_tunes")[0].get<double>() - ox.tune) < 1e-9);
  CHECK(std::fabs(j.at("sigma_x").get<double>() / sigma - 1) < 1e-9);
  REQUIRE(j.at("qx").size() == 6u);
  // Like charges: every tune below the ring's, the shift smaller at 3 sigma than at 1 sigma.
  for (size_t i = 0; i < 6; ++i) CHECK(j.at("qx")[i].get<double>() < ox.tune);
  CHECK(j.at("qx")[4].get<double>() > j.at("qx")[0].get<double>());
  CHECK(std::ifstream(out + "/footprint.csv").good());

  // Bad input: exit code 2, the option named.
  const auto bad = [&](const std::string& options) {
    return ft::test::run_command(
        fmt::format("{} footprint {} {} -n 64 --no-plot -o {}", ft::test::fusetrack_binary(), ring, options, out));
  };
  const auto negative = bad("--emittances -2e-6 1e-6");
  CHECK(negative.first == 2);
  CHECK(negative.second.find("--emittances") != std::string::npos);
  CHECK(negative.second.find("positive") != std::string::npos);
  const auto negative_geometric = bad("--geometric-emittances 1e-9 -1e-9");
  CHECK(negative_geometric.first == 2);
  CHECK(negative_geometric.second.find("--geometric-emittances") != std::string::npos);
  const auto none = bad("");
  CHECK(none.first == 2);
  CHECK(none.second.find("--geometric-emittances") != std::string::npos);
}

TEST_CASE("Tune footprint: normalized emittances without a reference energy, and both kinds at once, are named") {
  const ft::Lattice ring = lens_ring(lens_2d(1.0, 3.6e-4, 3.6e-4));
  ft::LinearOptics optics = ft::compute_linear_optics(ft::without_beam_beam_lenses(ring));
  auto backend = ft::make_cpu_backend(ring);
  auto message = [&](const ft::FootprintOptions& o, const ft::LinearOptics& with) -> std::string {
    try {
      ft::tune_footprint(ring, with, *backend, o);
    } catch (const ft::InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  ft::FootprintOptions o;
  o.turns = 16;
  o.amplitudes = o.angles = 1;
  o.emittance_nx = o.emittance_ny = 2e-6;
  ft::LinearOptics no_energy = optics;
  no_energy.gamma0 = 0.0;  // as for a reference without p0c
  const std::string e1 = message(o, no_energy);
  CHECK(e1.find("'emittances'") != std::string::npos);
  CHECK(e1.find("reference energy") != std::string::npos);
  o.emittance_x = 1e-9;
  o.emittance_y = 1e-9;
  CHECK(message(o, optics).find("not both") != std::string::npos);
  o.emittance_nx = o.emittance_ny = 0.0;
  o.emittance_y = -1e-9;
  CHECK(message(o, optics).find("geometric emittances must be positive") != std::string::npos);
  o.emittance_y = 1e-9;
  CHECK(message(o, optics) == "(no error)");
}

}  // namespace test_beambeam_tune_shift

namespace test_beambeam_tune_shift {

TEST_CASE("Beam-beam lens knobs in a variants study: intensity and scale_strength scans give the tune shifts of xi") {
  // A study of the head-on round lens over the partner's intensity (N, 2 N) and the lens's scale_strength
  // (0, 0.5, 1): each variant's small-amplitude tune is the exact thin-lens tune of its own xi = s N r0 beta /
  // (4 pi gamma sigma^2), so the knobs reach the kick (its derived strength recomputed per variant).
  const ThinOptics ox = thin_optics(+1), oy = thin_optics(-1);
  const double sigma = 3.6e-4, r0 = classical_radius(), gamma = gamma0();
  const ft::Lattice base = lens_ring(lens_2d(-1.0, sigma, sigma));
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(R"({"fusetrack_variants": 1,
      "variants": [{"name": "nominal"},
                   {"name": "double", "elements": [{"name": "lens", "set": {"other_beam_num_particles": 2.2e11}}]}],
      "scans": [{"name": "lens", "field": "scale_strength", "values": [0.0, 0.5, 1.0]}]})");
  const ft::LatticeVariants study = ft::variants_from_json(base, doc, "lens_knobs.json");
  REQUIRE(study.size() == 6);
  for (size_t k = 0; k < study.size(); ++k) {
    const double intensity = k < 3 ? kPartnerParticles : 2.2e11, scale = 0.5 * static_cast<double>(k % 3);
    const double xi_x = scale * intensity * r0 * ox.beta / (4 * kPi * gamma * sigma * sigma);
    const double xi_y = scale * intensity * r0 * oy.beta / (4 * kPi * gamma * sigma * sigma);
    const Tunes t = tracked_tunes(study.lattices[k], 1e-3 * sigma, 1e-3 * sigma, ox.beta, oy.beta);
    CAPTURE(study.names[k]);
    CHECK(std::fabs(t.qx - exact_tune(ox.tune, xi_x / beta0())) < 1e-6 * std::max(xi_x, 1e-3));
    CHECK(std::fabs(t.qy - exact_tune(oy.tune, xi_y / beta0())) < 1e-6 * std::max(xi_y, 1e-3));
  }
}

}  // namespace test_beambeam_tune_shift
