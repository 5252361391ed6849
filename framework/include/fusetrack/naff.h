// Numerical analysis of fundamental frequencies (NAFF): the frequencies and complex amplitudes of
// the main lines of a quasi-periodic complex signal z_n, n = 0 .. N-1 (turn-by-turn data).
//
// J. Laskar, "The chaotic motion of the solar system: a numerical estimate of the size of the
// chaotic zones", Icarus 88 (1990) 266; J. Laskar, "Frequency analysis for multi-dimensional
// systems. Global dynamics and diffusion", Physica D 67 (1993) 257; J. Laskar, C. Froeschle and
// A. Celletti, Physica D 56 (1992) 253 (the Hann window of order p). The steps:
//
//  1. Window: w_n = C_p (1 + cos(2 pi (n - c) / N))^p with c = (N - 1) / 2 (symmetric about the
//     middle of the record) and C_p = 2^p (p!)^2 / (2p)!, so that the window's mean is 1 (p = 0: no
//     window). A larger p lowers the leakage of one line into another's estimate (side lobes fall as
//     1 / (N dnu)^(p + 1)) at the cost of a wider main lobe.
//  2. Coarse frequency: the highest bin of the FFT of w_n r_n (r: the residual signal, zero-padded
//     to a power of two >= 4N; FFTW3).
//  3. Refinement: the maximum of |phi(nu)|, phi(nu) = <r, e_nu> = (1/N) sum_n w_n r_n e^{-2 pi i nu n},
//     by a Newton iteration on d|phi|^2/dnu = 0 (analytic first and second derivatives, kept inside
//     a bracket where the derivative changes sign, bisection where Newton leaves it). For one pure line
//     the symmetric window puts the maximum exactly at the line's frequency.
//  4. Gram-Schmidt: the new exponential e_k(n) = e^{2 pi i nu_k n} is orthogonalised against the
//     previous ones in the windowed inner product <a, b> = (1/N) sum_n w_n a_n conj(b_n), and its
//     projection subtracted from the residual, which then gives the next line (steps 2-4).
//  5. The amplitudes a_k of z_n ~ sum_k a_k e^{2 pi i nu_k n}: the windowed least-squares fit on the
//     exponentials found (the Gram system sum_j <e_j, e_k> a_j = <z, e_k>).
//  6. Optional (NaffOptions::joint_refinements): each nu_k refined again on z minus the other
//     lines' fitted contributions, then the amplitudes fitted again. This removes the bias that
//     neighbouring lines leave in step 3 (their leakage), at one refinement per line per pass.
//
// Frequencies are in turns^-1 (tunes), folded into [0, 1).
//
// Betatron signals: z_n = x_hat_n - i px_hat_n with x_hat = x / sqrt(beta), px_hat = (alpha x +
// beta px) / sqrt(beta) (deviations from the closed orbit; Courant-Snyder normalisation at the
// observation point). A linear motion then reads z_n = sqrt(2J) e^{i (2 pi Q n + phi0)}: one line at
// +Q, none at 1 - Q. Without optics (beta = 1, alpha = 0: raw x - i px) the sense of rotation still
// makes the +Q line the larger one, but the mirror line at 1 - Q remains (its amplitude
// |beta - 1/beta|-like relative to the main one) and biases the main line's estimate unless it is
// found and fitted too (frequencies >= 2 with joint refinement).
#pragma once
#include <complex>
#include <cstddef>
#include <vector>

namespace ft {

struct NaffOptions {
  int window_order = 1;       ///< Hann order p >= 0 (0: rectangular window)
  int frequencies = 1;        ///< number of lines to find (>= 1)
  int joint_refinements = 0;  ///< passes of step 6 (0: none)
};

/// One line z_n ~ amplitude e^{2 pi i frequency n}.
struct NaffLine {
  double frequency = 0.0;  ///< [1/turn] in [0, 1)
  std::complex<double> amplitude{0.0, 0.0};
};

/// NAFF of signals of one length: holds the window, the FFT plan and the work buffers. Not
/// thread-safe; one object per thread (constructing one plans an FFT under the library's FFTW lock).
class Naff {
 public:
  /// `samples` >= 16. Throws Error for fewer samples or bad options.
  explicit Naff(size_t samples, const NaffOptions& options = {});
  ~Naff();
  Naff(const Naff&) = delete;
  Naff& operator=(const Naff&) = delete;

  size_t samples() const { return m_n; }
  /// The lines of `z` (samples() values), in the order found (decreasing strength). Throws Error
  /// for a non-finite or zero signal.
  std::vector<NaffLine> lines(const std::complex<double>* z);
  /// The frequency of the strongest line, in [0, 1).
  double frequency(const std::complex<double>* z);

 private:
  // The refined maximum of |<r, e_nu>| near nu0 within [nu0 - half_width, nu0 + half_width].
  double refine(const std::complex<double>* r, double nu0, double half_width);
  double coarse_frequency(const std::complex<double>* r);
  std::vector<std::complex<double>> fit_amplitudes(const std::complex<double>* z, const std::vector<double>& nu) const;

  size_t m_n;
  NaffOptions m_options;
  std::vector<double> m_window;
  size_t m_fft_size = 0;
  void* m_fft_buffer = nullptr;  // fftw_complex[m_fft_size]
  void* m_fft_plan = nullptr;    // fftw_plan
  std::vector<std::complex<double>> m_residual, m_work;
};

/// The frequencies of `z` (convenience: one Naff object for one signal).
std::vector<NaffLine> naff(const std::vector<std::complex<double>>& z, const NaffOptions& options = {});

/// The normalised betatron signal x_hat - i px_hat of deviations (u, pu) from the closed orbit
/// (header comment); beta > 0 [m], alpha finite. beta = 1, alpha = 0: the raw u - i pu.
std::vector<std::complex<double>> betatron_signal(const std::vector<double>& u, const std::vector<double>& pu,
                                                  double beta = 1.0, double alpha = 0.0);

}  // namespace ft
