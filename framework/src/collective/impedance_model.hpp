// Host model of the LongitudinalImpedance element (elements/longitudinal_impedance.h): impedance
// sources, their wake and impedance samples and their resonant modes. Host only (named .hpp so
// that the element-header glob of elements/CMakeLists.txt does not take it for an element).
//
// Conventions (plugin_abi.h): Z(f) = integral W(t) exp(-2 pi i f t) dt, W(t) = 0 for t < 0
// (causal sources), W(0) the half value of a jump; wake samples K_k = W(k dt) are written to
// out[k + n - 1] for k = -(n-1) .. n-1.
#pragma once
#include <complex>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/plugin_abi.h"

namespace ft::impedance {

using Complex = std::complex<double>;

/// One impedance source. Its contributions are added to the sample arrays.
class ImpedanceSource {
 public:
  virtual ~ImpedanceSource() = default;
  /// out[k + n - 1] += K_k [V/C] for k = -(n-1) .. n-1: W(k dt), or for a resonator W averaged
  /// with the linear-interpolation kernel over (k-1, k+1) dt (see Resonator::add_wake_samples).
  virtual void add_wake_samples(double dt, int n, double* out) const = 0;
  /// Z(f) [Ohm] for f >= 0.
  virtual Complex impedance(double f) const = 0;
};

/// Resonator, Z(f) = R_s / (1 + i Q (f/f_r - f_r/f)), alpha = omega_r / (2Q),
/// W(t > 0) = 2 alpha R_s e^{-alpha t} [cos(w t) - (alpha/w) sin(w t)], w = sqrt(omega_r^2 - alpha^2),
/// W(0) = alpha R_s; for Q < 1/2 the same with cosh, sinh of kappa = sqrt(alpha^2 - omega_r^2).
/// (Chao 1993, eqs. 2.82-2.84 with the e^{-i omega t} sign convention of BLonD's
/// impedance_sources.Resonators; Zotter & Kheifets 1998, ch. 1.)
class Resonator : public ImpedanceSource {
 public:
  Resonator(double r_shunt, double frequency, double q, bool multi_turn);
  double wake(double t) const;
  void add_wake_samples(double dt, int n, double* out) const override;
  Complex impedance(double f) const override;
  /// The modes of W(t > 0) = sum Re(c e^{st}): one complex mode (Q > 1/2), two real ones
  /// (Q < 1/2), none at critical damping (Q = 1/2, W = 2 alpha R e^{-alpha t}(1 - alpha t)).
  std::vector<ft_wake_mode> wake_modes() const;
  bool multi_turn() const { return m_multi_turn; }
  double frequency() const { return m_frequency; }
  double q() const { return m_q; }

 private:
  double m_r_shunt, m_frequency, m_q;
  bool m_multi_turn;
  double m_alpha;   // [1/s]
  double m_omega2;  // omega_r^2 - alpha^2 [1/s^2]
};

/// Z(f) = i (Z/n) f / f_rev = i omega L, L = (Z/n) / omega_rev; W = L delta'(t), sampled as the
/// central difference K_{-1} = +L / (2 dt^2), K_{+1} = -L / (2 dt^2) (so that the convolution
/// gives L dlambda/dt; Chao 1993, sec. 2.5; BLonD impedance_sources.InductiveImpedance).
class InductiveImpedance : public ImpedanceSource {
 public:
  explicit InductiveImpedance(double inductance) : m_inductance(inductance) {}
  void add_wake_samples(double dt, int n, double* out) const override;
  Complex impedance(double f) const override;

 private:
  double m_inductance;  // [H]
};

/// y(x) linear between the points (x_i, y_i), zero outside [x_0, x_last].
struct PiecewiseLinear {
  std::vector<double> x, y;
  double at(double x0) const;
  /// integral y(x) e^{i u x} dx over [x_0, x_last], exact for the piecewise-linear y.
  Complex fourier(double u) const;
};

/// Tabulated impedance (linear in f, zero outside the table); W(t) = 2 integral_0^inf
/// [Re Z cos(2 pi f t) - Im Z sin(2 pi f t)] df, integrated exactly for the interpolated table
/// (for t < 0 too: a truncated table need not be exactly causal).
class ImpedanceTable : public ImpedanceSource {
 public:
  ImpedanceTable(PiecewiseLinear re, PiecewiseLinear im) : m_re(std::move(re)), m_im(std::move(im)) {}
  void add_wake_samples(double dt, int n, double* out) const override;
  Complex impedance(double f) const override;

 private:
  PiecewiseLinear m_re, m_im;  // [Ohm] against f [Hz]
};

/// Tabulated wake (linear in t, zero beyond the table and for t < 0; the first row is W just
/// after the first time, so a sample exactly there takes the half value of the jump from 0);
/// Z(f) = integral W(t) e^{-2 pi i f t} dt, integrated exactly for the interpolated table.
class WakeTable : public ImpedanceSource {
 public:
  explicit WakeTable(PiecewiseLinear wake) : m_wake(std::move(wake)) {}
  double duration() const { return m_wake.x.back(); }
  void add_wake_samples(double dt, int n, double* out) const override;
  Complex impedance(double f) const override;

 private:
  PiecewiseLinear m_wake;  // [V/C] against t [s]
};

/// Reads a text table: whitespace- or comma-separated numbers, `columns` per row, '#' comments and
/// blank lines skipped; the first column strictly increasing and >= 0, every value finite, at
/// least 2 rows. Throws std::invalid_argument naming `field`, the path and the line.
std::vector<std::vector<double>> read_table(const std::string& path, int columns, const std::string& field,
                                            const std::string& column_names);

/// All the sources of one element, and the modes they carry to the next turn.
struct ImpedanceModel {
  std::vector<std::unique_ptr<ImpedanceSource>> sources;
  std::vector<ft_wake_mode> modes;
  /// Gaussian low-pass filter of the line density ("profile_filter"), 0: none. The filter's
  /// response is H(f) = exp(-2 pi^2 f^2 sigma_t^2), with H(cutoff) = 1/sqrt(2) (-3 dB):
  /// sigma_t = sqrt(ln 2) / (2 pi cutoff). Filtering the profile is the same as filtering the
  /// response: Z(f) H(f) (frequency method), the wake samples convolved with the sampled Gaussian
  /// g_j ~ exp(-(j dt)^2 / (2 sigma_t^2)), normalised to sum 1 (time method). The multi-turn memory
  /// (modes) is not filtered: the wake of earlier turns is smooth over a bunch.
  double filter_sigma_t = 0.0;  // [s]
};

/// The wake samples of all sources (out[k + n - 1], k = -(n-1) .. n-1), filtered when the model has
/// a profile filter.
void model_wake_samples(const ImpedanceModel& model, double dt, int n, double* out);
/// Z(f) of all sources times the filter's H(f).
Complex model_impedance_at(const ImpedanceModel& model, double f);

}  // namespace ft::impedance
