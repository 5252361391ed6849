// Racetrack aperture (xtrack LimitRacetrack): the rectangle [min_x, max_x] x [min_y, max_y]
// whose four corners are rounded by quarter ellipses of semi-axes a (horizontal), b (vertical).
//   alive iff inside the rectangle and, when in a corner region (|x| beyond the inner rectangle
//   [min_x + a, max_x - a] and |y| beyond [min_y + b, max_y - b]), with dx, dy the offsets from
//   that corner's ellipse centre: dx^2 b^2 + dy^2 a^2 <= a^2 b^2.
// Boundary inside; NaN fails the rectangle test and is lost.
// Source: xtrack/beam_elements/elements_src/limitracetrack.h, xtrack/beam_elements/limit_racetrack.py
// (checks: a, b >= 0, max >= min, a <= (max_x - min_x)/2, b <= (max_y - min_y)/2).
#pragma once
#include "fusetrack/device/element.h"

#define FT_LIMIT_RACETRACK_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)       \
  PARAM(double, min_x, -1e10, "m", "lower horizontal limit")               \
  PARAM(double, max_x, 1e10, "m", "upper horizontal limit")                \
  PARAM(double, min_y, -1e10, "m", "lower vertical limit")                 \
  PARAM(double, max_y, 1e10, "m", "upper vertical limit")                  \
  PARAM(double, a, 0.0, "m", "horizontal semi-axis of the corner ellipses") \
  PARAM(double, b, 0.0, "m", "vertical semi-axis of the corner ellipses")

FT_ELEMENT_STRUCT(LimitRacetrack, FT_LIMIT_RACETRACK_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <stdexcept>
inline void LimitRacetrack_prepare(LimitRacetrack& e, const ft_reference& /*ref*/) {
  if (!(e.a >= 0.0)) throw std::invalid_argument("LimitRacetrack: a must be >= 0");
  if (!(e.b >= 0.0)) throw std::invalid_argument("LimitRacetrack: b must be >= 0");
  if (!(e.min_x <= e.max_x)) throw std::invalid_argument("LimitRacetrack: min_x must be <= max_x");
  if (!(e.min_y <= e.max_y)) throw std::invalid_argument("LimitRacetrack: min_y must be <= max_y");
  if (e.a > 0.5 * (e.max_x - e.min_x))
    throw std::invalid_argument("LimitRacetrack: a must be <= (max_x - min_x) / 2");
  if (e.b > 0.5 * (e.max_y - e.min_y))
    throw std::invalid_argument("LimitRacetrack: b must be <= (max_y - min_y) / 2");
}
#endif

FT_FUNCTION void LimitRacetrack_track(const LimitRacetrack& e, ft::ParticleView& p) {
  const double x = p.x;
  const double y = p.y;
  bool alive = (x >= e.min_x) && (x <= e.max_x) && (y >= e.min_y) && (y <= e.max_y);
  if (alive) {
    const double rect_min_x = e.min_x + e.a;
    const double rect_max_x = e.max_x - e.a;
    const double rect_min_y = e.min_y + e.b;
    const double rect_max_y = e.max_y - e.b;
    // Offsets from the centre of the corner ellipse, when in a corner region.
    const bool right = x > rect_max_x;
    const bool left = x < rect_min_x;
    const bool top = y > rect_max_y;
    const bool bottom = y < rect_min_y;
    if ((right || left) && (top || bottom)) {
      const double dx = right ? x - rect_max_x : x - rect_min_x;
      const double dy = top ? y - rect_max_y : y - rect_min_y;
      const double temp = dx * dx * e.b * e.b + dy * dy * e.a * e.a;
      alive = temp <= e.a * e.a * e.b * e.b;
    }
  }
  if (!alive) p.mark_lost();
}

FT_ELEMENT_COORDINATES(LimitRacetrack, FT_COORD_X | FT_COORD_Y, 0)
FT_REGISTER_ELEMENT(LimitRacetrack, FT_LIMIT_RACETRACK_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Racetrack aperture: rectangle with elliptic corners a, b (xtrack LimitRacetrack)")
