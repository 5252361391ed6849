// Circular aperture of radius r: alive iff x^2 + y^2 <= r^2 (boundary inside, NaN lost).
// Xsuite has no LimitCircle; it is LimitEllipse with a = b = r
// (xtrack/beam_elements/elements_src/limitellipse.h), written here without the common factor r^2.
#pragma once
#include "fusetrack/device/element.h"

#define FT_LIMIT_CIRCLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED) \
  REQUIRED(double, radius, "m", "aperture radius")               \
  DERIVED(double, radius_squ, "m^2", "radius^2")

FT_ELEMENT_STRUCT(LimitCircle, FT_LIMIT_CIRCLE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void LimitCircle_prepare(LimitCircle& e, const ft_reference& /*ref*/) {
  if (!(e.radius > 0.0)) throw std::invalid_argument("LimitCircle: radius must be > 0");
  e.radius_squ = e.radius * e.radius;
}
#endif

FT_FUNCTION void LimitCircle_track(const LimitCircle& e, ft::ParticleView& p) {
  if (!(p.x * p.x + p.y * p.y <= e.radius_squ)) p.mark_lost();
}

FT_ELEMENT_COORDINATES(LimitCircle, FT_COORD_X | FT_COORD_Y, 0)
FT_REGISTER_ELEMENT(LimitCircle, FT_LIMIT_CIRCLE_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Circular aperture x^2 + y^2 <= radius^2, boundary inside")
