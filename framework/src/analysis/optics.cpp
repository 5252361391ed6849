// Linear optics from the one-turn map (see optics.h for the formulas' sources). Everything here
// goes through the generic tracking API: ft::make_cpu_backend and TrackOptions; no element
// type is named.
#include "fusetrack/optics.h"

#include <fftw3.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "fusetrack/device/transform.h"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/tracker.h"
#include "../core/fftw_planner.hpp"
#include "core/math_helpers.hpp"

namespace ft {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const char* const kCoordinateNames[6] = {"x", "px", "y", "py", "zeta", "delta"};

// ---------------------------------------------------------------------------------------------
// Longitudinal variables. pzeta = ptau / beta0 and, with beta0 ptau = sqrt(1 + beta0^2 delta
// (2 + delta)) - 1 (xtrack update_delta), written without cancellation:
//   pzeta = delta (2 + delta) / (sqrt(1 + beta0^2 delta (2 + delta)) + 1),
//   d pzeta / d delta = (1 + delta) / (1 + beta0 ptau) = rvv.
double pzeta_of_delta(double delta, double beta0) {
  const double d2 = delta * (2.0 + delta);
  return d2 / (std::sqrt(1.0 + beta0 * beta0 * d2) + 1.0);
}

double dpzeta_ddelta(double delta, double beta0) {
  const double beta0_ptau = beta0 * beta0 * pzeta_of_delta(delta, beta0);
  return (1.0 + delta) / (1.0 + beta0_ptau);
}

// ---------------------------------------------------------------------------------------------
// Small dense linear algebra (n <= 6).

/// Solves a x = b in place by Gaussian elimination with partial pivoting; false if singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double>& b) {
  const size_t n = b.size();
  double scale = 0.0;
  for (const auto& row : a)
    for (double v : row) scale = std::max(scale, std::fabs(v));
  if (!(scale > 0.0)) return false;
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (!(std::fabs(a[p][c]) > 1e-14 * scale)) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      if (f == 0.0) continue;
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    double s = b[c];
    for (size_t k = c + 1; k < n; ++k) s -= a[c][k] * b[k];
    b[c] = s / a[c][c];
  }
  return true;
}

Matrix6 multiply(const Matrix6& a, const Matrix6& b) {
  Matrix6 c{};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double s = 0.0;
      for (int k = 0; k < 6; ++k) s += a[i][k] * b[k][j];
      c[i][j] = s;
    }
  return c;
}

double trace(const Matrix6& a) {
  double s = 0.0;
  for (int i = 0; i < 6; ++i) s += a[i][i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// One turn of the ring, optionally with delta frozen.

/// Tracks through the ring with the CPU backend. With `freeze_delta`, delta (and ptau, rpp,
/// rvv) is restored after every element that changes it, so the turn is the 4D map at fixed
/// delta (what MAD-X gets with the RF off and xtrack with freeze_longitudinal). Which elements
/// change delta is found once by tracking probe particles (no element type is named): a
/// segment of the sequence is bisected while the probes' delta changes across it.
class RingTracker {
 public:
  RingTracker(const Lattice& lattice, bool freeze_delta, int threads)
      : m_lattice(lattice), m_backend(make_cpu_backend(lattice)), m_threads(threads), m_freeze(freeze_delta) {
    if (freeze_delta) find_delta_changers();
  }

  size_t frozen_count() const { return m_cuts.size(); }

  /// Tracks `turns` turns; per_turn(turns_done, particles) after each turn when given. With delta
  /// frozen (the 4D map), every turn after the first also starts at the particles' initial zeta:
  /// zeta is not periodic in 4D (it moves by the path-length difference every turn), and an
  /// element whose transverse kick depends on zeta (a crab cavity, RFMultipole) would otherwise
  /// see a drifting zeta, move the transverse orbit turn after turn and hide the betatron line of
  /// small-amplitude particles (MAD-X's and Xsuite's 4D maps freeze zeta as well). One turn is
  /// the map whose matrix the optics use, so the turn-by-turn motion is that matrix's.
  void track(Particles& p, int64_t turns, int64_t first_turn = 0,
             const std::function<void(int64_t, const Particles&)>& per_turn = {}) const {
    if (!m_freeze || (m_cuts.empty() && turns == 1)) {
      TrackOptions o;
      o.collective = false;  // single-particle optics: collective elements are skipped
      o.turns = turns;
      o.first_turn = first_turn;
      o.threads = m_threads;
      if (per_turn) {
        o.callback_every = 1;
        o.callback = [&per_turn](int64_t done, const Particles& q) {
          per_turn(done, q);
          return true;
        };
      }
      m_backend->track(p, o);
      return;
    }
    const size_t n_elements = m_lattice.sequence().size();
    std::vector<double> saved;
    const std::vector<double> zeta_start = p.zeta;
    for (int64_t t = 0; t < turns; ++t) {
      if (t > 0)
        for (size_t i = 0; i < p.size(); ++i)
          if (p.state[i] > 0) p.zeta[i] = zeta_start[i];
      saved = p.delta;
      size_t begin = 0;
      for (size_t k = 0; k <= m_cuts.size(); ++k) {
        const size_t end = k < m_cuts.size() ? m_cuts[k] + 1 : n_elements;
        if (end > begin) {
          TrackOptions o;
          o.collective = false;  // single-particle optics: collective elements are skipped
          o.turns = 1;
          o.first_turn = first_turn + t;
          o.element_begin = begin;
          o.element_end = end;
          o.threads = m_threads;
          m_backend->track(p, o);
        }
        restore_delta(p, saved);
        begin = end;
      }
      if (per_turn) per_turn(t + 1, p);
    }
  }

 private:
  static void restore_delta(Particles& p, const std::vector<double>& saved) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (p.state[i] <= 0 || p.delta[i] == saved[i]) continue;
      ParticleView v = p.view(i);
      v.update_delta(saved[i]);
      p.store(i, v);
    }
  }

  void track_range(Particles& p, size_t begin, size_t end) const {
    TrackOptions o;
    o.collective = false;  // single-particle optics: collective elements are skipped
    o.turns = 1;
    o.element_begin = begin;
    o.element_end = end;
    o.threads = m_threads;
    m_backend->track(p, o);
    for (size_t i = 0; i < p.size(); ++i)
      if (p.state[i] <= 0) {
        const long e = static_cast<long>(p.lost_element[i]);
        throw Error(fmt::format(
            "optics: a probe particle (offsets <= 3e-3) was lost at element #{} '{}' while looking for elements "
            "that change delta; the lattice has an aperture or instability at the reference orbit",
            e, e >= 0 ? m_lattice.element(static_cast<size_t>(e)).name : std::string("?")));
      }
  }

  static bool delta_changed(const Particles& a, const Particles& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a.delta[i] != b.delta[i]) return true;
    return false;
  }

  void find_delta_changers() {
    const size_t n = m_lattice.sequence().size();
    if (n == 0) return;
    // Probes at several zeta (an RF kick vanishes only at isolated phases), delta and small
    // transverse offsets.
    Particles probes(3, m_lattice.reference().beta0());
    probes.set(0, 1e-5, 1e-6, -1e-5, 2e-6, 1.1e-3, 1e-4);
    probes.set(1, -2e-5, -1e-6, 1.5e-5, -1e-6, -2.7e-3, -1e-4);
    probes.set(2, 0.0, 0.0, 0.0, 0.0, 3.1e-4, 0.0);
    search(0, n, probes);
  }

  /// Elements in [begin, end) that change the probes' delta, given the probes at `begin`.
  void search(size_t begin, size_t end, const Particles& at_begin) {
    Particles p = at_begin;
    track_range(p, begin, end);
    if (!delta_changed(p, at_begin)) return;
    if (end - begin == 1) {
      m_cuts.push_back(begin);
      return;
    }
    const size_t mid = begin + (end - begin) / 2;
    Particles at_mid = at_begin;
    track_range(at_mid, begin, mid);
    search(begin, mid, at_begin);
    search(mid, end, at_mid);
  }

  const Lattice& m_lattice;
  std::unique_ptr<Backend> m_backend;
  int m_threads;
  bool m_freeze;
  std::vector<size_t> m_cuts;  // sequence indices of the elements that change delta, ascending
};

// ---------------------------------------------------------------------------------------------
// Finite-difference probe of the one-turn map: 13 particles in one Particles object.

struct Probe {
  std::array<double, 6> in{}, out{};  // centre particle (x, px, y, py, zeta, delta)
  Matrix6 jac{};                      // d out / d in in (x, px, y, py, zeta, delta)
};

/// Central differences around z: three-point (f(h) - f(-h)) / 2h, or five-point
/// (8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / 12h; the offsets actually represented in floating
/// point (z + h) - (z - h) are used for h.
Probe probe_map(const RingTracker& tracker, const Lattice& lattice, const std::array<double, 6>& z,
                const std::array<double, 6>& steps, const char* what, int points = 3) {
  const int per_coordinate = points == 5 ? 4 : 2;
  const double multiples[4] = {1.0, -1.0, 2.0, -2.0};
  Particles p(static_cast<size_t>(1 + 6 * per_coordinate), lattice.reference().beta0());
  p.set(0, z[0], z[1], z[2], z[3], z[4], z[5]);
  std::array<std::array<double, 4>, 6> offset{};
  for (int k = 0; k < 6; ++k)
    for (int j = 0; j < per_coordinate; ++j) {
      std::array<double, 6> zj = z;
      zj[k] += multiples[j] * steps[k];
      offset[k][j] = zj[k] - z[k];
      p.set(static_cast<size_t>(1 + per_coordinate * k + j), zj[0], zj[1], zj[2], zj[3], zj[4], zj[5]);
    }
  tracker.track(p, 1);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.state[i] > 0) continue;
    const long e = static_cast<long>(p.lost_element[i]);
    throw Error(fmt::format(
        "optics ({}): a probe particle near ({:.6g}, {:.6g}, {:.6g}, {:.6g}, {:.6g}, {:.6g}) was lost at element #{} "
        "'{}' (state {}) in the first turn; the orbit is outside the aperture or the motion is unstable",
        what, z[0], z[1], z[2], z[3], z[4], z[5], e, e >= 0 ? lattice.element(static_cast<size_t>(e)).name : "?",
        p.state[i]));
  }
  Probe r;
  r.in = z;
  p.coordinates(0, r.out.data());
  for (int k = 0; k < 6; ++k) {
    double o[4][6];
    for (int j = 0; j < per_coordinate; ++j) p.coordinates(static_cast<size_t>(1 + per_coordinate * k + j), o[j]);
    for (int i = 0; i < 6; ++i) {
      if (points == 5)
        r.jac[i][k] = (8.0 * (o[0][i] - o[1][i]) - (o[2][i] - o[3][i])) /
                      (8.0 * (offset[k][0] - offset[k][1]) - (offset[k][2] - offset[k][3]));
      else
        r.jac[i][k] = (o[0][i] - o[1][i]) / (offset[k][0] - offset[k][1]);
    }
  }
  return r;
}

/// The Jacobian in (..., zeta, pzeta) from the one in (..., zeta, delta) (chain rule).
Matrix6 to_pzeta(const Matrix6& jac, double delta_in, double delta_out, double beta0) {
  const double a_in = dpzeta_ddelta(delta_in, beta0);
  const double a_out = dpzeta_ddelta(delta_out, beta0);
  Matrix6 m = jac;
  for (int i = 0; i < 6; ++i) m[i][5] /= a_in;
  for (int k = 0; k < 6; ++k) m[5][k] *= a_out;
  return m;
}

/// Newton iteration on map(z) = z over the coordinates `idx` (the others stay as given).
OneTurnMap newton(const RingTracker& tracker, const Lattice& lattice, std::array<double, 6> z,
                  const std::vector<int>& idx, const OpticsOptions& o, bool six_d) {
  const char* what = six_d ? "6D closed orbit" : "4D closed orbit";
  const size_t n = idx.size();
  Probe best;
  double best_res = std::numeric_limits<double>::infinity();
  int iterations = 0;
  double prev_res = std::numeric_limits<double>::infinity();
  for (int it = 0; it <= o.co_max_iterations; ++it) {
    const Probe pr = probe_map(tracker, lattice, z, o.steps, what);
    double res = 0.0;
    std::vector<double> r(n);
    for (size_t a = 0; a < n; ++a) {
      r[a] = pr.out[static_cast<size_t>(idx[a])] - z[static_cast<size_t>(idx[a])];
      res = std::max(res, std::fabs(r[a]));
    }
    if (!std::isfinite(res))
      throw Error(fmt::format("optics: the {} search produced a non-finite orbit (unstable ring?)", what));
    if (res < best_res) {
      best = pr;
      best_res = res;
      iterations = it;
    }
    if (res <= o.co_tolerance) break;
    if (it > 0 && res >= 0.5 * prev_res && best_res <= o.co_accept) break;  // stagnated at rounding level
    if (it == o.co_max_iterations) break;
    prev_res = res;
    // (J - I) dz = -r
    std::vector<std::vector<double>> a(n, std::vector<double>(n));
    std::vector<double> b(n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < n; ++k)
        a[i][k] = pr.jac[static_cast<size_t>(idx[i])][static_cast<size_t>(idx[k])] - (i == k ? 1.0 : 0.0);
      b[i] = -r[i];
    }
    if (!solve(a, b))
      throw Error(fmt::format(
          "optics: the {} search failed: the one-turn matrix minus the identity is singular (an integer tune, "
          "or no RF for a 6D orbit)",
          what));
    for (size_t i = 0; i < n; ++i) z[static_cast<size_t>(idx[i])] += b[i];
  }
  if (!(best_res <= o.co_accept))
    throw Error(fmt::format("optics: the {} did not converge: max |map(co) - co| = {:.3g} after {} iterations", what,
                            best_res, o.co_max_iterations));
  OneTurnMap m;
  m.six_d = six_d;
  m.closed_orbit = best.in;
  m.matrix = to_pzeta(best.jac, best.in[5], best.out[5], lattice.reference().beta0());
  m.iterations = iterations;
  m.residual = best_res;
  m.dzeta_per_turn = best.out[4] - best.in[4];
  m.steps = o.steps;
  m.stencil_points = 3;
  return m;
}

/// The final matrix of a converged map (OpticsOptions::normalized_step): the five-point stencil
/// around the closed orbit, transverse steps of one normalized amplitude a (x: a sqrt(beta),
/// px: a sqrt(gamma), Twiss from the Newton matrix's uncoupled blocks; a plane whose block is not
/// stable keeps the fixed steps), zeta and delta steps as given.
void refine_matrix(const RingTracker& tracker, const Lattice& lattice, OneTurnMap& m, const OpticsOptions& o) {
  if (!(o.normalized_step > 0.0)) return;
  const Matrix6& r = m.matrix;
  std::array<double, 6> steps = o.steps;
  for (size_t a = 0; a < 4; a += 2) {
    const PlaneTwiss t = twiss_from_block(r[a][a], r[a][a + 1], r[a + 1][a], r[a + 1][a + 1]);
    if (!t.stable || !(t.beta > 0.0) || !(t.gamma > 0.0)) continue;
    steps[a] = o.normalized_step * std::sqrt(t.beta);
    steps[a + 1] = o.normalized_step * std::sqrt(t.gamma);
  }
  const Probe pr = probe_map(tracker, lattice, m.closed_orbit, steps,
                             m.six_d ? "6D one-turn matrix" : "4D one-turn matrix", 5);
  // The transverse rows only: the zeta row sums the rounding of every drift's path length
  // (~1e-16 L sqrt(N_drifts), ~1e-13 m in a 27 km ring), which over a normalized px step of
  // ~1e-7 is ~1e-6 relative, while the Newton matrix's tiny fixed steps keep the orbit and its
  // mirror image bit-symmetric in a ring without dispersion at the start (noise cancels). The
  // pzeta row carries the zeta row's noise through the RF slope. Both stay from the Newton matrix.
  const Matrix6 fine = to_pzeta(pr.jac, pr.in[5], pr.out[5], lattice.reference().beta0());
  for (size_t i = 0; i < 4; ++i) m.matrix[i] = fine[i];
  m.steps = steps;
  m.stencil_points = 5;
}

void check_options(const OpticsOptions& o) {
  for (int k = 0; k < 6; ++k)
    if (!(o.steps[k] > 0.0) || !std::isfinite(o.steps[k])) {
      InputLocation at;
      at.field = std::string("optics step for ") + kCoordinateNames[k];
      throw InputError(at, fmt::format("must be a positive finite number, got {}", o.steps[k]));
    }
  if (!(o.normalized_step >= 0.0) || !std::isfinite(o.normalized_step)) {
    InputLocation at;
    at.field = "normalized_step";
    throw InputError(at, fmt::format("must be a finite number >= 0, got {}", o.normalized_step));
  }
  if (!(o.delta_chrom > 0.0) || !std::isfinite(o.delta_chrom)) {
    InputLocation at;
    at.field = "delta_chrom";
    throw InputError(at, fmt::format("must be a positive finite number, got {}", o.delta_chrom));
  }
  if (!std::isfinite(o.delta0) || !(o.delta0 > -1.0)) {
    InputLocation at;
    at.field = "delta0";
    throw InputError(at, fmt::format("must be a finite number > -1, got {}", o.delta0));
  }
  if (o.co_max_iterations < 1) {
    InputLocation at;
    at.field = "co_max_iterations";
    throw InputError(at, "must be at least 1");
  }
}

void check_lattice(const Lattice& lattice) {
  if (lattice.sequence().empty()) throw InputError(InputLocation{lattice.source_file()}, "optics: the lattice is empty");
  if (!(lattice.reference().beta0() > 0.0))
    throw InputError(InputLocation{lattice.source_file()}, "optics: the reference particle has no momentum");
}

/// Both trackers, made once (the frozen one searches the delta-changing elements).
struct Engine {
  Engine(const Lattice& l, const OpticsOptions& o) : lattice(l), options(o) { check_options(o); check_lattice(l); }
  const RingTracker& frozen() {
    if (!m_frozen) m_frozen = std::make_unique<RingTracker>(lattice, true, options.threads);
    return *m_frozen;
  }
  const RingTracker& full() {
    if (!m_full) m_full = std::make_unique<RingTracker>(lattice, false, options.threads);
    return *m_full;
  }
  /// zeta: where the orbit starts longitudinally (0, or the 6D closed orbit's zeta, which matters
  /// for elements whose transverse kick depends on zeta, such as RF multipoles).
  OneTurnMap map_4d(double delta, const std::array<double, 4>& guess, double zeta = 0.0) {
    OneTurnMap m = newton(frozen(), lattice, {guess[0], guess[1], guess[2], guess[3], zeta, delta}, {0, 1, 2, 3},
                          options, false);
    refine_matrix(frozen(), lattice, m, options);
    return m;
  }
  OneTurnMap map_6d(const std::array<double, 6>& guess) {
    OneTurnMap m = newton(full(), lattice, guess, {0, 1, 2, 3, 4, 5}, options, true);
    refine_matrix(full(), lattice, m, options);
    return m;
  }
  /// 6D if the longitudinal block of the full matrix around the 4D orbit is stable.
  OneTurnMap choose(std::string& reason) {
    OneTurnMap m4 = map_4d(options.delta0, {0, 0, 0, 0});
    if (options.force_4d) {
      reason = "4D forced by the user (delta fixed)";
      return m4;
    }
    const Probe pr = probe_map(full(), lattice, m4.closed_orbit, options.steps, "longitudinal stability");
    const Matrix6 m = to_pzeta(pr.jac, pr.in[5], pr.out[5], lattice.reference().beta0());
    const double cos_mu = 0.5 * (m[4][4] + m[5][5]);
    if (!(std::fabs(cos_mu) < 1.0 - 1e-10)) {
      reason = fmt::format(
          "4D (delta fixed at {:g}): the longitudinal motion is not stable, (M55 + M66) / 2 = {:.12g} (no RF, or the "
          "RF phase is on the unstable side of transition)",
          options.delta0, cos_mu);
      return m4;
    }
    try {
      OneTurnMap m6 = map_6d(m4.closed_orbit);
      reason = fmt::format("6D: the longitudinal motion is stable, (M55 + M66) / 2 = {:.12g}", cos_mu);
      return m6;
    } catch (const Error& e) {
      reason = fmt::format("4D (delta fixed at {:g}): the longitudinal motion looks stable, (M55 + M66) / 2 = {:.12g}, "
                           "but the 6D closed orbit was not found: {}",
                           options.delta0, cos_mu, e.what());
      return m4;
    }
  }

  const Lattice& lattice;
  OpticsOptions options;

 private:
  std::unique_ptr<RingTracker> m_frozen, m_full;
};

/// 2 cos mu of the longitudinal mode of a 6x6 symplectic matrix: the root, nearest the trace of
/// the zeta-pzeta block, of the reduced characteristic polynomial. For a symplectic M,
/// det(M - lambda) = lambda^6 + c1 lambda^5 + c2 lambda^4 + c3 lambda^3 + c2 lambda^2 + c1 lambda + 1
/// (c1 = -e1, c2 = e2, c3 = -e3 from Newton's identities on tr M^k), and lambda^-3 det(...) is
/// a cubic in u = lambda + 1/lambda = 2 cos mu: u^3 + c1 u^2 + (c2 - 3) u + c3 - 2 c1.
double longitudinal_two_cos(const Matrix6& m, double exclude_a, double exclude_b) {
  const Matrix6 m2 = multiply(m, m);
  const Matrix6 m3 = multiply(m2, m);
  const double t1 = trace(m), t2 = trace(m2), t3 = trace(m3);
  const double e1 = t1, e2 = (t1 * t1 - t2) / 2.0, e3 = (t1 * t1 * t1 - 3.0 * t1 * t2 + 2.0 * t3) / 6.0;
  const double c1 = -e1, c2 = e2, c3 = -e3;
  const double u0 = m[4][4] + m[5][5];
  auto p = [&](double u) { return ((u + c1) * u + (c2 - 3.0)) * u + (c3 - 2.0 * c1); };
  auto dp = [&](double u) { return (3.0 * u + 2.0 * c1) * u + (c2 - 3.0); };
  double u = u0;
  for (int it = 0; it < 60; ++it) {
    const double d = dp(u);
    if (d == 0.0 || !std::isfinite(d)) return u0;
    const double step = p(u) / d;
    u -= step;
    if (std::fabs(step) <= 1e-16 * std::max(1.0, std::fabs(u))) break;
  }
  // Keep the block trace if Newton wandered towards a transverse root.
  const double sep = std::min(std::fabs(u0 - exclude_a), std::fabs(u0 - exclude_b));
  if (!std::isfinite(u) || std::fabs(u - u0) > 0.25 * sep) return u0;
  return u;
}

/// A non-zero solution of a v = 0 for a singular N x N complex matrix (rank N - 1): Gaussian
/// elimination with full pivoting, the last unknown (in pivot order) set to 1.
template <size_t N>
std::array<std::complex<double>, N> null_vector_of(std::array<std::array<std::complex<double>, N>, N> a) {
  std::array<size_t, N> col{};
  for (size_t k = 0; k < N; ++k) col[k] = k;
  for (size_t k = 0; k + 1 < N; ++k) {
    size_t pr = k, pc = k;
    for (size_t r = k; r < N; ++r)
      for (size_t c = k; c < N; ++c)
        if (std::abs(a[r][c]) > std::abs(a[pr][pc])) pr = r, pc = c;
    std::swap(a[k], a[pr]);
    for (auto& row : a) std::swap(row[k], row[pc]);
    std::swap(col[k], col[pc]);
    if (a[k][k] == 0.0) break;
    for (size_t r = k + 1; r < N; ++r) {
      const std::complex<double> f = a[r][k] / a[k][k];
      for (size_t c = k; c < N; ++c) a[r][c] -= f * a[k][c];
    }
  }
  std::array<std::complex<double>, N> y{};
  y[N - 1] = 1.0;
  for (size_t k = N - 1; k-- > 0;) {
    std::complex<double> sum = 0.0;
    for (size_t c = k + 1; c < N; ++c) sum += a[k][c] * y[c];
    y[k] = a[k][k] == 0.0 ? std::complex<double>(1.0) : -sum / a[k][k];
  }
  std::array<std::complex<double>, N> v{};
  for (size_t k = 0; k < N; ++k) v[col[k]] = y[k];
  return v;
}

/// The 6D eigen-tunes (qx, qy, qs) of a stable 6x6 symplectic one-turn matrix (eigenvalues
/// e^{+-i 2 pi Q}; Xsuite / MAD-X 6D twiss). The matrix is first scaled with the 4D Twiss
/// (x -> x / sqrt(beta_x), px -> px sqrt(beta_x), zeta, pzeta with beta_s), a symplectic
/// similarity that keeps the eigenvalues and brings the entries to ~1. For a symplectic M,
/// det(M - lambda) / lambda^3 is a cubic in u = lambda + 1/lambda = 2 cos 2 pi Q,
/// u^3 + c1 u^2 + (c2 - 3) u + c3 - 2 c1 (c_k from Newton's identities on tr M^k, see
/// longitudinal_two_cos). The longitudinal root is polished by Newton from the zeta-pzeta block's
/// trace, the two others are the roots of the deflated quadratic (then polished on the cubic);
/// the horizontal one is the root whose eigenvector has the larger share in (x, px). Q or 1 - Q
/// as the 4D tune (x, y) or in [0, 0.5] (s). NaN where a root is not in (-2, 2).
std::array<double, 3> six_d_eigen_tunes(const Matrix6& m, double beta_x, double beta_y, double beta_s, double qx4,
                                        double qy4) {
  const double scale[6] = {std::sqrt(beta_x), 1.0 / std::sqrt(beta_x), std::sqrt(beta_y), 1.0 / std::sqrt(beta_y),
                           std::sqrt(std::fabs(beta_s)), 1.0 / std::sqrt(std::fabs(beta_s))};
  Matrix6 a{};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) a[i][j] = m[i][j] * scale[j] / scale[i];
  const Matrix6 a2 = multiply(a, a);
  const Matrix6 a3 = multiply(a2, a);
  const double t1 = trace(a), t2 = trace(a2), t3 = trace(a3);
  const double e1 = t1, e2 = (t1 * t1 - t2) / 2.0, e3 = (t1 * t1 * t1 - 3.0 * t1 * t2 + 2.0 * t3) / 6.0;
  const double c2u = -e1, c1u = e2 - 3.0, c0u = -e3 + 2.0 * e1;  // u^3 + c2u u^2 + c1u u + c0u
  auto p = [&](double u) { return ((u + c2u) * u + c1u) * u + c0u; };
  auto dp = [&](double u) { return (3.0 * u + 2.0 * c2u) * u + c1u; };
  auto polish = [&](double u) {
    for (int it = 0; it < 50; ++it) {
      const double d = dp(u);
      if (d == 0.0 || !std::isfinite(d)) break;
      const double step = p(u) / d;
      u -= step;
      if (std::fabs(step) <= 1e-16 * std::max(1.0, std::fabs(u))) break;
    }
    return u;
  };
  std::array<double, 3> q = {kNaN, kNaN, kNaN};
  const double us = polish(a[4][4] + a[5][5]);
  // Deflation: (u - us)(u^2 + b u + c).
  const double b = c2u + us, c = c1u + us * b;
  const double disc = b * b - 4.0 * c;
  if (!std::isfinite(us) || !(disc >= 0.0)) return q;
  const double big = -0.5 * (b + std::copysign(std::sqrt(disc), b));
  double r1 = big, r2 = big != 0.0 ? c / big : 0.0;
  r1 = polish(r1);
  r2 = polish(r2);
  // x share of each root's eigenvector.
  auto x_share = [&](double u) {
    const double cs = 0.5 * u;
    if (!(std::fabs(cs) < 1.0)) return kNaN;
    const std::complex<double> lambda(cs, std::sqrt(1.0 - cs * cs));
    std::array<std::array<std::complex<double>, 6>, 6> sys{};
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 6; ++j) sys[i][j] = a[i][j] - (i == j ? lambda : std::complex<double>(0.0));
    const auto v = null_vector_of<6>(sys);
    const double sx = std::norm(v[0]) + std::norm(v[1]), sy = std::norm(v[2]) + std::norm(v[3]);
    return sx / (sx + sy);
  };
  if (x_share(r2) > x_share(r1)) std::swap(r1, r2);
  auto tune = [](double u, double q4) {
    const double cs = 0.5 * u;
    if (!(std::fabs(cs) < 1.0)) return kNaN;
    const double t = std::acos(cs) / (2.0 * kPi);  // [0, 0.5]
    return q4 > 0.5 ? 1.0 - t : t;
  };
  q[0] = tune(r1, qx4);
  q[1] = tune(r2, qy4);
  q[2] = tune(us, 0.0);
  return q;
}

/// The 6D eigen-tunes, exact where planes decouple: the planes x, y, s are grouped by the non-zero
/// 2x2 blocks that join them (central differences of an uncoupled plane give exact zeros); a plane
/// alone has the tune of its 2x2 block (twiss_from_block), two joined planes the Edwards-Teng
/// eigen-tunes of their 4x4 block (transverse_tunes; a double root, Qx = Qy, is exact there and
/// not in the cubic, whose roots would then carry sqrt(rounding) ~ 1e-7), all three the cubic of
/// six_d_eigen_tunes.
std::array<double, 3> six_d_tunes(const Matrix6& m, double beta_x, double beta_y, double beta_s, double qx4,
                                  double qy4) {
  auto joined = [&](size_t p, size_t q) {
    for (size_t i = 0; i < 2; ++i)
      for (size_t k = 0; k < 2; ++k)
        if (m[2 * p + i][2 * q + k] != 0.0 || m[2 * q + i][2 * p + k] != 0.0) return true;
    return false;
  };
  const bool xy = joined(0, 1), xs = joined(0, 2), ys = joined(1, 2);
  const int links = static_cast<int>(xy) + static_cast<int>(xs) + static_cast<int>(ys);
  if (links >= 2) return six_d_eigen_tunes(m, beta_x, beta_y, beta_s, qx4, qy4);
  std::array<double, 3> q = {kNaN, kNaN, kNaN};
  auto single = [&](size_t p) {
    const PlaneTwiss t = twiss_from_block(m[2 * p][2 * p], m[2 * p][2 * p + 1], m[2 * p + 1][2 * p],
                                          m[2 * p + 1][2 * p + 1]);
    return t.stable ? t.tune : kNaN;
  };
  auto pair = [&](size_t p, size_t r) {
    Matrix6 sub{};
    const size_t idx[4] = {2 * p, 2 * p + 1, 2 * r, 2 * r + 1};
    for (size_t i = 0; i < 4; ++i)
      for (size_t k = 0; k < 4; ++k) sub[i][k] = m[idx[i]][idx[k]];
    try {
      return transverse_tunes(sub);
    } catch (const Error&) {
      return std::array<double, 2>{kNaN, kNaN};
    }
  };
  if (links == 0) {
    q = {single(0), single(1), single(2)};
  } else if (xy) {
    const auto t = pair(0, 1);
    q = {t[0], t[1], single(2)};
  } else if (xs) {
    const auto t = pair(0, 2);
    q = {t[0], single(1), t[1]};
  } else {
    const auto t = pair(1, 2);
    q = {single(0), t[0], t[1]};
  }
  if (std::isfinite(q[2])) q[2] = std::min(q[2], 1.0 - q[2]);
  return q;
}

nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

/// Reproducible standard normal numbers: std::mt19937_64 (fully specified by the standard) and
/// Box-Muller, unlike std::normal_distribution whose algorithm is implementation-defined.
class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : m_rng(seed) {}
  double operator()() {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    m_spare = r * std::sin(2.0 * kPi * u2);
    m_has_spare = true;
    return r * std::cos(2.0 * kPi * u2);
  }

 private:
  double uniform() {  // in (0, 1)
    return (static_cast<double>(m_rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  std::mt19937_64 m_rng;
  double m_spare = 0.0;
  bool m_has_spare = false;
};

}  // namespace

// -----------------------------------------------------------------------------------------------

OneTurnMap compute_one_turn_map_4d(const Lattice& lattice, double delta, const OpticsOptions& options,
                                   const std::array<double, 4>& guess) {
  Engine e(lattice, options);
  return e.map_4d(delta, guess);
}

OneTurnMap compute_one_turn_map_6d(const Lattice& lattice, const OpticsOptions& options,
                                   const std::array<double, 6>& guess) {
  Engine e(lattice, options);
  return e.map_6d(guess);
}

OneTurnMap compute_one_turn_map(const Lattice& lattice, const OpticsOptions& options, std::string* reason) {
  Engine e(lattice, options);
  std::string why;
  OneTurnMap m = e.choose(why);
  if (reason) *reason = why;
  return m;
}

std::array<double, 3> eigen_tunes_6d(const Matrix6& m, double qx_hint, double qy_hint) {
  double beta[3];
  for (size_t p = 0; p < 3; ++p) {
    const PlaneTwiss t = twiss_from_block(m[2 * p][2 * p], m[2 * p][2 * p + 1], m[2 * p + 1][2 * p],
                                          m[2 * p + 1][2 * p + 1]);
    beta[p] = t.stable && t.beta > 0.0 ? t.beta : 1.0;
  }
  return six_d_tunes(m, beta[0], beta[1], beta[2], qx_hint, qy_hint);
}

PlaneTwiss twiss_from_block(double m11, double m12, double m21, double m22) {
  PlaneTwiss t;
  const double cos_mu = 0.5 * (m11 + m22);
  if (!(std::fabs(cos_mu) < 1.0)) {
    t.tune = t.beta = t.alpha = t.gamma = kNaN;
    return t;
  }
  const double sin_mu = std::copysign(std::sqrt(1.0 - cos_mu * cos_mu), m12);
  double q = std::atan2(sin_mu, cos_mu) / (2.0 * kPi);
  if (q < 0.0) q += 1.0;
  t.stable = true;
  t.tune = q;
  t.beta = m12 / sin_mu;
  t.alpha = (m11 - m22) / (2.0 * sin_mu);
  t.gamma = -m21 / sin_mu;
  return t;
}

std::array<double, 2> transverse_tunes(const Matrix6& m) {
  // Edwards-Teng: with M = [[A, B], [C, D]] (2x2 blocks of x and y),
  //   (u1 - u2)^2 = (trA - trD)^2 + 4 det(B + adj C),  u1 + u2 = trA + trD,  u = 2 cos mu.
  const double tra = m[0][0] + m[1][1], trd = m[2][2] + m[3][3];
  // adj C = [[c22, -c12], [-c21, c11]] with C = [[m20, m21], [m30, m31]]
  const double b00 = m[0][2] + m[3][1], b01 = m[0][3] - m[2][1];
  const double b10 = m[1][2] - m[3][0], b11 = m[1][3] + m[2][0];
  const double det = b00 * b11 - b01 * b10;
  const double half_diff = 0.5 * (tra - trd);
  const double disc = half_diff * half_diff + det;
  if (!(disc >= 0.0))
    throw Error(fmt::format("optics: the transverse motion is unstable (coupling resonance: Edwards-Teng "
                            "discriminant {:.3g} < 0)",
                            disc));
  const double root = std::copysign(std::sqrt(disc), half_diff == 0.0 ? 1.0 : half_diff);
  const double u1 = 0.5 * (tra + trd) + root;  // closer to trA
  const double u2 = 0.5 * (tra + trd) - root;
  std::array<double, 2> q{};
  const double signs[2] = {m[0][1], m[2][3]};
  const double us[2] = {u1, u2};
  for (int p = 0; p < 2; ++p) {
    const double c = 0.5 * us[p];
    if (!(std::fabs(c) < 1.0))
      throw Error(fmt::format("optics: the {} motion is unstable: cos mu = {:.12g}", p == 0 ? "horizontal" : "vertical",
                              c));
    const double s = std::copysign(std::sqrt(1.0 - c * c), signs[p]);
    double t = std::atan2(s, c) / (2.0 * kPi);
    if (t < 0.0) t += 1.0;
    q[static_cast<size_t>(p)] = t;
  }
  return q;
}

namespace {

/// The closed orbit (6D or 4D, Engine::choose) and the 4D map at its delta, into `o`.
void find_orbit_and_maps(Engine& eng, LinearOptics& o) {
  const Lattice& lattice = eng.lattice;
  const OpticsOptions& options = eng.options;
  o.circumference = lattice.circumference();
  o.beta0 = lattice.reference().beta0();
  o.gamma0 = lattice.reference().gamma0();
  o.delta_chrom = options.delta_chrom;

  o.map = eng.choose(o.mode_reason);
  o.six_d = o.map.six_d;
  o.closed_orbit = o.map.closed_orbit;
  const double delta_co = o.closed_orbit[5];
  // The 4D map at the closed orbit's delta (the same map in 4D mode).
  o.map_4d = o.six_d ? eng.map_4d(delta_co,
                                   {o.closed_orbit[0], o.closed_orbit[1], o.closed_orbit[2], o.closed_orbit[3]},
                                   o.closed_orbit[4])
                     : o.map;
  o.steps = o.map.steps;
}

}  // namespace

LinearOptics compute_linear_optics(const Lattice& lattice, const OpticsOptions& options) {
  Engine eng(lattice, options);
  LinearOptics o;
  find_orbit_and_maps(eng, o);
  const double delta_co = o.closed_orbit[5];
  const Matrix6& r = o.map_4d.matrix;

  // Tunes and Twiss parameters (Wolski 2014, sec. 2.3; MAD-X: sign of M12).
  const auto q = transverse_tunes(r);
  o.qx = q[0];
  o.qy = q[1];
  const PlaneTwiss tx = twiss_from_block(r[0][0], r[0][1], r[1][0], r[1][1]);
  const PlaneTwiss ty = twiss_from_block(r[2][2], r[2][3], r[3][2], r[3][3]);
  if (!tx.stable || !ty.stable)
    throw Error("optics: the uncoupled 2x2 blocks of the one-turn matrix are unstable (strong coupling?)");
  o.beta_x = tx.beta;
  o.alpha_x = tx.alpha;
  o.gamma_x = tx.gamma;
  o.beta_y = ty.beta;
  o.alpha_y = ty.alpha;
  o.gamma_y = ty.gamma;

  // Synchrotron tune from the 6D matrix.
  o.qs = o.beta_s = o.alpha_s = kNaN;
  if (o.six_d) {
    const Matrix6& m = o.map.matrix;
    const PlaneTwiss ts = twiss_from_block(m[4][4], m[4][5], m[5][4], m[5][5]);
    o.beta_s = ts.beta;
    o.alpha_s = ts.alpha;
    const double u = longitudinal_two_cos(m, 2.0 * std::cos(2.0 * kPi * o.qx), 2.0 * std::cos(2.0 * kPi * o.qy));
    if (std::fabs(0.5 * u) < 1.0) {
      const double qs = std::acos(0.5 * u) / (2.0 * kPi);  // in [0, 0.5]
      o.qs = qs;
    }
    const auto q6 = six_d_tunes(m, o.beta_x, o.beta_y, o.beta_s, o.qx, o.qy);
    o.qx_6d = q6[0];
    o.qy_6d = q6[1];
    o.qs_6d = q6[2];
  }

  // Dispersion: the derivative of the 4D fixed point with respect to delta,
  //   (I - R4) D = R[0:4][delta]  (Wolski 2014, sec. 3.2), with R[.][delta] = R[.][pzeta] rvv.
  {
    const double a = dpzeta_ddelta(delta_co, o.beta0);
    std::vector<std::vector<double>> m(4, std::vector<double>(4));
    std::vector<double> b(4);
    for (size_t i = 0; i < 4; ++i) {
      for (size_t k = 0; k < 4; ++k) m[i][k] = (i == k ? 1.0 : 0.0) - r[i][k];
      b[i] = r[i][5] * a;
    }
    if (!solve(m, b)) throw Error("optics: I - R (4x4) is singular: cannot compute the dispersion (integer tune?)");
    o.dx = b[0];
    o.dpx = b[1];
    o.dy = b[2];
    o.dpy = b[3];
  }

  // Chromaticity Q' = dQ/d delta and slip factor from the 4D closed orbits at delta_co + j dd,
  // j = -2, -1, 1, 2 (five-point central differences; MAD-X's dq1/dq2 definition, xtrack
  // twiss's delta_chrom method). Slip factor: zeta = s - beta0 c t, so a turn changes zeta by
  // -eta C delta (MAD-X / xtrack convention, eta = alpha_c - 1 / gamma^2; Wolski 2014, sec. 3.3):
  //   eta = -(d dzeta_per_turn / d delta) / C.
  {
    const double dd = options.delta_chrom;
    struct Sample {
      double qx, qy, dzeta;
    };
    auto sample = [&](double j) {
      const double d = delta_co + j * dd;
      const std::array<double, 4> guess = {o.closed_orbit[0] + o.dx * j * dd, o.closed_orbit[1] + o.dpx * j * dd,
                                           o.closed_orbit[2] + o.dy * j * dd, o.closed_orbit[3] + o.dpy * j * dd};
      const OneTurnMap m = eng.map_4d(d, guess, o.map_4d.closed_orbit[4]);
      const auto qq = transverse_tunes(m.matrix);
      return Sample{qq[0], qq[1], m.dzeta_per_turn};
    };
    auto wrapped = [](double d) { return d - std::round(d); };
    const Sample p1 = sample(1.0), m1 = sample(-1.0);
    // Differences over the represented offsets would differ from 2 dd only by rounding of
    // delta_co + dd (relative 1e-16 / dd): negligible.
    double dqx = wrapped(p1.qx - m1.qx) / (2.0 * dd), dqy = wrapped(p1.qy - m1.qy) / (2.0 * dd);
    double dz = (p1.dzeta - m1.dzeta) / (2.0 * dd);
    o.chrom_points = 3;
    try {
      const Sample p2 = sample(2.0), m2 = sample(-2.0);
      dqx = (8.0 * wrapped(p1.qx - m1.qx) - wrapped(p2.qx - m2.qx)) / (12.0 * dd);
      dqy = (8.0 * wrapped(p1.qy - m1.qy) - wrapped(p2.qy - m2.qy)) / (12.0 * dd);
      dz = (8.0 * (p1.dzeta - m1.dzeta) - (p2.dzeta - m2.dzeta)) / (12.0 * dd);
      o.chrom_points = 5;
    } catch (const Error&) {
      // keep the three-point values
    }
    o.dqx = dqx;
    o.dqy = dqy;
    o.eta = -dz / o.circumference;
    const double bg = o.beta0 * o.gamma0 * (1.0 + delta_co);  // beta gamma of the closed orbit
    const double gamma2 = 1.0 + bg * bg;
    o.alpha_c = o.eta + 1.0 / gamma2;
    // gamma_t only where alpha_c stands above the rounding of eta + 1/gamma^2 (~1e-12 / gamma^2).
    o.gamma_tr = o.alpha_c > 1e-9 / gamma2 ? 1.0 / std::sqrt(o.alpha_c) : kNaN;
  }
  return o;
}

BeamSizes beam_sizes(const LinearOptics& optics, double eps_nx, double eps_ny) {
  const double bg = optics.beta0 * optics.gamma0;
  BeamSizes s;
  s.sigma_x = std::sqrt(optics.beta_x * eps_nx / bg);
  s.sigma_px = std::sqrt(optics.gamma_x * eps_nx / bg);
  s.sigma_y = std::sqrt(optics.beta_y * eps_ny / bg);
  s.sigma_py = std::sqrt(optics.gamma_y * eps_ny / bg);
  return s;
}

Particles make_gaussian(const Lattice& lattice, const LinearOptics& optics, size_t n, double eps_nx, double eps_ny,
                        double sigma_zeta, double sigma_delta, uint64_t seed) {
  return make_gaussian(lattice.reference(), optics, n, eps_nx, eps_ny, sigma_zeta, sigma_delta, seed);
}

namespace {

/// make_gaussian's and gaussian_bunch's checks of their inputs.
void check_gaussian_inputs(const LinearOptics& optics, double eps_nx, double eps_ny, double sigma_zeta,
                           double sigma_delta) {
  const struct {
    const char* name;
    double value;
  } checks[] = {{"eps_nx", eps_nx}, {"eps_ny", eps_ny}, {"sigma_zeta", sigma_zeta}, {"sigma_delta", sigma_delta}};
  for (const auto& c : checks)
    if (!(c.value >= 0.0) || !std::isfinite(c.value)) {
      InputLocation at;
      at.field = c.name;
      throw InputError(at, fmt::format("must be a finite number >= 0, got {}", c.value));
    }
  if (!(optics.beta_x > 0.0) || !(optics.beta_y > 0.0))
    throw InputError(InputLocation{}, "make_gaussian: the optics have no stable Twiss parameters (beta_x, beta_y)");
}

}  // namespace

Particles make_gaussian(const ReferenceParticle& reference, const LinearOptics& optics, size_t n, double eps_nx,
                        double eps_ny, double sigma_zeta, double sigma_delta, uint64_t seed) {
  check_gaussian_inputs(optics, eps_nx, eps_ny, sigma_zeta, sigma_delta);
  const double bg = reference.beta0() * reference.gamma0();
  const double ex = eps_nx / bg, ey = eps_ny / bg;  // geometric emittances [m rad]
  const double sbx = std::sqrt(optics.beta_x), sby = std::sqrt(optics.beta_y);
  const auto& co = optics.closed_orbit;
  NormalGenerator g(seed);
  Particles p(n, reference.beta0());
  for (size_t i = 0; i < n; ++i) {
    const double xh = std::sqrt(ex) * g(), pxh = std::sqrt(ex) * g();
    const double yh = std::sqrt(ey) * g(), pyh = std::sqrt(ey) * g();
    const double dz = sigma_zeta * g(), dd = sigma_delta * g();
    p.set(i, co[0] + sbx * xh + optics.dx * dd, co[1] + (pxh - optics.alpha_x * xh) / sbx + optics.dpx * dd,
          co[2] + sby * yh + optics.dy * dd, co[3] + (pyh - optics.alpha_y * yh) / sby + optics.dpy * dd,
          co[4] + dz, co[5] + dd);
  }
  return p;
}

ft_gaussian_bunch gaussian_bunch(const ReferenceParticle& reference, const LinearOptics& optics, double eps_nx,
                                 double eps_ny, double sigma_zeta, double sigma_delta) {
  check_gaussian_inputs(optics, eps_nx, eps_ny, sigma_zeta, sigma_delta);
  const double bg = reference.beta0() * reference.gamma0();
  ft_gaussian_bunch b{};
  b.sqrt_emittance_x = std::sqrt(eps_nx / bg), b.sqrt_emittance_y = std::sqrt(eps_ny / bg);
  b.sqrt_beta_x = std::sqrt(optics.beta_x), b.alpha_x = optics.alpha_x;
  b.sqrt_beta_y = std::sqrt(optics.beta_y), b.alpha_y = optics.alpha_y;
  b.dx = optics.dx, b.dpx = optics.dpx, b.dy = optics.dy, b.dpy = optics.dpy;
  b.sigma_zeta = sigma_zeta, b.sigma_delta = sigma_delta;
  for (size_t k = 0; k < 6; ++k) b.orbit[k] = optics.closed_orbit[k];
  b.beta0 = reference.beta0();
  return b;
}

Particles sample_gaussian_bunch(const ft_gaussian_bunch& bunch, uint64_t seed, size_t first, size_t count,
                                int threads) {
  Particles p(count, bunch.beta0);
  const long long n = static_cast<long long>(count);
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (long long k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(k);
    p.store(i, ft_gaussian_bunch_particle(bunch, seed, static_cast<unsigned long long>(first + i)));
    p.id[i] = static_cast<int64_t>(first + i);
  }
  return p;
}

double tune_from_tracking(const std::vector<double>& x, const std::vector<double>& px, double beta, double alpha) {
  const size_t n = std::min(x.size(), px.size());
  if (n < 16) throw Error(fmt::format("tune_from_tracking: needs at least 16 turns of data, got {}", n));
  if (!(beta > 0.0) || !std::isfinite(beta) || !std::isfinite(alpha))
    throw Error(fmt::format("tune_from_tracking: beta = {} must be > 0 and alpha = {} finite", beta, alpha));
  const double sb = std::sqrt(beta);
  // Windowed, normalized signal w_n z_n.
  std::vector<std::complex<double>> wz(n);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(px[i]))
      throw Error(fmt::format("tune_from_tracking: sample {} is not finite", i));
    const double xh = x[i] / sb, pxh = (alpha * x[i] + beta * px[i]) / sb;
    const double w = 1.0 - std::cos(2.0 * kPi * (static_cast<double>(i) + 0.5) / static_cast<double>(n));
    wz[i] = std::complex<double>(w * xh, -w * pxh);
  }
  // FFT peak (zero-padded to a power of two >= 4 n).
  size_t nfft = 1;
  while (nfft < 4 * n) nfft <<= 1;
  fftw_complex* buf = fftw_alloc_complex(nfft);
  if (!buf) throw Error("tune_from_tracking: out of memory for the FFT");
  fftw_plan plan;
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    plan = fftw_plan_dft_1d(static_cast<int>(nfft), buf, buf, FFTW_FORWARD, FFTW_ESTIMATE);
  }
  for (size_t i = 0; i < nfft; ++i) {
    buf[i][0] = i < n ? wz[i].real() : 0.0;
    buf[i][1] = i < n ? wz[i].imag() : 0.0;
  }
  fftw_execute(plan);
  size_t kmax = 0;
  double amax = -1.0;
  for (size_t k = 0; k < nfft; ++k) {
    const double a = buf[k][0] * buf[k][0] + buf[k][1] * buf[k][1];
    if (a > amax) {
      amax = a;
      kmax = k;
    }
  }
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    fftw_destroy_plan(plan);
  }
  fftw_free(buf);
  if (!(amax > 0.0)) throw Error("tune_from_tracking: the signal is zero");

  // Refinement (NAFF): maximise A(Q) = |S(Q)|^2, S(Q) = sum_n w_n z_n e^{-2 pi i Q n}, through
  // the root of A'(Q) = 2 Re(conj(S) S'), S' = sum_n (-2 pi i n) w_n z_n e^{-2 pi i Q n}. The
  // phase is taken about the middle of the record (n - (N-1)/2), which leaves |S| unchanged.
  const double centre = 0.5 * static_cast<double>(n - 1);
  auto derivative = [&](double qq) {
    std::complex<double> s(0.0, 0.0), ds(0.0, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(i) - centre;
      const double ph = -2.0 * kPi * qq * t;
      const std::complex<double> term = wz[i] * std::complex<double>(std::cos(ph), std::sin(ph));
      s += term;
      ds += std::complex<double>(0.0, -2.0 * kPi * t) * term;
    }
    return 2.0 * (std::conj(s) * ds).real();
  };
  const double q0 = static_cast<double>(kmax) / static_cast<double>(nfft);
  double lo = q0 - 1.0 / static_cast<double>(nfft), hi = q0 + 1.0 / static_cast<double>(nfft);
  double glo = derivative(lo), ghi = derivative(hi);
  if (!(glo > 0.0 && ghi < 0.0)) {
    // Not bracketed (a neighbouring line): widen once within the Hann main lobe (+-2 / n).
    lo = q0 - 1.0 / static_cast<double>(n);
    hi = q0 + 1.0 / static_cast<double>(n);
    glo = derivative(lo);
    ghi = derivative(hi);
  }
  double q = q0;
  if (glo > 0.0 && ghi < 0.0) {
    // Illinois regula falsi, safeguarded by bisection.
    int side = 0;
    for (int it = 0; it < 200 && hi - lo > 1e-16; ++it) {
      double m = (lo * ghi - hi * glo) / (ghi - glo);
      if (!(m > lo && m < hi)) m = 0.5 * (lo + hi);
      const double gm = derivative(m);
      if (gm == 0.0) {
        lo = hi = m;
        break;
      }
      if (gm > 0.0) {
        lo = m;
        glo = gm;
        if (side == -1) ghi *= 0.5;
        side = -1;
      } else {
        hi = m;
        ghi = gm;
        if (side == 1) glo *= 0.5;
        side = 1;
      }
    }
    q = 0.5 * (lo + hi);
  }
  q -= std::floor(q);
  if (q >= 1.0) q -= 1.0;
  return q;
}

TrackedTunes tunes_by_tracking(const Lattice& lattice, const LinearOptics& optics, int64_t turns,
                               const OpticsOptions& options) {
  if (turns < 16) {
    InputLocation at;
    at.field = "tracking turns";
    throw InputError(at, fmt::format("needs at least 16 turns, got {}", turns));
  }
  check_lattice(lattice);
  const RingTracker tracker(lattice, !optics.six_d, options.threads);
  const double beta0 = lattice.reference().beta0();
  const auto& co = optics.closed_orbit;
  const double a = options.tracking_amplitude;
  const size_t np = optics.six_d ? 3 : 2;
  Particles p(np, beta0);
  p.set(0, co[0] + a * std::sqrt(optics.beta_x), co[1], co[2], co[3], co[4], co[5]);
  p.set(1, co[0], co[1], co[2] + a * std::sqrt(optics.beta_y), co[3], co[4], co[5]);
  if (optics.six_d) p.set(2, co[0], co[1], co[2], co[3], co[4] + a * std::sqrt(optics.beta_s), co[5]);
  const double pz_co = pzeta_of_delta(co[5], beta0);
  std::vector<double> xs, pxs, ys, pys, zs, pzs;
  auto record = [&](const Particles& q) {
    xs.push_back(q.x[0] - co[0]);
    pxs.push_back(q.px[0] - co[1]);
    ys.push_back(q.y[1] - co[2]);
    pys.push_back(q.py[1] - co[3]);
    if (optics.six_d) {
      zs.push_back(q.zeta[2] - co[4]);
      pzs.push_back(pzeta_of_delta(q.delta[2], beta0) - pz_co);
    }
  };
  record(p);
  tracker.track(p, turns, 0, [&](int64_t, const Particles& q) { record(q); });
  for (size_t i = 0; i < np; ++i)
    if (p.state[i] <= 0)
      throw Error(fmt::format("optics: a small-amplitude particle for the tune from tracking was lost at turn {}",
                              p.lost_turn[i]));
  TrackedTunes t;
  t.turns = turns;
  t.qx = tune_from_tracking(xs, pxs, optics.beta_x, optics.alpha_x);
  t.qy = tune_from_tracking(ys, pys, optics.beta_y, optics.alpha_y);
  t.qs = kNaN;
  if (optics.six_d) {
    const double qs = tune_from_tracking(zs, pzs, optics.beta_s, optics.alpha_s);
    t.qs = std::min(qs, 1.0 - qs);
  }
  return t;
}

TuneFootprint tune_footprint(const Lattice& lattice, const LinearOptics& optics, Backend& backend,
                             const FootprintOptions& options) {
  auto bad = [](const char* field, const std::string& why) {
    InputLocation at;
    at.field = field;
    throw InputError(at, why);
  };
  if (options.turns < 16) bad("turns", fmt::format("a tune footprint needs at least 16 turns, got {}", options.turns));
  if (options.amplitudes < 1 || options.angles < 1)
    bad("amplitudes", fmt::format("needs at least one amplitude and one angle, got {} and {}", options.amplitudes,
                                  options.angles));
  if (!(options.max_sigma > 0.0) || !std::isfinite(options.max_sigma))
    bad("max_sigma", fmt::format("the largest amplitude must be positive, got {}", options.max_sigma));
  if (!(options.min_sigma > 0.0) || !(options.min_sigma < options.max_sigma))
    bad("min_sigma", fmt::format("the smallest amplitude must be in (0, max_sigma), got {}", options.min_sigma));
  if (!(options.emittance_nx > 0.0) || !(options.emittance_ny > 0.0) || !std::isfinite(options.emittance_nx) ||
      !std::isfinite(options.emittance_ny))
    bad("emittances", fmt::format("the normalized emittances must be positive, got {} and {}", options.emittance_nx,
                                  options.emittance_ny));
  const BeamSizes sizes = beam_sizes(optics, options.emittance_nx, options.emittance_ny);
  const auto& co = optics.closed_orbit;
  TuneFootprint fp;
  fp.turns = options.turns;
  fp.sigma_x = sizes.sigma_x;
  fp.sigma_y = sizes.sigma_y;
  const double pi_half = 2.0 * std::atan(1.0);
  for (int a = 1; a <= options.amplitudes; ++a)
    for (int t = 0; t < options.angles; ++t) {
      const double r = options.max_sigma * a / options.amplitudes;
      const double angle = options.angles > 1 ? pi_half * t / (options.angles - 1) : pi_half / 2.0;
      fp.amplitude_x.push_back(std::max(r * std::cos(angle), options.min_sigma));
      fp.amplitude_y.push_back(std::max(r * std::sin(angle), options.min_sigma));
    }
  const size_t n = fp.amplitude_x.size();
  Particles p(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const double x = fp.amplitude_x[i] * sizes.sigma_x, y = fp.amplitude_y[i] * sizes.sigma_y;
    // Off momentum: on the dispersive orbit co + D delta, so that delta adds no betatron amplitude.
    const double d = options.delta_offset;
    p.set(i, co[0] + optics.dx * d + x, co[1] + optics.dpx * d - optics.alpha_x * x / optics.beta_x,
          co[2] + optics.dy * d + y, co[3] + optics.dpy * d - optics.alpha_y * y / optics.beta_y,
          co[4] + options.zeta_offset, co[5] + d);
  }
  // Turn-by-turn deviations from the closed orbit, [particle][turn].
  std::vector<std::vector<double>> xs(n), pxs(n), ys(n), pys(n);
  auto record = [&](const Particles& q) {
    for (size_t i = 0; i < n; ++i) {
      if (q.state[i] <= 0) continue;
      xs[i].push_back(q.x[i] - co[0]);
      pxs[i].push_back(q.px[i] - co[1]);
      ys[i].push_back(q.y[i] - co[2]);
      pys[i].push_back(q.py[i] - co[3]);
    }
  };
  record(p);
  TrackOptions to;
  to.turns = options.turns;
  to.threads = options.threads;
  to.fma = options.fma;
  to.callback_every = 1;
  to.callback = [&](int64_t, const Particles& q) {
    record(q);
    return true;
  };
  backend.track(p, to);
  for (size_t i = 0; i < n; ++i) {
    const bool alive = p.state[i] > 0;
    fp.lost_turn.push_back(alive ? -1 : p.lost_turn[i]);
    fp.qx.push_back(alive ? tune_from_tracking(xs[i], pxs[i], optics.beta_x, optics.alpha_x) : kNaN);
    fp.qy.push_back(alive ? tune_from_tracking(ys[i], pys[i], optics.beta_y, optics.alpha_y) : kNaN);
  }
  return fp;
}

nlohmann::ordered_json optics_to_json(const LinearOptics& o) {
  using json = nlohmann::ordered_json;
  json j;
  j["method"] = o.six_d ? "6d" : "4d";
  j["method_reason"] = o.mode_reason;
  j["reference"] = {{"beta0", o.beta0}, {"gamma0", o.gamma0}};
  j["circumference"] = o.circumference;
  json co = json::object();
  for (int k = 0; k < 6; ++k) co[kCoordinateNames[k]] = o.closed_orbit[static_cast<size_t>(k)];
  j["closed_orbit"] = co;
  j["closed_orbit_residual"] = o.map.residual;
  j["newton_iterations"] = o.map.iterations;
  auto matrix_json = [](const Matrix6& m) {
    json rows = json::array();
    for (const auto& row : m) {
      json r = json::array();
      for (double v : row) r.push_back(number(v));
      rows.push_back(r);
    }
    return rows;
  };
  j["one_turn_matrix"] = {{"coordinates", {"x", "px", "y", "py", "zeta", "pzeta"}},
                          {"method", o.six_d ? "6d" : "4d"},
                          {"rows", matrix_json(o.map.matrix)}};
  if (o.six_d) j["one_turn_matrix_4d"] = {{"rows", matrix_json(o.map_4d.matrix)}};
  j["finite_difference_steps"] = {{"x", o.steps[0]},    {"px", o.steps[1]},   {"y", o.steps[2]},
                                  {"py", o.steps[3]},   {"zeta", o.steps[4]}, {"delta", o.steps[5]}};
  j["finite_difference_steps"]["stencil_points"] = o.map.stencil_points;
  // qx, qy: the method's map (6D eigen-tunes in 6D); qx_4d, qy_4d: the 4D map (delta frozen).
  j["tunes"] = {{"qx", o.six_d ? o.qx_6d : o.qx},
                {"qy", o.six_d ? o.qy_6d : o.qy},
                {"qs", number(o.qs)},
                {"qx_4d", o.qx},
                {"qy_4d", o.qy},
                {"source", o.six_d ? "eigenvalues of the 6D one-turn matrix" : "4D one-turn matrix"}};
  j["twiss"] = {{"betx", o.beta_x}, {"alfx", o.alpha_x}, {"gamx", o.gamma_x},
                {"bety", o.beta_y}, {"alfy", o.alpha_y}, {"gamy", o.gamma_y},
                {"dx", o.dx},             {"dpx", o.dpx},            {"dy", o.dy},
                {"dpy", o.dpy},           {"bets", number(o.beta_s)}, {"alfs", number(o.alpha_s)}};
  j["chromaticity"] = {{"dqx", o.dqx}, {"dqy", o.dqy}, {"delta_chrom", o.delta_chrom}, {"stencil_points", o.chrom_points}};
  j["longitudinal"] = {{"slip_factor", o.eta}, {"momentum_compaction", o.alpha_c}, {"gamma_tr", number(o.gamma_tr)}};
  return j;
}


// -----------------------------------------------------------------------------------------------
// Optics along the ring (see optics.h).

namespace {

using Complex = std::complex<double>;
using CVector4 = std::array<Complex, 4>;

/// One element's linear map around the closed orbit, delta frozen: d(x, px, y, py, zeta)_out /
/// d(x, px, y, py, zeta, delta)_in, row-major (5 rows of 6). zeta is kept: an element whose
/// transverse kick depends on zeta (a crab cavity) couples the path length of earlier elements
/// into the transverse motion within the turn, which the one-turn matrix contains.
constexpr size_t kJacRows = 5, kJacCols = 6;
using ElementJacobian = std::array<double, kJacRows * kJacCols>;

/// Takes particles through one sequence entry at a time with the CPU backend's own per-entry
/// function (ft::track_sequence_entry: the transformation around the element when it has one,
/// the element, the global limits; collective elements are skipped, as in
/// TrackOptions::collective = false). With `freeze_delta`, delta is restored after the element
/// (the 4D map of RingTracker).
class ElementStepper {
 public:
  ElementStepper(const Lattice& lattice, bool freeze_delta) : m_lattice(lattice), m_freeze(freeze_delta) {
    const GlobalLimits l = lattice.limits();
    m_limit_x = l.x;
    m_limit_y = l.y;
  }

  void step(Particles& p, size_t e) {
    const ElementDefinition& def = m_lattice.element(e);
    if (m_freeze) m_saved = p.delta;
    ft_particle_block b = p.block(0, p.size());
    b.limit_x = m_limit_x;
    b.limit_y = m_limit_y;
    b.turn = 0;
    b.element_index = static_cast<int64_t>(e);
    ft_error err{};
    if (track_sequence_entry(m_lattice, e, b, &err) != 0)
      throw Error(fmt::format("optics along the ring: element #{} '{}' ({}) failed: {}", e, def.name, def.type->name,
                              err.message));
    for (size_t i = 0; i < p.size(); ++i) {
      if (p.state[i] <= 0)
        throw Error(fmt::format("optics along the ring: a probe particle near the closed orbit was lost at element #{} "
                                "'{}' ({}, state {})",
                                e, def.name, def.type->name, p.state[i]));
      if (m_freeze && p.delta[i] != m_saved[i]) {
        ParticleView v = p.view(i);
        v.update_delta(m_saved[i]);
        p.store(i, v);
      }
    }
  }

 private:
  const Lattice& m_lattice;
  bool m_freeze;
  double m_limit_x = 0.0, m_limit_y = 0.0;
  std::vector<double> m_saved;
};

/// Puts the centre z into particle 0 and z +- steps[k] into particles 1 + 2k, 2 + 2k (13 in all);
/// returns the represented offsets (z + h) - (z - h).
std::array<double, kJacCols> set_probes(Particles& p, const double* z, const std::array<double, 6>& steps) {
  std::array<double, kJacCols> step_in{};
  p.set(0, z[0], z[1], z[2], z[3], z[4], z[5]);
  for (size_t k = 0; k < kJacCols; ++k) {
    double zp[6], zm[6];
    std::copy(z, z + 6, zp);
    std::copy(z, z + 6, zm);
    zp[k] += steps[k];
    zm[k] -= steps[k];
    step_in[k] = zp[k] - zm[k];
    p.set(1 + 2 * k, zp[0], zp[1], zp[2], zp[3], zp[4], zp[5]);
    p.set(2 + 2 * k, zm[0], zm[1], zm[2], zm[3], zm[4], zm[5]);
  }
  return step_in;
}

ElementJacobian jacobian_of_probes(const Particles& p, const std::array<double, kJacCols>& step_in) {
  ElementJacobian j{};
  const std::vector<double>* out[kJacRows] = {&p.x, &p.px, &p.y, &p.py, &p.zeta};
  for (size_t i = 0; i < kJacRows; ++i)
    for (size_t k = 0; k < kJacCols; ++k)
      j[kJacCols * i + k] = ((*out[i])[1 + 2 * k] - (*out[i])[2 + 2 * k]) / step_in[k];
  return j;
}

/// 2 cos mu of the two eigenmodes of a 4x4 symplectic (x, px, y, py) block (Edwards-Teng; see
/// transverse_tunes), mode 1 the one closer to the x block. Throws on a coupling resonance.
std::array<double, 2> edwards_teng_two_cos(const std::array<std::array<double, 4>, 4>& m) {
  const double tra = m[0][0] + m[1][1], trd = m[2][2] + m[3][3];
  const double b00 = m[0][2] + m[3][1], b01 = m[0][3] - m[2][1];
  const double b10 = m[1][2] - m[3][0], b11 = m[1][3] + m[2][0];
  const double half_diff = 0.5 * (tra - trd);
  const double disc = half_diff * half_diff + (b00 * b11 - b01 * b10);
  if (!(disc >= 0.0))
    throw Error(fmt::format("optics along the ring: the transverse motion is unstable (coupling resonance: "
                            "Edwards-Teng discriminant {:.3g} < 0)",
                            disc));
  const double root = std::copysign(std::sqrt(disc), half_diff == 0.0 ? 1.0 : half_diff);
  return {0.5 * (tra + trd) + root, 0.5 * (tra + trd) - root};
}

/// A non-zero solution of a v = 0 for a singular 4x4 complex matrix (rank 3): Gaussian
/// elimination with full pivoting, the last unknown (in pivot order) set to 1.
CVector4 null_vector(std::array<CVector4, 4> a) {
  std::array<int, 4> col = {0, 1, 2, 3};
  for (int k = 0; k < 3; ++k) {
    int pr = k, pc = k;
    for (int r = k; r < 4; ++r)
      for (int c = k; c < 4; ++c)
        if (std::abs(a[static_cast<size_t>(r)][static_cast<size_t>(c)]) >
            std::abs(a[static_cast<size_t>(pr)][static_cast<size_t>(pc)])) {
          pr = r;
          pc = c;
        }
    std::swap(a[static_cast<size_t>(k)], a[static_cast<size_t>(pr)]);
    for (auto& row : a) std::swap(row[static_cast<size_t>(k)], row[static_cast<size_t>(pc)]);
    std::swap(col[static_cast<size_t>(k)], col[static_cast<size_t>(pc)]);
    const Complex pivot = a[static_cast<size_t>(k)][static_cast<size_t>(k)];
    if (pivot == 0.0) throw Error("optics along the ring: the one-turn matrix has a degenerate eigenvalue");
    for (int r = k + 1; r < 4; ++r) {
      const Complex f = a[static_cast<size_t>(r)][static_cast<size_t>(k)] / pivot;
      for (int c = k; c < 4; ++c)
        a[static_cast<size_t>(r)][static_cast<size_t>(c)] -= f * a[static_cast<size_t>(k)][static_cast<size_t>(c)];
    }
  }
  CVector4 y{};
  y[3] = 1.0;
  for (int k = 2; k >= 0; --k) {
    Complex sum = 0.0;
    for (int c = k + 1; c < 4; ++c) sum += a[static_cast<size_t>(k)][static_cast<size_t>(c)] * y[static_cast<size_t>(c)];
    y[static_cast<size_t>(k)] = -sum / a[static_cast<size_t>(k)][static_cast<size_t>(k)];
  }
  CVector4 v{};
  for (int k = 0; k < 4; ++k) v[static_cast<size_t>(col[static_cast<size_t>(k)])] = y[static_cast<size_t>(k)];
  return v;
}

/// u^H S w with S = diag(J2, J2), J2 = [[0, 1], [-1, 0]].
Complex symplectic_product(const CVector4& u, const CVector4& w) {
  return std::conj(u[0]) * w[1] - std::conj(u[1]) * w[0] + std::conj(u[2]) * w[3] - std::conj(u[3]) * w[2];
}

/// The x plane's part of v^H S v = i (v^H S v = 2i Im(conj(v_x) v_px) + 2i Im(conj(v_y) v_py)).
double x_share(const CVector4& v) { return 2.0 * (std::conj(v[0]) * v[1]).imag(); }

/// The normalized eigenvectors (v^H S v = i) of the two modes of a stable 4x4 symplectic matrix;
/// mode 1 is the one with the larger x share.
std::array<CVector4, 2> transverse_eigenvectors(const std::array<std::array<double, 4>, 4>& m) {
  double coupling = 0.0;
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k)
      if ((i < 2) != (k < 2)) coupling = std::max(coupling, std::fabs(m[i][k]));
  std::array<CVector4, 2> modes{};
  if (coupling == 0.0) {
    // Uncoupled (also with equal tunes): the classic Twiss parameters of each 2x2 block.
    for (int p = 0; p < 2; ++p) {
      const size_t o = static_cast<size_t>(2 * p);
      const PlaneTwiss t = twiss_from_block(m[o][o], m[o][o + 1], m[o + 1][o], m[o + 1][o + 1]);
      if (!t.stable)
        throw Error(fmt::format("optics along the ring: the {} motion is unstable", p == 0 ? "horizontal" : "vertical"));
      const double sb = std::sqrt(t.beta);
      CVector4 v{};
      v[o] = sb / std::sqrt(2.0);
      v[o + 1] = Complex(-t.alpha, 1.0) / (sb * std::sqrt(2.0));
      modes[static_cast<size_t>(p)] = v;
    }
    return modes;
  }
  const std::array<double, 2> u = edwards_teng_two_cos(m);
  for (int p = 0; p < 2; ++p) {
    const double c = 0.5 * u[static_cast<size_t>(p)];
    if (!(std::fabs(c) < 1.0))
      throw Error(fmt::format("optics along the ring: eigenmode {} is unstable (cos mu = {:.12g})", p + 1, c));
    const Complex lambda(c, std::sqrt(1.0 - c * c));
    std::array<CVector4, 4> a{};
    for (size_t i = 0; i < 4; ++i)
      for (size_t k = 0; k < 4; ++k) a[i][k] = m[i][k] - (i == k ? lambda : Complex(0.0));
    CVector4 v = null_vector(a);
    double w = symplectic_product(v, v).imag();
    if (w < 0.0) {
      for (auto& z : v) z = std::conj(z);
      w = -w;
    }
    if (!(w > 0.0) || !std::isfinite(w))
      throw Error("optics along the ring: an eigenvector of the one-turn matrix has no symplectic norm");
    for (auto& z : v) z /= std::sqrt(w);
    modes[static_cast<size_t>(p)] = v;
  }
  if (x_share(modes[1]) > x_share(modes[0])) std::swap(modes[0], modes[1]);
  // Eigenvectors of distinct eigenvalues are symplectically orthogonal (v1^H S v2 = v1^T S v2 = 0);
  // on a coupling resonance (equal mode tunes) the modes are not separable.
  CVector4 conj1 = modes[0];
  for (auto& z : conj1) z = std::conj(z);
  if (!(std::abs(symplectic_product(modes[0], modes[1])) < 1e-6) || !(std::abs(symplectic_product(conj1, modes[1])) < 1e-6))
    throw Error("optics along the ring: the two transverse eigenmodes are not separable (the ring is on a coupling "
                "resonance, equal mode tunes)");
  return modes;
}

/// (x, px, y, py, zeta): an eigenvector with its zeta part, 0 at the start (zeta starts every
/// turn of the 4D map at the orbit's zeta) and filled in along the ring.
using CVector5 = std::array<Complex, 5>;

CVector5 propagate(const ElementJacobian& j, const CVector5& v) {
  CVector5 r{};
  for (size_t i = 0; i < kJacRows; ++i)
    for (size_t k = 0; k < kJacRows; ++k) r[i] += j[kJacCols * i + k] * v[k];
  return r;
}

double wrap_phase(double d) {
  // into (-pi, pi]
  d = std::remainder(d, 2.0 * kPi);
  if (d <= -kPi) d += 2.0 * kPi;
  return d;
}

}  // namespace

std::vector<std::pair<std::string, const std::vector<double>*>> TwissTable::numeric_columns() const {
  return {{"s", &s},           {"x", &x},           {"px", &px},         {"y", &y},
          {"py", &py},         {"zeta", &zeta},     {"delta", &delta},   {"beta_x", &beta_x},
          {"alpha_x", &alpha_x}, {"mu_x", &mu_x},   {"beta_y", &beta_y}, {"alpha_y", &alpha_y},
          {"mu_y", &mu_y},     {"dx", &dx},         {"dpx", &dpx},       {"dy", &dy},
          {"dpy", &dpy},       {"beta_1x", &beta_1x}, {"alpha_1x", &alpha_1x}, {"beta_1y", &beta_1y},
          {"alpha_1y", &alpha_1y}, {"beta_2x", &beta_2x}, {"alpha_2x", &alpha_2x}, {"beta_2y", &beta_2y},
          {"alpha_2y", &alpha_2y}};
}

TwissTable compute_twiss_table(const Lattice& lattice, const OpticsOptions& options) {
  Engine eng(lattice, options);
  LinearOptics o;
  find_orbit_and_maps(eng, o);
  return compute_twiss_table(lattice, o, options);
}

namespace {

/// Pass 1 of the table: the closed orbit through every element and each element's Jacobian.
struct ElementPass {
  std::vector<ElementJacobian> jacobians;
  /// Their product: d(x, px, y, py, zeta)_end / d(x, px, y, py, zeta, delta)_start (the delta row
  /// is (0, ..., 0, 1): delta frozen).
  std::array<std::array<double, kJacCols>, kJacRows> product{};
};

/// One element tracked by the element-by-element pass (ElementStepper) and by the CPU backend's
/// whole-turn kernel restricted to that element (TrackOptions element range, delta restored after
/// it as RingTracker does): the largest difference of their Jacobians around z over
/// max(1, max |entry|).
double stepping_mismatch(const Lattice& lattice, Backend& backend, size_t e, const double* z,
                         const std::array<double, 6>& steps) {
  Particles a(1 + 2 * kJacCols, lattice.reference().beta0());
  const auto step_in = set_probes(a, z, steps);
  Particles b = a;
  const std::vector<double> delta_in = a.delta;
  ElementStepper stepper(lattice, true);
  stepper.step(a, e);
  TrackOptions o;
  o.collective = false;
  o.turns = 1;
  o.element_begin = e;
  o.element_end = e + 1;
  o.threads = 1;
  backend.track(b, o);
  for (size_t i = 0; i < b.size(); ++i)
    if (b.state[i] > 0 && b.delta[i] != delta_in[i]) {
      ParticleView v = b.view(i);
      v.update_delta(delta_in[i]);
      b.store(i, v);
    }
  const ElementJacobian ja = jacobian_of_probes(a, step_in), jb = jacobian_of_probes(b, step_in);
  double diff = 0.0, scale = 1.0;
  for (size_t k = 0; k < ja.size(); ++k) {
    diff = std::max(diff, std::fabs(ja[k] - jb[k]));
    scale = std::max(scale, std::fabs(jb[k]));
  }
  return std::isfinite(diff) ? diff / scale : std::numeric_limits<double>::infinity();
}

ElementPass element_pass(const Lattice& lattice, const std::array<double, 6>& start, const OpticsOptions& options,
                         TwissTable& t) {
  const size_t n = lattice.sequence().size();
  // Particle 0 follows the orbit; 1 + 2k and 2 + 2k start each element at the orbit +- the step in
  // coordinate k (x, px, y, py, zeta, delta).
  Particles p(1 + 2 * kJacCols, lattice.reference().beta0());
  p.set(0, start[0], start[1], start[2], start[3], start[4], start[5]);
  ElementStepper stepper(lattice, true);
  ElementPass pass;
  pass.jacobians.resize(n);
  for (size_t i = 0; i < kJacRows; ++i) pass.product[i][i] = 1.0;
  auto record_orbit = [&](size_t row) {
    t.x[row] = p.x[0];
    t.px[row] = p.px[0];
    t.y[row] = p.y[0];
    t.py[row] = p.py[0];
    t.zeta[row] = p.zeta[0];
    t.delta[row] = p.delta[0];
  };
  t.name[0] = "_start";
  t.type[0] = "";
  t.s[0] = 0.0;
  record_orbit(0);
  for (size_t e = 0; e < n; ++e) {
    double z[6];
    p.coordinates(0, z);
    const auto step_in = set_probes(p, z, options.steps);
    stepper.step(p, e);
    const ElementJacobian& j = pass.jacobians[e] = jacobian_of_probes(p, step_in);
    std::array<std::array<double, kJacCols>, kJacRows> next{};
    for (size_t i = 0; i < kJacRows; ++i)
      for (size_t k = 0; k < kJacCols; ++k) {
        double sum = k == kJacCols - 1 ? j[kJacCols * i + k] : 0.0;
        for (size_t m = 0; m < kJacRows; ++m) sum += j[kJacCols * i + m] * pass.product[m][k];
        next[i][k] = sum;
      }
    pass.product = next;
    const ElementDefinition& def = lattice.element(e);
    t.name[e + 1] = def.name;
    t.type[e + 1] = def.type->name;
    t.s[e + 1] = e + 1 < n ? lattice.sequence()[e + 1].s : t.circumference;
    record_orbit(e + 1);
  }
  return pass;
}

/// Checks of pass 1 against the one-turn tracking: the orbit closes and the product of the
/// element Jacobians is the 4D one-turn matrix. On failure, finds the first element whose
/// stepping differs from the backend's kernel and names it.
void check_element_pass(const Lattice& lattice, const LinearOptics& optics, const ElementPass& pass,
                        const OpticsOptions& options, TwissTable& t) {
  const size_t n = lattice.sequence().size();
  const std::array<double, 6>& start = optics.map_4d.closed_orbit;
  t.orbit_closure = std::max({std::fabs(t.x[n] - start[0]), std::fabs(t.px[n] - start[1]),
                              std::fabs(t.y[n] - start[2]), std::fabs(t.py[n] - start[3])});
  const Matrix6& r = optics.map_4d.matrix;
  const double per_delta = dpzeta_ddelta(start[5], lattice.reference().beta0());  // r's last column is per pzeta
  double diff = 0.0, scale = 1.0;
  for (size_t i = 0; i < kJacRows; ++i)
    for (size_t k = 0; k < kJacCols; ++k) {
      const double ref = k < 5 ? r[i][k] : r[i][5] * per_delta;
      diff = std::max(diff, std::fabs(pass.product[i][k] - ref));
      scale = std::max(scale, std::fabs(ref));
    }
  t.matrix_mismatch = diff / scale;
  if (t.orbit_closure <= 1e-8 && t.matrix_mismatch <= 1e-5) return;
  std::string culprit = "no single element's stepping differs from the whole-turn kernel (largest difference below 1e-9)";
  auto backend = make_cpu_backend(lattice);
  for (size_t e = 0; e < n; ++e) {
    const double z[6] = {t.x[e], t.px[e], t.y[e], t.py[e], t.zeta[e], t.delta[e]};
    const double d = stepping_mismatch(lattice, *backend, e, z, options.steps);
    if (!(d <= 1e-9)) {
      const ElementDefinition& def = lattice.element(e);
      culprit = fmt::format("element #{} '{}' ({}) is tracked differently element by element and by the whole-turn "
                            "kernel (relative Jacobian difference {:.3g})",
                            e, def.name, def.type->name, d);
      break;
    }
  }
  throw Error(fmt::format(
      "optics along the ring: tracking element by element disagrees with tracking whole turns (orbit closure "
      "{:.3g}, relative matrix difference {:.3g}); {}; the optics would not be those of the ring",
      t.orbit_closure, t.matrix_mismatch, culprit));
}

/// Pass 2: the eigenvectors and the dispersion, from the start through every element.
void propagate_optics(const ElementPass& pass, TwissTable& t) {
  const size_t n = pass.jacobians.size();
  // Normal form at the start (4x4 transverse block of the product; zeta starts at 0).
  std::array<std::array<double, 4>, 4> m4{};
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k) m4[i][k] = pass.product[i][k];
  const std::array<CVector4, 2> v4 = transverse_eigenvectors(m4);
  std::array<CVector5, 2> v{};
  for (size_t m = 0; m < 2; ++m)
    for (size_t i = 0; i < 4; ++i) v[m][i] = v4[m][i];
  const std::array<CVector5, 2> v_start = v;
  // Dispersion: (I - R4) D = dR/ddelta at the start, zeta part 0.
  std::array<double, kJacRows> d{};
  {
    std::vector<std::vector<double>> a(4, std::vector<double>(4));
    std::vector<double> b(4);
    for (size_t i = 0; i < 4; ++i) {
      for (size_t k = 0; k < 4; ++k) a[i][k] = (i == k ? 1.0 : 0.0) - pass.product[i][k];
      b[i] = pass.product[i][kJacCols - 1];
    }
    if (!solve(a, b))
      throw Error("optics along the ring: I - R (4x4) is singular: cannot compute the dispersion (integer tune?)");
    for (size_t i = 0; i < 4; ++i) d[i] = b[i];
  }
  double phase[2] = {0.0, 0.0};
  double last_arg[2] = {std::arg(v[0][0]), std::arg(v[1][2])};
  auto record_optics = [&](size_t row) {
    const double b1x = 2.0 * std::norm(v[0][0]), b1y = 2.0 * std::norm(v[0][2]);
    const double b2x = 2.0 * std::norm(v[1][0]), b2y = 2.0 * std::norm(v[1][2]);
    t.beta_1x[row] = b1x;
    t.beta_1y[row] = b1y;
    t.beta_2x[row] = b2x;
    t.beta_2y[row] = b2y;
    t.alpha_1x[row] = -2.0 * (v[0][0] * std::conj(v[0][1])).real();
    t.alpha_1y[row] = -2.0 * (v[0][2] * std::conj(v[0][3])).real();
    t.alpha_2x[row] = -2.0 * (v[1][0] * std::conj(v[1][1])).real();
    t.alpha_2y[row] = -2.0 * (v[1][2] * std::conj(v[1][3])).real();
    t.beta_x[row] = b1x;
    t.alpha_x[row] = t.alpha_1x[row];
    t.beta_y[row] = b2y;
    t.alpha_y[row] = t.alpha_2y[row];
    t.mu_x[row] = phase[0] / (2.0 * kPi);
    t.mu_y[row] = phase[1] / (2.0 * kPi);
    t.dx[row] = d[0];
    t.dpx[row] = d[1];
    t.dy[row] = d[2];
    t.dpy[row] = d[3];
    if (b1x > 0.0) t.max_coupling = std::max(t.max_coupling, b1y / b1x);
    if (b2y > 0.0) t.max_coupling = std::max(t.max_coupling, b2x / b2y);
  };
  record_optics(0);
  for (size_t e = 0; e < n; ++e) {
    const ElementJacobian& j = pass.jacobians[e];
    v[0] = propagate(j, v[0]);
    v[1] = propagate(j, v[1]);
    std::array<double, kJacRows> dn{};
    for (size_t i = 0; i < kJacRows; ++i) {
      double sum = j[kJacCols * i + kJacCols - 1];
      for (size_t k = 0; k < kJacRows; ++k) sum += j[kJacCols * i + k] * d[k];
      dn[i] = sum;
    }
    d = dn;
    const double args[2] = {std::arg(v[0][0]), std::arg(v[1][2])};
    for (int k = 0; k < 2; ++k) {
      phase[k] += wrap_phase(args[k] - last_arg[k]);
      last_arg[k] = args[k];
    }
    record_optics(e + 1);
  }
  t.q1 = t.mu_x[n];
  t.q2 = t.mu_y[n];
  // Periodicity: v(end) = e^{i mu} v(start) in the transverse components.
  for (size_t k = 0; k < 2; ++k) {
    const Complex turn = std::polar(1.0, phase[k]);
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < 4; ++i) {
      diff += std::norm(v[k][i] - turn * v_start[k][i]);
      norm += std::norm(v_start[k][i]);
    }
    t.periodicity_error = std::max(t.periodicity_error, std::sqrt(diff / norm));
  }
}

/// Total tune: the fraction q of the one-turn matrix plus the integer part of the phase advance mu.
double total_tune(double mu, double q) { return std::round(mu - q) + q; }

}  // namespace

double element_stepping_mismatch(const Lattice& lattice, size_t e, const std::array<double, 6>& z,
                                 const OpticsOptions& options) {
  check_options(options);
  check_lattice(lattice);
  if (e >= lattice.sequence().size())
    throw Error(fmt::format("element_stepping_mismatch: no sequence entry #{} (the lattice has {})", e,
                            lattice.sequence().size()));
  auto backend = make_cpu_backend(lattice);
  return stepping_mismatch(lattice, *backend, e, z.data(), options.steps);
}

TwissTable compute_twiss_table(const Lattice& lattice, const LinearOptics& optics, const OpticsOptions& options) {
  check_options(options);
  check_lattice(lattice);
  const size_t rows = lattice.sequence().size() + 1;
  TwissTable t;
  t.circumference = lattice.circumference();
  t.six_d = optics.six_d;
  t.mode_reason = optics.mode_reason;
  t.name.resize(rows);
  t.type.resize(rows);
  for (auto* c : {&t.s, &t.x, &t.px, &t.y, &t.py, &t.zeta, &t.delta, &t.beta_x, &t.alpha_x, &t.mu_x, &t.beta_y,
                  &t.alpha_y, &t.mu_y, &t.dx, &t.dpx, &t.dy, &t.dpy, &t.beta_1x, &t.alpha_1x, &t.beta_1y,
                  &t.alpha_1y, &t.beta_2x, &t.alpha_2x, &t.beta_2y, &t.alpha_2y})
    c->resize(rows);
  const ElementPass pass = element_pass(lattice, optics.map_4d.closed_orbit, options, t);
  check_element_pass(lattice, optics, pass, options, t);
  propagate_optics(pass, t);
  const auto q = transverse_tunes(optics.map_4d.matrix);  // as LinearOptics::qx, qy
  t.qx_total = total_tune(t.q1, q[0]);
  t.qy_total = total_tune(t.q2, q[1]);
  return t;
}


namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

/// A NumPy fixed-width unicode array ('<U<width>', UCS-4 little endian) of UTF-8 strings (bytes
/// above 0x7f are kept as code points; names are ASCII in practice).
NpyArray unicode_array(const std::vector<std::string>& v) {
  size_t width = 1;
  for (const auto& s : v) width = std::max(width, s.size());
  NpyArray a;
  a.dtype = fmt::format("<U{}", width);
  a.shape = {v.size()};
  a.data.assign(v.size() * width * 4, 0);
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t c = 0; c < v[i].size(); ++c) a.data[(i * width + c) * 4] = static_cast<unsigned char>(v[i][c]);
  return a;
}

}  // namespace

void write_twiss_table(const std::string& path, const TwissTable& table, const std::string& field) {
  const auto ends_with = [&](const char* ext) {
    const std::string e(ext);
    return path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  const auto columns = table.numeric_columns();
  if (ends_with(".npz")) {
    std::vector<std::pair<std::string, NpyArray>> members;
    members.emplace_back("name", unicode_array(table.name));
    members.emplace_back("type", unicode_array(table.type));
    for (const auto& c : columns) members.emplace_back(c.first, NpyArray::from(*c.second));
    write_npz(path, members);
    return;
  }
  if (!ends_with(".csv")) {
    InputLocation at;
    at.field = field;
    throw InputError(at, fmt::format("'{}': the file name must end in .csv or .npz", path));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw Error(fmt::format("{}: cannot write file", path));
    out << "name,type";
    for (const auto& c : columns) out << ',' << c.first;
    out << '\n';
    std::string line;
    for (size_t r = 0; r < table.size(); ++r) {
      line = csv_field(table.name[r]);
      line += ',';
      line += csv_field(table.type[r]);
      for (const auto& c : columns) {
        line += ',';
        line += fmt::format("{:.17g}", (*c.second)[r]);
      }
      line += '\n';
      out << line;
    }
    if (!out) throw Error(fmt::format("{}: write failed", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(fmt::format("{}: cannot write file", path));
}

}  // namespace ft
