// Elliptical aperture (xtrack LimitEllipse) with semi-axes a, b:
//   alive iff x^2 b^2 + y^2 a^2 <= a^2 b^2   (evaluated as xtrack does, with a_squ = a*a,
//   b_squ = b*b, a_b_squ = a_squ*b_squ precomputed; the boundary is inside, NaN is lost).
// Source: xtrack/beam_elements/elements_src/limitellipse.h, xtrack/beam_elements/limit_ellipse.py.
#pragma once
#include "fusetrack/device/element.h"

#define FT_LIMIT_ELLIPSE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED) \
  REQUIRED(double, a, "m", "horizontal semi-axis")                \
  REQUIRED(double, b, "m", "vertical semi-axis")                  \
  DERIVED(double, a_squ, "m^2", "a^2")                            \
  DERIVED(double, b_squ, "m^2", "b^2")                            \
  DERIVED(double, a_b_squ, "m^4", "a^2 b^2")

FT_ELEMENT_STRUCT(LimitEllipse, FT_LIMIT_ELLIPSE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void LimitEllipse_prepare(LimitEllipse& e, const ft_reference& /*ref*/) {
  if (!(e.a > 0.0)) throw std::invalid_argument("LimitEllipse: semi-axis a must be > 0");
  if (!(e.b > 0.0)) throw std::invalid_argument("LimitEllipse: semi-axis b must be > 0");
  e.a_squ = e.a * e.a;
  e.b_squ = e.b * e.b;
  e.a_b_squ = e.a_squ * e.b_squ;
}
#endif

FT_FUNCTION void LimitEllipse_track(const LimitEllipse& e, ft::ParticleView& p) {
  const double temp = p.x * p.x * e.b_squ + p.y * p.y * e.a_squ;
  if (!(temp <= e.a_b_squ)) p.mark_lost();
}

FT_ELEMENT_COORDINATES(LimitEllipse, FT_COORD_X | FT_COORD_Y, 0)
FT_REGISTER_ELEMENT(LimitEllipse, FT_LIMIT_ELLIPSE_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Elliptical aperture x^2/a^2 + y^2/b^2 <= 1, boundary inside (xtrack LimitEllipse)")
