// The open-boundary Poisson solver of fusetrack/poisson.h on the GPU.
//
//   Fast          cuFFT (D2Z / Z2D, batched over the zeta layers in 2.5D) on the doubled grid, the
//                 Green's function spectra of the host solver (FFTW); agrees with the CPU to rounding.
//   Reproducible  the CPU's line transforms as NVRTC kernels (one block per line, the butterflies of
//                 a stage spread over its threads, the line in shared memory) with the host solver's
//                 twiddle tables and Green's function spectra, the pair packing and the products of
//                 fusetrack/device/space_charge_grid.h, compiled with fma off: the CPU's bits.
//                 Transform lengths up to 2048 per dimension (nodes up to 1024).
//
// The solver owns its device buffers in the device's primary context. Not thread-safe on one object.
#pragma once
#include <cstdint>
#include <memory>

#include "fusetrack/poisson.h"

namespace ft {

class GpuPoissonSolver {
 public:
  /// Throws ft::Error for bad grids (as PoissonSolver) and DeviceError when no GPU is usable or the
  /// grid does not fit the GPU path.
  GpuPoissonSolver(const PoissonGrid& grid, PoissonModel model, PoissonFft fft, int device = 0);
  ~GpuPoissonSolver();
  GpuPoissonSolver(const GpuPoissonSolver&) = delete;
  GpuPoissonSolver& operator=(const GpuPoissonSolver&) = delete;

  /// Host arrays as PoissonSolver::solve (uploaded, solved, downloaded). `seconds` (optional): the
  /// device solve's wall time, transfers excluded.
  void solve(const double* rho, double* ex, double* ey, double* ez, double* seconds = nullptr);
  /// Device arrays (CUdeviceptr values in the device's primary context), node layout as on the host; node k's
  /// field components at ex[k * node_stride] (and ey, ez alike): separate arrays (1) or the components of a
  /// node side by side (ey = ex + 1 double, node_stride 2 or 3). Returns once the kernels are launched on the
  /// context's default stream (what the caller launches or copies there next runs after them); with
  /// `seconds`, waits for them and gives the time.
  void solve_device(uint64_t rho, uint64_t ex, uint64_t ey, uint64_t ez, double* seconds = nullptr, int node_stride = 1);

  /// The host solver whose spectra and twiddles the GPU uses (the reference for comparisons).
  const PoissonSolver& host() const;
  /// Takes the Green's function spectra of `other` (a solver of the same nodes and model, another spacing: a
  /// beam-adapted grid), so that solves match `other.solve` (the same bits in the reproducible mode) without
  /// recompiling; where `other` has the other FFT mode, this mode's spectra for other's grid. Throws ft::Error
  /// when the transform lengths differ.
  void use_spectra(const PoissonSolver& other);

  /// The FFT mode the GPU should use for a solve the host does in mode `requested`: Reproducible stays;
  /// Fast (fma on) becomes Reproducible where the line transforms have cuFFT's lengths (nodes a power of two
  /// per transformed dimension, up to 1024) and were measured faster than cuFFT (bench/HISTORY.md). The fields
  /// agree with the host's to rounding either way. FUSETRACK_GPU_POISSON_FFT=cufft keeps cuFFT (benchmarks).
  static PoissonFft preferred_fft(const PoissonGrid& grid, PoissonModel model, PoissonFft requested);

  struct Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

/// The NVRTC source of the GPU solver's kernels (for compile checks without a GPU).
const char* gpu_poisson_kernel_source();

}  // namespace ft
