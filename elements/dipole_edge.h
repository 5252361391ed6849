// Dipole edge (pole-face rotation with fringe field), xtrack DipoleEdge linear model (model 0):
//   px += r21 x,  py += r43 y,  with
//   r21 = k tan(e1),
//   r43 = -k tan(e1_v - corr (1 + sin^2 e1_v) / cos e1_v),  e1_v = e1 + e1_fd,  corr = 2 k hgap fint.
// r21, r43 do not scale with 1/(1 + delta), as in xtrack. Sources:
// xtrack/beam_elements/elements_src/track_dipole_edge_linear.h
// (compute_dipole_edge_linear_coefficients, DipoleEdgeLinear_single_particle),
// xtrack/beam_elements/dipole_edge.py (_update_r21_r43); MAD-X DIPEDGE, MAD-X user guide.
#pragma once
#include "fusetrack/device/element.h"

#define FT_DIPOLE_EDGE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                     \
  REQUIRED(double, k, "m^-1", "dipole strength (curvature) of the adjacent bend")                   \
  PARAM(double, e1, 0.0, "rad", "pole-face angle")                                                \
  PARAM(double, hgap, 0.0, "m", "equivalent half gap")                                            \
  PARAM(double, fint, 0.0, "1", "fringe-field integral")                                          \
  PARAM(double, e1_fd, 0.0, "rad", "angle added to e1 in the vertical plane only (feed-down)")    \
  DERIVED(double, r21, "m^-1", "horizontal kick coefficient, px += r21 x")                        \
  DERIVED(double, r43, "m^-1", "vertical kick coefficient, py += r43 y")

FT_ELEMENT_STRUCT(DipoleEdge, FT_DIPOLE_EDGE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
/// The linear edge coefficients (xtrack compute_dipole_edge_linear_coefficients), shared with the
/// edges of the thick bends (bend.h): host-only, computed once in prepare.
inline void dipole_edge_linear_coefficients(double k, double e1, double e1_fd, double hgap, double fint,
                                            double& r21, double& r43) {
  const double corr = 2.0 * k * hgap * fint;
  r21 = k * std::tan(e1);
  const double e1_v = e1 + e1_fd;
  const double sin_e1_v = std::sin(e1_v);
  const double temp = corr / std::cos(e1_v) * (1.0 + sin_e1_v * sin_e1_v);
  r43 = -k * std::tan(e1_v - temp);
}

inline void DipoleEdge_prepare(DipoleEdge& e, const ft_reference& /*ref*/) {
  dipole_edge_linear_coefficients(e.k, e.e1, e.e1_fd, e.hgap, e.fint, e.r21, e.r43);
}
#endif

/// The linear edge kick px += r21 x, py += r43 y (also applied at the faces of bend.h).
FT_FUNCTION void dipole_edge_linear_kick(double r21, double r43, ft::ParticleView& p) {
  p.px += r21 * p.x;
  p.py += r43 * p.y;
}

#ifndef FT_DEVICE_COMPILE
FT_LANES_FUNCTION void dipole_edge_linear_kick(double r21, double r43, ft::ParticleLanes& l) {
  ft::for_each_lane(l, [r21, r43](ft::ParticleView& p) { dipole_edge_linear_kick(r21, r43, p); });
}
#endif

FT_FUNCTION void DipoleEdge_track(const DipoleEdge& e, ft::ParticleView& p) { dipole_edge_linear_kick(e.r21, e.r43, p); }

FT_ELEMENT_COORDINATES(DipoleEdge, FT_COORD_ALL, FT_COORD_PX | FT_COORD_PY)
FT_REGISTER_ELEMENT(DipoleEdge, FT_DIPOLE_EDGE_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Linear dipole edge px += r21 x, py += r43 y (xtrack DipoleEdge, model 'linear')")
