// The closed orbit and the one-turn matrix by finite differences of tracked probes
// (closed_orbit.cpp).
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "analysis/optics/ring_tracker.hpp"
#include "fusetrack/optics.h"

namespace ft::optics_internal {

// Finite-difference probe of the one-turn map: 13 particles in one Particles object.

struct Probe {
  std::array<double, 6> in{}, out{};  // centre particle (x, px, y, py, zeta, delta)
  Matrix6 jac{};                      // d out / d in in (x, px, y, py, zeta, delta)
};

/// Central differences around z: three-point (f(h) - f(-h)) / 2h, or five-point
/// (8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / 12h; the offsets actually represented in floating
/// point (z + h) - (z - h) are used for h.
Probe probe_map(const RingTracker& tracker, const Lattice& lattice, const std::array<double, 6>& z,
                const std::array<double, 6>& steps, const char* what, int points = 3);

/// The Jacobian in (..., zeta, pzeta) from the one in (..., zeta, delta) (chain rule).
Matrix6 to_pzeta(const Matrix6& jac, double delta_in, double delta_out, double beta0);

/// Both trackers, made once (the frozen one searches the delta-changing elements).
struct Engine {
  Engine(const Lattice& l, const OpticsOptions& o);
  const RingTracker& frozen();
  const RingTracker& full();
  /// zeta: where the orbit starts longitudinally (0, or the 6D closed orbit's zeta, which matters
  /// for elements whose transverse kick depends on zeta, such as RF multipoles).
  OneTurnMap map_4d(double delta, const std::array<double, 4>& guess, double zeta = 0.0);
  OneTurnMap map_6d(const std::array<double, 6>& guess);
  /// 6D if the longitudinal block of the full matrix around the 4D orbit is stable.
  OneTurnMap choose(std::string& reason);

  const Lattice& lattice;
  OpticsOptions options;

 private:
  std::unique_ptr<RingTracker> m_frozen, m_full;
};

/// The closed orbit (6D or 4D, Engine::choose) and the 4D map at its delta, into `o`.
void find_orbit_and_maps(Engine& eng, LinearOptics& o);

}  // namespace ft::optics_internal
