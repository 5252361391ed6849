// GPU kernels of the bunch-wide solve of profile collective elements (impedance): thin wrappers
// around the steps of fusetrack/device/collective.h, which the CPU backend runs in loops
// (CollectiveSolver::solve), so that with fma off both give the same bits. Included by the
// generated collective kernels (NVRTC) only.
//
// Per solve, time method: the line density, the direct convolution, the resonant modes' step (this
// turn's amplitudes and the memory of the next turn), the field. Frequency method with fusetrack's
// FFT (fma off): the forward transform from the profile (its first pass also writes the line density),
// ending in the product with the impedance; the modes' step; the inverse transform, ending in the
// field: one launch per group of stages and one for the modes. With cuFFT (fma on): the line density,
// cuFFT, the product, cuFFT, the modes' step, the field.
#pragma once
#include "fusetrack/device/collective.h"

namespace ft {
/// One pass of fusetrack_fft_pass: its groups of stages (ft::fft_stage_group) and what it reads and writes.
struct FftPass {
  int n_fft, log2n, first_log2, stages, sets_per_block, source, target;
};
/// The solve's buffers that the first and last passes use (device pointers).
struct ProfileSolveArgs {
  const unsigned long long* counts;  // source 1
  int n;                             // slices
  double inv_total;
  double* lambda;            // source 1: written
  const double* spectrum;    // target 1: Z(m df) / (N dt), interleaved
  double* y;                 // target 1: the inverse transform's input
  double scale;              // target 2
  const double* mode_field;  // target 2: c e^{s tau_r} per mode
  const double* amplitude;   // target 2: A per mode
  int n_modes;
  double* field;  // target 2
};
}  // namespace ft

#if defined(FT_DEVICE_COMPILE)

// lambda (time order) from the integer profile (zeta order).
extern "C" __global__ void fusetrack_line_density(const unsigned long long* __restrict__ counts, int n,
                                                  double inv_total, double* __restrict__ lambda) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) lambda[r] = static_cast<double>(counts[n - 1 - r]) * inv_total;
}

extern "C" __global__ void fusetrack_convolve(const double* __restrict__ lambda, const double* __restrict__ kernel,
                                              int n, double* __restrict__ conv) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) conv[r] = ft::convolve_at(r, n, lambda, kernel);
}

// One pass of fusetrack's radix-2 FFT (fma off): the stages first_log2 .. first_log2 + stages - 1 in
// shared memory (the 2^stages values of a set combine only among themselves: ft::fft_set_butterfly), so
// that a transform takes one launch per group of stages (ft::fft_stage_group). Block b holds
// sets_per_block sets whose bases are consecutive in their low bits (the loads of a warp are runs of
// consecutive values), value j of set `lane` at shared[2 (j sets_per_block + lane)]; dynamic shared
// memory: 16 bytes per value. What the first and the last pass of a transform also do:
//   source 0: the values come from x;
//   source 1: the first forward pass: value p is lambda_r, r = bitrev(p), from the integer profile
//             (zeta order) when r < n, else 0; lambda (time order) is written for the modes' sums;
//   target 0: the values go back to x;
//   target 1: the last forward pass: y[bitrev(m)] = conj(X_m Z_m), the input of the inverse transform
//             done as a forward FFT;
//   target 2: the last inverse pass: the field (zeta order) = scale (Re value_r + the modes' fields
//             Re(c e^{s tau_r} A_m)) for r < n.
// The same operations as the CPU's loops (CollectiveSolver::solve, solve_memory), so the same bits.
extern "C" __global__ void fusetrack_fft_pass(double* __restrict__ x, const double* __restrict__ twiddle,
                                              ft::FftPass pass, ft::ProfileSolveArgs solve) {
  extern __shared__ double values[];
  const int held = (1 << pass.stages) * pass.sets_per_block;
  const int first_set = blockIdx.x * pass.sets_per_block;
  for (int e = threadIdx.x; e < held; e += blockDim.x) {
    const int lane = e % pass.sets_per_block, j = e / pass.sets_per_block;
    const int g = ft::fft_set_index(first_set + lane, j, pass.first_log2, pass.stages);
    if (pass.source == 1) {
      const int r = ft::bit_reverse(g, pass.log2n);
      double l = 0.0;
      if (r < solve.n) {
        l = static_cast<double>(solve.counts[solve.n - 1 - r]) * solve.inv_total;
        solve.lambda[r] = l;
      }
      values[2 * e] = l;
      values[2 * e + 1] = 0.0;
    } else {
      values[2 * e] = x[2 * g];
      values[2 * e + 1] = x[2 * g + 1];
    }
  }
  __syncthreads();
  for (int stage = 0; stage < pass.stages; ++stage) {
    for (int e = threadIdx.x; e < held / 2; e += blockDim.x) {
      const int lane = e % pass.sets_per_block;
      ft::fft_set_butterfly(values, pass.sets_per_block, lane, twiddle, pass.n_fft, pass.first_log2,
                            ft::fft_set_index(first_set + lane, 0, pass.first_log2, pass.stages), stage,
                            e / pass.sets_per_block);
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < held; e += blockDim.x) {
    const int lane = e % pass.sets_per_block, j = e / pass.sets_per_block;
    const int g = ft::fft_set_index(first_set + lane, j, pass.first_log2, pass.stages);
    if (pass.target == 1) {
      double yr, yi;
      ft::complex_multiply(values[2 * e], values[2 * e + 1], solve.spectrum[2 * g], solve.spectrum[2 * g + 1], &yr,
                           &yi);
      const int at = ft::bit_reverse(g, pass.log2n);
      solve.y[2 * at] = yr;
      solve.y[2 * at + 1] = -yi;
    } else if (pass.target == 2) {
      if (g >= solve.n) continue;
      double v = values[2 * e];
      for (int m = 0; m < solve.n_modes; ++m) {
        const double* c = solve.mode_field + 2 * (static_cast<long long>(m) * solve.n + g);
        v += c[0] * solve.amplitude[2 * m] - c[1] * solve.amplitude[2 * m + 1];
      }
      solve.field[solve.n - 1 - g] = solve.scale * v;
    } else {
      x[2 * g] = values[2 * e];
      x[2 * g + 1] = values[2 * e + 1];
    }
  }
}

// fma on: the half spectrum of cuFFT's D2Z times Z, in place.
extern "C" __global__ void fusetrack_half_spectrum_product(double* __restrict__ x, const double* __restrict__ z,
                                                           int n_half) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n_half) return;
  double yr, yi;
  ft::complex_multiply(x[2 * m], x[2 * m + 1], z[2 * m], z[2 * m + 1], &yr, &yi);
  x[2 * m] = yr;
  x[2 * m + 1] = yi;
}

// One block of ft::kModeChunks threads per mode: S = sum lambda_r exp(-s tau_r) in the fixed
// chunk order, then ft::mode_step: this turn's amplitude (into `amplitude`) and the memory.
extern "C" __global__ void fusetrack_mode_update(const double* __restrict__ lambda, int n,
                                                 const double* __restrict__ mode_deposit,
                                                 const double* __restrict__ wrap_factor,
                                                 const double* __restrict__ turn_factor, double* memory,
                                                 double* __restrict__ amplitude) {
  __shared__ double part_re[ft::kModeChunks], part_im[ft::kModeChunks];
  const int m = blockIdx.x, c = threadIdx.x;
  ft::mode_partial_sum(c, n, lambda, mode_deposit + 2 * static_cast<long long>(m) * n, &part_re[c], &part_im[c]);
  __syncthreads();
  if (c != 0) return;
  double sr = 0.0, si = 0.0;
  for (int k = 0; k < ft::kModeChunks; ++k) {
    sr += part_re[k];
    si += part_im[k];
  }
  ft::mode_step(memory + 2 * m, wrap_factor + 2 * m, turn_factor + 2 * m, sr, si, amplitude + 2 * m);
}

// field (zeta order) = scale * (conv + the modes' fields Re(c e^{s tau_r} A_m)), conv read with
// `conv_stride` (1: real values; 2: the real parts of complex values).
extern "C" __global__ void fusetrack_finish_field(const double* __restrict__ conv, int conv_stride, int n, double scale,
                                                  const double* __restrict__ mode_field,
                                                  const double* __restrict__ amplitude, int n_modes,
                                                  double* __restrict__ field) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  double v = conv[conv_stride * r];
  for (int m = 0; m < n_modes; ++m) {
    const double* g = mode_field + 2 * (static_cast<long long>(m) * n + r);
    v += g[0] * amplitude[2 * m] - g[1] * amplitude[2 * m + 1];
  }
  field[n - 1 - r] = scale * v;
}

#endif  // FT_DEVICE_COMPILE
