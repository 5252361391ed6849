// Space charge on a grid, the per-element steps written once for the CPU and the generated GPU
// kernels (fma off: the same bits on both sides):
//
//  gather     the field at a particle from the nodes of a ChargeGridSpec grid with the cloud-in-cell
//             weights of the deposit (charge_deposit of fusetrack/device/reduction.h): the same
//             integer weights, so the self-force of a beam on itself sums to zero up to rounding;
//  transform  the steps of the reproducible Poisson solver (fusetrack/poisson.h, PoissonFft::
//             Reproducible): one radix-2 line transform (fft_butterfly of collective.h, stages in
//             order), the split of two real lines packed into one complex transform, the packing
//             of two Hermitian half spectra for the inverse, and the product with a purely
//             imaginary Green's function spectrum; and the line steps built from them (forward x of
//             a pair of rows, a strided complex line along y or zeta, inverse x of a pair of rows),
//             written for a block of `nt` threads sharing the line buffer z (thread `tid`; the
//             butterflies of a stage spread over the threads, FT_BLOCK_SYNC between stages). The
//             CPU calls them with nt = 1 (then the barrier is a no-op), the GPU kernels
//             (cuda_poisson.cpp) with one block per line: every value is computed by the same
//             arithmetic in the same order, so both give the same bits (fma off).
#pragma once
#include "fusetrack/device/collective.h"
#include "fusetrack/device/qualifiers.h"
#include "fusetrack/device/reduction.h"

#if defined(FT_DEVICE_COMPILE)
#define FT_BLOCK_SYNC() __syncthreads()
#else
#define FT_BLOCK_SYNC() ((void)0)  // the host runs a block as one thread (nt = 1)
#endif

namespace ft {

/// The field at `pos` (x, y[, zeta]) interpolated from the node values ex, ey[, ez] (node k's value at
/// ex[k * stride]: separate arrays with stride 1, or the components of a node side by side, stride 2 or 3,
/// as the GPU keeps them so that a corner's components share a memory sector; node index as in
/// ChargeGridSpec; ez may be null, then e[2] = 0) with the deposit's cloud-in-cell weights, corners summed
/// in the deposit's order (the same arithmetic for any stride). Returns 0 (and e = 0) for a particle
/// outside the grid, else 1.
FT_FUNCTION int charge_grid_field_at(const ChargeGridSpec& g, const double* ex, const double* ey, const double* ez,
                                     const double pos[3], double e[3], long long stride = 1) {
  long long nodes[8] = {0, 0, 0, 0, 0, 0, 0, 0};             // (initialised: the fixed-count loop below reads
  unsigned long long weights[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // past `corners` only behind a test)
  e[0] = 0.0;
  e[1] = 0.0;
  e[2] = 0.0;
  const int corners = charge_deposit(g, pos, nodes, weights);
  if (corners == 0) return 0;
  // The weights add up to 2^(dims * weight_bits) exactly: one power-of-two factor (exact).
  double inv_unit = 1.0;
  for (int b = 0; b < g.dims * g.weight_bits; ++b) inv_unit *= 0.5;
  double sx = 0.0, sy = 0.0, sz = 0.0;
#if defined(FT_DEVICE_COMPILE) && !defined(FT_DEVICE_FAST_MATH)
  // The GPU's 2D field, (E_x, E_y) of a node side by side in 16 aligned bytes: one read-only load per corner.
  // fma off only: on an H100 it made the PIC segment kernel 1.07x faster with fma off, 0.94x with fma on.
  if (stride == 2 && !ez && ey == ex + 1) {
    const double2* exy = reinterpret_cast<const double2*>(ex);
    FT_UNROLL
    for (int c = 0; c < 8; ++c) {
      if (c >= corners) continue;
      const double w = static_cast<double>(weights[c]);
      const double2 f = __ldg(exy + nodes[c]);
      sx += w * f.x;
      sy += w * f.y;
    }
    e[0] = sx * inv_unit;
    e[1] = sy * inv_unit;
    return 1;
  }
#endif
  FT_UNROLL
  for (int c = 0; c < 8; ++c) {  // fixed trip count: nodes and weights stay in registers on the GPU
    if (c >= corners) continue;
    const double w = static_cast<double>(weights[c]);
    const long long k = nodes[c] * stride;
    sx += w * ex[k];
    sy += w * ey[k];
    if (ez) sz += w * ez[k];
  }
  e[0] = sx * inv_unit;
  e[1] = sy * inv_unit;
  e[2] = sz * inv_unit;
  return 1;
}

/// A complete in-place radix-2 transform of n (a power of two) interleaved complex values already in
/// bit-reversed order: the stages in order, the butterflies of a stage independent (a GPU may run
/// them in parallel; each is the same arithmetic). `twiddle`: cos, -sin(2 pi k / n) for the forward
/// transform, cos, +sin for the inverse (unnormalised).
FT_FUNCTION void poisson_fft_line(double* x, const double* twiddle, int n) {
  for (int half = 1; half < n; half <<= 1)
    for (int b = 0; b < n / 2; ++b) fft_butterfly(x, twiddle, n, half, b);
}

/// log2 of a power of two m >= 1.
FT_FUNCTION int poisson_log2(int m) {
  int l = 0;
  while ((1 << l) < m) ++l;
  return l;
}

/// The slot (in complex values) that complex value e of a line of m = 2^log2m values takes in the line
/// buffer. The host keeps the natural order. The GPU XORs the low three bits of e with its bits 3-5 and (lines
/// of 512 and more) its top three bits, a permutation of the line: with 16-byte loads, a warp's bit-reversed scatters,
/// strided passes and consecutive runs then spread over the 32 shared-memory banks (8 values per 128 bytes).
/// Only where values sit changes, not what is computed: the same bits.
FT_FUNCTION int poisson_slot(int e, int log2m) {
#if defined(FT_DEVICE_COMPILE)
  return e ^ ((e >> 3) & 7) ^ (log2m >= 9 ? (e >> (log2m - 3)) & 7 : 0);
#else
  (void)log2m;
  return e;
#endif
}

/// Complex value in slot `slot` of a line buffer (one 16-byte access on the GPU).
FT_FUNCTION void poisson_get(const double* z, int slot, double* re, double* im) {
#if defined(FT_DEVICE_COMPILE)
  const double2 v = reinterpret_cast<const double2*>(z)[slot];
  *re = v.x;
  *im = v.y;
#else
  *re = z[2 * slot];
  *im = z[2 * slot + 1];
#endif
}
FT_FUNCTION void poisson_put(double* z, int slot, double re, double im) {
#if defined(FT_DEVICE_COMPILE)
  reinterpret_cast<double2*>(z)[slot] = make_double2(re, im);
#else
  z[2 * slot] = re;
  z[2 * slot + 1] = im;
#endif
}

/// Two real lines a, b packed as z = a + i b and transformed (length m = 2^log2m, a line buffer in the
/// slots of poisson_slot): their spectra at k (0 <= k <= m/2), A = (Z_k + conj Z_{m-k}) / 2 and
/// B = (Z_k - conj Z_{m-k}) / (2i).
FT_FUNCTION void poisson_split_pair(const double* z, int m, int log2m, int k, double a[2], double b[2]) {
  const int mk = k == 0 ? 0 : m - k;
  double zr, zi, wr, wi;
  poisson_get(z, poisson_slot(k, log2m), &zr, &zi);
  poisson_get(z, poisson_slot(mk, log2m), &wr, &wi);
  a[0] = 0.5 * (zr + wr);
  a[1] = 0.5 * (zi - wi);
  b[0] = 0.5 * (zi + wi);
  b[1] = 0.5 * (wr - zr);
}

/// The inverse of poisson_split_pair: the value at k (0 <= k < m) of Z = A + i B for two Hermitian
/// spectra given on their halves a, b (k = 0 .. m/2, interleaved complex); the imaginary parts of
/// the DC and Nyquist terms are taken as zero (those of a real line's spectrum), as FFTW's c2r does.
FT_FUNCTION void poisson_pair_spectrum(const double* a, const double* b, int m, int k, double z[2]) {
  const int h = m / 2;
  double ar, ai, br, bi;
  if (k <= h) {
    ar = a[2 * k];
    ai = a[2 * k + 1];
    br = b[2 * k];
    bi = b[2 * k + 1];
  } else {  // conjugates of the mirrored terms
    ar = a[2 * (m - k)];
    ai = -a[2 * (m - k) + 1];
    br = b[2 * (m - k)];
    bi = -b[2 * (m - k) + 1];
  }
  if (k == 0 || k == h) {
    ai = 0.0;
    bi = 0.0;
  }
  z[0] = ar - bi;
  z[1] = ai + br;
}

/// The product of a spectrum value x with the purely imaginary Green's function value i g.
FT_FUNCTION void poisson_imaginary_multiply(double xr, double xi, double g, double* out_re, double* out_im) {
  *out_re = -(g * xi);
  *out_im = g * xr;
}

/// bit_reverse(i, log2n) of collective.h in constant time (the same integers).
FT_FUNCTION int poisson_bit_reverse(int i, int log2n) {
  if (log2n == 0) return 0;
#if defined(FT_DEVICE_COMPILE)
  return static_cast<int>(__brev(static_cast<unsigned>(i)) >> (32 - log2n));
#else
  unsigned v = static_cast<unsigned>(i);
  v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
  v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
  v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
  v = ((v >> 8) & 0x00FF00FFu) | ((v & 0x00FF00FFu) << 8);
  v = (v >> 16) | (v << 16);
  return static_cast<int>(v >> (32 - log2n));
#endif
}

/// The shape of the reproducible transforms of one real block (one solve, or one zeta layer in 2.5D).
/// Spectra are kept on the half x axis, h complex values per x line, index (kz * m1 + ky) * h + kx.
struct PoissonLines {
  int n[3];      // extents of the real block: the nodes, or the transform lengths for a kernel (1 if unused)
  int m[3];      // transform lengths, powers of two (1 if unused)
  int log2m[3];  // their base-2 logarithms
  int h;         // m[0] / 2 + 1
};

/// Row pairs of the real block (rows r = iz * n1 + iy, two per complex x transform).
FT_FUNCTION long long poisson_row_pairs(const PoissonLines& p) {
  return (static_cast<long long>(p.n[1]) * p.n[2] + 1) / 2;
}

/// Twiddle w of a table (cos, sin interleaved): one 16-byte read-only load on the GPU.
FT_FUNCTION void poisson_twiddle(const double* tw, int w, double* wr, double* wi) {
#if defined(FT_DEVICE_COMPILE)
  const double2 v = __ldg(reinterpret_cast<const double2*>(tw) + w);
  *wr = v.x;
  *wi = v.y;
#else
  *wr = tw[2 * w];
  *wi = tw[2 * w + 1];
#endif
}

/// The radix-2 stages of `count` lines of m values (line c at z + 2 m c, bit-reversed order), spread over
/// the threads, three stages per pass: a thread takes the eight values a pass's butterflies combine (stride
/// half0, the pass's first half) into registers and applies the three stages' butterflies to them with
/// fft_butterfly's arithmetic and twiddles. The same operations on the same values as poisson_fft_line, stage
/// after stage: the same bits (the tests compare them), with one barrier and one round trip through shared
/// memory per pass instead of per stage. Values sit in the slots of poisson_slot (on the GPU a swizzle that
/// keeps the first pass's adjacent eight values per thread off a single bank). The GPU's form
/// (poisson_block_stages_lines); on the host, one thread, the stages one by one are faster.
///
/// Twiddles: value k of a group sits at base + k half0 with base = r (mod half0), r = t mod half0, so the
/// butterfly of stage st on value k uses position (base + k half0) mod (half0 2^st) = r + (k mod 2^st) half0:
/// 2^st distinct twiddles per stage, 7 per pass, each loaded once (12 butterflies share them).
FT_FUNCTION void poisson_stages_grouped_lines(double* z, const double* tw, int m, int count, int tid, int nt) {
  // m, half0, the group and the task count are powers of two: shifts and masks, not integer divisions.
  const int log2m = poisson_log2(m);
  int half0 = 1, log2h0 = 0;
  while (half0 < m) {
    int stages = 0, span = half0;
    while (stages < 3 && span < m) {
      span <<= 1;
      ++stages;
    }
    const int group = 1 << stages, log2tasks = log2m - stages, tasks = 1 << log2tasks;
    for (int task = tid; task < tasks * count; task += nt) {
      double* x = z + 2 * m * (task >> log2tasks);
      const int t = task & (tasks - 1), r = t & (half0 - 1), base = ((t >> log2h0) << (log2h0 + stages)) + r;
      double re[8], im[8];
#if defined(FT_DEVICE_COMPILE)
#pragma unroll
#endif
      for (int k = 0; k < 8; ++k)
        if (k < group) poisson_get(x, poisson_slot(base + k * half0, log2m), &re[k], &im[k]);
#if defined(FT_DEVICE_COMPILE)
#pragma unroll
#endif
      for (int st = 0; st < 3; ++st) {
        if (st >= stages) continue;
        const int dk = 1 << st, shift = log2m - 1 - log2h0 - st;  // position * (m / (2 half))
        double wr[4], wi[4];
#if defined(FT_DEVICE_COMPILE)
#pragma unroll
#endif
        for (int j = 0; j < 4; ++j)
          if (j < dk) poisson_twiddle(tw, (r + j * half0) << shift, &wr[j], &wi[j]);
#if defined(FT_DEVICE_COMPILE)
#pragma unroll
#endif
        for (int k = 0; k < 8; ++k)
          if (k < group && !(k & dk)) {  // values k and k + dk: i and i + half
            const int j = k & (dk - 1);
            const double xr = re[k + dk], xi = im[k + dk];
            const double tr = wr[j] * xr - wi[j] * xi;
            const double ti = wr[j] * xi + wi[j] * xr;
            const double ur = re[k], ui = im[k];
            re[k] = ur + tr;
            im[k] = ui + ti;
            re[k + dk] = ur - tr;
            im[k + dk] = ui - ti;
          }
      }
#if defined(FT_DEVICE_COMPILE)
#pragma unroll
#endif
      for (int k = 0; k < 8; ++k)
        if (k < group) poisson_put(x, poisson_slot(base + k * half0, log2m), re[k], im[k]);
    }
    FT_BLOCK_SYNC();
    half0 = span;
    log2h0 += stages;
  }
}

/// The radix-2 stages of `count` lines of m values (line c at z + 2 m c, bit-reversed order), butterflies
/// over the threads: poisson_stages_grouped_lines on the GPU, stage after stage on the host (the same bits).
FT_FUNCTION void poisson_block_stages_lines(double* z, const double* tw, int m, int count, int tid, int nt) {
#if defined(FT_DEVICE_COMPILE)
  poisson_stages_grouped_lines(z, tw, m, count, tid, nt);
#else
  for (int c = 0; c < count; ++c)
    for (int half = 1; half < m; half <<= 1)
      for (int b = tid; b < m / 2; b += nt) fft_butterfly(z + 2 * m * c, tw, m, half, b);
#endif
}

/// The radix-2 stages of a line of m values in z (bit-reversed order), butterflies over the threads.
FT_FUNCTION void poisson_block_stages(double* z, const double* tw, int m, int tid, int nt) {
  poisson_block_stages_lines(z, tw, m, 1, tid, nt);
}

/// Forward x transform of rows 2 pair and 2 pair + 1 of the real block `in` (row length n0, zero
/// beyond; the second row zero when absent), their half spectra written to `spec`.
FT_FUNCTION void poisson_forward_x(const PoissonLines& p, long long pair, const double* in, double* spec,
                                   const double* tw, double* z, int tid, int nt) {
  const int n0 = p.n[0], m0 = p.m[0];
  const long long rows = static_cast<long long>(p.n[1]) * p.n[2];
  const long long r0 = 2 * pair, r1 = 2 * pair + 1;
  for (int i = tid; i < 2 * m0; i += nt) z[i] = 0.0;
  FT_BLOCK_SYNC();
  for (int i = tid; i < n0; i += nt) {
    const int at = poisson_bit_reverse(i, p.log2m[0]);
    poisson_put(z, poisson_slot(at, p.log2m[0]), in[r0 * n0 + i], r1 < rows ? in[r1 * n0 + i] : 0.0);
  }
  FT_BLOCK_SYNC();
  poisson_block_stages(z, tw, m0, tid, nt);
  double* oa = spec + 2 * (((r0 / p.n[1]) * p.m[1] + r0 % p.n[1]) * p.h);
  double* ob = r1 < rows ? spec + 2 * (((r1 / p.n[1]) * p.m[1] + r1 % p.n[1]) * p.h) : oa;
  for (int k = tid; k < p.h; k += nt) {
    double a[2], b[2];
    poisson_split_pair(z, m0, p.log2m[0], k, a, b);
    oa[2 * k] = a[0];
    oa[2 * k + 1] = a[1];
    if (r1 < rows) {
      ob[2 * k] = b[0];
      ob[2 * k + 1] = b[1];
    }
  }
}

/// The start (in complex values from the spectrum's start) of y line l = iz * h + kx, stride h.
FT_FUNCTION long long poisson_y_line(const PoissonLines& p, long long l) {
  return (l / p.h) * p.m[1] * p.h + l % p.h;
}

/// One complex line of m values at col[stride * j] (complex units): the first `load` values (zeros
/// beyond) transformed, the first `store` written back.
FT_FUNCTION void poisson_line(double* col, long long stride, int m, int log2m, int load, int store, const double* tw,
                              double* z, int tid, int nt) {
  for (int i = tid; i < 2 * m; i += nt) z[i] = 0.0;
  FT_BLOCK_SYNC();
  for (int j = tid; j < load; j += nt) {
    const int at = poisson_bit_reverse(j, log2m);
    poisson_put(z, poisson_slot(at, log2m), col[2 * j * stride], col[2 * j * stride + 1]);
  }
  FT_BLOCK_SYNC();
  poisson_block_stages(z, tw, m, tid, nt);
  for (int j = tid; j < store; j += nt) {
    poisson_get(z, poisson_slot(j, log2m), &col[2 * j * stride], &col[2 * j * stride + 1]);
  }
}

/// Inverse x transform of rows 2 pair and 2 pair + 1 (their half spectra in `spec`, packed as A + i B),
/// the real rows (length n0) written to `out`, node k at out[k * out_stride]; a lone last row is packed
/// with itself, its imaginary output dropped.
FT_FUNCTION void poisson_inverse_x(const PoissonLines& p, long long pair, const double* spec, double* out,
                                   const double* tw, double* z, int tid, int nt, int out_stride = 1) {
  const int n0 = p.n[0], m0 = p.m[0];
  const long long rows = static_cast<long long>(p.n[1]) * p.n[2];
  const long long r0 = 2 * pair, r1 = 2 * pair + 1;
  const double* a = spec + 2 * (((r0 / p.n[1]) * p.m[1] + r0 % p.n[1]) * p.h);
  const double* b = r1 < rows ? spec + 2 * (((r1 / p.n[1]) * p.m[1] + r1 % p.n[1]) * p.h) : a;
  for (int k = tid; k < m0; k += nt) {
    double v[2];
    poisson_pair_spectrum(a, b, m0, k, v);
    const int at = poisson_bit_reverse(k, p.log2m[0]);
    poisson_put(z, poisson_slot(at, p.log2m[0]), v[0], v[1]);
  }
  FT_BLOCK_SYNC();
  poisson_block_stages(z, tw, m0, tid, nt);
  for (int i = tid; i < n0; i += nt) {
    double re, im;
    poisson_get(z, poisson_slot(i, p.log2m[0]), &re, &im);
    out[(r0 * n0 + i) * out_stride] = re;
    if (r1 < rows) out[(r1 * n0 + i) * out_stride] = im;
  }
}

}  // namespace ft
