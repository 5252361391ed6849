// Building blocks of the thick magnets (bend.h, thick_multipole.h): the drifts and kicks of a
// split Hamiltonian and the integrators that compose them. No element type is declared here.
//
// Hamiltonian of a magnet with curvature h of the reference frame, in Xsuite/MAD-X variables
// (x, px, y, py, zeta, delta), with normal/skew strengths k_n, j_n [m^-(n+1)] (MAD convention,
// By + i Bx = B rho sum (k_n + i j_n) (x + i y)^n / n!):
//   exact:    H = -(1 + h x) sqrt((1 + delta)^2 - px^2 - py^2) + k0 (x + h x^2 / 2) + V(x, y) + ...
//   expanded: H = (px^2 + py^2) / (2 (1 + delta)) - h x (1 + delta) + k0 (x + h x^2 / 2) + V(x, y)
//   with V = Re sum_{n>=1} (k_n + i j_n) (x + i y)^(n+1) / (n+1)! (+ j0 y for a skew dipole),
// and dzeta/ds = 1 + (dH/ddelta) / rvv (the drift of drift.h is the h = k = 0 case).
// The expanded form is the one of AT/trackcpp BndMPoleSymplectic4Pass and StrMPoleSymplectic4Pass
// (Terebilo, "Accelerator Toolbox for MATLAB", SLAC-PUB-8732, 2001); the exact form and the
// rot-kick-rot / mat-kick-mat splittings are xtrack's (track_magnet.h, track_magnet_drift.h,
// track_magnet_kick.h, track_magnet_configure.h).
//
// Kick of weight w (a fraction of the magnet), with KL_n, JL_n the strengths integrated over the
// whole magnet (what the element prepares):
//   px += w [-Re S + hl (1 + delta) - h k0l x + h k1l (y^2/2 - x^2)],  py += w [Im S + h k1l x y],
//   zeta -= w hl x / rvv,   S = sum_{n<=5} (KL_n + i JL_n) (x + i y)^n / n!  (Horner),
// where hl = h L when the drift is straight (the frame rotation is then in the kick), k0l and
// k1l the dipole and quadrupole integrals that enter the curvature terms of the vector
// potential (MAD-8 physics manual eq. 5.15; k1l = 0 in the AT form, which has no such term).
// Every piece is the exact flow of a part of H, so each composition below is symplectic, and
// the symmetric ones satisfy M(-L) = M(L)^-1.
#pragma once
#include "fusetrack/device/element.h"
#include "radiation.h"

#define FT_MAGNET_MAX_ORDER 5

// The slice loops stay loops on the GPU: unrolled, a ring of thick magnets with constant slice
// counts (the baked kernel) grows by the number of slices and NVRTC takes minutes.
// For the same reason the body of a thick magnet is one device function, called (not inlined)
// from every instance of the magnet in a baked kernel.
#if defined(FT_DEVICE_COMPILE)
#define FT_MAGNET_NO_UNROLL _Pragma("unroll 1")
#define FT_MAGNET_BODY_FUNCTION __device__ __noinline__
#else
#define FT_MAGNET_NO_UNROLL
#define FT_MAGNET_BODY_FUNCTION inline
#endif

/// Runs body(q) on a local copy q of the particle, then stores it back. A called (not inlined) magnet
/// body gets its particle by reference, in the caller's stack; without the copy every drift and kick
/// reloads and stores it, since the compiler cannot tell those stores from the element's parameters.
/// The copy lives in registers. The same arithmetic: the same bits.
template <class Body>
FT_FUNCTION void magnet_body_on_copy(ft::ParticleView& p, const Body& body) {
  ft::ParticleView q = p;
  body(q);
  p = q;
}

/// Integrators (the values of the `integrator` field of the thick magnets).
#define FT_INTEGRATOR_FOREST_RUTH 0  // 4th order, 3 kicks per step (AT/trackcpp *Symplectic4Pass)
#define FT_INTEGRATOR_TEAPOT 1       // xtrack 'teapot'
#define FT_INTEGRATOR_YOSHIDA 2      // xtrack 'yoshida4' (7 kicks per slice, coefficients from MAD-NG)
#define FT_INTEGRATOR_UNIFORM 3      // xtrack 'uniform' (drift-kick-drift, 2nd order)

/// The derived fields that hold a magnet's kick, declared in each thick magnet's field list:
/// c_n = (KL_n + i JL_n) / n! (n = 0..5) and the curvature terms.
#define FT_MAGNET_KICK_FIELDS(DERIVED)                                                 \
  DERIVED(double, kick_re0, "1", "KL_0 / 0! of the kick (integrated over the magnet)") \
  DERIVED(double, kick_im0, "1", "JL_0 / 0!")                                          \
  DERIVED(double, kick_re1, "m^-1", "KL_1 / 1!")                                       \
  DERIVED(double, kick_im1, "m^-1", "JL_1 / 1!")                                       \
  DERIVED(double, kick_re2, "m^-2", "KL_2 / 2!")                                       \
  DERIVED(double, kick_im2, "m^-2", "JL_2 / 2!")                                       \
  DERIVED(double, kick_re3, "m^-3", "KL_3 / 3!")                                       \
  DERIVED(double, kick_im3, "m^-3", "JL_3 / 3!")                                       \
  DERIVED(double, kick_re4, "m^-4", "KL_4 / 4!")                                       \
  DERIVED(double, kick_im4, "m^-4", "JL_4 / 4!")                                       \
  DERIVED(double, kick_re5, "m^-5", "KL_5 / 5!")                                       \
  DERIVED(double, kick_im5, "m^-5", "JL_5 / 5!")                                       \
  DERIVED(double, kick_hl, "rad", "h L of a frame rotation made by the kick")          \
  DERIVED(double, kick_h_k0l, "m^-1", "h k0 L of the curvature term")                  \
  DERIVED(double, kick_h_k1l, "m^-2", "h k1 L of the curvature terms")

/// The radiation fields of a thick magnet (radiation.h), declared in its field list.
#define FT_MAGNET_RADIATION_FIELDS(PARAM, DERIVED)                                                \
  FT_RADIATION_FIELDS(PARAM, DERIVED)                                                             \
  DERIVED(double, rad_length, "m", "length of the magnet (the kicks' lengths are w times it)")    \
  DERIVED(double, rad_inv_length, "m^-1", "1 / length: the kick's integrated field to the field") \
  DERIVED(double, rad_h, "m^-1", "curvature of the frame in the path-length factor 1 + h x")      \
  DERIVED(double, rad_k0, "m^-1", "dipole field integrated in the body, not in the kick")         \
  DERIVED(double, rad_k1, "m^-2", "gradient integrated in the body, not in the kick")             \
  DERIVED(double, rad_quantum_share, "1", "1 / (sum of the positive kick weights of a slice)")

#ifndef FT_DEVICE_COMPILE
/// Fills the kick fields of a thick magnet from strengths integrated over the magnet.
template <class E>
void magnet_set_kick(E& e, const double* knl, const double* ksl, double hl, double h_k0l, double h_k1l) {
  double* re[FT_MAGNET_MAX_ORDER + 1] = {&e.kick_re0, &e.kick_re1, &e.kick_re2, &e.kick_re3, &e.kick_re4, &e.kick_re5};
  double* im[FT_MAGNET_MAX_ORDER + 1] = {&e.kick_im0, &e.kick_im1, &e.kick_im2, &e.kick_im3, &e.kick_im4, &e.kick_im5};
  double factorial = 1.0;  // exact for n <= 18
  for (int n = 0; n <= FT_MAGNET_MAX_ORDER; ++n) {
    if (n > 1) factorial *= n;
    *re[n] = knl[n] / factorial;
    *im[n] = ksl[n] / factorial;
  }
  e.kick_hl = hl;
  e.kick_h_k0l = h_k0l;
  e.kick_h_k1l = h_k1l;
}
#endif

/// (re, im) <- (re, im) (x + i y) + (cr, ci): one Horner step.
FT_FUNCTION void magnet_horner_step(double& re, double& im, double x, double y, double cr, double ci) {
  const double zre = re * x - im * y;
  const double zim = re * y + im * x;
  re = zre + cr;
  im = zim + ci;
}

/// The kick of weight w of a magnet E with the FT_MAGNET_KICK_FIELDS (see the header comment);
/// with kRadiation, the radiation of the kick (radiation.h) before it, the kick taken with the delta
/// before the loss (AT bndthinkickrad).
template <bool kRadiation, class E>
FT_FUNCTION void magnet_kick_impl(const E& e, double w, ft::ParticleView& p) {
  const double x = p.x;
  const double y = p.y;
  double re = e.kick_re5;
  double im = e.kick_im5;
  magnet_horner_step(re, im, x, y, e.kick_re4, e.kick_im4);
  magnet_horner_step(re, im, x, y, e.kick_re3, e.kick_im3);
  magnet_horner_step(re, im, x, y, e.kick_re2, e.kick_im2);
  magnet_horner_step(re, im, x, y, e.kick_re1, e.kick_im1);
  magnet_horner_step(re, im, x, y, e.kick_re0, e.kick_im0);
  double dpx = -re;
  double dpy = im;
  if (e.kick_hl != 0.0) {
    dpx += e.kick_hl * (1.0 + p.delta);
    p.zeta += -(w * e.kick_hl) * x * p.rv0v;
  }
  dpx += -e.kick_h_k0l * x;
  if (e.kick_h_k1l != 0.0) {
    dpx += e.kick_h_k1l * (0.5 * y * y - x * x);
    dpy += e.kick_h_k1l * x * y;
  }
  if (kRadiation) {
    // The magnet's whole field at the particle: the kick's sum and the part integrated in the body.
    const double bx = im * e.rad_inv_length + e.rad_k1 * y;
    const double by = re * e.rad_inv_length + e.rad_k0 + e.rad_k1 * x;
    radiation_thick_kick(e.radiation, e.rad_mean, e.rad_quantum, e.radiation_seed, bx, by, e.rad_h, w * e.rad_length,
                         w > 0.0 ? e.rad_quantum_share : 0.0, p);
  }
  p.px += w * dpx;
  p.py += w * dpy;
}

template <class E>
FT_FUNCTION void magnet_kick(const E& e, double w, ft::ParticleView& p) {
  if (e.radiation != FT_RADIATION_OFF)
    magnet_kick_impl<true>(e, w, p);
  else
    magnet_kick_impl<false>(e, w, p);
}

/// Expanded drift (drift.h).
FT_FUNCTION void magnet_expanded_drift(double s, ft::ParticleView& p) {
  const double xp = p.px * p.rpp;
  const double yp = p.py * p.rpp;
  p.x += xp * s;
  p.y += yp * s;
  p.zeta += s * (1.0 - p.rv0v * (1.0 + (xp * xp + yp * yp) / 2.0));
}

/// Exact straight drift (drift_exact.h).
FT_FUNCTION void magnet_exact_drift(double s, ft::ParticleView& p) {
  const double opd = 1.0 + p.delta;
  const double one_over_pz = 1.0 / sqrt(opd * opd - p.px * p.px - p.py * p.py);
  p.x += p.px * one_over_pz * s;
  p.y += p.py * one_over_pz * s;
  p.zeta += s * (1.0 - p.rv0v * opd * one_over_pz);
}

/// Exact drift in a frame of curvature h over arc length s (the frame rotates by h s): the
// straight line of the particle intersected with the rotated reference plane (PTC Sprotr,
// MAD-NG curex_drift, xtrack track_polar_drift_single_particle). With rho = 1/h,
//   px' = px cos(hs) + pz sin(hs),   x' = (x + rho (1 - cos(hs) + sin(hs) px/pz)) / t,
//   t = cos(hs) - sin(hs) px / pz,   l = (x + rho) sin(hs) / (pz t)   (path / (1 + delta)),
//   y' = y + py l,   zeta += s - (1 + delta) l / rvv.
FT_FUNCTION void magnet_polar_drift(double s, double h, ft::ParticleView& p) {
  if (s == 0.0) return;
  const double opd = 1.0 + p.delta;
  const double pz = sqrt(opd * opd - p.px * p.px - p.py * p.py);
  const double rho = 1.0 / h;
  const double ca = ft_cos(h * s);
  const double sa = ft_sin(h * s);
  const double sa2 = ft_sin(0.5 * h * s);
  const double pxt = p.px / pz;
  const double inv_t = 1.0 / (ca - sa * pxt);
  const double l = (p.x + rho) * sa / pz * inv_t;
  p.x = (p.x + rho * (2.0 * sa2 * sa2 + sa * pxt)) * inv_t;
  p.px = ca * p.px + sa * pz;
  p.y += l * p.py;
  p.zeta += s - opd * l * p.rv0v;
}

/// xtrack's rot-kick-rot drift of a curved dipole (drift model 7): polar drifts and the k0 kick
/// px -= k0 ds composed by the 4th-order Forest-Ruth scheme with xtrack's coefficients.
FT_FUNCTION void magnet_polar_dipole(double s, double h, double k0, ft::ParticleView& p) {
  if (s == 0.0) return;
  magnet_polar_drift(0.6756035959798289 * s, h, p);
  p.px = p.px - 1.3512071919596578 * k0 * s;
  magnet_polar_drift(-0.17560359597982889 * s, h, p);
  p.px = p.px - (-1.7024143839193155) * k0 * s;
  magnet_polar_drift(-0.17560359597982889 * s, h, p);
  p.px = p.px - 1.3512071919596578 * k0 * s;
  magnet_polar_drift(0.6756035959798289 * s, h, p);
}

/// One plane of the exact linear motion u'' = -K u + a over length s, with u' = up; advances
/// (u, up) and returns (int_0^s u ds, int_0^s u'^2 ds) through the references.
FT_FUNCTION void magnet_linear_plane(double K, double a, double s, double& u, double& up, double& int_u,
                                     double& int_up2) {
  const double u0 = u;
  const double up0 = up;
  if (K == 0.0) {
    u = u0 + up0 * s + 0.5 * a * s * s;
    up = up0 + a * s;
    int_u = u0 * s + 0.5 * up0 * s * s + a * s * s * s / 6.0;
    int_up2 = up0 * up0 * s + up0 * a * s * s + a * a * s * s * s / 3.0;
    return;
  }
  double C, S;
  if (K > 0.0) {
    const double sk = sqrt(K);
    C = ft_cos(sk * s);
    S = ft_sin(sk * s) / sk;
  } else {
    const double sk = sqrt(-K);
    C = ft_cosh(sk * s);
    S = ft_sinh(sk * s) / sk;
  }
  // u = u_p + v with the particular solution u_p = a / K and v'' = -K v.
  const double up_const = a / K;
  const double v0 = u0 - up_const;
  u = up_const + C * v0 + S * up0;
  up = -K * S * v0 + C * up0;
  int_u = up_const * s + S * v0 + (1.0 - C) / K * up0;
  int_up2 = 0.5 * (K * v0 * v0 * (s - S * C) + up0 * up0 * (s + S * C)) - K * v0 * up0 * S * S;
}

/// Exact map of the expanded Hamiltonian with k0, k1 and curvature h (xtrack drift model 3,
/// "mat", from MAD-X trrun.f90): with k0' = k0 / (1 + delta), k1' = k1 / (1 + delta),
//   x'' = -(h k0' + k1') x + (h - k0'),  y'' = k1' y,
// and the path length s + h int x + (int x'^2 + int y'^2) / 2 gives zeta.
FT_FUNCTION void magnet_combined_map(double s, double k0, double k1, double h, ft::ParticleView& p) {
  if (s == 0.0) return;
  const double opd = 1.0 + p.delta;
  const double k0d = k0 / opd;
  const double k1d = k1 / opd;
  double xp = p.px / opd;
  double yp = p.py / opd;
  double int_x, int_xp2, int_y, int_yp2;
  magnet_linear_plane(k0d * h + k1d, h - k0d, s, p.x, xp, int_x, int_xp2);
  magnet_linear_plane(-k1d, 0.0, s, p.y, yp, int_y, int_yp2);
  p.px = xp * opd;
  p.py = yp * opd;
  const double path = s + h * int_x + 0.5 * (int_xp2 + int_yp2);
  p.zeta += s - path * p.rv0v;
}

/// The coefficients of one slice of an integrator, written as a first drift D(d_0) and pairs
/// [K(k_j) D(d_{j+1})]: row (FOREST_RUTH, YOSHIDA, UNIFORM) = {d_0, k_0, d_1, k_1, d_2, ...}, a drift of
/// coefficient x slice length and a kick of coefficient x slice weight. A table indexed in the loop (on
/// the GPU in constant memory): no branches and no registers for the constants.
///  FOREST_RUTH: D(a1) K(b1) D(a2) K(b2) D(a2) K(b1) D(a1), a1 = theta/2, a2 = (1 - theta)/2,
///    b1 = theta, b2 = 1 - 2 theta, theta = 1/(2 - 2^(1/3)) (E. Forest and R. Ruth, Physica D 43
///    (1990) 105; H. Yoshida, Phys. Lett. A 150 (1990) 262): 4th order.
///  YOSHIDA: xtrack's 7-kick slice (coefficients from MAD-NG).  UNIFORM: D(1/2) K(1) D(1/2).
#if defined(FT_DEVICE_COMPILE)
__constant__
#else
inline constexpr
#endif
    double ft_integrator_coefficients[3][15] = {
        {0.6756035959798288, 1.3512071919596575, -0.17560359597982883, -1.7024143839193153, -0.17560359597982883,
         1.3512071919596575, 0.6756035959798288},
        {3.922568052387799819591407413100e-01, 7.845136104775599639182814826199e-01,
         5.100434119184584780271052295575e-01, 2.355732133593569921359289764951e-01,
         -4.710533854097565531482416645304e-01, -1.177679984178870098432412305556e+00,
         6.875316825251809316199569366290e-02, 1.315186320683906284756403692882e+00,
         6.875316825251809316199569366290e-02, -1.177679984178870098432412305556e+00,
         -4.710533854097565531482416645304e-01, 2.355732133593569921359289764951e-01,
         5.100434119184584780271052295575e-01, 7.845136104775599639182814826199e-01,
         3.922568052387799819591407413100e-01},
        {0.5, 1.0, 0.5}};

/// Composes body.drift(ds, p) and body.kick(weight, p) over `length` with an integrator
/// (FOREST_RUTH: num_kicks steps; TEAPOT, YOSHIDA, UNIFORM: xtrack's schedules for num_kicks kicks,
/// track_magnet.h, in xtrack's order of operations). Two call sites of the drift and one of the
/// kick, in loops that are not unrolled: the code of a thick magnet does not grow with the
/// number of integrator stages (NVRTC compile time).
/// P is ft::ParticleView (one particle; the GPU and the tests) or, on the host, ft::ParticleLanes
/// (every alive particle of a block: each drift and kick is then one loop over the particles, and
/// each particle sees the same operations in the same order).
template <class Body, class P>
FT_FUNCTION void magnet_integrate(const Body& body, int integrator, int num_kicks, double length, P& p) {
  if (integrator == FT_INTEGRATOR_TEAPOT) {
    // D(edge) [K D(inside)] x (n - 1) K D(edge)
    const double w = 1.0 / num_kicks;
    double edge = 0.5;
    double inside = 0.0;
    if (num_kicks > 1) {
      edge = 1.0 / (2 * (1 + num_kicks));
      inside = static_cast<double>(num_kicks) / (static_cast<double>(num_kicks * num_kicks) - 1);
    }
    const int ops = 2 * num_kicks + 1;
    FT_MAGNET_NO_UNROLL
    for (int o = 0; o < ops; ++o) {
      if (o % 2 == 1)
        body.kick(w, p);
      else
        body.drift(((o == 0 || o == ops - 1) ? edge : inside) * length, p);
    }
    return;
  }
  int slices = num_kicks;  // Forest-Ruth: steps; uniform: kicks
  if (integrator == FT_INTEGRATOR_YOSHIDA) slices = num_kicks / 7 + (num_kicks % 7 != 0);
  const double slice = length / slices;
  const double w = 1.0 / slices;
  const int row = integrator == FT_INTEGRATOR_FOREST_RUTH ? 0 : integrator == FT_INTEGRATOR_YOSHIDA ? 1 : 2;
  const double* c = ft_integrator_coefficients[row];
  const int pairs = row == 0 ? 3 : row == 1 ? 7 : 1;
  FT_MAGNET_NO_UNROLL
  for (int i = 0; i < slices; ++i) {
    body.drift(c[0] * slice, p);
    FT_MAGNET_NO_UNROLL
    for (int j = 0; j < pairs; ++j) {
      body.kick(c[2 * j + 1] * w, p);
      body.drift(c[2 * j + 2] * slice, p);
    }
  }
}

#ifndef FT_DEVICE_COMPILE
// The drifts and kicks over all lanes of a block (host only): the per-particle function above,
// run lane by lane in one loop that vectorizes across the particles.
template <class E>
FT_LANES_FUNCTION void magnet_kick(const E& e, double w, ft::ParticleLanes& l) {
  // On a copy, the kick's tests of kick_hl and kick_h_k1l are invariants of the lane loop: decided
  // here once, they leave each loop without branches (GCC then vectorizes it without AVX-512's
  // masking, and computes no term that is not used).
  const E c = e;
  const auto kick = [&c, w](ft::ParticleView& p) { magnet_kick_impl<false>(c, w, p); };
  if (c.radiation != FT_RADIATION_OFF) {
    ft::for_each_lane(l, [&c, w](ft::ParticleView& p) { magnet_kick_impl<true>(c, w, p); });
    return;
  }
  if (c.kick_hl != 0.0) {
    if (c.kick_h_k1l != 0.0)
      ft::for_each_lane(l, kick);
    else
      ft::for_each_lane(l, kick);
  } else {
    if (c.kick_h_k1l != 0.0)
      ft::for_each_lane(l, kick);
    else
      ft::for_each_lane(l, kick);
  }
}
FT_LANES_FUNCTION void magnet_expanded_drift(double s, ft::ParticleLanes& l) {
  ft::for_each_lane(l, [s](ft::ParticleView& p) { magnet_expanded_drift(s, p); });
}
FT_LANES_FUNCTION void magnet_exact_drift(double s, ft::ParticleLanes& l) {
  ft::for_each_lane(l, [s](ft::ParticleView& p) { magnet_exact_drift(s, p); });
}
FT_LANES_FUNCTION void magnet_polar_dipole(double s, double h, double k0, ft::ParticleLanes& l) {
  ft::for_each_lane(l, [s, h, k0](ft::ParticleView& p) { magnet_polar_dipole(s, h, k0, p); });
}
FT_LANES_FUNCTION void magnet_combined_map(double s, double k0, double k1, double h, ft::ParticleLanes& l) {
  ft::for_each_lane(l, [s, k0, k1, h](ft::ParticleView& p) { magnet_combined_map(s, k0, k1, h, p); });
}
#endif

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
/// Fills the radiation fields of a thick magnet of the given length, frame curvature h and body fields
/// k0, k1 (radiation.h), after checking the switch.
template <class E>
void magnet_prepare_radiation(E& e, const ft_reference& ref, const char* type, double length, double h, double k0,
                              double k1) {
  radiation_prepare(e, ref, type);
  e.rad_length = length;
  e.rad_inv_length = length != 0.0 ? 1.0 / length : 0.0;  // a zero-length magnet has no field to radiate in
  e.rad_h = h;
  e.rad_k0 = k0;
  e.rad_k1 = k1;
  double positive = 1.0;  // teapot and uniform: every kick has a positive weight summing to 1 per slice
  if (e.integrator == FT_INTEGRATOR_FOREST_RUTH || e.integrator == FT_INTEGRATOR_YOSHIDA) {
    const int row = e.integrator == FT_INTEGRATOR_FOREST_RUTH ? 0 : 1;
    const int pairs = row == 0 ? 3 : 7;
    positive = 0.0;
    for (int j = 0; j < pairs; ++j)
      if (ft_integrator_coefficients[row][2 * j + 1] > 0.0) positive += ft_integrator_coefficients[row][2 * j + 1];
  }
  e.rad_quantum_share = 1.0 / positive;
}

/// Checks the integrator and slice fields of a thick magnet; returns the number of kicks
/// (Forest-Ruth: steps) to use. num_slices = 0 is automatic: 10 Forest-Ruth steps (AT's default
/// NumIntSteps); for xtrack's integrators xtrack's rule: 1 kick for a straight magnet, else one
/// per 0.5 mrad of bending (|angle| / (2 * 3.14159 * 0.5e-3), truncated, at least 1).
inline int magnet_num_kicks(const char* type, int integrator, int num_slices, double length, double h) {
  char msg[200];
  if (integrator < FT_INTEGRATOR_FOREST_RUTH || integrator > FT_INTEGRATOR_UNIFORM) {
    std::snprintf(msg, sizeof(msg),
                  "%s: integrator = %d is not one of 0 (Forest-Ruth), 1 (teapot), 2 (yoshida4), 3 (uniform)", type,
                  integrator);
    throw std::invalid_argument(msg);
  }
  if (num_slices < 0 || num_slices > 1000000) {
    std::snprintf(msg, sizeof(msg), "%s: num_slices = %d must be in [0, 1000000] (0: automatic)", type, num_slices);
    throw std::invalid_argument(msg);
  }
  if (num_slices > 0) return num_slices;
  if (integrator == FT_INTEGRATOR_FOREST_RUTH) return 10;
  if (std::fabs(h) < 1e-8) return 1;
  const double b_circum = 2 * 3.14159 / std::fabs(h);  // as xtrack writes it
  const long kicks = static_cast<long>(std::fabs(length) / b_circum / 0.5e-3);
  return kicks < 1 ? 1 : static_cast<int>(kicks);
}
#endif
