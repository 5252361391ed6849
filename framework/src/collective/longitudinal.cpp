// RF bucket by tracking and matched longitudinal bunches (see fusetrack/longitudinal.h for the
// model and its sources).
#include "fusetrack/longitudinal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "fusetrack/collective.h"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"

namespace ft {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// Uniform double in [0, 1) from the 53 high bits: the same sequence on every platform.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// Standard normal by Box-Muller (portable, unlike std::normal_distribution).
struct NormalSource {
  bool has_spare = false;
  double spare = 0.0;
  double operator()(std::mt19937_64& rng) {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    const double u1 = 1.0 - uniform01(rng);  // (0, 1]
    const double u2 = uniform01(rng);
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare = r * std::sin(2.0 * kPi * u2);
    has_spare = true;
    return r * std::cos(2.0 * kPi * u2);
  }
};

std::vector<double> linspace(double a, double b, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = a + (b - a) * static_cast<double>(i) / static_cast<double>(n - 1);
  v.back() = b;
  return v;
}

/// Cumulative trapezoidal integral, starting at 0.
std::vector<double> cumtrapz(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> c(x.size(), 0.0);
  for (size_t i = 1; i < x.size(); ++i) c[i] = c[i - 1] + 0.5 * (y[i] + y[i - 1]) * (x[i] - x[i - 1]);
  return c;
}

/// Linear interpolation of y(x) at t (x increasing), clamped at the ends.
double interp(const std::vector<double>& x, const std::vector<double>& y, double t) {
  if (t <= x.front()) return y.front();
  if (t >= x.back()) return y.back();
  const size_t j = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), t) - x.begin());
  const double w = (t - x[j - 1]) / (x[j] - x[j - 1]);
  return y[j - 1] + (y[j] - y[j - 1]) * w;
}

/// Zero of the line through (x0, y0), (x1, y1).
double zero_between(double x0, double y0, double x1, double y1) {
  if (y1 == y0) return 0.5 * (x0 + x1);
  return x0 + (x1 - x0) * (-y0) / (y1 - y0);
}

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

/// Inverse CDF sampling of a piecewise-linear non-negative density.
class PiecewiseLinearSampler {
 public:
  PiecewiseLinearSampler(std::vector<double> x, std::vector<double> p) : m_x(std::move(x)), m_p(std::move(p)) {
    m_cum.assign(m_x.size(), 0.0);
    for (size_t i = 1; i < m_x.size(); ++i)
      m_cum[i] = m_cum[i - 1] + 0.5 * (m_p[i] + m_p[i - 1]) * (m_x[i] - m_x[i - 1]);
  }
  double total() const { return m_cum.back(); }
  /// The x at which the cumulative mass is u * total (u in [0, 1)): exact for the linear density
  /// of the segment, mass(t) = h (p0 t + (p1 - p0) t^2 / 2).
  double operator()(double u) const {
    const double target = u * m_cum.back();
    size_t j = static_cast<size_t>(std::upper_bound(m_cum.begin(), m_cum.end(), target) - m_cum.begin());
    j = std::clamp<size_t>(j, 1, m_x.size() - 1);
    while (j > 1 && m_cum[j] == m_cum[j - 1] && m_cum[j - 1] >= target) --j;  // skip empty segments
    const double h = m_x[j] - m_x[j - 1];
    const double p0 = m_p[j - 1], p1 = m_p[j];
    const double r = (target - m_cum[j - 1]) / h;  // p0 t + (p1 - p0) t^2 / 2 = r
    double t = 0.0;
    const double disc = p0 * p0 + 2.0 * (p1 - p0) * r;
    const double denom = p0 + std::sqrt(std::max(disc, 0.0));
    if (denom > 0.0) t = 2.0 * r / denom;
    t = std::clamp(t, 0.0, 1.0);
    return m_x[j - 1] + t * h;
  }

 private:
  std::vector<double> m_x, m_p, m_cum;
};

std::array<double, 4> transverse_orbit(const Lattice& lattice) {
  const OneTurnMap m = compute_one_turn_map_4d(lattice, 0.0, OpticsOptions{});
  return {m.closed_orbit[0], m.closed_orbit[1], m.closed_orbit[2], m.closed_orbit[3]};
}

double sign_of(double v) { return v < 0.0 ? -1.0 : 1.0; }

/// U(zeta) = sign(eta) integral Delta E / (beta0^2 E0) dzeta on a grid, zero at zeta_ref.
std::vector<double> potential_of(const RfBucket& b, const std::vector<double>& z, const std::vector<double>& de,
                                 double zeta_ref) {
  const double scale = sign_of(b.eta) / (b.beta0 * b.beta0 * b.energy0);
  std::vector<double> f(de.size());
  for (size_t i = 0; i < de.size(); ++i) f[i] = scale * de[i];
  std::vector<double> u = cumtrapz(z, f);
  const double u0 = interp(z, u, zeta_ref);
  for (double& v : u) v -= u0;
  return u;
}

}  // namespace

std::vector<double> one_turn_energy_change(const Lattice& lattice, const std::array<double, 4>& orbit,
                                           const std::vector<double>& zeta, int threads) {
  const ReferenceParticle& ref = lattice.reference();
  Particles p(zeta.size(), ref.beta0());
  for (size_t i = 0; i < zeta.size(); ++i) p.set(i, orbit[0], orbit[1], orbit[2], orbit[3], zeta[i], 0.0);
  TrackOptions o;
  o.turns = 1;
  o.collective = false;
  o.threads = threads;
  make_cpu_backend(lattice)->track(p, o);
  std::vector<double> de(zeta.size());
  for (size_t i = 0; i < zeta.size(); ++i) {
    if (p.state[i] <= 0)
      throw Error(fmt::format("RF bucket: the probe particle at zeta = {:.9g} m, delta = 0 was lost in one turn "
                              "(element #{}); cannot measure the energy change there",
                              zeta[i], p.lost_element[i]));
    de[i] = p.ptau[i] * ref.p0c;  // ptau = (E - E0) / (P0 c)
  }
  return de;
}

RfBucket compute_rf_bucket(const Lattice& lattice, const RfBucketOptions& o) {
  RfBucket b;
  const ReferenceParticle& ref = lattice.reference();
  b.circumference = lattice.circumference();
  b.beta0 = ref.beta0();
  b.energy0 = ref.energy0();
  if (std::isfinite(o.eta)) {
    b.eta = o.eta;
    b.orbit = transverse_orbit(lattice);
  } else {
    OpticsOptions oo;
    oo.threads = o.threads;
    const LinearOptics optics = compute_linear_optics(lattice, oo);
    b.eta = optics.eta;
    b.orbit = {optics.map_4d.closed_orbit[0], optics.map_4d.closed_orbit[1], optics.map_4d.closed_orbit[2],
               optics.map_4d.closed_orbit[3]};
  }
  if (!(std::isfinite(b.eta) && b.eta != 0.0))
    throw Error(fmt::format("RF bucket: the slip factor eta = {} gives no longitudinal focusing", b.eta));
  if (!(b.circumference > 0.0)) throw Error("RF bucket: the lattice has no circumference");
  const double s = sign_of(b.eta);
  const double zmin = std::isfinite(o.zeta_min) ? o.zeta_min : -0.55 * b.circumference;
  const double zmax = std::isfinite(o.zeta_max) ? o.zeta_max : 0.55 * b.circumference;
  if (!(zmax > zmin) || o.search_points < 3 || o.grid_points < 3)
    throw Error("RF bucket: needs zeta_min < zeta_max and at least 3 grid points");

  // Coarse search: g = sign(eta) Delta E = U' up to a positive factor.
  const std::vector<double> zc = linspace(zmin, zmax, o.search_points);
  std::vector<double> g = one_turn_energy_change(lattice, b.orbit, zc, o.threads);
  for (double& v : g) v *= s;
  size_t best = zc.size();
  double best_zero = 0.0;
  for (size_t i = 0; i + 1 < zc.size(); ++i) {
    if (g[i] < 0.0 && g[i + 1] >= 0.0) {  // U' from - to +: a minimum of U
      const double z0 = zero_between(zc[i], g[i], zc[i + 1], g[i + 1]);
      if (best == zc.size() || std::fabs(z0 - o.zeta_center) < std::fabs(best_zero - o.zeta_center)) {
        best = i;
        best_zero = z0;
      }
    }
  }
  if (best == zc.size())
    throw Error(fmt::format(
        "RF bucket: the one-turn energy change at delta = 0 has no stable zero in zeta [{:.6g}, {:.6g}] m for eta = "
        "{:.6g} (is there an RF cavity with a voltage, and is its phase on the stable side of transition?)",
        zmin, zmax, b.eta));
  // Barriers: the nearest zeros of U' with U' from + to -, on either side.
  double zl = zc.front(), zr = zc.back();
  for (size_t k = best; k-- > 0;) {  // g[best] < 0
    if (g[k] >= 0.0 && g[k + 1] < 0.0) {
      zl = zero_between(zc[k], g[k], zc[k + 1], g[k + 1]);
      break;
    }
  }
  for (size_t k = best + 2; k < zc.size(); ++k) {
    if (g[k - 1] > 0.0 && g[k] <= 0.0) {
      zr = zero_between(zc[k - 1], g[k - 1], zc[k], g[k]);
      break;
    }
  }

  // Small-amplitude slope at the stable point.
  const double eps = 1e-5 * (zr - zl);
  const std::vector<double> dz = one_turn_energy_change(lattice, b.orbit, {best_zero - eps, best_zero + eps}, o.threads);
  b.slope = (dz[1] - dz[0]) / (2.0 * eps);
  b.zeta_s = best_zero;

  // Fine grid over the bucket.
  b.zeta = linspace(zl, zr, o.grid_points);
  b.energy_change = one_turn_energy_change(lattice, b.orbit, b.zeta, o.threads);
  // Refine the stable point on the fine grid (the zero of Delta E next to the coarse one).
  {
    const std::vector<double>& z = b.zeta;
    double closest = best_zero;
    double dist = INFINITY;
    for (size_t i = 0; i + 1 < z.size(); ++i) {
      const double a = s * b.energy_change[i], c = s * b.energy_change[i + 1];
      if (a < 0.0 && c >= 0.0) {
        const double z0 = zero_between(z[i], a, z[i + 1], c);
        if (std::fabs(z0 - best_zero) < dist) {
          dist = std::fabs(z0 - best_zero);
          closest = z0;
        }
      }
    }
    b.zeta_s = closest;
  }
  b.potential = potential_of(b, b.zeta, b.energy_change, b.zeta_s);
  b.u_sep = std::min(b.potential.front(), b.potential.back());
  // The bucket: the connected region around zeta_s with U < U_sep.
  b.zeta_left = b.zeta.front();
  b.zeta_right = b.zeta.back();
  const size_t is = static_cast<size_t>(std::upper_bound(b.zeta.begin(), b.zeta.end(), b.zeta_s) - b.zeta.begin());
  for (size_t k = is; k-- > 1;) {
    if (b.potential[k - 1] >= b.u_sep) {
      b.zeta_left = zero_between(b.zeta[k - 1], b.potential[k - 1] - b.u_sep, b.zeta[k], b.potential[k] - b.u_sep);
      break;
    }
  }
  for (size_t k = is; k < b.zeta.size(); ++k) {
    if (b.potential[k] >= b.u_sep) {
      b.zeta_right = zero_between(b.zeta[k - 1], b.potential[k - 1] - b.u_sep, b.zeta[k], b.potential[k] - b.u_sep);
      break;
    }
  }
  const double aC = std::fabs(b.eta) * b.circumference;
  b.delta_max = std::sqrt(2.0 * std::max(b.u_sep, 0.0) / aC);
  b.kappa = s * b.slope / (b.beta0 * b.beta0 * b.energy0);
  const double w2 = aC * b.kappa;
  b.qs = (w2 > 0.0 && w2 < 4.0) ? std::acos(1.0 - 0.5 * w2) / (2.0 * kPi) : std::nan("");
  return b;
}

namespace {

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

/// Bisection of a monotonically increasing function of a positive parameter in [lo, hi]
/// (geometric mean steps when the bracket spans decades).
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
  // Zero of sign(eta) Delta E with positive slope nearest the potential minimum, slope over a
  // stencil of +-w points.
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

}  // namespace

MatchedBunch generate_matched_bunch(const Lattice& lattice, size_t n, const MatchedBunchOptions& o) {
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

  MatchedBunch out;
  MatchedBunchReport& r = out.report;
  r.distribution = o.distribution;
  r.mu = sh.gaussian ? 0.0 : sh.mu;
  r.potential_well = o.potential_well;
  r.bucket = compute_rf_bucket(lattice, o.bucket);
  const RfBucket& b = r.bucket;
  r.qs0 = b.qs;
  r.bucket_height = b.delta_max;
  sh.a_c = std::fabs(b.eta) * b.circumference;

  // 1. The RF potential over the bucket (minimum 0): the parameter for the requested length.
  {
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
    const double p = parameter_for_length(sh, zb, ub, o.sigma_zeta, u_sep, "RF bucket");
    // 2. The working domain: where the bunch is (gaussian: U < 60 K0), with a margin for the
    // potential-well distortion, inside the bucket.
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
    size_t points = o.grid_points;
    std::vector<std::unique_ptr<CollectiveSolver>> solvers;
    if (o.potential_well && lattice.has_collective()) {
      const TurnProgram program = TurnProgram::build(lattice);
      for (size_t idx : program.collective) {
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

    // 3. Potential-well iteration.
    if (!solvers.empty()) {
      const double p0c = lattice.reference().p0c;
      // Deposit weights of every grid point in every element's profile (the element's own deposit).
      struct Deposit {
        std::vector<int> bins;               // 2 per grid point (-1: none)
        std::vector<double> weights;         // fraction of the point's mass
      };
      std::vector<Deposit> deposits(solvers.size());
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
          for (size_t i = 0; i < z.size(); ++i)
            probes.set(i, b.orbit[0], b.orbit[1], b.orbit[2], b.orbit[3], z[i], 0.0);
          ft_particle_block blk = probes.block(0, z.size());
          const ft_slice_field f{field.data(), sv.grid()};
          ft_error err{};
          if (sv.desc().kick_block(sv.params(), &f, &blk, &err) != 0)
            throw Error(fmt::format("matched bunch: the kick of collective element '{}' failed: {}",
                                    sv.element_name(), err.message));
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
            throw Error(fmt::format("matched bunch: with the induced voltage the bunch (emittance {:.6g} m) no longer "
                                    "fits in the domain [{:.6g}, {:.6g}] m",
                                    r.emittance, z.front(), z.back()));
          param_now = bisect_increasing([&](double k) { return contour_area(sh, z, u, k); }, r.emittance, 0.0, u_max,
                                        false);
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

  // 4. Energy spread and particles.
  const std::vector<double>& z = r.zeta;
  const double inv_ac = 1.0 / sh.a_c;
  if (sh.gaussian) {
    r.sigma_delta = std::sqrt(r.k0 * inv_ac);
  } else {
    std::vector<double> d2(z.size());
    for (size_t i = 0; i < z.size(); ++i)
      d2[i] = r.line_density[i] * 2.0 * std::max(r.k_max - r.potential[i], 0.0) * inv_ac / (2.0 * sh.mu + 3.0);
    r.sigma_delta = std::sqrt(cumtrapz(z, d2).back());
  }
  const PiecewiseLinearSampler zeta_sampler(z, r.line_density);
  std::unique_ptr<PiecewiseLinearSampler> u_sampler;
  if (!sh.gaussian) {
    const std::vector<double> uu = linspace(-1.0, 1.0, 4001);
    std::vector<double> pu(uu.size());
    for (size_t i = 0; i < uu.size(); ++i) pu[i] = std::pow(std::max(1.0 - uu[i] * uu[i], 0.0), sh.mu);
    u_sampler = std::make_unique<PiecewiseLinearSampler>(uu, pu);
  }
  Particles& p = out.particles;
  p = Particles(n, b.beta0);
  std::mt19937_64 rng(o.seed);
  NormalSource normal;
  double sz = 0.0, sz2 = 0.0, sd = 0.0, sd2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double zeta = zeta_sampler(uniform01(rng));
    double delta;
    if (sh.gaussian) {
      delta = r.sigma_delta * normal(rng);
    } else {
      const double uk = interp(z, r.potential, zeta);
      const double dk = std::sqrt(2.0 * std::max(r.k_max - uk, 0.0) * inv_ac);
      delta = dk * (*u_sampler)(uniform01(rng));
    }
    p.set(i, b.orbit[0], b.orbit[1], b.orbit[2], b.orbit[3], zeta, delta);
    sz += zeta;
    sz2 += zeta * zeta;
    sd += delta;
    sd2 += delta * delta;
  }
  if (n > 1) {
    const double nn = static_cast<double>(n);
    r.sigma_zeta_sample = std::sqrt(std::max(sz2 / nn - (sz / nn) * (sz / nn), 0.0));
    r.sigma_delta_sample = std::sqrt(std::max(sd2 / nn - (sd / nn) * (sd / nn), 0.0));
  }
  return out;
}

}  // namespace ft
