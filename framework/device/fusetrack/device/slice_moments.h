// Slice-moment collective elements (transverse wakes, feedback; plugin_abi.h, ft_moments_model): the
// per-slice kick the framework solves on the host and the element reads per particle, written once
// for the CPU backend and the generated GPU kernels. The deposit of the slice moments is
// slice_centroid_contributions (fusetrack/device/reduction.h).
#pragma once
#include "fusetrack/device/collective.h"
#include "fusetrack/device/qualifiers.h"

namespace ft {

/// What the framework gives every particle of one zeta slice (FT_SLICE_KICK_VALUES doubles, in this
/// order). The wake kicks are the sums over the sources' wakes of the slices ahead and of the stored
/// turns (fusetrack/transverse_wakes.h, SliceKicks), converted with the reference particle:
///   dpx = q0 D_x / (beta0 p0c),  kx = q0 G_x / (beta0 p0c),  denergy = q0 V / E0
/// (D [V], G [V/m], V [V], p0c and E0 [eV], q0 [e]), so that the xwakes/HEADTAIL kick is
///   Delta px = dpx + kx x,  Delta py = dpy + ky y,  Delta E / E0 = denergy.
/// The centroids are the slice's means of this turn (fixed-point sums; 0 for an empty slice).
struct SliceKick {
  double dpx;          // dipolar kick [1]
  double dpy;          // dipolar kick [1]
  double kx;           // quadrupolar (detuning) coefficient [1/m]
  double ky;           // quadrupolar (detuning) coefficient [1/m]
  double denergy;      // longitudinal: Delta E / E0 [1]
  double mean_x;       // slice centroid [m]
  double mean_px;      // [1]
  double mean_y;       // [m]
  double mean_py;      // [1]
  double macroparticles;  // macroparticles in the slice (all ranks)
};

/// The nearest slice of a particle at `zeta` (the deposit's bin of a SliceGrid with linear = 0), or -1
/// outside the cuts.
FT_FUNCTION int slice_of_zeta(const SliceGrid& g, double zeta) {
  if (!(zeta >= g.zeta_min && zeta < g.zeta_max)) return -1;
  int k = static_cast<int>(floor((zeta - g.zeta_min) * g.inv_dz));
  const int last = g.n_slices - 1;
  return k < 0 ? 0 : (k > last ? last : k);
}

/// Slice `k` of the kick table (FT_SLICE_KICK_VALUES doubles per slice).
FT_FUNCTION SliceKick slice_kick_at(const double* values, int k) {
  const double* v = values + 10 * k;
  SliceKick s;
  s.dpx = v[0];
  s.dpy = v[1];
  s.kx = v[2];
  s.ky = v[3];
  s.denergy = v[4];
  s.mean_x = v[5];
  s.mean_px = v[6];
  s.mean_y = v[7];
  s.mean_py = v[8];
  s.macroparticles = v[9];
  return s;
}

}  // namespace ft
