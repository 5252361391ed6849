// Deterministic reductions of per-particle quantities into bins (slice moments, charge on a 2D/3D
// grid), the one mechanism the collective elements share (impedance profiles, wakes, beam-beam,
// space charge). Contributions are fixed-point integers (fusetrack/device/reduction.h, one source
// for CPU and GPU) summed with integer adds, so the result is bitwise the same for any particle
// order, thread count and rank count (and on the GPU with fma off).
//
// Fixed point. Each quantity has a declared range R; its scale s is the largest power of two with
// max_particles * 2^24 * R * s < 2^62 (2^24: the integer weight of one macroparticle), so no
// accumulator can overflow. The rounding error of one contribution is at most 1/2 in units of
// 1/(s * 2^24) of the quantity (the `resolution`); a mean over N macroparticles is exact to that.
// A particle with a coordinate outside its declared range contributes nothing and is counted
// (out_of_range); callers refuse or report it, never clamp it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fusetrack/device/reduction.h"
#include "fusetrack/particles.h"

namespace ft {

class Communicator;

/// The power-of-two scale of a quantity of range `range` summed over at most `max_particles`
/// macroparticles, each of weight kProfileUnit at most. Throws ft::Error for a non-positive or
/// non-finite range or a count that leaves no headroom.
double fixed_point_scale(double range, uint64_t max_particles);

/// Per slice: macroparticles (weights / kProfileUnit), centroids and central second moments.
struct SliceMoments {
  std::vector<double> macroparticles;                  // [slice]
  std::vector<std::array<double, 6>> mean;             // [slice][x px y py zeta delta]
  std::vector<std::array<double, 10>> second_central;  // [slice][xx xpx xy xpy pxpx pxy pxpy yy ypy pypy]
};

/// Slice moments of particles binned in zeta. Deposit any number of particle sets (threads inside),
/// sum the integers over ranks, then read the moments.
class SliceMomentReducer {
 public:
  /// `ranges`: the declared |x|, |px|, |y|, |py|, |zeta|, |delta| bounds; `max_particles`: the most
  /// macroparticles that will be summed (over all ranks).
  SliceMomentReducer(const SliceGrid& grid, const std::array<double, 6>& ranges, uint64_t max_particles);

  /// Adds the alive particles (state > 0) of `particles` with `threads` OpenMP threads (0: default).
  void deposit(const Particles& particles, int threads = 0);
  /// Adds another reducer's integers (the same grid and ranges): a rank's or a part's share.
  void add(const SliceMomentReducer& other);
  /// Sums the integers over the ranks of `comm`, in place, on every rank.
  void allreduce(Communicator& comm);

  /// Adds integer accumulators computed elsewhere with this reducer's grid and scales (the GPU's:
  /// fusetrack/cuda_reduction.h), and the particles they left out.
  void add_accumulators(const std::vector<uint64_t>& acc, uint64_t out_of_range);

  SliceMoments moments() const;
  const SliceGrid& grid() const { return m_grid; }
  /// The raw integer accumulators, kSliceAccumulators per slice (two's complement in uint64).
  const std::vector<uint64_t>& accumulators() const { return m_acc; }
  /// Alive particles left out because a coordinate was outside its declared range.
  uint64_t out_of_range() const { return m_out_of_range; }
  /// The resolution (see the file comment) of each first moment [x px y py zeta delta].
  std::array<double, 6> resolution() const;
  const SliceMomentScales& scales() const { return m_scales; }

 private:
  SliceGrid m_grid;
  SliceMomentScales m_scales{};
  std::vector<uint64_t> m_acc;
  uint64_t m_out_of_range = 0;
};

/// Per slice: the macroparticle weight and the fixed-point sums of x, px, y, py (the slice-moment
/// collective elements: wakes, feedback), nearest slice (slice_centroid_contributions).
class SliceCentroidReducer {
 public:
  /// `grid` with linear = 0; `ranges`: the declared |x| [m], |px|, |y| [m], |py| bounds; `max_particles`:
  /// the most macroparticles summed (over all ranks).
  SliceCentroidReducer(const SliceGrid& grid, const std::array<double, 4>& ranges, uint64_t max_particles);

  /// Adds the alive particles with `threads` OpenMP threads (0: default).
  void deposit(const Particles& particles, int threads = 0);
  void clear();
  /// Adds integers computed elsewhere with this reducer's grid and scales (another rank's, the GPU's).
  void add_accumulators(const std::vector<uint64_t>& acc, uint64_t out_of_range);
  void allreduce(Communicator& comm);

  const SliceGrid& grid() const { return m_grid; }
  const SliceMomentScales& scales() const { return m_scales; }
  /// kSliceCentroidAccumulators per slice (two's complement in uint64), zeta order.
  const std::vector<uint64_t>& accumulators() const { return m_acc; }
  /// Alive particles between the cuts left out because x, px, y or py was outside its declared range.
  uint64_t out_of_range() const { return m_out_of_range; }

 private:
  SliceGrid m_grid;
  SliceMomentScales m_scales{};
  std::vector<uint64_t> m_acc;
  uint64_t m_out_of_range = 0;
};

/// Charge (macroparticles) on the nodes of a 2D (x, y) or 3D (x, y, zeta) grid, cloud-in-cell.
class ChargeGridReducer {
 public:
  /// `nodes`, `min`, `max`: per dimension (the first `dims` entries used; nodes >= 2, max > min).
  /// The 1D weight bits are chosen so that max_particles whole weights fit in 62 bits (at most 20).
  ChargeGridReducer(int dims, const std::array<int, 3>& nodes, const std::array<double, 3>& min,
                    const std::array<double, 3>& max, uint64_t max_particles);

  void deposit(const Particles& particles, int threads = 0);
  /// Zeroes the accumulators and the outside count (the grid stays).
  void clear();
  void add(const ChargeGridReducer& other);
  void allreduce(Communicator& comm);

  /// Adds integer accumulators computed elsewhere with this reducer's spec (the GPU's).
  void add_accumulators(const std::vector<uint64_t>& acc, uint64_t outside);
  /// Macroparticles per node (node index (iz * ny + iy) * nx + ix).
  std::vector<double> charge() const;
  const std::vector<uint64_t>& accumulators() const { return m_acc; }
  /// Alive particles outside the grid (they deposit nothing).
  uint64_t outside() const { return m_outside; }
  const ChargeGridSpec& spec() const { return m_spec; }

 private:
  ChargeGridSpec m_spec{};
  std::vector<uint64_t> m_acc;
  uint64_t m_outside = 0;
};

}  // namespace ft
