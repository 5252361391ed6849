// TaylorMap: a truncated power-series (polynomial) map of the six coordinates, as COSY Infinity and
// MAD-X PTC write them: each output coordinate is a sum of monomials of the input coordinates,
//   out_k = sum_{t : output[t] == k} coefficients[t] * x^e0 px^e1 y^e2 py^e3 zeta^e4 delta^e5,
//   (e0 .. e5) = exponents[6 t .. 6 t + 5],
// in fusetrack's (Xsuite's) coordinates, in this order: 0 x [m], 1 px, 2 y [m], 3 py, 4 zeta [m],
// 5 delta. All six outputs are computed from the coordinates as they enter the element (the old
// ones), then written back; a new delta is set with update_delta so ptau, rpp and rvv stay
// consistent. An output that no term addresses is left unchanged, so a 4D map needs no zeta or
// delta terms; an output that has terms is the whole polynomial (include its linear identity term).
//
// Table layout (fixed size, FT_TAYLOR_MAP_MAX_TERMS terms): term t has output[t] (-1: unused slot),
// exponents[6 t .. 6 t + 5] and coefficients[t]. In the lattice file the three arrays may be shorter
// than the maximum; missing entries take the defaults (output -1, exponent 0, coefficient 0). Terms
// are summed in table order. Units: a coefficient carries [out_k] / prod [in_j]^e_j.
//
// Maps from COSY (x, a, y, b, l, delta_K) or PTC (x, px, y, py, pt, -ct) coordinates must be
// converted to (x, px, y, py, zeta, delta) first; the map is applied as given, without symplectic
// completion. Optional `length` advances s (and counts in the circumference), the map itself moves
// the particle.
#pragma once
#include "fusetrack/device/element.h"

#define FT_TAYLOR_MAP_MAX_TERMS 64
#define FT_TAYLOR_MAP_MAX_EXPONENT 15

#define FT_TAYLORMAP_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                                     \
  ARRAY(int, output, FT_TAYLOR_MAP_MAX_TERMS, -1, "1",                                                          \
        "output coordinate of term t: 0 x, 1 px, 2 y, 3 py, 4 zeta, 5 delta; -1 unused")                         \
  ARRAY(int, exponents, 6 * FT_TAYLOR_MAP_MAX_TERMS, 0, "1",                                                    \
        "exponents of (x, px, y, py, zeta, delta) in term t at [6 t, 6 t + 5]")                                  \
  ARRAY(double, coefficients, FT_TAYLOR_MAP_MAX_TERMS, 0.0, "varies", "coefficient of term t")                 \
  PARAM(double, length, 0.0, "m", "length the map represents (advances s; the map itself moves the particle)") \
  DERIVED(int, term_count, "1", "1 + index of the last used term")                                            \
  DERIVED(int, computed_outputs, "1", "bit k set: output k is given by terms; the others pass through")

FT_ELEMENT_STRUCT(TaylorMap, FT_TAYLORMAP_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cstdio>
#include <stdexcept>

inline void TaylorMap_prepare(TaylorMap& e, const ft_reference& /*ref*/) {
  char msg[200];
  e.term_count = 0;
  e.computed_outputs = 0;
  for (int t = 0; t < FT_TAYLOR_MAP_MAX_TERMS; ++t) {
    if (e.output[t] < -1 || e.output[t] > 5) {
      std::snprintf(msg, sizeof(msg), "TaylorMap: output[%d] = %d; expected 0..5 (x, px, y, py, zeta, delta) or -1",
                    t, e.output[t]);
      throw std::invalid_argument(msg);
    }
    if (e.output[t] < 0) {
      if (e.coefficients[t] != 0.0) {
        std::snprintf(msg, sizeof(msg), "TaylorMap: coefficients[%d] = %.17g but output[%d] = -1 (unused term)", t,
                      e.coefficients[t], t);
        throw std::invalid_argument(msg);
      }
      continue;
    }
    for (int j = 0; j < 6; ++j) {
      const int n = e.exponents[6 * t + j];
      if (n < 0 || n > FT_TAYLOR_MAP_MAX_EXPONENT) {
        std::snprintf(msg, sizeof(msg), "TaylorMap: exponents[%d] = %d (term %d); expected 0..%d", 6 * t + j, n, t,
                      FT_TAYLOR_MAP_MAX_EXPONENT);
        throw std::invalid_argument(msg);
      }
    }
    e.term_count = t + 1;
    e.computed_outputs |= 1 << e.output[t];
  }
}
#endif

FT_FUNCTION void TaylorMap_track(const TaylorMap& e, ft::ParticleView& p) {
  const double in[6] = {p.x, p.px, p.y, p.py, p.zeta, p.delta};
  double out[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  for (int t = 0; t < e.term_count; ++t) {
    const int k = e.output[t];
    if (k < 0) continue;
    double m = e.coefficients[t];
    for (int j = 0; j < 6; ++j)
      for (int n = e.exponents[6 * t + j]; n > 0; --n) m *= in[j];
    out[k] += m;
  }
  const int c = e.computed_outputs;
  if (c & 1) p.x = out[0];
  if (c & 2) p.px = out[1];
  if (c & 4) p.y = out[2];
  if (c & 8) p.py = out[3];
  if (c & 16) p.zeta = out[4];
  if (c & 32) p.update_delta(out[5]);
}

FT_REGISTER_ELEMENT(TaylorMap, FT_TAYLORMAP_FIELDS, FT_THICK, FT_WITH_PREPARE,
                    "Polynomial (truncated Taylor) map of (x, px, y, py, zeta, delta), COSY/PTC table form")
