// NAFF: the steps and sources are in fusetrack/naff.h.
#include "fusetrack/naff.h"

#include <fftw3.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/fftw_planner.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft {

namespace {

using Complex = std::complex<double>;

/// e^{i phase} computed afresh every this many samples in the recurrences (the product of unit
/// phasors drifts by about one rounding per step).
constexpr size_t kReseedEvery = 64;

/// C_p = 2^p (p!)^2 / (2p)!: the mean of C_p (1 + cos t)^p over a period is 1.
double hann_normalisation(int p) {
  double c = 1.0;
  for (int k = 1; k <= p; ++k) c *= 2.0 * k / static_cast<double>(p + k);  // 2 k / (p + k), k = 1..p
  return c;
}

/// Solves M a = b (dense, complex, partial pivoting); M is K x K in row order.
std::vector<Complex> solve_dense(std::vector<Complex> m, std::vector<Complex> b) {
  const size_t k = b.size();
  for (size_t col = 0; col < k; ++col) {
    size_t pivot = col;
    for (size_t row = col + 1; row < k; ++row)
      if (std::abs(m[row * k + col]) > std::abs(m[pivot * k + col])) pivot = row;
    if (!(std::abs(m[pivot * k + col]) > 0.0)) throw Error("NAFF: two frequencies coincide (singular amplitude fit)");
    if (pivot != col) {
      for (size_t j = 0; j < k; ++j) std::swap(m[col * k + j], m[pivot * k + j]);
      std::swap(b[col], b[pivot]);
    }
    for (size_t row = col + 1; row < k; ++row) {
      const Complex f = m[row * k + col] / m[col * k + col];
      for (size_t j = col; j < k; ++j) m[row * k + j] -= f * m[col * k + j];
      b[row] -= f * b[col];
    }
  }
  std::vector<Complex> a(k);
  for (size_t row = k; row-- > 0;) {
    Complex s = b[row];
    for (size_t j = row + 1; j < k; ++j) s -= m[row * k + j] * a[j];
    a[row] = s / m[row * k + row];
  }
  return a;
}

/// e^{2 pi i nu n}, n = 0 .. N-1.
std::vector<Complex> exponential(double nu, size_t n) {
  std::vector<Complex> e(n);
  const Complex step = std::polar(1.0, 2.0 * kPi * nu);
  for (size_t i = 0; i < n; ++i)
    e[i] = i % kReseedEvery == 0 ? std::polar(1.0, 2.0 * kPi * nu * static_cast<double>(i)) : e[i - 1] * step;
  return e;
}

}  // namespace

Naff::Naff(size_t samples, const NaffOptions& options) : m_n(samples), m_options(options) {
  if (samples < 16) throw Error(fmt::format("NAFF: needs at least 16 samples, got {}", samples));
  if (options.window_order < 0 || options.window_order > 16)
    throw Error(fmt::format("NAFF: the window order must be in 0 .. 16, got {}", options.window_order));
  if (options.frequencies < 1)
    throw Error(fmt::format("NAFF: needs at least one frequency, got {}", options.frequencies));
  if (options.joint_refinements < 0)
    throw Error(fmt::format("NAFF: the joint refinements must be >= 0, got {}", options.joint_refinements));
  const double centre = 0.5 * static_cast<double>(m_n - 1);
  const double cp = hann_normalisation(options.window_order);
  m_window.resize(m_n);
  for (size_t i = 0; i < m_n; ++i)
    m_window[i] =
        cp * std::pow(1.0 + std::cos(2.0 * kPi * (static_cast<double>(i) - centre) / static_cast<double>(m_n)),
                      options.window_order);
  m_fft_size = 1;
  while (m_fft_size < 4 * m_n) m_fft_size <<= 1;
  fftw_complex* buffer = fftw_alloc_complex(m_fft_size);
  if (!buffer) throw Error("NAFF: out of memory for the FFT");
  m_fft_buffer = buffer;
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  m_fft_plan = fftw_plan_dft_1d(static_cast<int>(m_fft_size), buffer, buffer, FFTW_FORWARD, FFTW_ESTIMATE);
  m_residual.resize(m_n);
  m_work.resize(m_n);
}

Naff::~Naff() {
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    if (m_fft_plan) fftw_destroy_plan(static_cast<fftw_plan>(m_fft_plan));
  }
  fftw_free(m_fft_buffer);
}

double Naff::coarse_frequency(const std::complex<double>* r) {
  auto* buffer = static_cast<fftw_complex*>(m_fft_buffer);
  for (size_t i = 0; i < m_fft_size; ++i) {
    buffer[i][0] = i < m_n ? m_window[i] * r[i].real() : 0.0;
    buffer[i][1] = i < m_n ? m_window[i] * r[i].imag() : 0.0;
  }
  fftw_execute(static_cast<fftw_plan>(m_fft_plan));  // sum_n b_n e^{-2 pi i k n / M}: bin k is frequency k / M
  size_t best = 0;
  double best_power = -1.0;
  for (size_t k = 0; k < m_fft_size; ++k) {
    const double power = buffer[k][0] * buffer[k][0] + buffer[k][1] * buffer[k][1];
    if (power > best_power) {
      best_power = power;
      best = k;
    }
  }
  return static_cast<double>(best) / static_cast<double>(m_fft_size);
}

double Naff::refine(const std::complex<double>* r, double nu0, double half_width) {
  const size_t n = m_n;
  const double centre = 0.5 * static_cast<double>(n - 1);
  std::vector<Complex>& wr = m_work;
  for (size_t i = 0; i < n; ++i) wr[i] = m_window[i] * r[i];
  // |S|^2 with S(nu) = sum_n w_n r_n e^{-2 pi i nu (n - c)} (the phase about the middle leaves |S|
  // unchanged): its first and second derivatives, from S, S' = -2 pi i S1, S'' = -4 pi^2 S2 with
  // S_k = sum_n (n - c)^k w_n r_n e^{-2 pi i nu (n - c)}.
  struct Slope {
    double first, second;
  };
  auto slope = [&](double nu) {
    Complex s0(0.0, 0.0), s1(0.0, 0.0), s2(0.0, 0.0), e(1.0, 0.0);
    const Complex step = std::polar(1.0, -2.0 * kPi * nu);
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(i) - centre;
      e = i % kReseedEvery == 0 ? std::polar(1.0, -2.0 * kPi * nu * t) : e * step;
      const Complex term = wr[i] * e;
      s0 += term;
      s1 += t * term;
      s2 += (t * t) * term;
    }
    const Complex d1 = Complex(0.0, -2.0 * kPi) * s1, d2 = -4.0 * kPi * kPi * s2;
    return Slope{2.0 * (std::conj(s0) * d1).real(), 2.0 * (std::norm(d1) + (std::conj(s0) * d2).real())};
  };
  double lo = nu0 - half_width, hi = nu0 + half_width;
  if (!(slope(lo).first > 0.0 && slope(hi).first < 0.0)) {
    // Not bracketed (a neighbouring line's leakage): widen once within the window's main lobe.
    const double lobe = 1.0 / static_cast<double>(n);
    lo = nu0 - lobe;
    hi = nu0 + lobe;
    if (!(slope(lo).first > 0.0 && slope(hi).first < 0.0)) return nu0;
  }
  double nu = nu0;
  for (int iteration = 0; iteration < 100; ++iteration) {
    const Slope g = slope(nu);
    if (g.first == 0.0) return nu;
    (g.first > 0.0 ? lo : hi) = nu;
    double next = g.second < 0.0 ? nu - g.first / g.second : 0.5 * (lo + hi);
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    const double change = std::fabs(next - nu);
    nu = next;
    if (change <= 4e-16 || hi - lo <= 4e-16) break;
  }
  return nu;
}

std::vector<std::complex<double>> Naff::fit_amplitudes(const std::complex<double>* z,
                                                       const std::vector<double>& nu) const {
  const size_t k = nu.size();
  const double inv_n = 1.0 / static_cast<double>(m_n);
  // Normal equations of the windowed fit: sum_j a_j <e_j, e_l> = <z, e_l>, <a, b> = (1/N) sum w a conj(b).
  std::vector<Complex> m(k * k), b(k);
  for (size_t l = 0; l < k; ++l) {
    const std::vector<Complex> el = exponential(nu[l], m_n);
    Complex s(0.0, 0.0);
    for (size_t i = 0; i < m_n; ++i) s += m_window[i] * z[i] * std::conj(el[i]);
    b[l] = s * inv_n;
    for (size_t j = 0; j < k; ++j) {
      const std::vector<Complex> difference = exponential(nu[j] - nu[l], m_n);
      Complex g(0.0, 0.0);
      for (size_t i = 0; i < m_n; ++i) g += m_window[i] * difference[i];
      m[l * k + j] = g * inv_n;
    }
  }
  return solve_dense(std::move(m), std::move(b));
}

std::vector<NaffLine> Naff::lines(const std::complex<double>* z) {
  const size_t n = m_n;
  const double inv_n = 1.0 / static_cast<double>(n);
  double power = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(z[i].real()) || !std::isfinite(z[i].imag()))
      throw Error(fmt::format("NAFF: sample {} of the signal is not finite", i));
    power += std::norm(z[i]);
  }
  if (!(power > 0.0)) throw Error("NAFF: the signal is zero");
  auto inner = [&](const std::vector<Complex>& a, const std::vector<Complex>& b) {
    Complex s(0.0, 0.0);
    for (size_t i = 0; i < n; ++i) s += m_window[i] * a[i] * std::conj(b[i]);
    return s * inv_n;
  };
  std::copy(z, z + n, m_residual.begin());
  std::vector<double> nu;
  std::vector<std::vector<Complex>> basis;  // orthonormal in <., .>
  const double bin = 1.0 / static_cast<double>(m_fft_size);
  for (int k = 0; k < m_options.frequencies; ++k) {
    const double found = refine(m_residual.data(), coarse_frequency(m_residual.data()), bin);
    std::vector<Complex> v = exponential(found, n);
    for (int pass = 0; pass < 2; ++pass)  // classical Gram-Schmidt, twice (orthogonal to rounding)
      for (const auto& u : basis) {
        const Complex c = inner(v, u);
        for (size_t i = 0; i < n; ++i) v[i] -= c * u[i];
      }
    const double norm = std::sqrt(std::max(inner(v, v).real(), 0.0));
    if (!(norm > 1e-8)) break;  // the same line again: nothing independent is left
    for (auto& value : v) value /= norm;
    const Complex c = inner(m_residual, v);
    for (size_t i = 0; i < n; ++i) m_residual[i] -= c * v[i];
    basis.push_back(std::move(v));
    nu.push_back(found);
  }
  std::vector<Complex> amplitude = fit_amplitudes(z, nu);
  for (int pass = 0; pass < m_options.joint_refinements && nu.size() > 1; ++pass) {
    for (size_t k = 0; k < nu.size(); ++k) {
      std::copy(z, z + n, m_residual.begin());
      for (size_t j = 0; j < nu.size(); ++j) {
        if (j == k) continue;
        const std::vector<Complex> e = exponential(nu[j], n);
        for (size_t i = 0; i < n; ++i) m_residual[i] -= amplitude[j] * e[i];
      }
      nu[k] = refine(m_residual.data(), nu[k], 0.5 * inv_n);
    }
    amplitude = fit_amplitudes(z, nu);
  }
  std::vector<NaffLine> result(nu.size());
  for (size_t k = 0; k < nu.size(); ++k) {
    double f = nu[k] - std::floor(nu[k]);
    if (f >= 1.0) f -= 1.0;
    result[k].frequency = f;
    result[k].amplitude = amplitude[k];
  }
  return result;
}

double Naff::frequency(const std::complex<double>* z) {
  const std::vector<NaffLine> found = lines(z);
  const auto strongest = std::max_element(found.begin(), found.end(), [](const NaffLine& a, const NaffLine& b) {
    return std::abs(a.amplitude) < std::abs(b.amplitude);
  });
  return strongest->frequency;
}

std::vector<NaffLine> naff(const std::vector<std::complex<double>>& z, const NaffOptions& options) {
  Naff analysis(z.size(), options);
  return analysis.lines(z.data());
}

std::vector<std::complex<double>> betatron_signal(const std::vector<double>& u, const std::vector<double>& pu,
                                                  double beta, double alpha) {
  if (u.size() != pu.size())
    throw Error(fmt::format("betatron_signal: {} positions but {} momenta", u.size(), pu.size()));
  if (!(beta > 0.0) || !std::isfinite(beta) || !std::isfinite(alpha))
    throw Error(fmt::format("betatron_signal: beta = {} must be > 0 and alpha = {} finite", beta, alpha));
  const double sb = std::sqrt(beta);
  std::vector<Complex> z(u.size());
  for (size_t i = 0; i < u.size(); ++i) z[i] = Complex(u[i] / sb, -(alpha * u[i] + beta * pu[i]) / sb);
  return z;
}

}  // namespace ft
