// Polygonal aperture (xtrack LimitPolygon): alive iff (x, y) is inside the polygon of the first
// n_vertices vertices (closed from the last vertex back to the first), by the crossing-number
// test: a horizontal ray from the point towards +x crosses the edges an odd number of times
// (W. R. Franklin's PNPOLY; xtrack evaluates the same test, edge (j, i) with j the previous vertex):
//   crossing iff (y_i > y) != (y_j > y) and x < (x_j - x_i) (y - y_i) / (y_j - y_i) + x_i.
// A point exactly on a left or bottom edge counts inside, on a right or top edge outside (the
// half-open convention of the test); a NaN makes every comparison false and is lost.
// xtrack's CPU code first accepts points inside the largest circle about the origin that touches
// no edge; that shortcut is left out here (one test for every point, on every backend).
// Source: xtrack/beam_elements/elements_src/limitpolygon.h, xtrack/beam_elements/limit_polygon.py.
#pragma once
#include "fusetrack/device/element.h"

#define FT_LIMIT_POLYGON_MAX_VERTICES 64

#define FT_LIMIT_POLYGON_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                            \
  REQUIRED(int, n_vertices, "1", "number of vertices used (3 .. 64); entries after them must be 0")          \
  ARRAY(double, x_vertices, FT_LIMIT_POLYGON_MAX_VERTICES, 0.0, "m", "horizontal positions of the vertices") \
  ARRAY(double, y_vertices, FT_LIMIT_POLYGON_MAX_VERTICES, 0.0, "m", "vertical positions of the vertices")

FT_ELEMENT_STRUCT(LimitPolygon, FT_LIMIT_POLYGON_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cstdio>
#include <stdexcept>
inline void LimitPolygon_prepare(LimitPolygon& e, const ft_reference& /*ref*/) {
  char msg[200];
  if (e.n_vertices < 3 || e.n_vertices > FT_LIMIT_POLYGON_MAX_VERTICES) {
    std::snprintf(msg, sizeof(msg), "LimitPolygon: n_vertices = %d is outside [3, %d]", e.n_vertices,
                  FT_LIMIT_POLYGON_MAX_VERTICES);
    throw std::invalid_argument(msg);
  }
  for (int i = e.n_vertices; i < FT_LIMIT_POLYGON_MAX_VERTICES; ++i) {
    if (e.x_vertices[i] != 0.0 || e.y_vertices[i] != 0.0) {
      std::snprintf(msg, sizeof(msg),
                    "LimitPolygon: x_vertices[%d] or y_vertices[%d] is given but n_vertices = %d (more vertices than "
                    "declared)",
                    i, i, e.n_vertices);
      throw std::invalid_argument(msg);
    }
  }
  // Shoelace area: a polygon of zero area keeps no particle (all vertices on a line, or repeated).
  double twice_area = 0.0;
  for (int i = 0, j = e.n_vertices - 1; i < e.n_vertices; j = i++)
    twice_area += e.x_vertices[j] * e.y_vertices[i] - e.x_vertices[i] * e.y_vertices[j];
  if (!(twice_area != 0.0)) {
    std::snprintf(msg, sizeof(msg), "LimitPolygon: the %d vertices enclose no area", e.n_vertices);
    throw std::invalid_argument(msg);
  }
}
#endif

FT_FUNCTION void LimitPolygon_track(const LimitPolygon& e, ft::ParticleView& p) {
  const double x = p.x, y = p.y;
  bool inside = false;
  for (int i = 0, j = e.n_vertices - 1; i < e.n_vertices; j = i++) {
    const double xi = e.x_vertices[i], yi = e.y_vertices[i];
    const double xj = e.x_vertices[j], yj = e.y_vertices[j];
    if (((yi > y) != (yj > y)) && (x < (xj - xi) * (y - yi) / (yj - yi) + xi)) inside = !inside;
  }
  if (!inside) p.mark_lost();
}

FT_ELEMENT_COORDINATES(LimitPolygon, FT_COORD_X | FT_COORD_Y, 0)
FT_REGISTER_ELEMENT(LimitPolygon, FT_LIMIT_POLYGON_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Polygonal aperture, crossing-number test (xtrack LimitPolygon)")
