// ft::quotient_from_reciprocal (fusetrack/device/invariant_division.h), the GPU's division by
// beta0: Markstein's correction of RN(a RN(1/b)) must give the IEEE quotient a / b bit for bit.
// The host's std::fma rounds as the GPU's fma does, so the algorithm is checked here without a GPU
// on the hardest inputs there are: quotients within a few 2^-106 of a rounding midpoint, built by
// solving B M + d == 0 (mod 2^k) for the midpoint's odd numerator M.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "fusetrack/device/invariant_division.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_invariant_division.
namespace test_invariant_division {

namespace {

__extension__ typedef unsigned __int128 u128;  // the 107-bit products B M
__extension__ typedef __int128 i128;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Inverse of an odd B modulo 2^64 (Newton's iteration doubles the correct bits each step).
uint64_t inverse_mod_2_64(uint64_t odd) {
  uint64_t x = odd;
  for (int i = 0; i < 6; ++i) x *= 2 - odd * x;
  return x;
}

struct DivisionCount {
  long tested = 0, markstein_wrong = 0, plain_product_wrong = 0;
  void check(double a, double b) {
    const double y = 1.0 / b;
    const double exact = a / b;
    ++tested;
    if (!same_bits(ft::quotient_from_reciprocal(a, b, y), exact)) ++markstein_wrong;
    if (!same_bits(a * y, exact)) ++plain_product_wrong;
  }
};

}  // namespace

TEST_CASE("division by an invariant divisor: Markstein's correction gives the IEEE quotient on midpoint cases") {
  std::mt19937_64 rng(20261127);
  DivisionCount count;
  const uint64_t mask54 = (uint64_t{1} << 54) - 1, mask53 = (uint64_t{1} << 53) - 1;
  for (int trial = 0; trial < 20000; ++trial) {
    // B: odd 53-bit significand of the divisor; every fourth one next to all ones (the reciprocal's
    // hardest rounding).
    uint64_t divisor_bits = (uint64_t{1} << 52) | (rng() & ((uint64_t{1} << 52) - 1)) | 1;
    if (trial % 4 == 0) divisor_bits = (uint64_t{1} << 53) - 1 - 2 * (rng() & 0xffff);
    const uint64_t inverse = inverse_mod_2_64(divisor_bits);
    for (int d = -24; d <= 24; ++d) {
      if (d == 0) continue;
      // Quotient in [1/2, 1): A 2^54 == B M + d; in [1, 2): A 2^53 == B M + d; M odd with 54 bits.
      for (const int shift : {54, 53}) {
        const uint64_t mask = shift == 54 ? mask54 : mask53;
        uint64_t m = (static_cast<uint64_t>(-static_cast<int64_t>(d)) * inverse) & mask;
        if (shift == 53) m |= uint64_t{1} << 53;
        if ((m & 1) == 0 || (m >> 53) == 0) continue;
        const u128 product = static_cast<u128>(divisor_bits) * m + static_cast<u128>(static_cast<i128>(d));
        if ((product & mask) != 0) continue;
        const u128 dividend_bits = product >> shift;
        if (dividend_bits < (u128{1} << 52) || dividend_bits >= (u128{1} << 53)) continue;
        const double a = std::ldexp(static_cast<double>(static_cast<uint64_t>(dividend_bits)), -52);
        const double b = std::ldexp(static_cast<double>(divisor_bits), -52);
        for (const double scale_b : {1.0, 0.5, 0x1p-4}) {  // beta0 lies in (0, 1]
          count.check(a, b * scale_b);
          count.check(-a * 0x1p-30, b * scale_b);
        }
      }
    }
  }
  MESSAGE(count.tested << " quotients next to a midpoint; RN(a RN(1/b)) alone wrong in " << count.plain_product_wrong);
  REQUIRE(count.tested > 1000000);
  CHECK(count.plain_product_wrong > count.tested / 10);  // the cases are hard: the correction is needed
  CHECK(count.markstein_wrong == 0);
}

TEST_CASE("division by an invariant divisor: random dividends and beta0 values give the IEEE quotient") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> beta0(1e-3, 1.0);
  DivisionCount count;
  for (int i = 0; i < 200; ++i) {
    const double b = i == 0 ? 1.0 : beta0(rng);
    for (int k = 0; k < 10000; ++k) {
      // dividends over 2^-800 .. 2^800 (the range where the GPU takes the corrected product)
      const int exponent = static_cast<int>(rng() % 1600) - 800;
      const double a = std::ldexp(std::uniform_real_distribution<double>(1.0, 2.0)(rng), exponent - 1);
      count.check((k & 1) ? -a : a, b);
    }
  }
  CHECK(count.tested == 2000000);
  CHECK(count.markstein_wrong == 0);
  // The host's divide_by_invariant is the plain division: zero keeps its sign, NaN stays NaN.
  CHECK(std::signbit(ft::divide_by_invariant(-0.0, 0.9)));
  CHECK(std::isnan(ft::divide_by_invariant(std::nan(""), 0.9)));
}

}  // namespace test_invariant_division
