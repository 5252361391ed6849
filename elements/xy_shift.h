// Transverse shift of the reference frame (xtrack XYShift):
//   x -= dx,  y -= dy   (momenta and longitudinal coordinates unchanged).
// Source: xtrack/beam_elements/elements_src/track_xyshift.h (XYShift_single_particle),
// xtrack/beam_elements/xy_shift.py.
#pragma once
#include "fusetrack/device/element.h"

#define FT_XY_SHIFT_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                   \
  PARAM(double, dx, 0.0, "m", "horizontal shift of the frame (x_new = x - dx)") \
  PARAM(double, dy, 0.0, "m", "vertical shift of the frame (y_new = y - dy)")

FT_ELEMENT_STRUCT(XYShift, FT_XY_SHIFT_FIELDS)

FT_FUNCTION void XYShift_track(const XYShift& e, ft::ParticleView& p) {
  p.x += -e.dx;
  p.y += -e.dy;
}

FT_ELEMENT_COORDINATES(XYShift, FT_COORD_X | FT_COORD_Y, FT_COORD_X | FT_COORD_Y)
FT_REGISTER_ELEMENT(XYShift, FT_XY_SHIFT_FIELDS, FT_THIN, FT_NO_PREPARE,
                    "Transverse frame shift x -= dx, y -= dy (xtrack XYShift)")
