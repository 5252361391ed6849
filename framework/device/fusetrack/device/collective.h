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

/// One radix-2 butterfly on the complex values u = a[0..1], x = b[0..1] with twiddle w:
/// a <- u + w x, b <- u - w x (written out so that both compilers round it alike).
FT_FUNCTION void fft_butterfly_pair(double* a, double* b, double wr, double wi) {
  const double xr = b[0], xi = b[1];
  const double tr = wr * xr - wi * xi;
  const double ti = wr * xi + wi * xr;
  const double ur = a[0], ui = a[1];
  a[0] = ur + tr;
  a[1] = ui + ti;
  b[0] = ur - tr;
  b[1] = ui - ti;
}

/// Butterfly b (0 <= b < n/2) of the radix-2 stage with half-width `half` of an in-place
/// decimation-in-time FFT on interleaved complex data x (input in bit-reversed order).
/// twiddle[2k], twiddle[2k+1] = cos, -sin(2 pi k / n) for k < n/2.
FT_FUNCTION void fft_butterfly(double* x, const double* twiddle, int n, int half, int b) {
  const int pos = b & (half - 1);
  const int i = ((b - pos) << 1) + pos;
  const int t = pos * (n / (2 * half));
  fft_butterfly_pair(x + 2 * i, x + 2 * (i + half), twiddle[2 * t], twiddle[2 * t + 1]);
}

/// The stages one GPU launch runs in shared memory (fusetrack_fft_stages): `stages` radix-2 stages
/// from half-width 2^first_log2 on, on sets of 2^stages values (see fft_set_butterfly), sets_per_block
/// sets per block.
struct FftStageGroup {
  int first_log2, stages, sets_per_block;
};
constexpr int kFftGroupLog2 = 11;  // 2048 complex values (32 KiB of shared memory) per block

/// The group of stages that follows the first `done` stages of an FFT of 2^log2n values: the first
/// kFftGroupLog2 stages on contiguous blocks, then groups of at most 7 stages on sets at stride
/// 2^done, 2^(kFftGroupLog2 - stages) sets per block with consecutive low bits (at least 16: the
/// loads of a warp are runs of consecutive values).
FT_FUNCTION FftStageGroup fft_stage_group(int log2n, int done) {
  FftStageGroup g;
  g.first_log2 = done;
  if (done == 0) {
    g.stages = log2n < kFftGroupLog2 ? log2n : kFftGroupLog2;
    g.sets_per_block = 1;
  } else {
    g.stages = log2n - done < 7 ? log2n - done : 7;
    g.sets_per_block = 1 << (kFftGroupLog2 - g.stages);
  }
  return g;
}

/// Index of value j of set q in a group from stage first_log2 with `stages` stages: q's low bits
/// (below first_log2), j, then q's other bits above the group's bits.
FT_FUNCTION int fft_set_index(int q, int j, int first_log2, int stages) {
  return (q & ((1 << first_log2) - 1)) + (j << first_log2) + ((q >> first_log2) << (first_log2 + stages));
}

/// Radix-2 stages with half-widths 2^first_log2 .. 2^(first_log2 + stages - 1) of the same FFT on
/// one "set": the 2^stages values x[base + j 2^first_log2] (base without bits first_log2 ..
/// first_log2 + stages - 1), which those stages combine only among themselves. `values` holds them
/// as values[2 (j * set_stride + lane)], interleaved complex; `lane` selects one of several sets
/// kept side by side. The butterflies of ft::fft_butterfly, so the values are the same bits; the
/// GPU runs groups of stages so in shared memory (one launch per group instead of per stage).
/// Butterfly `k` (0 <= k < 2^(stages-1)) of stage `stage` (0-based within the group).
FT_FUNCTION void fft_set_butterfly(double* values, int set_stride, int lane, const double* twiddle, int n,
                                   int first_log2, int base, int stage, int k) {
  const int half_local = 1 << stage;
  const int pos_local = k & (half_local - 1);
  const int jl = ((k - pos_local) << 1) + pos_local;
  // The position within the global stage's half: the base's low bits and the set's own bits.
  const int half = half_local << first_log2;
  const int pos = (base & ((1 << first_log2) - 1)) + (pos_local << first_log2);
  const int t = pos * (n / (2 * half));
  fft_butterfly_pair(values + 2 * (jl * set_stride + lane), values + 2 * ((jl + half_local) * set_stride + lane),
                     twiddle[2 * t], twiddle[2 * t + 1]);
}

/// Chunks of the fixed-order reductions (mode sums): thread c of kModeChunks sums its contiguous
/// chunk in order, then one thread adds the partial sums in order. The CPU does the same.
constexpr int kModeChunks = 256;

/// Partial sum of chunk c: sum of lambda[r] * e[r] (complex e interleaved) over the chunk.
FT_FUNCTION void mode_partial_sum(int c, int n, const double* lambda, const double* e, double* out_re, double* out_im) {
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

/// One turn of a resonant mode (W(t) = Re(c e^{st})) with this turn's sum S = sum_r lambda_r e^{-s tau_r}:
/// the amplitude of this turn's field, A = M - rho S (the memory M of earlier turns, less the images
/// of this turn's wake that the frequency method's circular convolution wraps around its window:
/// rho = e^{sT} / (1 - e^{sT}), 0 for the time method), then M <- e^{s T0} (M + S). Complex values
/// interleaved (re, im).
FT_FUNCTION void mode_step(double* memory, const double* wrap, const double* turn, double sr, double si,
                           double* amplitude) {
  double wr, wi;
  complex_multiply(wrap[0], wrap[1], sr, si, &wr, &wi);
  amplitude[0] = memory[0] - wr;
  amplitude[1] = memory[1] - wi;
  double nr, ni;
  complex_multiply(turn[0], turn[1], memory[0] + sr, memory[1] + si, &nr, &ni);
  memory[0] = nr;
  memory[1] = ni;
}

}  // namespace ft
