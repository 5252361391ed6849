// The linear optics at the start of the ring (compute_linear_optics): tunes, Twiss parameters,
// dispersion, chromaticity, slip factor and momentum compaction from the one-turn maps of
// closed_orbit.cpp (see fusetrack/optics.h for the sources).
#include <array>
#include <cmath>
#include <vector>

#include "analysis/optics/one_turn_map.hpp"
#include "analysis/optics/optics_internal.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft::optics_internal {

namespace {

/// Tunes and Twiss parameters at the start from the 4D matrix (Wolski 2014, sec. 2.3; MAD-X: sign
/// of M12).
void tunes_and_twiss(LinearOptics& o) {
  const Matrix6& r = o.map_4d.matrix;
  const auto q = transverse_tunes(r);
  o.qx = q[0];
  o.qy = q[1];
  const PlaneTwiss tx = twiss_from_block(r[0][0], r[0][1], r[1][0], r[1][1]);
  const PlaneTwiss ty = twiss_from_block(r[2][2], r[2][3], r[3][2], r[3][3]);
  if (!tx.stable || !ty.stable)
    throw Error("optics: the uncoupled 2x2 blocks of the one-turn matrix are unstable (strong coupling?)");
  o.beta_x = tx.beta;
  o.alpha_x = tx.alpha;
  o.gamma_x = tx.gamma;
  o.beta_y = ty.beta;
  o.alpha_y = ty.alpha;
  o.gamma_y = ty.gamma;
}

/// Synchrotron tune, longitudinal Twiss and the 6D eigen-tunes from the 6D matrix (NaN in 4D).
void longitudinal_optics(LinearOptics& o) {
  o.qs = o.beta_s = o.alpha_s = kNaN;
  if (o.six_d) {
    const Matrix6& m = o.map.matrix;
    const PlaneTwiss ts = twiss_from_block(m[4][4], m[4][5], m[5][4], m[5][5]);
    o.beta_s = ts.beta;
    o.alpha_s = ts.alpha;
    const double u = longitudinal_two_cos(m, 2.0 * std::cos(2.0 * kPi * o.qx), 2.0 * std::cos(2.0 * kPi * o.qy));
    if (std::fabs(0.5 * u) < 1.0) {
      const double qs = std::acos(0.5 * u) / (2.0 * kPi);  // in [0, 0.5]
      o.qs = qs;
    }
    const auto q6 = six_d_tunes(m, o.beta_x, o.beta_y, o.beta_s, o.qx, o.qy);
    o.qx_6d = q6[0];
    o.qy_6d = q6[1];
    o.qs_6d = q6[2];
  }
}

/// Dispersion: the derivative of the 4D fixed point with respect to delta,
///   (I - R4) D = R[0:4][delta]  (Wolski 2014, sec. 3.2), with R[.][delta] = R[.][pzeta] rvv.
void dispersion_at_start(LinearOptics& o) {
  const double delta_co = o.closed_orbit[5];
  const Matrix6& r = o.map_4d.matrix;
  const double a = dpzeta_ddelta(delta_co, o.beta0);
  std::vector<std::vector<double>> m(4, std::vector<double>(4));
  std::vector<double> b(4);
  for (size_t i = 0; i < 4; ++i) {
    for (size_t k = 0; k < 4; ++k) m[i][k] = (i == k ? 1.0 : 0.0) - r[i][k];
    b[i] = r[i][5] * a;
  }
  if (!solve(m, b)) throw Error("optics: I - R (4x4) is singular: cannot compute the dispersion (integer tune?)");
  o.dx = b[0];
  o.dpx = b[1];
  o.dy = b[2];
  o.dpy = b[3];
}

/// Chromaticity Q' = dQ/d delta and slip factor from the 4D closed orbits at delta_co + j dd,
/// j = -2, -1, 1, 2 (five-point central differences; MAD-X's dq1/dq2 definition, xtrack
/// twiss's delta_chrom method). Slip factor: zeta = s - beta0 c t, so a turn changes zeta by
/// -eta C delta (MAD-X / xtrack convention, eta = alpha_c - 1 / gamma^2; Wolski 2014, sec. 3.3):
///   eta = -(d dzeta_per_turn / d delta) / C.
void chromaticity_and_slip(Engine& eng, LinearOptics& o) {
  const OpticsOptions& options = eng.options;
  const double delta_co = o.closed_orbit[5];
  const double dd = options.delta_chrom;
  struct Sample {
    double qx, qy, dzeta;
  };
  auto sample = [&](double j) {
    const double d = delta_co + j * dd;
    const std::array<double, 4> guess = {o.closed_orbit[0] + o.dx * j * dd, o.closed_orbit[1] + o.dpx * j * dd,
                                         o.closed_orbit[2] + o.dy * j * dd, o.closed_orbit[3] + o.dpy * j * dd};
    const OneTurnMap m = eng.map_4d(d, guess, o.map_4d.closed_orbit[4]);
    const auto qq = transverse_tunes(m.matrix);
    return Sample{qq[0], qq[1], m.dzeta_per_turn};
  };
  auto wrapped = [](double d) { return d - std::round(d); };
  const Sample p1 = sample(1.0), m1 = sample(-1.0);
  // Differences over the represented offsets would differ from 2 dd only by rounding of
  // delta_co + dd (relative 1e-16 / dd): negligible.
  double dqx = wrapped(p1.qx - m1.qx) / (2.0 * dd), dqy = wrapped(p1.qy - m1.qy) / (2.0 * dd);
  double dz = (p1.dzeta - m1.dzeta) / (2.0 * dd);
  o.chrom_points = 3;
  try {
    const Sample p2 = sample(2.0), m2 = sample(-2.0);
    dqx = (8.0 * wrapped(p1.qx - m1.qx) - wrapped(p2.qx - m2.qx)) / (12.0 * dd);
    dqy = (8.0 * wrapped(p1.qy - m1.qy) - wrapped(p2.qy - m2.qy)) / (12.0 * dd);
    dz = (8.0 * (p1.dzeta - m1.dzeta) - (p2.dzeta - m2.dzeta)) / (12.0 * dd);
    o.chrom_points = 5;
  } catch (const Error&) {
    // keep the three-point values
  }
  o.dqx = dqx;
  o.dqy = dqy;
  o.eta = -dz / o.circumference;
  const double bg = o.beta0 * o.gamma0 * (1.0 + delta_co);  // beta gamma of the closed orbit
  const double gamma2 = 1.0 + bg * bg;
  o.alpha_c = o.eta + 1.0 / gamma2;
  // gamma_t only where alpha_c stands above the rounding of eta + 1/gamma^2 (~1e-12 / gamma^2).
  o.gamma_tr = o.alpha_c > 1e-9 / gamma2 ? 1.0 / std::sqrt(o.alpha_c) : kNaN;
}

}  // namespace

}  // namespace ft::optics_internal

namespace ft {

LinearOptics compute_linear_optics(const Lattice& lattice, const OpticsOptions& options) {
  using namespace optics_internal;
  Engine eng(lattice, options);
  LinearOptics o;
  find_orbit_and_maps(eng, o);
  tunes_and_twiss(o);
  longitudinal_optics(o);
  dispersion_at_start(o);
  chromaticity_and_slip(eng, o);
  return o;
}

BeamSizes beam_sizes(const LinearOptics& optics, double eps_nx, double eps_ny) {
  const double bg = optics.beta0 * optics.gamma0;
  BeamSizes s;
  s.sigma_x = std::sqrt(optics.beta_x * eps_nx / bg);
  s.sigma_px = std::sqrt(optics.gamma_x * eps_nx / bg);
  s.sigma_y = std::sqrt(optics.beta_y * eps_ny / bg);
  s.sigma_py = std::sqrt(optics.gamma_y * eps_ny / bg);
  return s;
}

}  // namespace ft
