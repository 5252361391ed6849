// Linear optics of a ring from its one-turn map, computed by tracking with the CPU backend only
// (the core names no element type): closed orbit (Newton), 6x6 one-turn matrix (central finite
// differences), tunes, Twiss parameters at the start of the lattice, dispersion, chromaticity,
// momentum compaction and slip factor; a matched Gaussian particle generator; tunes from
// turn-by-turn data (Hann window + FFTW3 + NAFF-style refinement).
//
// Coordinates are Xsuite's: (x, px, y, py, zeta, delta), zeta = s - beta0 c t. The one-turn
// matrix is given in the canonical variables (x, px, y, py, zeta, pzeta) with
// pzeta = ptau / beta0, as xtrack's R_matrix, so that it is symplectic: M^T J M = J.
//
// Typical use (e.g. amplitudes in beam sigma for a DA scan):
//   ft::LinearOptics o = ft::compute_linear_optics(lattice, ft::OpticsOptions{});
//   ft::BeamSizes s = ft::beam_sizes(o, 2.5e-6, 2.5e-6);   // normalized emittances [m rad]
//   double x_in_sigma = (x - o.closed_orbit[0]) / s.sigma_x;
//
// Sources: A. Wolski, "Beam Dynamics in High Energy Particle Accelerators" (2014), ch. 2-5
// (one-turn matrix, Twiss parameters, dispersion, chromaticity, momentum compaction);
// MAD-X user guide, TWISS (tune sign from M12, slip factor conventions); D. A. Edwards and
// L. C. Teng, IEEE Trans. Nucl. Sci. 20 (1973) 885 (coupled 4x4 eigen-tunes); J. Laskar,
// "Frequency analysis for multi-dimensional systems", Physica D 67 (1993) 257 (NAFF);
// xtrack twiss.py (finite-difference steps, 4D/6D methods, chromaticity from +-delta).
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "fusetrack/device/gaussian_bunch.h"
#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"
#include "fusetrack/tracker.h"

namespace ft {

using Matrix6 = std::array<std::array<double, 6>, 6>;  // row-major: m[out][in]
inline constexpr double kNaNTune = __builtin_nan("");

/// What to compute and how. Defaults suit rings from ~100 m to ~30 km.
struct OpticsOptions {
  /// Force the 4D method (delta fixed: elements that change delta, e.g. cavities, are "frozen":
  /// delta is restored after them). Otherwise 6D is used when the longitudinal motion is stable.
  bool force_4d = false;
  /// Momentum offset of the 4D closed orbit [1]. Ignored in 6D (the RF fixes delta).
  double delta0 = 0.0;
  /// Central finite-difference steps in (x [m], px [1], y [m], py [1], zeta [m], delta [1]).
  /// Two errors compete. Truncation: ~h^2 times the third-order terms of the map (sextupole
  /// pairs, octupoles): ~2e4 h^2 in the tune for the CLIC damping ring. Rounding: elements
  /// round some coordinates to ~1e-17..1e-16 *absolute* (a thin bend computes
  /// px - knl[0] + hxl with knl[0] = hxl ~ 0.1; a cavity delta = sqrt(...) - 1; a drift
  /// zeta += L (1 - ...)), so a derivative carries ~1e-17 sqrt(N_bends) / h of noise.
  /// Measured tune errors (4D, against tracking) for x steps 1e-8 / 1e-7 / 1e-6 m (px steps ten
  /// times smaller): PSB 1.3e-9 / 5.9e-10 / 8e-12, CLIC DR 7.3e-10 / 3.4e-10 / 1.9e-8: the
  /// defaults 1e-7 m and 1e-8 keep both below ~1e-9 (weakly non-linear rings can take 1e-5 m
  /// and 1e-6, errors ~1e-12). zeta: the RF slope K = |d pzeta / d zeta| (1e-6 .. 0.1 1/m per
  /// turn) is read with noise ~1e-16 / (2 h K) and truncation (k_rf h)^2 / 6 (k_rf = 2 pi f /
  /// (beta0 c) up to ~50 1/m): 1e-5 m keeps both below ~3e-8 relative for K >= 1e-4 1/m (~5e-6
  /// for PSB-like weak RF). delta: 1e-6 keeps the path-length noise, 1e-16 L sqrt(N_drifts) /
  /// (2 h eta C), below ~3e-8 for a 30,000-element ring with alpha_c ~ 1e-4. (xtrack's
  /// R-matrix steps are 1e-7 m, 1e-10, 1e-7 m, 1e-10, 1e-6 m, 1e-7.)
  std::array<double, 6> steps = {1e-7, 1e-8, 1e-7, 1e-8, 1e-5, 1e-6};
  /// The final one-turn matrix (the one the tunes, Twiss and dispersion come from) is taken again
  /// around the converged closed orbit with steps scaled to the optics and a five-point stencil
  /// f' = (8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / (12 h) (truncation ~ f^(5) h^4 / 30): the
  /// transverse steps are one normalized amplitude, x: a sqrt(beta_x), px: a sqrt(gamma_x) (and
  /// y, py alike; Twiss from the first matrix), so that the step means the same at a beta* of
  /// 0.15 m as at a triplet of 20 km, where fixed steps in metres leave one column at the
  /// rounding noise (1e-17 / 1e-8 relative) and another deep in the non-linear terms. a [sqrt(m)]:
  /// the noise is ~1e-16 sqrt(N) sqrt(beta_max / beta) / a relative, the truncation ~(k a^2
  /// beta^(3/2))^2 for a sextupole k; 1e-6 keeps both below ~1e-10 on the bundled and Xsuite
  /// rings. 0: keep `steps` and the three-point stencil for the final matrix.
  double normalized_step = 1e-6;
  /// Momentum step for the chromaticity and the slip factor: five-point central differences
  /// f' = (8 (f(d) - f(-d)) - (f(2d) - f(-2d))) / (12 d) over 4D closed orbits recomputed at
  /// delta_co + {-2, -1, 1, 2} delta_chrom (truncation ~ f^(5) d^4 / 30; the three-point
  /// (f(d) - f(-d)) / 2d would leave f''' d^2 / 6 ~ 1e-9 relative); three-point if the orbit at
  /// +-2 delta_chrom cannot be found [1].
  double delta_chrom = 1e-4;
  /// Newton stops when max |map(co) - co| over the four (4D) or six (6D) coordinates is below
  /// this [m, 1]; if it stagnates above it but below co_accept, the orbit is accepted.
  double co_tolerance = 1e-14;
  double co_accept = 1e-10;
  int co_max_iterations = 30;
  /// tunes_by_tracking: initial amplitude of the probe particles, a sqrt(beta) with a in
  /// sqrt(m) (action a^2 / 2 [m]). 1e-8 sqrt(m): x ~ 4e-8 m at beta = 16 m, so that amplitude
  /// detuning (sextupoles: ~ J k2l^2 beta^3) stays < 1e-12 while rounding (relative) is harmless.
  double tracking_amplitude = 1e-8;
  int threads = 0;  // CPU threads for tracking; 0: OpenMP's default
};

/// The closed orbit and the one-turn matrix around it.
struct OneTurnMap {
  bool six_d = false;                    // 6D (full map) or 4D (delta fixed)
  std::array<double, 6> closed_orbit{};  // (x, px, y, py, zeta, delta) at the start [m, 1]
  Matrix6 matrix{};                      // d out / d in in (x, px, y, py, zeta, pzeta)
  int iterations = 0;                    // Newton iterations
  double residual = 0.0;                 // max |map(co) - co| over the solved coordinates
  /// zeta after one turn minus zeta before, on the closed orbit [m] (4D: the path-length
  /// difference to the reference, -eta C delta to first order; 6D: ~0).
  double dzeta_per_turn = 0.0;
  std::array<double, 6> steps{};  // finite-difference steps of `matrix` [m, 1]
  int stencil_points = 3;         // 3: (f(h) - f(-h)) / 2h; 5: the five-point stencil
};

/// 4D closed orbit at fixed delta (delta restored after every element that changes it) and the
/// 6x6 matrix of that frozen map (its pzeta row is (0, 0, 0, 0, 0, 1)). `guess` (x, px, y, py)
/// starts the Newton iteration; zeta starts at 0 (it is not periodic in 4D).
OneTurnMap compute_one_turn_map_4d(const Lattice& lattice, double delta, const OpticsOptions& options,
                                   const std::array<double, 4>& guess = {0, 0, 0, 0});

/// 6D closed orbit of the full map (RF included) and its 6x6 matrix. Throws ft::Error when the
/// Newton iteration does not converge (e.g. no RF: the map has no isolated 6D fixed point).
OneTurnMap compute_one_turn_map_6d(const Lattice& lattice, const OpticsOptions& options,
                                   const std::array<double, 6>& guess = {0, 0, 0, 0, 0, 0});

/// The 6D map when the longitudinal motion is stable (|trace| of the 2x2 zeta-pzeta block of
/// the full matrix, taken around the 4D orbit, below 2) and options.force_4d is false; the 4D
/// map at options.delta0 otherwise (also if the 6D Newton iteration fails). `reason` (if given)
/// receives why, in words.
OneTurnMap compute_one_turn_map(const Lattice& lattice, const OpticsOptions& options, std::string* reason = nullptr);

/// Twiss parameters of one plane from its uncoupled 2x2 block [[m11, m12], [m21, m22]]:
/// cos mu = (m11 + m22) / 2, sin mu = sign(m12) sqrt(1 - cos^2) (MAD-X), beta = m12 / sin mu,
/// alpha = (m11 - m22) / (2 sin mu), gamma = -m21 / sin mu; tune = mu / 2 pi in [0, 1).
struct PlaneTwiss {
  double tune = 0.0, beta = 0.0, alpha = 0.0, gamma = 0.0;
  bool stable = false;  // |cos mu| < 1
};
PlaneTwiss twiss_from_block(double m11, double m12, double m21, double m22);

/// Fractional eigen-tunes (Qx, Qy) of a 4x4 (x, px, y, py) block of a symplectic matrix:
/// 2 cos mu_{1,2} = (trA + trD)/2 +- sign(trA - trD) sqrt(((trA - trD)/2)^2 + det(B + adj C))
/// (Edwards-Teng), mode 1 the one closer to the x block; exact for uncoupled matrices
/// (including Qx = Qy). A coupled block's roots are polished by Newton on its characteristic
/// polynomial, so that a block slightly off symplectic (the 4D map with crab cavities) gets the
/// arguments of its eigenvalues, the tunes of tracked particles. Q vs 1 - Q from the sign of
/// m12 / m34 (MAD-X, exact when uncoupled). Throws ft::Error when a plane is unstable.
std::array<double, 2> transverse_tunes(const Matrix6& m);

/// 6D eigen-tunes (Qx, Qy, Qs) of a stable 6x6 symplectic one-turn matrix in (x, px, y, py, zeta,
/// pzeta): its eigenvalues e^{+-i 2 pi Q} (Xsuite / MAD-X 6D twiss). Planes that no 2x2 block
/// joins are solved exactly apart (2x2 trace, Edwards-Teng); three joined planes through the cubic
/// in u = 2 cos 2 pi Q of the palindromic characteristic polynomial (after a Twiss scaling of
/// the matrix, the longitudinal root polished by Newton, the other two from the deflated
/// quadratic; the horizontal mode is the one whose eigenvector has the larger (x, px) share). Qx,
/// Qy as Q or 1 - Q like qx_hint, qy_hint (the 4D tunes); Qs in [0, 0.5]. NaN for an unstable mode.
std::array<double, 3> eigen_tunes_6d(const Matrix6& m, double qx_hint, double qy_hint);

/// Everything at the start of the lattice.
struct LinearOptics {
  // Reference and ring
  double circumference = 0.0;  // [m]
  double beta0 = 1.0, gamma0 = 1.0;
  bool six_d = false;
  std::string mode_reason;               // why 4D or 6D
  std::array<double, 6> closed_orbit{};  // (x, px, y, py, zeta, delta) [m, 1]
  OneTurnMap map;                        // the map used for the closed orbit (6D or 4D)
  OneTurnMap map_4d;                     // the 4D (frozen delta) map at the closed orbit's delta
  // Tunes (fractional). qx, qy: eigen-tunes of the 4D (delta frozen) matrix at the closed
  // orbit's delta (transverse_tunes; as MAD-X TWISS, without synchro-betatron coupling, which
  // shifts the 6D tunes by ~3e-8 in the PSB); qs in [0, 0.5]: the longitudinal root of the 6D
  // matrix's characteristic polynomial (NaN in 4D).
  double qx = 0.0, qy = 0.0, qs = 0.0;
  /// 6D eigen-tunes (6D method only, NaN in 4D): the three eigenvalue pairs e^{+-i 2 pi Q} of the
  /// 6x6 one-turn matrix (as Xsuite's and MAD-X's 6D twiss), synchro-betatron coupling included;
  /// qs_6d equals qs. Mode k is the one nearest the 4D tunes (qx, qy) and the longitudinal block.
  double qx_6d = kNaNTune, qy_6d = kNaNTune, qs_6d = kNaNTune;

  // Twiss at the start, from the 4D map's uncoupled 2x2 blocks (twiss_from_block) [m, 1, 1/m]
  double beta_x = 0.0, alpha_x = 0.0, gamma_x = 0.0;
  double beta_y = 0.0, alpha_y = 0.0, gamma_y = 0.0;
  // Longitudinal (zeta, pzeta) block of the 6D matrix, beta_s [m] (NaN in 4D)
  double beta_s = 0.0, alpha_s = 0.0;
  // Dispersion d(co)/d(delta) of the 4D closed orbit [m, 1]
  double dx = 0.0, dpx = 0.0, dy = 0.0, dpy = 0.0;
  // Chromaticities dQ/d(delta) (Q' in MAD-X's dq1, dq2 sense)
  double dqx = 0.0, dqy = 0.0;
  double delta_chrom = 0.0;  // step used
  int chrom_points = 0;      // 5 (five-point stencil) or 3 (fallback)
  // Slip factor eta = -(d zeta / d delta) / C per turn (dzeta = -eta C delta), momentum
  // compaction alpha_c = eta + 1 / gamma^2, transition gamma_t = 1 / sqrt(alpha_c) (NaN unless
  // alpha_c > 1e-9 / gamma^2, i.e. above the rounding of the sum; alpha_c itself is then ~1e-12
  // / gamma^2 of noise around 0). gamma is that of the closed orbit's momentum.
  double eta = 0.0, alpha_c = 0.0, gamma_tr = 0.0;
  std::array<double, 6> steps{};  // finite-difference steps used
};

/// The linear optics of a ring at the start of its sequence (see the file comment). Throws
/// ft::Error when the closed orbit does not converge, a probe particle is lost, or the
/// transverse motion is unstable.
LinearOptics compute_linear_optics(const Lattice& lattice, const OpticsOptions& options = {});

/// RMS betatron beam sizes at the start: sigma_x = sqrt(beta_x eps_nx / (beta0 gamma0)),
/// sigma_px = sqrt(gamma_x eps_nx / (beta0 gamma0)), the same for y. Normalized emittances
/// eps_n [m rad]; sizes [m] and [1].
struct BeamSizes {
  double sigma_x = 0.0, sigma_px = 0.0, sigma_y = 0.0, sigma_py = 0.0;
};
BeamSizes beam_sizes(const LinearOptics& optics, double eps_nx, double eps_ny);

/// Matched, uncoupled Gaussian distribution around the closed orbit: betatron parts from the
/// normalized coordinates (x_hat, px_hat) ~ N(0, eps) (eps = eps_n / (beta0 gamma0)) as
/// x = sqrt(beta) x_hat, px = (px_hat - alpha x_hat) / sqrt(beta); delta - delta_co ~
/// N(0, sigma_delta), zeta - zeta_co ~ N(0, sigma_zeta), uncorrelated; then the dispersion:
/// x += Dx (delta - delta_co), px += Dpx (...), y, py likewise. Deterministic for a seed on every
/// platform (std::mt19937_64 and Box-Muller). Longitudinally matched in 6D when
/// sigma_zeta / sigma_delta = optics.beta_s (delta close to pzeta at small delta).
Particles make_gaussian(const Lattice& lattice, const LinearOptics& optics, size_t n, double eps_nx, double eps_ny,
                        double sigma_zeta, double sigma_delta, uint64_t seed);
/// The same for a ring given by its reference particle and optics only (a one-turn map).
Particles make_gaussian(const ReferenceParticle& reference, const LinearOptics& optics, size_t n, double eps_nx,
                        double eps_ny, double sigma_zeta, double sigma_delta, uint64_t seed);

/// The same matched Gaussian from the counter-based stream (fusetrack/device/gaussian_bunch.h): particle i of a
/// bunch depends only on (seed, i), so the host fill below and the GPU's (ft::GpuColliderBunch) give the same
/// bits and any share of the bunch is the same particles. The inputs are checked as make_gaussian checks them.
ft_gaussian_bunch gaussian_bunch(const ReferenceParticle& reference, const LinearOptics& optics, double eps_nx,
                                 double eps_ny, double sigma_zeta, double sigma_delta);
/// Particles first, ..., first + count - 1 of bunch `seed` (ids first, first + 1, ...), alive; OpenMP over the
/// particles with `threads` threads (0: the default), the same bits for any thread count.
Particles sample_gaussian_bunch(const ft_gaussian_bunch& bunch, uint64_t seed, size_t first, size_t count,
                                int threads = 0);

/// Fractional tune in [0, 1) of turn-by-turn data (deviations from the closed orbit; at least
/// 16 turns): the normalized complex signal z_n = x_hat_n - i px_hat_n with
/// x_hat = x / sqrt(beta), px_hat = (alpha x + beta px) / sqrt(beta) (a linear motion then
/// reads z_n = sqrt(2J) e^{i (2 pi Q n + phi)}, one line at +Q, so Q and 1 - Q are told apart),
/// a Hann window w_n = 1 - cos(2 pi (n + 1/2) / N), the FFT (FFTW3, zero-padded to >= 4 N)
/// for the highest peak, then the maximum of |sum_n w_n z_n e^{-2 pi i Q n}| refined to
/// machine precision (root of its derivative by Illinois regula falsi, NAFF, Laskar 1993).
/// For a pure line the symmetric window puts the maximum exactly at Q (errors ~1e-13 for 1000
/// turns); other lines within a few 1 / N shift it. beta = 1, alpha = 0 use the raw x - i px:
/// still Q and not 1 - Q (the sense of rotation), but the mirror line at 1 - Q remains and costs
/// ~1e-8 .. 1e-5 when Q is near 0 or 1/2.
double tune_from_tracking(const std::vector<double>& x, const std::vector<double>& px, double beta = 1.0,
                          double alpha = 0.0);

/// Tunes from tracking small-amplitude particles (one per plane, all in one Particles object)
/// `turns` turns around the closed orbit, with the same map as the optics (6D: full; 4D: delta
/// frozen), turn-by-turn data from TrackOptions::callback_every = 1, then tune_from_tracking.
/// Initial offsets: x = a sqrt(beta_x), y = a sqrt(beta_y), zeta = a sqrt(beta_s) (6D), with a =
/// options.tracking_amplitude. qs is folded into [0, 0.5] (NaN in 4D).
struct TrackedTunes {
  int64_t turns = 0;
  double qx = 0.0, qy = 0.0, qs = 0.0;
  /// 6D eigen-tunes (6D method only, NaN in 4D): the three eigenvalue pairs e^{+-i 2 pi Q} of the
  /// 6x6 one-turn matrix (as Xsuite's and MAD-X's 6D twiss), synchro-betatron coupling included;
  /// qs_6d equals qs. Mode k is the one nearest the 4D tunes (qx, qy) and the longitudinal block.
  double qx_6d = kNaNTune, qy_6d = kNaNTune, qs_6d = kNaNTune;
};
TrackedTunes tunes_by_tracking(const Lattice& lattice, const LinearOptics& optics, int64_t turns,
                               const OpticsOptions& options = {});

/// Tune footprint (amplitude-dependent tunes: space charge, octupoles, beam-beam): particles on a
/// polar grid of betatron amplitudes, x = co_x + a_x sigma_x, y = co_y + a_y sigma_y with
/// (a_x, a_y) = r (cos t, sin t) for r in (0, max_sigma] (`amplitudes` steps) and t in [0, pi/2]
/// (`angles` steps; both a_x and a_y at least `min_sigma` so every particle has a line in each
/// plane), px = co_px - alpha_x a_x sigma_x / beta_x (on the ellipse's axis; py alike), at the
/// closed orbit's (zeta, delta) plus the given offsets; with a delta offset d the transverse start
/// is the dispersive orbit co + (D, D') d plus those amplitudes (the 4D dispersion of the optics). Tracked `turns`
/// turns on `backend` (any backend; TrackOptions::callback_every = 1), the tunes of each particle from its turn-by-turn
/// (x, px) and (y, py) around the closed orbit (tune_from_tracking, NAFF). A lost particle has NaN tunes and its loss
/// turn. Sizes from the normalized emittances (beam_sizes, with the reference's beta0 gamma0) or, when given instead,
/// from the geometric ones: sigma = sqrt(beta eps).
struct FootprintOptions {
  double emittance_nx = 0.0, emittance_ny = 0.0;  // normalized [m rad]
  double emittance_x = 0.0, emittance_y = 0.0;    // geometric [m rad], instead of the normalized ones
  double max_sigma = 3.0;                         // largest amplitude [sigma]
  double min_sigma = 0.05;                        // smallest amplitude per plane [sigma]
  int amplitudes = 10, angles = 7;
  double zeta_offset = 0.0, delta_offset = 0.0;  // from the closed orbit [m, 1]
  int64_t turns = 1024;                          // >= 16
  int threads = 0;
  FmaMode fma = FmaMode::Off;
};
struct TuneFootprint {
  std::vector<double> amplitude_x, amplitude_y;  // [sigma]
  std::vector<double> qx, qy;                    // fractional tunes; NaN for a lost particle
  std::vector<int64_t> lost_turn;                // -1 when it survived
  int64_t turns = 0;
  double sigma_x = 0.0, sigma_y = 0.0;  // [m] at the start
};
TuneFootprint tune_footprint(const Lattice& lattice, const LinearOptics& optics, Backend& backend,
                             const FootprintOptions& options);

/// The lattice with its weak-strong beam-beam lenses (BeamBeamBiGaussian2D, BeamBeamBiGaussian3D) switched
/// off: scale_strength = 0, which removes their kicks and post-subtracted offsets (the 3D lens's boost and
/// inverse boost remain, together the identity). Its optics are those of the bare ring, the reference of a
/// beam-beam footprint (tunes, closed orbit, beam sizes). `lenses` (if given) receives the number of
/// sequence entries switched off.
Lattice without_beam_beam_lenses(const Lattice& lattice, size_t* lenses = nullptr);

/// The optics as JSON (closed orbit, matrix, tunes, Twiss, dispersion, chromaticity, eta,
/// alpha_c, gamma_t; NaN as null).
nlohmann::ordered_json optics_to_json(const LinearOptics& optics);

// ---------------------------------------------------------------------------------------------
// Optics along the ring.
//
// One pass of the closed orbit through the sequence gives each element's 6x6 Jacobian around the
// orbit (central differences with OpticsOptions::steps, delta frozen as in the 4D map: one
// Jacobian per element, no per-element one-turn maps). Their product is the 4D one-turn matrix
// at the start; its eigenvectors are propagated element by element.
//
// Coupled linear normal form (Mais-Ripken; F. Willeke and G. Ripken, "Methods of beam optics",
// AIP Conf. Proc. 184 (1989) 758; A. Wolski, "Beam Dynamics ..." (2014), sec. 7.3): for the
// eigenvector v_k (k = 1, 2) of the 4x4 transverse one-turn matrix with v_k^H S v_k = i
// (S = diag(J2, J2), J2 = [[0, 1], [-1, 0]]; this fixes Q vs 1 - Q and the scale), at each
// position
//   beta_kx = 2 |v_k,x|^2,  alpha_kx = -2 Re(v_k,x conj(v_k,px)),  and the same for y;
// mode 1 is the one whose x part carries more of the normalisation (Im(conj(v_x) v_px) > 1/2).
// Phase advances: mu_1 from arg v_1,x and mu_2 from arg v_2,y, each element's step taken in
// (-pi, pi] and summed, so mu / 2 pi at the end is the full tune (integer part included); mu never
// decreases in an uncoupled ring, while in a coupled one the phase of a mode's own-plane component
// may step back at an element that rotates the frame (SRotation, a tilt). For an
// uncoupled ring v_1 = (sqrt(beta_x), (i - alpha_x) / sqrt(beta_x), 0, 0) / sqrt(2): beta_1x =
// beta_x, beta_1y = 0, and mu_x the usual integral of ds / beta_x.
// Dispersion: the derivative of the closed orbit with respect to delta, (I - R4) D = dR/ddelta at
// the start (as LinearOptics::dx) and D_{e+1} = R4_e D_e + dR_e/ddelta along the ring.

/// The table: one row per position, row 0 at the start of the sequence (s = 0, before the first
/// element, name "_start", type ""), row i (1..N) at the exit of sequence entry i - 1.
struct TwissTable {
  // Ring
  double circumference = 0.0;  // [m]
  bool six_d = false;          // the closed orbit from the 6D map (RF) or the 4D one
  std::string mode_reason;
  double q1 = 0.0, q2 = 0.0;  // full tunes of modes 1 and 2 (mu_x, mu_y at the end) [1]
  /// Total tunes: the fractional eigen-tunes of the 4D one-turn matrix (LinearOptics::qx, qy)
  /// plus the integer part of the phase advance q1, q2 (round(q1 - qx) + qx): the integer from
  /// the ring, the fraction from the matrix.
  double qx_total = 0.0, qy_total = 0.0;
  /// Largest coupling along the ring, max over rows of beta_1y / beta_1x and beta_2x / beta_2y
  /// (0 for an uncoupled ring).
  double max_coupling = 0.0;
  /// Checks of the element-by-element pass: max |orbit at the end - orbit at the start| over x,
  /// px, y, py [m, 1]; max |product of the element Jacobians - 4D one-turn matrix| (rows x..zeta,
  /// columns x..zeta and delta) over max(1, max |entry|); max over the two modes of
  /// |v(end) - |lambda| e^{i mu} v(start)| / |v(start)| (periodicity of the eigenvectors; lambda the
  /// mode's eigenvalue, |lambda| = 1 for a symplectic map).
  double orbit_closure = 0.0, matrix_mismatch = 0.0, periodicity_error = 0.0;

  // Columns (size N + 1)
  std::vector<std::string> name, type;
  std::vector<double> s;  // [m]
  /// Closed orbit [m, 1] of the map the optics are taken around: delta frozen at the closed
  /// orbit's delta (as LinearOptics::map_4d), starting at its zeta; x..py are periodic, zeta
  /// changes over the turn by the path-length difference (OneTurnMap::dzeta_per_turn).
  std::vector<double> x, px, y, py, zeta, delta;
  std::vector<double> beta_x, alpha_x, mu_x;                 // mode 1, x plane; mu / 2 pi [m, 1, 1]
  std::vector<double> beta_y, alpha_y, mu_y;                 // mode 2, y plane
  std::vector<double> dx, dpx, dy, dpy;                      // dispersion [m, 1]
  std::vector<double> beta_1x, alpha_1x, beta_1y, alpha_1y;  // Mais-Ripken, mode 1
  std::vector<double> beta_2x, alpha_2x, beta_2y, alpha_2y;  // Mais-Ripken, mode 2

  size_t size() const { return s.size(); }
  /// The numeric columns by name, in file order (s, x, ..., alpha_2y).
  std::vector<std::pair<std::string, const std::vector<double>*>> numeric_columns() const;
};

/// Optics at every element around the closed orbit of `optics` (from compute_linear_optics with
/// the same options). Throws ft::Error when a probe is lost, or when the element-by-element pass
/// disagrees with the one-turn tracking (orbit_closure > 1e-8, matrix_mismatch > 1e-5: the one-turn
/// matrix's own finite-difference error is ~1e-8; a missed element effect is far larger); the
/// message then names the first element whose stepping differs (element_stepping_mismatch).
/// The element Jacobians carry zeta (5x6), so that zeta-dependent kicks (crab cavities) of the
/// path length within the turn are in their product as they are in the one-turn matrix.
TwissTable compute_twiss_table(const Lattice& lattice, const LinearOptics& optics, const OpticsOptions& options = {});
/// The same, computing the closed orbit first.
TwissTable compute_twiss_table(const Lattice& lattice, const OpticsOptions& options = {});

/// One sequence entry tracked as compute_twiss_table steps it (ft::track_sequence_entry, delta
/// restored) and by the CPU backend's whole-turn kernel restricted to it (TrackOptions element
/// range, delta restored): the largest difference of their 5x6 Jacobians (x..zeta out, x..delta in,
/// central differences with options.steps) around z over max(1, max |entry|). 0 when both run the
/// same code; compute_twiss_table uses it to name the element when its checks fail.
double element_stepping_mismatch(const Lattice& lattice, size_t e, const std::array<double, 6>& z,
                                 const OpticsOptions& options = {});

/// Writes the table as CSV (a header line of column names; name and type first) or as NPZ (one
/// float64 array per numeric column, name and type as unicode arrays), chosen by the extension
/// (.csv or .npz; another extension is an InputError naming `field`, e.g. "--twiss-table").
void write_twiss_table(const std::string& path, const TwissTable& table, const std::string& field = "twiss table");

}  // namespace ft
