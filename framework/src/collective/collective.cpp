#include "fusetrack/collective.h"

#include <fftw3.h>
#include <fmt/format.h>

#include <cmath>
#include <mutex>

#include "../core/fftw_planner.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/device/element.h"
#include "fusetrack/error.h"

namespace ft {

namespace {
constexpr double kSpeedOfLight = 299792458.0;  // [m/s]
/// The smallest |1 - e^{sT}| accepted for the window T of the frequency method (wrap removal).
constexpr double kWrapConditioning = 0.05;

/// min over the model's modes of |1 - e^{sT}| (1 without modes).
double worst_wrap_conditioning(const ft_collective_model& model, double window) {
  double worst = 1.0;
  for (int m = 0; m < model.mode_count; ++m) {
    const std::complex<double> s(model.modes[m].s_re, model.modes[m].s_im);
    worst = std::min(worst, std::abs(1.0 - std::exp(s * window)));
  }
  return worst;
}

}  // namespace

TurnProgram TurnProgram::build(const Lattice& lattice) {
  TurnProgram program;
  Segment current;
  const size_t n = lattice.sequence().size();
  for (size_t e = 0; e < n; ++e) {
    if (!lattice.element(e).type->is_collective()) continue;
    current.end = e;
    program.segments.push_back(current);
    program.collective.push_back(e);
    current.begin = e + 1;
  }
  current.end = n;
  program.segments.push_back(current);
  return program;
}

struct CollectiveSolver::Fftw {
  int n = 0;
  double* real = nullptr;
  fftw_complex* spectrum = nullptr;
  fftw_plan forward = nullptr, backward = nullptr;
  explicit Fftw(int n_) : n(n_) {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    real = fftw_alloc_real(static_cast<size_t>(n));
    spectrum = fftw_alloc_complex(static_cast<size_t>(n / 2 + 1));
    forward = fftw_plan_dft_r2c_1d(n, real, spectrum, FFTW_ESTIMATE);
    backward = fftw_plan_dft_c2r_1d(n, spectrum, real, FFTW_ESTIMATE);
  }
  ~Fftw() {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    fftw_destroy_plan(forward);
    fftw_destroy_plan(backward);
    fftw_free(real);
    fftw_free(spectrum);
  }
};

InputLocation collective_element_location(const Lattice& lattice, size_t sequence_index) {
  const ElementDefinition& def = lattice.element(sequence_index);
  InputLocation where{lattice.source_file()};
  where.element_name = def.name;
  where.element_type = def.type->name;
  where.element_index = static_cast<long>(sequence_index);
  return where;
}

CollectiveSolver::CollectiveSolver(const Lattice& lattice, size_t sequence_index, FmaMode fma, size_t macroparticles)
    : m_sequence_index(sequence_index), m_fma(fma) {
  const ElementDefinition& def = lattice.element(sequence_index);
  m_name = def.name;
  m_desc = def.type->collective;
  m_params = lattice.params(lattice.sequence()[sequence_index].definition);
  if (!m_desc) throw Error(fmt::format("element '{}' ({}) is not a collective element", def.name, def.type->name));
  if (m_desc->kind != FT_COLLECTIVE_PROFILE)
    throw Error(fmt::format("element '{}' ({}) is a grid collective element (GridCollectiveSolver), not a profile one",
                            def.name, def.type->name));
  const InputLocation where = collective_element_location(lattice, sequence_index);

  const ReferenceParticle& ref = lattice.reference();
  const ft_reference abi_ref = ref.to_abi(lattice.circumference());
  ft_error err{};
  const std::string base = lattice.base_directory();
  if (m_desc->create(m_params, def.json.c_str(), base.c_str(), &abi_ref, &m_model, &err) != 0)
    throw InputError(where, err.message);

  const ft_profile_grid& g = m_model.grid;
  auto bad = [&](const char* field, const std::string& problem) {
    InputLocation at = where;
    at.field = field;
    throw InputError(at, problem);
  };
  if (g.n_slices < 2) bad("n_slices", fmt::format("must be at least 2, got {}", g.n_slices));
  if (g.n_slices > (1 << 24)) bad("n_slices", fmt::format("{} slices is more than 2^24", g.n_slices));
  if (!(std::isfinite(g.zeta_min) && std::isfinite(g.zeta_max) && g.zeta_max > g.zeta_min))
    bad("zeta_max", fmt::format("the cuts must satisfy zeta_min < zeta_max, got [{}, {}] m", g.zeta_min, g.zeta_max));
  if (m_model.method != FT_SOLVE_TIME_DOMAIN && m_model.method != FT_SOLVE_FREQUENCY_DOMAIN)
    bad("method", fmt::format("unknown solve method {}", m_model.method));
  if (macroparticles == 0) throw Error(fmt::format("collective element '{}': no macroparticles", m_name));

  const int n = g.n_slices;
  m_dt = (g.zeta_max - g.zeta_min) / n / (ref.beta0() * kSpeedOfLight);
  m_inv_total = 1.0 / (static_cast<double>(macroparticles) * static_cast<double>(kProfileUnit));
  m_lambda.assign(static_cast<size_t>(n), 0.0);
  m_conv.assign(static_cast<size_t>(n), 0.0);

  if (m_model.method == FT_SOLVE_TIME_DOMAIN) {
    m_wake_kernel.assign(static_cast<size_t>(2 * n - 1), 0.0);
    if (!m_model.wake) bad("method", "this element provides no wake function for the time-domain method");
    if (m_model.wake(m_model.state, m_dt, n, m_wake_kernel.data(), &err) != 0) throw InputError(where, err.message);
    for (double w : m_wake_kernel)
      if (!std::isfinite(w)) throw InputError(where, "the wake function gave a non-finite value");
  } else {
    // Zero padding to at least 2 n against circular aliasing of the bunch onto itself; finer when
    // the frequency resolution asks for it (df = 1 / (N dt)).
    long long N = 1;
    while (N < 2LL * n) N <<= 1;
    if (m_model.frequency_resolution > 0.0) {
      const double needed = 1.0 / (m_model.frequency_resolution * m_dt);
      while (static_cast<double>(N) < needed && N < (1LL << 28)) N <<= 1;
    }
    // The resonant modes' wraps around the window are removed exactly (solve_memory), by a factor
    // 1 / (1 - e^{sT}) that grows where a mode is nearly periodic in the window: a longer window then
    // (at most 8x), so that no factor exceeds 1 / kWrapConditioning.
    for (int longer = 0; longer < 3 && worst_wrap_conditioning(m_model, N * m_dt) < kWrapConditioning; ++longer)
      N <<= 1;
    if (N > (1LL << 28)) bad("frequency_resolution", "needs an FFT of more than 2^28 points");
    m_fft_length = static_cast<int>(N);
    while ((1 << m_fft_log2) < m_fft_length) ++m_fft_log2;
    const double df = 1.0 / (static_cast<double>(N) * m_dt);
    const int n_freq = m_fft_length / 2 + 1;
    std::vector<double> z(2 * static_cast<size_t>(n_freq));
    if (!m_model.impedance) bad("method", "this element provides no impedance for the frequency-domain method");
    if (m_model.impedance(m_model.state, df, n_freq, z.data(), &err) != 0) throw InputError(where, err.message);
    m_spectrum.assign(2 * static_cast<size_t>(N), 0.0);
    const double norm = 1.0 / (static_cast<double>(N) * m_dt);
    for (int m = 0; m < m_fft_length; ++m) {
      const int k = m <= m_fft_length / 2 ? m : m_fft_length - m;
      const double sign = m <= m_fft_length / 2 ? 1.0 : -1.0;  // Z(-f) = conj Z(f)
      m_spectrum[2 * m] = z[2 * k] * norm;
      m_spectrum[2 * m + 1] = sign * z[2 * k + 1] * norm;
    }
    // The Nyquist and DC terms of a real signal's spectrum are real.
    m_spectrum[1] = 0.0;
    m_spectrum[2 * (m_fft_length / 2) + 1] = 0.0;
    for (double v : m_spectrum)
      if (!std::isfinite(v)) throw InputError(where, "the impedance gave a non-finite value");
    m_twiddles.resize(static_cast<size_t>(m_fft_length));
    for (int k = 0; k < m_fft_length / 2; ++k) {
      const double phase = 2.0 * kPi * k / m_fft_length;
      m_twiddles[2 * k] = std::cos(phase);
      m_twiddles[2 * k + 1] = -std::sin(phase);
    }
    m_work.assign(2 * static_cast<size_t>(N), 0.0);
    if (fma == FmaMode::On) m_fftw = std::make_unique<Fftw>(m_fft_length);
  }

  // Multi-turn memory: for each mode, the tables of exp(-s tau_r) and c exp(s tau_r) on the slice
  // times tau_r = r dt (time order) and the per-turn factor exp(s T0), T0 = C / (beta0 c).
  const double t_rev = lattice.circumference() / (ref.beta0() * kSpeedOfLight);
  for (int m = 0; m < m_model.mode_count; ++m) {
    const ft_wake_mode& mode = m_model.modes[m];
    m_modes.push_back(mode);
    const std::complex<double> s(mode.s_re, mode.s_im), c(mode.c_re, mode.c_im);
    if (!(mode.s_re < 0.0) || !std::isfinite(mode.s_im) || !std::isfinite(mode.c_re) || !std::isfinite(mode.c_im))
      throw InputError(where, fmt::format("resonant mode {} is not a damped oscillation (s = {} + {}i /s)", m,
                                          mode.s_re, mode.s_im));
    for (int r = 0; r < n; ++r) {
      const double tau = r * m_dt;
      const std::complex<double> e_dep = std::exp(-s * tau), e_field = c * std::exp(s * tau);
      m_mode_deposit.push_back(e_dep.real());
      m_mode_deposit.push_back(e_dep.imag());
      m_mode_field.push_back(e_field.real());
      m_mode_field.push_back(e_field.imag());
    }
    const std::complex<double> turn = std::exp(s * t_rev);
    m_mode_turn.push_back(turn.real());
    m_mode_turn.push_back(turn.imag());
    // The frequency method's circular convolution adds the images W(tau + kT), k >= 1, of this turn's
    // wake (T = N dt, the FFT window): sum_k c e^{s (tau + kT)} = c e^{s tau} rho, rho = e^{sT} / (1 - e^{sT}).
    // The field takes Re(c e^{s tau_r} (M - rho S)) instead of Re(c e^{s tau_r} M) (solve_memory).
    std::complex<double> rho(0.0, 0.0);
    if (m_model.method == FT_SOLVE_FREQUENCY_DOMAIN) {
      const std::complex<double> wrap = std::exp(s * (static_cast<double>(m_fft_length) * m_dt));
      rho = wrap / (1.0 - wrap);
    }
    m_mode_wrap.push_back(rho.real());
    m_mode_wrap.push_back(rho.imag());
    m_memory.push_back(0.0);
    m_memory.push_back(0.0);
  }
  if (!m_modes.empty() && !(t_rev > 0.0))
    throw InputError(where, "multi-turn wake memory needs a lattice with a positive circumference");
}

CollectiveSolver::~CollectiveSolver() {
  if (m_model.destroy) m_model.destroy(m_model.state);
}

SliceGrid CollectiveSolver::slice_grid() const { return element_sdk::make_slice_grid(m_model.grid); }

void CollectiveSolver::line_density(const uint64_t* counts, double* lambda) const {
  const int n = m_model.grid.n_slices;
  for (int r = 0; r < n; ++r) lambda[r] = static_cast<double>(counts[n - 1 - r]) * m_inv_total;
}

void CollectiveSolver::solve(const uint64_t* counts, double* field) {
  const int n = m_model.grid.n_slices;
  double* lambda = m_lambda.data();
  line_density(counts, lambda);
  double* conv = m_conv.data();
  if (m_model.method == FT_SOLVE_TIME_DOMAIN) {
    const double* kernel = m_wake_kernel.data();
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; ++r) conv[r] = convolve_at(r, n, lambda, kernel);
  } else if (m_fftw) {
    // fma on: FFTW, r2c and c2r of the zero-padded line density.
    const int N = m_fft_length;
    for (int r = 0; r < N; ++r) m_fftw->real[r] = r < n ? lambda[r] : 0.0;
    fftw_execute(m_fftw->forward);
    for (int m = 0; m <= N / 2; ++m) {
      const double ar = m_fftw->spectrum[m][0], ai = m_fftw->spectrum[m][1];
      const double zr = m_spectrum[2 * m], zi = m_spectrum[2 * m + 1];
      m_fftw->spectrum[m][0] = ar * zr - ai * zi;
      m_fftw->spectrum[m][1] = ar * zi + ai * zr;
    }
    fftw_execute(m_fftw->backward);
    for (int r = 0; r < n; ++r) conv[r] = m_fftw->real[r];
  } else {
    // fma off: fusetrack's radix-2 FFT, the same steps as the GPU kernels (collective.h).
    const int N = m_fft_length, L = m_fft_log2;
    double* x = m_work.data();
    std::fill(m_work.begin(), m_work.end(), 0.0);
    for (int r = 0; r < n; ++r) x[2 * bit_reverse(r, L)] = lambda[r];
    for (int half = 1; half < N; half <<= 1)
      for (int b = 0; b < N / 2; ++b) fft_butterfly(x, m_twiddles.data(), N, half, b);
    // Y = Z X; the inverse transform as FFT(conj Y) read in its real part, conj(Y) written in
    // bit-reversed order into the second half of the work buffer's role (a copy).
    std::vector<double> y(2 * static_cast<size_t>(N));
    for (int m = 0; m < N; ++m) {
      double yr, yi;
      complex_multiply(x[2 * m], x[2 * m + 1], m_spectrum[2 * m], m_spectrum[2 * m + 1], &yr, &yi);
      const int at = bit_reverse(m, L);
      y[2 * at] = yr;
      y[2 * at + 1] = -yi;
    }
    for (int half = 1; half < N; half <<= 1)
      for (int b = 0; b < N / 2; ++b) fft_butterfly(y.data(), m_twiddles.data(), N, half, b);
    for (int r = 0; r < n; ++r) conv[r] = y[2 * r];
  }
  solve_memory(lambda, conv);
  for (int i = 0; i < n; ++i) field[i] = m_model.field_scale * conv[n - 1 - i];
}

void CollectiveSolver::solve_memory(const double* lambda, double* conv) {
  const int n = m_model.grid.n_slices;
  for (size_t m = 0; m < m_modes.size(); ++m) {
    // S = sum_r lambda_r exp(-s tau_r) in the fixed chunk order of the GPU.
    const double* e = m_mode_deposit.data() + 2 * m * static_cast<size_t>(n);
    double sr = 0.0, si = 0.0;
    for (int c = 0; c < kModeChunks; ++c) {
      double pr, pi;
      mode_partial_sum(c, n, lambda, e, &pr, &pi);
      sr += pr;
      si += pi;
    }
    // This turn's amplitude A = M - rho S (the memory less the window's wraps), the field's
    // Re(c e^{s tau_r} A), and M <- exp(s T0) (M + S): mode_step, as the GPU does.
    double amplitude[2];
    mode_step(m_memory.data() + 2 * m, m_mode_wrap.data() + 2 * m, m_mode_turn.data() + 2 * m, sr, si, amplitude);
    const double* g = m_mode_field.data() + 2 * m * static_cast<size_t>(n);
    for (int r = 0; r < n; ++r) conv[r] += g[2 * r] * amplitude[0] - g[2 * r + 1] * amplitude[1];
  }
}

}  // namespace ft
