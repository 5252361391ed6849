// Drift in the expanded (paraxial) Hamiltonian, as xtrack's Drift:
//   x' = px / (1 + delta),  y' = py / (1 + delta)
//   x += L x',  y += L y',  zeta += L (1 - (1 + (x'^2 + y'^2) / 2) / rvv)
// Source: xtrack/beam_elements/elements_src/drift.h (Drift_single_particle, expanded branch);
// H = -(1 + delta) + (px^2 + py^2) / (2 (1 + delta)) + ... , Wolski, "Beam Dynamics in High
// Energy Particle Accelerators" (2014), ch. 3.
#pragma once
#include "fusetrack/device/element.h"

#define FT_DRIFT_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED) \
  REQUIRED(double, length, "m", "length of the drift")

FT_ELEMENT_STRUCT(Drift, FT_DRIFT_FIELDS)

FT_FUNCTION void Drift_track(const Drift& e, ft::ParticleView& p) {
  const double xp = p.px * p.rpp;
  const double yp = p.py * p.rpp;
  const double rv0v = p.rv0v;  // 1 / rvv
  const double dzeta = 1.0 - rv0v * (1.0 + (xp * xp + yp * yp) / 2.0);
  p.x += xp * e.length;
  p.y += yp * e.length;
  p.zeta += e.length * dzeta;
}

FT_ELEMENT_COORDINATES(Drift, FT_COORD_X | FT_COORD_PX | FT_COORD_Y | FT_COORD_PY | FT_COORD_ZETA | FT_COORD_RPP | FT_COORD_RVV, FT_COORD_X | FT_COORD_Y | FT_COORD_ZETA)
FT_REGISTER_ELEMENT(Drift, FT_DRIFT_FIELDS, FT_THICK, FT_NO_PREPARE,
                    "Expanded drift (xtrack Drift), paraxial approximation")
