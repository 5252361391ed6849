#pragma once
#include "fusetrack/device/portable_math.h"
#include "fusetrack/device/qualifiers.h"

// Counter-based random numbers and the sampling of matched longitudinal bunches, one source for the host
// compiler and NVRTC (the same bits on CPU and GPU with fma off).
//
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC11): a
// bijection of a 128-bit counter under a 64-bit key, ten rounds of two 32x32->64 multiplications (multipliers
// 0xD2511F53, 0xCD9E8D57) with the key bumped by the Weyl constants 0x9E3779B9, 0xBB67AE85 between rounds.
// Known-answer vectors: Random123's kat_vectors (tests/unit).
//
// A particle's numbers depend only on (seed, global particle index, draw): particle i is the same whichever
// rank generates it, in whatever order, on the CPU or the GPU. Key = the seed's two 32-bit halves; counter =
// (index low, index high, draw, 0). Uniform doubles take the 53 high bits of a 64-bit word (exact in double);
// normals are Box-Muller with ft::portable::log / cos (correctly rounded + - * / sqrt otherwise), so that
// they too are bitwise the same on host and device.

namespace ft {

struct ft_philox_block {
  unsigned int v[4];
};

FT_FUNCTION ft_philox_block ft_philox4x32_10(ft_philox_block counter, unsigned int key0, unsigned int key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    const unsigned long long p0 = static_cast<unsigned long long>(0xD2511F53u) * counter.v[0];
    const unsigned long long p1 = static_cast<unsigned long long>(0xCD9E8D57u) * counter.v[2];
    const unsigned int hi0 = static_cast<unsigned int>(p0 >> 32), lo0 = static_cast<unsigned int>(p0);
    const unsigned int hi1 = static_cast<unsigned int>(p1 >> 32), lo1 = static_cast<unsigned int>(p1);
    ft_philox_block next;
    next.v[0] = hi1 ^ counter.v[1] ^ key0;
    next.v[1] = lo1;
    next.v[2] = hi0 ^ counter.v[3] ^ key1;
    next.v[3] = lo0;
    counter = next;
  }
  return counter;
}

/// Four 32-bit words of draw `draw` of particle `index` under `seed`.
FT_FUNCTION ft_philox_block ft_particle_random(unsigned long long seed, unsigned long long index, unsigned int draw) {
  ft_philox_block c;
  c.v[0] = static_cast<unsigned int>(index);
  c.v[1] = static_cast<unsigned int>(index >> 32);
  c.v[2] = draw;
  c.v[3] = 0u;
  return ft_philox4x32_10(c, static_cast<unsigned int>(seed), static_cast<unsigned int>(seed >> 32));
}

/// A uniform double in [0, 1) from the 53 high bits of the word (hi, lo).
FT_FUNCTION double ft_uniform53(unsigned int hi, unsigned int lo) {
  const unsigned long long w = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<double>(w >> 11) * 0x1.0p-53;
}

/// A standard normal by Box-Muller (the cosine branch) from two uniforms in [0, 1).
FT_FUNCTION double ft_box_muller(double u1, double u2) {
  const double one_minus = 1.0 - u1;  // (0, 1]: the logarithm stays finite
  const double r = sqrt(-2.0 * ft::portable::log(one_minus));
  return r * ft::portable::cos(6.283185307179586 * u2);
}

/// Two independent standard normals by Box-Muller (both branches) from two uniforms in [0, 1): r cos(2 pi u2),
/// bitwise ft_box_muller(u1, u2), and r sin(2 pi u2) (ft::portable::sincos gives sin and cos as sin and cos do).
FT_FUNCTION void ft_box_muller_pair(double u1, double u2, double* g1, double* g2) {
  const double one_minus = 1.0 - u1;
  const double r = sqrt(-2.0 * ft::portable::log(one_minus));
  double s, c;
  ft::portable::sincos(6.283185307179586 * u2, &s, &c);
  *g1 = r * c;
  *g2 = r * s;
}

/// The first index j in [0, n] with a[j] > value (a increasing): std::upper_bound.
FT_FUNCTION int ft_upper_bound(const double* a, int n, double value) {
  int lo = 0, count = n;
  while (count > 0) {
    const int step = count / 2;
    if (!(value < a[lo + step])) {
      lo += step + 1;
      count -= step + 1;
    } else {
      count = step;
    }
  }
  return lo;
}

/// Inverse CDF of a piecewise-linear non-negative density p on the increasing grid x (n points) with
/// cumulative mass cum (cum[0] = 0, trapezoidal): the x at which the mass is u * cum[n - 1], exact for the
/// linear density of the segment, mass(t) = h (p0 t + (p1 - p0) t^2 / 2).
FT_FUNCTION double ft_piecewise_linear_quantile(const double* x, const double* p, const double* cum, int n, double u) {
  const double target = u * cum[n - 1];
  // j: the first index with cum[j] > target, clamped to [1, n - 1].
  const int lo = ft_upper_bound(cum, n, target);
  int j = lo < 1 ? 1 : (lo > n - 1 ? n - 1 : lo);
  while (j > 1 && cum[j] == cum[j - 1] && cum[j - 1] >= target) --j;  // skip empty segments
  const double h = x[j] - x[j - 1];
  const double p0 = p[j - 1], p1 = p[j];
  const double r = (target - cum[j - 1]) / h;  // p0 t + (p1 - p0) t^2 / 2 = r
  double t = 0.0;
  const double disc = p0 * p0 + 2.0 * (p1 - p0) * r;
  const double denom = p0 + sqrt(disc > 0.0 ? disc : 0.0);
  if (denom > 0.0) t = 2.0 * r / denom;
  t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
  return x[j - 1] + t * h;
}

/// Linear interpolation of y(x) at t (x increasing, n points), clamped at the ends.
FT_FUNCTION double ft_interpolate(const double* x, const double* y, int n, double t) {
  if (t <= x[0]) return y[0];
  if (t >= x[n - 1]) return y[n - 1];
  const int j = ft_upper_bound(x, n, t);
  const double w = (t - x[j - 1]) / (x[j] - x[j - 1]);
  return y[j - 1] + (y[j] - y[j - 1]) * w;
}

/// The tables of a matched longitudinal bunch (fusetrack/longitudinal.h): the line density on a grid and, for
/// binomial bunches, the potential and the distribution of delta / delta_K.
struct ft_longitudinal_sampler {
  const double* zeta;        // grid [m], n points
  const double* density;     // line density lambda on the grid
  const double* cumulative;  // its trapezoidal integral from the first point
  const double* potential;   // U [m] (binomial)
  int n;
  int gaussian;  // 1: delta ~ N(0, sigma_delta); 0: binomial
  double sigma_delta;
  double k_max;          // binomial: K_max [m]
  double inv_ac;         // 1 / (|eta| C) [1/m]
  const double* u_grid;  // binomial: delta / delta_K on [-1, 1], its density, cumulative
  const double* u_density;
  const double* u_cumulative;
  int u_n;
};

/// zeta and delta of particle `index` (draws 0 and 1 of its Philox stream).
FT_FUNCTION void ft_sample_longitudinal(const ft_longitudinal_sampler& s, unsigned long long seed,
                                        unsigned long long index, double* zeta, double* delta) {
  const ft_philox_block a = ft_particle_random(seed, index, 0u);
  const double z = ft_piecewise_linear_quantile(s.zeta, s.density, s.cumulative, s.n, ft_uniform53(a.v[0], a.v[1]));
  const double u = ft_uniform53(a.v[2], a.v[3]);
  if (s.gaussian) {
    const ft_philox_block b = ft_particle_random(seed, index, 1u);
    *delta = s.sigma_delta * ft_box_muller(u, ft_uniform53(b.v[0], b.v[1]));
  } else {
    const double uk = ft_interpolate(s.zeta, s.potential, s.n, z);
    const double room = s.k_max - uk;
    const double dk = sqrt(2.0 * (room > 0.0 ? room : 0.0) * s.inv_ac);
    *delta = dk * ft_piecewise_linear_quantile(s.u_grid, s.u_density, s.u_cumulative, s.u_n, u);
  }
  *zeta = z;
}

}  // namespace ft
