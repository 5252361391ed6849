// Thick sector bend with combined-function gradient and multipoles (curvature h = angle / length,
// dipole k0, gradient k1, sextupole k2, octupole k3, skew j0..j3, extra integrated knl/ksl),
// linear edges with fringe fields at both faces. One element for the thick bends of AT/trackcpp
// and Xsuite; `model` picks how the body is split (magnet_integrators.h has the Hamiltonian):
//
//  model 0, "expanded" (default): the expanded Hamiltonian in the curved frame,
//      drift = expanded drift, kick = all multipoles incl. k0, the frame curvature
//      hl (1 + delta), -h k0l x and zeta -= hl x / rvv.
//    With integrator 0 (Forest-Ruth, 3 kicks per step) and num_slices = NumIntSteps this is AT's
//    and trackcpp's BndMPoleSymplectic4Pass (Terebilo 2001; AT bndthinkick/fastdrift), except that
//    the curvature term is h k0 x where AT writes h^2 x (they differ only when k0 != h, i.e. when
//    PolynomB[0] != 0; map k0 = h + PolynomB[0]).
//  model 1, "rot-kick-rot" (xtrack Bend default, model 3): the exact Hamiltonian;
//      drift = exact curved-frame (polar) drift with the k0 kick nested in it by a 4th-order
//      scheme, kick = multipoles without k0, -h k0l x and the h k1 terms (x^3/3 - x y^2/2).
//    For |h| < 1e-8 xtrack uses the exact straight drift with k0 and the frame rotation in the kick.
//  model 2, "mat-kick-mat" (xtrack model 4): drift = the exact linear map of the expanded
//      Hamiltonian with k0, k1 and h (chromatic), kick = k2.. multipoles, -h knl[0] x, h k1 terms.
//
//  integrator: 0 Forest-Ruth 4th order (num_slices steps of 3 kicks; 0 = 10 steps, AT's default),
//    1 teapot, 2 yoshida4 (xtrack's default for bends), 3 uniform: xtrack's schedules with
//    num_slices kicks (0 = xtrack's automatic count, one kick per 0.5 mrad of bending).
//  Edges (xtrack's linear model, the physics of dipole_edge.h): px += r21 x, py += r43 y with
//    r21 = k tan(e), r43 = -k tan(e + e_fd - 2 k hgap fint (1 + sin^2(e + e_fd)) / cos(e + e_fd)),
//    k = k0 + knl[0] / length, applied before the body (entry) and after it (exit) when active.
//    AT's edge_fringe (method 1, FullGap = 2 hgap) is the same with k = 1/rho.
//  Xsuite tracks an RBend with its default (curved-body) rbend_model as this Bend with
//  edge angles increased by angle/2 (the importer does that).
//
//  Radiation (field `radiation`, radiation.h): at every kick of the body, from the whole field of the
//    magnet at the particle (AT BndMPoleSymplectic4RadPass); none in the edges.
//
// Sources: xtrack/beam_elements/elements_src/bend.h, track_magnet.h, track_magnet_configure.h,
// track_magnet_drift.h, track_magnet_kick.h, track_dipole_edge_linear.h, default_magnet_config.h;
// AT atintegrators/BndMPoleSymplectic4Pass.c; MAD-8 physics manual eq. 5.15.
#pragma once
#include "dipole_edge.h"
#include "fusetrack/device/element.h"
#include "magnet_integrators.h"

#define FT_BEND_MODEL_EXPANDED 0
#define FT_BEND_MODEL_ROT_KICK_ROT 1
#define FT_BEND_MODEL_MAT_KICK_MAT 2

// How the body drifts (derived from model and h).
#define FT_BEND_BODY_EXPANDED 0
#define FT_BEND_BODY_POLAR 1
#define FT_BEND_BODY_EXACT_STRAIGHT 2
#define FT_BEND_BODY_COMBINED 3

#define FT_BEND_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                                       \
  REQUIRED(double, length, "m", "arc length of the reference trajectory in the magnet")                       \
  PARAM(double, angle, 0.0, "rad", "bending angle of the reference trajectory; curvature h = angle / length") \
  PARAM(double, k0, 0.0, "m^-1", "dipole strength By / (B rho); used when k0_from_h = 0")                     \
  PARAM(int, k0_from_h, 1, "1", "1: k0 = h (the field that bends the reference); 0: k0 as given")             \
  PARAM(double, k1, 0.0, "m^-2", "normal gradient")                                                           \
  PARAM(double, k2, 0.0, "m^-3", "normal sextupole strength")                                                 \
  PARAM(double, k3, 0.0, "m^-4", "normal octupole strength")                                                  \
  PARAM(double, k0s, 0.0, "m^-1", "skew dipole strength Bx / (B rho)")                                        \
  PARAM(double, k1s, 0.0, "m^-2", "skew gradient")                                                            \
  PARAM(double, k2s, 0.0, "m^-3", "skew sextupole strength")                                                  \
  PARAM(double, k3s, 0.0, "m^-4", "skew octupole strength")                                                   \
  ARRAY(double, knl, FT_MAGNET_MAX_ORDER + 1, 0.0, "m^-n", "additional integrated normal strengths K_n L")    \
  ARRAY(double, ksl, FT_MAGNET_MAX_ORDER + 1, 0.0, "m^-n", "additional integrated skew strengths J_n L")      \
  PARAM(int, model, 0, "1",                                                                                   \
        "0: expanded (AT BndMPoleSymplectic4Pass), 1: xtrack rot-kick-rot, 2: xtrack mat-kick-mat")           \
  PARAM(int, integrator, 0, "1", "0: Forest-Ruth 4th order, 1: teapot, 2: yoshida4, 3: uniform (xtrack's)")   \
  PARAM(int, num_slices, 0, "1", "Forest-Ruth steps, or kicks of xtrack's integrators; 0: automatic")         \
  PARAM(double, edge_entry_angle, 0.0, "rad", "entry pole-face angle e1")                                     \
  PARAM(double, edge_exit_angle, 0.0, "rad", "exit pole-face angle e2")                                       \
  PARAM(double, edge_entry_angle_fdown, 0.0, "rad", "angle added to e1 in the vertical edge kick only")       \
  PARAM(double, edge_exit_angle_fdown, 0.0, "rad", "angle added to e2 in the vertical edge kick only")        \
  PARAM(double, edge_entry_hgap, 0.0, "m", "entry half gap")                                                  \
  PARAM(double, edge_exit_hgap, 0.0, "m", "exit half gap")                                                    \
  PARAM(double, edge_entry_fint, 0.0, "1", "entry fringe-field integral")                                     \
  PARAM(double, edge_exit_fint, 0.0, "1", "exit fringe-field integral")                                       \
  PARAM(int, edge_entry_active, 1, "1", "1: apply the entry edge, 0: not")                                    \
  PARAM(int, edge_exit_active, 1, "1", "1: apply the exit edge, 0: not")                                      \
  DERIVED(double, h, "m^-1", "curvature angle / length")                                                      \
  DERIVED(double, k0_body, "m^-1", "k0 integrated in the drift (models 1 and 2)")                             \
  DERIVED(double, k1_body, "m^-2", "k1 integrated in the drift (model 2)")                                    \
  DERIVED(int, body, "1", "drift of the body: 0 expanded, 1 polar with k0, 2 exact straight, 3 combined map") \
  DERIVED(int, num_kicks, "1", "Forest-Ruth steps or kicks used")                                             \
  DERIVED(double, r21_entry, "m^-1", "entry edge px += r21 x")                                                \
  DERIVED(double, r43_entry, "m^-1", "entry edge py += r43 y")                                                \
  DERIVED(double, r21_exit, "m^-1", "exit edge px += r21 x")                                                  \
  DERIVED(double, r43_exit, "m^-1", "exit edge py += r43 y")                                                  \
  FT_MAGNET_KICK_FIELDS(DERIVED)                                                                              \
  FT_MAGNET_RADIATION_FIELDS(PARAM, DERIVED)

FT_ELEMENT_STRUCT(Bend, FT_BEND_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
inline void Bend_prepare(Bend& e, const ft_reference& ref) {
  char msg[240];
  auto fail = [](const char* text) { throw std::invalid_argument(std::string("Bend: ") + text); };
  if (e.model < FT_BEND_MODEL_EXPANDED || e.model > FT_BEND_MODEL_MAT_KICK_MAT) {
    std::snprintf(msg, sizeof(msg), "model = %d is not one of 0 (expanded), 1 (rot-kick-rot), 2 (mat-kick-mat)",
                  e.model);
    fail(msg);
  }
  if (e.k0_from_h != 0 && e.k0_from_h != 1) {
    std::snprintf(msg, sizeof(msg), "k0_from_h = %d must be 0 or 1", e.k0_from_h);
    fail(msg);
  }
  if (e.k0_from_h == 1 && e.k0 != 0.0) {
    std::snprintf(msg, sizeof(msg), "k0 = %.17g is given but k0_from_h = 1 sets k0 = h; set k0_from_h to 0 to use k0",
                  e.k0);
    fail(msg);
  }
  for (const int active : {e.edge_entry_active, e.edge_exit_active})
    if (active != 0 && active != 1) {
      std::snprintf(msg, sizeof(msg), "edge_entry_active / edge_exit_active = %d must be 0 or 1", active);
      fail(msg);
    }
  if (e.length == 0.0) fail("length must be non-zero (a thick bend; use Multipole with hxl for a thin one)");
  e.h = e.angle / e.length;
  const double k0 = e.k0_from_h ? e.h : e.k0;
  e.num_kicks = magnet_num_kicks("Bend", e.integrator, e.num_slices, e.length, e.h);

  // Strengths integrated over the magnet; the body models take parts of them out of the kick.
  const double L = e.length;
  double knl[FT_MAGNET_MAX_ORDER + 1], ksl[FT_MAGNET_MAX_ORDER + 1];
  for (int n = 0; n <= FT_MAGNET_MAX_ORDER; ++n) {
    knl[n] = e.knl[n];
    ksl[n] = e.ksl[n];
  }
  const double k0l = k0 * L + e.knl[0];
  const double k1l = e.k1 * L + e.knl[1];
  knl[1] += e.k1 * L;
  knl[2] += e.k2 * L;
  knl[3] += e.k3 * L;
  ksl[0] += e.k0s * L;
  ksl[1] += e.k1s * L;
  ksl[2] += e.k2s * L;
  ksl[3] += e.k3s * L;
  e.k0_body = 0.0;
  e.k1_body = 0.0;
  double hl = 0.0, h_k0l = 0.0, h_k1l = 0.0;
  if (e.model == FT_BEND_MODEL_EXPANDED) {
    e.body = FT_BEND_BODY_EXPANDED;
    knl[0] += k0 * L;
    hl = e.h * L;
    h_k0l = e.h * k0l;
  } else if (e.model == FT_BEND_MODEL_ROT_KICK_ROT) {
    h_k0l = e.h * k0l;
    h_k1l = e.h * k1l;
    if (std::fabs(e.h) < 1e-8) {  // xtrack H_TOLERANCE: straight exact drift, k0 and rotation in the kick
      e.body = FT_BEND_BODY_EXACT_STRAIGHT;
      knl[0] += k0 * L;
      hl = e.h * L;
    } else {
      e.body = FT_BEND_BODY_POLAR;
      e.k0_body = k0;
    }
  } else {  // mat-kick-mat: k0, k1, h in the linear map
    e.body = FT_BEND_BODY_COMBINED;
    e.k0_body = k0;
    e.k1_body = e.k1;
    knl[1] = e.knl[1];  // k1 is in the map; only knl[1] stays in the kick
    h_k0l = e.h * e.knl[0];
    h_k1l = e.h * k1l;
  }
  magnet_set_kick(e, knl, ksl, hl, h_k0l, h_k1l);
  magnet_prepare_radiation(e, ref, "Bend", L, e.h, e.k0_body, e.k1_body);

  // Edges: xtrack's linear edge with k = k0 + knl[0] / length.
  const double k_edge = k0 + (std::fabs(L) > 1e-10 ? e.knl[0] / L : 0.0);
  dipole_edge_linear_coefficients(k_edge, e.edge_entry_angle, e.edge_entry_angle_fdown, e.edge_entry_hgap,
                                  e.edge_entry_fint, e.r21_entry, e.r43_entry);
  dipole_edge_linear_coefficients(k_edge, e.edge_exit_angle, e.edge_exit_angle_fdown, e.edge_exit_hgap,
                                  e.edge_exit_fint, e.r21_exit, e.r43_exit);
}
#endif

// P: ft::ParticleView, or ft::ParticleLanes on the host (magnet_integrators.h).
struct BendBody {
  const Bend& e;
  template <class P>
  FT_FUNCTION void drift(double s, P& p) const {
    if (e.body == FT_BEND_BODY_EXPANDED) {
      magnet_expanded_drift(s, p);
    } else if (e.body == FT_BEND_BODY_POLAR) {
      magnet_polar_dipole(s, e.h, e.k0_body, p);
    } else if (e.body == FT_BEND_BODY_EXACT_STRAIGHT) {
      if (s != 0.0) magnet_exact_drift(s, p);
    } else {
      magnet_combined_map(s, e.k0_body, e.k1_body, e.h, p);
    }
  }
  template <class P>
  FT_FUNCTION void kick(double w, P& p) const {
    magnet_kick(e, w, p);
  }
};

template <class P>
FT_FUNCTION void bend_body(const Bend& e, P& p) {
  const BendBody body{e};
  magnet_integrate(body, e.integrator, e.num_kicks, e.length, p);
}

// On a copy of the particle (magnet_body_on_copy): in the called body, loads of the element's
// parameters do not wait for stores to the caller's particle.
FT_MAGNET_BODY_FUNCTION void Bend_body(const Bend& e, ft::ParticleView& p) {
  magnet_body_on_copy(p, [&e](ft::ParticleView& q) { bend_body(e, q); });
}

#ifndef FT_DEVICE_COMPILE
inline void Bend_body(const Bend& e, ft::ParticleLanes& l) { bend_body(e, l); }
#endif

template <class P>
FT_FUNCTION void bend_track(const Bend& e, P& p) {
  if (e.edge_entry_active) dipole_edge_linear_kick(e.r21_entry, e.r43_entry, p);
  Bend_body(e, p);
  if (e.edge_exit_active) dipole_edge_linear_kick(e.r21_exit, e.r43_exit, p);
}

FT_FUNCTION void Bend_track(const Bend& e, ft::ParticleView& p) { bend_track(e, p); }

#ifndef FT_DEVICE_COMPILE
/// The CPU form: the edges and every drift and kick over all alive particles of a block at once.
inline void Bend_track_lanes(const Bend& e, ft::ParticleLanes& l) { bend_track(e, l); }
#endif

// Written: the energy coordinates too, for the radiation.
FT_ELEMENT_COORDINATES(Bend, FT_COORD_ALL, FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_ENERGY)
FT_REGISTER_ELEMENT(Bend, FT_BEND_FIELDS, FT_THICK, FT_WITH_PREPARE,
                    "Thick sector bend with gradient and multipoles, edges with fringe fields; models: expanded "
                    "(AT BndMPoleSymplectic4Pass), xtrack rot-kick-rot and mat-kick-mat")
