// Aperture that is the intersection of a centred rectangle and an ellipse (xtrack
// LimitRectEllipse), as LHC-type beam screens are described:
//   alive iff -max_x <= x <= max_x, -max_y <= y <= max_y and x^2 b^2 + y^2 a^2 <= a^2 b^2,
// evaluated as xtrack does (a_squ = a*a, b_squ = b*b, a_b_squ = a_squ*b_squ precomputed). The
// boundary is inside; a NaN fails every comparison and is lost.
// Source: xtrack/beam_elements/elements_src/limitrectellipse.h, xtrack/beam_elements/limit_rect_ellipse.py
// (defaults 1e10 m = xtrack UNLIMITED).
#pragma once
#include "fusetrack/device/element.h"

#define FT_LIMIT_RECT_ELLIPSE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)        \
  PARAM(double, max_x, 1e10, "m", "half width of the rectangle (|x| <= max_x)") \
  PARAM(double, max_y, 1e10, "m", "half height of the rectangle (|y| <= max_y)") \
  PARAM(double, a, 1e10, "m", "horizontal semi-axis of the ellipse")          \
  PARAM(double, b, 1e10, "m", "vertical semi-axis of the ellipse")            \
  DERIVED(double, a_squ, "m^2", "a^2")                                        \
  DERIVED(double, b_squ, "m^2", "b^2")                                        \
  DERIVED(double, a_b_squ, "m^4", "a^2 b^2")

FT_ELEMENT_STRUCT(LimitRectEllipse, FT_LIMIT_RECT_ELLIPSE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void LimitRectEllipse_prepare(LimitRectEllipse& e, const ft_reference& /*ref*/) {
  if (!(e.max_x > 0.0)) throw std::invalid_argument("LimitRectEllipse: max_x must be > 0");
  if (!(e.max_y > 0.0)) throw std::invalid_argument("LimitRectEllipse: max_y must be > 0");
  if (!(e.a > 0.0)) throw std::invalid_argument("LimitRectEllipse: semi-axis a must be > 0");
  if (!(e.b > 0.0)) throw std::invalid_argument("LimitRectEllipse: semi-axis b must be > 0");
  e.a_squ = e.a * e.a;
  e.b_squ = e.b * e.b;
  e.a_b_squ = e.a_squ * e.b_squ;
}
#endif

FT_FUNCTION void LimitRectEllipse_track(const LimitRectEllipse& e, ft::ParticleView& p) {
  const double x = p.x, y = p.y;
  const double temp = x * x * e.b_squ + y * y * e.a_squ;
  const bool inside = (x <= e.max_x) && (x >= -e.max_x) && (y <= e.max_y) && (y >= -e.max_y) && (temp <= e.a_b_squ);
  if (!inside) p.mark_lost();
}

FT_ELEMENT_COORDINATES(LimitRectEllipse, FT_COORD_X | FT_COORD_Y, 0)
FT_REGISTER_ELEMENT(LimitRectEllipse, FT_LIMIT_RECT_ELLIPSE_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Aperture: centred rectangle intersected with an ellipse, boundary inside (xtrack LimitRectEllipse)")
