// Correctly rounded division by a divisor that every particle of a kernel shares (beta0), with one
// reciprocal per kernel instead of one IEEE division per particle.
//
// Markstein's theorem (P. Markstein, IBM J. Res. Dev. 34 (1990) 111; J.-M. Muller et al., Handbook
// of Floating-Point Arithmetic, 2nd ed. (2018), sec. 4.9): with y = RN(1/b), q = RN(a y), the
// remainder r = a - b q is exact and computed exactly by one fused multiply-add, and
// RN(q + r y) = RN(a / b). It needs a, b, q and r away from underflow and overflow: here
// 2^-800 <= |a| < 2^801 and 2^-60 <= |b| < 2^61 (tested on the exponent bits, integer operations);
// elsewhere (zero, NaN, extremes) the plain division is used. The result is the IEEE quotient bit for bit, so the CPU, which divides, and
// the GPU agree. tests/unit/test_invariant_division.cpp checks it on the quotients closest to a
// rounding midpoint (where RN(a y) alone is wrong one time in two).
//
// 1 / b is written inside the function; in a fused kernel b is the kernel's beta0 and the compiler
// hoists the reciprocal out of the particle loop, leaving a multiplication and two fused
// multiply-adds per call (the IEEE division is a reciprocal estimate, its refinement and a range
// check: about twice the operations and a longer chain).
#pragma once
#include "fusetrack/device/qualifiers.h"

namespace ft {

/// RN(a / b) from y = RN(1 / b) by Markstein's correction; exact only in the ranges above.
FT_FUNCTION double quotient_from_reciprocal(double a, double b, double y) {
  const double q = a * y;
  const double r = fma(-b, q, a);  // exact
  return fma(r, y, q);
}

/// a / b, bit for bit the IEEE quotient, for b the same in every thread of a kernel.
FT_FUNCTION double divide_by_invariant(double a, double b) {
#ifdef FT_DEVICE_COMPILE
  const unsigned exponent_a = (static_cast<unsigned>(__double2hiint(a)) >> 20) & 0x7ffu;
  const unsigned exponent_b = (static_cast<unsigned>(__double2hiint(b)) >> 20) & 0x7ffu;
  if (exponent_a - (1023u - 800u) <= 1600u && exponent_b - (1023u - 60u) <= 120u)
    return quotient_from_reciprocal(a, b, 1.0 / b);
#endif
  return a / b;  // the host: one division (no fused multiply-add reaches the CPU code)
}

}  // namespace ft
