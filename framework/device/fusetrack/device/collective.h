// The per-particle and per-slice steps of collective elements, written once for the CPU backend
// and for the generated GPU kernels (fma off: bit-identical on both sides).
//
//  deposit    zeta -> (slice, integer weight): nearest bin, or linear (cloud-in-cell) weights in
//             fixed point, kProfileUnit per particle, so profile sums are exact integers and do
//             not depend on the order of summation (CPU threads, GPU atomics, MPI ranks);
//  solve      line density -> field: direct convolution summed in a fixed order, or a radix-2
//             FFT (Cooley-Tukey, decimation in time) whose butterflies both compilers evaluate in
//             the same order with the same twiddle table;
//  memory     damped resonant modes carried from turn to turn (multi-turn wake);
//  kick       the field interpolated linearly between slice centres at the particle's zeta.
#pragma once
#include "fusetrack/device/qualifiers.h"

namespace ft {

/// Fixed-point unit of one macroparticle in a profile: linear weights are multiples of 2^-24.
constexpr int kProfileWeightBits = 24;
constexpr unsigned long long kProfileUnit = 1ull << kProfileWeightBits;

#if defined(FT_DEVICE_COMPILE)
/// A hint that the word base[index] of global memory will be read soon: fetched into L1 without a
/// register (PTX prefetch.global.L1; generic addresses of global memory are global addresses).
template <class T>
__device__ __forceinline__ void prefetch_l1(const T* base, long long index) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(base + index));
}

/// Adds v to the 64-bit word `index` of a shared-memory array with native 32-bit atomics: the low
/// half with its carry detected from the returned old value, then the high half plus the carry.
/// The pair read back as one little-endian 64-bit word is the exact sum modulo 2^64, in any thread
/// order. (A 64-bit atomicAdd on shared memory is a compare-and-swap loop on sm_70..sm_90, which
/// serialises the threads of a warp that hit the same slice; the 32-bit add is one instruction.)
__device__ __forceinline__ void shared_add_u64(unsigned long long* words, int index, unsigned long long v) {
  unsigned int* const half = reinterpret_cast<unsigned int*>(words + index);
  const unsigned int low = static_cast<unsigned int>(v);
  const unsigned int old = atomicAdd(half, low);
  const unsigned int high = static_cast<unsigned int>(v >> 32) + (old + low < old ? 1u : 0u);
  if (high != 0u) atomicAdd(half + 1, high);
}
#endif

/// Slices of zeta between fixed cuts; inv_dz = n_slices / (zeta_max - zeta_min) is computed
/// once on the host, so both sides bin with the same number.
struct SliceGrid {
  int n_slices;
  int linear;       // 0: nearest bin, 1: cloud-in-cell
  double zeta_min;  // [m]
  double zeta_max;  // [m]
  double inv_dz;    // [1/m]
};

/// The slices that a particle at `zeta` deposits into (0, 1 or 2 of them) and their integer
/// weights, which add up to kProfileUnit for every particle between the cuts. Linear weights
/// are measured from the slice centres; in the outer half of the first and last slice the whole
/// weight stays in that slice, so no charge leaves the grid.
FT_FUNCTION int profile_deposit(const SliceGrid& g, double zeta, int bins[2], unsigned long long weights[2]) {
  if (!(zeta >= g.zeta_min && zeta < g.zeta_max)) return 0;
  const double u = (zeta - g.zeta_min) * g.inv_dz;  // slice coordinate in [0, n)
  const int last = g.n_slices - 1;
  if (!g.linear) {
    int k = static_cast<int>(floor(u));
    k = k < 0 ? 0 : (k > last ? last : k);
    bins[0] = k;
    weights[0] = kProfileUnit;
    return 1;
  }
  const double x = u - 0.5;  // relative to the slice centres
  if (!(x > 0.0)) {
    bins[0] = 0;
    weights[0] = kProfileUnit;
    return 1;
  }
  if (!(x < static_cast<double>(last))) {
    bins[0] = last;
    weights[0] = kProfileUnit;
    return 1;
  }
  const double lower = floor(x);
  const double frac = x - lower;  // exact
  unsigned long long right = static_cast<unsigned long long>(frac * static_cast<double>(kProfileUnit) + 0.5);
  if (right > kProfileUnit) right = kProfileUnit;
  bins[0] = static_cast<int>(lower);
  weights[0] = kProfileUnit - right;
  bins[1] = bins[0] + 1;
  weights[1] = right;
  return 2;
}

/// The field at `zeta`, interpolated linearly between the values at the slice centres
/// (`values` in slice order, zeta increasing); constant in the outer half slices; 0 outside the cuts.
FT_FUNCTION double slice_field_at(const double* values, const SliceGrid& g, double zeta) {
  if (!(zeta >= g.zeta_min && zeta < g.zeta_max)) return 0.0;
  const double x = (zeta - g.zeta_min) * g.inv_dz - 0.5;
  const int last = g.n_slices - 1;
  if (!(x > 0.0)) return values[0];
  if (!(x < static_cast<double>(last))) return values[last];
  const double lower = floor(x);
  const int k = static_cast<int>(lower);
  const double frac = x - lower;
  return values[k] + (values[k + 1] - values[k]) * frac;
}

/// Direct convolution at output r of n (time order): sum over r' = 0..n-1 in increasing order of
/// kernel[r - r' + n - 1] * lambda[r'], kernel holding lags -(n-1)..(n-1). Empty slices are
/// skipped (on both sides alike).
FT_FUNCTION double convolve_at(int r, int n, const double* lambda, const double* kernel) {
  double sum = 0.0;
  const double* k = kernel + r + n - 1;
  for (int j = 0; j < n; ++j) {
    const double l = lambda[j];
    if (l != 0.0) sum += k[-j] * l;
  }
  return sum;
}

/// Bit reversal of the lowest log2n bits of i.
FT_FUNCTION int bit_reverse(int i, int log2n) {
  int r = 0;
  for (int b = 0; b < log2n; ++b) {
    r = (r << 1) | (i & 1);
    i >>= 1;
  }
  return r;
}

/// Butterfly b (0 <= b < n/2) of the radix-2 stage with half-width `half` of an in-place
/// decimation-in-time FFT on interleaved complex data x (input in bit-reversed order).
/// twiddle[2k], twiddle[2k+1] = cos, -sin(2 pi k / n) for k < n/2.
FT_FUNCTION void fft_butterfly(double* x, const double* twiddle, int n, int half, int b) {
  const int pos = b & (half - 1);
  const int i = ((b - pos) << 1) + pos;
  const int j = i + half;
  const int t = pos * (n / (2 * half));
  const double wr = twiddle[2 * t], wi = twiddle[2 * t + 1];
  const double xr = x[2 * j], xi = x[2 * j + 1];
  const double tr = wr * xr - wi * xi;
  const double ti = wr * xi + wi * xr;
  const double ur = x[2 * i], ui = x[2 * i + 1];
  x[2 * i] = ur + tr;
  x[2 * i + 1] = ui + ti;
  x[2 * j] = ur - tr;
  x[2 * j + 1] = ui - ti;
}

/// Chunks of the fixed-order reductions (mode sums): thread c of kModeChunks sums its contiguous
/// chunk in order, then one thread adds the partial sums in order. The CPU does the same.
constexpr int kModeChunks = 256;

/// Partial sum of chunk c: sum of lambda[r] * e[r] (complex e interleaved) over the chunk.
FT_FUNCTION void mode_partial_sum(int c, int n, const double* lambda, const double* e, double* out_re,
                                  double* out_im) {
  const int len = (n + kModeChunks - 1) / kModeChunks;
  const int begin = c * len;
  const int end = begin + len < n ? begin + len : n;
  double sr = 0.0, si = 0.0;
  for (int r = begin; r < end; ++r) {
    const double l = lambda[r];
    if (l != 0.0) {
      sr += l * e[2 * r];
      si += l * e[2 * r + 1];
    }
  }
  *out_re = sr;
  *out_im = si;
}

/// Complex product (a * b), written out so that both compilers round it alike (no contraction).
FT_FUNCTION void complex_multiply(double ar, double ai, double br, double bi, double* out_re, double* out_im) {
  *out_re = ar * br - ai * bi;
  *out_im = ar * bi + ai * br;
}

}  // namespace ft
