// The element-by-element pass of the Twiss table: the closed orbit through every element and each
// element's Jacobian around it (element_pass.cpp).
#pragma once
#include <array>
#include <vector>

#include "fusetrack/optics.h"
#include "fusetrack/tracker.h"

namespace ft::optics_internal {

/// One element's linear map around the closed orbit, delta frozen: d(x, px, y, py, zeta)_out /
/// d(x, px, y, py, zeta, delta)_in, row-major (5 rows of 6). zeta is kept: an element whose
/// transverse kick depends on zeta (a crab cavity) couples the path length of earlier elements
/// into the transverse motion within the turn, which the one-turn matrix contains.
inline constexpr size_t kJacRows = 5, kJacCols = 6;
using ElementJacobian = std::array<double, kJacRows * kJacCols>;

/// Pass 1 of the table: the closed orbit through every element and each element's Jacobian.
struct ElementPass {
  std::vector<ElementJacobian> jacobians;
  /// Their product: d(x, px, y, py, zeta)_end / d(x, px, y, py, zeta, delta)_start (the delta row
  /// is (0, ..., 0, 1): delta frozen).
  std::array<std::array<double, kJacCols>, kJacRows> product{};
};

/// Pass 1 of the table: runs the closed orbit from `start` through every element, fills the orbit,
/// name, type and s columns of `t` and returns the element Jacobians and their product.
ElementPass element_pass(const Lattice& lattice, const std::array<double, 6>& start, const OpticsOptions& options,
                         TwissTable& t);

/// Checks of pass 1 against the one-turn tracking: the orbit closes and the product of the
/// element Jacobians is the 4D one-turn matrix. On failure, finds the first element whose
/// stepping differs from the backend's kernel and names it.
void check_element_pass(const Lattice& lattice, const LinearOptics& optics, const ElementPass& pass,
                        const OpticsOptions& options, TwissTable& t);

/// One element tracked by the element-by-element pass and by the CPU backend's whole-turn kernel
/// restricted to that element: the largest difference of their Jacobians around z over
/// max(1, max |entry|).
double stepping_mismatch(const Lattice& lattice, Backend& backend, size_t e, const double* z,
                         const std::array<double, 6>& steps);

}  // namespace ft::optics_internal
