// GPU kernels of the bunch-wide solve of profile collective elements (impedance): thin wrappers
// around the steps of fusetrack/device/collective.h, which the CPU backend runs in loops
// (CollectiveSolver::solve), so that with fma off both give the same bits. Included by the
// generated collective kernels (NVRTC) only.
//
// Per solve: the line density (and the FFT's bit-reversed input), then either the direct
// convolution (time method) or the FFT (frequency method: groups of radix-2 stages in shared
// memory, the product with the impedance, the inverse FFT), the resonant modes' step (this turn's
// amplitudes and the memory of the next turn), the field.
#pragma once
#include "fusetrack/device/collective.h"

#if defined(FT_DEVICE_COMPILE)

// lambda (time order) from the integer profile (zeta order); with an FFT buffer, also its
// bit-reversed complex input (the rest of the buffer is zero).
extern "C" __global__ void fusetrack_line_density(const unsigned long long* __restrict__ counts, int n,
                                                  double inv_total, double* __restrict__ lambda,
                                                  double* __restrict__ fft_in, int fft_log2) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const double l = static_cast<double>(counts[n - 1 - r]) * inv_total;
  lambda[r] = l;
  if (fft_in) fft_in[2 * ft::bit_reverse(r, fft_log2)] = l;
}

extern "C" __global__ void fusetrack_convolve(const double* __restrict__ lambda, const double* __restrict__ kernel,
                                              int n, double* __restrict__ conv) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) conv[r] = ft::convolve_at(r, n, lambda, kernel);
}

// Stages first_log2 .. first_log2 + stages - 1 of the radix-2 FFT of x (n_fft complex values,
// interleaved) in shared memory: the 2^stages values of a set (ft::fft_set_butterfly) combine only
// among themselves, so one launch runs the whole group. Block b holds sets_per_block sets whose
// bases are consecutive in their low bits (so that the loads of a warp are consecutive), value j of
// set `lane` at shared[2 (j sets_per_block + lane)]. Dynamic shared memory: 16 bytes per value.
extern "C" __global__ void fusetrack_fft_stages(double* __restrict__ x, const double* __restrict__ twiddle, int n_fft,
                                                int first_log2, int stages, int sets_per_block) {
  extern __shared__ double values[];
  const int set_size = 1 << stages;
  const int held = set_size * sets_per_block;
  const int first_set = blockIdx.x * sets_per_block;
  for (int e = threadIdx.x; e < held; e += blockDim.x) {
    const int lane = e % sets_per_block, j = e / sets_per_block;
    const int g = ft::fft_set_index(first_set + lane, j, first_log2, stages);
    values[2 * e] = x[2 * g];
    values[2 * e + 1] = x[2 * g + 1];
  }
  __syncthreads();
  for (int stage = 0; stage < stages; ++stage) {
    for (int e = threadIdx.x; e < held / 2; e += blockDim.x) {
      const int lane = e % sets_per_block, k = e / sets_per_block;
      const int q = first_set + lane;
      ft::fft_set_butterfly(values, sets_per_block, lane, twiddle, n_fft, first_log2,
                            ft::fft_set_index(q, 0, first_log2, stages), stage, k);
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < held; e += blockDim.x) {
    const int lane = e % sets_per_block, j = e / sets_per_block;
    const int g = ft::fft_set_index(first_set + lane, j, first_log2, stages);
    x[2 * g] = values[2 * e];
    x[2 * g + 1] = values[2 * e + 1];
  }
}

// y[bitrev(m)] = conj(x[m] Z[m]): the input of the inverse transform done as a forward FFT.
extern "C" __global__ void fusetrack_spectrum_product(const double* __restrict__ x, const double* __restrict__ z,
                                                      int n_fft, int fft_log2, double* __restrict__ y) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n_fft) return;
  double yr, yi;
  ft::complex_multiply(x[2 * m], x[2 * m + 1], z[2 * m], z[2 * m + 1], &yr, &yi);
  const int at = ft::bit_reverse(m, fft_log2);
  y[2 * at] = yr;
  y[2 * at + 1] = -yi;
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
