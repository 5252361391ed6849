// Two beams colliding (ft::run_collide): physics against independent formulas, the schedule, the
// determinism across thread counts, and the set-up file's errors. Rank counts and placements:
// tests/mpi/multi_process_test.sh (collide_mpi).
//
// Independent inputs: the classical radius r0 = e / (4 pi eps0 m0[eV]) and the linear beam-beam
// parameter xi = -(q1 q2) N r0 beta / (2 pi gamma sigma_p (sigma_x + sigma_y)) (ultra-relativistic,
// counter-moving; positive = focusing), the thin-lens tune cos(2 pi Q') = cos(2 pi Q) - 2 pi xi sin(2 pi Q),
// the overlap integral of two Gaussian bunches, Piwinski's factor 1 / sqrt(1 + (sigma_z tan phi / sigma_x)^2)
// and the hourglass factor sqrt(pi) u e^{u^2} erfc(u), u = beta* / sigma_z (Herr & Muratori, CAS 2006).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/collider.h"
#include "fusetrack/cuda_collider.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/device/portable_math.h"
#include "fusetrack/device/random.h"
#include "fusetrack/error.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/optics.h"
#include "fusetrack/parallel.h"
#include "support/paths.h"
#include "support/registry.h"
#include "support/thread_ranks.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_collider.
namespace test_collider {

using namespace ft;
using ft::test::builtin_registry;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMassProton = 938272088.16;  // [eV]
constexpr double kP0c = 6.99999993712e12;     // [eV] 7 TeV
constexpr double kEmittance = 3.75e-6;        // normalised [m]

struct BeamSpec {
  double intensity = 1.15e11;
  size_t macroparticles = 10000;
  double emittance_nx = kEmittance, emittance_ny = kEmittance;
  double sigma_zeta = 0.0755, sigma_delta = 1.129e-4;
  double beta = 0.55, qx = 0.31, qy = 0.32, qs = 0.0;
  int bunches = 1;
  uint64_t seed = 1;
};

json beam_json(const BeamSpec& b, const std::string& name) {
  json map = {{"qx", b.qx}, {"qy", b.qy}, {"beta_x", b.beta}, {"beta_y", b.beta}, {"qs", b.qs},
              {"circumference", 26658.8832}};
  if (b.qs > 0) map["beta_s"] = b.sigma_zeta / b.sigma_delta;
  return {{"name", name},
          {"reference", {{"mass0", kMassProton}, {"q0", 1}, {"p0c", kP0c}}},
          {"linear_map", map},
          {"bunches",
           {{"count", b.bunches},
            {"intensity", b.intensity},
            {"macroparticles", b.macroparticles},
            {"emittance_nx", b.emittance_nx},
            {"emittance_ny", b.emittance_ny},
            {"sigma_zeta", b.sigma_zeta},
            {"sigma_delta", b.sigma_delta},
            {"seed", b.seed}}}};
}

json setup_json(const BeamSpec& b1, const BeamSpec& b2, const json& ip, const std::string& mode = "strong-strong") {
  json doc = {{"fusetrack_collider", "1"}, {"mode", mode}, {"beams", {beam_json(b1, "b1"), beam_json(b2, "b2")}},
              {"ip", ip}};
  return doc;
}

CollideResult collide(const json& doc, int64_t turns, int threads = 0) {
  const ColliderSetup setup = collider_setup_from_json(doc, "test_setup.json");
  CollideOptions o;
  o.turns = turns;
  o.threads = threads;
  return run_collide(setup, builtin_registry(), o, world());
}

double classical_radius() {
  const double e = 1.602176634e-19, eps0 = 8.8541878128e-12;
  return e / (4 * kPi * eps0 * kMassProton);
}

double gamma0() { return std::sqrt(kP0c * kP0c + kMassProton * kMassProton) / kMassProton; }

/// The linear beam-beam parameter on a particle of the other beam (same-sign charges, counter-
/// moving: defocusing, negative).
double xi(double n, double beta, double sigma_p, double sigma_x, double sigma_y) {
  return -n * classical_radius() * beta / (2 * kPi * gamma0() * sigma_p * (sigma_x + sigma_y));
}

double thin_lens_tune(double q, double xi_value) {
  return std::acos(std::cos(2 * kPi * q) - 2 * kPi * xi_value * std::sin(2 * kPi * q)) / (2 * kPi);
}

/// `doc` run on `ranks` threads standing for MPI ranks (tests/support/thread_ranks.h); every rank's result.
std::vector<CollideResult> collide_on_thread_ranks(const json& doc, int ranks, const CollideOptions& o) {
  const ColliderSetup setup = collider_setup_from_json(doc, "test_setup.json");
  ft::test::ThreadRanks threads(ranks);
  return threads.run<CollideResult>(
      [&](Communicator& comm) { return run_collide(setup, builtin_registry(), o, comm); });
}

/// The number of records of `b` that differ from `a`'s in any field or bit (or are missing).
size_t differing_records(const CollideResult& a, const CollideResult& b) {
  size_t differing =
      a.records.size() > b.records.size() ? a.records.size() - b.records.size() : b.records.size() - a.records.size();
  for (size_t k = 0; k < std::min(a.records.size(), b.records.size()); ++k) {
    const CrossingRecord &p = a.records[k], &q = b.records[k];
    const auto doubles = [](const CrossingRecord& r) {
      std::array<double, 17> d{r.alive,
                               r.luminosity,
                               r.sigma_x,
                               r.sigma_y,
                               r.sigma_zeta,
                               r.sigma_delta,
                               r.emittance_x,
                               r.emittance_y,
                               r.coupling,
                               r.unused_charge,
                               static_cast<double>(r.turn)};
      std::copy(r.mean.begin(), r.mean.end(), d.begin() + 11);
      return d;
    };
    const std::array<double, 17> u = doubles(p), v = doubles(q);
    if (p.slot != q.slot || p.beam != q.beam || p.bunch != q.bunch || p.partner != q.partner ||
        std::memcmp(u.data(), v.data(), sizeof(u)) != 0)
      ++differing;
  }
  return differing;
}

const CrossingRecord& first_record(const CollideResult& r, int beam) {
  for (const CrossingRecord& rec : r.records)
    if (rec.beam == beam && rec.turn == 0) return rec;
  FAIL("no record of beam ", beam);
  return r.records.front();
}

}  // namespace

TEST_CASE("collide, weak-strong 4D: the centroid tune of a weak bunch equals the thin-lens tune shift of the linear "
          "beam-beam parameter, round and flat strong beam") {
  for (const double flat : {1.0, 9.0}) {
    BeamSpec weak, strong;
    weak.emittance_nx = weak.emittance_ny = kEmittance * 1e-3;  // sizes 1/32 of the strong beam's: linear field
    weak.macroparticles = 2000;
    weak.sigma_delta = 0.0;
    strong.intensity = 3.1e11;
    strong.emittance_ny = kEmittance / flat;
    strong.macroparticles = 200000;
    strong.seed = 7;
    const json doc = setup_json(weak, strong, {{"model", "4d"}}, "weak-strong");
    const CollideResult r = collide(doc, 2048);
    const CrossingRecord& s = first_record(r, 1);  // the strong bunch as sampled
    const double xi_x = xi(strong.intensity, weak.beta, s.sigma_x, s.sigma_x, s.sigma_y);
    const double xi_y = xi(strong.intensity, weak.beta, s.sigma_y, s.sigma_x, s.sigma_y);
    const double qx = thin_lens_tune(weak.qx, xi_x), qy = thin_lens_tune(weak.qy, xi_y);
    const BunchSummary& w = r.bunches.at(0);
    MESSAGE("sigma_y / sigma_x = ", s.sigma_y / s.sigma_x, ": xi = (", xi_x, ", ", xi_y, "); Qx ", w.peak_tune_x,
            " (thin lens ", qx, "), Qy ", w.peak_tune_y, " (", qy, "); shifts measured / expected ",
            (w.peak_tune_x - weak.qx) / (qx - weak.qx), ", ", (w.peak_tune_y - weak.qy) / (qy - weak.qy));
    CHECK(std::fabs(r.xi[0][0] / xi_x - 1) < 0.02);  // the run's own xi (matched sizes) agrees
    CHECK(std::fabs(w.peak_tune_x - qx) < 0.02 * std::fabs(qx - weak.qx));
    CHECK(std::fabs(w.peak_tune_y - qy) < 0.02 * std::fabs(qy - weak.qy));
    CHECK(r.bunches.at(1).final_alive == static_cast<double>(strong.macroparticles));
  }
}

TEST_CASE("collide, strong-strong 4D: sigma mode at the unperturbed tune, pi mode shifted by Y xi with Y between the "
          "rigid-bunch 1 and the Vlasov 1.21 (plus 10%)") {
  BeamSpec b1, b2;
  b1.intensity = b2.intensity = 3.1e11;  // xi = -0.01
  b1.macroparticles = b2.macroparticles = 5000;
  b1.sigma_delta = b2.sigma_delta = 0.0;
  b2.seed = 2;
  const CollideResult r = collide(setup_json(b1, b2, {{"model", "4d"}}), 2048);
  const double xi_value = r.xi[0][0];
  for (int plane = 0; plane < 2; ++plane) {
    const double q = plane == 0 ? b1.qx : b1.qy;
    const double y = (r.pi_mode[plane] - q) / xi_value;
    MESSAGE("plane ", plane, ": sigma mode ", r.sigma_mode[plane], ", pi mode ", r.pi_mode[plane], " (Q ", q,
            ", xi ", xi_value, ", Y = ", y, ")");
    CHECK(std::fabs(r.sigma_mode[plane] - q) < 0.1 * std::fabs(xi_value));
    CHECK(y > 0.95);
    CHECK(y < 1.33);
  }
}

TEST_CASE("collide: luminosity of the first crossing, head-on 4D = the overlap of the two sampled Gaussians, with "
          "crossing angle (Piwinski) and hourglass against the analytic factors") {
  BeamSpec b1, b2;
  b1.macroparticles = b2.macroparticles = 100000;
  b2.seed = 2;
  const auto overlap = [&](const CollideResult& r) {
    const CrossingRecord& a = first_record(r, 0);
    const CrossingRecord& b = first_record(r, 1);
    const double sx = a.sigma_x * a.sigma_x + b.sigma_x * b.sigma_x, sy = a.sigma_y * a.sigma_y + b.sigma_y * b.sigma_y;
    const double dx = a.mean[0] + b.mean[0], dy = a.mean[2] - b.mean[2];  // beam 2's x is reversed
    return b1.intensity * b2.intensity * std::exp(-0.5 * (dx * dx / sx + dy * dy / sy)) / (2 * kPi * std::sqrt(sx * sy));
  };
  {
    const CollideResult r = collide(setup_json(b1, b2, {{"model", "4d"}}), 1);
    const double expected = overlap(r), got = first_record(r, 0).luminosity;
    MESSAGE("head-on 4D: ", got, " /m^2, overlap of the sampled bunches ", expected);
    // The kick and the luminosity include the bunches' sampled x-y correlations (~1/sqrt(N)), which
    // the records do not carry: they change the overlap by ~r^2 = 1e-7 here.
    CHECK(std::fabs(got / expected - 1) < 1e-6);
    CHECK(std::fabs(first_record(r, 1).luminosity / got - 1) < 1e-12);  // beam 2's owner computes the same
  }
  {
    // Piwinski: beta* = 10 m >> sigma_z (no hourglass), sigma_z tan(phi) = sigma_x.
    b1.beta = b2.beta = 10.0;
    const double sigma_x = std::sqrt(kEmittance / (gamma0() * 1.0) * 10.0);  // beta0 ~ 1
    const double phi = std::atan(sigma_x / b1.sigma_zeta);
    const CollideResult head_on = collide(setup_json(b1, b2, {{"model", "6d"}, {"slices", 31}}), 1);
    const CollideResult crossing =
        collide(setup_json(b1, b2, {{"model", "6d"}, {"slices", 31}, {"half_crossing_angle", phi}}), 1);
    const double ratio = first_record(crossing, 0).luminosity / first_record(head_on, 0).luminosity;
    const double piwinski = 1 / std::sqrt(1 + std::pow(b1.sigma_zeta * std::tan(phi) / sigma_x, 2));
    MESSAGE("crossing angle: L / L(head-on) = ", ratio, ", Piwinski ", piwinski);
    CHECK(std::fabs(ratio / piwinski - 1) < 0.01);
    const double head_on_overlap = overlap(head_on);  // no hourglass at beta* = 10 m: within 0.1%
    CHECK(std::fabs(first_record(head_on, 0).luminosity / head_on_overlap - 1) < 2e-3);
  }
  {
    // Hourglass: beta* = sigma_z, head-on.
    b1.beta = b2.beta = b1.sigma_zeta;
    const CollideResult r = collide(setup_json(b1, b2, {{"model", "6d"}, {"slices", 31}}), 1);
    const double ratio = first_record(r, 0).luminosity / overlap(r);
    const double u = b1.beta / b1.sigma_zeta;
    const double hourglass = std::sqrt(kPi) * u * std::exp(u * u) * std::erfc(u);
    MESSAGE("hourglass (beta* = sigma_z): L / L0 = ", ratio, ", analytic ", hourglass);
    CHECK(std::fabs(ratio / hourglass - 1) < 0.01);
  }
}

TEST_CASE("collide: n and n-1 bunches meet a different partner every turn, records are bitwise the same for 1 and 2 "
          "threads") {
  BeamSpec b1, b2;
  b1.bunches = 3;
  b2.bunches = 2;
  b1.macroparticles = b2.macroparticles = 3000;
  b1.qs = b2.qs = 0.002;
  b2.seed = 2;
  const json doc = setup_json(b1, b2, {{"model", "6d"}, {"slices", 5}, {"half_crossing_angle", 1.5e-4}});
  const CollideResult one = collide(doc, 4, 1), two = collide(doc, 4, 2);
  REQUIRE(one.records.size() == 2 * 12);
  REQUIRE(two.records.size() == one.records.size());
  for (size_t k = 0; k < one.records.size(); ++k) {
    const CrossingRecord &a = one.records[k], &b = two.records[k];
    CHECK(a.slot == static_cast<int64_t>(k / 2));
    CHECK(a.bunch == static_cast<int>((k / 2) % (a.beam == 0 ? 3 : 2)));
    CHECK(a.partner == static_cast<int>((k / 2) % (a.beam == 0 ? 2 : 3)));
    CHECK(std::memcmp(a.mean.data(), b.mean.data(), sizeof(a.mean)) == 0);
    CHECK(std::memcmp(&a.luminosity, &b.luminosity, sizeof(double)) == 0);
    CHECK(std::memcmp(&a.emittance_x, &b.emittance_x, sizeof(double)) == 0);
  }
  // Bunch 0 of beam 1 met partners 0, 1, 0, 1 on its four turns.
  int seen = 0;
  for (const CrossingRecord& r : one.records)
    if (r.beam == 0 && r.bunch == 0) CHECK(r.partner == (seen++) % 2);
  CHECK(seen == 4);
}

TEST_CASE(
    "collider bunches: the counter-based Gaussian generator equals an independent evaluation, has the "
    "requested means and covariances (emittances, beta, alpha, dispersion, closed orbit) within the statistical "
    "errors of 10^5 particles, and gives the same bits for any thread count and share") {
  ReferenceParticle ref;
  ref.mass0 = kMassProton;
  ref.p0c = 2e9;
  LinearOptics o;
  o.beta_x = 12.0, o.alpha_x = -1.3, o.gamma_x = (1 + 1.3 * 1.3) / 12.0;
  o.beta_y = 3.0, o.alpha_y = 0.7, o.gamma_y = (1 + 0.7 * 0.7) / 3.0;
  o.dx = 1.5, o.dpx = 0.05, o.dy = 0.2, o.dpy = -0.01;
  o.closed_orbit = {1e-3, -2e-5, 3e-4, 1e-5, 0.02, 1e-4};
  const double eps_nx = 2e-6, eps_ny = 1e-6, sz = 0.3, sd = 1e-3;
  const uint64_t seed = 77;
  const size_t n = 100000;
  const ft_gaussian_bunch g = gaussian_bunch(ref, o, eps_nx, eps_ny, sz, sd);
  const Particles p = sample_gaussian_bunch(g, seed, 0, n, 2);
  REQUIRE(p.size() == n);

  // Independent evaluation: draws 0, 1, 2 of particle i, each Box-Muller's cosine branch (ft_box_muller) and sine
  // branch, then make_gaussian's transformation written out.
  const double bg = ref.beta0() * ref.gamma0();
  const double sex = std::sqrt(eps_nx / bg), sey = std::sqrt(eps_ny / bg);
  const double sbx = std::sqrt(o.beta_x), sby = std::sqrt(o.beta_y);
  const auto& co = o.closed_orbit;
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    double gn[6];
    for (unsigned draw = 0; draw < 3; ++draw) {
      const ft_philox_block r = ft_particle_random(seed, i, draw);
      const double u1 = ft_uniform53(r.v[0], r.v[1]), u2 = ft_uniform53(r.v[2], r.v[3]);
      gn[2 * draw] = ft_box_muller(u1, u2);
      gn[2 * draw + 1] = std::sqrt(-2.0 * portable::log(1.0 - u1)) * portable::sin(6.283185307179586 * u2);
    }
    const double xh = sex * gn[0], pxh = sex * gn[1], yh = sey * gn[2], pyh = sey * gn[3];
    const double dz = sz * gn[4], dd = sd * gn[5];
    const ParticleView v = make_particle(
        co[0] + sbx * xh + o.dx * dd, co[1] + (pxh - o.alpha_x * xh) / sbx + o.dpx * dd, co[2] + sby * yh + o.dy * dd,
        co[3] + (pyh - o.alpha_y * yh) / sby + o.dpy * dd, co[4] + dz, co[5] + dd, ref.beta0());
    const double got[9] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i], p.ptau[i], p.rpp[i], p.rvv[i]};
    const double want[9] = {v.x, v.px, v.y, v.py, v.zeta, v.delta, v.ptau, v.rpp, v.rvv};
    if (std::memcmp(got, want, sizeof(got)) != 0 || p.state[i] != kAlive || p.lost_turn[i] != -1 ||
        p.lost_element[i] != -1 || p.id[i] != static_cast<int64_t>(i))
      ++wrong;
  }
  CHECK(wrong == 0);

  // Moments: v = A w with w = (x^, px^, y^, py^, zeta, delta) - orbit independent, of variances (eps_x, eps_x,
  // eps_y, eps_y, sz^2, sd^2): Sigma = A W A^T. Each sample covariance within 5 standard errors
  // sqrt((S_aa S_bb + S_ab^2) / N) (Gaussian), each mean within 5 sqrt(S_aa / N).
  const double A[6][6] = {{sbx, 0, 0, 0, 0, o.dx}, {-o.alpha_x / sbx, 1 / sbx, 0, 0, 0, o.dpx},
                          {0, 0, sby, 0, 0, o.dy}, {0, 0, -o.alpha_y / sby, 1 / sby, 0, o.dpy},
                          {0, 0, 0, 0, 1, 0},      {0, 0, 0, 0, 0, 1}};
  const double w[6] = {sex * sex, sex * sex, sey * sey, sey * sey, sz * sz, sd * sd};
  double sigma[6][6] = {}, mean[6] = {}, cov[6][6] = {};
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b)
      for (int k = 0; k < 6; ++k) sigma[a][b] += A[a][k] * w[k] * A[b][k];
  const std::vector<double>* c[6] = {&p.x, &p.px, &p.y, &p.py, &p.zeta, &p.delta};
  for (int a = 0; a < 6; ++a) {
    for (size_t i = 0; i < n; ++i) mean[a] += (*c[a])[i];
    mean[a] /= static_cast<double>(n);
  }
  for (int a = 0; a < 6; ++a)
    for (int b = a; b < 6; ++b) {
      for (size_t i = 0; i < n; ++i) cov[a][b] += ((*c[a])[i] - mean[a]) * ((*c[b])[i] - mean[b]);
      cov[a][b] /= static_cast<double>(n - 1);
    }
  const double N = static_cast<double>(n);
  int checked = 0;
  for (int a = 0; a < 6; ++a) {
    CHECK(std::fabs(mean[a] - co[static_cast<size_t>(a)]) < 5 * std::sqrt(sigma[a][a] / N));
    for (int b = a; b < 6; ++b) {
      const double error = std::sqrt((sigma[a][a] * sigma[b][b] + sigma[a][b] * sigma[a][b]) / N);
      INFO("covariance (", a, ", ", b, "): ", cov[a][b], " expected ", sigma[a][b], " +- ", error);
      CHECK(std::fabs(cov[a][b] - sigma[a][b]) < 5 * error);
      ++checked;
    }
  }
  CHECK(checked == 21);
  // The rms emittance of the dispersion-free part: sqrt(det) of (x, px) - D delta.
  MESSAGE("eps_x: sampled ",
          std::sqrt((cov[0][0] - o.dx * o.dx * sd * sd) * (cov[1][1] - o.dpx * o.dpx * sd * sd) -
                    std::pow(cov[0][1] - o.dx * o.dpx * sd * sd, 2)),
          ", requested ", sex * sex);

  // Any thread count, any share, any call: the same bits (ids of the share: its global indices).
  const Particles one_thread = sample_gaussian_bunch(g, seed, 0, n, 1);
  const Particles share = sample_gaussian_bunch(g, seed, 1000, 500, 2);
  const auto same = [](const auto& u, const auto& v, size_t from, size_t count) {
    return std::memcmp(u.data() + from, v.data(), count * sizeof(u[0])) == 0;
  };
  for (const auto& q : {one_thread, sample_gaussian_bunch(g, seed, 0, n, 2)}) {
    CHECK(same(p.x, q.x, 0, n));
    CHECK(same(p.px, q.px, 0, n));
    CHECK(same(p.py, q.py, 0, n));
    CHECK(same(p.delta, q.delta, 0, n));
    CHECK(same(p.rvv, q.rvv, 0, n));
  }
  CHECK(same(p.x, share.x, 1000, 500));
  CHECK(same(p.zeta, share.zeta, 1000, 500));
  CHECK(same(p.ptau, share.ptau, 1000, 500));
  CHECK(same(p.id, share.id, 1000, 500));
  CHECK(share.id.front() == 1000);
  CHECK(sample_gaussian_bunch(g, seed + 1, 0, 10, 1).x[3] != p.x[3]);
  CHECK_THROWS_AS(gaussian_bunch(ref, o, -1.0, eps_ny, sz, sd), InputError);
}

TEST_CASE(
    "collide: the wave schedule gives every record bitwise equal to the slot-by-slot walk for 1, 2 and 3 ranks "
    "in both placements, 4 + 3 bunches (gear change), strong-strong and weak-strong, checkpoints inside waves") {
  BeamSpec b1, b2;
  b1.bunches = 4;
  b2.bunches = 3;
  b1.macroparticles = b2.macroparticles = 1500;
  b1.qs = b2.qs = 0.002;
  b2.seed = 2;
  const json ip = {{"model", "6d"}, {"slices", 5}, {"half_crossing_angle", 1.5e-4}};
  const std::string base = std::filesystem::temp_directory_path().string() + "/fusetrack_collide_waves_";
  for (const char* mode : {"strong-strong", "weak-strong"}) {
    const json doc = setup_json(b1, b2, ip, mode);
    CollideOptions o;
    o.turns = 5;
    o.threads = 1;
    o.backend.device = "cpu";
    CollideOptions by_slot = o;
    by_slot.wave_slots = 1;
    const CollideResult reference = collide_on_thread_ranks(doc, 1, by_slot).at(0);
    REQUIRE(reference.records.size() == 2 * 20);
    int runs = 0;
    for (int ranks = 1; ranks <= 3; ++ranks)
      for (const BunchPlacement placement : {BunchPlacement::block, BunchPlacement::round_robin}) {
        CollideOptions r = o;
        r.placement = placement;
        if (ranks == 3) {  // checkpoints every turn (4 slots): waves of 3 + 1 slots between them
          r.checkpoint_every = 1;
          r.output_dir = base + mode + std::to_string(static_cast<int>(placement));
          std::filesystem::remove_all(r.output_dir);
        }
        const std::vector<CollideResult> results = collide_on_thread_ranks(doc, ranks, r);
        INFO(mode, ", ", ranks, " ranks, placement ", static_cast<int>(placement));
        CHECK(differing_records(reference, results.at(0)) == 0);
        for (const CollideResult& other : results) CHECK(other.idle_ranks == 0);
        ++runs;
      }
    CHECK(runs == 6);
  }
  CollideOptions o;
  o.wave_slots = 4;  // more than min(4, 3): crossings of one bunch in one wave
  CHECK_THROWS_WITH_AS(
      run_collide(collider_setup_from_json(setup_json(b1, b2, ip), "s.json"), builtin_registry(), o, world()),
      doctest::Contains("wave_slots"), InputError);
}

TEST_CASE(
    "collide: more ranks than bunches, the idle ranks are counted and the records equal one rank's (the "
    "line on rank 0: tests/mpi, collide_mpi)") {
  BeamSpec b1, b2;
  b1.macroparticles = b2.macroparticles = 1000;
  b2.seed = 2;
  for (const int bunches1 : {1, 2}) {
    b1.bunches = bunches1;
    const json doc = setup_json(b1, b2, {{"model", "4d"}});
    CollideOptions o;
    o.turns = 4;
    o.threads = 1;
    o.backend.device = "cpu";
    const CollideResult one = collide_on_thread_ranks(doc, 1, o).at(0);
    const std::vector<CollideResult> four = collide_on_thread_ranks(doc, 4, o);
    // Block placement of 1 + 1 bunches on 4 ranks: ranks 0 and 2; of 2 + 1: ranks 0, 1, 2.
    const int idle = bunches1 == 1 ? 2 : 1;
    for (const CollideResult& r : four) CHECK(r.idle_ranks == idle);
    CHECK(one.idle_ranks == 0);
    REQUIRE(one.records.size() == static_cast<size_t>(2 * 4 * bunches1));
    CHECK(differing_records(one, four.at(0)) == 0);
    CHECK(four.at(1).records.empty());  // records are rank 0's
  }
}

TEST_CASE("collide set-up: bad input names the file and the field") {
  BeamSpec b;
  const json good = setup_json(b, b, {{"model", "6d"}, {"slices", 5}});
  CHECK_NOTHROW(collider_setup_from_json(good, "s.json"));
  const auto message = [](const json& doc) {
    try {
      collider_setup_from_json(doc, "s.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json d = good;
  d["beams"][1]["bunches"]["intensity"] = -1;
  CHECK(message(d).find("s.json") != std::string::npos);
  CHECK(message(d).find("beams[1].bunches.intensity") != std::string::npos);
  d = good;
  d["beams"][0]["bunches"].erase("macroparticles");
  CHECK(message(d).find("beams[0].bunches.macroparticles") != std::string::npos);
  d = good;
  d["ip"]["slicez"] = 3;
  CHECK(message(d).find("ip.slicez") != std::string::npos);
  CHECK(message(d).find("unknown field") != std::string::npos);
  d = good;
  d["ip"]["model"] = "4d";
  CHECK(message(d).find("ip.slices") != std::string::npos);
  d = good;
  d["beams"][0]["lattice"] = "ring.json";
  CHECK(message(d).find("exactly one of") != std::string::npos);
  d = good;
  d["beams"][0]["linear_map"]["beta_x"] = 0;
  CHECK(message(d).find("beams[0].linear_map.beta_x") != std::string::npos);
  d = good;
  d["beams"][1]["reference"]["p0c"] = "7 TeV";
  CHECK(message(d).find("beams[1].reference.p0c") != std::string::npos);
  d = good;
  d["beams"][0]["bunches"]["count"] = 0;
  CHECK(message(d).find("beams[0].bunches.count") != std::string::npos);
  d = good;
  d["ip"]["slices"] = 0;
  CHECK(message(d).find("ip.slices") != std::string::npos);
  d = good;
  d["beams"][1]["linear_map"].erase("beta_y");  // a crossing needs the optics at the IP
  CHECK(message(d).find("beams[1].linear_map.beta_y") != std::string::npos);
  d = good;
  d["mode"] = "weak";
  CHECK(message(d).find("mode") != std::string::npos);
  d = good;
  d["beams"].erase(1);
  CHECK(message(d).find("exactly two beams") != std::string::npos);
  d = good;
  d["ip"]["half_crossing_angle"] = std::nan("");
  CHECK(message(d) != "no error");
  // A lattice ring whose file does not exist: the error names it when the run starts.
  d = good;
  d["beams"][0].erase("linear_map");
  d["beams"][0]["lattice"] = "no_such_ring.json";
  const ColliderSetup s = collider_setup_from_json(d, "s.json");
  CollideOptions o;
  CHECK_THROWS_WITH_AS(run_collide(s, builtin_registry(), o, world()), doctest::Contains("no_such_ring.json"),
                       InputError);
}

TEST_CASE(
    "NVRTC compiles the collider's GPU kernels (the Gaussian bunch generator, arrival: record sums, boost, slice "
    "moments, departure: kick, linear turn), fma off and on") {
  for (const char* entry : {"collider_gaussian_bunch", "collider_arrival", "collider_departure"})
    CHECK(std::string(collider_kernel_source()).find(entry) != std::string::npos);
  for (const char* fma : {"off", "on"}) {
    KernelSource src;
    src.name = "fusetrack_collider_test.cu";
    src.headers = framework_device_headers();
    src.text = collider_kernel_source();
    src.fma = std::string(fma) == "on" ? FmaMode::On : FmaMode::Off;
    CompiledKernel k;
    CHECK_NOTHROW(k = KernelCompiler("off").compile(src, 90));  // "off": no kernel cache
    CHECK(!k.cubin.empty());
  }
}

TEST_CASE("collide --device gpu without a GPU: a clear DeviceError, auto falls back to the CPU") {
  if (!gpu_unavailable_reason().empty()) {
    BeamSpec b;
    b.macroparticles = 500;
    const ColliderSetup s = collider_setup_from_json(setup_json(b, b, {{"model", "4d"}}), "s.json");
    CollideOptions o;
    o.backend.device = "gpu";
    CHECK_THROWS_AS(run_collide(s, builtin_registry(), o, world()), DeviceError);
    o.backend.device = "auto";
    const CollideResult r = run_collide(s, builtin_registry(), o, world());
    CHECK(r.device == "CPU");
    CHECK(r.records.size() == 2);
  } else {
    MESSAGE("a GPU is present: the fallback is not exercised here (tests/gpu covers the GPU path)");
    CHECK(gpu_unavailable_reason().empty());
  }
}

}  // namespace test_collider
