// The closed orbit (Newton iteration on tracked probes) and the one-turn matrix (central finite
// differences) of a ring, 4D (delta frozen) or 6D (see fusetrack/optics.h for the sources). Everything
// goes through the generic tracking API: no element type is named.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "analysis/optics/one_turn_map.hpp"
#include "analysis/optics/optics_internal.hpp"
#include "fusetrack/error.h"

namespace ft::optics_internal {

Probe probe_map(const RingTracker& tracker, const Lattice& lattice, const std::array<double, 6>& z,
                const std::array<double, 6>& steps, const char* what, int points) {
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
  const Probe pr =
      probe_map(tracker, lattice, m.closed_orbit, steps, m.six_d ? "6D one-turn matrix" : "4D one-turn matrix", 5);
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
  if (lattice.sequence().empty())
    throw InputError(InputLocation{lattice.source_file()}, "optics: the lattice is empty");
  if (!(lattice.reference().beta0() > 0.0))
    throw InputError(InputLocation{lattice.source_file()}, "optics: the reference particle has no momentum");
}

Engine::Engine(const Lattice& l, const OpticsOptions& o) : lattice(l), options(o) {
  check_options(o);
  check_lattice(l);
}

const RingTracker& Engine::frozen() {
  if (!m_frozen) m_frozen = std::make_unique<RingTracker>(lattice, true, options.threads);
  return *m_frozen;
}

const RingTracker& Engine::full() {
  if (!m_full) m_full = std::make_unique<RingTracker>(lattice, false, options.threads);
  return *m_full;
}

OneTurnMap Engine::map_4d(double delta, const std::array<double, 4>& guess, double zeta) {
  OneTurnMap m =
      newton(frozen(), lattice, {guess[0], guess[1], guess[2], guess[3], zeta, delta}, {0, 1, 2, 3}, options, false);
  refine_matrix(frozen(), lattice, m, options);
  return m;
}

OneTurnMap Engine::map_6d(const std::array<double, 6>& guess) {
  OneTurnMap m = newton(full(), lattice, guess, {0, 1, 2, 3, 4, 5}, options, true);
  refine_matrix(full(), lattice, m, options);
  return m;
}

OneTurnMap Engine::choose(std::string& reason) {
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
    reason = fmt::format(
        "4D (delta fixed at {:g}): the longitudinal motion looks stable, (M55 + M66) / 2 = {:.12g}, "
        "but the 6D closed orbit was not found: {}",
        options.delta0, cos_mu, e.what());
    return m4;
  }
}

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
  o.map_4d = o.six_d
                 ? eng.map_4d(delta_co, {o.closed_orbit[0], o.closed_orbit[1], o.closed_orbit[2], o.closed_orbit[3]},
                              o.closed_orbit[4])
                 : o.map;
  o.steps = o.map.steps;
}

}  // namespace ft::optics_internal

namespace ft {

OneTurnMap compute_one_turn_map_4d(const Lattice& lattice, double delta, const OpticsOptions& options,
                                   const std::array<double, 4>& guess) {
  optics_internal::Engine e(lattice, options);
  return e.map_4d(delta, guess);
}

OneTurnMap compute_one_turn_map_6d(const Lattice& lattice, const OpticsOptions& options,
                                   const std::array<double, 6>& guess) {
  optics_internal::Engine e(lattice, options);
  return e.map_6d(guess);
}

OneTurnMap compute_one_turn_map(const Lattice& lattice, const OpticsOptions& options, std::string* reason) {
  optics_internal::Engine e(lattice, options);
  std::string why;
  OneTurnMap m = e.choose(why);
  if (reason) *reason = why;
  return m;
}

}  // namespace ft
