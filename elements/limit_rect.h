// Rectangular aperture (xtrack LimitRect): alive iff min_x <= x <= max_x and min_y <= y <= max_y.
// The boundary counts as inside; a NaN fails every comparison and is lost.
// Source: xtrack/beam_elements/elements_src/limitrect.h, xtrack/beam_elements/limit_rect.py
// (defaults +-1e10 m = xtrack UNLIMITED).
#pragma once
#include "fusetrack/device/element.h"

#define FT_LIMIT_RECT_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)   \
  PARAM(double, min_x, -1e10, "m", "lower horizontal limit")      \
  PARAM(double, max_x, 1e10, "m", "upper horizontal limit")       \
  PARAM(double, min_y, -1e10, "m", "lower vertical limit")        \
  PARAM(double, max_y, 1e10, "m", "upper vertical limit")

FT_ELEMENT_STRUCT(LimitRect, FT_LIMIT_RECT_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void LimitRect_prepare(LimitRect& e, const ft_reference& /*ref*/) {
  if (!(e.min_x <= e.max_x)) throw std::invalid_argument("LimitRect: min_x must be <= max_x");
  if (!(e.min_y <= e.max_y)) throw std::invalid_argument("LimitRect: min_y must be <= max_y");
}
#endif

FT_FUNCTION void LimitRect_track(const LimitRect& e, ft::ParticleView& p) {
  const bool inside = (p.x >= e.min_x) && (p.x <= e.max_x) && (p.y >= e.min_y) && (p.y <= e.max_y);
  if (!inside) p.mark_lost();
}

FT_ELEMENT_COORDINATES(LimitRect, FT_COORD_X | FT_COORD_Y, 0)
FT_REGISTER_ELEMENT(LimitRect, FT_LIMIT_RECT_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Rectangular aperture, boundary inside (xtrack LimitRect)")
