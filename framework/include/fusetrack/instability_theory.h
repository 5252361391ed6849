// Analytic references for transverse instabilities: Sacherer's head-tail formula, the
// coupled-bunch tune shift of point bunches (resistive wall), the ideal bunch-by-bunch damper, and a
// fit of exponential growth to turn-by-turn data.
//
// Conventions: impedances as in fusetrack/transverse_wakes.h, Z_perp(f) = i integral W_perp e^{-2 pi i f t} dt.
// A complex tune shift dQ means a centroid ~ Re(A e^{2 pi i (Q + dQ) n}) on turn n: the amplitude grows
// as e^{n rate} with rate = -2 pi Im(dQ) per turn (Im dQ < 0: unstable, > 0: damped).
#pragma once
#include <complex>
#include <functional>
#include <vector>

namespace ft::instability {

using Complex = std::complex<double>;
using ImpedanceFunction = std::function<Complex(double f)>;  // Z_perp(f) [Ohm/m], any real f

/// The beam and ring for the formulas below (SI, masses and momenta in eV).
struct RingBeam {
  double charge = 1.0;              // q0 [e]
  double mass = 938.27208816e6;     // m0 c^2 [eV]
  double gamma = 1.0;               // relativistic gamma of the reference
  double intensity = 0.0;           // N, particles per bunch
  double revolution_frequency = 0;  // f0 [Hz]
  double tune = 0.0;                // Q, the TOTAL betatron tune (integer part included)
  double synchrotron_tune = 0.0;    // Q_s
  double eta = 0.0;                 // slip factor
  double chromaticity = 0.0;        // Q' = dQ / delta (not normalized by Q)
  int bunches = 1;                  // M, equally spaced
  double beta0() const;
  double p0c() const;  // [eV]
};

enum class SachererModes { sinusoidal, hermite };

struct SachererResult {
  Complex tune_shift;           // dQ of mode (mu, m), without the m Q_s of the mode's frequency
  Complex effective_impedance;  // [Ohm/m]
  double growth_rate_per_turn;  // -2 pi Im dQ
  double growth_rate;           // [1/s]
};

/// Sacherer's formula for the low-intensity complex tune shift of head-tail mode m and coupled-bunch
/// mode mu (0 .. M-1) (F. Sacherer, CERN 77-13 (1977) p. 198; in the form of E. Metral, USPAS 2009,
/// "Bunched beams transverse coherent instabilities", as in xwakes' sacherer_formula, i.e. divided by
/// beta0 against Sacherer's beta-normalised impedance):
///   d omega = i q e I_b Z_eff / (2 (1 + |m|) m0 gamma Q omega0 L),  I_b = q e N f0,  L = beta0 c tau_b,
///   Z_eff = sum_p Z(omega_p) h_m(omega_p - omega_xi) / sum_p h_m(omega_p - omega_xi),
///   omega_p = (p M + mu + Q) omega0 + m omega_s,  omega_xi = Q' omega0 / eta,
/// with the sinusoidal mode spectra h_m(w) = (tau_b (|m|+1))^2 / (2 pi^4) (1 + (-1)^m cos(w tau_b)) /
/// ((w tau_b / pi)^2 - (|m|+1)^2)^2 (protons; tau_b the full bunch length, 4 sigma_t for a Gaussian
/// bunch) or the Hermite ones h_m(w) = (w tau_b / 4)^{2|m|} e^{-(w tau_b / 4)^2} (electrons). dQ = d omega / omega0.
/// The sums run over |omega_p| up to 400 pi (|m| + 1) / tau_b.
SachererResult sacherer(const RingBeam& beam, const ImpedanceFunction& z_perp, double bunch_length_s, int m,
                        int mu = 0, SachererModes modes = SachererModes::sinusoidal);

/// The most unstable (largest growth) coupled-bunch mode mu of head-tail mode m, scanning mu = 0 .. M-1.
SachererResult sacherer_most_unstable(const RingBeam& beam, const ImpedanceFunction& z_perp, double bunch_length_s,
                                      int m, int* mu_out = nullptr,
                                      SachererModes modes = SachererModes::sinusoidal);

/// Rigid point bunches (M equally spaced, spacing T_b = 1 / (M f0)), one wake kick per turn at a place
/// of beta function beta_x [m]: bunch centroids x = Re(A e^{i omega_mu t}) at their passages,
/// omega_mu = (mu + Q) omega0, feel Delta px = K sum_{k >= 1} W(k T_b) x(t - k T_b) with
/// K = q0^2 e N / (beta0 p0c), so dQ_mu = -beta_x K S / (4 pi), S = sum_{k>=1} W(k T_b) e^{-i omega_mu k T_b};
/// by Poisson's sum (W(0) = 0, or its half value added)
///   dQ_mu = i beta_x K / (4 pi T_b) sum_p Z_perp((p M + mu + Q) f0)            (p over all integers).
/// The sum runs over |p M + mu + Q| f0 < f_max (default 1e4 M f0). (Chao 1993, ch. 4, coupled bunches, derived here
/// in this convention; tests/collective/test_instability_theory.cpp checks it against the time-domain sum.)
Complex coupled_bunch_tune_shift(const RingBeam& beam, const ImpedanceFunction& z_perp, double beta_x, int mu,
                                 double f_max = 0.0);

/// The resistive-wall coupled-bunch growth rate of the most unstable mode [1/s] in the one-sideband
/// approximation, for M >> 1: the sideband at f = -(1 - frac(Q)) f0 dominates (Re Z_perp ~ 1/sqrt|f|, odd;
/// the other sidebands of the mode lie M f0 further away), so
///   1 / tau = beta_x K M f0^2 Re Z_perp((1 - frac Q) f0) / 2,   K = q0^2 e N / (beta0 p0c)
/// (= beta_x q e I_total omega0 Re Z / (4 pi E beta0^2), E = gamma m0 c^2, the textbook formula, e.g.
/// Chao 1993 ch. 4 for point bunches, with Re Z at the lowest negative betatron sideband).
double resistive_wall_growth_rate(const RingBeam& beam, const ImpedanceFunction& z_perp, double beta_x);

/// Ideal bunch-by-bunch damper. Convention of Xsuite's TransverseDamper (gain_x = 2 / damping_turns) and
/// PyHEADTAIL's TransverseDamper(dampingrate_x = damping_turns): each turn the bunch centroid's momentum
/// is corrected by a fraction `gain`, Delta <px> = -gain <px> (at a place with alpha = 0; the rigid
/// centroid then moves under det M = 1 - gain). The amplitude falls by sqrt(1 - gain) per turn exactly:
///   rate = -ln(1 - gain) / 2 per turn  (~ gain / 2 = 1 / damping_turns for small gain).
/// "A damper of gain g = 2 / n_d damps a kicked bunch with the e-folding time n_d turns."
double damper_gain(double damping_turns);                // 2 / damping_turns; damping_turns must be >= 1
double damper_amplitude_rate_per_turn(double gain);      // -ln(1 - gain) / 2, 0 < gain < 1

/// Exponential growth fitted to a turn-by-turn signal: the envelope is the local maxima of |signal|
/// (|s_i| >= both neighbours) with turns in [first_turn, last_turn]; ln|s| = a + rate turn by linear least
/// squares. rate [1/turn] (< 0: damping), its standard error from the residuals, and the peaks used.
struct GrowthFit {
  double rate = 0.0;
  double rate_error = 0.0;
  double log_amplitude = 0.0;  // a, ln|s| at turn 0
  int points = 0;
};
GrowthFit fit_exponential_growth(const std::vector<double>& turns, const std::vector<double>& signal,
                                 double first_turn = -1e300, double last_turn = 1e300);

/// TMCI thresholds are not computed here (the tests compare with an independent Vlasov solver;
/// none is reproduced in this library).

}  // namespace ft::instability
