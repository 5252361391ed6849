// Rotation of the reference frame about the s axis (xtrack SRotation), angle theta:
//   x  <-  cos x  + sin y,    y  <- -sin x  + cos y,
//   px <-  cos px + sin py,   py <- -sin px + cos py.
// Source: xtrack/beam_elements/elements_src/track_srotation.h (SRotation_single_particle);
// cos_z, sin_z from the angle in degrees as xtrack/beam_elements/s_rotation.py does
// (anglerad = angle / 180 * pi).
#pragma once
#include "fusetrack/device/element.h"

#define FT_S_ROTATION_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)               \
  REQUIRED(double, angle, "deg", "rotation angle about s (xtrack convention)") \
  DERIVED(double, cos_z, "1", "cos(angle)")                                  \
  DERIVED(double, sin_z, "1", "sin(angle)")

FT_ELEMENT_STRUCT(SRotation, FT_S_ROTATION_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
inline void SRotation_prepare(SRotation& e, const ft_reference& /*ref*/) {
  const double anglerad = e.angle / 180.0 * 3.141592653589793;
  e.cos_z = std::cos(anglerad);
  e.sin_z = std::sin(anglerad);
}
#endif

FT_FUNCTION void SRotation_track(const SRotation& e, ft::ParticleView& p) {
  const double c = e.cos_z;
  const double s = e.sin_z;
  const double x = p.x, y = p.y, px = p.px, py = p.py;
  p.x = c * x + s * y;
  p.y = -s * x + c * y;
  p.px = c * px + s * py;
  p.py = -s * px + c * py;
}

FT_ELEMENT_COORDINATES(SRotation, FT_COORD_TRANSVERSE, FT_COORD_TRANSVERSE)
FT_REGISTER_ELEMENT(SRotation, FT_S_ROTATION_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Rotation of the frame about s by `angle` degrees (xtrack SRotation)")
