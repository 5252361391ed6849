// The coupled linear normal form of a 4x4 transverse one-turn matrix (Mais-Ripken eigenvectors;
// see fusetrack/optics.h, "Optics along the ring").
#pragma once
#include <array>
#include <complex>

namespace ft::optics_internal {

using Complex = std::complex<double>;
using CVector4 = std::array<Complex, 4>;

/// u^H S w with S = diag(J2, J2), J2 = [[0, 1], [-1, 0]].
Complex symplectic_product(const CVector4& u, const CVector4& w);

/// The two modes of a stable 4x4 (x, px, y, py) one-turn matrix: normalized eigenvectors
/// (v^H S v = i) and their eigenvalues (m v = lambda v; |lambda| = 1 for a symplectic matrix). Mode
/// 1 is the one with the larger x share.
struct TransverseModes {
  std::array<CVector4, 2> vectors;
  std::array<Complex, 2> eigenvalues;
};
TransverseModes transverse_eigenvectors(const std::array<std::array<double, 4>, 4>& m);

}  // namespace ft::optics_internal
