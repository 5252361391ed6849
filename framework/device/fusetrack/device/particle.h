// The one particle an element function sees, with Xsuite's coordinates and
// derived quantities (xtrack Particles: x, px, y, py, zeta, delta, ptau, rpp, rvv).
// It lives in registers in the fused GPU kernel and in a block loop on the CPU.
#pragma once
#include "fusetrack/device/invariant_division.h"
#include "fusetrack/device/qualifiers.h"

namespace ft {

/// Particle states: > 0 alive, otherwise the reason it was lost.
enum ParticleState : int {
  kAlive = 1,
  kLostOnAperture = 0,     // an aperture element (LimitRect, LimitEllipse, ...)
  kLostOnGlobalLimit = -1, // the lattice's global |x|,|y| limit (Xsuite XTRACK_GLOBAL_XY_LIMIT)
  kLostOnTurnLimit = -2,   // per-coordinate limits checked at the end of a turn (DA C_k limits)
  kLostNotFinite = -3,     // a coordinate became NaN or infinite
};

struct ParticleView {
  double x;     // horizontal position [m]
  double px;    // horizontal momentum P_x / P0 [1]
  double y;     // vertical position [m]
  double py;    // vertical momentum P_y / P0 [1]
  double zeta;  // longitudinal position s - beta0 c t [m]
  double delta; // relative momentum deviation (P - P0) / P0 [1]
  double ptau;  // (E - E0) / (P0 c) [1]
  double rpp;   // P0 / P = 1 / (1 + delta) [1]
  double rvv;   // beta / beta0 [1]
  double beta0; // reference relativistic beta [1]
  int state;    // see ParticleState
  double rv0v;  // 1 / rvv, kept with rvv so that drifts need no division (as xtrack's rv0v = 1/rvv)

  ParticleView() = default;
  FT_FUNCTION ParticleView(double x_, double px_, double y_, double py_, double zeta_, double delta_, double ptau_,
                           double rpp_, double rvv_, double beta0_, int state_)
      : x(x_), px(px_), y(y_), py(py_), zeta(zeta_), delta(delta_), ptau(ptau_), rpp(rpp_), rvv(rvv_),
        beta0(beta0_), state(state_), rv0v(1.0 / rvv_) {}

  /// rpp and rvv from delta and ptau: 1 / (1 + delta) and (1 + delta) / (1 + ptau beta0), the
  /// velocity ratio being (P / P0) / (E / E0). Every writer of the energy coordinates ends with this
  /// one formula, so that a kernel which loads only delta and ptau recomputes rpp and rvv bit for bit
  /// (the collective kernels do: fusetrack/codegen.h, KernelTraffic::derived_energy). xtrack divides
  /// by 1 + ptau_beta0 before ptau_beta0 is rounded through ptau; the results differ in the last bit.
  FT_FUNCTION void set_derived_energy() {
    rvv = (1.0 + delta) / (1.0 + ptau * beta0);
    rv0v = 1.0 / rvv;
    rpp = 1.0 / (1.0 + delta);
  }

  /// Set delta and keep ptau, rpp and rvv consistent (xtrack Particles.update_delta).
  FT_FUNCTION void update_delta(double new_delta) {
    const double delta_beta0 = new_delta * beta0;
    const double ptau_beta0 = sqrt(delta_beta0 * delta_beta0 + 2.0 * delta_beta0 * beta0 + 1.0) - 1.0;
    delta = new_delta;
    ptau = divide_by_invariant(ptau_beta0, beta0);
    set_derived_energy();
  }

  /// Add an energy change given as a fraction of the reference energy E0 = P0 c / beta0,
  /// keeping the transverse momenta (xtrack LocalParticle_add_to_energy with pz_only = 1):
  ///   ptau beta0 += dE/E0,  delta = sqrt(ptau^2 + 2 ptau / beta0 + 1) - 1.
  /// The stored ptau is updated directly (no round trip through 1 + ...), as current xtrack does.
  /// The divisions by beta0 are IEEE quotients (divide_by_invariant: cheaper on the GPU, same bits).
  FT_FUNCTION void add_to_energy(double energy_change_over_e0) {
    const double ptau_beta0 = ptau * beta0 + energy_change_over_e0;
    const double new_ptau = divide_by_invariant(ptau_beta0, beta0);
    ptau = new_ptau;
    delta = sqrt(new_ptau * new_ptau + divide_by_invariant(2.0 * new_ptau, beta0) + 1.0) - 1.0;
    set_derived_energy();
  }

  FT_FUNCTION bool alive() const { return state > 0; }
  FT_FUNCTION void mark_lost() { state = kLostOnAperture; }
};

/// The particle with rpp and rvv recomputed from delta and ptau (set_derived_energy): what a kernel
/// that loads only delta and ptau sees, bit for bit what the writer of the energy held.
FT_FUNCTION ParticleView particle_with_derived_energy(double x, double px, double y, double py, double zeta,
                                                      double delta, double ptau, double beta0, int state) {
  ParticleView p{x, px, y, py, zeta, delta, ptau, 1.0, 1.0, beta0, state};
  p.set_derived_energy();
  return p;
}

/// A live particle at (x, px, y, py, zeta, delta), with ptau, rpp and rvv made consistent.
FT_FUNCTION ParticleView make_particle(double x, double px, double y, double py, double zeta, double delta,
                                       double beta0) {
  ParticleView p{x, px, y, py, zeta, 0.0, 0.0, 1.0, 1.0, beta0, kAlive};
  p.update_delta(delta);
  return p;
}

/// Limits applied by the framework, not by elements.
struct GlobalLimits {
  double x;  // |x| limit after every element [m] (Xsuite default 1 m); +inf disables it
  double y;  // |y| limit after every element [m]; +inf disables it
  double turn_limit[6];  // |coordinate| limits at the end of each turn, (x, px, y, py, zeta, delta); <= 0 disables one
};

/// Whether x and y are within the global limits. A NaN fails the comparison: outside.
/// Both tests, then one result: `&` instead of `&&` spares the fused kernels a branch per element.
FT_FUNCTION bool inside_element_limits(const ParticleView& p, const GlobalLimits& lim) {
  return (fabs(p.x) <= lim.x) & (fabs(p.y) <= lim.y);
}

/// Checked after every element. A NaN counts as lost.
FT_FUNCTION void apply_element_limits(ParticleView& p, const GlobalLimits& lim) {
  if (p.state > 0 && !inside_element_limits(p, lim)) p.state = kLostOnGlobalLimit;
}

/// Checked at the end of every turn: finiteness of the six coordinates (those of `checked`, bit k for
/// (x, px, y, py, zeta, delta)[k]), then the C_k limits.
FT_FUNCTION void apply_turn_limits(ParticleView& p, const GlobalLimits& lim, unsigned checked = 0x3fu) {
  if (p.state <= 0) return;
  const double c[6] = {p.x, p.px, p.y, p.py, p.zeta, p.delta};
  for (int k = 0; k < 6; ++k) {
    if (((checked >> k) & 1u) && !(c[k] - c[k] == 0.0)) {  // inf - inf and NaN - NaN are NaN
      p.state = kLostNotFinite;
      return;
    }
  }
  for (int k = 0; k < 6; ++k) {
    if (((checked >> k) & 1u) && lim.turn_limit[k] > 0.0 && !(fabs(c[k]) <= lim.turn_limit[k])) {
      p.state = kLostOnTurnLimit;
      return;
    }
  }
}

/// apply_element_limits where x and y are known to be 0 unless check_xy: a collective segment kernel
/// that neither loads nor writes them holds 0 after its first turn (which loads and checks every
/// coordinate), and 0 passes every limit (the global x/y limits are positive, read_limits; a turn
/// limit is positive or off), so the test is skipped. The same holds for apply_turn_limits with the
/// mask of the coordinates such a kernel loads.
FT_FUNCTION void apply_element_limits(ParticleView& p, const GlobalLimits& lim, bool check_xy) {
  if (check_xy) apply_element_limits(p, lim);
}

}  // namespace ft
