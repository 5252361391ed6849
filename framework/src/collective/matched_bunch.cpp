// Matched longitudinal bunches: the distribution on a grid (match_longitudinal_bunch) and its particles by
// index (sample_matched_bunch); fusetrack/longitudinal.h gives the model and its sources,
// fusetrack/matched_bunch.h the split, fusetrack/device/random.h the random stream.
#include "fusetrack/matched_bunch.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "fusetrack/collective.h"
#include "fusetrack/device/random.h"
#include "fusetrack/error.h"
#include "longitudinal_grid.hpp"

namespace ft {

using namespace longitudinal_grid;

namespace {

struct Moments {
  double norm = 0.0, mean = 0.0, rms = 0.0;
};

/// Trapezoidal moments of a density on a grid.
Moments moments(const std::vector<double>& z, const std::vector<double>& l) {
  double m0 = 0.0, m1 = 0.0;
  for (size_t i = 1; i < z.size(); ++i) {
    const double h = 0.5 * (z[i] - z[i - 1]);
    m0 += h * (l[i] + l[i - 1]);
    m1 += h * (l[i] * z[i] + l[i - 1] * z[i - 1]);
  }
  Moments m;
  m.norm = m0;
  if (!(m0 > 0.0)) return m;
  m.mean = m1 / m0;
  double m2 = 0.0;
  for (size_t i = 1; i < z.size(); ++i) {
    const double h = 0.5 * (z[i] - z[i - 1]);
    const double a = z[i] - m.mean, b = z[i - 1] - m.mean;
    m2 += h * (l[i] * a * a + l[i - 1] * b * b);
  }
  m.rms = std::sqrt(m2 / m0);
  return m;
}

void normalise(const std::vector<double>& z, std::vector<double>& l) {
  const double n = moments(z, l).norm;
  if (n > 0.0)
    for (double& v : l) v /= n;
}

struct Shape {
  bool gaussian = true;
  double mu = 0.5;
  double a_c = 1.0;  // |eta| C
};

/// lambda on the grid for a parameter (K0 or K_max) and a potential with minimum 0.
std::vector<double> line_density(const Shape& sh, const std::vector<double>& z, const std::vector<double>& u,
                                 double param) {
  std::vector<double> l(z.size());
  for (size_t i = 0; i < z.size(); ++i)
    l[i] = sh.gaussian ? std::exp(-u[i] / param) : std::pow(std::max(param - u[i], 0.0), sh.mu + 0.5);
  normalise(z, l);
  return l;
}

/// Phase-space area of the contour K = k_max [m].
double contour_area(const Shape& sh, const std::vector<double>& z, const std::vector<double>& u, double k_max) {
  std::vector<double> h(z.size());
  for (size_t i = 0; i < z.size(); ++i) h[i] = 2.0 * std::sqrt(2.0 * std::max(k_max - u[i], 0.0) / sh.a_c);
  return cumtrapz(z, h).back();
}

/// Bisection of a monotonically increasing function of a positive parameter in [lo, hi] (geometric mean steps
/// when the bracket spans decades).
template <class F>
double bisect_increasing(F f, double target, double lo, double hi, bool geometric) {
  for (int it = 0; it < 200; ++it) {
    const double mid = geometric ? std::sqrt(lo * hi) : 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (f(mid) < target)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

/// Shifts U so that its minimum is 0; returns the index of the minimum.
size_t shift_to_minimum(std::vector<double>& u) {
  const size_t j = static_cast<size_t>(std::min_element(u.begin(), u.end()) - u.begin());
  const double m = u[j];
  for (double& v : u) v -= m;
  return j;
}

/// Parameter (K0 or K_max) giving the rms length sigma in the potential u (minimum 0).
double parameter_for_length(const Shape& sh, const std::vector<double>& z, const std::vector<double>& u, double sigma,
                            double u_limit, const std::string& what) {
  auto rms = [&](double p) { return moments(z, line_density(sh, z, u, p)).rms; };
  InputLocation at;
  at.field = "sigma_zeta";
  if (sh.gaussian) {
    const double hi = 1e6 * std::max(u_limit, 1e-300);
    const double largest = rms(hi);
    if (!(sigma < 0.999 * largest))
      throw InputError(at, fmt::format("a Gaussian bunch of rms length {:.6g} m does not fit in the {} (uniformly "
                                       "filled it has rms {:.6g} m)",
                                       sigma, what, largest));
    return bisect_increasing(rms, sigma, 1e-30 * hi, hi, true);
  }
  const double largest = rms(u_limit);
  if (!(sigma <= largest))
    throw InputError(at, fmt::format("a binomial bunch (mu = {}) of rms length {:.6g} m does not fit in the {}: "
                                     "the largest has rms {:.6g} m",
                                     sh.mu, sigma, what, largest));
  return bisect_increasing(rms, sigma, 0.0, u_limit, false);
}

double curvature_at_minimum(const RfBucket& b, const std::vector<double>& z, const std::vector<double>& de) {
  // Zero of sign(eta) Delta E with positive slope nearest the potential minimum, slope over a stencil of +-w
  // points.
  const double s = sign_of(b.eta);
  const size_t n = z.size();
  size_t best = n;
  for (size_t i = 0; i + 1 < n; ++i)
    if (s * de[i] < 0.0 && s * de[i + 1] >= 0.0) {
      best = i;
      break;
    }
  if (best == n) return std::nan("");
  const size_t w = std::max<size_t>(1, n / 2000);
  const size_t lo = best >= w ? best - w : 0, hi = std::min(n - 1, best + 1 + w);
  return s * (de[hi] - de[lo]) / (z[hi] - z[lo]) / (b.beta0 * b.beta0 * b.energy0);
}

/// The distribution named by the options; InputError for bad ones.
Shape shape_of(const MatchedBunchOptions& o) {
  InputLocation at;
  Shape sh;
  if (o.distribution == "gaussian") {
    sh.gaussian = true;
  } else if (o.distribution == "parabolic") {
    sh.gaussian = false;
    sh.mu = 0.5;
  } else if (o.distribution == "binomial") {
    sh.gaussian = false;
    sh.mu = o.mu;
    at.field = "mu";
    if (!(o.mu >= 0.0 && o.mu < 100.0)) throw InputError(at, fmt::format("must be in [0, 100), got {}", o.mu));
  } else {
    at.field = "distribution";
    throw InputError(at, fmt::format("unknown distribution '{}' (gaussian, parabolic, binomial)", o.distribution));
  }
  at.field = "sigma_zeta";
  if (!(o.sigma_zeta > 0.0) || !std::isfinite(o.sigma_zeta))
    throw InputError(at, fmt::format("the rms bunch length must be positive, got {}", o.sigma_zeta));
  if (o.grid_points < 101) throw Error("matched bunch: needs at least 101 grid points");
  return sh;
}

/// The working domain [lo, hi] of the bunch inside the RF bucket: where the bunch of the requested length is
/// (gaussian: U < 60 K0), with a margin for the potential-well distortion.
std::pair<double, double> working_domain(const Shape& sh, const RfBucket& b, double sigma_zeta) {
  std::vector<double> u_bucket = b.potential;
  shift_to_minimum(u_bucket);
  std::vector<double> zb;
  std::vector<double> ub;
  for (size_t i = 0; i < b.zeta.size(); ++i)
    if (b.zeta[i] >= b.zeta_left && b.zeta[i] <= b.zeta_right) {
      zb.push_back(b.zeta[i]);
      ub.push_back(u_bucket[i]);
    }
  if (zb.size() < 20) throw Error("RF bucket: fewer than 20 grid points inside the bucket");
  const double u_sep = std::min(ub.front(), ub.back());
  const double p = parameter_for_length(sh, zb, ub, sigma_zeta, u_sep, "RF bucket");
  double lo = zb.back(), hi = zb.front();
  for (size_t i = 0; i < zb.size(); ++i)
    if (sh.gaussian ? ub[i] < 60.0 * p : ub[i] < p) {
      lo = std::min(lo, zb[i]);
      hi = std::max(hi, zb[i]);
    }
  const double half = 0.5 * (hi - lo), mid = 0.5 * (hi + lo);
  const double grow = sh.gaussian ? 1.3 : 2.0;
  lo = std::max(b.zeta_left, mid - grow * half - 2.0 * (zb[1] - zb[0]));
  hi = std::min(b.zeta_right, mid + grow * half + 2.0 * (zb[1] - zb[0]));
  return {lo, hi};
}

/// Where each grid point deposits in a collective element's profile (the element's own deposit): 2 bins per
/// point (-1: none) and the fraction of the point's mass in each.
struct DepositWeights {
  std::vector<int> bins;
  std::vector<double> weights;
};

std::vector<DepositWeights> deposit_weights(const std::vector<std::unique_ptr<CollectiveSolver>>& solvers,
                                            const std::vector<double>& z) {
  std::vector<DepositWeights> deposits(solvers.size());
  for (size_t c = 0; c < solvers.size(); ++c) {
    const SliceGrid g = solvers[c]->slice_grid();
    deposits[c].bins.assign(2 * z.size(), -1);
    deposits[c].weights.assign(2 * z.size(), 0.0);
    for (size_t i = 0; i < z.size(); ++i) {
      int bins[2];
      unsigned long long w[2];
      const int m = profile_deposit(g, z[i], bins, w);
      for (int q = 0; q < m; ++q) {
        deposits[c].bins[2 * i + static_cast<size_t>(q)] = bins[q];
        deposits[c].weights[2 * i + static_cast<size_t>(q)] =
            static_cast<double>(w[q]) / static_cast<double>(kProfileUnit);
      }
    }
  }
  return deposits;
}

/// Haissinski iteration (see fusetrack/longitudinal.h): updates lam, u, de and the report's convergence,
/// k_max.
void iterate_potential_well(const Lattice& lattice, const MatchedBunchOptions& o, const Shape& sh,
                            std::vector<std::unique_ptr<CollectiveSolver>>& solvers, const std::vector<double>& de_rf,
                            double param, MatchedBunchReport& r, std::vector<double>& lam, std::vector<double>& u,
                            std::vector<double>& de) {
  const RfBucket& b = r.bucket;
  const std::vector<double>& z = r.zeta;
  const double p0c = lattice.reference().p0c;
  const std::vector<DepositWeights> deposits = deposit_weights(solvers, z);
  const double total_units = static_cast<double>(size_t{1} << 24) * static_cast<double>(kProfileUnit);
  Particles probes(z.size(), b.beta0);
  auto collective_energy_change = [&](const std::vector<double>& l) {
    std::vector<double> de_c(z.size(), 0.0);
    for (size_t c = 0; c < solvers.size(); ++c) {
      CollectiveSolver& sv = *solvers[c];
      std::vector<double> acc(static_cast<size_t>(sv.n_slices()), 0.0);
      for (size_t i = 0; i < z.size(); ++i) {
        const double hw = 0.5 * ((i + 1 < z.size() ? z[i + 1] : z[i]) - (i > 0 ? z[i - 1] : z[i]));
        const double mass = l[i] * hw;
        for (size_t q = 0; q < 2; ++q) {
          const int bin = deposits[c].bins[2 * i + q];
          if (bin >= 0) acc[static_cast<size_t>(bin)] += mass * deposits[c].weights[2 * i + q];
        }
      }
      std::vector<uint64_t> counts(acc.size());
      for (size_t k = 0; k < acc.size(); ++k) counts[k] = static_cast<uint64_t>(std::llround(acc[k] * total_units));
      std::fill(sv.mode_memory().begin(), sv.mode_memory().end(), 0.0);  // single-turn wake
      std::vector<double> field(acc.size());
      sv.solve(counts.data(), field.data());
      for (size_t i = 0; i < z.size(); ++i) probes.set(i, b.orbit[0], b.orbit[1], b.orbit[2], b.orbit[3], z[i], 0.0);
      ft_particle_block blk = probes.block(0, z.size());
      const ft_slice_field f{field.data(), sv.grid()};
      ft_error err{};
      if (sv.desc().kick_block(sv.params(), &f, &blk, &err) != 0)
        throw Error(fmt::format("matched bunch: the kick of collective element '{}' failed: {}", sv.element_name(),
                                err.message));
      for (size_t i = 0; i < z.size(); ++i) de_c[i] += probes.ptau[i] * p0c;
    }
    return de_c;
  };
  double alpha = std::clamp(o.relaxation, 1e-3, 1.0);
  double previous = INFINITY;
  r.converged = false;
  for (r.iterations = 1; r.iterations <= o.max_iterations; ++r.iterations) {
    const std::vector<double> de_c = collective_energy_change(lam);
    for (size_t i = 0; i < z.size(); ++i) de[i] = de_rf[i] + de_c[i];
    u = potential_of(b, z, de, b.zeta_s);
    shift_to_minimum(u);
    double param_now = param;
    if (!sh.gaussian) {
      const double u_max = std::min(u.front(), u.back());
      if (contour_area(sh, z, u, u_max) < r.emittance)
        throw Error(
            fmt::format("matched bunch: with the induced voltage the bunch (emittance {:.6g} m) no longer "
                        "fits in the domain [{:.6g}, {:.6g}] m",
                        r.emittance, z.front(), z.back()));
      param_now =
          bisect_increasing([&](double k) { return contour_area(sh, z, u, k); }, r.emittance, 0.0, u_max, false);
      r.k_max = param_now;
    }
    const std::vector<double> target = line_density(sh, z, u, param_now);
    const double peak = *std::max_element(lam.begin(), lam.end());
    double diff = 0.0;
    for (size_t i = 0; i < z.size(); ++i) diff = std::max(diff, std::fabs(target[i] - lam[i]));
    r.residual = diff / peak;
    if (r.residual < o.tolerance) {
      lam = target;
      r.converged = true;
      break;
    }
    if (r.residual > previous) alpha = std::max(alpha * 0.5, 1.0 / 1024.0);
    previous = r.residual;
    for (size_t i = 0; i < z.size(); ++i) lam[i] += alpha * (target[i] - lam[i]);
    normalise(z, lam);
  }
  if (!r.converged) r.iterations = o.max_iterations;
}

/// The line density, potential and energy change on the grid, in the RF potential alone or with the
/// potential-well distortion.
void solve_line_density(const Lattice& lattice, const MatchedBunchOptions& o, const Shape& sh, MatchedBunchReport& r) {
  const RfBucket& b = r.bucket;
  const auto [lo, hi] = working_domain(sh, b, o.sigma_zeta);
  size_t points = o.grid_points;
  std::vector<std::unique_ptr<CollectiveSolver>> solvers;
  if (o.potential_well && lattice.has_collective()) {
    const TurnProgram program = TurnProgram::build(lattice);
    for (size_t idx : program.collective) {
      // Space charge on a grid (transverse and 3D fields) is not part of the longitudinal equilibrium.
      // Slice-moment elements (transverse wakes, feedback) neither: only the profile kind's voltage.
      if (!lattice.element(idx).type->is_profile_collective()) continue;
      solvers.push_back(std::make_unique<CollectiveSolver>(lattice, idx, o.fma, size_t{1} << 24));
      const ft_profile_grid& g = solvers.back()->grid();
      const double dz = (g.zeta_max - g.zeta_min) / g.n_slices;
      points = std::max(points, static_cast<size_t>(4.0 * (hi - lo) / dz) + 1);
    }
    points = std::min<size_t>(points, 400001);
  }
  r.zeta = linspace(lo, hi, points);
  const std::vector<double>& z = r.zeta;
  const std::vector<double> de_rf = one_turn_energy_change(lattice, b.orbit, z, o.bucket.threads);
  std::vector<double> u_rf = potential_of(b, z, de_rf, b.zeta_s);
  shift_to_minimum(u_rf);
  const double u_edge = std::min(u_rf.front(), u_rf.back());
  const double param = parameter_for_length(sh, z, u_rf, o.sigma_zeta, u_edge, "RF bucket");
  std::vector<double> lam = line_density(sh, z, u_rf, param);
  r.sigma_zeta_rf = moments(z, lam).rms;
  if (sh.gaussian)
    r.k0 = param;
  else {
    r.k_max = param;
    r.emittance = contour_area(sh, z, u_rf, param);
  }
  std::vector<double> u = u_rf, de = de_rf;
  if (!solvers.empty()) iterate_potential_well(lattice, o, sh, solvers, de_rf, param, r, lam, u, de);
  r.line_density = lam;
  r.potential = u;
  r.energy_change = de;
  const Moments m = moments(z, lam);
  r.sigma_zeta = m.rms;
  r.mean_zeta = m.mean;
  const double kappa = curvature_at_minimum(b, z, de);
  const double w2 = sh.a_c * kappa;
  r.qs = (w2 > 0.0 && w2 < 4.0) ? std::acos(1.0 - 0.5 * w2) / (2.0 * kPi) : std::nan("");
}

/// rms delta of the final distribution.
double energy_spread(const Shape& sh, const MatchedBunchReport& r) {
  const std::vector<double>& z = r.zeta;
  const double inv_ac = 1.0 / sh.a_c;
  if (sh.gaussian) return std::sqrt(r.k0 * inv_ac);
  std::vector<double> d2(z.size());
  for (size_t i = 0; i < z.size(); ++i)
    d2[i] = r.line_density[i] * 2.0 * std::max(r.k_max - r.potential[i], 0.0) * inv_ac / (2.0 * sh.mu + 3.0);
  return std::sqrt(cumtrapz(z, d2).back());
}

/// The view that ft_sample_longitudinal reads, into `t`.
ft_longitudinal_sampler sampler_view(const LongitudinalSamplerTables& t) {
  ft_longitudinal_sampler s{};
  s.zeta = t.zeta.data();
  s.density = t.density.data();
  s.cumulative = t.cumulative.data();
  s.potential = t.potential.data();
  s.n = static_cast<int>(t.zeta.size());
  s.gaussian = t.gaussian ? 1 : 0;
  s.sigma_delta = t.sigma_delta;
  s.k_max = t.k_max;
  s.inv_ac = t.inv_ac;
  s.u_grid = t.u_grid.data();
  s.u_density = t.u_density.data();
  s.u_cumulative = t.u_cumulative.data();
  s.u_n = static_cast<int>(t.u_grid.size());
  return s;
}

}  // namespace

MatchedBunchReport match_longitudinal_bunch(const Lattice& lattice, const MatchedBunchOptions& o) {
  Shape sh = shape_of(o);
  MatchedBunchReport r;
  r.distribution = o.distribution;
  r.mu = sh.gaussian ? 0.0 : sh.mu;
  r.potential_well = o.potential_well;
  r.bucket = compute_rf_bucket(lattice, o.bucket);
  r.qs0 = r.bucket.qs;
  r.bucket_height = r.bucket.delta_max;
  sh.a_c = std::fabs(r.bucket.eta) * r.bucket.circumference;
  solve_line_density(lattice, o, sh, r);
  r.sigma_delta = energy_spread(sh, r);
  return r;
}

MatchedBunchShare::MatchedBunchShare(const MatchedBunchReport& r, uint64_t seed, size_t first, size_t count)
    : m_seed(seed), m_first(first), m_count(count), m_beta0(r.bucket.beta0) {
  LongitudinalSamplerTables& t = m_tables;
  t.gaussian = r.distribution == "gaussian";
  t.zeta = r.zeta;
  t.density = r.line_density;
  t.cumulative = cumtrapz(r.zeta, r.line_density);
  t.potential = r.potential;
  if (!t.gaussian) {
    t.u_grid = linspace(-1.0, 1.0, 4001);
    t.u_density.resize(t.u_grid.size());
    for (size_t i = 0; i < t.u_grid.size(); ++i)
      t.u_density[i] = std::pow(std::max(1.0 - t.u_grid[i] * t.u_grid[i], 0.0), r.mu);
    t.u_cumulative = cumtrapz(t.u_grid, t.u_density);
  }
  t.sigma_delta = r.sigma_delta;
  t.k_max = r.k_max;
  t.inv_ac = 1.0 / (std::fabs(r.bucket.eta) * r.bucket.circumference);
  for (int k = 0; k < 4; ++k) m_orbit[k] = r.bucket.orbit[k];
}

Particles MatchedBunchShare::sample(int threads) const {
  const ft_longitudinal_sampler s = sampler_view(m_tables);
  Particles p(m_count, m_beta0);
  const long long n = static_cast<long long>(m_count);
  const int nthreads = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (long long k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(k);
    double zeta = 0.0, delta = 0.0;
    ft_sample_longitudinal(s, m_seed, static_cast<unsigned long long>(m_first + i), &zeta, &delta);
    p.set(i, m_orbit[0], m_orbit[1], m_orbit[2], m_orbit[3], zeta, delta);
    p.id[i] = static_cast<int64_t>(m_first + i);
  }
  return p;
}

Particles sample_matched_bunch(const MatchedBunchReport& r, uint64_t seed, size_t first, size_t count, int threads) {
  return MatchedBunchShare(r, seed, first, count).sample(threads);
}

LongitudinalSums longitudinal_sums(const Particles& p) {
  LongitudinalSums s;
  s.count = static_cast<double>(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    s.zeta += p.zeta[i];
    s.zeta2 += p.zeta[i] * p.zeta[i];
    s.delta += p.delta[i];
    s.delta2 += p.delta[i] * p.delta[i];
  }
  return s;
}

void set_sample_moments(MatchedBunchReport& r, const LongitudinalSums& s) {
  if (!(s.count > 1.0)) return;
  const double n = s.count;
  r.sigma_zeta_sample = std::sqrt(std::max(s.zeta2 / n - (s.zeta / n) * (s.zeta / n), 0.0));
  r.sigma_delta_sample = std::sqrt(std::max(s.delta2 / n - (s.delta / n) * (s.delta / n), 0.0));
}

MatchedBunch generate_matched_bunch(const Lattice& lattice, size_t n, const MatchedBunchOptions& o) {
  MatchedBunch out;
  out.report = match_longitudinal_bunch(lattice, o);
  out.particles = sample_matched_bunch(out.report, o.seed, 0, n, o.bucket.threads);
  set_sample_moments(out.report, longitudinal_sums(out.particles));
  return out;
}

}  // namespace ft
