// Synchrotron radiation of a ring from its linear optics: the radiation integrals I1..I5 and the
// equilibrium they give (energy loss per turn, damping partitions and times, natural emittance,
// energy spread), and the switch of the radiating elements (elements/radiation.h).
//
// Integrals over the ring of the reference orbit's curvature h, the gradient k1, the horizontal
// dispersion D and the curly H = gamma_x D^2 + 2 alpha_x D D' + beta_x D'^2 (R. H. Helm,
// M. J. Lee, P. L. Morton, M. Sands, "Evaluation of synchrotron radiation integrals", IEEE Trans.
// Nucl. Sci. 20 (1973) 900; M. Sands, SLAC-121 (1970)):
//   I1 = int D h ds,  I2 = int h^2 ds,  I3 = int |h|^3 ds,
//   I4 = int D h (h^2 + 2 k1) ds - sum over pole faces h^2 D tan(e),  I5 = int |h|^3 H ds.
// The bends are the sequence's elements with the fields `angle` and `length` (thick: h = angle /
// length, k1 from `k1`, pole faces from edge_entry_angle / edge_exit_angle where active) and
// those with `hxl` and `length` (thin: a slice of length `length` at the element, k1 = knl[1] /
// length). In a thick bend the optics are carried from its entry (the Twiss table's row before it)
// through the pole face and the body by the exact linear motion of the expanded Hamiltonian,
//   D'' + (h^2 + k1) D = h,   beta, alpha by the body's 2x2 matrix,
// and the integrals are taken by Simpson's rule on 64 intervals. Uncoupled flat rings: vertical
// dispersion and bends are not counted, nor straight magnets with a dipole field.
//
// From them, with E0, gamma0 the reference's, r_c the classical radius and lambda_c the reduced
// Compton wavelength of the species (C_gamma = 4 pi r_e / (3 (m_e c^2)^3) for electrons),
//   U0 = (2/3) r_c gamma0^3 E0 I2 = C_gamma E0^4 I2 / (2 pi),
//   J_x = 1 - I4 / I2,  J_y = 1,  J_zeta = 2 + I4 / I2,
//   tau_i = 2 E0 T0 / (J_i U0)  (T0 = C / (beta0 c)),
//   eps_x = C_q gamma0^2 I5 / (J_x I2),  sigma_delta^2 = C_q gamma0^2 I3 / (J_zeta I2),
//   C_q = 55 lambda_c / (32 sqrt 3)   (3.832e-13 m for electrons),
//   alpha_c = I1 / C.
//
// The longitudinal equilibrium comes from the ring itself with the mean radiation on (every
// radiating element switched to it): its 6D closed orbit, where the cavities give back U0 at the
// synchronous phase (|q| V sin(phi_s) = U0 for one cavity), and the 2x2 (zeta, pzeta) block M of its
// one-turn matrix in the frame without dispersion (the betatron coordinates; A. W. Chao, J. Appl. Phys.
// 50 (1979) 595), taken without the damping (M / sqrt(det M)): cos(2 pi Qs) = tr / 2,
// beta_s = M12 / sin(2 pi Qs), and the equilibrium bunch length
//   sigma_zeta = beta_s sigma_pzeta,  sigma_pzeta = sigma_delta / beta0^2
// (for a linear bucket beta_s = |eta| C / (2 pi Qs), i.e. sigma_z = alpha_c c sigma_delta / Omega_s
// above transition; Sands, SLAC-121, eq. 5.28 ff.).
#pragma once
#include <array>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "fusetrack/lattice.h"
#include "fusetrack/optics.h"

namespace ft {

/// The values of the radiating elements' `radiation` field.
enum class RadiationMode { off = 0, mean = 1, quantum = 2 };

/// Sets `radiation` on every definition whose type has that field, then prepares the lattice.
/// Returns the number of definitions set.
size_t set_radiation(Lattice& lattice, RadiationMode mode);

/// The highest radiation mode of the lattice's definitions.
RadiationMode lattice_radiation(const Lattice& lattice);

struct RadiationIntegrals {
  double i1 = 0.0, i2 = 0.0, i3 = 0.0, i4 = 0.0, i5 = 0.0;  // [m, 1/m, 1/m^2, 1/m, 1/m]
  size_t bends = 0;                                         // sequence entries that bend the reference
  double energy0 = 0.0;                                     // [eV]
  double gamma0 = 0.0, beta0 = 0.0;
  double circumference = 0.0;                                                     // [m]
  double revolution_period = 0.0;                                                 // T0 [s]
  double energy_loss_per_turn = 0.0;                                              // U0 [eV]
  double j_x = 0.0, j_y = 0.0, j_zeta = 0.0;                                      // damping partitions
  double damping_time_x = 0.0, damping_time_y = 0.0, damping_time_zeta = 0.0;     // [s]
  double damping_turns_x = 0.0, damping_turns_y = 0.0, damping_turns_zeta = 0.0;  // tau / T0
  double emittance_x = 0.0;          // natural equilibrium emittance (geometric) [m]
  double sigma_delta = 0.0;          // equilibrium relative energy spread
  double momentum_compaction = 0.0;  // I1 / C
  // Longitudinal equilibrium (file comment); `longitudinal` false without a stable 6D closed orbit of
  // the radiating ring (no RF, or the voltage below U0), the reason in `longitudinal_reason`.
  bool longitudinal = false;
  std::string longitudinal_reason;
  double rf_voltage = 0.0;               // sum of the cavities' |q0| V [V]
  double synchronous_phase = 0.0;        // asin(U0 / rf_voltage) [rad], from the crossing at zero
  std::array<double, 6> closed_orbit{};  // 6D closed orbit with the mean radiation, at the start
  double synchrotron_tune = 0.0;         // Qs of the radiating ring
  double beta_s = 0.0;                   // longitudinal beta of the radiating ring [m]
  double bunch_length = 0.0;             // equilibrium rms sigma_zeta [m]
};

/// The integrals from the optics of `twiss` (compute_twiss_table of `lattice` without radiation),
/// and the equilibrium they give.
RadiationIntegrals radiation_integrals(const Lattice& lattice, const TwissTable& twiss);

/// The same from a copy of the lattice with its radiation off (the optics of the ring without
/// damping, as the integrals assume), and the longitudinal equilibrium (synchrotron tune, bunch
/// length, closed orbit) from a copy with the mean radiation on.
RadiationIntegrals radiation_integrals(const Lattice& lattice, const OpticsOptions& options = {});

/// Fills the longitudinal equilibrium of `r` (the integrals of `lattice`) from a copy of `lattice`
/// with the mean radiation on (file comment).
void radiation_longitudinal_equilibrium(const Lattice& lattice, RadiationIntegrals& r,
                                        const OpticsOptions& options = {});

nlohmann::ordered_json radiation_integrals_to_json(const RadiationIntegrals& r);

}  // namespace ft
