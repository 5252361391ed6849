// Internal: the device side of a collective lattice in the CUDA backend, kept across track() calls (the
// multi-turn memory): each collective element's host solver and device buffers, and the module of the
// lattice's collective kernels (generate_collective_kernels).
#pragma once
#include <cufft.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_driver.h"
#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/cuda_poisson.h"
#include "fusetrack/slice_wakes.h"
#include "fusetrack/space_charge.h"

namespace ft::cuda {

/// The device side of one collective element: its host solver (tables, model) and device buffers.
struct DeviceCollective {
  std::unique_ptr<CollectiveSolver> solver;  // profile kind (null for a grid element)
  // Grid kind (space charge): the host solver (grid, Poisson solve) and the device buffers: integer
  // charge per node plus the outside count, the adapted extent's moments, the fields at the nodes.
  std::unique_ptr<GridCollectiveSolver> grid;
  // One rank: the Poisson solve on the GPU (the host solver's spectra, taken again when the adapted
  // grid's spacing changes: grid_builds), no round trip of the grid through the host.
  std::unique_ptr<GpuPoissonSolver> gpu_poisson;
  int64_t grid_builds = 0;
  bool gpu_poisson_failed = false;
  CUdeviceptr rho = 0, max_field_bits = 0;
  // Slice-moment kind (wakes, feedback): the host solver; `counts` holds its integer slice moments
  // (deposit_words: kSliceCentroidAccumulators per slice, then the particles out of range) and
  // `field` its kick table (FT_SLICE_KICK_VALUES doubles per slice).
  std::unique_ptr<MomentsCollectiveSolver> moments;
  size_t deposit_words = 0;  // integers of the deposit in `counts` (profile kind: n_slices)
  // Page-locked host memory for the round trip of the integers over ranks (cuMemAllocHost: the moments, or
  // the profile) and for the moments solver's kick table up (cuMemHostRegister; left pageable where the
  // driver refuses).
  uint64_t* host_moments = nullptr;
  void* registered_kicks = nullptr;
  CUdeviceptr grid_acc = 0, extent_acc = 0;
  // The field at the nodes, a node's components side by side (node k's E_x at grid_field[k * field_stride],
  // E_y one double after it, E_z two): the gather of a corner reads one memory sector, not one per component.
  // ex, ey, ez point into grid_field (ez 0 in 2.5D).
  CUdeviceptr grid_field = 0, ex = 0, ey = 0, ez = 0;
  int field_stride = 2;
  CUdeviceptr counts = 0, field = 0, lambda = 0, conv = 0, wake_kernel = 0;
  CUdeviceptr fft_x = 0, fft_y = 0, spectrum = 0, twiddles = 0;  // fusetrack's FFT (fma off)
  CUdeviceptr half_spectrum = 0, fft_real_out = 0;               // cuFFT (fma on)
  CUdeviceptr mode_field = 0, mode_deposit = 0, mode_turn = 0, mode_wrap = 0, memory = 0, amplitude = 0;
  cufftHandle plan_forward = 0, plan_inverse = 0;
  bool use_cufft = false;
  bool profile_in_shared = false;
  // Slice moments too large for shared memory (bunch trains): the words of a block's window in shared
  // memory (kMomentWindowSlices slices, then the out-of-range count); 0: no window.
  size_t window_words = 0;
};

/// The module of a collective lattice's kernels and their entry points.
struct CollectiveKernels {
  CUmodule module = nullptr;
  std::vector<CUfunction> segments;
  CUfunction wrap = nullptr;           // last segment + first segment of the next turn
  CUfunction derive_energy = nullptr;  // rpp and rvv from delta and ptau, before a download
  bool derived_energy = false;         // the segments neither load nor store rpp and rvv (codegen.h)
  CUfunction line_density = nullptr, convolve = nullptr, fft_pass = nullptr, half_spectrum_product = nullptr,
             finish_field = nullptr, mode_update = nullptr;
  CUfunction grid_extent = nullptr, grid_deposit = nullptr;  // lattices with grid elements
  CUfunction grid_density = nullptr, grid_field_finish = nullptr;
  CUfunction tile_keys = nullptr, tile_scan_blocks = nullptr, tile_scan_sums = nullptr, tile_scan_add = nullptr,
             tile_slots = nullptr, tile_gather = nullptr, tile_restore = nullptr;
  KernelSource source;
};

}  // namespace ft::cuda
