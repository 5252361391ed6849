#pragma once
#include "fusetrack/device/particle.h"
#include "fusetrack/device/qualifiers.h"
#include "fusetrack/device/random.h"

// Matched Gaussian bunches from the counter-based stream of fusetrack/device/random.h, one source for the host
// compiler and NVRTC: particle i of bunch `seed` depends only on (seed, i), so a host fill (any thread count),
// a GPU kernel and any split of the bunch give the same bits (fma off).
//
// The transformation is ft::make_gaussian's (fusetrack/optics.h): normalised coordinates (x^, px^) ~ N(0, eps)
// with eps the geometric rms emittance, x = sqrt(beta) x^, px = (px^ - alpha x^) / sqrt(beta) (Courant-Snyder),
// then the dispersion of the momentum deviation, x += D d, px += D' d (likewise y), around the closed orbit;
// zeta - zeta_co ~ N(0, sigma_zeta) and d = delta - delta_co ~ N(0, sigma_delta), uncorrelated.

namespace ft {

/// The parameters of one matched Gaussian bunch (ft::gaussian_bunch, fusetrack/optics.h, fills them in).
struct ft_gaussian_bunch {
  double sqrt_emittance_x, sqrt_emittance_y;          // square roots of the geometric rms emittances [sqrt(m)]
  double sqrt_beta_x, alpha_x, sqrt_beta_y, alpha_y;  // Twiss [sqrt(m)], [1]
  double dx, dpx, dy, dpy;                            // dispersion [m], [1]
  double sigma_zeta, sigma_delta;                     // [m], [1]
  double orbit[6];                                    // closed orbit (x, px, y, py, zeta, delta)
  double beta0;                                       // reference beta (ptau, rpp, rvv)
};

/// The six coordinates (x, px, y, py, zeta, delta) of particle `index` of bunch `seed`: draws 0, 1 and 2 of its
/// Philox stream, each two normals by Box-Muller: (x^, px^), (y^, py^), (zeta, delta).
FT_FUNCTION void ft_gaussian_bunch_coordinates(const ft_gaussian_bunch& b, unsigned long long seed,
                                               unsigned long long index, double* q) {
  double g[6];
  for (unsigned int draw = 0; draw < 3u; ++draw) {
    const ft_philox_block r = ft_particle_random(seed, index, draw);
    ft_box_muller_pair(ft_uniform53(r.v[0], r.v[1]), ft_uniform53(r.v[2], r.v[3]), &g[2 * draw], &g[2 * draw + 1]);
  }
  const double xh = b.sqrt_emittance_x * g[0], pxh = b.sqrt_emittance_x * g[1];
  const double yh = b.sqrt_emittance_y * g[2], pyh = b.sqrt_emittance_y * g[3];
  const double dz = b.sigma_zeta * g[4], dd = b.sigma_delta * g[5];
  q[0] = b.orbit[0] + b.sqrt_beta_x * xh + b.dx * dd;
  q[1] = b.orbit[1] + (pxh - b.alpha_x * xh) / b.sqrt_beta_x + b.dpx * dd;
  q[2] = b.orbit[2] + b.sqrt_beta_y * yh + b.dy * dd;
  q[3] = b.orbit[3] + (pyh - b.alpha_y * yh) / b.sqrt_beta_y + b.dpy * dd;
  q[4] = b.orbit[4] + dz;
  q[5] = b.orbit[5] + dd;
}

/// Particle `index` of bunch `seed`, alive, with ptau, rpp and rvv from delta.
FT_FUNCTION ParticleView ft_gaussian_bunch_particle(const ft_gaussian_bunch& b, unsigned long long seed,
                                                    unsigned long long index) {
  double q[6];
  ft_gaussian_bunch_coordinates(b, seed, index, q);
  return make_particle(q[0], q[1], q[2], q[3], q[4], q[5], b.beta0);
}

}  // namespace ft
