// Internal: the particles of a collective run ordered by grid tile on the device
// (CudaBackendOptions::tile_sort_every).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_collective_state.h"
#include "cuda_device_particles.h"
#include "cuda_driver.h"

namespace ft::cuda {

/// A counting sort by the cell of the first fixed-grid element (fusetrack_tile_keys, _scan, _scatter of
/// the collective kernels) into a second set of arrays, each slot's original index carried along, and the
/// original order restored before the particles leave the device. With it the fixed-grid deposits sum each
/// block's charge in a window of the grid in shared memory first (window_nodes()). Not for bunch trains
/// (their slice-moment deposits take each bunch's particles as one contiguous range), nor where device
/// memory is short of a second set of arrays (then no sort: every deposit a global atomic add).
class TileOrder {
 public:
  /// Particles per block of a windowed deposit, and the window: nodes from one row before the cell of the
  /// block's first particle, in its zeta layer and the next (2 x 2048 words, 32 KiB of shared memory).
  static constexpr size_t kChunk = 4096;
  static constexpr int kWindowNodes = 2048;
  /// Buckets per block of the prefix sums (FT_TILE_SCAN_PER_THREAD x 1024 threads), at most 1024 blocks.
  static constexpr unsigned kScanBlock = 4096, kMaxScanBlocks = 1024;

  TileOrder(const Driver& d, const std::vector<DeviceCollective>& collective, DeviceParticleBuffers& buffers, size_t n,
            int every_option);
  ~TileOrder();
  TileOrder(const TileOrder&) = delete;
  TileOrder& operator=(const TileOrder&) = delete;

  /// A sort at the start of turn `done` (counted from the call's first).
  bool due(int64_t done) const { return m_enabled && done % m_every == 0; }
  /// The window of the fixed-grid deposits (0: none, the particles are not sorted).
  int window_nodes() const { return m_enabled ? kWindowNodes : 0; }

  /// `phase_seconds` (optional, synchronising after each phase): the counts and their prefix sums, the
  /// slots, the particles' move.
  void sort(const CollectiveKernels& kk, DeviceParticleBuffers& buffers, int multiprocessors, double* phase_seconds);
  /// The original order back (before a download).
  void restore(const CollectiveKernels& kk, DeviceParticleBuffers& buffers, int multiprocessors);

 private:
  unsigned blocks(int multiprocessors) const;
  void launch(CUfunction f, unsigned grid, unsigned threads, void** args) const;

  const Driver& m_d;
  size_t m_n = 0;
  int m_every = 0;
  const GridCollectiveSolver* m_grid = nullptr;
  int m_shift = 0;
  unsigned m_buckets = 0;
  bool m_enabled = false, m_permuted = false;
  CUdeviceptr m_key = 0, m_source = 0, m_count = 0, m_sums = 0, m_origin[2] = {0, 0};
  std::unique_ptr<DeviceParticleBuffers> m_spare;
};

}  // namespace ft::cuda
