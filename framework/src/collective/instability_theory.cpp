// Analytic instability references and the growth-rate fit (fusetrack/instability_theory.h).
#include "fusetrack/instability_theory.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "fusetrack/error.h"
#include "core/math_helpers.hpp"

namespace ft::instability {

namespace {
constexpr double kC = 299792458.0;              // [m/s]
constexpr double kE = 1.602176634e-19;          // [C]

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.12g", v);
  return buf;
}

void check(const RingBeam& b) {
  if (!(b.gamma >= 1.0)) throw Error("instability theory: gamma must be >= 1 (got " + number(b.gamma) + ")");
  if (!(b.revolution_frequency > 0.0)) throw Error("instability theory: the revolution frequency must be > 0");
  if (b.bunches < 1) throw Error("instability theory: at least one bunch");
  if (!(b.mass > 0.0)) throw Error("instability theory: the mass must be > 0");
}

double h_mode(int m, double w, double tau, SachererModes modes) {
  const double am = std::abs(m) + 1.0;
  if (modes == SachererModes::hermite) {
    const double x = w * tau / 4.0;
    return std::pow(x, 2 * std::abs(m)) * std::exp(-x * x);
  }
  const double x = w * tau / kPi;
  const double den = x * x - am * am;
  const double num = 1.0 + ((m % 2 == 0) ? 1.0 : -1.0) * std::cos(w * tau);
  if (std::fabs(den) < 1e-4) {
    // removable singularity at w tau = +-pi (|m|+1): the limit of the ratio, by l'Hopital twice:
    // (1 + (-1)^m cos(pi x)) ~ (pi^2 / 2) (x - x0)^2, den ~ (2 x0)^2 (x - x0)^2
    return tau * tau * am * am / (2.0 * kPi * kPi * kPi * kPi) * (kPi * kPi / 2.0) / (4.0 * am * am);
  }
  return tau * tau * am * am / (2.0 * kPi * kPi * kPi * kPi) * num / (den * den);
}
}  // namespace

double RingBeam::beta0() const { return std::sqrt(1.0 - 1.0 / (gamma * gamma)); }
double RingBeam::p0c() const { return mass * gamma * beta0(); }

SachererResult sacherer(const RingBeam& beam, const ImpedanceFunction& z_perp, double tau, int m, int mu,
                        SachererModes modes) {
  check(beam);
  if (!(tau > 0.0)) throw Error("sacherer: the bunch length must be > 0 [s]");
  if (mu < 0 || mu >= beam.bunches) throw Error("sacherer: the coupled-bunch mode must be in 0 .. M-1");
  if (beam.eta == 0.0 && beam.chromaticity != 0.0) throw Error("sacherer: eta = 0 with chromaticity");
  const double w0 = 2.0 * kPi * beam.revolution_frequency;
  const double ws = beam.synchrotron_tune * w0;
  const double wxi = beam.eta == 0.0 ? 0.0 : beam.chromaticity * w0 / beam.eta;
  const double w_max = 400.0 * kPi * (std::abs(m) + 1.0) / tau + std::fabs(wxi);
  const double step = beam.bunches * w0;
  const double base = (mu + beam.tune) * w0 + m * ws;
  const long p_lo = static_cast<long>(std::floor((-w_max - base) / step));
  const long p_hi = static_cast<long>(std::ceil((w_max - base) / step));
  Complex sum_z(0.0, 0.0);
  double sum_h = 0.0;
  for (long p = p_lo; p <= p_hi; ++p) {
    const double w = base + double(p) * step;
    const double h = h_mode(m, w - wxi, tau, modes);
    sum_h += h;
    sum_z += z_perp(w / (2.0 * kPi)) * h;
  }
  SachererResult r;
  r.effective_impedance = sum_z / sum_h;
  const double m0_kg = beam.mass * kE / (kC * kC);
  const double ib = beam.charge * kE * beam.intensity * beam.revolution_frequency;
  const double length = beam.beta0() * kC * tau;
  const Complex dw = Complex(0.0, 1.0) * beam.charge * kE * ib * r.effective_impedance /
                     (2.0 * (std::abs(m) + 1.0) * m0_kg * beam.gamma * beam.tune * w0 * length);
  r.tune_shift = dw / w0;
  r.growth_rate_per_turn = -2.0 * kPi * r.tune_shift.imag();
  r.growth_rate = -dw.imag();
  return r;
}

SachererResult sacherer_most_unstable(const RingBeam& beam, const ImpedanceFunction& z_perp, double tau, int m,
                                      int* mu_out, SachererModes modes) {
  SachererResult best;
  int best_mu = -1;
  for (int mu = 0; mu < beam.bunches; ++mu) {
    const SachererResult r = sacherer(beam, z_perp, tau, m, mu, modes);
    if (best_mu < 0 || r.growth_rate > best.growth_rate) {
      best = r;
      best_mu = mu;
    }
  }
  if (mu_out) *mu_out = best_mu;
  return best;
}

Complex coupled_bunch_tune_shift(const RingBeam& beam, const ImpedanceFunction& z_perp, double beta_x, int mu,
                                 double f_max) {
  check(beam);
  if (mu < 0 || mu >= beam.bunches) throw Error("coupled_bunch_tune_shift: mode must be in 0 .. M-1");
  const double f0 = beam.revolution_frequency, M = beam.bunches;
  if (!(f_max > 0.0)) f_max = 1e4 * M * f0;
  const double k = beam.charge * beam.charge * kE * beam.intensity / (beam.beta0() * beam.p0c());
  const double tb = 1.0 / (M * f0);
  const double base = mu + beam.tune;
  const long p_lo = static_cast<long>(std::floor((-f_max / f0 - base) / M));
  const long p_hi = static_cast<long>(std::ceil((f_max / f0 - base) / M));
  Complex sum(0.0, 0.0);
  for (long p = p_lo; p <= p_hi; ++p) sum += z_perp((double(p) * M + base) * f0);
  return Complex(0.0, 1.0) * beta_x * k / (4.0 * kPi * tb) * sum;
}

double resistive_wall_growth_rate(const RingBeam& beam, const ImpedanceFunction& z_perp, double beta_x) {
  check(beam);
  const double f0 = beam.revolution_frequency;
  const double frac = beam.tune - std::floor(beam.tune);
  const double k = beam.charge * beam.charge * kE * beam.intensity / (beam.beta0() * beam.p0c());
  return beta_x * k * beam.bunches * f0 * f0 * z_perp((1.0 - frac) * f0).real() / 2.0;
}

double damper_gain(double damping_turns) {
  if (!(damping_turns >= 1.0))
    throw Error("damper: the damping time must be at least one turn (got " + number(damping_turns) +
                " turns; gain = 2 / turns would exceed 2)");
  return 2.0 / damping_turns;
}

double damper_amplitude_rate_per_turn(double gain) {
  if (!(gain > 0.0 && gain < 1.0)) throw Error("damper: the gain must be in (0, 1) (got " + number(gain) + ")");
  return -std::log(1.0 - gain) / 2.0;
}

GrowthFit fit_exponential_growth(const std::vector<double>& turns, const std::vector<double>& signal,
                                 double first_turn, double last_turn) {
  if (turns.size() != signal.size()) throw Error("fit_exponential_growth: turns and signal differ in length");
  std::vector<double> t, y;
  const size_t n = signal.size();
  for (size_t i = 1; i + 1 < n; ++i) {
    if (turns[i] < first_turn || turns[i] > last_turn) continue;
    const double a = std::fabs(signal[i]);
    if (a > 0.0 && a >= std::fabs(signal[i - 1]) && a > std::fabs(signal[i + 1])) {
      t.push_back(turns[i]);
      y.push_back(std::log(a));
    }
  }
  GrowthFit fit;
  fit.points = static_cast<int>(t.size());
  if (t.size() < 3)
    throw Error("fit_exponential_growth: only " + std::to_string(t.size()) +
                " envelope peaks in the window (need 3; is the signal oscillating?)");
  double tm = 0.0, ym = 0.0;
  for (size_t i = 0; i < t.size(); ++i) {
    tm += t[i];
    ym += y[i];
  }
  tm /= double(t.size());
  ym /= double(t.size());
  double stt = 0.0, sty = 0.0;
  for (size_t i = 0; i < t.size(); ++i) {
    stt += (t[i] - tm) * (t[i] - tm);
    sty += (t[i] - tm) * (y[i] - ym);
  }
  fit.rate = sty / stt;
  fit.log_amplitude = ym - fit.rate * tm;
  double rss = 0.0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double r = y[i] - (fit.log_amplitude + fit.rate * t[i]);
    rss += r * r;
  }
  fit.rate_error = std::sqrt(rss / double(t.size() - 2) / stt);
  return fit;
}

}  // namespace ft::instability
