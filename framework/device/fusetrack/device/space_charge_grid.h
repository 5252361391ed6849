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
//             imaginary Green's function spectrum. A GPU solve that applies these to the same lines
//             with the same twiddle tables gives the CPU's bits.
#pragma once
#include "fusetrack/device/collective.h"
#include "fusetrack/device/qualifiers.h"
#include "fusetrack/device/reduction.h"

namespace ft {

/// The field at `pos` (x, y[, zeta]) interpolated from the node values ex, ey[, ez] (node index as in
/// ChargeGridSpec; ez may be null, then e[2] = 0) with the deposit's cloud-in-cell weights, corners
/// summed in the deposit's order. Returns 0 (and e = 0) for a particle outside the grid, else 1.
FT_FUNCTION int charge_grid_field_at(const ChargeGridSpec& g, const double* ex, const double* ey, const double* ez,
                                     const double pos[3], double e[3]) {
  long long nodes[8];
  unsigned long long weights[8];
  e[0] = 0.0;
  e[1] = 0.0;
  e[2] = 0.0;
  const int corners = charge_deposit(g, pos, nodes, weights);
  if (corners == 0) return 0;
  // The weights add up to 2^(dims * weight_bits) exactly: one power-of-two factor (exact).
  double inv_unit = 1.0;
  for (int b = 0; b < g.dims * g.weight_bits; ++b) inv_unit *= 0.5;
  double sx = 0.0, sy = 0.0, sz = 0.0;
  for (int c = 0; c < corners; ++c) {
    const double w = static_cast<double>(weights[c]);
    sx += w * ex[nodes[c]];
    sy += w * ey[nodes[c]];
    if (ez) sz += w * ez[nodes[c]];
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

/// Two real lines a, b packed as z = a + i b and transformed (length m): their spectra at k
/// (0 <= k <= m/2), A = (Z_k + conj Z_{m-k}) / 2 and B = (Z_k - conj Z_{m-k}) / (2i).
FT_FUNCTION void poisson_split_pair(const double* z, int m, int k, double a[2], double b[2]) {
  const int mk = k == 0 ? 0 : m - k;
  const double zr = z[2 * k], zi = z[2 * k + 1];
  const double wr = z[2 * mk], wi = z[2 * mk + 1];
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

}  // namespace ft
