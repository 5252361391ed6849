// Wake sources, tables, sampled kernels, slice convolution and the multi-turn, multi-bunch memory
// (fusetrack/transverse_wakes.h, where the conventions and sources are stated).
#include "fusetrack/transverse_wakes.h"

#include <fftw3.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <new>
#include <sstream>

#include "../core/fftw_planner.hpp"
#include "fusetrack/error.h"
#include "core/math_helpers.hpp"

namespace ft::wakes {

namespace {

constexpr double kC = 299792458.0;                // [m/s]
constexpr double kMu0 = 1.25663706212e-6;         // [H/m]
constexpr double kZ0 = kMu0 * kC;                 // [Ohm]

// Gauss-Legendre, 10 points on [-1, 1] (positive half).
constexpr double kGLx[5] = {0.1488743389816312, 0.4333953941292472, 0.6794095682990244, 0.8650633666889845,
                            0.9739065285171717};
constexpr double kGLw[5] = {0.2955242247147529, 0.2692667193099963, 0.2190863625159820, 0.1494513471688061,
                            0.0666713443086881};

// integral_{-1}^{1} (1 - |u|) f(v + u) du for f smooth on [v - 1, v + 1]: 10 points on each half.
template <class F>
double hat_average(F f, double v) {
  double sum = 0.0;
  for (int side = 0; side < 2; ++side)  // u in [-1, 0], then [0, 1]
    for (int i = 0; i < 5; ++i)
      for (int s = -1; s <= 1; s += 2) {
        const double u01 = 0.5 * (1.0 + s * kGLx[i]);  // node in [0, 1]
        const double u = side == 0 ? u01 - 1.0 : u01;
        sum += 0.5 * kGLw[i] * (1.0 - std::fabs(u)) * f(v + u);
      }
  return sum;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.12g", v);
  return buf;
}

}  // namespace

const char* component_name(Component c) {
  switch (c) {
    case Component::longitudinal: return "longitudinal";
    case Component::dipolar_x: return "dipolar_x";
    case Component::dipolar_y: return "dipolar_y";
    case Component::quadrupolar_x: return "quadrupolar_x";
    case Component::quadrupolar_y: return "quadrupolar_y";
  }
  return "?";
}

ComponentFactors ComponentFactors::round_chamber(bool longitudinal) {
  ComponentFactors f;
  f.value = {longitudinal ? 1.0 : 0.0, 1.0, 1.0, 0.0, 0.0};
  return f;
}

ComponentFactors ComponentFactors::flat_chamber(bool longitudinal) {
  ComponentFactors f;
  const double k = kPi * kPi / 24.0;
  f.value = {longitudinal ? 1.0 : 0.0, k, 2.0 * k, -k, k};
  return f;
}

void SliceKicks::resize(int n) {
  for (auto* v : {&longitudinal, &dipolar_x, &dipolar_y, &quadrupolar_x, &quadrupolar_y}) v->assign(n, 0.0);
}

// ---- Resonator ---------------------------------------------------------------------------------

Resonator::Resonator(double r, double f_r, double q, ComponentFactors factors)
    : m_r(r), m_f_r(f_r), m_q(q), m_factors(factors) {
  if (!(f_r > 0.0) || !(q > 0.0) || !std::isfinite(r))
    throw Error("Resonator: needs f_r > 0 [Hz] and Q > 0 and a finite r (got f_r = " + number(f_r) +
                ", Q = " + number(q) + ", r = " + number(r) + ")");
  const double omega_r = 2.0 * kPi * f_r;
  m_alpha = omega_r / (2.0 * q);
  m_omega2 = omega_r * omega_r - m_alpha * m_alpha;
}

double Resonator::wake(Component c, double t) const {
  const double factor = m_factors[c];
  if (t < 0.0 || factor == 0.0) return 0.0;
  // e^{-alpha t} cos(wb t) and e^{-alpha t} sin(wb t) / wb (cosh, sinh(kappa t) / kappa when overdamped,
  // 1 and t at Q = 1/2).
  const double a = m_alpha, omega_r = 2.0 * kPi * m_f_r;
  double cw, s;
  if (m_omega2 > 0.0) {
    const double w = std::sqrt(m_omega2), decay = std::exp(-a * t);
    cw = decay * std::cos(w * t);
    s = decay * std::sin(w * t) / w;
  } else if (m_omega2 < 0.0) {
    const double kappa = std::sqrt(-m_omega2), x = kappa * t;
    if (x < 1e-3) {
      const double decay = std::exp(-a * t);
      cw = decay * (1.0 + x * x / 2.0 + x * x * x * x / 24.0);
      s = decay * t * (1.0 + x * x / 6.0 + x * x * x * x / 120.0);
    } else {
      const double slow = std::exp((kappa - a) * t), fast = std::exp(-(kappa + a) * t);
      cw = 0.5 * (slow + fast);
      s = 0.5 * (slow - fast) / kappa;
    }
  } else {
    cw = std::exp(-a * t);
    s = cw * t;
  }
  if (c == Component::longitudinal) {
    // the same formula as the LongitudinalImpedance's Resonator (impedance_model.hpp)
    if (t == 0.0) return factor * a * m_r;  // half of the jump 0 -> 2 alpha R
    return factor * 2.0 * a * m_r * (cw - a * s);
  }
  return factor * omega_r * omega_r * m_r / m_q * s;
}

std::vector<std::pair<Complex, Complex>> Resonator::modes(Component c) const {
  const double factor = m_factors[c];
  if (factor == 0.0 || m_omega2 == 0.0) return {};
  const double a = m_alpha, r = factor * m_r, omega_r = 2.0 * kPi * m_f_r;
  const double amp = omega_r * omega_r * r / m_q;  // transverse: amp e^{-alpha t} sin(wb t) / wb
  if (m_omega2 > 0.0) {
    const double w = std::sqrt(m_omega2);
    const Complex s(-a, w);
    if (c == Component::longitudinal) return {{Complex(2.0 * a * r, 2.0 * a * r * a / w), s}};
    return {{Complex(0.0, -amp / w), s}};  // Re(-i (amp / w) e^{(-a + i w) t}) = (amp / w) e^{-a t} sin(w t)
  }
  const double kappa = std::sqrt(-m_omega2);
  if (c == Component::longitudinal)
    return {{Complex(a * r * (1.0 - a / kappa), 0.0), Complex(kappa - a, 0.0)},
            {Complex(a * r * (1.0 + a / kappa), 0.0), Complex(-kappa - a, 0.0)}};
  // sinh(kappa t) / kappa = (e^{kappa t} - e^{-kappa t}) / (2 kappa)
  return {{Complex(amp / (2.0 * kappa), 0.0), Complex(kappa - a, 0.0)},
          {Complex(-amp / (2.0 * kappa), 0.0), Complex(-kappa - a, 0.0)}};
}

Complex Resonator::impedance(Component c, double f) const {
  const double factor = m_factors[c];
  if (factor == 0.0) return Complex(0.0, 0.0);
  if (c == Component::longitudinal) {
    // R / (1 + i Q (f/f_r - f_r/f)) = R f / (f + i Q (f^2 / f_r - f_r)): 0 at f = 0
    return factor * m_r * f / Complex(f, m_q * (f * f / m_f_r - m_f_r));
  }
  // (f_r / f) R / (1 + i Q (f/f_r - f_r/f)) = R f_r / (f + i Q (f^2 / f_r - f_r)): finite at f = 0 (i R / Q).
  return factor * m_r * m_f_r / Complex(f, m_q * (f * f / m_f_r - m_f_r));
}

// ---- ResistiveWall -----------------------------------------------------------------------------

ResistiveWall::ResistiveWall(double radius, double length, double conductivity, ComponentFactors factors)
    : m_b(radius), m_length(length), m_sigma(conductivity), m_factors(factors) {
  if (!(radius > 0.0) || !std::isfinite(radius))
    throw Error("ResistiveWall: the pipe radius must be > 0 [m] (got " + number(radius) + ")");
  if (!(conductivity > 0.0) || !std::isfinite(conductivity))
    throw Error("ResistiveWall: the conductivity must be > 0 [S/m] (got " + number(conductivity) + ")");
  if (!(length >= 0.0) || !std::isfinite(length))
    throw Error("ResistiveWall: the length must be >= 0 [m] (got " + number(length) + ")");
  m_a_perp = length / (kPi * radius * radius * radius) * std::sqrt(kC * kZ0 / (kPi * conductivity));
  m_a_long = length / (4.0 * kPi * radius) * std::sqrt(kZ0 / (kPi * conductivity * kC));
}

double ResistiveWall::wake(Component c, double t) const {
  const double factor = m_factors[c];
  if (factor == 0.0 || t < 0.0) return 0.0;
  if (t == 0.0) return std::numeric_limits<double>::infinity();  // singular: use kernel() for sampling
  if (c == Component::longitudinal) return -factor * m_a_long / (t * std::sqrt(t));
  return factor * m_a_perp / std::sqrt(t);
}

Complex ResistiveWall::impedance(Component c, double f) const {
  const double factor = m_factors[c];
  if (factor == 0.0 || f == 0.0) return Complex(0.0, 0.0);
  const double omega = 2.0 * kPi * f;
  const double delta = std::sqrt(2.0 / (kMu0 * m_sigma * std::fabs(omega)));  // skin depth [m]
  const Complex one_i(1.0, f > 0.0 ? 1.0 : -1.0);
  const Complex z_long = one_i * m_length / (2.0 * kPi * m_b * m_sigma * delta);
  if (c == Component::longitudinal) return factor * z_long;
  return factor * 2.0 * kC / (m_b * m_b * omega) * z_long;
}

double ResistiveWall::kernel(Component c, double t, double dt) const {
  const double factor = m_factors[c];
  if (factor == 0.0) return 0.0;
  const double v = t / dt;
  if (v <= -1.0) return 0.0;
  if (c == Component::longitudinal) {
    // W = -A t^{-3/2} = the second derivative of G(t) = -4 A sqrt(t) (t > 0), whose hat average is the
    // second difference (G(t + dt) - 2 G(t) + G(t - dt)) / dt^2, G = 0 for t <= 0.
    const double scale = m_a_long / (dt * std::sqrt(dt));
    if (v > 20.0) return -factor * scale * hat_average([](double w) { return 1.0 / (w * std::sqrt(w)); }, v);
    auto g = [](double w) { return w > 0.0 ? 4.0 * std::sqrt(w) : 0.0; };
    return -factor * scale * -(g(v + 1.0) - 2.0 * g(v) + g(v - 1.0));
  }
  // W = a / sqrt(t): second difference of F(w) = (4/3) w^{3/2}.
  const double scale = m_a_perp / std::sqrt(dt);
  if (v > 20.0) return factor * scale * hat_average([](double w) { return 1.0 / std::sqrt(w); }, v);
  auto g = [](double w) { return w > 0.0 ? 4.0 / 3.0 * w * std::sqrt(w) : 0.0; };
  return factor * scale * (g(v + 1.0) - 2.0 * g(v) + g(v - 1.0));
}

// ---- Tables ------------------------------------------------------------------------------------

WakeTable::WakeTable(std::vector<double> time, std::array<std::vector<double>, kComponents> columns,
                     std::string origin)
    : m_time(std::move(time)), m_columns(std::move(columns)), m_origin(std::move(origin)) {
  const std::string where = m_origin.empty() ? std::string("WakeTable") : m_origin;
  if (m_time.size() < 2) throw Error(where + ": a wake table needs at least 2 rows");
  for (size_t i = 0; i < m_time.size(); ++i) {
    if (!std::isfinite(m_time[i]) || m_time[i] < 0.0)
      throw Error(where + ": time " + number(m_time[i]) + " s in row " + std::to_string(i + 1) + " is not >= 0");
    if (i > 0 && !(m_time[i] > m_time[i - 1]))
      throw Error(where + ": the time column must increase: row " + std::to_string(i + 1) + " has " +
                  number(m_time[i]) + " s after " + number(m_time[i - 1]) + " s");
  }
  for (int c = 0; c < kComponents; ++c)
    if (!m_columns[c].empty() && m_columns[c].size() != m_time.size())
      throw Error(where + ": column " + component_name(Component(c)) + " has " + std::to_string(m_columns[c].size()) +
                  " values for " + std::to_string(m_time.size()) + " times");
}

double WakeTable::wake(Component c, double t) const {
  const std::vector<double>& w = m_columns[static_cast<int>(c)];
  if (w.empty() || t < m_time.front() || t > m_time.back()) return 0.0;
  if (t == m_time.front()) return 0.5 * w.front();
  const size_t hi = static_cast<size_t>(std::upper_bound(m_time.begin(), m_time.end(), t) - m_time.begin());
  if (hi >= m_time.size()) return w.back();
  const size_t lo = hi - 1;
  const double u = (t - m_time[lo]) / (m_time[hi] - m_time[lo]);
  return w[lo] + u * (w[hi] - w[lo]);
}

Complex WakeTable::impedance(Component c, double f) const {
  const std::vector<double>& w = m_columns[static_cast<int>(c)];
  if (w.empty()) return Complex(0.0, 0.0);
  // integral W(t) e^{-i u t} dt over each segment, exact for W linear in t (u = 2 pi f).
  const double u = 2.0 * kPi * f;
  Complex z(0.0, 0.0);
  for (size_t i = 0; i + 1 < m_time.size(); ++i) {
    const double t0 = m_time[i], h = m_time[i + 1] - t0, w0 = w[i], w1 = w[i + 1];
    const double x = u * h;
    Complex seg;
    if (std::fabs(x) < 1e-3) {  // series: integral_0^1 (w0 + (w1 - w0) s) e^{-i x s} ds
      const Complex ix(0.0, -x);
      seg = h * (w0 * (1.0 + ix / 2.0 + ix * ix / 6.0 + ix * ix * ix / 24.0) +
                 (w1 - w0) * (0.5 + ix / 3.0 + ix * ix / 8.0 + ix * ix * ix / 30.0));
    } else {
      // integral_0^1 e^{-i x s} ds = (1 - e^{-ix}) / (i x); integral_0^1 s e^{-i x s} ds = (e^{-ix} (1 + i x) - 1) / x^2
      const Complex e = std::exp(Complex(0.0, -x));
      const Complex i0 = (1.0 - e) / Complex(0.0, x);
      const Complex i1 = (e * Complex(1.0, x) - 1.0) / (x * x);
      seg = h * (w0 * i0 + (w1 - w0) * i1);
    }
    z += seg * std::exp(Complex(0.0, -u * t0));
  }
  return is_transverse(c) ? Complex(0.0, 1.0) * z : z;
}

namespace {

struct ColumnSpec {
  int component = -1;  // Component, -1: ignored, -2: time
  double scale = 1.0;
};

// name -> component; returns false for an unknown name.
bool column_for(const std::string& name, bool headtail_units, ColumnSpec& spec) {
  const double t = headtail_units ? 1e15 : 1.0, l = headtail_units ? 1e12 : 1.0;
  if (name == "time") spec = {-2, headtail_units ? 1e-9 : 1.0};
  else if (name == "longitudinal") spec = {int(Component::longitudinal), l};
  else if (name == "dipolar_x" || name == "dipole_x") spec = {int(Component::dipolar_x), t};
  else if (name == "dipolar_y" || name == "dipole_y") spec = {int(Component::dipolar_y), t};
  else if (name == "quadrupolar_x" || name == "quadrupole_x") spec = {int(Component::quadrupolar_x), t};
  else if (name == "quadrupolar_y" || name == "quadrupole_y") spec = {int(Component::quadrupolar_y), t};
  else if (name == "constant_x" || name == "constant_y" || name == "dipolar_xy" || name == "dipolar_yx" ||
           name == "dipole_xy" || name == "dipole_yx" || name == "quadrupolar_xy" || name == "quadrupolar_yx" ||
           name == "quadrupole_xy" || name == "quadrupole_yx")
    spec = {-1, 1.0};
  else
    return false;
  return true;
}

const char* kValidNames =
    "time, longitudinal, dipolar_x (dipole_x), dipolar_y, quadrupolar_x (quadrupole_x), quadrupolar_y; read and "
    "ignored: constant_x, constant_y, dipolar_xy, dipolar_yx, quadrupolar_xy, quadrupolar_yx";

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_field = false, had_comma = false;
  for (char ch : line) {
    if (ch == ',') {
      out.push_back(cur);
      cur.clear();
      in_field = false;
      had_comma = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\r') {
      if (in_field && !had_comma) {
        out.push_back(cur);
        cur.clear();
        in_field = false;
      }
    } else {
      cur.push_back(ch);
      in_field = true;
    }
  }
  if (in_field || had_comma) out.push_back(cur);
  return out;
}

std::string strip_comment(const std::string& line) {
  const size_t hash = line.find('#');
  return hash == std::string::npos ? line : line.substr(0, hash);
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r,") == std::string::npos; }

WakeTable read_table(const std::string& path, std::vector<std::string> names, bool headtail_units, bool header) {
  std::ifstream in(path);
  InputLocation loc(path);
  if (!in) throw InputError(loc, "cannot open the wake table");
  std::string line;
  int line_no = 0;
  bool skip_first = false;
  if (header) {
    while (std::getline(in, line)) {
      ++line_no;
      if (!blank(strip_comment(line))) break;
    }
    if (blank(strip_comment(line))) throw InputError(loc, "no header line (the column names) in the wake table");
    for (std::string& n : names = split_fields(strip_comment(line))) {
      n.erase(std::remove(n.begin(), n.end(), '"'), n.end());
    }
    if (!names.empty() && names.front().empty()) skip_first = true;  // the pandas index
  }
  std::vector<ColumnSpec> specs(names.size());
  int time_col = -1;
  for (size_t i = 0; i < names.size(); ++i) {
    if (skip_first && i == 0) continue;
    if (!column_for(names[i], headtail_units, specs[i]))
      throw InputError(loc, "unknown column name '" + names[i] + "' (column " + std::to_string(i + 1) +
                                "); valid names: " + kValidNames);
    if (specs[i].component == -2) {
      if (time_col >= 0) throw InputError(loc, "two 'time' columns (" + std::to_string(time_col + 1) + " and " +
                                                   std::to_string(i + 1) + ")");
      time_col = int(i);
    }
    for (size_t k = 0; k < i; ++k)
      if (specs[i].component >= 0 && specs[k].component == specs[i].component && !(skip_first && k == 0))
        throw InputError(loc, "columns " + std::to_string(k + 1) + " ('" + names[k] + "') and " +
                                  std::to_string(i + 1) + " ('" + names[i] + "') are the same component");
  }
  if (time_col < 0) throw InputError(loc, std::string("no 'time' column; valid names: ") + kValidNames);
  std::vector<double> time;
  std::array<std::vector<double>, kComponents> cols;
  std::vector<std::string> ignored;
  for (size_t i = 0; i < names.size(); ++i)
    if (specs[i].component == -1 && !(skip_first && i == 0)) ignored.push_back(names[i]);
  const size_t ncol = names.size();
  while (std::getline(in, line)) {
    ++line_no;
    const std::string body = strip_comment(line);
    if (blank(body)) continue;
    const std::vector<std::string> fields = split_fields(body);
    if (fields.size() != ncol)
      throw InputError(loc, "line " + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                                " values, expected " + std::to_string(ncol) + " (columns: " + [&] {
                                  std::string s;
                                  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
                                  return s;
                                }() + ")");
    for (size_t i = 0; i < ncol; ++i) {
      if (skip_first && i == 0) continue;
      const char* s = fields[i].c_str();
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(s, &end);
      if (fields[i].empty() || end == s || *end != '\0' || !std::isfinite(v))
        throw InputError(loc, "line " + std::to_string(line_no) + ", column " + std::to_string(i + 1) + " ('" +
                                  names[i] + "'): '" + fields[i] + "' is not a finite number");
      const ColumnSpec& sp = specs[i];
      if (sp.component == -2) {
        const double t = v * sp.scale;
        if (t < 0.0)
          throw InputError(loc, "line " + std::to_string(line_no) + ", column " + std::to_string(i + 1) +
                                    " ('time'): " + fields[i] + " is negative (the delay behind the source is >= 0)");
        if (!time.empty() && !(t > time.back()))
          throw InputError(loc, "line " + std::to_string(line_no) + ", column " + std::to_string(i + 1) +
                                    " ('time'): " + fields[i] +
                                    " does not increase (the time column must be strictly increasing)");
        time.push_back(t);
      } else if (sp.component >= 0) {
        cols[sp.component].push_back(v * sp.scale);
      }
    }
  }
  if (time.size() < 2)
    throw InputError(loc, "the wake table has " + std::to_string(time.size()) + " rows, at least 2 are needed");
  WakeTable table(std::move(time), std::move(cols), path);
  table.ignored_columns = ignored;
  return table;
}

}  // namespace

WakeTable read_pyheadtail_table(const std::string& path, const std::vector<std::string>& columns) {
  if (columns.empty()) throw InputError(InputLocation(path), "no column names given for the PyHEADTAIL wake table");
  return read_table(path, columns, true, false);
}

WakeTable read_xsuite_table(const std::string& path) { return read_table(path, {}, false, true); }

// ---- Sum -----------------------------------------------------------------------------------------

double WakeSum::wake(Component c, double t) const {
  double sum = 0.0;
  for (const auto& s : m_sources) sum += s->wake(c, t);
  return sum;
}

Complex WakeSum::impedance(Component c, double f) const {
  Complex sum(0.0, 0.0);
  for (const auto& s : m_sources) sum += s->impedance(c, f);
  return sum;
}

double WakeSum::kernel(Component c, double t, double dt) const {
  double sum = 0.0;
  for (const auto& s : m_sources) sum += s->kernel(c, t, dt);
  return sum;
}

bool WakeSum::has(Component c) const {
  for (const auto& s : m_sources)
    if (s->has(c)) return true;
  return false;
}

// ---- Sampling and convolution --------------------------------------------------------------------

SampledWake sample_wake(const WakeSource& source, double dt, int n) {
  if (!(dt > 0.0) || n < 1) throw Error("sample_wake: needs dt > 0 and n >= 1");
  SampledWake out;
  out.dt = dt;
  for (int c = 0; c < kComponents; ++c) {
    if (!source.has(Component(c))) continue;
    out.k[c].resize(n);
    for (int k = 0; k < n; ++k) out.k[c][k] = source.kernel(Component(c), k * dt, dt);
  }
  return out;
}

namespace {
// kicks[i] += sign * sum_j kernel[i - j + n - 1] * w_j (j increasing); kernel of 2n-1 entries.
// Blocks of witness slices are summed together, j outermost, so that the loop over the block vectorizes:
// every slice's sum still starts at 0 and adds the same products in increasing j, the same bits as one
// slice at a time. The blocks are shared among OpenMP threads for large grids (the multi-turn memory of
// hundreds of slices and turns costs n^2 operations per stored turn on the host): again the same bits.
void convolve_into(const std::vector<double>& kernel, int n, const std::vector<double>& w, double sign,
                   std::vector<double>& out) {
  constexpr int kBlock = 64;
  const int n_out = static_cast<int>(out.size());
  const int blocks = (n_out + kBlock - 1) / kBlock;
  // The kernel's non-zero samples [lo, hi] (a causal wake is zero at negative delays: about half of them).
  // Sources whose samples for the whole block lie outside add exact zeros (+-0 to a sum that starts at +0)
  // and are skipped: the same sums, bit for bit, for finite moments.
  int lo = 0, hi = static_cast<int>(kernel.size()) - 1;
  while (lo <= hi && kernel[static_cast<size_t>(lo)] == 0.0) ++lo;
  while (hi >= lo && kernel[static_cast<size_t>(hi)] == 0.0) --hi;
  if (lo > hi) return;  // a zero kernel adds nothing
  auto block = [&](int b) {
    const int first = b * kBlock, m = std::min(kBlock, n_out - first);
    double sum[kBlock] = {};
    // Sample index of witness first + q and source j: first + q - j + n - 1.
    const int j_begin = std::max(0, first + n - 1 - hi), j_end = std::min(n, first + m - 1 + n - 1 - lo + 1);
    for (int j = j_begin; j < j_end; ++j) {
      const double wj = w[j];
      const double* k = kernel.data() + (first - j + n - 1);
#pragma omp simd
      for (int q = 0; q < m; ++q) sum[q] += k[q] * wj;
    }
    for (int q = 0; q < m; ++q) out[first + q] += sign * sum[q];
  };
  if (static_cast<long long>(n_out) * n < (1LL << 16)) {  // small: no OpenMP region at all (its cost dominates)
    for (int b = 0; b < blocks; ++b) block(b);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) block(b);
}

void add_with_kernel(const std::array<std::vector<double>, kComponents>& kernel, int n, const SliceMoments& src,
                     SliceKicks& kicks) {
  const int ns = static_cast<int>(src.charge.size());
  if (ns != n) throw Error("wake convolution: the source bunch has " + std::to_string(ns) + " slices, expected " +
                           std::to_string(n));
  std::vector<double> qx(n), qy(n);
  for (int j = 0; j < n; ++j) {
    qx[j] = src.charge[j] * (src.x.empty() ? 0.0 : src.x[j]);
    qy[j] = src.charge[j] * (src.y.empty() ? 0.0 : src.y[j]);
  }
  auto use = [&](Component c, const std::vector<double>& w, double sign, std::vector<double>& out) {
    const auto& k = kernel[static_cast<int>(c)];
    if (!k.empty()) convolve_into(k, n, w, sign, out);
  };
  use(Component::longitudinal, src.charge, -1.0, kicks.longitudinal);
  use(Component::dipolar_x, qx, 1.0, kicks.dipolar_x);
  use(Component::dipolar_y, qy, 1.0, kicks.dipolar_y);
  use(Component::quadrupolar_x, src.charge, 1.0, kicks.quadrupolar_x);
  use(Component::quadrupolar_y, src.charge, 1.0, kicks.quadrupolar_y);
}

std::array<std::vector<double>, kComponents> make_kernel(const WakeSource& wake, double offset, double dt, int n) {
  std::array<std::vector<double>, kComponents> kernel;
  for (int c = 0; c < kComponents; ++c) {
    if (!wake.has(Component(c))) continue;
    kernel[c].resize(2 * n - 1);
    for (int m = -(n - 1); m <= n - 1; ++m) {
      double t = offset + m * dt;
      if (std::fabs(t) < 1e-9 * dt) t = 0.0;  // coincident slices (offsets rounded): the half value
      // causal: nothing before the source (the hat average of singular wakes reaches one slice back)
      kernel[c][m + n - 1] = wake.kernel(Component(c), t, dt);
    }
  }
  return kernel;
}
}  // namespace

void add_slice_kicks(const WakeSource& wake, double dt, const SliceMoments& source, double witness_time_offset,
                     SliceKicks& kicks) {
  const int n = static_cast<int>(source.charge.size());
  if (static_cast<int>(kicks.dipolar_x.size()) != n) kicks.resize(n);
  add_with_kernel(make_kernel(wake, witness_time_offset - source.time_offset, dt, n), n, source, kicks);
}

SliceKicks convolve(const SampledWake& wake, const SliceMoments& bunch) {
  const int n = static_cast<int>(bunch.charge.size());
  std::array<std::vector<double>, kComponents> kernel;
  for (int c = 0; c < kComponents; ++c) {
    if (wake.k[c].empty()) continue;
    if (static_cast<int>(wake.k[c].size()) < n)
      throw Error("convolve: the sampled wake has " + std::to_string(wake.k[c].size()) + " samples for " +
                  std::to_string(n) + " slices");
    kernel[c].assign(2 * n - 1, 0.0);
    for (int m = 0; m < n; ++m) kernel[c][m + n - 1] = wake.k[c][m];
  }
  SliceKicks kicks;
  kicks.resize(n);
  add_with_kernel(kernel, n, bunch, kicks);
  return kicks;
}

// ---- Memory --------------------------------------------------------------------------------------

namespace {
/// The smallest 2^a 3^b 5^c 7^d >= n (sizes FFTW transforms fastest).
int smooth_fft_size(int n) {
  for (int m = std::max(n, 1);; ++m) {
    int r = m;
    for (int p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}
}  // namespace

FftConvolver::FftConvolver(int n) : m_n(n), m_size(smooth_fft_size(2 * n - 1)) {
  if (n < 1) throw Error("FftConvolver: needs at least one point");
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  double* real = fftw_alloc_real(static_cast<size_t>(m_size));
  fftw_complex* spectrum = fftw_alloc_complex(static_cast<size_t>(bins()));
  // Out of place; executed later on other fftw_alloc'ed arrays (new-array execution: the same alignment).
  fftw_plan forward = fftw_plan_dft_r2c_1d(m_size, real, spectrum, FFTW_ESTIMATE);
  fftw_plan backward = fftw_plan_dft_c2r_1d(m_size, spectrum, real, FFTW_ESTIMATE);
  fftw_free(real);
  fftw_free(spectrum);
  if (!forward || !backward) {
    if (forward) fftw_destroy_plan(forward);
    if (backward) fftw_destroy_plan(backward);
    throw Error("FftConvolver: FFTW could not plan a transform of " + std::to_string(m_size));
  }
  m_forward = forward;
  m_backward = backward;
}

FftConvolver::~FftConvolver() {
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  fftw_destroy_plan(static_cast<fftw_plan>(m_forward));
  fftw_destroy_plan(static_cast<fftw_plan>(m_backward));
}

namespace {
/// Arrays of FFTW's alignment (fftw_alloc) for new-array execution of the plans.
struct FftwArray {
  void* data;
  explicit FftwArray(size_t bytes) : data(fftw_malloc(bytes)) {
    if (!data) throw std::bad_alloc();
  }
  ~FftwArray() { fftw_free(data); }
  FftwArray(const FftwArray&) = delete;
  FftwArray& operator=(const FftwArray&) = delete;
};
}  // namespace

FftConvolver::Spectrum FftConvolver::transform(const double* values, int count) const {
  FftwArray in(sizeof(double) * static_cast<size_t>(m_size)), out(sizeof(fftw_complex) * static_cast<size_t>(bins()));
  double* real = static_cast<double*>(in.data);
  const int used = std::min(count, m_size);
  std::copy(values, values + used, real);
  std::fill(real + used, real + m_size, 0.0);
  fftw_execute_dft_r2c(static_cast<fftw_plan>(m_forward), real, static_cast<fftw_complex*>(out.data));
  const Complex* bins_out = static_cast<const Complex*>(out.data);
  return Spectrum(bins_out, bins_out + bins());
}

void FftConvolver::multiply_add(const Spectrum& a, const Spectrum& b, Spectrum& sum) {
  const size_t n = std::min({a.size(), b.size(), sum.size()});
  for (size_t i = 0; i < n; ++i)  // the complex product written out (no NaN-recovering library call)
    sum[i] += Complex(a[i].real() * b[i].real() - a[i].imag() * b[i].imag(),
                      a[i].real() * b[i].imag() + a[i].imag() * b[i].real());
}

void FftConvolver::inverse(const Spectrum& spectrum, double scale, double* out) const {
  FftwArray in(sizeof(fftw_complex) * static_cast<size_t>(bins())),
      result(sizeof(double) * static_cast<size_t>(m_size));
  Complex* bins_in = static_cast<Complex*>(in.data);
  const size_t given = std::min<size_t>(spectrum.size(), static_cast<size_t>(bins()));
  std::copy(spectrum.begin(), spectrum.begin() + static_cast<std::ptrdiff_t>(given), bins_in);
  std::fill(bins_in + given, bins_in + bins(), Complex(0.0, 0.0));  // missing bins count as zero
  const double* real = static_cast<const double*>(result.data);
  fftw_execute_dft_c2r(static_cast<fftw_plan>(m_backward), static_cast<fftw_complex*>(in.data),
                       static_cast<double*>(result.data));
  const double factor = scale / m_size;  // FFTW's transforms are unnormalized
  for (int i = 0; i < m_n; ++i) out[i] = factor * real[i + m_n - 1];
}

/// The Fft mode (Convolution::Fft): the convolver of n slices, the kernel spectra per delay offset and the
/// stored turns' bunches as spectra.
struct WakeMemory::Fft {
  using MomentSpectra = std::array<FftConvolver::Spectrum, 3>;  // Q, Q x, Q y
  FftConvolver convolver;
  std::map<double, std::array<FftConvolver::Spectrum, kComponents>> kernels;  // empty where absent
  std::vector<std::vector<MomentSpectra>> history;                            // [turn][bunch], [0]: the last turn

  std::array<bool, 3> needed{false, false, false};  // Q (longitudinal, quadrupolar), Q x, Q y: the sources' components
  // prepare(): the stored turns' sums per component for one witness bunch (-1: none prepared).
  int prepared_witness = -1;
  std::array<FftConvolver::Spectrum, kComponents> prepared;

  Fft(int n_slices, const WakeSource& source) : convolver(n_slices) {
    needed[0] = source.has(Component::longitudinal) || source.has(Component::quadrupolar_x) ||
                source.has(Component::quadrupolar_y);
    needed[1] = source.has(Component::dipolar_x);
    needed[2] = source.has(Component::dipolar_y);
  }
  /// The spectra of a bunch's moments that the sources use (the others left empty).
  MomentSpectra moments(const SliceMoments& m) const {
    const int n = convolver.n();
    MomentSpectra out;
    if (needed[0]) out[0] = convolver.transform(m.charge.data(), n);
    for (int plane = 0; plane < 2; ++plane) {
      if (!needed[static_cast<size_t>(plane + 1)]) continue;
      const std::vector<double>& offset = plane == 0 ? m.x : m.y;
      std::vector<double> moment(static_cast<size_t>(n));
      for (size_t j = 0; j < moment.size(); ++j) moment[j] = m.charge[j] * (offset.empty() ? 0.0 : offset[j]);
      out[static_cast<size_t>(plane + 1)] = convolver.transform(moment.data(), n);
    }
    return out;
  }
};

WakeMemory::~WakeMemory() = default;

WakeMemory::WakeMemory(std::shared_ptr<const WakeSource> source, double dt, int n_slices, double revolution_time,
                       int memory_turns, std::vector<double> bunch_offsets, Convolution convolution)
    : m_source(std::move(source)),
      m_dt(dt),
      m_t0(revolution_time),
      m_n(n_slices),
      m_memory(memory_turns),
      m_offsets(std::move(bunch_offsets)) {
  if (!m_source) throw Error("WakeMemory: no wake source");
  if (!(dt > 0.0) || n_slices < 1) throw Error("WakeMemory: needs dt > 0 and at least one slice");
  if (memory_turns < 0) throw Error("WakeMemory: memory_turns must be >= 0");
  if (memory_turns > 0 && !(revolution_time > 0.0)) throw Error("WakeMemory: the revolution time must be > 0 [s]");
  if (m_offsets.empty()) throw Error("WakeMemory: no bunch");
  for (size_t b = 1; b < m_offsets.size(); ++b)
    if (!(m_offsets[b] >= m_offsets[b - 1] + n_slices * dt))
      throw Error("WakeMemory: bunch " + std::to_string(b) + " at " + number(m_offsets[b]) +
                  " s overlaps the bunch ahead (offsets must increase by at least n_slices dt = " +
                  number(n_slices * dt) + " s)");
  if (convolution == Convolution::Fft) m_fft = std::make_unique<Fft>(n_slices, *m_source);
}

const WakeMemory::Kernel& WakeMemory::kernel_at(double offset) const {
  std::lock_guard<std::mutex> lock(m_cache_mutex);  // (map references stay valid when others are inserted)
  auto it = m_cache.find(offset);
  if (it == m_cache.end()) it = m_cache.emplace(offset, make_kernel(*m_source, offset, m_dt, m_n)).first;
  return it->second;
}

void WakeMemory::add(const SliceMoments& src, double offset, SliceKicks& kicks) const {
  add_with_kernel(kernel_at(offset), m_n, src, kicks);
}

SliceKicks WakeMemory::kicks(const std::vector<SliceMoments>& current, int witness) const {
  if (current.size() != m_offsets.size())
    throw Error("WakeMemory: " + std::to_string(current.size()) + " bunches given, " +
                std::to_string(m_offsets.size()) + " declared");
  if (witness < 0 || witness >= static_cast<int>(current.size())) throw Error("WakeMemory: no such witness bunch");
  if (m_fft) return fft_kicks(current, witness);
  SliceKicks kicks;
  kicks.resize(m_n);
  // Fixed order: the stored turns from the oldest, then this turn; bunches in train order.
  for (int k = static_cast<int>(m_history.size()); k >= 1; --k)
    for (size_t b = 0; b < m_history[k - 1].size(); ++b)
      add(m_history[k - 1][b], m_offsets[witness] - m_offsets[b] + k * m_t0, kicks);
  for (int b = 0; b <= witness; ++b) add(current[b], m_offsets[witness] - m_offsets[b], kicks);
  return kicks;
}

const std::array<FftConvolver::Spectrum, kComponents>& WakeMemory::fft_kernel_spectra(double offset) const {
  // Locked: witnesses may be solved on several threads (map references stay valid when others are inserted).
  std::lock_guard<std::mutex> lock(m_cache_mutex);
  const Fft& f = *m_fft;
  auto it = f.kernels.find(offset);
  if (it != f.kernels.end()) return it->second;
  const Kernel k = make_kernel(*m_source, offset, m_dt, m_n);
  std::array<FftConvolver::Spectrum, kComponents> spectra;
  for (int c = 0; c < kComponents; ++c)
    if (!k[static_cast<size_t>(c)].empty())
      spectra[static_cast<size_t>(c)] = f.convolver.transform(k[static_cast<size_t>(c)].data(), 2 * m_n - 1);
  return m_fft->kernels.emplace(offset, std::move(spectra)).first->second;
}

void WakeMemory::prepare(int witness) {
  if (!m_fft) return;
  if (witness < 0 || witness >= static_cast<int>(m_offsets.size())) throw Error("WakeMemory: no such witness bunch");
  Fft& f = *m_fft;
  if (f.prepared_witness == witness) return;  // (end_turn() discards it)
  // The stored turns' terms per component in fft_kicks' order (the oldest turn first, bunches in train order).
  std::array<std::vector<std::pair<const FftConvolver::Spectrum*, const FftConvolver::Spectrum*>>, kComponents> terms;
  const double witness_offset = m_offsets[static_cast<size_t>(witness)];
  for (int k = static_cast<int>(f.history.size()); k >= 1; --k)
    for (size_t b = 0; b < f.history[static_cast<size_t>(k - 1)].size(); ++b) {
      const auto& kernel = fft_kernel_spectra(witness_offset - m_offsets[b] + k * m_t0);
      for (int c = 0; c < kComponents; ++c)
        if (!kernel[static_cast<size_t>(c)].empty())
          terms[static_cast<size_t>(c)].emplace_back(
              &kernel[static_cast<size_t>(c)],
              &f.history[static_cast<size_t>(k - 1)][b][static_cast<size_t>(kComponentMoment[c])]);
    }
  // On the calling thread: waking the OpenMP threads beside a running GPU kernel cost more than the sum, and
  // erratically (one H200 host: 0.9-5.8 ms per turn instead of about 0.2). The bits of fft_kicks' own sum.
  const size_t bins = static_cast<size_t>(f.convolver.bins());
  for (int c = 0; c < kComponents; ++c) {
    FftConvolver::Spectrum& sum = f.prepared[static_cast<size_t>(c)];
    sum.clear();
    if (!m_source->has(Component(c))) continue;
    sum.assign(bins, Complex(0.0, 0.0));
    for (const auto& [kernel, moment] : terms[static_cast<size_t>(c)]) FftConvolver::multiply_add(*kernel, *moment, sum);
  }
  f.prepared_witness = witness;
}

SliceKicks WakeMemory::fft_kicks(const std::vector<SliceMoments>& current, int witness) const {
  using Spectrum = FftConvolver::Spectrum;
  const Fft& f = *m_fft;
  for (const SliceMoments& m : current)
    if (static_cast<int>(m.charge.size()) != m_n)
      throw Error("wake convolution: the source bunch has " + std::to_string(m.charge.size()) + " slices, expected " +
                  std::to_string(m_n));
  std::array<Spectrum, kComponents> sum;
  auto add = [&](const Fft::MomentSpectra& src, double offset) {
    const auto& kernel = fft_kernel_spectra(offset);
    for (int c = 0; c < kComponents; ++c)
      if (!kernel[static_cast<size_t>(c)].empty())
        FftConvolver::multiply_add(kernel[static_cast<size_t>(c)], src[static_cast<size_t>(kComponentMoment[c])],
                                   sum[static_cast<size_t>(c)]);
  };
  // The same order as the direct sum: the stored turns from the oldest, then this turn; bunches in train order.
  // The stored turns' part prepared ahead for this witness (prepare()), else summed here.
  const double witness_offset = m_offsets[static_cast<size_t>(witness)];
  if (f.prepared_witness == witness) {
    sum = f.prepared;
  } else {
    for (int c = 0; c < kComponents; ++c)
      if (m_source->has(Component(c)))
        sum[static_cast<size_t>(c)].assign(static_cast<size_t>(f.convolver.bins()), Complex(0.0, 0.0));
    for (int k = static_cast<int>(f.history.size()); k >= 1; --k)
      for (size_t b = 0; b < f.history[static_cast<size_t>(k - 1)].size(); ++b)
        add(f.history[static_cast<size_t>(k - 1)][b], witness_offset - m_offsets[b] + k * m_t0);
  }
  for (int b = 0; b <= witness; ++b)
    add(f.moments(current[static_cast<size_t>(b)]), witness_offset - m_offsets[static_cast<size_t>(b)]);
  SliceKicks kicks;
  kicks.resize(m_n);
  std::vector<double>* out[kComponents] = {&kicks.longitudinal, &kicks.dipolar_x, &kicks.dipolar_y,
                                           &kicks.quadrupolar_x, &kicks.quadrupolar_y};
  for (int c = 0; c < kComponents; ++c)
    if (!sum[static_cast<size_t>(c)].empty())  // V = -sum Q W_long
      f.convolver.inverse(sum[static_cast<size_t>(c)], c == 0 ? -1.0 : 1.0, out[c]->data());
  return kicks;
}

int WakeMemory::stored_turns() const { return static_cast<int>(m_fft ? m_fft->history.size() : m_history.size()); }

void WakeMemory::end_turn(std::vector<SliceMoments> current) {
  if (current.size() != m_offsets.size())
    throw Error("WakeMemory: " + std::to_string(current.size()) + " bunches stored, " +
                std::to_string(m_offsets.size()) + " declared");
  for (const SliceMoments& m : current)
    if (static_cast<int>(m.charge.size()) != m_n || (!m.x.empty() && m.x.size() != m.charge.size()) ||
        (!m.y.empty() && m.y.size() != m.charge.size()))
      throw Error("WakeMemory: a stored bunch has " + std::to_string(m.charge.size()) + " slices (x " +
                  std::to_string(m.x.size()) + ", y " + std::to_string(m.y.size()) + "), expected " +
                  std::to_string(m_n));
  if (m_fft) m_fft->prepared_witness = -1;  // the stored turns change
  if (m_memory == 0) return;
  if (m_fft) {
    std::vector<Fft::MomentSpectra> spectra;
    for (const SliceMoments& m : current) spectra.push_back(m_fft->moments(m));
    m_fft->history.insert(m_fft->history.begin(), std::move(spectra));
    if (static_cast<int>(m_fft->history.size()) > m_memory) m_fft->history.pop_back();
    return;  // the spectra are all the Fft mode reads
  }
  m_history.insert(m_history.begin(), std::move(current));
  if (static_cast<int>(m_history.size()) > m_memory) m_history.pop_back();
}

// ---- Resonator mode memory ----------------------------------------------------------------------

ResonatorModeMemory::ResonatorModeMemory(const Resonator& resonator, double dt, int n_slices,
                                         double revolution_time, std::vector<double> bunch_offsets)
    : m_dt(dt), m_t0(revolution_time), m_n(n_slices), m_offsets(std::move(bunch_offsets)) {
  if (!(dt > 0.0) || n_slices < 1) throw Error("ResonatorModeMemory: needs dt > 0 and at least one slice");
  if (!(revolution_time > 0.0)) throw Error("ResonatorModeMemory: the revolution time must be > 0 [s]");
  if (m_offsets.empty()) throw Error("ResonatorModeMemory: no bunch");
  for (size_t b = 1; b < m_offsets.size(); ++b)
    if (!(m_offsets[b] >= m_offsets[b - 1] + n_slices * dt))
      throw Error("ResonatorModeMemory: bunch " + std::to_string(b) + " overlaps the bunch ahead");
  if (!(m_offsets.back() + n_slices * dt <= m_offsets.front() + revolution_time))
    throw Error("ResonatorModeMemory: the train is longer than the revolution period");
  bool any = false;
  for (int c = 0; c < kComponents; ++c) {
    if (!resonator.has(Component(c))) continue;
    any = true;
    const auto modes = resonator.modes(Component(c));
    if (modes.empty())
      throw Error("ResonatorModeMemory: the resonator is critically damped (Q = 1/2) and has no modes; use WakeMemory");
    for (const auto& m : modes) m_modes.push_back(Mode{c, m.first, m.second});
  }
  if (!any) throw Error("ResonatorModeMemory: the resonator has no component");
  m_t_ref = m_offsets.front();
}

SliceKicks ResonatorModeMemory::track_bunch(int b, const SliceMoments& bunch) {
  if (b != m_next || b >= static_cast<int>(m_offsets.size()))
    throw Error("ResonatorModeMemory: bunch " + std::to_string(b) + " given, bunch " + std::to_string(m_next) +
                " expected (train order, then end_turn())");
  if (static_cast<int>(bunch.charge.size()) != m_n)
    throw Error("ResonatorModeMemory: the bunch has " + std::to_string(bunch.charge.size()) + " slices, expected " +
                std::to_string(m_n));
  const double head = m_offsets[b], end = head + m_n * m_dt;
  SliceKicks kicks;
  kicks.resize(m_n);
  for (Mode& mode : m_modes) {
    // advance the amplitude to this bunch's head (every factor decays: head >= t_ref)
    mode.amplitude *= std::exp(mode.s * (head - m_t_ref));
    std::vector<double>* out = nullptr;
    double sign = 1.0;
    switch (Component(mode.component)) {
      case Component::longitudinal: out = &kicks.longitudinal; sign = -1.0; break;
      case Component::dipolar_x: out = &kicks.dipolar_x; break;
      case Component::dipolar_y: out = &kicks.dipolar_y; break;
      case Component::quadrupolar_x: out = &kicks.quadrupolar_x; break;
      case Component::quadrupolar_y: out = &kicks.quadrupolar_y; break;
    }
    const Complex ca = mode.c * mode.amplitude;
    Complex added(0.0, 0.0);
    for (int i = 0; i < m_n; ++i) {
      const double t = i * m_dt;  // delay of slice i behind the head
      (*out)[i] += sign * (ca * std::exp(mode.s * t)).real();
      double w = bunch.charge[i];
      if (Component(mode.component) == Component::dipolar_x) w *= bunch.x.empty() ? 0.0 : bunch.x[i];
      if (Component(mode.component) == Component::dipolar_y) w *= bunch.y.empty() ? 0.0 : bunch.y[i];
      added += w * std::exp(mode.s * (end - head - t));  // referenced to the bunch's end
    }
    mode.amplitude = mode.amplitude * std::exp(mode.s * (end - head)) + added;
  }
  m_t_ref = end;
  ++m_next;
  return kicks;
}

void ResonatorModeMemory::end_turn() {
  if (m_next != static_cast<int>(m_offsets.size()))
    throw Error("ResonatorModeMemory: end_turn() after " + std::to_string(m_next) + " of " +
                std::to_string(m_offsets.size()) + " bunches");
  // the next turn's bunch 0 is at offsets[0] + T0 in this turn's frame: advance there, then shift the frame
  for (Mode& mode : m_modes) mode.amplitude *= std::exp(mode.s * (m_offsets.front() + m_t0 - m_t_ref));
  m_t_ref = m_offsets.front();
  m_next = 0;
}

}  // namespace ft::wakes
