// Mathematical constants and small integer helpers of the core's sources, defined once: the core
// library is compiled in unity files (framework/CMakeLists.txt), where each source's own copy would be
// a redefinition.
#pragma once

namespace ft {

inline constexpr double kPi = 3.14159265358979323846;

// The smallest l with 2^l >= n (0 for n <= 1).
inline int ceil_log2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

}  // namespace ft
