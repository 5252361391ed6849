// Beam-beam between two beams: host-side pieces built on the device core fusetrack/device/beambeam6d.h
// (boost, synchro-beam map, Gaussian field). Today: the luminosity of one bunch crossing from the
// slice moments of both bunches.
#pragma once
#include <vector>

#include "fusetrack/device/beambeam6d.h"

namespace ft {

/// Luminosity integral of one bunch crossing, int int rho_1 rho_2 (the number of events per unit cross
/// section) [1/m^2], from the slices of both bunches in the common head-on (boosted) frame of the IP,
/// with the convention of beambeam6d.h (a particle's transverse position at s is x + px s, for the
/// slices of both bunches). Multiply by the crossing frequency for the luminosity [1/(m^2 s)].
///
/// In the head-on frame bunch 1 moves towards +s, bunch 2 towards -s; slice i of bunch 1 (centre
/// zeta_i) and slice j of bunch 2 (zeta_j) meet once, at s = S_ij = (zeta_i - zeta_j) / 2, and the
/// kinematic factor (2c for head-on ultra-relativistic beams) times the time they overlap integrates
/// to 1, so that (e.g. Herr & Muratori, "Concept of luminosity", CAS 2006, eq. (7), per slice pair):
///   L = sum_ij N_i N_j exp(-d^T Sigma^-1 d / 2) / (2 pi sqrt(det Sigma)),
///   Sigma = Sigma_i(S) + Sigma_j(S) (the (x, y) blocks), d = (x_i + px_i S - x_j - px_j S, y alike)
///   (uncoupled: exp(-dx^2 / (2 Sx) - dy^2 / (2 Sy)) / (2 pi sqrt(Sx Sy)), Sx = Sigma_11,i(S) + Sigma_11,j(S)),
/// with Sigma_11(S) = S11 + 2 S12 S + S22 S^2 (hourglass). A crossing angle appears through the
/// slices' centroids in the boosted frame (a tilted bunch: x_i = zeta_i sin(phi) for a bunch on axis),
/// which gives Piwinski's reduction when summed. Coupled slices too (Sigma_13(S) = S13 + (S14 + S23) S + S24 S^2); O(n1 n2).
double luminosity_per_crossing(const std::vector<Bb6dSlice>& bunch1, const std::vector<Bb6dSlice>& bunch2);

}  // namespace ft
