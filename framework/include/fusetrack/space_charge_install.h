// Space charge around a ring: N SpaceChargeBiGaussian elements (frozen, elements/space_charge_bigaussian.h)
// installed at chosen positions of an existing lattice with the beam sizes from the optics there, as
// users do with xfields' install_spacecharge_frozen, and the reverse; or N particle-in-cell elements
// (SpaceChargePIC, elements/space_charge_pic.h) at the same places with the same integration lengths, as
// xfields' replace_spacecharge_with_PIC: their grid adapted to the bunch every turn, or fixed at
// +- fixed_sigmas rms beam sizes (from the optics, as the frozen elements') around the closed orbit.
//
// Positions: N at equal spacing, s_k = k C / N (k = 0 .. N-1, as xfields), or given positions in [0, C).
// A position inside a drift (Drift, DriftExact, without a transformation) splits it into pieces of the
// same type whose lengths sum to the drift's; a position at an element boundary (within 1e-9 m) goes
// between the elements, before those that start there; a position inside another thick element moves to
// its nearer end (reported in InstalledSpaceCharge::kicks[k].shift). Element k then integrates the
// ring's share L_k = (s_{k+1} - s_{k-1}) / 2 (periodic; C / N at equal spacing), so the lengths sum to C.
// Nothing else changes: the circumference, the tunes and the optics without intensity are those of the
// original lattice (up to the rounding of the split drift lengths).
//
// Beam sizes: sigma_u = sqrt(beta_u eps_nu / (beta0 gamma0) + (D_u delta_rms)^2) (u = x, y) with beta and
// the dispersion D from ft::compute_twiss_table at the element (the project's optics, delta frozen),
// computed on the lattice with the elements installed at zero intensity (they then change nothing); the
// bunch centre (mean_x, mean_y) is the closed orbit there, z0 the closed orbit's zeta unless given.
//
// Naming (so that remove_space_charge restores the sequence): the elements are PREFIX_k (default
// "sc_0", "sc_1", ...); the pieces of a split drift D are new definitions "D|sc_split<m>_<j>of<n>"
// (m counts the splits, j = 1 .. n the pieces in order).
//
// Laslett tune shift of the installed elements for small amplitudes at the bunch centre (first order in
// the perturbation, K. Schindl, "Space charge", CAS CERN-2006-002; xfields' element factor):
//   dQ_x = -r0 q0^2 N / ((2 pi)^(3/2) sigma_z beta0^2 gamma0^3) sum_k beta_x,k L_k / (sigma_x,k (sigma_x,k + sigma_y,k)),
// dQ_y alike with beta_y / (sigma_y (sigma_x + sigma_y)); r0 = e^2 / (4 pi eps0 m0 c^2).
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/optics.h"
#include "fusetrack/registry.h"

namespace ft {

struct SpaceChargeInstallOptions {
  /// N elements at equal spacing (used when `positions` is empty), >= 1.
  int64_t elements = 0;
  /// Or the positions [m] in [0, C), strictly increasing.
  std::vector<double> positions;
  double intensity = 0.0;            ///< real particles in the bunch, >= 0
  double eps_nx = 0.0, eps_ny = 0.0; ///< normalized rms emittances [m rad], > 0
  double sigma_zeta = 0.0;           ///< rms bunch length [m], > 0
  double delta_rms = 0.0;            ///< rms momentum spread [1], >= 0
  std::optional<double> z0;          ///< bunch centre in zeta [m]; default: the closed orbit's zeta
  std::string prefix = "sc";         ///< element names PREFIX_k
  OpticsOptions optics;              ///< for the closed orbit and Twiss table
  /// Particle-in-cell elements (SpaceChargePIC) instead of frozen ones.
  bool pic = false;
  std::string pic_model = "2.5D";               ///< "2.5D" or "3D"
  std::array<int, 3> pic_nodes = {64, 64, 32};  ///< grid nodes in x, y, zeta (>= 2 each)
  double pic_extent_sigmas = 6.0;               ///< adapted grids: the bunch's mean +- this many rms (> 0)
  /// > 0: a fixed grid per element, x and y at the closed orbit +- this many rms beam sizes there, zeta at
  /// z0 +- this many sigma_zeta; 0: grids adapted to the bunch every turn.
  double pic_fixed_sigmas = 0.0;
};

/// One installed element.
struct SpaceChargeKick {
  std::string name;
  double s = 0.0;          ///< position [m]
  double requested_s = 0.0;
  double shift = 0.0;      ///< s - requested_s (non-zero when the request fell inside a thick non-drift element)
  size_t sequence_index = 0;
  double length = 0.0;     ///< integration length L_k [m]
  double beta_x = 0.0, beta_y = 0.0, dx = 0.0, dy = 0.0;  ///< optics there [m]
  double sigma_x = 0.0, sigma_y = 0.0;                  ///< beam sizes [m]
  double mean_x = 0.0, mean_y = 0.0;                    ///< closed orbit [m]
};

struct InstalledSpaceCharge {
  nlohmann::ordered_json lattice;  ///< the lattice with the elements, fusetrack format
  std::vector<SpaceChargeKick> kicks;
  double circumference = 0.0;      ///< of the original lattice [m]
  double z0 = 0.0;                 ///< bunch centre used [m]
  size_t split_drifts = 0;         ///< drift entries split
  double laslett_dqx = 0.0, laslett_dqy = 0.0;  ///< first-order tune shifts (file comment)
};

/// Installs the elements (file comment). Throws InputError naming `file` and the option or element for
/// bad input (no elements, positions outside [0, C) or not increasing, emittances <= 0, PIC grids of fewer
/// than 2 nodes or an unknown model, a lattice that already holds space-charge elements or a name
/// PREFIX_k that is taken).
InstalledSpaceCharge install_space_charge(const Lattice& lattice, const SpaceChargeInstallOptions& options,
                                          ElementRegistry& registry, const std::string& file = "lattice");

/// The lattice without its space-charge elements (SpaceChargeBiGaussian, SpaceChargePIC), split drifts joined
/// again into their original
/// definition (the pieces' definitions removed): for a lattice written by install_space_charge, the
/// original sequence and definitions. Throws InputError naming `file` and the element when pieces of a
/// split drift are missing or out of order. `removed` (if given) receives the number of elements removed.
nlohmann::ordered_json remove_space_charge(const Lattice& lattice, const std::string& file = "lattice",
                                           size_t* removed = nullptr);

/// The values one SpaceChargeBiGaussian element gets from an update (SpaceChargeBeamSizes::sizes).
struct SpaceChargeSizes {
  double sigma_x = 0.0, sigma_y = 0.0;  ///< [m]
  double sigma_z = 0.0, z0 = 0.0;       ///< [m]
  double number_of_particles = 0.0;
};

struct BunchMoments;

/// Frozen space charge whose beam sizes follow the beam ("updated from the beam every K turns"). Made
/// once from a lattice holding SpaceChargeBiGaussian elements: the optics at each (beta, D) from the
/// Twiss table of that lattice with their intensity set to zero. update() then sets every element from
/// the particles' moments (bunch_moments: betatron emittances with the dispersive part removed, rms
/// delta, rms and mean zeta) and the alive fraction,
///   sigma_x,k = sqrt(beta_x,k eps_x + (D_x,k sigma_delta)^2)  (y alike),  sigma_z = rms zeta,
///   z0 = mean zeta,  number_of_particles = intensity x alive / particles,
/// and prepares the lattice again; a backend tracking it picks the change up with
/// Backend::parameters_changed() (the GPU's switch kernel re-uploads its table; Python trackers do it
/// at their next track()). Track K turns, update, repeat (ft::run_tracking does it with
/// TrackRunOptions::space_charge, `fusetrack track --space-charge-update K`). Each element needs its
/// own definition (as install_space_charge writes them); a definition shared by several positions is
/// refused.
class SpaceChargeBeamSizes {
 public:
  /// One element that follows the beam: its definition, sequence entry and the optics there.
  struct Element {
    uint32_t definition;
    size_t sequence_index;
    double beta_x, beta_y, dx, dy;
  };

  explicit SpaceChargeBeamSizes(const Lattice& lattice, const OpticsOptions& optics = {});
  /// `intensity`: real particles of the whole bunch when every particle is alive.
  void update(Lattice& lattice, const Particles& particles, double intensity) const;
  /// The values update() sets, from the moments `m` of a bunch of `particles` macroparticles (alive
  /// and lost; m.alive of them alive), one per element in sequence order. Throws InputError for a bad
  /// intensity, Error when the beam has no size (fewer than 2 alive, zero emittance or length).
  std::vector<SpaceChargeSizes> sizes(const BunchMoments& m, size_t particles, double intensity) const;
  /// Sets the elements' fields to `sizes` (as sizes() returns them) and prepares the lattice.
  void apply(Lattice& lattice, const std::vector<SpaceChargeSizes>& sizes) const;
  /// The bunch intensity the elements carry: their common number_of_particles. Throws InputError
  /// naming the first element whose value differs from the first one's (give the intensity instead).
  double installed_intensity(const Lattice& lattice) const;
  size_t elements() const { return m_entries.size(); }
  const std::vector<Element>& entries() const { return m_entries; }

 private:
  std::vector<Element> m_entries;
};

}  // namespace ft
