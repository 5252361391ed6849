// Particle-in-cell space charge (SpaceChargePIC, a grid collective element) on the CPU backend:
// bitwise reproducibility (threads, particle order, two emulated MPI ranks), exact charge
// conservation of the deposit, the kick of a round Gaussian beam against the Bassetti-Erskine round
// field (computed here), the incoherent tune shift against the Laslett formula, particles outside
// the grid counted, and bad input named. The GPU segment kernels are compiled with NVRTC here (no
// GPU needed); tests/gpu/test_gpu_space_charge.cpp runs them.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/compare.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/parallel.h"
#include "fusetrack/space_charge.h"
#include "support/emulated_ranks.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_space_charge_pic.
namespace test_space_charge_pic {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEps0 = 8.8541878128e-12;        // [F/m]
constexpr double kE = 1.602176634e-19;            // [C]
constexpr double kProtonMass = 938272088.16;      // [eV]
constexpr double kProtonRadius = 1.53469833e-18;  // [m] classical proton radius e^2 / (4 pi eps0 m c^2)

struct ScRing {
  double p0c = 1e9;                  // [eV]
  double intensity = 1.7e10;         // protons per bunch
  std::string model = "2.5D";
  int nodes_x = 64, nodes_y = 64, nodes_zeta = 16;
  bool adapt_transverse = true;      // else x, y in [-half_extent, half_extent]
  double half_extent = 6e-3;         // [m]
  double zeta_half = 12.0;           // [m] fixed zeta extent [-zeta_half, zeta_half]; 0: adapted
  bool second_element = true;        // a second SpaceChargePIC (3D, fixed grid) after qd
  double k1l_qf_half = 0.01, k1l_qd = -0.02;  // [1/m] thin quadrupoles (47 deg per cell)
};

/// Two thin-quadrupole FODO cells of 80 m (160 m; sin(mu/2) = L k1l / 2 = 0.4 per cell) with a
/// SpaceChargePIC after qf_half and, optionally, one after the first qd; each stands for half the ring.
json sc_ring_json(const ScRing& o) {
  json sc = {{"type", "SpaceChargePIC"}, {"length", 80.0},          {"intensity", o.intensity}, {"model", o.model},
             {"nodes_x", o.nodes_x},     {"nodes_y", o.nodes_y},    {"nodes_zeta", o.nodes_zeta}};
  if (!o.adapt_transverse) {
    sc["x_min"] = -o.half_extent;
    sc["x_max"] = o.half_extent;
    sc["y_min"] = -o.half_extent;
    sc["y_max"] = o.half_extent;
  }
  if (o.zeta_half > 0) {
    sc["zeta_min"] = -o.zeta_half;
    sc["zeta_max"] = o.zeta_half;
  }
  json sc2 = sc;
  sc2["model"] = "3D";
  sc2["x_min"] = -o.half_extent, sc2["x_max"] = o.half_extent, sc2["y_min"] = -o.half_extent, sc2["y_max"] = o.half_extent;
  sc2["zeta_min"] = -12.0, sc2["zeta_max"] = 12.0;
  json elements = {{"qf_half", {{"type", "Multipole"}, {"knl", {0.0, o.k1l_qf_half}}}},
                   {"qd", {{"type", "Multipole"}, {"knl", {0.0, o.k1l_qd}}}},
                   {"d", {{"type", "Drift"}, {"length", 40.0}}},
                   {"sc", sc},
                   {"sc3d", sc2}};
  json sequence = {"qf_half", "sc", "d", "qd"};
  if (o.second_element) sequence.push_back("sc3d");
  for (const char* e : {"d", "qf_half", "qf_half", "d", "qd", "d", "qf_half"}) sequence.push_back(e);
  return {{"fusetrack_lattice", 1},
          {"description", "space-charge test ring"},
          {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", o.p0c}}},
          {"elements", elements},
          {"sequence", sequence}};
}

Lattice sc_ring(const ScRing& o) { return lattice_from_json(sc_ring_json(o), "sc_ring.json", ft::test::builtin_registry()); }

/// Twiss beta and alpha at the start of a thin-lens FODO ring of `cells` cells (qf_half, d, qd, d,
/// qf_half; plane sign +1: x, -1: y), from the one-turn matrix computed here.
void fodo_twiss(double k1l_qf_half, double k1l_qd, double drift, int sign, double* beta, double* alpha, double* tune,
                int cells = 2) {
  auto mul = [](const double a[4], const double b[4], double out[4]) {
    const double r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                         a[2] * b[1] + a[3] * b[3]};
    for (int k = 0; k < 4; ++k) out[k] = r[k];
  };
  const double qf[4] = {1, 0, -sign * k1l_qf_half, 1}, qd[4] = {1, 0, -sign * k1l_qd, 1}, d[4] = {1, drift, 0, 1};
  double m[4] = {1, 0, 0, 1};
  for (int c = 0; c < cells; ++c)
    for (const double* e : {qf, d, qd, d, qf}) mul(e, m, m);
  const double cos_mu = 0.5 * (m[0] + m[3]);
  const double sin_mu = std::sqrt(1.0 - cos_mu * cos_mu) * (m[1] > 0 ? 1.0 : -1.0);
  *beta = m[1] / sin_mu;
  *alpha = (m[0] - m[3]) / (2.0 * sin_mu);
  *tune = std::acos(cos_mu) / (2.0 * kPi);
}

/// A matched Gaussian bunch (geometric rms emittances ex, ey at the ring's start), zeta uniform in
/// [-half_length, half_length] (or Gaussian with sigma_zeta when gaussian_zeta), delta 0.
Particles sc_bunch(const Lattice& lattice, size_t n, double ex, double ey, double half_length, uint64_t seed = 7,
                   bool gaussian_zeta = false, const ScRing& ring = {}) {
  double bx, ax, qx, by, ay, qy;
  fodo_twiss(ring.k1l_qf_half, ring.k1l_qd, 40.0, +1, &bx, &ax, &qx);
  fodo_twiss(ring.k1l_qf_half, ring.k1l_qd, 40.0, -1, &by, &ay, &qy);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> u(-half_length, half_length);
  Particles p(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const double u1 = g(rng), u2 = g(rng), v1 = g(rng), v2 = g(rng);
    const double x = std::sqrt(ex * bx) * u1, px = std::sqrt(ex / bx) * (u2 - ax * u1);
    const double y = std::sqrt(ey * by) * v1, py = std::sqrt(ey / by) * (v2 - ay * v1);
    const double z = gaussian_zeta ? half_length * g(rng) : u(rng);
    p.set(i, x, px, y, py, z, 0.0);
  }
  return p;
}

/// The particles in reverse order, every array reversed (ids, states and derived coordinates too).
/// The radical inverse of i in `base` (Halton sequence).
double halton(uint64_t i, uint64_t base) {
  double f = 1.0, r = 0.0;
  for (; i > 0; i /= base) {
    f /= static_cast<double>(base);
    r += f * static_cast<double>(i % base);
  }
  return r;
}

/// A quiet-start matched Gaussian bunch: actions and phases from a 4D Halton sequence (bases 2, 3, 5,
/// 7; J = -eps ln(1 - u)), zeta stratified over [-half_length, half_length] in a shuffled order
/// (base 11). The number of particles with small actions, which alone sets the time-averaged charge
/// density on the axis (actions are invariants), is then right to O(log^2 N / N) instead of the
/// frozen 1/sqrt(N) of random sampling.
Particles quiet_bunch(const Lattice& lattice, size_t n, double eps, double half_length, const ScRing& ring) {
  double bx, ax, qx, by, ay, qy;
  fodo_twiss(ring.k1l_qf_half, ring.k1l_qd, 40.0, +1, &bx, &ax, &qx);
  fodo_twiss(ring.k1l_qf_half, ring.k1l_qd, 40.0, -1, &by, &ay, &qy);
  Particles p(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = i + 1;
    const double jx = -eps * std::log(1.0 - halton(k, 2)), jy = -eps * std::log(1.0 - halton(k, 3));
    const double fx = 2.0 * kPi * halton(k, 5), fy = 2.0 * kPi * halton(k, 7);
    const double x = std::sqrt(2.0 * jx * bx) * std::cos(fx), px = -std::sqrt(2.0 * jx / bx) * (std::sin(fx) + ax * std::cos(fx));
    const double y = std::sqrt(2.0 * jy * by) * std::cos(fy), py = -std::sqrt(2.0 * jy / by) * (std::sin(fy) + ay * std::cos(fy));
    p.set(i, x, px, y, py, half_length * (2.0 * halton(k, 11) - 1.0), 0.0);
  }
  return p;
}

Particles reversed(const Particles& p) {
  Particles r = p;
  auto flip = [](auto& v) { std::reverse(v.begin(), v.end()); };
  flip(r.x), flip(r.px), flip(r.y), flip(r.py), flip(r.zeta), flip(r.delta), flip(r.ptau), flip(r.rpp), flip(r.rvv);
  flip(r.state), flip(r.lost_turn), flip(r.lost_element), flip(r.id), flip(r.variant);
  return r;
}

using test::RankSum;

Particles slice_of(const Particles& p, size_t begin, size_t end) { return slice_particles(p, begin, end); }

/// Tracks `p` on the CPU backend for `turns` (warnings off; `threads` 0: the OpenMP default) and returns the
/// grid elements' reports.
std::vector<GridCollectiveReport> grid_reports_of_cpu_run(const Lattice& lattice, Particles& p, int turns,
                                                          int threads = 0) {
  TrackOptions opt;
  opt.turns = turns;
  opt.threads = threads;
  opt.warnings = false;
  auto cpu = make_cpu_backend(lattice);
  cpu->track(p, opt);
  return cpu->grid_reports();
}

/// E_r of a round Gaussian beam (rms sigma) of line density lambda [C/m] at radius r [V/m]
/// (Gauss's law; the round limit of Bassetti-Erskine): lambda / (2 pi eps0 r) (1 - exp(-r^2 / 2 sigma^2)).
double round_gaussian_er(double lambda, double sigma, double r) {
  if (r < 1e-12 * sigma) return lambda * r / (4.0 * kPi * kEps0 * sigma * sigma);
  return lambda / (2.0 * kPi * kEps0 * r) * (1.0 - std::exp(-r * r / (2.0 * sigma * sigma)));
}

}  // namespace

TEST_CASE("space charge PIC: identical particles for 1 and 2 threads and any particle order (2.5D adapted, 3D fixed)") {
  ScRing o;
  o.intensity = 5e11;  // a strong kick: differences would show
  const Lattice lattice = sc_ring(o);
  const Particles initial = sc_bunch(lattice, 3000, 2e-6, 1e-6, 8.0);
  TrackOptions opt;
  opt.turns = 4;
  opt.warnings = false;
  Particles a = initial, b = initial, c = reversed(initial);
  opt.threads = 1;
  auto cpu1 = make_cpu_backend(lattice);
  cpu1->track(a, opt);
  opt.threads = 2;
  auto cpu2 = make_cpu_backend(lattice);
  cpu2->track(b, opt);
  auto cpu3 = make_cpu_backend(lattice);
  cpu3->track(c, opt);
  CHECK(compare_particles(a, b).identical());
  CHECK(compare_particles(a, reversed(c)).identical());
  // The kick acted: px changed by more than the lattice alone gives.
  Particles free_particles = initial;
  TrackOptions skip = opt;
  skip.collective = false;
  make_cpu_backend(lattice)->track(free_particles, skip);
  double max_dpx = 0;
  for (size_t i = 0; i < a.size(); ++i) max_dpx = std::max(max_dpx, std::fabs(a.px[i] - free_particles.px[i]));
  const auto reports = cpu1->grid_reports();
  REQUIRE(reports.size() == 2);
  MESSAGE("max |Delta px| from space charge ", max_dpx, "; 2.5D grid x [", reports[0].min[0], ", ", reports[0].max[0],
          "] m, max |E| ", reports[0].max_field, " V/m; 3D max |E| ", reports[1].max_field, " V/m");
  CHECK(max_dpx > 1e-6);
  CHECK(reports[0].turns == 4);
  CHECK(reports[0].solver_builds >= 1);
  CHECK(cpu1->collective_snapshots().empty());  // no profile elements
}

TEST_CASE("space charge PIC: two emulated MPI ranks give the single run's particles bitwise") {
  ScRing o;
  o.intensity = 5e11;
  const Lattice lattice = sc_ring(o);
  const Particles initial = sc_bunch(lattice, 2000, 2e-6, 1e-6, 8.0, 11);
  TrackOptions opt;
  opt.turns = 3;
  opt.threads = 1;
  opt.warnings = false;
  Particles whole = initial;
  make_cpu_backend(lattice)->track(whole, opt);

  RankSum sum;
  const std::vector<Particles> part =
      ft::test::track_on_emulated_ranks(lattice, initial, {0, 700, initial.size()}, opt, sum);
  CHECK(compare_particles(slice_of(whole, 0, 700), part[0]).identical());
  CHECK(compare_particles(slice_of(whole, 700, whole.size()), part[1]).identical());
}

TEST_CASE("space charge PIC: the deposit conserves the charge exactly and counts the particles outside the grid") {
  ScRing o;
  o.adapt_transverse = false;
  o.half_extent = 2e-3;  // narrower than the bunch's tails
  o.second_element = false;
  const Lattice lattice = sc_ring(o);
  const Particles bunch = sc_bunch(lattice, 5000, 2e-6, 1e-6, 8.0, 3);
  const size_t sc_index = 1;
  REQUIRE(lattice.element(sc_index).name == "sc");
  GridCollectiveSolver solver(lattice, sc_index, FmaMode::Off, bunch.size());
  ChargeGridReducer& r = solver.reducer();
  r.clear();
  r.deposit(bunch, 2);
  const ChargeGridSpec& g = solver.spec();
  uint64_t outside = 0;
  for (size_t i = 0; i < bunch.size(); ++i) {
    const double pos[3] = {bunch.x[i], bunch.y[i], bunch.zeta[i]};
    for (int d = 0; d < 3; ++d) {
      const double u = (pos[d] - g.min[d]) * g.inv_d[d];
      if (!(u >= 0.0 && u < g.n[d] - 1)) {
        ++outside;
        break;
      }
    }
  }
  uint64_t total = 0;
  for (uint64_t v : r.accumulators()) total += v;
  const uint64_t unit = uint64_t(1) << (3 * g.weight_bits);
  CHECK(outside > 0);
  CHECK(r.outside() == outside);
  CHECK(total == (bunch.size() - outside) * unit);  // exact: every inside particle's whole weight
  // Tracking reports the same count, and warns.
  Particles p = bunch;
  const auto reports = grid_reports_of_cpu_run(lattice, p, 1);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].outside_last == outside);
  CHECK(reports[0].outside_total == outside);
  GridCollectiveSolver again(lattice, sc_index, FmaMode::Off, bunch.size());
  again.reducer().clear();
  again.reducer().deposit(bunch, 1);
  again.solve();
  const std::string warning = again.take_warning();
  MESSAGE(warning);
  CHECK(warning.find(fmt::format("{} particle-turns outside the grid", outside)) != std::string::npos);
  CHECK(warning.find("'sc'") != std::string::npos);
}

TEST_CASE("space charge PIC: the host Poisson solve runs on the run's threads, with the same bits for any count") {
  ScRing o;
  o.second_element = false;
  const Lattice lattice = sc_ring(o);
  const Particles bunch = sc_bunch(lattice, 5000, 2e-6, 1e-6, 8.0, 3);
  // Through the CPU backend: TrackOptions::threads (--threads) reaches the solver (reported per element).
  Particles first;
  for (const int threads : {1, 2, 3}) {
    Particles p = bunch;
    const auto reports = grid_reports_of_cpu_run(lattice, p, 2, threads);
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].solve_threads == threads);
    if (threads == 1)
      first = p;
    else
      CHECK(compare_particles(first, p).identical());
  }
  // The solver alone: the same field bits on 1, 2 and 3 threads.
  const size_t sc_index = 1;
  REQUIRE(lattice.element(sc_index).name == "sc");
  std::vector<double> ex1, ey1;
  for (const int threads : {1, 2, 3}) {
    GridCollectiveSolver solver(lattice, sc_index, FmaMode::Off, bunch.size());
    if (solver.adaptive())
      for (int pass = solver.extent_passes(); pass > 0; --pass) {
        std::vector<uint64_t> acc(kExtentAccumulators + 1, 0);
        solver.accumulate_extent(bunch, 2, acc.data());
        solver.set_extent(acc.data());
      }
    solver.reducer().clear();
    solver.reducer().deposit(bunch, 2);
    solver.set_solve_threads(threads);
    solver.solve();
    CHECK(solver.report().solve_threads == threads);
    REQUIRE(solver.ex().size() == solver.node_count());
    if (threads == 1) {
      ex1 = solver.ex();
      ey1 = solver.ey();
      CHECK(std::any_of(ex1.begin(), ex1.end(), [](double v) { return v != 0.0; }));
      continue;
    }
    CHECK(std::memcmp(solver.ex().data(), ex1.data(), ex1.size() * sizeof(double)) == 0);
    CHECK(std::memcmp(solver.ey().data(), ey1.data(), ey1.size() * sizeof(double)) == 0);
  }
}

TEST_CASE("space charge PIC: the kick of a round Gaussian beam equals the Bassetti-Erskine round field, 2.5D and 3D") {
  // A round beam (sigma 1 mm), uniform in zeta over 20 m (line density N / 20 m), one element in an
  // otherwise empty line: Delta px of each particle against q L E_x / (beta gamma^2 p0c) with E of
  // the round Gaussian (the round limit of Bassetti-Erskine, Gauss's law), for particles in the
  // middle of the bunch with 0.3 sigma < r < 3 sigma.
  for (const char* model : {"2.5D", "3D"}) {
    const double sigma = 1e-3, half_length = 10.0, intensity = 1e11, length = 10.0, p0c = 1e9;
    json sc = {{"type", "SpaceChargePIC"}, {"length", length}, {"intensity", intensity}, {"model", model},
               {"nodes_x", 128},           {"nodes_y", 128},   {"nodes_zeta", 16},       {"zeta_min", -12.0},
               {"zeta_max", 12.0},         {"extent_sigmas", 7.0}};
    json doc = {{"fusetrack_lattice", 1},
                {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", p0c}}},
                {"elements", {{"sc", sc}}},
                {"sequence", {"sc"}}};
    const Lattice lattice = lattice_from_json(doc, "round_beam.json", ft::test::builtin_registry());
    const size_t n = 400000;
    std::mt19937_64 rng(5);
    std::normal_distribution<double> g(0.0, sigma);
    std::uniform_real_distribution<double> u(-half_length, half_length);
    Particles p(n, lattice.reference().beta0());
    for (size_t i = 0; i < n; ++i) p.set(i, g(rng), 0.0, g(rng), 0.0, u(rng), 0.0);
    const Particles before = p;
    TrackOptions opt;
    opt.turns = 1;
    opt.warnings = false;
    opt.fma = FmaMode::On;  // FFTW (the field is the same up to rounding)
    auto cpu = make_cpu_backend(lattice);
    cpu->track(p, opt);
    const double gamma = lattice.reference().gamma0(), beta = lattice.reference().beta0();
    const double lambda = intensity * kE / (2.0 * half_length);  // [C/m]
    const double factor = length / (beta * gamma * gamma * p0c);  // q0 = 1
    double sum_ratio = 0, sum_sq = 0;
    size_t count = 0;
    double worst_bin = 0;
    std::vector<double> bin_got(6, 0.0), bin_want(6, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double x = before.x[i], y = before.y[i], r = std::hypot(x, y);
      if (std::fabs(before.zeta[i]) > 7.0 || r < 0.3 * sigma || r > 3.0 * sigma) continue;
      const double er = round_gaussian_er(lambda, sigma, r);
      const double want = factor * er * x / r, want_y = factor * er * y / r;
      const double got = p.px[i] - before.px[i], got_y = p.py[i] - before.py[i];
      // Radial component: no division by a small Cartesian component.
      const double got_r = (got * x + got_y * y) / r, want_r = (want * x + want_y * y) / r;
      const double ratio = got_r / want_r;
      sum_ratio += ratio;
      sum_sq += (ratio - 1.0) * (ratio - 1.0);
      ++count;
      const size_t b = std::min<size_t>(5, static_cast<size_t>(r / (0.5 * sigma)));
      bin_got[b] += got_r;
      bin_want[b] += want_r;
    }
    REQUIRE(count > 10000);
    const double mean = sum_ratio / count, rms = std::sqrt(sum_sq / count);
    for (size_t b = 0; b < 6; ++b)
      if (bin_want[b] != 0) worst_bin = std::max(worst_bin, std::fabs(bin_got[b] / bin_want[b] - 1.0));
    MESSAGE(std::string(model), ": kick / Bassetti-Erskine round field, mean ", mean, ", rms deviation ", rms,
            ", worst radial bin (0.5 sigma wide) ", worst_bin, " (", count, " particles); max |E| ",
            cpu->grid_reports()[0].max_field, " V/m");
    CHECK(std::fabs(mean - 1.0) < 0.01);
    CHECK(worst_bin < 0.02);
    CHECK(rms < 0.05);
    if (std::string(model) == "3D") {
      // The longitudinal field: pushes the head (zeta > 0) forward, the tail back (a positive bunch).
      double head = 0, tail = 0;
      for (size_t i = 0; i < n; ++i) {
        const double dd = p.delta[i] - before.delta[i];
        if (before.zeta[i] > 9.0) head += dd;
        if (before.zeta[i] < -9.0) tail += dd;
      }
      MESSAGE("3D: summed Delta delta, head ", head, ", tail ", tail);
      CHECK(head > 0);
      CHECK(tail < 0);
    }
  }
}

TEST_CASE("space charge PIC: the self-force of the bunch sums to zero (momentum conservation), 2.5D and 3D") {
  // Cloud-in-cell deposit and gather with the same weights and an antisymmetric field kernel: the
  // kicks of all particles on each other cancel, sum Delta px = 0 up to rounding, for any bunch shape.
  for (const char* model : {"2.5D", "3D"}) {
    json sc = {{"type", "SpaceChargePIC"}, {"length", 10.0}, {"intensity", 1e11}, {"model", model},
               {"nodes_x", 48},            {"nodes_y", 40},  {"nodes_zeta", 12}};
    json doc = {{"fusetrack_lattice", 1},
                {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", 1e9}}},
                {"elements", {{"sc", sc}}},
                {"sequence", {"sc"}}};
    const Lattice lattice = lattice_from_json(doc, "self_force.json", ft::test::builtin_registry());
    // An asymmetric bunch: two offset Gaussians of different sizes.
    std::mt19937_64 rng(17);
    std::normal_distribution<double> g(0.0, 1.0);
    const size_t n = 20000;
    Particles p(n, lattice.reference().beta0());
    for (size_t i = 0; i < n; ++i) {
      const bool second = i % 3 == 0;
      p.set(i, (second ? 2e-3 : -1e-3) + (second ? 0.5e-3 : 1.5e-3) * g(rng), 0.0, (second ? 1e-3 : 0.0) + 1e-3 * g(rng),
            0.0, (second ? 0.5 : -0.5) + 1.0 * g(rng), 0.0);
    }
    const Particles before = p;
    TrackOptions opt;
    opt.turns = 1;
    opt.warnings = false;
    make_cpu_backend(lattice)->track(p, opt);
    double sum_x = 0, sum_y = 0, abs_x = 0, abs_y = 0, sum_e = 0, abs_e = 0;
    for (size_t i = 0; i < n; ++i) {
      const double dx = p.px[i] - before.px[i], dy = p.py[i] - before.py[i], de = p.ptau[i] - before.ptau[i];
      sum_x += dx, abs_x += std::fabs(dx), sum_y += dy, abs_y += std::fabs(dy), sum_e += de, abs_e += std::fabs(de);
    }
    MESSAGE(std::string(model), ": sum Delta px / sum |Delta px| = ", sum_x / abs_x, ", y ", sum_y / abs_y,
            ", energy ", abs_e > 0 ? sum_e / abs_e : 0.0);
    CHECK(abs_x > 0);
    CHECK(std::fabs(sum_x / abs_x) < 1e-14);
    CHECK(std::fabs(sum_y / abs_y) < 1e-14);
    if (std::string(model) == "3D") CHECK(std::fabs(sum_e / abs_e) < 1e-14);
  }
}

TEST_CASE("space charge PIC: the error against the round Gaussian field falls as h^2 with the grid spacing") {
  // A quiet-start round Gaussian beam (sigma 1 mm; radii and angles from a Halton sequence), uniform in
  // zeta, on fixed grids of +-6 sigma with 32, 64 and 128 nodes per transverse dimension: the radial
  // kick averaged in bins of 0.25 sigma (0.25 .. 2.5 sigma) against the round-beam field. Cloud-in-cell
  // deposit and gather smooth the density by h^2 / 3 in variance: second order.
  const double sigma = 1e-3, half_length = 10.0, intensity = 1e11, length = 10.0, p0c = 1e9;
  const size_t n = 400000;
  std::vector<double> errors;
  for (int nodes : {32, 64, 128}) {
    json sc = {{"type", "SpaceChargePIC"}, {"length", length},     {"intensity", intensity}, {"nodes_x", nodes},
               {"nodes_y", nodes},         {"nodes_zeta", 8},      {"x_min", -6 * sigma},    {"x_max", 6 * sigma},
               {"y_min", -6 * sigma},      {"y_max", 6 * sigma},   {"zeta_min", -12.0},      {"zeta_max", 12.0}};
    json doc = {{"fusetrack_lattice", 1},
                {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", p0c}}},
                {"elements", {{"sc", sc}}},
                {"sequence", {"sc"}}};
    const Lattice lattice = lattice_from_json(doc, "convergence.json", ft::test::builtin_registry());
    Particles p(n, lattice.reference().beta0());
    for (size_t i = 0; i < n; ++i) {
      const double r = sigma * std::sqrt(-2.0 * std::log(1.0 - halton(i + 1, 2))), phi = 2.0 * kPi * halton(i + 1, 3);
      p.set(i, r * std::cos(phi), 0.0, r * std::sin(phi), 0.0, half_length * (2.0 * halton(i + 1, 5) - 1.0), 0.0);
    }
    const Particles before = p;
    TrackOptions opt;
    opt.turns = 1;
    opt.warnings = false;
    opt.fma = FmaMode::On;
    make_cpu_backend(lattice)->track(p, opt);
    const double gamma = lattice.reference().gamma0(), beta = lattice.reference().beta0();
    const double lambda = intensity * kE / (2.0 * half_length), factor = length / (beta * gamma * gamma * p0c);
    std::vector<double> got(9, 0.0), want(9, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double x = before.x[i], y = before.y[i], r = std::hypot(x, y);
      if (std::fabs(before.zeta[i]) > 5.0 || r < 0.25 * sigma || r >= 2.5 * sigma) continue;  // full zeta layers
      const size_t b = static_cast<size_t>((r / sigma - 0.25) / 0.25);
      got[b] += ((p.px[i] - before.px[i]) * x + (p.py[i] - before.py[i]) * y) / r;
      want[b] += factor * round_gaussian_er(lambda, sigma, r);
    }
    double worst = 0;
    for (size_t b = 0; b < got.size(); ++b) worst = std::max(worst, std::fabs(got[b] / want[b] - 1.0));
    errors.push_back(worst);
    MESSAGE(nodes, " nodes (h = ", 12.0 / (nodes - 1), " sigma): worst binned relative error ", worst);
  }
  MESSAGE("error ratios per halving of h: ", errors[0] / errors[1], ", ", errors[1] / errors[2], " (4 for second order)");
  CHECK(errors[0] / errors[1] > 3.5);
  CHECK(errors[1] / errors[2] > 3.5);
  CHECK(errors[2] < 0.005);
}

namespace {

/// Rest-frame field of a 3D Gaussian charge Q (rms sigma[3]) at pos [V/m], from the potential
/// phi = Q / (4 pi eps0) (2 / sqrt(pi)) int_0^inf prod_i exp(-x_i^2 s^2 / (1 + 2 sigma_i^2 s^2)) /
/// sqrt(1 + 2 sigma_i^2 s^2) ds (1 / r = (2 / sqrt(pi)) int exp(-r^2 s^2) ds convolved with the
/// Gaussian), differentiated under the integral; Simpson's rule after s = S t / (1 - t).
void gaussian_field_3d(double q, const double sigma[3], const double pos[3], double e[3]) {
  const double scale = 1.0 / std::min({sigma[0], sigma[1], sigma[2]});
  const int intervals = 4000;
  double sum[3] = {0, 0, 0};
  for (int k = 0; k <= intervals; ++k) {
    const double t = static_cast<double>(k) / intervals;
    if (t >= 1.0) continue;  // the integrand vanishes there
    const double sv = scale * t / (1.0 - t), ds = scale / ((1.0 - t) * (1.0 - t));
    const double w = (k == 0 || k == intervals) ? 1.0 : (k % 2 ? 4.0 : 2.0);
    double prod = 1.0, grad[3];
    for (int i = 0; i < 3; ++i) {
      const double a = 1.0 + 2.0 * sigma[i] * sigma[i] * sv * sv;
      prod *= std::exp(-pos[i] * pos[i] * sv * sv / a) / std::sqrt(a);
      grad[i] = 2.0 * pos[i] * sv * sv / a;
    }
    for (int i = 0; i < 3; ++i) sum[i] += w * grad[i] * prod * ds;
  }
  const double c = q / (4.0 * kPi * kEps0) * (2.0 / std::sqrt(kPi)) / (3.0 * intervals);
  for (int i = 0; i < 3; ++i) e[i] = c * sum[i];
}

}  // namespace

TEST_CASE("space charge PIC: the 3D model's transverse and longitudinal kicks match the field of a 3D Gaussian bunch") {
  // A short Gaussian bunch (sigma_r 1 mm, sigma_zeta 4 mm; 5.8 mm in the rest frame at gamma 1.46),
  // quiet start (Halton), 64 x 64 x 128 nodes over +-6 sigma (64 in zeta: 4.4 % instead of 1.3 % in E_z,
  // second order): Delta px against L gamma E'_x / (beta gamma^2 p0c)
  // and Delta ptau against L E'_z / (beta E0), E' the rest-frame field of the Gaussian (an integral
  // computed here), binned in r (transverse) and in zeta (longitudinal).
  const double sr = 1e-3, sz = 4e-3, intensity = 1e10, length = 1.0, p0c = 1e9;
  json sc = {{"type", "SpaceChargePIC"}, {"length", length},  {"intensity", intensity}, {"model", "3D"},
             {"nodes_x", 64},            {"nodes_y", 64},     {"nodes_zeta", 128},      {"x_min", -6 * sr},
             {"x_max", 6 * sr},          {"y_min", -6 * sr},  {"y_max", 6 * sr},        {"zeta_min", -6 * sz},
             {"zeta_max", 6 * sz}};
  json doc = {{"fusetrack_lattice", 1},
              {"reference", {{"mass0", kProtonMass}, {"q0", 1}, {"p0c", p0c}}},
              {"elements", {{"sc", sc}}},
              {"sequence", {"sc"}}};
  const Lattice lattice = lattice_from_json(doc, "gaussian3d.json", ft::test::builtin_registry());
  const size_t n = 400000;
  Particles p(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = i + 1;
    const double r = sr * std::sqrt(-2.0 * std::log(1.0 - halton(k, 2))), phi = 2.0 * kPi * halton(k, 3);
    const double z = sz * std::sqrt(-2.0 * std::log(1.0 - halton(k, 5))) * std::cos(2.0 * kPi * halton(k, 7));
    p.set(i, r * std::cos(phi), 0.0, r * std::sin(phi), 0.0, z, 0.0);
  }
  const Particles before = p;
  TrackOptions opt;
  opt.turns = 1;
  opt.warnings = false;
  opt.fma = FmaMode::On;
  auto cpu = make_cpu_backend(lattice);
  cpu->track(p, opt);
  const ReferenceParticle& ref = lattice.reference();
  const double gamma = ref.gamma0(), beta = ref.beta0(), e0 = ref.energy0();
  const double q = intensity * kE, sigma_rest[3] = {sr, sr, gamma * sz};
  std::vector<double> got_r(8, 0.0), want_r(8, 0.0), got_z(12, 0.0), want_z(12, 0.0);
  // A subsample (the analytic field costs an integral per particle); the stride is prime to the Halton
  // bases (a stride of 20 kept one radial band only).
  for (size_t i = 0; i < n; i += 13) {
    const double x = before.x[i], y = before.y[i], z = before.zeta[i], r = std::hypot(x, y);
    if (r > 3.0 * sr || std::fabs(z) > 3.0 * sz) continue;
    const double pos[3] = {x, y, gamma * z};
    double e[3];
    gaussian_field_3d(q, sigma_rest, pos, e);
    if (r > 0.25 * sr && std::fabs(z) < 1.5 * sz) {
      const size_t b = std::min<size_t>(7, static_cast<size_t>((r / sr - 0.25) / 0.25));
      got_r[b] += ((p.px[i] - before.px[i]) * x + (p.py[i] - before.py[i]) * y) / r;
      want_r[b] += length * gamma * (e[0] * x + e[1] * y) / r / (beta * gamma * gamma * p0c);
    }
    if (r < 1.0 * sr) {
      const size_t b = std::min<size_t>(11, static_cast<size_t>((z / sz + 3.0) / 0.5));
      got_z[b] += p.ptau[i] - before.ptau[i];
      want_z[b] += length * e[2] / (beta * e0);
    }
  }
  double worst_r = 0, worst_z = 0, peak_z = 0;
  for (size_t b = 0; b < got_r.size(); ++b)
    if (want_r[b] != 0) worst_r = std::max(worst_r, std::fabs(got_r[b] / want_r[b] - 1.0));
  for (double w : want_z) peak_z = std::max(peak_z, std::fabs(w));
  for (size_t b = 0; b < got_z.size(); ++b) worst_z = std::max(worst_z, std::fabs(got_z[b] - want_z[b]) / peak_z);
  MESSAGE("3D Gaussian bunch: worst radial bin ", worst_r, ", worst zeta bin (of the peak) ", worst_z,
          "; peak binned Delta ptau ", peak_z);
  CHECK(worst_r < 0.03);
  CHECK(worst_z < 0.03);
}

TEST_CASE("space charge PIC: incoherent tune shift of small-amplitude particles against the Laslett formula") {
  // One element per turn standing for the whole ring (L = C = 160 m), zeta uniform over 20 m: the
  // Laslett tune shift of a Gaussian beam, in its elliptical form (the beam is not round where the
  // element sits), Delta Q_u = -r_p lambda L beta_u / (2 pi beta^2 gamma^3 sigma_u (sigma_x + sigma_y)),
  // lambda = N / 20 m, sigma_u = sqrt(eps beta_u) (Laslett 1963; e.g. Reiser sec. 4.2 / 4.4; the
  // round beam gives -r_p lambda C / (4 pi eps beta^2 gamma^3)). Bare tunes 0.2, away from the envelope
  // half-integer resonance (2 Q = 0.5), and a small shift (0.002): the bunch, matched without space
  // charge, then stays within ~1 % of its size. Probes at 0.05 sigma inside the bunch; tunes
  // from the mean phase advance in normalized coordinates over 256 turns.
  ScRing o;
  o.second_element = false;
  o.nodes_x = o.nodes_y = 128;
  o.nodes_zeta = 8;
  o.zeta_half = 12.0;
  o.k1l_qf_half = 0.5 * 2.0 * std::sin(kPi * 36.0 / 360.0) / 40.0;  // 36 deg per cell: Q = 0.2
  o.k1l_qd = -2.0 * o.k1l_qf_half;
  o.intensity = 3.4e9;
  json doc = sc_ring_json(o);
  doc["elements"]["sc"]["length"] = 160.0;
  const Lattice lattice = lattice_from_json(doc, "laslett.json", ft::test::builtin_registry());
  const double eps = 1e-6, half_length = 10.0;
  // The probes carry charge like every macroparticle: few of them, spread over zeta, against many
  // bunch macroparticles near the axis (16 probes in the central cells of 60000 raised the local
  // density there, and the tune shift, by 10 %). A quiet start (quiet_bunch): with random sampling
  // the few particles of small action that make the density on the axis are a frozen sample, and
  // the measured shift scattered by 5-8 % with 300000 macroparticles.
  const size_t n_bunch = 200000, n_probe = 4;
  Particles p = quiet_bunch(lattice, n_bunch + n_probe, eps, half_length, o);
  double bx, ax, qx0, by, ay, qy0;
  fodo_twiss(o.k1l_qf_half, o.k1l_qd, 40.0, +1, &bx, &ax, &qx0);
  fodo_twiss(o.k1l_qf_half, o.k1l_qd, 40.0, -1, &by, &ay, &qy0);
  for (size_t k = 0; k < n_probe; ++k) {
    const double phase = 2.0 * kPi * k / n_probe;
    const double a = 0.05 * std::sqrt(eps);  // 0.05 sigma
    p.set(n_bunch + k, a * std::sqrt(bx) * std::cos(phase), -a / std::sqrt(bx) * (std::sin(phase) + ax * std::cos(phase)),
          a * std::sqrt(by) * std::sin(phase), -a / std::sqrt(by) * (std::cos(phase) + ay * std::sin(phase)),
          -3.0 + 2.0 * k, 0.0);  // between the zeta nodes at +-5.14 m: full layers
  }
  const int turns = 256;
  std::vector<std::vector<double>> phase_x(n_probe), phase_y(n_probe);
  TrackOptions opt;
  opt.turns = turns;
  opt.warnings = false;
  opt.fma = FmaMode::On;
  opt.callback_every = 1;
  auto angle = [](double u, double pu, double beta, double alpha) {
    return std::atan2(-(alpha * u + beta * pu), u);  // clockwise in (u, beta pu + alpha u)
  };
  std::vector<double> sig_x, sig_y;
  auto record = [&](const Particles& q) {
    double s2x = 0, s2y = 0;
    for (size_t i = 0; i < n_bunch; ++i) s2x += q.x[i] * q.x[i], s2y += q.y[i] * q.y[i];
    sig_x.push_back(std::sqrt(s2x / n_bunch));
    sig_y.push_back(std::sqrt(s2y / n_bunch));
    for (size_t k = 0; k < n_probe; ++k) {
      const size_t i = n_bunch + k;
      phase_x[k].push_back(angle(q.x[i], q.px[i], bx, ax));
      phase_y[k].push_back(angle(q.y[i], q.py[i], by, ay));
    }
  };
  record(p);
  opt.callback = [&](int64_t, const Particles& q) {
    record(q);
    return true;
  };
  auto cpu = make_cpu_backend(lattice);
  cpu->track(p, opt);
  auto tune = [&](const std::vector<double>& ph) {
    double total = 0;
    for (size_t t = 1; t < ph.size(); ++t) {
      double d = ph[t] - ph[t - 1];
      while (d < 0) d += 2.0 * kPi;
      while (d >= 2.0 * kPi) d -= 2.0 * kPi;
      total += d;
    }
    return total / (2.0 * kPi * (ph.size() - 1));
  };
  double qx = 0, qy = 0;
  for (size_t k = 0; k < n_probe; ++k) {
    qx += tune(phase_x[k]) / n_probe;
    qy += tune(phase_y[k]) / n_probe;
  }
  const ReferenceParticle& ref = lattice.reference();
  const double beta = ref.beta0(), gamma = ref.gamma0();
  const double lambda = o.intensity / (2.0 * half_length);
  const double sx = std::sqrt(eps * bx), sy = std::sqrt(eps * by);
  const double common = -kProtonRadius * lambda * 160.0 / (2.0 * kPi * beta * beta * gamma * gamma * gamma * (sx + sy));
  const double laslett_x = common * bx / sx, laslett_y = common * by / sy;
  MESSAGE("bare tunes ", qx0, ", ", qy0, "; with space charge ", qx, ", ", qy, "; shifts ", qx - qx0, ", ", qy - qy0,
          " against Laslett ", laslett_x, ", ", laslett_y, " (relative differences ", (qx - qx0) / laslett_x - 1.0, ", ",
          (qy - qy0) / laslett_y - 1.0, ")");
  double msx = 0, msy = 0;
  for (size_t t = 0; t < sig_x.size(); ++t) msx += sig_x[t] / sig_x.size(), msy += sig_y[t] / sig_y.size();
  MESSAGE("sigma_x bare ", sx, " start ", sig_x[0], " mean ", msx, " min ", *std::min_element(sig_x.begin(), sig_x.end()), " max ", *std::max_element(sig_x.begin(), sig_x.end()));
  MESSAGE("sigma_y bare ", sy, " start ", sig_y[0], " mean ", msy);
  CHECK(std::fabs((qx - qx0) / laslett_x - 1.0) < 0.01);
  CHECK(std::fabs((qy - qy0) / laslett_y - 1.0) < 0.01);
}

TEST_CASE("space charge PIC: bad input names the element and the field") {
  auto message = [](const json& changes) {
    ScRing o;
    o.second_element = false;
    json doc = sc_ring_json(o);
    for (auto it = changes.begin(); it != changes.end(); ++it) doc["elements"]["sc"][it.key()] = it.value();
    return ft::test::error_message([&] { lattice_from_json(doc, "bad_sc.json", ft::test::builtin_registry()); });
  };
  const std::string zero = message({{"nodes_x", 0}});
  MESSAGE(zero);
  CHECK(zero.find("'sc'") != std::string::npos);
  CHECK(zero.find("nodes_x") != std::string::npos);
  const std::string one = message({{"nodes_zeta", 1}});
  CHECK(one.find("nodes_zeta") != std::string::npos);
  const std::string empty = message({{"x_min", 1e-3}, {"x_max", 1e-3}});
  MESSAGE(empty);
  CHECK(empty.find("x_max") != std::string::npos);
  CHECK(empty.find("'sc'") != std::string::npos);
  const std::string model = message({{"model", "4D"}});
  CHECK(model.find("model") != std::string::npos);
  CHECK(model.find("4D") != std::string::npos);
  const std::string sigmas = message({{"extent_sigmas", 0.0}});
  CHECK(sigmas.find("extent_sigmas") != std::string::npos);
  const std::string intensity = message({{"intensity", -1.0}});
  CHECK(intensity.find("intensity") != std::string::npos);
}

TEST_CASE("space charge PIC: the GPU segment kernels with grid elements compile with NVRTC (no GPU needed)") {
  // A 2.5D element (adapted grid) first in the sequence, a 3D one (fixed grid) and a longitudinal
  // impedance: segments with grid kicks, grid deposits, profile deposits and the wrap kernel.
  ScRing o;
  json doc = sc_ring_json(o);
  doc["elements"]["impedance"] = {{"type", "LongitudinalImpedance"}, {"n_slices", 64},  {"zeta_min", -12.0},
                                  {"zeta_max", 12.0},                {"intensity", 1e10},
                                  {"sources", json::array({{{"type", "Resonator"}, {"r_shunt", 1e3}, {"frequency", 1e7}, {"q", 1.0}}})}};
  doc["sequence"].insert(doc["sequence"].begin(), "sc");
  doc["sequence"].push_back("impedance");
  const Lattice lattice = lattice_from_json(doc, "sc_kernels.json", ft::test::builtin_registry());
  const TurnProgram program = TurnProgram::build(lattice);
  REQUIRE(program.collective.size() == 4);
  std::vector<SliceGrid> grids;
  for (size_t c : program.collective)
    grids.push_back(lattice.element(c).type->is_grid_collective() ? SliceGrid{}
                                                                   : CollectiveSolver(lattice, c, FmaMode::Off, 10).slice_grid());
  KernelCompiler compiler("off");
  for (FmaMode fma : {FmaMode::Off, FmaMode::On})
    for (Dispatch dispatch : {Dispatch::Baked, Dispatch::Switch}) {
      const KernelSource src = generate_collective_kernels(lattice, fma, dispatch, grids);
      CHECK(src.text.find("#include \"fusetrack/device/grid_solver_kernels.h\"") != std::string::npos);
      CHECK(src.headers.at("fusetrack/device/grid_solver_kernels.h").find("fusetrack_grid_deposit") !=
            std::string::npos);
      CHECK(src.text.find("SpaceChargePIC_kick(el, ft_field, p)") != std::string::npos);
      CompiledKernel k;
      CHECK_NOTHROW(k = compiler.compile(src, 90));
      CHECK(k.cubin.size() > 1000);
    }
}

}  // namespace test_space_charge_pic
