// Grid collective elements (space charge), the per-particle steps besides the deposit
// (charge_deposit, fusetrack/device/reduction.h) and the gather (charge_grid_field_at,
// fusetrack/device/space_charge_grid.h), written once for the CPU backend and the generated GPU
// kernels:
//
//  extent moments  the bunch's count, first and second moments in x, y, zeta about a reference
//                  centre, as fixed-point integers (exact sums, any order, threads, GPU atomics,
//                  MPI ranks), from which every rank and both backends compute the same adapted
//                  grid (GridCollectiveSolver::set_extent).
#pragma once
#include "fusetrack/device/qualifiers.h"
#include "fusetrack/device/reduction.h"

namespace ft {

/// Accumulators of the extent moments: [0] particles, then per dimension d (x, y, zeta) the sums of
/// (q - centre[d]) and (q - centre[d])^2 in fixed point.
constexpr int kExtentAccumulators = 7;

/// Reference centres, declared ranges (|q - centre| <= range; 0: the dimension is not measured) and
/// fixed-point scales (powers of two chosen on the host so that no sum can overflow).
struct ExtentScales {
  double centre[3];  // [m]
  double range[3];   // [m]
  double scale1[3];  // [1/m]
  double scale2[3];  // [1/m^2]
};

/// The contributions of one particle at pos (x, y, zeta); returns 0 (contributes nothing) when a
/// measured coordinate is outside its declared range, else 1.
FT_FUNCTION int extent_contributions(const ExtentScales& s, const double pos[3], long long out[kExtentAccumulators]) {
  out[0] = 1;
  for (int d = 0; d < 3; ++d) {
    out[1 + 2 * d] = 0;
    out[2 + 2 * d] = 0;
    if (!(s.range[d] > 0.0)) continue;
    const double u = pos[d] - s.centre[d];
    if (!(u >= -s.range[d] && u <= s.range[d])) return 0;
    out[1 + 2 * d] = fixed_point_round(u * s.scale1[d]);
    out[2 + 2 * d] = fixed_point_round((u * u) * s.scale2[d]);
  }
  return 1;
}

}  // namespace ft
