// Internal declarations shared by the optics sources (framework/src/analysis/optics/*.cpp): the
// longitudinal variables, small dense linear algebra, the option and lattice checks. The public API is
// fusetrack/optics.h.
#pragma once
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "fusetrack/optics.h"

namespace ft::optics_internal {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const char* const kCoordinateNames[6] = {"x", "px", "y", "py", "zeta", "delta"};

// Longitudinal variables. pzeta = ptau / beta0 and, with beta0 ptau = sqrt(1 + beta0^2 delta
// (2 + delta)) - 1 (xtrack update_delta), written without cancellation:
//   pzeta = delta (2 + delta) / (sqrt(1 + beta0^2 delta (2 + delta)) + 1),
//   d pzeta / d delta = (1 + delta) / (1 + beta0 ptau) = rvv.
inline double pzeta_of_delta(double delta, double beta0) {
  const double d2 = delta * (2.0 + delta);
  return d2 / (std::sqrt(1.0 + beta0 * beta0 * d2) + 1.0);
}

inline double dpzeta_ddelta(double delta, double beta0) {
  const double beta0_ptau = beta0 * beta0 * pzeta_of_delta(delta, beta0);
  return (1.0 + delta) / (1.0 + beta0_ptau);
}

// Small dense linear algebra (n <= 6).

/// Solves a x = b in place by Gaussian elimination with partial pivoting; false if singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double>& b);
Matrix6 multiply(const Matrix6& a, const Matrix6& b);
double trace(const Matrix6& a);

/// OpticsOptions and the lattice, checked (InputError naming the field or file).
void check_options(const OpticsOptions& o);
void check_lattice(const Lattice& lattice);

/// 2 cos mu of the longitudinal mode of a 6x6 symplectic matrix (eigen_tunes.cpp).
double longitudinal_two_cos(const Matrix6& m, double exclude_a, double exclude_b);
/// The 6D eigen-tunes (qx, qy, qs), exact where planes decouple (eigen_tunes.cpp).
std::array<double, 3> six_d_tunes(const Matrix6& m, double beta_x, double beta_y, double beta_s, double qx4,
                                  double qy4);

/// The eigenvalue of one transverse mode of a 4x4 (x, px, y, py) block, Im >= 0: the Edwards-Teng
/// root e^{i mu} with 2 cos mu = u_self (exact for a symplectic block), polished by Newton on the
/// block's characteristic polynomial when x and y are coupled (eigen_tunes.cpp).
std::complex<double> mode_eigenvalue(const std::array<std::array<double, 4>, 4>& m, double u_self, double u_other);

/// A number for JSON output: null when not finite.
nlohmann::ordered_json number(double v);

}  // namespace ft::optics_internal
