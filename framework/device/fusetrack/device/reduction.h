// Deterministic reductions of per-particle quantities into bins, written once for the CPU and the
// GPU (fma off: the same integers on both sides). Every contribution is converted to a fixed-point
// integer before it is added, so sums are exact and do not depend on the order of summation
// (threads, GPU atomics, MPI ranks): bitwise the same result on CPU, GPU and any rank count.
//
//  slice moments  per zeta slice (SliceGrid of collective.h, nearest or linear weights): the weight
//                 and the weighted sums of the six coordinates and of the ten products of the
//                 transverse ones (beam-beam slices: centroids and the Sigma matrix);
//  charge grid    charge on a 2D or 3D grid of nodes with cloud-in-cell weights (space charge).
//
// Fixed point. A quantity q with declared range |q| <= R (the host chooses the scale from R and the
// largest particle count, fusetrack/reduction.h) is added as round(w q s) with w the particle's
// integer deposit weight and s a power of two; a particle with a coordinate outside its range adds
// nothing and is counted separately, never clamped in silence.
#pragma once
#include "fusetrack/device/collective.h"
#include "fusetrack/device/qualifiers.h"

namespace ft {

/// round(v) to the nearest integer, halves up: floor(v + 0.5) is the same on host and device
/// (no rounding-mode dependence). |v| must be below 2^62 (the host's scales guarantee it).
FT_FUNCTION long long fixed_point_round(double v) { return static_cast<long long>(floor(v + 0.5)); }

/// Accumulators of one slice: [0] the weight (kProfileUnit per macroparticle), then the first
/// moments of x, px, y, py, zeta, delta, then the products xx, xpx, xy, xpy, pxpx, pxy, pxpy, yy,
/// ypy, pypy of the transverse coordinates.
constexpr int kSliceFirstMoments = 6;
constexpr int kSliceSecondMoments = 10;
constexpr int kSliceAccumulators = 1 + kSliceFirstMoments + kSliceSecondMoments;

/// The index pairs (i, j) of the second moments, in accumulator order (coordinates 0..3 = x px y py).
FT_FUNCTION void slice_second_moment_pair(int k, int* i, int* j) {
  const int pairs[kSliceSecondMoments][2] = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 1},
                                             {1, 2}, {1, 3}, {2, 2}, {2, 3}, {3, 3}};
  *i = pairs[k][0];
  *j = pairs[k][1];
}

/// Declared ranges and fixed-point scales (powers of two, chosen on the host) of the quantities.
struct SliceMomentScales {
  double range[kSliceFirstMoments];  // |coordinate| <= range
  double scale[kSliceAccumulators];  // [0] unused (weights are integers already)
};

/// The slices (0, 1 or 2) that the particle with coordinates c = (x, px, y, py, zeta, delta)
/// contributes to, and its contributions out[b][k] to accumulator k of slice bins[b]. Returns -1 for
/// a particle with a coordinate outside its range (it contributes nothing), else the slice count.
FT_FUNCTION int slice_moment_contributions(const SliceGrid& g, const SliceMomentScales& s, const double c[6],
                                           int bins[2], long long out[2][kSliceAccumulators]) {
  for (int k = 0; k < kSliceFirstMoments; ++k)
    if (!(c[k] >= -s.range[k] && c[k] <= s.range[k])) return -1;
  unsigned long long weights[2];
  const int n = profile_deposit(g, c[4], bins, weights);
  for (int b = 0; b < n; ++b) {
    const double w = static_cast<double>(weights[b]);
    out[b][0] = static_cast<long long>(weights[b]);
    for (int k = 0; k < kSliceFirstMoments; ++k) out[b][1 + k] = fixed_point_round((w * c[k]) * s.scale[1 + k]);
    for (int k = 0; k < kSliceSecondMoments; ++k) {
      int i, j;
      slice_second_moment_pair(k, &i, &j);
      const double product = c[i] * c[j];
      out[b][1 + kSliceFirstMoments + k] = fixed_point_round((w * product) * s.scale[1 + kSliceFirstMoments + k]);
    }
  }
  return n;
}

/// Accumulators of one slice of the slice-moment collective elements (wakes, feedback): [0] the weight
/// (kProfileUnit per macroparticle, nearest slice), then the sums of x, px, y, py in fixed point with
/// the scales of SliceMomentScales (range[0..3], scale[1..4]): the first moments only, so that a GPU
/// block holds many slices in shared memory.
constexpr int kSliceCentroidAccumulators = 5;

/// The first slice of a window of `window` slices (window <= g.n_slices) centred on the slice of zeta
/// (clamped to the grid; slice 0 for NaN), kept inside the grid: the part of a bunch train's table that
/// a GPU block of a windowed deposit sums in shared memory (codegen.h, kMomentWindowSlices).
FT_FUNCTION int deposit_window_first(const SliceGrid& g, double zeta, int window) {
  const double u = (zeta - g.zeta_min) * g.inv_dz;
  int k = 0;
  if (u >= 0.0) k = u < static_cast<double>(g.n_slices) ? static_cast<int>(u) : g.n_slices - 1;
  const int first = k - window / 2, last_first = g.n_slices - window;
  return first < 0 ? 0 : (first > last_first ? last_first : first);
}

#ifdef FT_DEVICE_COMPILE
/// The particles of each block of a windowed deposit: a contiguous chunk, a whole number of blocks of
/// threads, so that the grid covers n_particles and consecutive threads read consecutive particles.
__device__ __forceinline__ long long deposit_chunk(int n_particles) {
  const long long per_block = (n_particles + static_cast<long long>(gridDim.x) - 1) / gridDim.x;
  return (per_block + blockDim.x - 1) / blockDim.x * blockDim.x;
}

/// Adds the sum of the warp's `count`s to *target with one atomic (lane 0), not one per lane on a single word
/// (the counts of particles outside a grid or rejected). Every lane of the warp calls it.
__device__ __forceinline__ void warp_count_add(unsigned int count, unsigned long long* target) {
  const unsigned int sum = __reduce_add_sync(0xffffffffu, count);
  if ((threadIdx.x & 31) == 0 && sum) atomicAdd(target, static_cast<unsigned long long>(sum));
}
#endif

/// The slice a particle with coordinates c = (x, px, y, py, zeta, delta) contributes to (nearest
/// slice of g, which must have linear = 0) and its contributions out[k]. Returns -1 for a particle with
/// a transverse coordinate outside its declared range (it contributes nothing and is counted by the
/// caller), 0 for a particle outside the cuts (not counted), else 1.
FT_FUNCTION int slice_centroid_contributions(const SliceGrid& g, const SliceMomentScales& s, const double c[6], int* bin,
                                             long long out[kSliceCentroidAccumulators]) {
  unsigned long long weights[2];
  int bins[2];
  if (profile_deposit(g, c[4], bins, weights) == 0) return 0;
  for (int k = 0; k < 4; ++k)
    if (!(c[k] >= -s.range[k] && c[k] <= s.range[k])) return -1;
  const double w = static_cast<double>(weights[0]);
  *bin = bins[0];
  out[0] = static_cast<long long>(weights[0]);
  for (int k = 0; k < 4; ++k) out[1 + k] = fixed_point_round((w * c[k]) * s.scale[1 + k]);
  return 1;
}

/// A grid of nodes x_i = min + i / inv_d (i = 0 .. n - 1) in 2 or 3 dimensions (x, y[, zeta]),
/// node index (iz * n[1] + iy) * n[0] + ix. Cloud-in-cell weights per dimension are integers of
/// `weight_bits` bits (1D weights add up to 2^weight_bits exactly), their products exact.
struct ChargeGridSpec {
  int dims;         // 2 or 3
  int n[3];         // nodes per dimension (>= 2)
  double min[3];    // [m] first node
  double inv_d[3];  // [1/m] inverse node spacing
  int weight_bits;  // bits of a 1D weight; dims * weight_bits + log2(particles) < 63 (host checks)
};

/// The nodes (4 in 2D, 8 in 3D) a particle at `pos` deposits into and their integer weights (their
/// sum is 2^(dims * weight_bits)). Returns 0 when the particle is not inside the grid (it deposits
/// nothing and is counted by the caller).
FT_FUNCTION int charge_deposit(const ChargeGridSpec& g, const double pos[3], long long nodes[8],
                               unsigned long long weights[8]) {
  long long index[3] = {0, 0, 0};
  unsigned long long w1[3][2] = {{1, 0}, {1, 0}, {1, 0}};
  const unsigned long long unit = 1ull << g.weight_bits;
  // Fixed trip counts (the unused dimension and corners skipped), unrolled on the GPU: the small arrays here
  // and the callers' nodes and weights stay in registers.
  FT_UNROLL
  for (int d = 0; d < 3; ++d) {
    if (d >= g.dims) continue;
    const double u = (pos[d] - g.min[d]) * g.inv_d[d];
    if (!(u >= 0.0 && u < static_cast<double>(g.n[d] - 1))) return 0;
    const double lower = floor(u);
    unsigned long long right = static_cast<unsigned long long>((u - lower) * static_cast<double>(unit) + 0.5);
    if (right > unit) right = unit;
    index[d] = static_cast<long long>(lower);
    w1[d][0] = unit - right;
    w1[d][1] = right;
  }
  const int corners = 1 << g.dims;
  FT_UNROLL
  for (int c = 0; c < 8; ++c) {
    if (c >= corners) continue;
    const int ox = c & 1, oy = (c >> 1) & 1, oz = (c >> 2) & 1;
    const long long iz = g.dims == 3 ? index[2] + oz : 0;
    nodes[c] = (iz * g.n[1] + index[1] + oy) * g.n[0] + index[0] + ox;
    weights[c] = w1[0][ox] * w1[1][oy] * (g.dims == 3 ? w1[2][oz] : 1ull);
  }
  return corners;
}

/// The lower corner node of the cell around `pos` (charge_deposit's first node), or -1 when the particle is not
/// inside the grid: the cell order of the particles' tile sort (the GPU's).
FT_FUNCTION long long charge_grid_cell(const ChargeGridSpec& g, const double pos[3]) {
  long long nodes[8];
  unsigned long long weights[8];
  return charge_deposit(g, pos, nodes, weights) > 0 ? nodes[0] : -1;
}

}  // namespace ft
