// GPU kernels of the Poisson solver (GpuPoissonSolver, src/backends/cuda_poisson.cpp). One block per line
// for the transforms: the line in dynamic shared memory (2 M doubles), the line steps of space_charge_grid.h
// (the CPU's, with nt = 1) over the block's threads, the lines of every layer in one launch (block = layer *
// lines + line). The cuFFT path's padding and unpadding.
#pragma once
#include "fusetrack/device/space_charge_grid.h"

#if defined(FT_DEVICE_COMPILE)

// Blocks of up to 256 threads; the minimum resident blocks of 256 threads per multiprocessor asked of the compiler,
// which caps the registers per thread (the same arithmetic). On an H100 the 2.5D 256 x 256 x 64 solve took 0.845 ms
// with 1 and 1, 0.732 ms with 3 for the last-axis kernel, 0.707 ms with 2 for the others (bench/HISTORY.md).
#ifndef FT_POISSON_CONVOLVE_MIN_BLOCKS
#define FT_POISSON_CONVOLVE_MIN_BLOCKS 3
#endif
#ifndef FT_POISSON_LINE_MIN_BLOCKS
#define FT_POISSON_LINE_MIN_BLOCKS 2
#endif
extern "C" __global__ void __launch_bounds__(256, FT_POISSON_LINE_MIN_BLOCKS)
    ft_poisson_fwd_x(ft::PoissonLines p, long long pairs, const double* in, long long in_layer, double* spec,
                     long long spec_layer, const double* tw) {
  extern __shared__ __align__(16) double z[];  // 16-byte slots (poisson_get)
  const long long layer = blockIdx.x / pairs, pair = blockIdx.x % pairs;
  ft::poisson_forward_x(p, pair, in + layer * in_layer, spec + layer * spec_layer, tw, z, threadIdx.x, blockDim.x);
}
// y lines (axis 1) or zeta lines (axis 2) of the half spectrum.
extern "C" __global__ void __launch_bounds__(256, FT_POISSON_LINE_MIN_BLOCKS)
    ft_poisson_line(ft::PoissonLines p, int axis, long long lines, double* spec, long long spec_layer, int load,
                    int store, const double* tw) {
  extern __shared__ __align__(16) double z[];  // 16-byte slots (poisson_get)
  const long long layer = blockIdx.x / lines, l = blockIdx.x % lines;
  double* s = spec + layer * spec_layer;
  if (axis == 1)
    ft::poisson_line(s + 2 * ft::poisson_y_line(p, l), p.h, p.m[1], p.log2m[1], load, store, tw, z, threadIdx.x,
                     blockDim.x);
  else
    ft::poisson_line(s + 2 * l, static_cast<long long>(p.h) * p.m[1], p.m[2], p.log2m[2], load, store, tw, z,
                     threadIdx.x, blockDim.x);
}
extern "C" __global__ void __launch_bounds__(256, FT_POISSON_LINE_MIN_BLOCKS)
    ft_poisson_inv_x(ft::PoissonLines p, long long pairs, const double* spec, long long spec_layer, double* out,
                     long long out_layer, const double* tw, int out_stride) {
  extern __shared__ __align__(16) double z[];  // 16-byte slots (poisson_get)
  const long long layer = blockIdx.x / pairs, pair = blockIdx.x % pairs;
  ft::poisson_inverse_x(p, pair, spec + layer * spec_layer, out + layer * out_layer * out_stride, tw, z, threadIdx.x,
                        blockDim.x, out_stride);
}
// The last axis (y in 2D and 2.5D, zeta in 3D) in one pass: `columns` adjacent lines of a layer per
// block; each line transformed forward (its first n values, zeros beyond), then per field component
// multiplied by the component's Green's spectrum and transformed back, its first n values stored to
// that component's buffer. The same butterflies, products and loads as the separate steps below (and
// the CPU's), without the spectrum's round trips through device memory between them. Shared memory:
// the forward lines, then the product lines (2 x columns x 2m doubles).
extern "C" __global__ void __launch_bounds__(256, FT_POISSON_CONVOLVE_MIN_BLOCKS)
    ft_poisson_convolve_last(ft::PoissonLines p, int axis, long long lines, int columns, const double* spec,
                             long long spec_layer, int components, const double* g0, const double* g1, const double* g2,
                             double* w0, double* w1, double* w2, const double* tw_fwd, const double* tw_inv) {
  extern __shared__ __align__(16) double z[];  // 16-byte slots (poisson_get)
  const int m = p.m[axis], log2m = p.log2m[axis], n = p.n[axis];
  const long long groups = (lines + columns - 1) / columns;
  const long long layer = blockIdx.x / groups, l0 = (blockIdx.x % groups) * columns;
  const int count = static_cast<int>(min(static_cast<long long>(columns), lines - l0));
  const long long stride = axis == 1 ? static_cast<long long>(p.h) : static_cast<long long>(p.h) * p.m[1];
  const long long start = axis == 1 ? ft::poisson_y_line(p, l0) : l0;  // complex index in the layer
  const double* s = spec + layer * spec_layer;
  double* zf = z;
  double* zc = z + 2 * m * columns;
  const int tid = threadIdx.x, nt = blockDim.x;
  // `columns` is a power of two: k's row and column by shift and mask (the last group's missing columns skipped).
  const int log2c = ft::poisson_log2(columns), cmask = columns - 1;
  for (int i = tid; i < 2 * m * count; i += nt) zf[i] = 0.0;
  __syncthreads();
  for (int k = tid; k < (n << log2c); k += nt) {  // a row of the columns at a time (coalesced)
    const int j = k >> log2c, c = k & cmask, at = ft::poisson_bit_reverse(j, log2m);
    if (c >= count) continue;
    const long long q = start + j * stride + c;
    ft::poisson_put(zf + 2 * m * c, ft::poisson_slot(at, log2m), s[2 * q], s[2 * q + 1]);
  }
  __syncthreads();
  ft::poisson_block_stages_lines(zf, tw_fwd, m, count, tid, nt);
  const double* green[3] = {g0, g1, g2};
  double* out[3] = {w0, w1, w2};
  for (int comp = 0; comp < components; ++comp) {
    const double* g = green[comp];
    for (int k = tid; k < (m << log2c); k += nt) {
      const int j = k >> log2c, c = k & cmask, at = ft::poisson_bit_reverse(j, log2m);
      if (c >= count) continue;
      double xr, xi, yr, yi;
      ft::poisson_get(zf + 2 * m * c, ft::poisson_slot(j, log2m), &xr, &xi);
      ft::poisson_imaginary_multiply(xr, xi, g[start + j * stride + c], &yr, &yi);
      ft::poisson_put(zc + 2 * m * c, ft::poisson_slot(at, log2m), yr, yi);
    }
    __syncthreads();
    ft::poisson_block_stages_lines(zc, tw_inv, m, count, tid, nt);
    double* w = out[comp] + layer * spec_layer;
    for (int k = tid; k < (n << log2c); k += nt) {
      const int j = k >> log2c, c = k & cmask;
      if (c >= count) continue;
      const long long q = start + j * stride + c;
      ft::poisson_get(zc + 2 * m * c, ft::poisson_slot(j, log2m), &w[2 * q], &w[2 * q + 1]);
    }
    __syncthreads();
  }
}
// The product with the imaginary Green's spectrum, every layer.
extern "C" __global__ void ft_poisson_multiply(const double* x, const double* g, double* y, long long count,
                                               long long layers) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * layers) return;
  ft::poisson_imaginary_multiply(x[2 * i], x[2 * i + 1], g[i % count], &y[2 * i], &y[2 * i + 1]);
}
// cuFFT path: the nodes into the zero-padded doubled grid, and back.
extern "C" __global__ void ft_poisson_pad(const double* rho, double* real, int n0, int n1, int n2, int m0, int m1,
                                          int m2, long long layers) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long per = static_cast<long long>(m0) * m1 * m2;
  if (i >= per * layers) return;
  const long long layer = i / per, r = i % per;
  const int ix = r % m0, iy = (r / m0) % m1, iz = r / (static_cast<long long>(m0) * m1);
  real[i] = (ix < n0 && iy < n1 && iz < n2)
                ? rho[layer * n0 * n1 * n2 + (static_cast<long long>(iz) * n1 + iy) * n0 + ix]
                : 0.0;
}
extern "C" __global__ void ft_poisson_unpad(const double* real, double* out, int n0, int n1, int n2, int m0, int m1,
                                            int m2, long long layers, int out_stride) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long per = static_cast<long long>(n0) * n1 * n2;
  if (i >= per * layers) return;
  const long long layer = i / per, r = i % per;
  const int ix = r % n0, iy = (r / n0) % n1, iz = r / (static_cast<long long>(n0) * n1);
  out[i * out_stride] =
      real[layer * static_cast<long long>(m0) * m1 * m2 + (static_cast<long long>(iz) * m1 + iy) * m0 + ix];
}

#endif  // FT_DEVICE_COMPILE
