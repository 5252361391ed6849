// Local momentum acceptance by tracking and Piwinski's Touschek lifetime (see the header for the
// method, the formulas and their sources).
#include "fusetrack/momentum_acceptance.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "fusetrack/error.h"
#include "fusetrack/output_files.h"
#include "fusetrack/radiation_integrals.h"

namespace ft {

namespace {

constexpr double kPiTouschek = 3.141592653589793;
constexpr double kClightTouschek = 299792458.0;
constexpr double kElectronRadius = 2.8179403262e-15;  // [m] CODATA 2018
constexpr double kElectronMass = 510998.95;           // [eV] CODATA 2018

InputLocation option_location(const std::string& name) {
  InputLocation at;
  at.field = name;
  return at;
}

bool whole_name_matches(const std::string& name, const std::string& pattern, const std::regex* re) {
  return name == pattern || (re != nullptr && std::regex_match(name, *re));
}

}  // namespace

std::vector<size_t> select_acceptance_positions(const Lattice& lattice, const AcceptancePositions& positions) {
  const auto& seq = lattice.sequence();
  std::vector<char> chosen(seq.size(), positions.names.empty() && !positions.has_s_range ? 1 : 0);
  for (const std::string& pattern : positions.names) {
    std::regex re;
    bool have_re = true;
    try {
      re = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      have_re = false;  // a plain name with regex metacharacters still matches exactly
      if (lattice.find_definition(pattern) < 0)
        throw InputError(
            option_location(positions.names_label),
            fmt::format("'{}' is neither an element name nor a valid regular expression ({})", pattern, e.what()));
    }
    size_t hits = 0;
    for (size_t e = 0; e < seq.size(); ++e)
      if (whole_name_matches(lattice.element(e).name, pattern, have_re ? &re : nullptr)) {
        chosen[e] = 1;
        ++hits;
      }
    if (hits == 0)
      throw InputError(option_location(positions.names_label),
                       fmt::format("'{}' names no element of the sequence (an element name, or a regular expression "
                                   "matched against whole names)",
                                   pattern));
  }
  if (positions.has_s_range) {
    const double lo = positions.s_min, hi = positions.s_max;
    if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
      throw InputError(option_location(positions.s_range_label),
                       fmt::format("expects two finite values s_min <= s_max [m], got {} {}", lo, hi));
    size_t hits = 0;
    for (size_t e = 0; e < seq.size(); ++e)
      if (seq[e].s >= lo && seq[e].s <= hi) {
        chosen[e] = 1;
        ++hits;
      }
    if (hits == 0)
      throw InputError(
          option_location(positions.s_range_label),
          fmt::format("no element starts within [{}, {}] m (circumference {} m)", lo, hi, lattice.circumference()));
  }
  std::vector<size_t> out;
  for (size_t e = 0; e < seq.size(); ++e)
    if (chosen[e]) out.push_back(e);
  return out;
}

void validate_momentum_acceptance_config(const MomentumAcceptanceConfig& c) {
  if (c.turns < 1) throw InputError(option_location("turns"), fmt::format("must be >= 1, got {}", c.turns));
  if (!(c.delta_max > 0.0 && c.delta_max < 1.0))
    throw InputError(option_location("delta_max"), fmt::format("must lie in (0, 1), got {}", c.delta_max));
  if (!std::isfinite(c.precision) || c.precision <= 0.0)
    throw InputError(option_location("precision"), fmt::format("must be finite and > 0, got {}", c.precision));
  if (c.precision > c.delta_max)
    throw InputError(
        option_location("precision"),
        fmt::format("{} is larger than delta_max = {}: nothing would be resolved", c.precision, c.delta_max));
  if (c.precision < kFinestAcceptancePrecision)
    throw InputError(option_location("precision"),
                     fmt::format("{} is finer than {}: there the boundary moves with the turn count (a particle near "
                                 "the separatrix takes ever more turns to leave) and with rounding, not with the ring",
                                 c.precision, kFinestAcceptancePrecision));
  if (c.coarse_steps < 1)
    throw InputError(option_location("coarse_steps"), fmt::format("must be >= 1, got {}", c.coarse_steps));
  if (c.refine_points < 1)
    throw InputError(option_location("refine_points"), fmt::format("must be >= 1, got {}", c.refine_points));
}

namespace {

/// One trial: a particle at the entrance of `element` on the closed orbit, delta raised by `offset`.
struct AcceptanceTrial {
  size_t element = 0;
  const std::array<double, 6>* orbit = nullptr;
  double offset = 0.0;
};

void copy_particle(const Particles& from, size_t i, Particles& to, size_t j) {
  to.x[j] = from.x[i], to.px[j] = from.px[i], to.y[j] = from.y[i], to.py[j] = from.py[i];
  to.zeta[j] = from.zeta[i], to.delta[j] = from.delta[i], to.ptau[j] = from.ptau[i];
  to.rpp[j] = from.rpp[i], to.rvv[j] = from.rvv[i], to.state[j] = from.state[i];
  to.lost_turn[j] = from.lost_turn[i], to.lost_element[j] = from.lost_element[i], to.id[j] = from.id[i];
}

/// Tracks trials and tells which were lost: a first partial turn per start element, the full turns
/// of all of them in one launch, the closing partial turn per start element.
class TrialTracker {
 public:
  TrialTracker(const Lattice& lattice, Backend& backend, const MomentumAcceptanceConfig& config)
      : m_lattice(lattice), m_backend(backend), m_config(config) {}

  std::vector<char> lost(const std::vector<AcceptanceTrial>& trials) {
    const double beta0 = m_lattice.reference().beta0();
    const size_t n_elements = m_lattice.sequence().size();
    std::map<size_t, std::vector<size_t>> by_start;
    for (size_t t = 0; t < trials.size(); ++t) by_start[trials[t].element].push_back(t);
    Particles all(trials.size(), beta0);
    for (const auto& [element, members] : by_start) {
      Particles p(members.size(), beta0);
      for (size_t k = 0; k < members.size(); ++k) {
        const AcceptanceTrial& t = trials[members[k]];
        const auto& z = *t.orbit;
        p.set(k, z[0], z[1], z[2], z[3], z[4], z[5] + t.offset);
        p.id[k] = static_cast<int64_t>(members[k]);
      }
      track(p, element, n_elements, 1, 0);
      scatter(p, all);
    }
    if (m_config.turns > 1) {
      track(all, 0, n_elements, m_config.turns - 1, 1);
      Particles ordered(all.size(), beta0);
      scatter(all, ordered);
      all = std::move(ordered);
    }
    for (const auto& [element, members] : by_start) {
      if (element == 0) continue;
      Particles p(members.size(), beta0);
      for (size_t k = 0; k < members.size(); ++k) copy_particle(all, members[k], p, k);
      track(p, 0, element, 1, m_config.turns);
      scatter(p, all);
    }
    std::vector<char> out(trials.size());
    for (size_t t = 0; t < trials.size(); ++t) out[t] = all.state[t] <= 0 ? 1 : 0;
    m_particles += static_cast<int64_t>(trials.size());
    return out;
  }

  int64_t launches() const { return m_launches; }
  int64_t particles() const { return m_particles; }
  double seconds() const { return m_seconds; }

 private:
  void track(Particles& p, size_t begin, size_t end, int64_t turns, int64_t first_turn) {
    TrackOptions o;
    o.turns = turns;
    o.first_turn = first_turn;
    o.element_begin = begin;
    o.element_end = end;
    o.collective = false;
    o.fma = m_config.fma;
    o.threads = m_config.threads;
    const auto t0 = std::chrono::steady_clock::now();
    m_backend.track(p, o);
    m_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++m_launches;
  }
  /// Puts each particle of `from` at the index its id names in `to`.
  static void scatter(const Particles& from, Particles& to) {
    for (size_t k = 0; k < from.size(); ++k) copy_particle(from, k, to, static_cast<size_t>(from.id[k]));
  }

  const Lattice& m_lattice;
  Backend& m_backend;
  const MomentumAcceptanceConfig& m_config;
  int64_t m_launches = 0, m_particles = 0;
  double m_seconds = 0.0;
};

/// The closed orbit at the entrance of every element: the one-turn map's orbit at the start stepped
/// element by element as the CPU backend tracks (collective elements skipped).
std::vector<std::array<double, 6>> orbit_at_entrances(const Lattice& lattice, const std::array<double, 6>& start) {
  const size_t n = lattice.sequence().size();
  std::vector<std::array<double, 6>> orbit(n);
  Particles p(1, lattice.reference().beta0());
  p.set(0, start[0], start[1], start[2], start[3], start[4], start[5]);
  const GlobalLimits limits = lattice.limits();
  for (size_t e = 0; e < n; ++e) {
    p.coordinates(0, orbit[e].data());
    ft_particle_block b = p.block(0, 1);
    b.limit_x = limits.x;
    b.limit_y = limits.y;
    b.turn = 0;
    b.element_index = static_cast<int64_t>(e);
    ft_error err{};
    if (track_sequence_entry(lattice, e, b, &err) != 0 || p.state[0] <= 0)
      throw Error(fmt::format("momentum acceptance: the closed orbit is lost at element #{} '{}'{}", e,
                              lattice.element(e).name, err.message[0] ? std::string(": ") + err.message : ""));
  }
  return orbit;
}

/// The search of one sign at one position: the bracket (last survivor, first loss) in |delta|.
struct AcceptanceSeries {
  size_t position = 0;
  double sign = 1.0;
  double survived = 0.0;  // largest offset below which every trial survived
  double lost = NAN;      // first lost offset above it (NaN: none lost up to delta_max)
  bool done = false;
};

/// The offsets tried for a series in a round (round 0: the coarse grid).
std::vector<double> series_trials(const AcceptanceSeries& s, const MomentumAcceptanceConfig& c, bool coarse) {
  std::vector<double> out;
  if (coarse) {
    for (int k = 1; k <= c.coarse_steps; ++k) out.push_back(c.delta_max * k / c.coarse_steps);
  } else {
    const double step = (s.lost - s.survived) / (c.refine_points + 1);
    for (int k = 1; k <= c.refine_points; ++k) out.push_back(s.survived + step * k);
  }
  return out;
}

/// Narrows the bracket with a round's results (offsets in increasing order): everything below the
/// first loss survived.
void update_series(AcceptanceSeries& s, const std::vector<double>& offsets, const std::vector<char>& lost,
                   const MomentumAcceptanceConfig& c) {
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (lost[k]) {
      s.lost = offsets[k];
      break;
    }
    s.survived = offsets[k];
  }
  s.done = std::isnan(s.lost) || s.lost - s.survived < c.precision;
}

void require_reference_momentum(const Lattice& lattice) {
  const ReferenceParticle& r = lattice.reference();
  if (!(r.p0c > 0.0) || !(r.mass0 > 0.0)) {
    InputLocation at(lattice.source_file());
    at.field = "reference.p0c";
    throw InputError(at, fmt::format("the momentum acceptance needs the beam energy: a reference with p0c > 0 and "
                                     "mass0 > 0 (got p0c = {} eV, mass0 = {} eV)",
                                     r.p0c, r.mass0));
  }
}

}  // namespace

MomentumAcceptance compute_momentum_acceptance(const Lattice& lattice, Backend& backend,
                                               const std::vector<size_t>& positions,
                                               const MomentumAcceptanceConfig& config) {
  validate_momentum_acceptance_config(config);
  require_reference_momentum(lattice);
  const size_t n_elements = lattice.sequence().size();
  if (positions.empty()) throw InputError(option_location("at"), "no position chosen");
  for (size_t e : positions)
    if (e >= n_elements)
      throw InputError(option_location("at"),
                       fmt::format("element index {} is beyond the sequence ({} entries)", e, n_elements));
  MomentumAcceptance out;
  OpticsOptions optics = config.optics;
  optics.threads = config.threads;
  const OneTurnMap map = compute_one_turn_map(lattice, optics, &out.mode_reason);
  out.six_d = map.six_d;
  const std::vector<std::array<double, 6>> orbit = orbit_at_entrances(lattice, map.closed_orbit);
  for (size_t e : positions) {
    out.element.push_back(e);
    out.name.push_back(lattice.element(e).name);
    out.s.push_back(lattice.sequence()[e].s);
    out.closed_orbit.push_back(orbit[e]);
  }
  std::vector<AcceptanceSeries> series;
  for (size_t p = 0; p < positions.size(); ++p)
    for (double sign : {1.0, -1.0}) series.push_back({p, sign, 0.0, NAN, false});

  TrialTracker tracker(lattice, backend, config);
  for (int round = 0;; ++round) {
    std::vector<AcceptanceTrial> trials;
    std::vector<std::pair<size_t, std::vector<double>>> asked;  // series index, its offsets
    for (size_t k = 0; k < series.size(); ++k) {
      if (series[k].done) continue;
      asked.emplace_back(k, series_trials(series[k], config, round == 0));
      const size_t p = series[k].position;
      for (double offset : asked.back().second)
        trials.push_back({positions[p], &orbit[positions[p]], series[k].sign * offset});
    }
    if (trials.empty()) break;
    const std::vector<char> lost = tracker.lost(trials);
    size_t t = 0;
    for (const auto& [k, offsets] : asked) {
      std::vector<char> mine(lost.begin() + static_cast<std::ptrdiff_t>(t),
                             lost.begin() + static_cast<std::ptrdiff_t>(t + offsets.size()));
      update_series(series[k], offsets, mine, config);
      t += offsets.size();
    }
    out.rounds = round + 1;
  }
  out.positive.assign(positions.size(), 0.0);
  out.negative.assign(positions.size(), 0.0);
  out.positive_lost.assign(positions.size(), NAN);
  out.negative_lost.assign(positions.size(), NAN);
  for (const AcceptanceSeries& s : series) {
    (s.sign > 0 ? out.positive : out.negative)[s.position] = s.sign * s.survived;
    (s.sign > 0 ? out.positive_lost : out.negative_lost)[s.position] = s.sign * s.lost;
  }
  out.launches = tracker.launches();
  out.particles_tracked = tracker.particles();
  out.seconds = tracker.seconds();
  out.backend = backend.name();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Touschek lifetime

void validate_touschek_beam(const TouschekBeam& b) {
  const std::pair<const char*, double> values[] = {{"emittance_x", b.emittance_x},
                                                   {"emittance_y", b.emittance_y},
                                                   {"sigma_delta", b.sigma_delta},
                                                   {"sigma_zeta", b.sigma_zeta},
                                                   {"bunch_population", b.bunch_population}};
  for (const auto& [name, v] : values)
    if (!std::isfinite(v) || v <= 0.0)
      throw InputError(option_location(name),
                       fmt::format("the Touschek lifetime needs {} finite and > 0, got {}", name, v));
}

namespace {

/// exp(-x) I0(x) for x >= 0 (no overflow): the library function below 500, the asymptotic series
/// e^-x I0(x) ~ (1 + 1/(8x) + 9/(128x^2) + 225/(3072x^3) + 11025/(98304x^4)) / sqrt(2 pi x) above
/// (Abramowitz and Stegun 9.7.1; the next term is below 1e-14 there).
double scaled_bessel_i0(double x) {
  if (x < 500.0) return std::exp(-x) * std::cyl_bessel_i(0.0, x);
  const double u = 1.0 / x;
  return (1.0 + u / 8.0 + 9.0 * u * u / 128.0 + 225.0 * u * u * u / 3072.0 + 11025.0 * u * u * u * u / 98304.0) /
         std::sqrt(2.0 * kPiTouschek * x);
}

/// Piwinski's integrand in kappa (tau = tan^2 kappa, dtau = 2 tan(kappa) (1 + tau) dkappa):
/// F(tau) exp(-B1 tau) I0(B2 tau) sqrt(tau / (1 + tau)) dtau/dkappa.
double piwinski_integrand(double kappa, double tau_m, double b1, double b2) {
  const double t = std::tan(kappa) * std::tan(kappa);
  if (!(t > 0.0) || !std::isfinite(t)) return 0.0;
  const double ratio = t / tau_m / (1.0 + t);
  const double f = (2.0 + 1.0 / t) * (2.0 + 1.0 / t) * (ratio - 1.0) + 1.0 - std::sqrt((1.0 + t) * tau_m / t) -
                   (4.0 + 1.0 / t) / (2.0 * t) * std::log(ratio);
  const double damping = std::exp(-(b1 - b2) * t) * scaled_bessel_i0(b2 * t);
  return f * damping * 2.0 * t * std::sqrt(1.0 + t);
}

/// Gauss-Kronrod 7-15 on [a, b] (QUADPACK's qk15 nodes and weights); `error` gets |K15 - G7|.
template <class F>
double gauss_kronrod_15(const F& f, double a, double b, double& error) {
  static const double xk[8] = {0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
                               0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
                               0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
                               0.207784955007898467600689403773245, 0.0};
  static const double wk[8] = {0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
                               0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
                               0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
                               0.204432940075298892414161999234649, 0.209482141084727828012999174891714};
  static const double wg[4] = {0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
                               0.381830050505118944950369775488975, 0.417959183673469387755102040816327};
  const double c = 0.5 * (a + b), h = 0.5 * (b - a);
  const double fc = f(c);
  double kronrod = wk[7] * fc, gauss = wg[3] * fc;
  for (int j = 0; j < 7; ++j) {
    const double sum = f(c - h * xk[j]) + f(c + h * xk[j]);
    kronrod += wk[j] * sum;
    if (j % 2 == 1) gauss += wg[j / 2] * sum;
  }
  error = std::fabs((kronrod - gauss) * h);
  return kronrod * h;
}

/// Adaptive bisection of Gauss-Kronrod 7-15 panels until the error estimate is below `rel` of the
/// total (or the panels reach 1e-12 of the interval).
template <class F>
double integrate_adaptive(const F& f, double a, double b, double rel) {
  struct Panel {
    double a, b, value, error;
  };
  std::vector<Panel> panels;
  double error = 0.0, total = 0.0;
  for (int k = 0; k < 8; ++k) {  // start from eight panels: the integrand is peaked near a
    const double pa = a + (b - a) * k / 8.0, pb = a + (b - a) * (k + 1) / 8.0;
    double e = 0.0;
    const double v = gauss_kronrod_15(f, pa, pb, e);
    panels.push_back({pa, pb, v, e});
    total += v;
    error += e;
  }
  for (int iteration = 0; iteration < 2000 && error > rel * std::fabs(total); ++iteration) {
    auto worst = std::max_element(panels.begin(), panels.end(),
                                  [](const Panel& x, const Panel& y) { return x.error < y.error; });
    const Panel p = *worst;
    if (p.b - p.a < 1e-12 * (b - a)) break;
    panels.erase(worst);
    const double m = 0.5 * (p.a + p.b);
    double e1 = 0.0, e2 = 0.0;
    const double v1 = gauss_kronrod_15(f, p.a, m, e1), v2 = gauss_kronrod_15(f, m, p.b, e2);
    panels.push_back({p.a, m, v1, e1});
    panels.push_back({m, p.b, v2, e2});
    total += v1 + v2 - p.value;
    error += e1 + e2 - p.error;
  }
  return total;
}

}  // namespace

TouschekBeam equilibrium_touschek_beam(const RadiationIntegrals& r, double bunch_population, double coupling,
                                       double emittance_y) {
  InputLocation at;
  at.field = "radiation";
  if (r.i2 == 0.0) throw InputError(at, "the equilibrium beam needs bends: the ring has none that radiate");
  if (!r.longitudinal)
    throw InputError(at, fmt::format("the equilibrium beam needs the bunch length of the radiating ring: {}",
                                     r.longitudinal_reason));
  TouschekBeam beam;
  if (coupling >= 0.0) {
    beam.emittance_x = r.emittance_x / (1.0 + coupling);
    beam.emittance_y = coupling * r.emittance_x / (1.0 + coupling);
  } else {
    beam.emittance_x = r.emittance_x;
    beam.emittance_y = emittance_y;
  }
  beam.sigma_delta = r.sigma_delta;
  beam.sigma_zeta = r.bunch_length;
  beam.bunch_population = bunch_population;
  validate_touschek_beam(beam);
  return beam;
}

double touschek_rate(const TouschekOptics& o, const TouschekBeam& beam, const ReferenceParticle& ref, double delta_m) {
  validate_touschek_beam(beam);
  if (std::isinf(delta_m)) return 0.0;
  const double beta = ref.beta0(), gamma = ref.gamma0();
  const double b2g2 = beta * beta * gamma * gamma;
  const double sp2 = beam.sigma_delta * beam.sigma_delta;
  const double sxb2 = beam.emittance_x * o.beta_x, syb2 = beam.emittance_y * o.beta_y;  // betatron sizes^2
  const double dtx = o.alpha_x * o.dx + o.beta_x * o.dpx, dty = o.alpha_y * o.dy + o.beta_y * o.dpy;
  const double sh2 = 1.0 / (1.0 / sp2 + (o.dx * o.dx + dtx * dtx) / sxb2 + (o.dy * o.dy + dty * dty) / syb2);
  // B1 = (a + b) / 2 and B2 = sqrt(((a - b) / 2)^2 + c^2) from the quadratic form a tx^2 + b ty^2 + 2 c tx ty
  // of the scattering angles once delta is integrated out: a = beta_x^2 / (beta^2 gamma^2 sx^2) (1 - sigma_h^2
  // Dt_x^2 / sx^2), b alike, c = -sigma_h^2 beta_x beta_y Dt_x Dt_y / (beta^2 gamma^2 sx^2 sy^2). Then
  // B1^2 - B2^2 = ab - c^2 is Piwinski's expression (the identity 1 - sigma_h^2 (Dt_x^2 / sx^2 + Dt_y^2 / sy^2) =
  // sigma_h^2 (sigma_x^2 sigma_y^2 - sigma_p^4 D_x^2 D_y^2) / (sigma_p^2 sx^2 sy^2)), and this form has no
  // cancellation for flat beams (B2 close to B1).
  const double a = o.beta_x * o.beta_x / (b2g2 * sxb2) * (1.0 - sh2 * dtx * dtx / sxb2);
  const double b = o.beta_y * o.beta_y / (b2g2 * syb2) * (1.0 - sh2 * dty * dty / syb2);
  const double c = -sh2 * o.beta_x * o.beta_y * dtx * dty / (b2g2 * sxb2 * syb2);
  const double b1 = 0.5 * (a + b);
  const double b2 = std::sqrt(0.25 * (a - b) * (a - b) + c * c);
  const double tau_m = beta * beta * delta_m * delta_m;
  if (!(tau_m > 0.0))
    throw InputError(option_location("momentum acceptance"),
                     fmt::format("the Touschek rate needs a non-zero acceptance, got {}", delta_m));
  const double kappa_m = std::atan(std::sqrt(tau_m));
  const double integral = integrate_adaptive([&](double k) { return piwinski_integrand(k, tau_m, b1, b2); }, kappa_m,
                                             kPiTouschek / 2.0, 1e-10);
  const double radius = kElectronRadius * ref.q0 * ref.q0 * kElectronMass / ref.mass0;
  const double prefactor =
      radius * radius * kClightTouschek * o.beta_x * o.beta_y * std::sqrt(sh2) * beam.bunch_population /
      (8.0 * std::sqrt(kPiTouschek) * b2g2 * gamma * gamma * sxb2 * syb2 * beam.sigma_zeta * beam.sigma_delta);
  return prefactor * integral;
}

namespace {

/// The LMA at s, linearly interpolated between the positions (constant outside them).
double interpolate_acceptance(const std::vector<double>& s, const std::vector<double>& values, double at) {
  if (at <= s.front()) return values.front();
  if (at >= s.back()) return values.back();
  const size_t k = static_cast<size_t>(std::upper_bound(s.begin(), s.end(), at) - s.begin());
  const double w = (at - s[k - 1]) / (s[k] - s[k - 1]);
  return values[k - 1] + w * (values[k] - values[k - 1]);
}

TouschekOptics optics_row(const TwissTable& t, size_t r) {
  return {t.beta_x[r], t.alpha_x[r], t.dx[r], t.dpx[r], t.beta_y[r], t.alpha_y[r], t.dy[r], t.dpy[r]};
}

}  // namespace

TouschekLifetime touschek_lifetime(const Lattice& lattice, const TwissTable& twiss, const MomentumAcceptance& lma,
                                   const TouschekBeam& beam) {
  validate_touschek_beam(beam);
  if (lma.element.empty()) throw Error("Touschek lifetime: the momentum acceptance has no position");
  const auto& seq = lattice.sequence();
  if (twiss.size() != seq.size() + 1)
    throw Error(fmt::format("Touschek lifetime: the Twiss table has {} rows, the lattice {} elements", twiss.size(),
                            seq.size()));
  // Positions that share an s (thin elements) keep the last one's acceptance: interpolation needs
  // increasing s.
  std::vector<double> s, dp, dn;
  for (size_t k = 0; k < lma.s.size(); ++k) {
    if (!s.empty() && lma.s[k] <= s.back()) {
      dp.back() = std::min(dp.back(), lma.positive[k]);
      dn.back() = std::max(dn.back(), lma.negative[k]);
      continue;
    }
    s.push_back(lma.s[k]);
    dp.push_back(lma.positive[k]);
    dn.push_back(lma.negative[k]);
  }
  TouschekLifetime out;
  const ReferenceParticle& ref = lattice.reference();
  std::vector<double> row_rate_p(twiss.size(), NAN), row_rate_n(twiss.size(), NAN);
  const auto rates_at = [&](size_t r) {
    if (std::isnan(row_rate_p[r])) {
      const TouschekOptics o = optics_row(twiss, r);
      row_rate_p[r] = touschek_rate(o, beam, ref, interpolate_acceptance(s, dp, twiss.s[r]));
      row_rate_n[r] = touschek_rate(o, beam, ref, interpolate_acceptance(s, dn, twiss.s[r]));
      out.s.push_back(twiss.s[r]);
      out.rate.push_back(0.5 * (row_rate_p[r] + row_rate_n[r]));
    }
  };
  double sum_p = 0.0, sum_n = 0.0;
  for (size_t e = lma.element.front(); e <= lma.element.back(); ++e) {
    const double length = twiss.s[e + 1] - twiss.s[e];
    out.span_length += length;
    if (!(length > 0.0)) continue;
    rates_at(e);
    rates_at(e + 1);
    sum_p += 0.5 * length * (row_rate_p[e] + row_rate_p[e + 1]);
    sum_n += 0.5 * length * (row_rate_n[e] + row_rate_n[e + 1]);
  }
  if (!(out.span_length > 0.0))
    throw Error("Touschek lifetime: the chosen positions span no element of non-zero length");
  out.rate_positive = sum_p / out.span_length;
  out.rate_negative = sum_n / out.span_length;
  out.lifetime = 1.0 / (0.5 * (out.rate_positive + out.rate_negative));
  return out;
}

void write_momentum_acceptance(const std::string& dir, const MomentumAcceptance& lma,
                               const MomentumAcceptanceConfig& config, const TouschekLifetime* lifetime,
                               const TouschekBeam* beam, const std::string& lattice_file) {
  std::filesystem::create_directories(dir);
  write_file_atomically(dir + "/momentum_acceptance.csv", [&](std::ostream& out) {
    out << "s,element,name,delta_positive,delta_negative,first_lost_positive,first_lost_negative\n";
    for (size_t k = 0; k < lma.element.size(); ++k)
      out << fmt::format("{:.17g},{},{},{:.17g},{:.17g},{:.17g},{:.17g}\n", lma.s[k], lma.element[k], lma.name[k],
                         lma.positive[k], lma.negative[k], lma.positive_lost[k], lma.negative_lost[k]);
  });
  if (lifetime) {
    write_file_atomically(dir + "/touschek_rate.csv", [&](std::ostream& out) {
      out << "s,rate\n";
      for (size_t k = 0; k < lifetime->s.size(); ++k)
        out << fmt::format("{:.17g},{:.17g}\n", lifetime->s[k], lifetime->rate[k]);
    });
  } else {
    // A table of an earlier run in the same directory would be read with this run's (the plot reads both).
    std::filesystem::remove(dir + "/touschek_rate.csv");
  }
  nlohmann::ordered_json j;
  j["lattice"] = lattice_file;
  j["turns"] = config.turns;
  j["delta_max"] = config.delta_max;
  j["precision"] = config.precision;
  j["coarse_steps"] = config.coarse_steps;
  j["refine_points"] = config.refine_points;
  j["convention"] = "last surviving offset before the first loss (islands beyond it not counted)";
  j["closed_orbit"] = lma.six_d ? "6D" : "4D";
  j["positions"] = lma.element.size();
  j["rounds"] = lma.rounds;
  j["launches"] = lma.launches;
  j["particles_tracked"] = lma.particles_tracked;
  j["tracking_seconds"] = lma.seconds;
  j["backend"] = lma.backend;
  if (!lma.positive.empty()) {
    j["min_delta_positive"] = *std::min_element(lma.positive.begin(), lma.positive.end());
    j["max_delta_negative"] = *std::max_element(lma.negative.begin(), lma.negative.end());
  }
  if (lifetime && beam) {
    j["touschek"] = {{"lifetime_s", lifetime->lifetime},         {"lifetime_h", lifetime->lifetime / 3600.0},
                     {"rate_positive", lifetime->rate_positive}, {"rate_negative", lifetime->rate_negative},
                     {"span_length", lifetime->span_length},     {"emittance_x", beam->emittance_x},
                     {"emittance_y", beam->emittance_y},         {"sigma_delta", beam->sigma_delta},
                     {"sigma_zeta", beam->sigma_zeta},           {"bunch_population", beam->bunch_population}};
  }
  write_file_atomically(dir + "/summary.json", j.dump(2) + "\n");
}

}  // namespace ft
