#pragma once
#include "fusetrack/device/qualifiers.h"

// Deterministic double-precision elementary functions for element code (reached through ft_sin,
// ... in math.h): sin, cos, tan, sincos, asin, acos, atan, atan2, exp, log, sinh, cosh.
//
// The host compiler (x86-64, -ffp-contract=off, no fast-math) and NVRTC (--fmad=false) give
// bit-identical results: the code uses only operations that both round correctly (+ - * /,
// sqrt), fabs, comparisons, integer arithmetic, double <-> integer conversions of integral
// values and exact bit reinterpretation. No C math library, no long double, no FMA, no tables
// (a few dozen named constants). Every expression is written in the order it is evaluated in.
//
// Accuracy: largest error seen against a quad-precision reference, 1-4 million samples per
// function (tests/unit/test_portable_math.cpp checks <= 2 ulp from the C library and <= 1 ulp
// from the long-double one):
//   sin, cos, tan  0.79, 0.78, 0.91 ulp for |x| <= 1e9, the doubles nearest to multiples of pi/2
//                  included. The reduction keeps ~159 - log2|x| bits: enough for the worst
//                  cancellations up to |x| ~ 2^42 and for typical arguments up to ~2^90; beyond
//                  ~2^100 the results stay deterministic and within range but have no correct
//                  digits (tracking phases are small).
//   exp            0.62 ulp; +inf above 709.78; results below 2^-1022 (x < -708.40) are
//                  subnormal (error 0.77 of the subnormal spacing); +0 below -745.13.
//   log            0.65 ulp on (0, +inf], subnormals included; log(+-0) = -inf, log(x < 0) = NaN.
//   atan, atan2    0.53, 0.52 ulp; atan2 follows C99 Annex F for signed zeros and infinities.
//   asin, acos     0.54, 0.52 ulp on [-1, 1]; NaN outside.
//   sinh, cosh     0.63 ulp; +-inf beyond |x| ~ 710.48 (no premature overflow).
// Odd functions keep the sign of zero. A NaN result is always the canonical quiet NaN
// (0x7ff8000000000000), so that its bits agree between host and device too.
//
// Building blocks: Knuth's TwoSum, Dekker's Fast2Sum and exact product (Dekker 1971, with
// Veltkamp's split) give exact rounding errors, so that reduced arguments and results are carried
// as unevaluated double-double sums and rounded once at the end. Polynomials are truncated Taylor
// (or atanh / arctan) series with the exact rational coefficients rounded to double, with enough
// terms that the truncation error is below 2^-57 relative.

#ifndef FT_DEVICE_COMPILE
#include <string.h>  // memcpy for the host-side bit casts
static_assert(sizeof(unsigned long long) == 8 && sizeof(double) == 8, "64-bit double and long long expected");
#endif

namespace ft {
namespace portable {
namespace detail {

// ---- bit access -------------------------------------------------------------------------------

FT_FUNCTION unsigned long long to_bits(double x) {
#ifdef FT_DEVICE_COMPILE
  return static_cast<unsigned long long>(__double_as_longlong(x));
#else
  unsigned long long u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

FT_FUNCTION double from_bits(unsigned long long u) {
#ifdef FT_DEVICE_COMPILE
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

constexpr double kMaxDouble = 0x1.fffffffffffffp+1023;

FT_FUNCTION double quiet_nan() { return from_bits(0x7ff8000000000000ULL); }
FT_FUNCTION double infinity() { return from_bits(0x7ff0000000000000ULL); }
FT_FUNCTION bool sign_bit(double x) { return (to_bits(x) >> 63) != 0; }

// 2^k for -1022 <= k <= 1023, built from its bits.
FT_FUNCTION double pow2i(int k) { return from_bits(static_cast<unsigned long long>(k + 1023) << 52); }

// y * 2^k with a single rounding, for 0.5 <= |y| < 2 and -1100 <= k <= 1100: the first product
// is exact (stays normal), the second rounds once, to +-inf on overflow or to a subnormal / 0.
FT_FUNCTION double scale_pow2(double y, int k) {
  const int k1 = k / 2;
  return (y * pow2i(k1)) * pow2i(k - k1);
}

// An integral double near t: round-to-nearest-even for |t| < 2^52 (the usual "add and subtract
// 1.5 * 2^52" trick), t itself above, where every double is an integer.
FT_FUNCTION double round_to_integer(double t) {
  const double a = ::fabs(t);
  if (a < 0x1p51) return (t + 0x1.8p52) - 0x1.8p52;
  if (a < 0x1p52) return (t + 0x1.8p53) - 0x1.8p53;
  return t;
}

// k mod 4 (in 0..3) for an integral double k.
FT_FUNCTION int mod4(double k) {
  if (::fabs(k) >= 0x1p62) return 0;  // a multiple of 2^10
  return static_cast<int>(static_cast<long long>(k) & 3);
}

// ---- error-free transformations -----------------------------------------------------------------

// s + e == a + b exactly, s = fl(a + b) (Knuth's TwoSum, no condition on a, b).
FT_FUNCTION void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bv = s - a;
  e = (a - (s - bv)) + (b - bv);
}

// s + e == a + b exactly, s = fl(a + b); needs |a| >= |b| or a == 0 (Dekker's Fast2Sum).
FT_FUNCTION void fast_two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  e = b - (s - a);
}

// a == hi + lo, each with at most 26 significant bits (Veltkamp's split); |a| < 2^995.
FT_FUNCTION void split(double a, double& hi, double& lo) {
  const double c = 134217729.0 * a;  // 2^27 + 1
  hi = c - (c - a);
  lo = a - hi;
}

// p + e == a * b exactly, p = fl(a * b) (Dekker's product); |a|, |b| < 2^995 and no underflow.
FT_FUNCTION void two_prod(double a, double b, double& p, double& e) {
  p = a * b;
  double ah, al, bh, bl;
  split(a, ah, al);
  split(b, bh, bl);
  e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
}

// z + zl == h * h exactly, z = fl(h * h), for 2^-480 <= |h| < 2^995. Where Dekker's product is
// exact, so is the fused multiply-add's remainder h * h - z: on the GPU the fma gives the same bits
// in 2 operations instead of 17. The host keeps Dekker's form (no fma reaches the CPU code).
FT_FUNCTION void two_square(double h, double& z, double& zl) {
#ifdef FT_DEVICE_COMPILE
  const unsigned exponent = (static_cast<unsigned>(__double2hiint(h)) >> 20) & 0x7ffu;
  if (exponent - (1023u - 480u) <= 1474u) {  // 2^-480 <= |h| < 2^995, on the exponent bits
    z = h * h;
    zl = ::fma(h, h, -z);
    return;
  }
#endif
  two_prod(h, h, z, zl);
}

// (nh + nl) / (dh + dl) as qh + ql (|ql| <~ ulp(qh)), for |dl| <= ulp(dh).
FT_FUNCTION void dd_div(double nh, double nl, double dh, double dl, double& qh, double& ql) {
  qh = nh / dh;
  double p, e;
  two_prod(qh, dh, p, e);
  ql = ((((nh - p) - e) + nl) - qh * dl) / dh;
}

// Horner's scheme, c0 + x (c1 + x (c2 + ...)), in exactly that order.
FT_FUNCTION double horner(double, double c) { return c; }
template <class... C>
FT_FUNCTION double horner(double x, double c0, double c1, C... rest) {
  return c0 + x * horner(x, c1, rest...);
}

// ---- sin / cos / tan ----------------------------------------------------------------------------

constexpr double kPio4 = 0x1.921fb54442d18p-1;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// pi/2 in four parts of 33, 33, 29 and 53 bits (Cody & Waite): k * part is exact for k < 2^20.
constexpr double kPio2Cw1 = 0x1.921fb544p+0;
constexpr double kPio2Cw2 = 0x1.0b4611a6p-34;
constexpr double kPio2Cw3 = 0x1.3198a2ep-69;
constexpr double kPio2Cw4 = 0x1.b839a252049c1p-104;
// pi/2 = P1 + P2 + P3 (159 bits), each part pre-split into 26-bit halves for Dekker's product.
constexpr double kPio2P1 = 0x1.921fb54442d18p+0, kPio2P1h = 0x1.921fb58p+0, kPio2P1l = -0x1.dde974p-27;
constexpr double kPio2P2 = 0x1.1a62633145c07p-54, kPio2P2h = 0x1.1a62630p-54, kPio2P2l = 0x1.8a2e038p-81;
constexpr double kPio2P3 = -0x1.f1976b7ed8fbcp-110;

// p + e == k * c exactly, for c == ch + cl pre-split into <= 26-bit halves: k is split by
// truncating its significand (26 + 27 bits), which never overflows, whatever the size of k.
FT_FUNCTION void two_prod_presplit(double k, double c, double ch, double cl, double& p, double& e) {
  p = k * c;
  const double kh = from_bits(to_bits(k) & 0xfffffffff8000000ULL);
  const double kl = k - kh;
  e = ((kh * ch - p) + kh * cl + kl * ch) + kl * cl;
}

// r = rh + rl -= k * pi/2 with pi/2 to 159 bits, for an integral k of the sign of rh with
// |rh - k pi/2| <~ pi/4 + |k| 2^-52 (k = round(rh * 2/pi)).
FT_FUNCTION void subtract_k_pio2(double k, double& rh, double& rl) {
  double p1, e1, p2, e2;
  two_prod_presplit(k, kPio2P1, kPio2P1h, kPio2P1l, p1, e1);
  two_prod_presplit(k, kPio2P2, kPio2P2h, kPio2P2l, p2, e2);
  const double a = rh - p1;  // exact (Sterbenz)
  double b, f1, c, f2;
  two_sum(a, -e1, b, f1);
  two_sum(b, -p2, c, f2);
  const double lo = ((((f1 + f2) + rl) - e2) - k * kPio2P3);
  two_sum(c, lo, rh, rl);
}

// Argument reduction: ax (finite, >= 0) == n pi/2 + r (mod 2 pi), r = rh + rl with
// |rh| <= ~pi/4 and |rl| <= ulp(rh). Returns n mod 4.
//  - ax <= pi/4: r = ax.
//  - k = round(ax 2/pi) < 2^20 (ax < ~1.6e6): Cody & Waite (1980) with a 4-part (160-bit)
//    pi/2; the first product and difference are exact, the other rounding errors are kept with
//    TwoSum, so r has an absolute error ~2^-130: more than 65 correct bits even where r cancels
//    down to ~2^-60 (the doubles closest to multiples of pi/2).
//  - larger: subtract k pi/2 with Dekker's exact products and a 3-part (159-bit) pi/2, repeated
//    until k == 0 (once below 2^50; more for huge |x|, where k is itself inexact). The absolute
//    error of r grows as |x| 2^-159: fine for the worst cancellations up to |x| ~ 2^42 and for
//    typical arguments up to ~2^90; beyond ~2^100, r is deterministic but meaningless.
FT_FUNCTION int reduce_pio2(double ax, double& rh, double& rl) {
  if (ax <= kPio4) {
    rh = ax;
    rl = 0.0;
    return 0;
  }
  const double k = round_to_integer(ax * kTwoOverPi);
  if (k < 0x1p20) {
    const double t = ax - k * kPio2Cw1;  // exact
    double s1, e1, s2, e2;
    two_sum(t, -(k * kPio2Cw2), s1, e1);
    two_sum(s1, -(k * kPio2Cw3), s2, e2);
    two_sum(s2, (e1 + e2) - k * kPio2Cw4, rh, rl);
    return static_cast<int>(k) & 3;
  }
  rh = ax;
  rl = 0.0;
  int n = 0;
  for (int i = 0; i < 40; ++i) {  // 1 pass below 2^50, at most ~20 for the largest doubles
    const double kk = round_to_integer(rh * kTwoOverPi);
    if (kk == 0.0) break;
    n = (n + mod4(kk)) & 3;
    subtract_k_pio2(kk, rh, rl);
  }
  return n;
}

// Taylor coefficients (-1)^n / (2n+1)!, n = 1..8, and (-1)^n / (2n)!, n = 2..8. On |r| <= pi/4
// the first omitted terms are < 2^-60 (sin) and < 2^-58 (cos) relative.
constexpr double kS3 = -0.16666666666666666, kS5 = 0.008333333333333333, kS7 = -0.0001984126984126984,
                 kS9 = 2.7557319223985893e-06, kS11 = -2.505210838544172e-08, kS13 = 1.6059043836821613e-10,
                 kS15 = -7.647163731819816e-13, kS17 = 2.8114572543455206e-15;
constexpr double kC4 = 0.041666666666666664, kC6 = -0.001388888888888889, kC8 = 2.48015873015873e-05,
                 kC10 = -2.755731922398589e-07, kC12 = 2.08767569878681e-09, kC14 = -1.1470745597729725e-11,
                 kC16 = 4.779477332387385e-14;

// sin(h + l) ~= a + b, for |h| <= ~pi/4, |l| <= ulp(h): sin(h) + l cos(h), with |b| <= 0.11 |a|.
FT_FUNCTION void sin_kernel(double h, double l, double& a, double& b) {
  const double z = h * h;
  const double p = horner(z, kS3, kS5, kS7, kS9, kS11, kS13, kS15, kS17);
  a = h;
  b = (h * z) * p + l * (1.0 - 0.5 * z);
}

// cos(h + l) ~= a + b, same domain: cos(h) - l sin(h). h^2 is formed exactly and the rounding
// error of 1 - h^2/2 is recovered, so the result is within ~2^-56 before the final rounding.
FT_FUNCTION void cos_kernel(double h, double l, double& a, double& b) {
  double z, zl;
  two_square(h, z, zl);
  const double hz = 0.5 * z;
  a = 1.0 - hz;
  const double e = (1.0 - a) - hz;  // exact
  const double q = horner(z, kC4, kC6, kC8, kC10, kC12, kC14, kC16);
  b = e + (((z * z) * q - 0.5 * zl) - h * l);
}

// ---- exp ----------------------------------------------------------------------------------------

constexpr double kInvLn2 = 0x1.71547652b82fep+0;
// ln 2 = kLn2Hi + kLn2Lo: kLn2Hi has 42 bits, so k * kLn2Hi is exact for |k| < 2^11.
constexpr double kLn2Hi = 0x1.62e42fefa38p-1;
constexpr double kLn2Lo = 0x1.ef35793c7673p-45;
// 1/n!, n = 3..13; on |r| <= ln2/2 the first omitted term is < 2^-57 relative.
constexpr double kE3 = 0.16666666666666666, kE4 = 0.041666666666666664, kE5 = 0.008333333333333333,
                 kE6 = 0.001388888888888889, kE7 = 0.0001984126984126984, kE8 = 2.48015873015873e-05,
                 kE9 = 2.7557319223985893e-06, kE10 = 2.755731922398589e-07, kE11 = 2.505210838544172e-08,
                 kE12 = 2.08767569878681e-09, kE13 = 1.6059043836821613e-10;
constexpr double kE15 = 7.647163731819816e-13;  // sinh's series only

// sinh(x) / x - 1 = z/3! + z^2/5! + ... + z^7/15!, z = x^2.
FT_FUNCTION double sinh_series(double z) { return z * horner(z, kE3, kE5, kE7, kE9, kE11, kE13, kE15); }

// exp(x) == (yh + yl) 2^k with yh in [~0.7, ~1.42], |yl| <= ulp(yh)/2, relative error ~2^-57;
// for -746 <= x <= 711. k = round(x / ln2), r = x - k ln2 (Cody & Waite, 2-part ln 2, the
// rounding error of r kept by TwoSum), exp(r) = 1 + r + r^2 (1/2 + r/6 + ...) with 1 + r exact
// as a double-double.
FT_FUNCTION void exp_core(double x, int& k, double& yh, double& yl) {
  const double kd = round_to_integer(x * kInvLn2);
  k = static_cast<int>(kd);
  const double hi = x - kd * kLn2Hi;  // exact
  double rh, rl;
  two_sum(hi, -(kd * kLn2Lo), rh, rl);
  const double q = horner(rh, kE3, kE4, kE5, kE6, kE7, kE8, kE9, kE10, kE11, kE12, kE13);
  const double small = (rh * rh) * (0.5 + rh * q);
  double s, e;
  fast_two_sum(1.0, rh, s, e);
  fast_two_sum(s, small + ((e + rl) + rl * rh), yh, yl);
}

// e^|x| and e^-|x| as double-doubles, for 2^-26 <= |x| <= 40 (used by sinh and cosh).
FT_FUNCTION void exp_pair(double ax, double& eh, double& el, double& rh, double& rl) {
  int k;
  double yh, yl;
  exp_core(ax, k, yh, yl);
  const double sc = pow2i(k);
  eh = yh * sc;  // exact
  el = yl * sc;
  rh = 1.0 / eh;
  double p, e;
  two_prod(rh, eh, p, e);
  rl = (((1.0 - p) - e) - rh * el) / eh;
}

// ---- log ----------------------------------------------------------------------------------------

constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;
// 2/(2n+1), n = 1..10: log(f) = 2 atanh(s) = 2s + s R(s^2), s = (f-1)/(f+1), |s| <= 0.1716;
// the first omitted term is < 2^-60 relative.
constexpr double kL1 = 0.6666666666666666, kL2 = 0.4, kL3 = 0.2857142857142857, kL4 = 0.2222222222222222,
                 kL5 = 0.18181818181818182, kL6 = 0.15384615384615385, kL7 = 0.13333333333333333,
                 kL8 = 0.11764705882352941, kL9 = 0.10526315789473684, kL10 = 0.09523809523809523;

// R(z) = 2z/3 + 2z^2/5 + ... + 2z^10/21, z = s^2.
FT_FUNCTION double log_series(double z) { return z * horner(z, kL1, kL2, kL3, kL4, kL5, kL6, kL7, kL8, kL9, kL10); }

// ---- atan family --------------------------------------------------------------------------------

constexpr double kPio2Hi = 0x1.921fb54442d18p+0, kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPiHi = 0x1.921fb54442d18p+1, kPiLo = 0x1.1a62633145c07p-53;
constexpr double kThreePio4 = 0x1.2d97c7f3321d2p+1;
// atan(i/4), i = 1..4, as hi + lo.
constexpr double kAtan1Hi = 0x1.f5b75f92c80ddp-3, kAtan1Lo = 0x1.8ab6e3cf7afbdp-57;
constexpr double kAtan2Hi = 0x1.dac670561bb4fp-2, kAtan2Lo = 0x1.a2b7f222f65e2p-56;
constexpr double kAtan3Hi = 0x1.4978fa3269ee1p-1, kAtan3Lo = 0x1.2419a87f2a458p-56;
constexpr double kAtan4Hi = 0x1.921fb54442d18p-1, kAtan4Lo = 0x1.1a62633145c07p-55;
// (-1)^n / (2n+1), n = 1..8: atan(u) = u + u^3 P(u^2); on |u| <= 1/8 the first omitted term
// is < 2^-58 relative.
constexpr double kA3 = -0.3333333333333333, kA5 = 0.2, kA7 = -0.14285714285714285, kA9 = 0.1111111111111111,
                 kA11 = -0.09090909090909091, kA13 = 0.07692307692307693, kA15 = -0.06666666666666667,
                 kA17 = 0.058823529411764705;

// atan(n / d) in [0, pi/2] as th + tl, for double-doubles n = nh + nl >= 0, d = dh + dl >= 0,
// not both zero, with nonzero parts between ~2^-540 and 2^530 (no under/overflow in Dekker's
// products).
// Method: t = min(n,d) / max(n,d) as a double-double (pi/2 - atan(t) when n > d); with
// c = i/4 the nearest quarter, atan(t) = atan(c) + atan(u), u = (t - c) / (1 + t c), |u| <= 1/8
// (the addition formula, every step exact or carried as a double-double), then the arctan series
// for u. Everything is summed as double-double; the caller rounds once.
FT_FUNCTION void atan_ratio(double nh, double nl, double dh, double dl, double& th, double& tl) {
  const bool swapped = nh > dh;
  if (swapped) {
    double tmp = nh;
    nh = dh;
    dh = tmp;
    tmp = nl;
    nl = dl;
    dl = tmp;
  }
  double qh, ql;
  dd_div(nh, nl, dh, dl, qh, ql);  // t = qh + ql, 0 <= qh <= 1
  const int i = static_cast<int>(4.0 * qh + 0.5);
  const double c = 0.25 * i;
  // u = (t - c) / (1 + t c); t - c: qh - c is exact (Sterbenz); 1 + t c as a double-double.
  double pc, pe, dh2, de;
  two_prod(qh, c, pc, pe);
  fast_two_sum(1.0, pc, dh2, de);
  const double dl2 = (de + pe) + ql * c;
  double uh, ul;
  dd_div(qh - c, ql, dh2, dl2, uh, ul);
  const double z = uh * uh;
  const double p = horner(z, kA3, kA5, kA7, kA9, kA11, kA13, kA15, kA17);
  const double tail = (uh * z) * p + (ul - ul * z);  // atan(uh + ul) - uh
  double ah = 0.0, al = 0.0;
  if (i == 1) {
    ah = kAtan1Hi;
    al = kAtan1Lo;
  } else if (i == 2) {
    ah = kAtan2Hi;
    al = kAtan2Lo;
  } else if (i == 3) {
    ah = kAtan3Hi;
    al = kAtan3Lo;
  } else if (i == 4) {
    ah = kAtan4Hi;
    al = kAtan4Lo;
  }
  double s, e;
  two_sum(ah, uh, s, e);
  double lo = (e + tail) + al;
  if (swapped) {  // pi/2 - theta
    double s2, e2;
    two_sum(kPio2Hi, -s, s2, e2);
    lo = (e2 + kPio2Lo) - lo;
    s = s2;
  }
  th = s;
  tl = lo;
}

// sqrt(1 - x^2) as sh + sl for 0 <= x <= 1: 1 - x^2 as a double-double to ~2^-104 relative
// ((1 - x)(1 + x) for x >= 1/2, where 1 - x is exact, so there is no cancellation), then one
// Newton correction of the square root.
FT_FUNCTION void sqrt_one_minus_sq(double x, double& sh, double& sl) {
  double wh, wl;
  if (x >= 0.5) {
    const double a = 1.0 - x;  // exact
    double b, be, p, pe;
    fast_two_sum(1.0, x, b, be);
    two_prod(a, b, p, pe);
    wh = p;
    wl = pe + a * be;
  } else {
    double p, pe, e;
    two_prod(x, x, p, pe);
    fast_two_sum(1.0, -p, wh, e);
    wl = e - pe;
  }
  sh = ::sqrt(wh);
  if (sh == 0.0) {
    sl = 0.0;
    return;
  }
  double q, qe;
  two_prod(sh, sh, q, qe);
  sl = (((wh - q) - qe) + wl) / (2.0 * sh);
}

}  // namespace detail

// sincos(x): sin and cos with one reduction, bit-identical to sin(x) and cos(x). See
// reduce_pio2 for the range of validity. sin keeps the sign of zero; +-inf and NaN give NaN.
FT_FUNCTION void sincos(double x, double* s, double* c) {
  const double ax = ::fabs(x);
  if (!(ax <= detail::kMaxDouble)) {
    *s = detail::quiet_nan();
    *c = detail::quiet_nan();
    return;
  }
  if (ax < 0x1p-27) {  // sin x = x (1 - x^2/6), cos x = 1 - x^2/2 round to x and 1
    *s = x;
    *c = 1.0;
    return;
  }
  double rh, rl, sa, sb, ca, cb;
  const int n = detail::reduce_pio2(ax, rh, rl);
  detail::sin_kernel(rh, rl, sa, sb);
  detail::cos_kernel(rh, rl, ca, cb);
  double sv = sa + sb, cv = ca + cb;
  if (n & 1) {
    const double t = sv;
    sv = cv;
    cv = -t;
  }
  if (n & 2) {
    sv = -sv;
    cv = -cv;
  }
  *s = detail::sign_bit(x) ? -sv : sv;
  *c = cv;
}

// sin(x): reduce_pio2 (Cody & Waite / Dekker) + Taylor kernels on [-pi/4, pi/4].
FT_FUNCTION double sin(double x) {
  const double ax = ::fabs(x);
  if (!(ax <= detail::kMaxDouble)) return detail::quiet_nan();
  if (ax < 0x1p-27) return x;  // sin x = x (1 - x^2/6) rounds to x
  double rh, rl, a, b;
  const int n = detail::reduce_pio2(ax, rh, rl);
  if (n & 1) {
    detail::cos_kernel(rh, rl, a, b);
  } else {
    detail::sin_kernel(rh, rl, a, b);
  }
  double r = a + b;
  if (n & 2) r = -r;
  return detail::sign_bit(x) ? -r : r;
}

// cos(x): as sin.
FT_FUNCTION double cos(double x) {
  const double ax = ::fabs(x);
  if (!(ax <= detail::kMaxDouble)) return detail::quiet_nan();
  if (ax < 0x1p-27) return 1.0;  // cos x = 1 - x^2/2 rounds to 1
  double rh, rl, a, b;
  const int n = detail::reduce_pio2(ax, rh, rl);
  if (n & 1) {
    detail::sin_kernel(rh, rl, a, b);
  } else {
    detail::cos_kernel(rh, rl, a, b);
  }
  const double r = a + b;
  return ((n + 1) & 2) ? -r : r;
}

// tan(x): sin/cos kernels of the reduced argument, normalised with Fast2Sum, divided as
// double-doubles (sin/cos, or -cos/sin in odd quadrants), so only the last rounding is visible.
FT_FUNCTION double tan(double x) {
  const double ax = ::fabs(x);
  if (!(ax <= detail::kMaxDouble)) return detail::quiet_nan();
  if (ax < 0x1p-27) return x;  // tan x = x (1 + x^2/3) rounds to x
  double rh, rl, sa, sb, ca, cb, sh, sl, ch, cl, qh, ql;
  const int n = detail::reduce_pio2(ax, rh, rl);
  detail::sin_kernel(rh, rl, sa, sb);
  detail::cos_kernel(rh, rl, ca, cb);
  detail::fast_two_sum(sa, sb, sh, sl);
  detail::fast_two_sum(ca, cb, ch, cl);
  double r;
  if (n & 1) {
    detail::dd_div(ch, cl, sh, sl, qh, ql);
    r = -(qh + ql);
  } else {
    detail::dd_div(sh, sl, ch, cl, qh, ql);
    r = qh + ql;
  }
  return detail::sign_bit(x) ? -r : r;
}

// atan(x): atan_ratio(|x|, 1) (quarter breakpoints + arctan series), odd symmetry.
// Exact for |x| < 2^-27 (returns x) and |x| > 2^60 (returns +-pi/2 rounded).
FT_FUNCTION double atan(double x) {
  if (x != x) return detail::quiet_nan();
  const double ax = ::fabs(x);
  if (ax < 0x1p-27) return x;  // atan x = x (1 - x^2/3) rounds to x
  double r;
  if (ax > 0x1p60) {
    r = detail::kPio2Hi;
  } else {
    double th, tl;
    detail::atan_ratio(ax, 0.0, 1.0, 0.0, th, tl);
    r = th + tl;
  }
  return detail::sign_bit(x) ? -r : r;
}

// atan2(y, x): C99 Annex F special cases (signed zeros, infinities); otherwise
// atan_ratio(|y|, |x|) after scaling both by a common power of two, pi - theta for x < 0, the
// sign of y. Ratios beyond 2^+-60 are answered directly (|y|/|x|, pi, pi/2 +- |x|/|y|).
FT_FUNCTION double atan2(double y, double x) {
  if (x != x || y != y) return detail::quiet_nan();
  const bool xneg = detail::sign_bit(x);
  double ay = ::fabs(y), ax = ::fabs(x);
  double r;
  if (ay == 0.0) {
    r = xneg ? detail::kPiHi : 0.0;
  } else if (ax == 0.0) {
    r = detail::kPio2Hi;
  } else if (ay > detail::kMaxDouble) {
    r = ax > detail::kMaxDouble ? (xneg ? detail::kThreePio4 : detail::kPio4) : detail::kPio2Hi;
  } else if (ax > detail::kMaxDouble) {
    r = xneg ? detail::kPiHi : 0.0;
  } else if (ay < ax * 0x1p-60) {  // atan(t) = t to < 2^-120 relative
    r = xneg ? detail::kPiHi + (detail::kPiLo - ay / ax) : ay / ax;
  } else if (ax < ay * 0x1p-60) {
    r = detail::kPio2Hi + (xneg ? detail::kPio2Lo + ax / ay : detail::kPio2Lo - ax / ay);
  } else {
    const double m = ay > ax ? ay : ax;
    if (m > 0x1p500) {
      ay *= 0x1p-600;
      ax *= 0x1p-600;
    } else if (m < 0x1p-500) {
      ay *= 0x1p600;
      ax *= 0x1p600;
    }
    double th, tl;
    detail::atan_ratio(ay, 0.0, ax, 0.0, th, tl);
    if (xneg) {  // pi - theta
      double s, e;
      detail::two_sum(detail::kPiHi, -th, s, e);
      tl = (e + detail::kPiLo) - tl;
      th = s;
    }
    r = th + tl;
  }
  return detail::sign_bit(y) ? -r : r;
}

// asin(x) = atan(x / sqrt(1 - x^2)), with sqrt(1 - x^2) as a double-double; NaN for |x| > 1.
FT_FUNCTION double asin(double x) {
  const double ax = ::fabs(x);
  if (!(ax <= 1.0)) return detail::quiet_nan();
  if (ax < 0x1p-26) return x;  // asin x = x (1 + x^2/6) rounds to x
  double sh, sl, th, tl;
  detail::sqrt_one_minus_sq(ax, sh, sl);
  detail::atan_ratio(ax, 0.0, sh, sl, th, tl);
  const double r = th + tl;
  return detail::sign_bit(x) ? -r : r;
}

// acos(x) = atan(sqrt(1 - x^2) / x) (pi - that for x < 0), as asin; NaN for |x| > 1.
FT_FUNCTION double acos(double x) {
  const double ax = ::fabs(x);
  if (!(ax <= 1.0)) return detail::quiet_nan();
  if (ax < 0x1p-57) return detail::kPio2Hi;  // pi/2 - x rounds to pi/2
  double sh, sl, th, tl;
  detail::sqrt_one_minus_sq(ax, sh, sl);
  detail::atan_ratio(sh, sl, ax, 0.0, th, tl);
  if (x < 0.0) {
    double s, e;
    detail::two_sum(detail::kPiHi, -th, s, e);
    tl = (e + detail::kPiLo) - tl;
    th = s;
  }
  return th + tl;
}

// exp(x): exp_core, then one rounding and an exact scaling by 2^k (two factors, so that
// results near the overflow threshold and subnormal results need no special path).
// +inf above 709.8, +0 below -745.2 (both beyond the thresholds of the true function).
FT_FUNCTION double exp(double x) {
  if (x != x) return detail::quiet_nan();
  if (x > 709.8) return detail::infinity();
  if (x < -745.2) return 0.0;
  int k;
  double yh, yl;
  detail::exp_core(x, k, yh, yl);
  return detail::scale_pow2(yh + yl, k);
}

// log(x): x = 2^e f with f in [sqrt(2)/2, sqrt(2)) from the bits (subnormals pre-scaled by
// 2^54); with g = f - 1 (exact) and s = g / (2 + g), log f = 2 atanh(s) is rearranged as
// g - g^2/2 + s (g^2/2 + R(s^2)), where s only enters the small last term; e ln 2 (2-part
// ln 2) + g - g^2/2 is summed exactly as a double-double and rounded once with the rest.
// log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
FT_FUNCTION double log(double x) {
  if (x != x || x < 0.0) return detail::quiet_nan();
  if (x == 0.0) return -detail::infinity();
  if (x > detail::kMaxDouble) return x;
  unsigned long long u = detail::to_bits(x);
  int e = -1023;
  if (u < 0x0010000000000000ULL) {  // subnormal
    u = detail::to_bits(x * 0x1p54);
    e -= 54;
  }
  e += static_cast<int>(u >> 52);
  const unsigned long long mant = u & 0x000fffffffffffffULL;
  double f = detail::from_bits(mant | 0x3ff0000000000000ULL);  // [1, 2)
  if (f > detail::kSqrt2) {
    f = detail::from_bits(mant | 0x3fe0000000000000ULL);  // f / 2
    e += 1;
  }
  const double g = f - 1.0;  // exact
  const double s = g / (2.0 + g);
  const double z = s * s;
  const double rs = detail::log_series(z);
  double h, hl;  // g^2 / 2 == h + hl exactly
  detail::two_prod(g, g, h, hl);
  h *= 0.5;
  hl *= 0.5;
  // e ln2_hi + g - h, exactly as a double-double; everything else is a small correction.
  const double ed = static_cast<double>(e);
  double a, ae, b, be;
  detail::two_sum(ed * detail::kLn2Hi, g, a, ae);
  detail::two_sum(a, -h, b, be);
  return b + (((ae + be) - hl) + (s * (h + rs) + ed * detail::kLn2Lo));
}

// sinh(x): |x| < 1/2: Taylor series x + x^3/3! + ... + x^15/15! (first omitted term < 2^-64
// relative); 1/2 <= |x| <= 40: (e^|x| - e^-|x|) / 2 with both exponentials as double-doubles;
// above: e^|x| / 2 straight from exp_core's 2^k (no premature overflow). Odd, keeps -0.
FT_FUNCTION double sinh(double x) {
  if (x != x) return detail::quiet_nan();
  const double ax = ::fabs(x);
  if (ax < 0x1p-26) return x;  // sinh x = x (1 + x^2/6) rounds to x
  double r;
  if (ax > 711.0) {
    r = detail::infinity();
  } else if (ax < 0.5) {
    const double z = ax * ax;
    r = ax + ax * detail::sinh_series(z);
  } else if (ax > 40.0) {
    int k;
    double yh, yl;
    detail::exp_core(ax, k, yh, yl);
    r = detail::scale_pow2(yh + yl, k - 1);
  } else {
    double eh, el, rh, rl, s, e;
    detail::exp_pair(ax, eh, el, rh, rl);
    detail::two_sum(eh, -rh, s, e);
    r = 0.5 * (s + ((e + el) - rl));
  }
  return detail::sign_bit(x) ? -r : r;
}

// cosh(x): (e^|x| + e^-|x|) / 2 with double-double exponentials for |x| <= 40, e^|x| / 2 above
// (as sinh). cosh(+-inf) = +inf.
FT_FUNCTION double cosh(double x) {
  if (x != x) return detail::quiet_nan();
  const double ax = ::fabs(x);
  if (ax < 0x1p-26) return 1.0;  // cosh x = 1 + x^2/2 rounds to 1
  if (ax > 711.0) return detail::infinity();
  if (ax > 40.0) {
    int k;
    double yh, yl;
    detail::exp_core(ax, k, yh, yl);
    return detail::scale_pow2(yh + yl, k - 1);
  }
  double eh, el, rh, rl, s, e;
  detail::exp_pair(ax, eh, el, rh, rl);
  detail::two_sum(eh, rh, s, e);
  return 0.5 * (s + ((e + el) + rl));
}

}  // namespace portable
}  // namespace ft
