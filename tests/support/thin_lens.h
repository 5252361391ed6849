// 2x2 thin-lens transfer matrices, for analytic expectations of the bundled rings' optics.
#pragma once
#include <array>

namespace ft::test {

using M2 = std::array<std::array<double, 2>, 2>;

inline M2 mul(const M2& a, const M2& b) {
  M2 c{};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) c[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j];
  return c;
}
/// Drift of length l [m] (on momentum, expanded Hamiltonian: x' = px).
inline M2 drift(double l) { return M2{{{1.0, l}, {0.0, 1.0}}}; }
/// Thin quadrupole kick px -= k1l x (horizontal); the vertical plane sees -k1l.
inline M2 kick(double k1l) { return M2{{{1.0, 0.0}, {-k1l, 1.0}}}; }

}  // namespace ft::test
