// Local momentum acceptance (LMA) along a ring and the Touschek lifetime from it.
//
// LMA: at each chosen element e, a particle starts on the closed orbit (6D when the longitudinal
// motion is stable, i.e. the ring has RF; 4D at delta = 0 otherwise) at the entrance of e with its
// delta raised (or lowered) by a trial offset, x, px, y, py and zeta kept: a Touschek scattering
// changes the momentum, not the position. The trial survives when the particle is alive after
// `turns` turns counted from e (apertures, global and per-turn limits, non-finite coordinates all
// count as losses). Per sign and position:
//   1. a coarse grid of trials |delta| = k delta_max / coarse_steps, k = 1 .. coarse_steps;
//   2. the bracket (last surviving trial before the first lost one, that first lost trial) is cut
//      by `refine_points` evenly spaced trials, and the new bracket taken the same way, until it is
//      narrower than `precision`.
// The acceptance is the lower end of the final bracket: the largest offset below which every trial
// survived. Stable islands beyond the first loss do not count (the convention of trackcpp's
// dynap_ma and elegant's momentum_aperture); when no trial is lost the acceptance is delta_max
// (flagged). Every round tracks all positions and signs together: a first partial turn per start
// element (TrackOptions::element_begin = e), then all particles in one launch for turns - 1 full
// turns, then the closing partial turn per start element (element_end = e).
//
// Touschek lifetime (A. Piwinski, "The Touschek effect in strong focusing storage rings", DESY
// 98-179 (1998), eq. 42; as in elegant's touschekLifetime and pyAT's get_lifetime): the loss rate at
// a point with optics (beta, alpha, D, D') in both planes, geometric emittances eps_x, eps_y,
// momentum spread sigma_p, bunch length sigma_s and N particles per bunch is
//   1/T = r^2 c beta_x beta_y sigma_h N / (8 sqrt(pi) beta^2 gamma^4 sx^2 sy^2 sigma_s sigma_p)
//         * Int_{tau_m}^inf F(tau, tau_m) exp(-B1 tau) I0(B2 tau) sqrt(tau / (1 + tau)) dtau,
//   F = (2 + 1/tau)^2 (tau / tau_m / (1 + tau) - 1) + 1 - sqrt((1 + tau) tau_m / tau)
//       - (4 + 1/tau) / (2 tau) ln(tau / tau_m / (1 + tau)),
// with tau_m = beta^2 delta_m^2, sx^2 = eps_x beta_x (betatron size), Dt = alpha D + beta D',
//   1/sigma_h^2 = 1/sigma_p^2 + (D_x^2 + Dt_x^2) / sx^2 + (D_y^2 + Dt_y^2) / sy^2,
//   B1 = beta_x^2 / (2 beta^2 gamma^2 sx^2) (1 - sigma_h^2 Dt_x^2 / sx^2) + (the same in y),
//   B2^2 = B1^2 - beta_x^2 beta_y^2 sigma_h^2 (sigma_x^2 sigma_y^2 - sigma_p^4 D_x^2 D_y^2)
//          / (beta^4 gamma^4 sx^4 sy^4 sigma_p^2),  sigma_{x,y}^2 = s{x,y}^2 + sigma_p^2 D_{x,y}^2,
// r the classical radius of the beam particle (r_e q^2 m_e / m), beta and gamma the reference's.
// The rate with an asymmetric acceptance is the mean of the rates with delta_m = delta+ and
// delta_m = |delta-| (each computed as if the acceptance were symmetric), and the ring's rate the
// mean over s (trapezoid over each element between its entrance and exit optics, the LMA linearly
// interpolated in s between the chosen positions). The integral is taken over the span of elements
// from the first chosen position to the last one inclusive, averaged by its length: with every
// element chosen this is the whole ring; with a superperiod it is that of a ring of copies of it.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/optics.h"
#include "fusetrack/tracker.h"

namespace ft {

/// Where to compute the acceptance: elements by name or by regular expression (ECMAScript, matched
/// against the whole name), an s range, or both (the union); nothing: every element.
struct AcceptancePositions {
  std::vector<std::string> names;  // names or patterns; each must select at least one element
  bool has_s_range = false;
  double s_min = 0.0, s_max = 0.0;  // [m] element entrances within [s_min, s_max]
  std::string names_label = "at";   // the option names in error messages
  std::string s_range_label = "s_range";
};

/// Sequence indices of the chosen elements, in order, each once. Throws InputError naming the option
/// for a name or pattern that selects no element, a bad pattern, or an s range that holds no element
/// or whose ends are not finite and ordered.
std::vector<size_t> select_acceptance_positions(const Lattice& lattice, const AcceptancePositions& positions);

struct MomentumAcceptanceConfig {
  int64_t turns = 1000;     // turns counted from each start element
  double delta_max = 0.05;  // largest trial offset per sign [1]
  double precision = 1e-4;  // width of the final bracket [1]
  int coarse_steps = 10;    // coarse trials per sign
  int refine_points = 3;    // trials per bracket and refinement round (3: the bracket shrinks by 4)
  FmaMode fma = FmaMode::Off;
  int threads = 0;
  OpticsOptions optics;  // for the closed orbit
};

/// The finest precision accepted: below it the boundary found is that of the turn count and the
/// rounding (a particle near the separatrix takes ever more turns to leave it), not of the ring.
inline constexpr double kFinestAcceptancePrecision = 1e-6;

/// Throws InputError naming the option ("turns", "precision", "delta_max", ...) for values out of
/// range: turns < 1; delta_max not in (0, 1); precision not finite, <= 0, above delta_max or below
/// kFinestAcceptancePrecision; coarse_steps < 1; refine_points < 1.
void validate_momentum_acceptance_config(const MomentumAcceptanceConfig& config);

struct MomentumAcceptance {
  std::vector<size_t> element;    // sequence index of each position
  std::vector<std::string> name;  // element name
  std::vector<double> s;          // [m] entrance of the element
  std::vector<double> positive;   // acceptance delta+ >= 0: last surviving offset before the first loss
  std::vector<double> negative;   // acceptance delta- <= 0
  std::vector<double> positive_lost, negative_lost;  // first lost offset (upper end of the bracket); NaN: none lost
  std::vector<std::array<double, 6>> closed_orbit;   // at each position (x, px, y, py, zeta, delta)
  bool six_d = false;                                // the closed orbit is the 6D one (RF)
  std::string mode_reason;
  int rounds = 0;                 // tracking rounds (the coarse one included)
  int64_t launches = 0;           // Backend::track calls
  int64_t particles_tracked = 0;  // trial particles over all rounds
  double seconds = 0.0;           // tracking time
  std::string backend;
};

/// The LMA at `positions` (sequence indices, e.g. from select_acceptance_positions) tracked with
/// `backend` (made for `lattice`). Throws InputError for a bad configuration, a lattice without a
/// positive reference momentum, or a position out of range; Error when no closed orbit is found.
MomentumAcceptance compute_momentum_acceptance(const Lattice& lattice, Backend& backend,
                                               const std::vector<size_t>& positions,
                                               const MomentumAcceptanceConfig& config);

/// The bunch for the Touschek lifetime; an equilibrium from radiation (or measurements) fills it.
struct TouschekBeam {
  double emittance_x = 0.0;       // geometric horizontal (mode 1) emittance [m]
  double emittance_y = 0.0;       // geometric vertical (mode 2) emittance [m]
  double sigma_delta = 0.0;       // rms relative momentum spread [1]
  double sigma_zeta = 0.0;        // rms bunch length [m]
  double bunch_population = 0.0;  // particles per bunch
};

/// Throws InputError naming the field (emittance_x, ...) unless every value is finite and > 0.
void validate_touschek_beam(const TouschekBeam& beam);

struct RadiationIntegrals;  // fusetrack/radiation_integrals.h

/// The Touschek bunch at the radiation equilibrium `r` (radiation_integrals of the ring, with its
/// longitudinal part): sigma_delta and sigma_zeta the equilibrium's, and the natural emittance eps0
/// shared by the coupling ratio kappa = eps_y / eps_x when `coupling` >= 0 (eps_x = eps0 / (1 + kappa),
/// eps_y = kappa eps0 / (1 + kappa), the emittance exchange of a weakly coupled ring), or, with
/// `coupling` < 0, eps_x = eps0 and eps_y = `emittance_y`. Throws InputError (field "radiation")
/// when the ring has no bends or no longitudinal equilibrium (no RF, or a voltage below U0).
TouschekBeam equilibrium_touschek_beam(const RadiationIntegrals& r, double bunch_population, double coupling,
                                       double emittance_y = 0.0);

/// Optics at one point (Twiss table columns, MAD-X / Xsuite sense).
struct TouschekOptics {
  double beta_x = 0.0, alpha_x = 0.0, dx = 0.0, dpx = 0.0;  // [m, 1, m, 1]
  double beta_y = 0.0, alpha_y = 0.0, dy = 0.0, dpy = 0.0;
};

/// Piwinski's loss rate 1/T [1/s] at one point for a symmetric acceptance |delta_m| (file comment).
/// The integral is taken in kappa = atan(sqrt(tau)) by adaptive Gauss-Kronrod quadrature to a
/// relative 1e-10. 0 for an infinite acceptance.
double touschek_rate(const TouschekOptics& optics, const TouschekBeam& beam, const ReferenceParticle& reference,
                     double delta_m);

struct TouschekLifetime {
  double lifetime = 0.0;                            // [s]
  double rate_positive = 0.0, rate_negative = 0.0;  // mean over s of the rate with delta+ and with |delta-| [1/s]
  double span_length = 0.0;                         // [m] the length integrated over
  std::vector<double> s;                            // [m] the rows of the table within the span
  std::vector<double> rate;                         // [1/s] local rate (mean of the two signs) at each s
};

/// The lifetime from the LMA and the optics along the ring (`twiss` from compute_twiss_table of the
/// same lattice). Throws InputError for a bad beam, Error when the acceptance is empty.
TouschekLifetime touschek_lifetime(const Lattice& lattice, const TwissTable& twiss, const MomentumAcceptance& lma,
                                   const TouschekBeam& beam);

/// Writes `dir`/momentum_acceptance.csv (s, element index, name, delta+, delta-, first lost offsets)
/// and `dir`/summary.json (configuration, counts, the lifetime when given).
void write_momentum_acceptance(const std::string& dir, const MomentumAcceptance& lma,
                               const MomentumAcceptanceConfig& config, const TouschekLifetime* lifetime,
                               const TouschekBeam* beam, const std::string& lattice_file);

}  // namespace ft
