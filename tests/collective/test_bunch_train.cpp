// Bunch trains through the slice-moment elements (TransverseWake, TransverseDamper with n_bunches > 1)
// and the damper's delay, on the CPU backend: the delayed damper's rate against the eigenvalue of the
// delayed one-turn map (solved here by Newton's method), the train's wake kicks against a direct sum of the
// resonator wake written out here (the bunch's own slices, the bunches ahead, the stored turn), the train
// damper bunch by bunch against single-bunch runs, the particles of 1, 2 and 3 emulated MPI ranks bitwise
// equal, the resistive-wall coupled-bunch growth of a ring filled with rigid bunches against the analytic
// rate (Chao 1993, ch. 4, lowest betatron sideband; the impedance written out here), and bad input named.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <complex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/compare.h"
#include "fusetrack/instability_theory.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/parallel.h"
#include "fusetrack/slice_wakes.h"
#include "support/emulated_ranks.h"
#include "support/largest_changes.h"
#include "support/registry.h"
#include "support/wake_test_ring.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_bunch_train.
namespace test_bunch_train {

using namespace ft;
using json = nlohmann::ordered_json;
using ft::test::wake_ring_reference;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kC = 299792458.0;            // [m/s]
constexpr double kE = 1.602176634e-19;        // [C]
constexpr double kMu0 = 1.25663706212e-6;     // [H/m]


/// Centroids per turn of a train's bunches (bunch b: zeta near -b spacing).
struct TrainRecorder {
  int bunches;
  double spacing;
  std::vector<double> turns;
  std::vector<std::vector<double>> x, y, px, py;  // [bunch][turn]
  TrackOptions options(int turns_to_track) {
    x.assign(static_cast<size_t>(bunches), {});
    y.assign(static_cast<size_t>(bunches), {});
    px.assign(static_cast<size_t>(bunches), {});
    py.assign(static_cast<size_t>(bunches), {});
    TrackOptions opt;
    opt.turns = turns_to_track;
    opt.threads = 1;
    opt.callback_every = 1;
    opt.callback = [this](int64_t done, const Particles& p) {
      std::vector<double> sx(static_cast<size_t>(bunches), 0.0), sy(sx), spx(sx), spy(sx), count(sx);
      for (size_t i = 0; i < p.size(); ++i) {
        const long b = std::lround(-p.zeta[i] / spacing);
        if (b < 0 || b >= bunches) continue;
        const size_t k = static_cast<size_t>(b);
        sx[k] += p.x[i], sy[k] += p.y[i], spx[k] += p.px[i], spy[k] += p.py[i], count[k] += 1;
      }
      turns.push_back(static_cast<double>(done));
      for (size_t k = 0; k < static_cast<size_t>(bunches); ++k) {
        x[k].push_back(sx[k] / count[k]);
        y[k].push_back(sy[k] / count[k]);
        px[k].push_back(spx[k] / count[k]);
        py[k].push_back(spy[k] / count[k]);
      }
      return true;
    };
    return opt;
  }
};

}  // namespace

TEST_CASE("transverse damper delay: the damping rate equals the eigenvalue of the delayed one-turn map") {
  // The linear ring of the damper test (tune ~0.05, alpha = 0 at the damper, delta = 0: no decoherence). With
  // the kick Delta P_n = -g P_{n-d} of the centroid measured d turns earlier, normalized coordinates (X, P)
  // before the damper, then the rotation by mu: lambda^2 - cos(mu) (1 + k) lambda + k = 0, k = 1 - g lambda^-d,
  // i.e. lambda^d (lambda^2 - 2 cos(mu) lambda + 1) + g (cos(mu) lambda - 1) = 0; the root continued from
  // e^{i mu} (Newton) gives the amplitude rate ln|lambda| per turn, compared with the fitted decay.
  const double k1l_qf_half = 0.00195, k1l_qd = -0.0039, n_d = 20.0, g = 2.0 / n_d;
  for (const int delay : {0, 1, 3}) {
    json damper = {{"type", "TransverseDamper"}, {"gain_turns", n_d}, {"zeta_min", -1.0}, {"zeta_max", 1.0},
                   {"delay", delay}};
    const Lattice lattice = lattice_from_json(ft::test::wake_test_ring({{"damper", damper}}, {"damper"}, k1l_qf_half, k1l_qd),
                                              "delay_ring.json", test::builtin_registry());
    Particles bunch(200, lattice.reference().beta0());
    for (size_t i = 0; i < bunch.size(); ++i)
      bunch.set(i, 2e-3, 0.0, -1e-3, 0.0, -0.5 + 0.005 * static_cast<double>(i), 0.0);
    TrainRecorder rec{1, 1.0, {}, {}, {}, {}, {}};
    const int turns = 200;  // the centroid stays well above the fixed-point resolution
    make_cpu_backend(lattice)->track(bunch, rec.options(turns));
    for (const int sign : {+1, -1}) {
      double beta, tune;
      ft::test::wake_test_ring_optics(k1l_qf_half, k1l_qd, sign, &beta, &tune);
      using Complex = std::complex<double>;
      const double c = std::cos(2.0 * kPi * tune);
      Complex lambda = std::exp(Complex(0.0, 2.0 * kPi * tune));
      for (int it = 0; it < 100; ++it) {
        const Complex ld = std::pow(lambda, delay);
        const Complex f = ld * (lambda * lambda - 2.0 * c * lambda + 1.0) + g * (c * lambda - 1.0);
        const Complex df = (delay > 0 ? double(delay) * std::pow(lambda, delay - 1) : Complex(0.0)) *
                               (lambda * lambda - 2.0 * c * lambda + 1.0) +
                           ld * (2.0 * lambda - 2.0 * c) + g * c;
        lambda -= f / df;
      }
      const double exact = std::log(std::abs(lambda));
      const instability::GrowthFit fit =
          instability::fit_exponential_growth(rec.turns, sign > 0 ? rec.x[0] : rec.y[0], 10.0 + delay, turns);
      MESSAGE("delay ", delay, (sign > 0 ? " x" : " y"), ": tune ", tune, ", fitted rate ", fit.rate, " per turn (",
              fit.points, " peaks), eigenvalue ", exact, " (no delay: ", std::log(1.0 - g) / 2.0, ")");
      CHECK(fit.points >= 10);
      CHECK(std::fabs(fit.rate / exact - 1.0) < 0.005);
    }
  }
}

TEST_CASE("bunch train: the wake kicks equal a direct sum over slices, bunches ahead and the stored turn") {
  // Three bunches 1 m apart (stride 10 slices of 0.1 m), 4 slices each, two slices filled per bunch with 2
  // macroparticles at (x, y) of their own; a ring of 30 m (a wake element, then a drift), a resonator of
  // Q = 5 at 50 MHz (its wake lasts a few turns) with one stored turn. Expected per particle of bunch b at
  // delay t_i behind its bunch's head slice, in the xwakes convention with K = q0 / (beta0 p0c):
  //   Delta px = K [sum_{own slices j ahead} Q_j x_j W(t_i - t_j)
  //                 + sum_{bunches b' < b} W((b - b') S / (beta0 c)) D_b' + sum_{b', last turn} W(T0 + (b - b') S / (beta0 c)) D_b']
  // with D = sum_j Q_j x_j the bunch's dipole moment (the long-range point-bunch approximation) and the
  // transverse resonator wake W(t) = (omega_r^2 R / (Q omega_b)) e^{-alpha t} sin(omega_b t) written out here.
  const double r_perp = 3e8, q = 5.0, f_r = 5e7, p0c = 2e9, intensity = 1e11, spacing = 1.0, circumference = 30.0;
  const int bunches = 3;
  json wake = {{"type", "TransverseWake"}, {"n_slices", 4}, {"zeta_min", -0.2}, {"zeta_max", 0.2},
               {"intensity", intensity}, {"memory_turns", 1}, {"n_bunches", bunches}, {"bunch_spacing", spacing},
               {"sources", json::array({{{"type", "Resonator"}, {"r_shunt", r_perp}, {"q", q}, {"frequency", f_r}}})}};
  json doc = {{"fusetrack_lattice", 1},
              {"reference", wake_ring_reference(p0c)},
              {"elements", {{"wake", wake}, {"d", {{"type", "Drift"}, {"length", circumference}}}}},
              {"sequence", {"wake", "d"}}};
  const Lattice lattice = lattice_from_json(doc, "train_toy.json", test::builtin_registry());
  const double beta0 = lattice.reference().beta0();
  // Slices at local zeta 0.15 (the head slice) and -0.05 (two slices behind).
  const double local_zeta[2] = {0.15, -0.05};
  Particles p(static_cast<size_t>(bunches) * 4, beta0);
  auto x_of = [](int b, int s) { return 1e-3 * (1 + b) * (s ? -0.5 : 1.0); };
  auto y_of = [](int b, int s) { return -2e-4 * (2 - b) + 3e-4 * s; };
  for (int b = 0; b < bunches; ++b)
    for (int s = 0; s < 2; ++s)
      for (int m = 0; m < 2; ++m)
        p.set(static_cast<size_t>(b * 4 + s * 2 + m), x_of(b, s), 0.0, y_of(b, s), 0.0, local_zeta[s] - b * spacing,
              0.0);
  auto backend = make_cpu_backend(lattice);
  TrackOptions opt;
  opt.turns = 1;
  opt.threads = 1;
  const Particles turn0 = p;
  backend->track(p, opt);
  const Particles turn1 = p;
  backend->track(p, opt);  // the second turn: the wake memory holds the first

  const double omega_r = 2.0 * kPi * f_r, alpha = omega_r / (2.0 * q);
  const double omega_b = std::sqrt(omega_r * omega_r - alpha * alpha);
  auto w = [&](double t) {
    return t <= 0.0 ? 0.0 : omega_r * omega_r * r_perp / (q * omega_b) * std::exp(-alpha * t) * std::sin(omega_b * t);
  };
  const double charge = kE * intensity / 4.0;  // 4 macroparticles per bunch
  const double k = 1.0 / (beta0 * p0c), t0 = circumference / (beta0 * kC), tb = spacing / (beta0 * kC);
  const double dt_slices = 0.2 / (beta0 * kC);  // the two filled slices are 2 slices apart
  // Expected Delta px (plane 0) or Delta py (plane 1) of slice s of bunch b, from positions `now` and `before`.
  auto expected = [&](const Particles& now, const Particles* before, int b, int s, int plane) {
    auto pos = [&](const Particles& at, int bb, int ss) {
      const size_t i = static_cast<size_t>(bb * 4 + ss * 2);
      return plane == 0 ? at.x[i] : at.y[i];
    };
    double sum = 0.0;
    if (s == 1) sum += 2 * charge * pos(now, b, 0) * w(dt_slices);
    for (int a = 0; a < b; ++a) sum += w((b - a) * tb) * 2 * charge * (pos(now, a, 0) + pos(now, a, 1));
    if (before)
      for (int a = 0; a < bunches; ++a) sum += w(t0 + (b - a) * tb) * 2 * charge * (pos(*before, a, 0) + pos(*before, a, 1));
    return k * sum;
  };
  double largest = 0.0;
  for (int b = 0; b < bunches; ++b)
    for (int s = 0; s < 2; ++s)
      for (int plane = 0; plane < 2; ++plane) {
        const double e1 = expected(turn0, nullptr, b, s, plane), e2 = expected(turn1, &turn0, b, s, plane);
        largest = std::max({largest, std::fabs(e1), std::fabs(e2)});
        for (int m = 0; m < 2; ++m) {
          const size_t i = static_cast<size_t>(b * 4 + s * 2 + m);
          CAPTURE(b);
          CAPTURE(s);
          CAPTURE(plane);
          const double got1 = plane == 0 ? turn1.px[i] - turn0.px[i] : turn1.py[i] - turn0.py[i];
          const double got2 = plane == 0 ? p.px[i] - turn1.px[i] : p.py[i] - turn1.py[i];
          CHECK(got1 == doctest::Approx(e1).epsilon(1e-9).scale(1e-3 * largest));
          CHECK(got2 == doctest::Approx(e2).epsilon(1e-9).scale(1e-3 * largest));
        }
      }
  MESSAGE("largest expected kick ", largest);
  REQUIRE(largest > 1e-7);
}

TEST_CASE("bunch train: the damper kicks each bunch with its own centroid (as single-bunch runs)") {
  // Three bunches with different offsets through a train damper (1 slice per bunch, bunch-by-bunch); each bunch
  // tracked alone through the single-bunch damper follows the same centroids (to the fixed-point resolution).
  const double k1l_qf_half = 0.00195, k1l_qd = -0.0039, spacing = 4.0;
  const int bunches = 3, per_bunch = 50, turns = 60;
  auto damper = [&](int n) {
    json d = {{"type", "TransverseDamper"}, {"gain_turns", 15.0}, {"zeta_min", -1.0}, {"zeta_max", 1.0}};
    if (n > 1) d["n_bunches"] = n, d["bunch_spacing"] = spacing;
    return d;
  };
  const Lattice train_lattice = lattice_from_json(ft::test::wake_test_ring({{"damper", damper(bunches)}}, {"damper"}, k1l_qf_half, k1l_qd),
                                                  "train_damper.json", test::builtin_registry());
  const Lattice single_lattice = lattice_from_json(ft::test::wake_test_ring({{"damper", damper(1)}}, {"damper"}, k1l_qf_half, k1l_qd),
                                                   "single_damper.json", test::builtin_registry());
  const double beta0 = train_lattice.reference().beta0();
  Particles train(static_cast<size_t>(bunches * per_bunch), beta0);
  for (int b = 0; b < bunches; ++b)
    for (int i = 0; i < per_bunch; ++i)
      train.set(static_cast<size_t>(b * per_bunch + i), 1e-3 * (b + 1) + 1e-5 * i, 0.0, -5e-4 * (b - 1) - 1e-5 * i, 0.0,
                -0.5 + 0.02 * i - b * spacing, 0.0);
  TrainRecorder rec{bunches, spacing, {}, {}, {}, {}, {}};
  make_cpu_backend(train_lattice)->track(train, rec.options(turns));
  for (int b = 0; b < bunches; ++b) {
    Particles one = slice_particles(train, 0, 0);
    one = Particles(static_cast<size_t>(per_bunch), beta0);
    for (int i = 0; i < per_bunch; ++i)
      one.set(static_cast<size_t>(i), 1e-3 * (b + 1) + 1e-5 * i, 0.0, -5e-4 * (b - 1) - 1e-5 * i, 0.0, -0.5 + 0.02 * i,
              0.0);
    TrainRecorder alone{1, spacing, {}, {}, {}, {}, {}};
    make_cpu_backend(single_lattice)->track(one, alone.options(turns));
    for (int t = 0; t < turns; ++t) {
      CAPTURE(b);
      CAPTURE(t);
      CHECK(rec.x[static_cast<size_t>(b)][static_cast<size_t>(t)] ==
            doctest::Approx(alone.x[0][static_cast<size_t>(t)]).epsilon(1e-9).scale(1e-6));
      CHECK(rec.y[static_cast<size_t>(b)][static_cast<size_t>(t)] ==
            doctest::Approx(alone.y[0][static_cast<size_t>(t)]).epsilon(1e-9).scale(1e-6));
    }
  }
  // The centroids did damp (bunch 2 started at 3 mm).
  CHECK(std::fabs(rec.x[2].back()) < 0.2 * 3e-3);
}

TEST_CASE("bunch train: 1, 2 and 3 emulated MPI ranks give the same particles bitwise") {
  // A 4-bunch train (resonator and resistive wall with 3 stored turns, a delayed damper), the particles split
  // over ranks at arbitrary places (bunches cut across ranks: every rank solves the same integer sums) and at
  // whole bunches (each rank solves its own bunches from its own integers; for the wake the ranks exchange
  // only which bunches they hold and the bunches' point totals, never its table; the delayed damper's small
  // table is summed, so that every rank stores every bunch's centroids).
  const double spacing = 2.0;
  const int bunches = 4;
  json sources = json::array({{{"type", "Resonator"}, {"r_shunt", 5e7}, {"q", 2.0}, {"frequency", 3e8}},
                              {{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 20}, {"zeta_min", -0.5}, {"zeta_max", 0.5},
               {"intensity", 2e11}, {"memory_turns", 3}, {"n_bunches", bunches}, {"bunch_spacing", spacing},
               {"sources", sources}};
  SUBCASE("direct convolution") {}
  SUBCASE("FFT convolution (every rank transforms the same sums)") { wake["convolution"] = "fft"; }
  json damper = {{"type", "TransverseDamper"}, {"gain_turns", 10.0}, {"zeta_min", -0.5}, {"zeta_max", 0.5},
                 {"delay", 2}, {"n_bunches", bunches}, {"bunch_spacing", spacing}};
  const Lattice lattice = lattice_from_json(ft::test::wake_test_ring({{"wake", wake}, {"damper", damper}}, {"wake", "damper"}, 0.01, -0.02),
                                            "train_ranks.json", test::builtin_registry());
  std::mt19937_64 rng(5);
  std::normal_distribution<double> gauss(0.0, 1.0);
  const size_t per_bunch = 300;
  Particles initial(bunches * per_bunch, lattice.reference().beta0());
  for (size_t i = 0; i < initial.size(); ++i) {
    const double b = static_cast<double>(i / per_bunch);
    initial.set(i, 1e-3 * (1.0 + b) + 1e-3 * gauss(rng), 2e-5 * gauss(rng), -1e-3 + 1e-3 * gauss(rng),
                2e-5 * gauss(rng), 0.12 * gauss(rng) - b * spacing, 1e-4 * gauss(rng));
  }
  TrackOptions opt;
  opt.turns = 6;
  opt.threads = 1;
  Particles whole = initial;
  make_cpu_backend(lattice)->track(whole, opt);
  // The two elements' tables (sequence 0: the wake, 1: the damper): slices, then the out-of-range count.
  auto table_words_of = [&](size_t element) {
    return static_cast<size_t>(MomentsCollectiveSolver(lattice, element, initial.size()).n_slices()) *
               kSliceCentroidAccumulators +
           1;
  };
  const size_t wake_words = table_words_of(0), damper_words = table_words_of(1);
  const size_t table_words = std::max(wake_words, damper_words);
  for (const bool whole_bunches : {false, true})
    for (const int ranks : {2, 3}) {
      CAPTURE(ranks);
      CAPTURE(whole_bunches);
      ft::test::RankSum sum(ranks);
      std::vector<size_t> cuts = {0};
      for (int r = 1; r < ranks; ++r)
        cuts.push_back(whole_bunches ? per_bunch * static_cast<size_t>(r * bunches / ranks)
                                     : initial.size() * static_cast<size_t>(r) / ranks + 37);
      cuts.push_back(initial.size());
      const std::vector<Particles> part = ft::test::track_on_emulated_ranks(lattice, initial, cuts, opt, sum);
      for (int r = 0; r < ranks; ++r)
        CHECK(compare_particles(slice_particles(whole, cuts[static_cast<size_t>(r)], cuts[static_cast<size_t>(r) + 1]),
                                part[static_cast<size_t>(r)])
                  .identical());
      if (whole_bunches) {
        // The wake: holders (bunches + 1 words) and totals (3 per bunch) only, never its table. The delayed
        // damper: its whole (small) table, so that every rank stores every bunch's centroids.
        CHECK(sum.largest() == std::max<size_t>(3 * bunches, damper_words));
        CHECK(sum.largest() < wake_words);
      } else
        CHECK(sum.largest() == table_words);
    }
}

TEST_CASE("bunch train: the long range's stored turns summed ahead (prepare_next_turn) give the same kicks bitwise") {
  // A GPU backend sums the FFT long range's stored turns while the segment kernels run; the kicks must be the bits
  // of a solve that sums them itself. 6 bunches, 5 stored turns; tables that change every turn; both paths of the
  // solve (the whole table, and one of two ranks' bunches through solve_over_ranks).
  const int bunches = 6;
  const double spacing = 2.0;
  json sources = json::array({{{"type", "Resonator"}, {"r_shunt", 5e7}, {"q", 2.0}, {"frequency", 3e8}},
                              {{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 24},     {"zeta_min", -0.5},     {"zeta_max", 0.5},
               {"intensity", 2e11},        {"memory_turns", 5},  {"n_bunches", bunches}, {"bunch_spacing", spacing},
               {"quadrupolar_x", 1},       {"longitudinal", 1},  {"sources", sources},   {"convolution", "fft"}};
  const Lattice lattice = lattice_from_json(ft::test::wake_test_ring({{"wake", wake}}, {"wake"}, 0.01, -0.02),
                                            "train_prepare.json", test::builtin_registry());
  const size_t per_bunch = 200;
  for (const bool half : {false, true}) {
    CAPTURE(half);
    const int held = half ? bunches / 2 : bunches;
    MomentsCollectiveSolver plain(lattice, 0, bunches * per_bunch), ahead(lattice, 0, bunches * per_bunch);
    std::mt19937_64 rng(11);
    std::normal_distribution<double> gauss(0.0, 1.0);
    const MomentsCollectiveSolver::RankSum identity = [](uint64_t*, size_t) {};
    size_t compared = 0;
    for (int turn = 0; turn < 9; ++turn) {
      Particles p(static_cast<size_t>(held) * per_bunch, lattice.reference().beta0());
      for (size_t i = 0; i < p.size(); ++i) {
        const double b = static_cast<double>(i / per_bunch);
        p.set(i, 1e-3 * std::cos(turn + b) + 1e-3 * gauss(rng), 2e-5 * gauss(rng), 1e-3 * gauss(rng),
              2e-5 * gauss(rng), 0.12 * gauss(rng) - b * spacing, 1e-4 * gauss(rng));
      }
      plain.reducer().clear();
      plain.reducer().deposit(p);
      std::vector<uint64_t> table = plain.reducer().accumulators();
      table.push_back(plain.reducer().out_of_range());
      std::vector<uint64_t> a = table, b = table;
      ahead.prepare_next_turn();
      if (half) {
        plain.solve_over_ranks(a.data(), identity);
        ahead.solve_over_ranks(b.data(), identity);
      } else {
        plain.solve(a.data(), a.back());
        ahead.solve(b.data(), b.back());
      }
      REQUIRE(plain.kicks().size() == ahead.kicks().size());
      CHECK(std::memcmp(plain.kicks().data(), ahead.kicks().data(), plain.kicks().size() * sizeof(double)) == 0);
      compared += plain.kicks().size();
    }
    const auto [begin, end] = plain.kicks_in_use();
    double largest = 0.0;  // the long range acts: some dipolar kick is not zero
    for (size_t k = begin; k < end; k += FT_SLICE_KICK_VALUES) largest = std::max(largest, std::abs(plain.kicks()[k]));
    CHECK(largest > 0.0);
    CHECK(compared == 9 * plain.kicks().size());
  }
}

TEST_CASE("bunch train: resistive-wall coupled-bunch growth of the most unstable mode against the analytic rate") {
  // M = 16 rigid bunches (2 identical macroparticles each, one slice, delta = 0) fill the 160 m ring of the
  // damper test evenly (spacing 10 m), with random offsets (every coupled-bunch mode excited); the classic
  // thick-wall wake with 600 stored turns, one element where alpha = 0. Analytic (Chao 1993, ch. 4, point
  // bunches, in the xwakes convention Z_perp = i int W e^{-i omega t} dt): mode mu oscillates at
  // omega = (mu + Q) omega0 and grows per turn by
  //   1 / tau = -beta K M / (2 T0) sum_p Re Z_perp((p M + mu + Q) omega0),   K = q0^2 e N / (beta0 p0c),
  // dominated by the lowest (negative) sideband -(1 - Q) omega0, where the thick wall gives
  //   Re Z_perp(omega) = c L / (pi b^3 omega sigma delta),  delta = sqrt(2 / (mu0 sigma |omega|)).
  // The fitted growth of the fastest mode (a bunch's centroid after the other modes have fallen behind) is
  // compared with the one-sideband rate (within 10%) and the sum over sidebands (within 5%).
  const double k1l_qf_half = 0.0078, k1l_qd = -0.0156, p0c = 26e9, intensity = 6e11;
  const double radius = 0.02, length = 160.0, sigma = 1e6, circumference = 160.0;
  const int bunches = 16, memory = 800, turns = 2000;
  const double spacing = circumference / bunches;
  json wake = {{"type", "TransverseWake"}, {"n_slices", 1}, {"zeta_min", -0.5}, {"zeta_max", 0.5},
               {"intensity", intensity}, {"memory_turns", memory}, {"n_bunches", bunches}, {"bunch_spacing", spacing},
               {"sources", json::array({{{"type", "ResistiveWall"}, {"radius", radius}, {"length", length},
                                         {"conductivity", sigma}}})}};
  const Lattice lattice = lattice_from_json(ft::test::wake_test_ring({{"wake", wake}}, {"wake"}, k1l_qf_half, k1l_qd, p0c),
                                            "rw_train.json", test::builtin_registry());
  const double beta0 = lattice.reference().beta0();
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1e-4, 1e-4);
  Particles train(static_cast<size_t>(bunches) * 2, beta0);
  for (int b = 0; b < bunches; ++b) {
    const double x = u(rng), y = u(rng);
    for (int m = 0; m < 2; ++m) train.set(static_cast<size_t>(2 * b + m), x, 0.0, y, 0.0, -b * spacing, 0.0);
  }
  TrainRecorder rec{bunches, spacing, {}, {}, {}, {}, {}};
  make_cpu_backend(lattice)->track(train, rec.options(turns));

  const double t0 = circumference / (beta0 * kC), omega0 = 2.0 * kPi / t0;
  const double k_kick = kE * intensity / (beta0 * p0c);
  auto re_z = [&](double omega) {
    const double delta = std::sqrt(2.0 / (kMu0 * sigma * std::fabs(omega)));
    return kC * length / (kPi * radius * radius * radius * omega * sigma * delta);
  };
  for (const int sign : {+1, -1}) {
    double beta, tune;
    ft::test::wake_test_ring_optics(k1l_qf_half, k1l_qd, sign, &beta, &tune);
    const double one_sideband = -beta * k_kick * bunches / (2.0 * t0) * re_z(-(1.0 - tune) * omega0);
    double most = -1e300;
    int most_mu = -1;
    for (int mu = 0; mu < bunches; ++mu) {
      double sum = 0.0;
      for (int p = -20000; p <= 20000; ++p) sum += re_z((p * bunches + mu + tune) * omega0);
      const double rate = -beta * k_kick * bunches / (2.0 * t0) * sum;
      if (rate > most) most = rate, most_mu = mu;
    }
    // The coupled-bunch modes' amplitudes |A_mu(n)| = |sum_b (x_b / sqrt(beta) - i sqrt(beta) px_b) e^{-2 pi i (mu + Q) b / M}|
    // (normalized coordinates, alpha = 0; bunch b passes b T0 / M after bunch 0, hence the phase of the mode's
    // oscillation e^{i (mu + Q) omega0 t}). The largest at the end is the fastest mode's (the others have fallen
    // behind); its ln|A| is fitted linearly over the last third of the run.
    const auto& xs = sign > 0 ? rec.x : rec.y;
    const auto& ps = sign > 0 ? rec.px : rec.py;
    auto amplitude = [&](int mu, size_t t) {
      std::complex<double> a = 0.0;
      for (int b = 0; b < bunches; ++b)
        a += std::complex<double>(xs[static_cast<size_t>(b)][t] / std::sqrt(beta), -std::sqrt(beta) * ps[static_cast<size_t>(b)][t]) *
             std::exp(std::complex<double>(0.0, -2.0 * kPi * (mu + tune) * b / bunches));
      return std::abs(a);
    };
    int fitted_mu = 0;
    for (int mu = 1; mu < bunches; ++mu)
      if (amplitude(mu, rec.turns.size() - 1) > amplitude(fitted_mu, rec.turns.size() - 1)) fitted_mu = mu;
    double s_t = 0, s_l = 0, s_tt = 0, s_tl = 0, n = 0;
    for (size_t t = 2 * rec.turns.size() / 3; t < rec.turns.size(); ++t) {
      const double l = std::log(amplitude(fitted_mu, t)), tt = rec.turns[t];
      s_t += tt, s_l += l, s_tt += tt * tt, s_tl += tt * l, n += 1;
    }
    const double fitted = (n * s_tl - s_t * s_l) / (n * s_tt - s_t * s_t);
    MESSAGE((sign > 0 ? "x" : "y"), ": beta ", beta, " m, tune ", tune, "; analytic one sideband ", one_sideband,
            ", all sidebands ", most, " per turn (mode ", most_mu, "); fitted ", fitted, " (mode ", fitted_mu, ")");
    CHECK(std::fabs(fitted / one_sideband - 1.0) < 0.10);
    CHECK(std::fabs(fitted / most - 1.0) < 0.05);
  }
}

TEST_CASE("bunch train and damper delay: bad input is named (file, element, field)") {
  auto message_of = [](const json& element) -> std::string {
    json doc = {{"fusetrack_lattice", 1},
                {"reference", wake_ring_reference(26e9)},
                {"elements", {{"w", element}, {"d", {{"type", "Drift"}, {"length", 100.0}}}}},
                {"sequence", {"w", "d"}}};
    try {
      const Lattice l = lattice_from_json(doc, "bad_train.json", test::builtin_registry());
      MomentsCollectiveSolver solver(l, 0, 100);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  json damper = {{"type", "TransverseDamper"}, {"gain_turns", 10.0}, {"zeta_min", -0.5}, {"zeta_max", 0.5}};
  auto check = [&](const json& element, const char* field) {
    const std::string m = message_of(element);
    CAPTURE(m);
    CHECK(m.find("bad_train.json") != std::string::npos);
    CHECK(m.find("'w'") != std::string::npos);
    CHECK(m.find(field) != std::string::npos);
  };
  json d = damper;
  d["delay"] = -1;
  check(d, "delay");
  d = damper;
  d["n_bunches"] = 0;
  check(d, "n_bunches");
  d = damper;
  d["n_bunches"] = 3, d["bunch_spacing"] = 0.5;  // shorter than the 1 m cut
  check(d, "bunch_spacing");
  d["bunch_spacing"] = 1.05;  // not a whole number of slice widths (1 m)
  check(d, "bunch_spacing");
  d["n_bunches"] = 200, d["bunch_spacing"] = 1.0;  // 200 m of train in a 100 m ring
  check(d, "n_bunches");
}

// The host solve of a long train, not part of the suite (reported as skipped; its time depends on the machine):
//   build/bin/test_collective -tc="bunch train: host solve*" --no-skip
// 100 bunches of 500 slices (cuts adjacent, 1.2 m), a resonator and the resistive wall with 100 stored turns:
// the solve's time per turn once the memory is full (the slice moments of 2000 macroparticles per bunch).
TEST_CASE("bunch train: the FFT convolution tracks like the direct one to rounding (own wakes and long range)") {
  // 7 bunches with stored turns of the long range; both planes, the quadrupolar and longitudinal wakes too.
  const double spacing = 2.0;
  const int bunches = 7;
  json sources =
      json::array({{{"type", "Resonator"}, {"r_shunt", 5e7}, {"q", 2.0}, {"frequency", 3e8}, {"chamber", "flat"}},
                   {{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 30},     {"zeta_min", -0.5},     {"zeta_max", 0.5},
               {"intensity", 2e11},        {"memory_turns", 4},  {"n_bunches", bunches}, {"bunch_spacing", spacing},
               {"quadrupolar_x", 1},       {"quadrupolar_y", 1}, {"longitudinal", 1},    {"sources", sources}};
  auto lattice_with = [&](const char* convolution) {
    json w = wake;
    w["convolution"] = convolution;
    return lattice_from_json(ft::test::wake_test_ring({{"wake", w}}, {"wake"}, 0.01, -0.02), "train_fft.json",
                             test::builtin_registry());
  };
  const Lattice direct = lattice_with("direct"), fft = lattice_with("fft");
  std::mt19937_64 rng(8);
  std::normal_distribution<double> gauss(0.0, 1.0);
  const size_t per_bunch = 400;
  Particles initial(bunches * per_bunch, direct.reference().beta0());
  for (size_t i = 0; i < initial.size(); ++i) {
    const double b = static_cast<double>(i / per_bunch);
    initial.set(i, 1e-3 * std::cos(b) + 1e-3 * gauss(rng), 2e-5 * gauss(rng), 1e-3 * std::sin(b) + 1e-3 * gauss(rng),
                2e-5 * gauss(rng), 0.12 * gauss(rng) - b * spacing, 1e-4 * gauss(rng));
  }
  TrackOptions opt;
  opt.turns = 8;
  opt.threads = 2;
  Particles a = initial, f = initial, free_particles = initial;
  make_cpu_backend(direct)->track(a, opt);
  make_cpu_backend(fft)->track(f, opt);
  TrackOptions skip = opt;
  skip.collective = false;
  make_cpu_backend(direct)->track(free_particles, skip);
  const test::LargestChanges effect = test::largest_changes(a, free_particles), diff = test::largest_changes(a, f);
  MESSAGE("train: the wakes' change of px, py " << effect.transverse << ", of ptau " << effect.ptau << "; FFT - direct "
                                                << diff.transverse << ", " << diff.ptau);
  CHECK(effect.transverse > 1e-6);
  CHECK(effect.ptau > 0.0);
  CHECK(diff.transverse <= 1e-12 * effect.transverse);
  CHECK(diff.ptau <= 1e-12 * effect.ptau);
}

TEST_CASE("bunch train: host solve time, 100 bunches x 500 slices, 100 stored turns" * doctest::skip()) {
  const int bunches = 100, memory = 100;
  json sources = json::array({{{"type", "Resonator"}, {"r_shunt", 1e6}, {"q", 1.0}, {"frequency", 1e9}},
                              {{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 500},      {"zeta_min", -0.6},
               {"zeta_max", 0.6},          {"intensity", 1e11},    {"memory_turns", memory},
               {"n_bunches", bunches},     {"bunch_spacing", 1.2}, {"sources", sources}};
  const size_t per_bunch = 2000;
  double seconds[2] = {0.0, 0.0};
  // The direct and the FFT convolution, in one run (FUSETRACK_WAKE_CONVOLUTION=fft: the FFT one alone, to profile it).
  const char* only = std::getenv("FUSETRACK_WAKE_CONVOLUTION");
  const bool fft_only = only && std::string(only) == "fft";
  for (int mode = fft_only ? 1 : 0; mode < 2; ++mode) {
    wake["convolution"] = mode == 0 ? "direct" : "fft";
    const Lattice lattice = lattice_from_json(ft::test::wake_test_ring({{"wake", wake}}, {"wake"}, 0.01, -0.02),
                                              "solve_bench.json", test::builtin_registry());
    Particles p(static_cast<size_t>(bunches) * per_bunch, lattice.reference().beta0());
    std::mt19937_64 rng(3);
    std::normal_distribution<double> g(0.0, 1.0);
    for (size_t i = 0; i < p.size(); ++i)
      p.set(i, 1e-3 * g(rng), 1e-5 * g(rng), 1e-3 * g(rng), 1e-5 * g(rng),
            0.1 * g(rng) - 1.2 * static_cast<double>(i / per_bunch), 0.0);
    MomentsCollectiveSolver solver(lattice, 0, p.size());
    solver.reducer().clear();
    solver.reducer().deposit(p);
    for (int t = 0; t < memory; ++t) solver.solve();
    const int turns = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < turns; ++t) solver.solve();
    seconds[mode] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / turns;
    MESSAGE(bunches, " bunches x 500 slices (", solver.n_slices(), " grid slices), ", memory, " stored turns, ",
            std::string(mode == 0 ? "direct" : "FFT"), " convolution: host solve ", 1e3 * seconds[mode],
            " ms per turn (", std::thread::hardware_concurrency(), " threads)");
  }
  if (!fft_only) MESSAGE("host solve direct / FFT: ", seconds[0] / seconds[1]);
  CHECK(seconds[1] > 0.0);
}

TEST_CASE("bunch train: the GPU segment kernels of a train compile with NVRTC (no GPU needed)") {
  // A 5-bunch train wake and a delayed train damper: the kernels deposit and kick on the train's grid
  // ((5 - 1) stride + n_slices slices), whose literal they carry.
  json sources = json::array({{{"type", "Resonator"}, {"r_shunt", 1e6}, {"q", 1.0}, {"frequency", 1e9}}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 50}, {"zeta_min", -0.5}, {"zeta_max", 0.5},
               {"intensity", 1e11}, {"memory_turns", 2}, {"n_bunches", 5}, {"bunch_spacing", 2.0}, {"sources", sources}};
  json damper = {{"type", "TransverseDamper"}, {"gain_turns", 30.0}, {"zeta_min", -0.5}, {"zeta_max", 0.5},
                 {"delay", 3}, {"n_bunches", 5}, {"bunch_spacing", 2.0}};
  json doc = ft::test::wake_test_ring({{"wake", wake}, {"damper", damper}}, {"wake"}, 0.01, -0.02);
  doc["sequence"].insert(doc["sequence"].begin() + 4, "damper");
  const Lattice lattice = lattice_from_json(doc, "train_kernels.json", test::builtin_registry());
  const TurnProgram program = TurnProgram::build(lattice);
  REQUIRE(program.collective.size() == 2);
  std::vector<SliceGrid> grids;
  for (size_t c : program.collective) grids.push_back(MomentsCollectiveSolver(lattice, c, 10).slice_grid());
  CHECK(grids[0].n_slices == 4 * 100 + 50);  // stride 2 m / 0.02 m
  CHECK(grids[1].n_slices == 4 * 2 + 1);      // one slice of 1 m per bunch, stride 2
  const KernelSource src = generate_collective_kernels(lattice, FmaMode::Off, Dispatch::Baked, grids);
  CHECK(src.text.find("ft::SliceGrid{450, 0,") != std::string::npos);
  KernelCompiler compiler("off");
  CompiledKernel k;
  CHECK_NOTHROW(k = compiler.compile(src, 90));
  CHECK(k.cubin.size() > 1000);
}

// The host solve as the GPU backend calls it, not part of the suite (reported as skipped; machine-dependent):
//   build/bin/test_collective -tc="bunch train: host solve of a GPU turn*" --no-skip
// 100 bunches x 500 slices, FFT convolution, 100 stored turns, the integer table deposited once: per turn the
// whole train's solve (one rank), and the solve of the first 50 bunches as rank 0 of two does it (solve_over_ranks;
// the sums over ranks are the identity here, so no waiting is timed); the part summed ahead (prepare_next_turn)
// timed apart. FUSETRACK_SOLVE_TURNS turns (default 50).
TEST_CASE("bunch train: host solve of a GPU turn, one rank and one of two ranks" * doctest::skip()) {
  const int bunches = 100, memory = 100;
  json sources = json::array({{{"type", "Resonator"}, {"r_shunt", 1e6}, {"q", 1.0}, {"frequency", 1e9}},
                              {{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", 500},      {"zeta_min", -0.6},     {"zeta_max", 0.6},
               {"intensity", 1e11},        {"memory_turns", memory}, {"n_bunches", bunches}, {"bunch_spacing", 1.2},
               {"sources", sources},       {"convolution", "fft"}};
  const Lattice lattice = lattice_from_json(ft::test::wake_test_ring({{"wake", wake}}, {"wake"}, 0.01, -0.02),
                                            "solve_bench.json", test::builtin_registry());
  const char* turns_env = std::getenv("FUSETRACK_SOLVE_TURNS");
  const int turns = turns_env ? std::max(1, std::atoi(turns_env)) : 50;
  const size_t per_bunch = 2000;
  double seconds[2] = {0.0, 0.0};
  for (int share = 0; share < 2; ++share) {  // 0: every bunch, one rank; 1: bunches 0-49, rank 0 of two
    const int held = share == 0 ? bunches : bunches / 2;
    Particles p(static_cast<size_t>(held) * per_bunch, lattice.reference().beta0());
    std::mt19937_64 rng(3);
    std::normal_distribution<double> g(0.0, 1.0);
    for (size_t i = 0; i < p.size(); ++i)
      p.set(i, 1e-3 * g(rng), 1e-5 * g(rng), 1e-3 * g(rng), 1e-5 * g(rng),
            0.1 * g(rng) - 1.2 * static_cast<double>(i / per_bunch), 0.0);
    MomentsCollectiveSolver solver(lattice, 0, static_cast<size_t>(bunches) * per_bunch);
    solver.reducer().clear();
    solver.reducer().deposit(p);
    std::vector<uint64_t> table = solver.reducer().accumulators();  // as the GPU's: the out-of-range count last
    table.push_back(solver.reducer().out_of_range());
    std::vector<uint64_t> local = table;
    const MomentsCollectiveSolver::RankSum identity = [](uint64_t*, size_t) {};
    auto one_turn = [&] {
      if (share == 0) {
        solver.solve(table.data(), table.back());
      } else {
        local = table;  // (solve_over_ranks may sum into it)
        solver.solve_over_ranks(local.data(), identity);
      }
    };
    for (int t = 0; t < memory; ++t) one_turn();
    // As the GPU backend: the stored turns' long range summed ahead (prepare_next_turn, while the GPU would run
    // the segment kernels), then the solve, which is what the GPU waits for.
    double prepare = 0.0, solve = 0.0;
    for (int t = 0; t < turns; ++t) {
      const auto t0 = std::chrono::steady_clock::now();
      solver.prepare_next_turn();
      const auto t1 = std::chrono::steady_clock::now();
      one_turn();
      prepare += std::chrono::duration<double>(t1 - t0).count();
      solve += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    }
    seconds[share] = solve / turns;
    const auto [begin, end] = solver.kicks_in_use();
    const char* threads = std::getenv("OMP_NUM_THREADS");
    MESSAGE(fmt::format("{}: host solve {:.4f} ms per turn after {:.4f} ms summed ahead (OMP_NUM_THREADS {}, {} "
                        "hardware threads); kick values in use {}",
                        share == 0 ? "one rank, 100 bunches" : "rank 0 of two, bunches 0-49", 1e3 * seconds[share],
                        1e3 * prepare / turns, threads ? threads : "unset", std::thread::hardware_concurrency(),
                        end - begin));
    CHECK(end > begin);
  }
  MESSAGE("one rank / rank 0 of two: ", seconds[0] / seconds[1]);
}

}  // namespace test_bunch_train
