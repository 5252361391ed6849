// Longitudinal drift through an arc: the slippage of zeta of a ring's section with momentum compaction,
// for longitudinal-only models (BLonD's drift of (dt, dE); xtrack's LineSegmentMap longitudinal part).
// An off-momentum particle's path over the section is L (1 + alpha_c delta + alpha_2 delta^2) and its
// speed beta c, so with zeta = s - beta0 c t:
//   zeta += L (1 - (1 + alpha_c delta + alpha_2 delta^2) beta0 / beta)
// (S.Y. Lee, "Accelerator Physics", 4th ed. (2019), sec. 2.II: path length and the phase slip factor
// eta = alpha_c - 1/gamma^2 to first order). With alpha_c = alpha_2 = 0 it is Drift's zeta change of a
// particle with px = py = 0. The transverse coordinates are neither read nor written.
#pragma once
#include "fusetrack/device/element.h"

#define FT_LONGITUDINAL_DRIFT_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                     \
  REQUIRED(double, length, "m", "length of the section")                                  \
  PARAM(double, momentum_compaction, 0.0, "1", "first-order momentum compaction alpha_c") \
  PARAM(double, momentum_compaction_2, 0.0, "1", "second-order momentum compaction alpha_2")

FT_ELEMENT_STRUCT(LongitudinalDrift, FT_LONGITUDINAL_DRIFT_FIELDS)

FT_FUNCTION void LongitudinalDrift_track(const LongitudinalDrift& e, ft::ParticleView& p) {
  const double path = 1.0 + e.momentum_compaction * p.delta + e.momentum_compaction_2 * (p.delta * p.delta);
  p.zeta += e.length * (1.0 - path * p.rv0v);
}

FT_ELEMENT_COORDINATES(LongitudinalDrift, FT_COORD_ZETA | FT_COORD_DELTA | FT_COORD_RVV, FT_COORD_ZETA)
FT_REGISTER_ELEMENT(LongitudinalDrift, FT_LONGITUDINAL_DRIFT_FIELDS, FT_THICK, FT_NO_PREPARE,
                    "Longitudinal drift of an arc with momentum compaction (slippage of zeta only)")
