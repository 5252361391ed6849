// Host model of the LongitudinalImpedance element: JSON sources -> impedance sources -> the
// ft_collective_model the framework solves with (see impedance_model.hpp for the formulas).
#include "impedance_model.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "longitudinal_impedance.h"

namespace ft::impedance {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kSpeedOfLight = 299792458.0;          // [m/s]
constexpr double kElementaryCharge = 1.602176634e-19;  // [C]
// A mode whose memory decays below this over one turn is left out (negligible against the
// single-turn wake it came with).
constexpr double kNegligibleTurnDecay = 1e-30;

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.12g", v);
  return buf;
}

[[noreturn]] void fail(const std::string& field, const std::string& problem) {
  throw std::invalid_argument("field '" + field + "': " + problem);
}

const char* json_kind(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

}  // namespace

// Slicing that resolves a resonator's wake for point samples (8 samples per period, 4 per decay time).
constexpr double kUndersampledPeriod = 0.125;
constexpr double kUndersampledDecay = 0.25;

// ---- Resonator ---------------------------------------------------------------------------------

Resonator::Resonator(double r_shunt, double frequency, double q, bool multi_turn)
    : m_r_shunt(r_shunt), m_frequency(frequency), m_q(q), m_multi_turn(multi_turn) {
  const double omega_r = 2.0 * kPi * frequency;
  m_alpha = omega_r / (2.0 * q);
  m_omega2 = omega_r * omega_r - m_alpha * m_alpha;
}

double Resonator::wake(double t) const {
  if (t < 0.0) return 0.0;
  const double a = m_alpha;
  if (t == 0.0) return a * m_r_shunt;  // half of the jump 0 -> 2 alpha R_s
  // W = 2 alpha R [C - alpha S], C = e^{-alpha t} cos(w t), S = e^{-alpha t} sin(w t) / w
  // (cosh, sinh of kappa t when overdamped; C = e^{-alpha t}, S = t e^{-alpha t} at critical damping).
  double c, s;
  if (m_omega2 > 0.0) {
    const double w = std::sqrt(m_omega2);
    const double decay = std::exp(-a * t);
    c = decay * std::cos(w * t);
    s = decay * std::sin(w * t) / w;
  } else {
    const double kappa = std::sqrt(-m_omega2);
    const double x = kappa * t;
    if (x < 1e-3) {  // series: no cancellation in sinh(x)/kappa
      const double decay = std::exp(-a * t);
      c = decay * (1.0 + x * x / 2.0 + x * x * x * x / 24.0);
      s = decay * t * (1.0 + x * x / 6.0 + x * x * x * x / 120.0);
    } else {  // e^{-alpha t} cosh, sinh written with the two decaying exponentials (no overflow)
      const double slow = std::exp((kappa - a) * t), fast = std::exp(-(kappa + a) * t);
      c = 0.5 * (slow + fast);
      s = 0.5 * (slow - fast) / kappa;
    }
  }
  return 2.0 * a * m_r_shunt * (c - a * s);
}

namespace {
// h(sigma) = integral_0^1 (1 - u) e^{sigma u} du = (e^sigma - 1 - sigma) / sigma^2 (series for small sigma).
Complex hat_half(Complex sigma) {
  if (std::abs(sigma) < 0.5) {
    Complex term(1.0, 0.0), sum(0.0, 0.0);  // sigma^k / (k + 2)!
    double factorial = 2.0;
    for (int k = 0; k < 24; ++k) {
      sum += term / factorial;
      term *= sigma;
      factorial *= double(k + 3);
    }
    return sum;
  }
  return (std::exp(sigma) - 1.0 - sigma) / (sigma * sigma);
}
// e^{sigma m} h(-sigma) = (e^{sigma (m-1)} - e^{sigma m} (1 - sigma)) / sigma^2, m >= 1 (no overflow of e^{-sigma}).
Complex hat_half_reflected(Complex sigma, int m) {
  if (std::abs(sigma) < 0.5) return std::exp(sigma * double(m)) * hat_half(-sigma);
  return (std::exp(sigma * double(m - 1)) - std::exp(sigma * double(m)) * (1.0 - sigma)) / (sigma * sigma);
}
}  // namespace

void Resonator::add_wake_samples(double dt, int n, double* out) const {
  // Wake samples consistent with a piecewise-linear line density between slice centres: for
  // lambda(t) = sum_j lambda_j hat((t - t_j) / dt), V(t_r) = sum_j lambda_j dt K_{r-j} exactly, with
  //   K_m = integral_{-1}^{1} (1 - |u|) W((m + u) dt) du
  // (the wake averaged with the linear-interpolation kernel). Point samples W(m dt) are wrong when
  // the wake changes within a slice (a broadband resonator with 1 / alpha < dt: the sample W(0) =
  // alpha R_s then dominates); K_m converges to W(m dt) when dt -> 0 and keeps the zeroth and first
  // moments of W (Z(0) and dZ/df at 0) for any dt. W = sum Re(c e^{s t}) for t > 0 (wake_modes).
  // Resolved (f_r dt <= 1/8, alpha dt <= 1/4):
  // point samples W(k dt), as BLonD's time-domain wake (identical results). Otherwise averaged.
  if (!(m_frequency * dt > kUndersampledPeriod || m_alpha * dt > kUndersampledDecay)) {
    for (int k = 0; k < n; ++k) out[k + n - 1] += wake(k * dt);  // W = 0 for k < 0
    return;
  }
  std::fprintf(stderr,
               "warning: LongitudinalImpedance: resonator f_r = %.4g Hz, Q = %.4g is undersampled by slices of "
               "dt = %.4g s (f_r dt = %.3g > %.3g or alpha dt = %.3g > %.3g, decay time 1/alpha = %.4g s): point "
               "samples W(k dt) would be wrong, the wake is averaged over the slices instead (exact for a line "
               "density linear between slice centres); Z above 1/(2 dt) = %.4g Hz is not resolved\n",
               m_frequency, m_q, dt, m_frequency * dt, kUndersampledPeriod, m_alpha * dt, kUndersampledDecay,
               1.0 / m_alpha, 0.5 / dt);
  const std::vector<ft_wake_mode> modes = wake_modes();
  if (modes.empty()) {  // critical damping: Gauss-Legendre on each half of the hat (20 points each)
    static const double x[10] = {0.0765265211334973, 0.2277858511416451, 0.3737060887154195, 0.5108670019508271,
                                 0.6360536807265150, 0.7463319064601508, 0.8391169718222188, 0.9122344282513259,
                                 0.9639719272779138, 0.9931285991850949};
    static const double w[10] = {0.1527533871307258, 0.1491729864726037, 0.1420961093183820, 0.1316886384491766,
                                 0.1181945319615184, 0.1019301198172404, 0.0832767415767048, 0.0626720483341091,
                                 0.0406014298003869, 0.0176140071391521};
    for (int m = 0; m < n; ++m) {
      double sum = 0.0;
      for (int side = 0; side < 2; ++side)  // side 0: u in [-1, 0], side 1: u in [0, 1]
        for (int i = 0; i < 10; ++i)
          for (int sign = -1; sign <= 1; sign += 2) {
            const double u01 = 0.5 * (1.0 + sign * x[i]);  // node in [0, 1]
            const double u = side == 1 ? u01 : u01 - 1.0;
            sum += 0.5 * w[i] * (1.0 - std::fabs(u)) * wake((m + u) * dt);
          }
      out[m + n - 1] += sum;
    }
    return;
  }
  for (const ft_wake_mode& mode : modes) {
    const Complex c(mode.c_re, mode.c_im), sigma = Complex(mode.s_re, mode.s_im) * dt;
    out[n - 1] += (c * hat_half(sigma)).real();  // m = 0: only u > 0 (W = 0 before the source)
    for (int m = 1; m < n; ++m)
      out[m + n - 1] += (c * (std::exp(sigma * double(m)) * hat_half(sigma) + hat_half_reflected(sigma, m))).real();
  }
}

Complex Resonator::impedance(double f) const {
  if (!(f > 0.0)) return Complex(0.0, 0.0);  // Z -> 0 as f -> 0
  const double y = m_q * (f / m_frequency - m_frequency / f);
  if (std::fabs(y) <= 1.0) return m_r_shunt / Complex(1.0, y);
  // R / (1 + i y) = (R / y) (1/y - i) / (1 + 1/y^2): no overflow of y^2 far from resonance
  const double inv = 1.0 / y;
  const double scale = m_r_shunt * inv / (1.0 + inv * inv);
  return Complex(scale * inv, -scale);
}

std::vector<ft_wake_mode> Resonator::wake_modes() const {
  const double a = m_alpha, r = m_r_shunt;
  if (m_omega2 > 0.0) {  // s = -alpha + i w, c = 2 alpha R (1 + i alpha / w)
    const double w = std::sqrt(m_omega2);
    return {ft_wake_mode{-a, w, 2.0 * a * r, 2.0 * a * r * a / w}};
  }
  if (m_omega2 < 0.0) {  // alpha R [(1 - alpha/kappa) e^{(kappa - alpha) t} + (1 + alpha/kappa) e^{-(kappa + alpha) t}]
    const double kappa = std::sqrt(-m_omega2);
    return {ft_wake_mode{kappa - a, 0.0, a * r * (1.0 - a / kappa), 0.0},
            ft_wake_mode{-kappa - a, 0.0, a * r * (1.0 + a / kappa), 0.0}};
  }
  return {};
}

// ---- InductiveImpedance ------------------------------------------------------------------------

void InductiveImpedance::add_wake_samples(double dt, int n, double* out) const {
  const double k = m_inductance / (2.0 * dt * dt);
  out[-1 + n - 1] += k;  // the later slice: sum_j K_{r-j} lambda_j = L (lambda_{r+1} - lambda_{r-1}) / (2 dt^2)
  out[+1 + n - 1] -= k;
}

Complex InductiveImpedance::impedance(double f) const { return Complex(0.0, 2.0 * kPi * f * m_inductance); }

// ---- Tables ------------------------------------------------------------------------------------

double PiecewiseLinear::at(double x0) const {
  if (!(x0 >= x.front() && x0 <= x.back())) return 0.0;
  size_t hi = 1;
  {
    size_t lo_i = 0, hi_i = x.size() - 1;  // binary search: x[lo_i] <= x0 <= x[hi_i]
    while (hi_i - lo_i > 1) {
      const size_t mid = (lo_i + hi_i) / 2;
      (x[mid] <= x0 ? lo_i : hi_i) = mid;
    }
    hi = hi_i;
  }
  const size_t lo = hi - 1;
  const double u = (x0 - x[lo]) / (x[hi] - x[lo]);
  return y[lo] + (y[hi] - y[lo]) * u;
}

namespace {
// g0(theta) = integral_0^1 e^{i theta s} ds, g1(theta) = integral_0^1 s e^{i theta s} ds
// (Filon-type exact integrals of a linear function times e^{i u x}; series for small theta).
void filon_weights(double theta, Complex& g0, Complex& g1) {
  const Complex i(0.0, 1.0);
  if (std::fabs(theta) < 0.5) {
    Complex term(1.0, 0.0);  // (i theta)^k / k!
    g0 = 0.0;
    g1 = 0.0;
    for (int k = 0; k < 24; ++k) {
      g0 += term / double(k + 1);
      g1 += term / double(k + 2);
      term *= i * theta / double(k + 1);
    }
    return;
  }
  const Complex e = std::exp(i * theta);
  g0 = (e - 1.0) / (i * theta);
  g1 = e / (i * theta) + (e - 1.0) / (theta * theta);
}
}  // namespace

Complex PiecewiseLinear::fourier(double u) const {
  const Complex i(0.0, 1.0);
  Complex sum(0.0, 0.0);
  for (size_t k = 0; k + 1 < x.size(); ++k) {
    const double h = x[k + 1] - x[k];
    Complex g0, g1;
    filon_weights(u * h, g0, g1);
    sum += std::exp(i * (u * x[k])) * (h * (y[k] * g0 + (y[k + 1] - y[k]) * g1));
  }
  return sum;
}

void ImpedanceTable::add_wake_samples(double dt, int n, double* out) const {
  for (int k = 0; k < n; ++k) {
    // P = int Re Z e^{iut} df, Q = int Im Z e^{iut} df, u = 2 pi t:
    // W(t) = 2 (Re P - Im Q), W(-t) = 2 (Re P + Im Q).
    const double u = 2.0 * kPi * k * dt;
    const Complex p = m_re.fourier(u), q = m_im.fourier(u);
    out[k + n - 1] += 2.0 * (p.real() - q.imag());
    if (k > 0) out[-k + n - 1] += 2.0 * (p.real() + q.imag());
  }
}

Complex ImpedanceTable::impedance(double f) const { return Complex(m_re.at(f), m_im.at(f)); }

void WakeTable::add_wake_samples(double dt, int n, double* out) const {
  for (int k = 0; k < n; ++k) {
    const double t = k * dt;
    const double w = m_wake.at(t);
    out[k + n - 1] += t == m_wake.x.front() ? 0.5 * w : w;  // half value of the jump from 0
  }
}

Complex WakeTable::impedance(double f) const { return std::conj(m_wake.fourier(2.0 * kPi * f)); }

std::vector<std::vector<double>> read_table(const std::string& path, int columns, const std::string& field,
                                            const std::string& column_names) {
  std::ifstream in(path);
  if (!in) fail(field, "cannot read the table file '" + path + "'");
  std::vector<std::vector<double>> cols(static_cast<size_t>(columns));
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    for (char& ch : line)
      if (ch == ',') ch = ' ';
    std::istringstream words(line);
    std::vector<double> row;
    std::string word;
    const std::string where = "'" + path + "' line " + std::to_string(line_number);
    while (words >> word) {
      char* end = nullptr;
      const double v = std::strtod(word.c_str(), &end);
      if (end == word.c_str() || *end != '\0') fail(field, where + ": '" + word + "' is not a number");
      if (!std::isfinite(v)) fail(field, where + ": value '" + word + "' is not finite");
      row.push_back(v);
    }
    if (static_cast<int>(row.size()) != columns)
      fail(field, where + ": expected " + std::to_string(columns) + " columns (" + column_names + "), got " +
                      std::to_string(row.size()));
    if (row[0] < 0.0) fail(field, where + ": the first column must be >= 0, got " + number(row[0]));
    if (!cols[0].empty() && !(row[0] > cols[0].back()))
      fail(field, where + ": the first column must increase strictly, got " + number(row[0]) + " after " +
                      number(cols[0].back()));
    for (int c = 0; c < columns; ++c) cols[static_cast<size_t>(c)].push_back(row[static_cast<size_t>(c)]);
  }
  if (cols[0].size() < 2)
    fail(field, "'" + path + "' has " + std::to_string(cols[0].size()) + " data rows; at least 2 are needed");
  return cols;
}

// ---- JSON sources ------------------------------------------------------------------------------

namespace {

using json = nlohmann::json;

/// The keys of one source object, checked for unknown and missing ones.
class SourceReader {
 public:
  SourceReader(const json& source, std::string prefix, std::vector<std::string> allowed)
      : m_source(source), m_prefix(std::move(prefix)) {
    for (const auto& item : source.items()) {
      bool known = false;
      for (const auto& a : allowed) known = known || item.key() == a;
      if (!known) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(m_prefix + item.key(), "unknown key for this source type; its keys are: " + list);
      }
    }
  }

  const json& required(const std::string& key) const {
    if (!m_source.contains(key)) fail(m_prefix + key, "required key is missing");
    return m_source.at(key);
  }

  double number_value(const std::string& key, const char* unit) const {
    const json& v = required(key);
    if (!v.is_number()) fail(m_prefix + key, std::string("expected a number [") + unit + "], got " + json_kind(v));
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(m_prefix + key, "value " + v.dump() + " is not finite");
    return x;
  }

  double positive(const std::string& key, const char* unit) const {
    const double x = number_value(key, unit);
    if (!(x > 0.0)) fail(m_prefix + key, "must be positive, got " + number(x) + " " + unit);
    return x;
  }

  bool flag(const std::string& key, bool fallback) const {
    if (!m_source.contains(key)) return fallback;
    const json& v = m_source.at(key);
    if (!v.is_boolean()) fail(m_prefix + key, std::string("expected true or false, got ") + json_kind(v));
    return v.get<bool>();
  }

  std::string text(const std::string& key) const {
    const json& v = required(key);
    if (!v.is_string()) fail(m_prefix + key, std::string("expected a string, got ") + json_kind(v));
    return v.get<std::string>();
  }

  std::string field_path(const std::string& key) const { return m_prefix + key; }

 private:
  const json& m_source;
  std::string m_prefix;
};

std::string resolve_table_path(const std::string& file, const std::string& base_directory) {
  if (!file.empty() && file[0] == '/') return file;
  return (base_directory.empty() ? std::string(".") : base_directory) + "/" + file;
}

const char* const kKnownTypes = "Resonator, InductiveImpedance, ImpedanceTable, WakeTable";

std::string string_option(const json& def, const char* key, const char* fallback, const char* a, const char* b) {
  if (!def.contains(key)) return fallback;
  const json& v = def.at(key);
  if (!v.is_string() || (v.get<std::string>() != a && v.get<std::string>() != b))
    fail(key, std::string("expected \"") + a + "\" or \"" + b + "\", got " + v.dump());
  return v.get<std::string>();
}

// ---- the whole model: sources summed, the profile filter ----

}  // namespace

void model_wake_samples(const ImpedanceModel& model, double dt, int n, double* out) {
  if (!(model.filter_sigma_t > 0.0)) {
    for (int k = 0; k < 2 * n - 1; ++k) out[k] = 0.0;
    for (const auto& s : model.sources) s->add_wake_samples(dt, n, out);
    return;
  }
  // Discrete Gaussian g_j, |j| <= half (6 sigma: the weights left out are below 1e-8 of the sum).
  const double u = dt / model.filter_sigma_t;
  const int half = static_cast<int>(std::min(std::ceil(6.0 / u), 1.0e7));
  std::vector<double> g(static_cast<size_t>(2 * half + 1));
  double sum = 0.0;
  for (int j = -half; j <= half; ++j) sum += g[static_cast<size_t>(j + half)] = std::exp(-0.5 * (j * u) * (j * u));
  for (double& w : g) w /= sum;
  // Unfiltered samples over the lags the kernel reaches: -(m-1) .. m-1 with m = n + half.
  const int m = n + half;
  std::vector<double> raw(static_cast<size_t>(2 * m - 1), 0.0);
  for (const auto& s : model.sources) s->add_wake_samples(dt, m, raw.data());
  for (int k = -(n - 1); k <= n - 1; ++k) {
    double acc = 0.0;
    for (int j = -half; j <= half; ++j)
      acc += g[static_cast<size_t>(j + half)] * raw[static_cast<size_t>(k - j + m - 1)];
    out[k + n - 1] = acc;
  }
}

Complex model_impedance_at(const ImpedanceModel& model, double f) {
  Complex z(0.0, 0.0);
  for (const auto& s : model.sources) z += s->impedance(f);
  if (model.filter_sigma_t > 0.0) {
    const double a = 2.0 * kPi * f * model.filter_sigma_t;
    z *= std::exp(-0.5 * a * a);
  }
  return z;
}

namespace {

// ---- the C callbacks of ft_collective_model ----

int model_wake(void* state, double dt, int32_t n, double* out, ft_error* error) {
  try {
    model_wake_samples(*static_cast<const ImpedanceModel*>(state), dt, n, out);
    return 0;
  } catch (const std::exception& ex) {
    ::ft::element_sdk::write_error(error, ex.what());
  }
  return 1;
}

int model_impedance(void* state, double df, int32_t n_freq, double* out, ft_error* error) {
  try {
    const auto& model = *static_cast<const ImpedanceModel*>(state);
    for (int32_t m = 0; m < n_freq; ++m) {
      const Complex z = model_impedance_at(model, m * df);
      out[2 * m] = z.real();
      out[2 * m + 1] = z.imag();
    }
    return 0;
  } catch (const std::exception& ex) {
    ::ft::element_sdk::write_error(error, ex.what());
  }
  return 1;
}

void model_destroy(void* state) { delete static_cast<ImpedanceModel*>(state); }

}  // namespace

}  // namespace ft::impedance

namespace ft::impedance {
namespace {
// The frequency method's product Z(f_m) Lambda(f_m) is a circular convolution over the FFT window
// T = 1 / df: a wake longer than T wraps around onto the bunch. The wraps of a resonator that keeps
// multi-turn memory are removed exactly by the framework (its images W(t + kT), k >= 1, are a
// geometric sum of its modes: CollectiveSolver), so such resonators need no long window. Default
// otherwise: a window over which the slowest other resonator wake decays by e^{-kWindowDecays}
// (e^-28 ~ 1e-12), i.e. df = alpha_min / 28 = 2 pi (f_r / 2Q) / 28 ~ (f_r / 2Q) / 4.5 for Q > 1/2,
// and a window covering the longest wake table; capped at kMaxDefaultFft points (the user's
// frequency_resolution overrides).
constexpr double kWindowDecays = 28.0;
constexpr double kMaxDefaultFft = 16777216.0;  // 2^24 points: 256 MiB of complex spectrum

/// Whether the resonator's modes go into the model's multi-turn memory (those that have not decayed
/// below kNegligibleTurnDecay within one turn).
bool carries_memory(const Resonator& res, double t_rev) {
  if (!res.multi_turn() || !(t_rev > 0.0)) return false;
  const std::vector<ft_wake_mode> modes = res.wake_modes();
  if (modes.empty()) return false;
  for (const ft_wake_mode& m : modes)
    if (!(std::exp(m.s_re * t_rev) > kNegligibleTurnDecay)) return false;
  return true;
}

double default_frequency_resolution(const ImpedanceModel& model, const LongitudinalImpedance& e, double beta0,
                                    double t_rev) {
  double window = 0.0;  // [s]
  std::string longest = "none";
  for (const auto& source : model.sources) {
    if (const auto* res = dynamic_cast<const Resonator*>(source.get())) {
      if (carries_memory(*res, t_rev)) continue;  // its wraps are removed exactly
      for (const ft_wake_mode& m : res->wake_modes())
        if (m.s_re < 0.0 && kWindowDecays / -m.s_re > window) {
          window = kWindowDecays / -m.s_re;
          longest = "resonator f_r = " + number(res->frequency()) + " Hz, Q = " + number(res->q()) +
                    " (bandwidth f_r/2Q = " + number(res->frequency() / (2.0 * res->q())) + " Hz)";
        }
    } else if (const auto* table = dynamic_cast<const WakeTable*>(source.get())) {
      if (2.0 * table->duration() > window) {
        window = 2.0 * table->duration();
        longest = "wake table of " + number(table->duration()) + " s";
      }
    }
  }
  const double dt = (e.zeta_max - e.zeta_min) / e.n_slices / (beta0 * kSpeedOfLight);
  const double bunch_window = 2.0 * e.n_slices * dt;
  if (!(window > bunch_window)) return 0.0;  // the smallest zero-padded FFT already covers the wakes
  const bool capped = window / dt > kMaxDefaultFft;
  const double df = capped ? 1.0 / (kMaxDefaultFft * dt) : 1.0 / window;
  // Every backend and rank builds the model; the choice is logged once per process and setting.
  static std::mutex logged_mutex;
  static std::set<std::string> logged;
  const std::lock_guard<std::mutex> lock(logged_mutex);
  if (!logged.insert(longest + "|" + number(dt) + "|" + number(df)).second) return df;
  if (capped) {
    std::fprintf(stderr,
                 "warning: LongitudinalImpedance: the longest wake (%s) needs an FFT window of %.4g s = %.4g "
                 "points; capped at %.0f points (df = %.4g Hz): set frequency_resolution to choose\n",
                 longest.c_str(), window, window / dt, kMaxDefaultFft, df);
  } else {
    std::fprintf(stderr,
                 "LongitudinalImpedance: frequency method, default frequency_resolution %.4g Hz (FFT window %.4g "
                 "s, >= %.0f points of %.4g s) from the longest wake: %s\n",
                 df, 1.0 / df, std::ceil(1.0 / (df * dt)), dt, longest.c_str());
  }
  return df;
}
}  // namespace
}  // namespace ft::impedance

void LongitudinalImpedance_create_model(const LongitudinalImpedance& e, const char* json_definition,
                                        const char* base_directory, const ft_reference& reference,
                                        ft_collective_model& model) {
  using namespace ft::impedance;
  using json = nlohmann::json;

  if (e.n_slices < 2) fail("n_slices", "must be >= 2, got " + std::to_string(e.n_slices));
  if (!(e.zeta_min < e.zeta_max))
    fail("zeta_max", "the cuts must satisfy zeta_min < zeta_max, got zeta_min = " + number(e.zeta_min) +
                         " m, zeta_max = " + number(e.zeta_max) + " m");
  if (!(e.intensity > 0.0)) fail("intensity", "must be positive, got " + number(e.intensity) + " particles");
  if (!(e.frequency_resolution >= 0.0))
    fail("frequency_resolution", "must be >= 0 Hz (0: the smallest FFT), got " + number(e.frequency_resolution));

  const json def = json::parse(json_definition);
  const std::string method = string_option(def, "method", "time", "time", "frequency");
  const std::string deposition = string_option(def, "deposition", "linear", "linear", "nearest");
  if (!def.contains("sources")) fail("sources", "required field is missing");
  const json& sources = def.at("sources");
  if (!sources.is_array() || sources.empty())
    fail("sources", std::string("expected a non-empty list of impedance sources (") + kKnownTypes + "), got " +
                        (sources.is_array() ? "an empty list" : json_kind(sources)));

  const double beta0 = reference.beta0;
  const double t_rev = reference.circumference > 0.0 ? reference.circumference / (beta0 * kSpeedOfLight) : 0.0;
  auto impedance_model = std::make_unique<ImpedanceModel>();
  for (size_t i = 0; i < sources.size(); ++i) {
    const json& src = sources[i];
    const std::string prefix = "sources[" + std::to_string(i) + "].";
    const std::string here = "sources[" + std::to_string(i) + "]";
    if (!src.is_object()) fail(here, std::string("expected an object with a \"type\", got ") + json_kind(src));
    if (!src.contains("type"))
      fail(prefix + "type", std::string("required key is missing; known types: ") + kKnownTypes);
    if (!src.at("type").is_string())
      fail(prefix + "type", std::string("expected a string (") + kKnownTypes + "), got " + json_kind(src.at("type")));
    const std::string type = src.at("type").get<std::string>();
    if (type == "Resonator") {
      const SourceReader r(src, prefix, {"type", "r_shunt", "frequency", "q", "multi_turn"});
      const double r_shunt = r.positive("r_shunt", "Ohm");
      const double frequency = r.positive("frequency", "Hz");
      const double q = r.positive("q", "1");
      auto res = std::make_unique<Resonator>(r_shunt, frequency, q, r.flag("multi_turn", true));
      if (res->multi_turn()) {
        if (!(t_rev > 0.0))
          fail(r.field_path("multi_turn"),
               "multi-turn wake memory needs a lattice with a positive circumference, got " +
                   number(reference.circumference) + " m; set multi_turn to false");
        const std::vector<ft_wake_mode> modes = res->wake_modes();
        // Critical damping (Q = 1/2 exactly) has a t e^{-alpha t} wake, not a sum of modes.
        const double alpha = kPi * frequency / q;
        if (modes.empty() && std::exp(-alpha * t_rev) > kNegligibleTurnDecay)
          fail(r.field_path("q"),
               "q = 0.5 (critical damping) cannot carry multi-turn memory; use another q or "
               "set multi_turn to false");
        for (const ft_wake_mode& m : modes)
          if (std::exp(m.s_re * t_rev) > kNegligibleTurnDecay) impedance_model->modes.push_back(m);
      }
      impedance_model->sources.push_back(std::move(res));
    } else if (type == "InductiveImpedance") {
      const SourceReader r(src, prefix, {"type", "z_over_n"});
      const double z_over_n = r.number_value("z_over_n", "Ohm");
      if (!(t_rev > 0.0))
        fail(r.field_path("z_over_n"),
             "Z/n needs the revolution frequency: the lattice's circumference must be "
             "positive, got " +
                 number(reference.circumference) + " m");
      const double omega_rev = 2.0 * kPi / t_rev;
      impedance_model->sources.push_back(std::make_unique<InductiveImpedance>(z_over_n / omega_rev));
    } else if (type == "ImpedanceTable") {
      const SourceReader r(src, prefix, {"type", "file"});
      const auto cols = read_table(resolve_table_path(r.text("file"), base_directory), 3, r.field_path("file"),
                                   "frequency [Hz], Re Z [Ohm], Im Z [Ohm]");
      impedance_model->sources.push_back(
          std::make_unique<ImpedanceTable>(PiecewiseLinear{cols[0], cols[1]}, PiecewiseLinear{cols[0], cols[2]}));
    } else if (type == "WakeTable") {
      const SourceReader r(src, prefix, {"type", "file"});
      const auto cols =
          read_table(resolve_table_path(r.text("file"), base_directory), 2, r.field_path("file"), "time [s], W [V/C]");
      impedance_model->sources.push_back(std::make_unique<WakeTable>(PiecewiseLinear{cols[0], cols[1]}));
    } else {
      fail(prefix + "type", "unknown impedance source type '" + type + "'; known types: " + kKnownTypes);
    }
  }

  if (def.contains("profile_filter")) {
    const json& filter = def.at("profile_filter");
    if (!filter.is_object())
      fail("profile_filter",
           std::string("expected {\"type\": \"gaussian\", \"cutoff_frequency\": Hz}, got ") + json_kind(filter));
    const SourceReader r(filter, "profile_filter.", {"type", "cutoff_frequency"});
    if (r.text("type") != "gaussian")
      fail(r.field_path("type"), "unknown filter type '" + r.text("type") + "'; known: gaussian");
    const double cutoff = r.positive("cutoff_frequency", "Hz");
    impedance_model->filter_sigma_t = std::sqrt(std::log(2.0)) / (2.0 * kPi * cutoff);  // H(cutoff) = 1/sqrt(2)
  }

  model = ft_collective_model{};
  model.grid.n_slices = e.n_slices;
  model.grid.linear = deposition == "linear" ? 1 : 0;
  model.grid.zeta_min = e.zeta_min;
  model.grid.zeta_max = e.zeta_max;
  model.method = method == "time" ? FT_SOLVE_TIME_DOMAIN : FT_SOLVE_FREQUENCY_DOMAIN;
  model.frequency_resolution = e.frequency_resolution;
  if (model.method == FT_SOLVE_FREQUENCY_DOMAIN && e.frequency_resolution == 0.0)
    model.frequency_resolution = default_frequency_resolution(*impedance_model, e, beta0, t_rev);
  model.field_scale = -reference.q0 * kElementaryCharge * e.intensity;  // [C]: field = induced voltage [V]
  model.mode_count = static_cast<int32_t>(impedance_model->modes.size());
  model.modes = impedance_model->modes.empty() ? nullptr : impedance_model->modes.data();
  model.wake = &model_wake;
  model.impedance = &model_impedance;
  model.destroy = &model_destroy;
  model.state = impedance_model.release();
}
