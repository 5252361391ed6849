// Synchrotron radiation of the magnets that bend or kick (Bend, ThickMultipole, Multipole): the
// pieces they share. No element type is declared here.
//
// Switch: each radiating element has the field `radiation`: 0 off (the default: the element's
// code is the non-radiating one, bit for bit), 1 mean (classical damping: the average energy loss),
// 2 quantum (the average loss plus the quantum excitation of its fluctuation). A lattice file sets
// it for every element that has the field with the top-level "radiation": "off" | "mean" |
// "quantum" (an element's own value wins).
//
// Constants of the reference species (prepared once, radiation_prepare):
//   r_c = r_e q0^2 m_e / m0                 classical radius [m] (r_e = 2.8179403262e-15 m)
//   lambda_c = hbar c / (m0 c^2)            reduced Compton wavelength [m]
//   rad_mean = (2/3) r_c gamma0^3  [m]      = C_gamma E0^3 / (2 pi) for electrons (Sands (4.1))
//   rad_quantum = (55 / (24 sqrt 3)) r_c lambda_c gamma0^5  [m^2]
//
// Thick magnets (AT/trackcpp BndMPoleSymplectic4RadPass, StrMPoleSymplectic4RadPass; AT
// driftkickrad.c bndthinkickrad, B2perp): at every kick of the integrator, of length L_k = w L
// (w the kick's weight, negative for the middle Forest-Ruth kick as in AT), before the kick, with
// x' = px / (1 + delta), y' = py / (1 + delta), the field (bx, by) = (B_x, B_y) / (B rho0) at the
// particle (the magnet's whole field, the part integrated in the body included) and h the frame
// curvature,
//   |B_perp|^2 = [(by^2 + bx^2) (1 + h x)^2 + (bx y' - by x')^2] / [(1 + h x)^2 + x'^2 + y'^2],
//   delta -= rad_mean (1 + delta)^2 |B_perp|^2 (1 + h x + (x'^2 + y'^2) / 2) L_k,
// and px, py scaled by (1 + delta_new) / (1 + delta) (the angles x', y' kept); the kick itself then
// uses the delta before the loss (AT's dp_0).
//
// Thin multipole (xtrack Multipole with radiation_flag, synrad_spectrum.h synrad_average_kick):
// curv = |(Re S, Im S)| / length (S the Horner sum of the kick, length the originating magnet's),
// half of the path L_path = (length + hxl x) / 2 at the entry and half at the exit, each a scaling
//   f = sqrt(1 + r (r - 2) / beta^2),  r = rad_mean curv^2 L_path (1 + delta),  beta = beta0 rvv,
//   1 + delta <- f (1 + delta),  px <- f px,  py <- f py.
//
// Quantum excitation: a Gaussian energy kick of the variance of the photon emission (M. Sands,
// "The physics of electron storage rings", SLAC-121 (1970), eq. 5.46: d<(dE/E)^2>/ds =
// (55 / (24 sqrt 3)) r_c lambda_c gamma^5 |h|^3; the diffusion of elegant's CSBEND with ISR):
//   delta += sqrt(rad_quantum (1 + delta)^4 |B_perp|^3 L_path) N(0, 1)
// at each kick of positive weight, L_path the kick's path (the thick magnets' variance is divided by
// the integrator's sum of positive kick weights per slice, so that a magnet's variance is its
// length's, whatever the negative Forest-Ruth or Yoshida kicks). The mean loss is the same as in
// mode 1. It reproduces the equilibrium energy spread and emittances of the radiation integrals
// (C_q = 55 lambda_c / (32 sqrt 3)); Xsuite's and AT's photon-by-photon emission would also give
// the tails of the spectrum, which this Gaussian form does not.
//
// Random numbers: Philox4x32-10 (fusetrack/device/random.h) keyed by the particle's state where
// the kick acts. An element function sees one ParticleView: neither the particle's number nor the
// turn nor the element's index reaches it. The particle's six coordinates (their bit patterns),
// which differ from kick to kick, turn to turn and particle to particle, are the counter, and the
// element's `radiation_seed` the key: the numbers are a function of what the kick sees only, the
// same on CPU and GPU (fma off) and for any rank count or particle order. Two particles with bit
// for bit the same coordinates draw the same numbers; start a bunch from distinct coordinates (a
// sampled bunch), not from copies of one particle.
#pragma once
#include "fusetrack/device/element.h"
#include "fusetrack/device/portable_math.h"
#include "fusetrack/device/random.h"

#define FT_RADIATION_OFF 0
#define FT_RADIATION_MEAN 1
#define FT_RADIATION_QUANTUM 2

/// The fields of a radiating element, declared in its field list.
#define FT_RADIATION_FIELDS(PARAM, DERIVED)                                                                           \
  PARAM(int, radiation, 0, "1", "synchrotron radiation: 0 off, 1 mean (damping), 2 quantum (damping and excitation)") \
  PARAM(int, radiation_seed, 0, "1", "key of the quantum excitation's random numbers")                                \
  DERIVED(double, rad_mean, "m", "(2/3) r_c gamma0^3: the mean energy loss coefficient")                              \
  DERIVED(double, rad_quantum, "m^2", "(55 / (24 sqrt 3)) r_c lambda_c gamma0^5: the energy diffusion coefficient")

#ifndef FT_DEVICE_COMPILE
#include <cstdio>
#include <stdexcept>
#include <string>
/// Checks the switch and fills the coefficients of the reference species.
template <class E>
void radiation_prepare(E& e, const ft_reference& ref, const char* type) {
  if (e.radiation < FT_RADIATION_OFF || e.radiation > FT_RADIATION_QUANTUM) {
    char msg[200];
    std::snprintf(msg, sizeof(msg), "%s: radiation = %d is not one of 0 (off), 1 (mean), 2 (quantum)", type,
                  e.radiation);
    throw std::invalid_argument(msg);
  }
  const double electron_rest_energy = 510998.95;    // eV (CODATA 2018)
  const double electron_radius = 2.8179403262e-15;  // m
  const double hbar_c = 1.973269804e-7;             // eV m
  const double radius = electron_radius * ref.q0 * ref.q0 * electron_rest_energy / ref.mass0;
  const double compton = hbar_c / ref.mass0;
  const double g = ref.gamma0;
  e.rad_mean = 2.0 / 3.0 * radius * g * g * g;
  e.rad_quantum = 55.0 / (24.0 * 1.7320508075688772) * radius * compton * g * g * g * g * g;
}
#endif

// The random draw (Philox and Box-Muller, hundreds of operations) is one called device function: inlined at
// every radiating kick of a baked kernel, NVRTC's time grows with the element count.
#if defined(FT_DEVICE_COMPILE)
#define FT_RADIATION_CALLED_FUNCTION __device__ __noinline__
#else
#define FT_RADIATION_CALLED_FUNCTION inline
#endif

/// A standard normal drawn from the coordinates (x, px, y, py, zeta, delta) under `seed` (the header comment).
FT_RADIATION_CALLED_FUNCTION double radiation_normal_of(double x, double px, double y, double py, double zeta,
                                                        double delta, int seed) {
  const unsigned long long words[6] = {ft::portable::detail::to_bits(x),    ft::portable::detail::to_bits(px),
                                       ft::portable::detail::to_bits(y),    ft::portable::detail::to_bits(py),
                                       ft::portable::detail::to_bits(zeta), ft::portable::detail::to_bits(delta)};
  unsigned int key0 = static_cast<unsigned int>(seed), key1 = 0x52414431u;  // "RAD1"
  ft::ft_philox_block b{{0u, 0u, 0u, 0u}};
  for (int k = 0; k < 6; k += 2) {
    ft::ft_philox_block c;
    c.v[0] = b.v[0] ^ static_cast<unsigned int>(words[k]);
    c.v[1] = b.v[1] ^ static_cast<unsigned int>(words[k] >> 32);
    c.v[2] = b.v[2] ^ static_cast<unsigned int>(words[k + 1]);
    c.v[3] = b.v[3] ^ static_cast<unsigned int>(words[k + 1] >> 32);
    b = ft::ft_philox4x32_10(c, key0, key1);
  }
  return ft::ft_box_muller(ft::ft_uniform53(b.v[0], b.v[1]), ft::ft_uniform53(b.v[2], b.v[3]));
}

/// A standard normal drawn from the particle's coordinates under `seed`.
FT_FUNCTION double radiation_normal(const ft::ParticleView& p, int seed) {
  return radiation_normal_of(p.x, p.px, p.y, p.py, p.zeta, p.delta, seed);
}

/// Sets delta (ptau, rpp, rvv follow) and scales px, py by the ratio of the momenta.
FT_FUNCTION void radiation_set_delta(ft::ParticleView& p, double new_delta) {
  const double scale = (1.0 + new_delta) / (1.0 + p.delta);
  p.update_delta(new_delta);
  p.px *= scale;
  p.py *= scale;
}

/// The radiation of one kick of a thick magnet (AT bndthinkickrad; the header comment): field (bx, by)
/// [1/m] at the particle, frame curvature h [1/m], kick length length_k [m] (signed), quantum_scale the
/// variance's share (0 for a kick of negative weight).
FT_FUNCTION void radiation_thick_kick(int mode, double rad_mean, double rad_quantum, int seed, double bx, double by,
                                      double h, double length_k, double quantum_scale, ft::ParticleView& p) {
  const double opd = 1.0 + p.delta;
  const double xp = p.px / opd;
  const double yp = p.py / opd;
  const double hx = 1.0 + h * p.x;
  const double cross = bx * yp - by * xp;
  const double b_perp2 = ((by * by + bx * bx) * (hx * hx) + cross * cross) / (hx * hx + xp * xp + yp * yp);
  const double path = (hx + (xp * xp + yp * yp) / 2.0) * length_k;
  double new_delta = p.delta - rad_mean * (opd * opd) * b_perp2 * path;
  if (mode == FT_RADIATION_QUANTUM && quantum_scale > 0.0) {
    const double variance = rad_quantum * (opd * opd) * (opd * opd) * b_perp2 * sqrt(b_perp2) * path * quantum_scale;
    new_delta += sqrt(variance) * radiation_normal(p, seed);
  }
  radiation_set_delta(p, new_delta);
}

/// Half of a thin multipole's radiation (xtrack synrad_average_kick; the header comment).
FT_FUNCTION void radiation_thin_half(int mode, double rad_mean, double rad_quantum, int seed, double curv, double path,
                                     ft::ParticleView& p) {
  const double r = rad_mean * (curv * curv) * path * (1.0 + p.delta);
  const double beta = p.beta0 * p.rvv;
  const double f = sqrt(1.0 + r * (r - 2.0) / (beta * beta));
  double new_delta = (p.delta + 1.0) * f - 1.0;
  if (mode == FT_RADIATION_QUANTUM) {
    const double opd = 1.0 + p.delta;
    const double variance = rad_quantum * (opd * opd) * (opd * opd) * (curv * curv * curv) * path;
    new_delta += sqrt(variance) * radiation_normal(p, seed);
  }
  radiation_set_delta(p, new_delta);
}
