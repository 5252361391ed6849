// RF bucket by tracking (see fusetrack/longitudinal.h for the model and its sources; the matched
// bunches are in matched_bunch.cpp).
#include "fusetrack/longitudinal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "fusetrack/collective.h"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"
#include "longitudinal_grid.hpp"

namespace ft {

using namespace longitudinal_grid;

namespace {

/// Zero of the line through (x0, y0), (x1, y1).
double zero_between(double x0, double y0, double x1, double y1) {
  if (y1 == y0) return 0.5 * (x0 + x1);
  return x0 + (x1 - x0) * (-y0) / (y1 - y0);
}

std::array<double, 4> transverse_orbit(const Lattice& lattice) {
  const OneTurnMap m = compute_one_turn_map_4d(lattice, 0.0, OpticsOptions{});
  return {m.closed_orbit[0], m.closed_orbit[1], m.closed_orbit[2], m.closed_orbit[3]};
}

}  // namespace

std::vector<double> one_turn_energy_change(const Lattice& lattice, const std::array<double, 4>& orbit,
                                           const std::vector<double>& zeta, int threads) {
  const ReferenceParticle& ref = lattice.reference();
  Particles p(zeta.size(), ref.beta0());
  for (size_t i = 0; i < zeta.size(); ++i) p.set(i, orbit[0], orbit[1], orbit[2], orbit[3], zeta[i], 0.0);
  TrackOptions o;
  o.turns = 1;
  o.collective = false;
  o.threads = threads;
  make_cpu_backend(lattice)->track(p, o);
  std::vector<double> de(zeta.size());
  for (size_t i = 0; i < zeta.size(); ++i) {
    if (p.state[i] <= 0)
      throw Error(fmt::format("RF bucket: the probe particle at zeta = {:.9g} m, delta = 0 was lost in one turn "
                              "(element #{}); cannot measure the energy change there",
                              zeta[i], p.lost_element[i]));
    de[i] = p.ptau[i] * ref.p0c;  // ptau = (E - E0) / (P0 c)
  }
  return de;
}

RfBucket compute_rf_bucket(const Lattice& lattice, const RfBucketOptions& o) {
  RfBucket b;
  const ReferenceParticle& ref = lattice.reference();
  b.circumference = lattice.circumference();
  b.beta0 = ref.beta0();
  b.energy0 = ref.energy0();
  if (std::isfinite(o.eta)) {
    b.eta = o.eta;
    b.orbit = transverse_orbit(lattice);
  } else {
    OpticsOptions oo;
    oo.threads = o.threads;
    const LinearOptics optics = compute_linear_optics(lattice, oo);
    b.eta = optics.eta;
    b.orbit = {optics.map_4d.closed_orbit[0], optics.map_4d.closed_orbit[1], optics.map_4d.closed_orbit[2],
               optics.map_4d.closed_orbit[3]};
  }
  if (!(std::isfinite(b.eta) && b.eta != 0.0))
    throw Error(fmt::format("RF bucket: the slip factor eta = {} gives no longitudinal focusing", b.eta));
  if (!(b.circumference > 0.0)) throw Error("RF bucket: the lattice has no circumference");
  const double s = sign_of(b.eta);
  const double zmin = std::isfinite(o.zeta_min) ? o.zeta_min : -0.55 * b.circumference;
  const double zmax = std::isfinite(o.zeta_max) ? o.zeta_max : 0.55 * b.circumference;
  if (!(zmax > zmin) || o.search_points < 3 || o.grid_points < 3)
    throw Error("RF bucket: needs zeta_min < zeta_max and at least 3 grid points");

  // Coarse search: g = sign(eta) Delta E = U' up to a positive factor.
  const std::vector<double> zc = linspace(zmin, zmax, o.search_points);
  std::vector<double> g = one_turn_energy_change(lattice, b.orbit, zc, o.threads);
  for (double& v : g) v *= s;
  size_t best = zc.size();
  double best_zero = 0.0;
  for (size_t i = 0; i + 1 < zc.size(); ++i) {
    if (g[i] < 0.0 && g[i + 1] >= 0.0) {  // U' from - to +: a minimum of U
      const double z0 = zero_between(zc[i], g[i], zc[i + 1], g[i + 1]);
      if (best == zc.size() || std::fabs(z0 - o.zeta_center) < std::fabs(best_zero - o.zeta_center)) {
        best = i;
        best_zero = z0;
      }
    }
  }
  if (best == zc.size())
    throw Error(fmt::format(
        "RF bucket: the one-turn energy change at delta = 0 has no stable zero in zeta [{:.6g}, {:.6g}] m for eta = "
        "{:.6g} (is there an RF cavity with a voltage, and is its phase on the stable side of transition?)",
        zmin, zmax, b.eta));
  // Barriers: the nearest zeros of U' with U' from + to -, on either side.
  double zl = zc.front(), zr = zc.back();
  for (size_t k = best; k-- > 0;) {  // g[best] < 0
    if (g[k] >= 0.0 && g[k + 1] < 0.0) {
      zl = zero_between(zc[k], g[k], zc[k + 1], g[k + 1]);
      break;
    }
  }
  for (size_t k = best + 2; k < zc.size(); ++k) {
    if (g[k - 1] > 0.0 && g[k] <= 0.0) {
      zr = zero_between(zc[k - 1], g[k - 1], zc[k], g[k]);
      break;
    }
  }

  // Small-amplitude slope at the stable point.
  const double eps = 1e-5 * (zr - zl);
  const std::vector<double> dz = one_turn_energy_change(lattice, b.orbit, {best_zero - eps, best_zero + eps}, o.threads);
  b.slope = (dz[1] - dz[0]) / (2.0 * eps);
  b.zeta_s = best_zero;

  // Fine grid over the bucket.
  b.zeta = linspace(zl, zr, o.grid_points);
  b.energy_change = one_turn_energy_change(lattice, b.orbit, b.zeta, o.threads);
  // Refine the stable point on the fine grid (the zero of Delta E next to the coarse one).
  {
    const std::vector<double>& z = b.zeta;
    double closest = best_zero;
    double dist = INFINITY;
    for (size_t i = 0; i + 1 < z.size(); ++i) {
      const double a = s * b.energy_change[i], c = s * b.energy_change[i + 1];
      if (a < 0.0 && c >= 0.0) {
        const double z0 = zero_between(z[i], a, z[i + 1], c);
        if (std::fabs(z0 - best_zero) < dist) {
          dist = std::fabs(z0 - best_zero);
          closest = z0;
        }
      }
    }
    b.zeta_s = closest;
  }
  b.potential = potential_of(b, b.zeta, b.energy_change, b.zeta_s);
  b.u_sep = std::min(b.potential.front(), b.potential.back());
  // The bucket: the connected region around zeta_s with U < U_sep.
  b.zeta_left = b.zeta.front();
  b.zeta_right = b.zeta.back();
  const size_t is = static_cast<size_t>(std::upper_bound(b.zeta.begin(), b.zeta.end(), b.zeta_s) - b.zeta.begin());
  for (size_t k = is; k-- > 1;) {
    if (b.potential[k - 1] >= b.u_sep) {
      b.zeta_left = zero_between(b.zeta[k - 1], b.potential[k - 1] - b.u_sep, b.zeta[k], b.potential[k] - b.u_sep);
      break;
    }
  }
  for (size_t k = is; k < b.zeta.size(); ++k) {
    if (b.potential[k] >= b.u_sep) {
      b.zeta_right = zero_between(b.zeta[k - 1], b.potential[k - 1] - b.u_sep, b.zeta[k], b.potential[k] - b.u_sep);
      break;
    }
  }
  const double aC = std::fabs(b.eta) * b.circumference;
  b.delta_max = std::sqrt(2.0 * std::max(b.u_sep, 0.0) / aC);
  b.kappa = s * b.slope / (b.beta0 * b.beta0 * b.energy0);
  const double w2 = aC * b.kappa;
  b.qs = (w2 > 0.0 && w2 < 4.0) ? std::acos(1.0 - 0.5 * w2) / (2.0 * kPi) : std::nan("");
  return b;
}

}  // namespace ft
