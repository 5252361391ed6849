// Exact drift (xtrack DriftExact), from the full square-root Hamiltonian
//   H = -sqrt((1 + delta)^2 - px^2 - py^2) + ...,  pz = sqrt((1 + delta)^2 - px^2 - py^2):
//   x += L px / pz,  y += L py / pz,  zeta += L (1 - (1 + delta) / (pz rvv)).
// Source: xtrack/beam_elements/elements_src/track_drift.h (Drift_single_particle_exact),
// used by drift_exact.h (DriftExact_track_local_particle). Like xtrack, no guard for
// px^2 + py^2 >= (1 + delta)^2: the coordinates become NaN and the end-of-turn check loses it.
#pragma once
#include "fusetrack/device/element.h"

#define FT_DRIFT_EXACT_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED) \
  REQUIRED(double, length, "m", "length of the drift")

FT_ELEMENT_STRUCT(DriftExact, FT_DRIFT_EXACT_FIELDS)

FT_FUNCTION void DriftExact_track(const DriftExact& e, ft::ParticleView& p) {
  const double rv0v = p.rv0v;  // 1 / rvv
  const double opd = 1.0 + p.delta;
  const double one_over_pz = 1.0 / sqrt(opd * opd - p.px * p.px - p.py * p.py);
  const double dzeta = 1.0 - rv0v * opd * one_over_pz;
  p.x += p.px * one_over_pz * e.length;
  p.y += p.py * one_over_pz * e.length;
  p.zeta += dzeta * e.length;
}

FT_ELEMENT_COORDINATES(DriftExact, FT_COORD_X | FT_COORD_PX | FT_COORD_Y | FT_COORD_PY | FT_COORD_ZETA | FT_COORD_DELTA | FT_COORD_RVV, FT_COORD_X | FT_COORD_Y | FT_COORD_ZETA)
FT_REGISTER_ELEMENT(DriftExact, FT_DRIFT_EXACT_FIELDS, FT_THICK, FT_NO_PREPARE,
                    "Exact drift (xtrack DriftExact), full square-root Hamiltonian")
