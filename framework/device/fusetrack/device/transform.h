// Element transformations (Xsuite's element misalignments: shift_x, shift_y, shift_s, rot_x_rad,
// rot_y_rad, rot_s_rad, rot_s_rad_no_frame, rot_shift_anchor), applied by the framework around an
// element's track function, for every element type, on the CPU and in the generated GPU kernels.
//
// A transformation is a short list of elementary frame changes at the entry of the element and
// another at its exit, in Xsuite's order (xtrack/beam_elements/elements_src/track_misalignments.h,
// track_misalignment_entry/exit_straight and _curved). The host (framework/src/transform.cpp)
// computes their parameters once (sines, cosines, tangents, the shifts of the curved geometry),
// so the device only runs + - * / sqrt on them and both backends read identical numbers.
//
// The operations, each on one particle (xtrack track_xyshift.h, track_drift.h, track_srotation.h,
// track_xrotation.h, track_yrotation.h):
//   shift xy (dx, dy):   x += -dx, y += -dy
//   shift s (ds):        exact drift by ds, then zeta += -ds
//   rotate y (s, c, t):  frame rotation about y by the angle whose sin, cos, tan are s, c, t
//                        (with pz = sqrt(1 + 2 pt / beta0 + pt^2 - px^2 - py^2), pt = ptau):
//                          ptt = 1 + t px / pz,  x <- x / (c ptt),  px <- c px - s pz,
//                          y <- y - t x py / (pz ptt),  zeta <- beta0 (zeta/beta0 + t x (1/beta0 + pt) / (pz ptt))
//   rotate x (s, c, t):  the same about x (ptt = 1 - t py / pz,  y <- y / (c ptt),  py <- c py + s pz,
//                          x <- x + t y px / (pz ptt),  zeta <- beta0 (zeta/beta0 - t y (1/beta0 + pt) / (pz ptt)))
//   rotate s (s, c):     x <- c x + s y, y <- -s x + c y, and the same for (px, py)
//
// The parameter block of a transformed element (8-byte words): word 0 holds the entry operations
// (4 bits each, first in the lowest bits, 0 ends the list) in bits 0-23, the exit operations in
// bits 24-47 and the number of words of the block (word 0 included) in bits 48-63; then the
// operations' values as doubles, entry first. In the switch kernels the element's own parameters
// follow the block.
#pragma once
#include "fusetrack/device/particle.h"
#include "fusetrack/device/qualifiers.h"

namespace ft {

enum TransformOperation : unsigned {
  kTransformEnd = 0,
  kTransformShiftXY = 1,  // values dx, dy [m]
  kTransformShiftS = 2,   // value ds [m]
  kTransformRotateY = 3,  // values sin, cos, tan
  kTransformRotateX = 4,  // values sin, cos, tan
  kTransformRotateS = 5,  // values sin, cos
};

/// The most operations at the entry or the exit (Xsuite's curved exit has six).
constexpr int kTransformMaxOperations = 6;
/// The most words of a transformation block: the header and three values per operation.
constexpr int kTransformMaxWords = 1 + 2 * 3 * kTransformMaxOperations;

FT_FUNCTION int transform_value_count(unsigned operation) {
  return operation == kTransformShiftS ? 1 : (operation == kTransformShiftXY || operation == kTransformRotateS) ? 2 : 3;
}

/// Frame rotation about y (xtrack YRotation_single_particle); for about x, swap_xy = true
/// (xtrack XRotation_single_particle, whose sin and tan enter with the opposite sign).
FT_FUNCTION void transform_rotate_y_(double sin_a, double cos_a, double tan_a, ParticleView& p) {
  const double beta0 = p.beta0;
  const double t = p.zeta / beta0;
  const double pt = (p.ptau / beta0) * beta0;  // xtrack: pzeta * beta0, with pzeta = ptau / beta0
  const double pz = sqrt(1.0 + 2.0 * pt / beta0 + pt * pt - p.px * p.px - p.py * p.py);
  const double ptt = 1.0 + tan_a * p.px / pz;
  const double x = p.x;
  p.x = x / (cos_a * ptt);
  p.px = cos_a * p.px - sin_a * pz;
  p.y = p.y - tan_a * x * p.py / (pz * ptt);
  const double t_hat = t + tan_a * x * (1.0 / beta0 + pt) / (pz * ptt);
  p.zeta = t_hat * beta0;
}

FT_FUNCTION void transform_rotate_x_(double sin_a, double cos_a, double tan_a, ParticleView& p) {
  const double beta0 = p.beta0;
  const double t = p.zeta / beta0;
  const double pt = (p.ptau / beta0) * beta0;
  const double pz = sqrt(1.0 + 2.0 * pt / beta0 + pt * pt - p.px * p.px - p.py * p.py);
  const double ptt = 1.0 - tan_a * p.py / pz;
  const double y = p.y;
  p.y = y / (cos_a * ptt);
  p.py = cos_a * p.py + sin_a * pz;
  p.x = p.x + tan_a * y * p.px / (pz * ptt);
  const double t_hat = t - tan_a * y * (1.0 / beta0 + pt) / (pz * ptt);
  p.zeta = t_hat * beta0;
}

FT_FUNCTION void transform_shift_xy_(const double* v, ParticleView& p) {
  p.x += -v[0];
  p.y += -v[1];
}

FT_FUNCTION void transform_rotate_s_(const double* v, ParticleView& p) {
  const double s = v[0], c = v[1];
  const double x = p.x, y = p.y, px = p.px, py = p.py;
  p.x = c * x + s * y;
  p.y = -s * x + c * y;
  p.px = c * px + s * py;
  p.py = -s * px + c * py;
}

/// Exact drift by ds, then zeta -= ds (xtrack: shift_s).
FT_FUNCTION void transform_shift_s_(double ds, ParticleView& p) {
  const double opd = 1.0 + p.delta;
  const double one_over_pz = 1.0 / sqrt(opd * opd - p.px * p.px - p.py * p.py);
  const double dzeta = 1.0 - p.rv0v * opd * one_over_pz;
  p.x += p.px * one_over_pz * ds;
  p.y += p.py * one_over_pz * ds;
  p.zeta += dzeta * ds;
  p.zeta += -ds;
}

/// One operation with its values. Generated kernels call it with a constant `operation` for types whose
/// blocks all hold the same operations (the switch folds away and the values sit at fixed offsets).
FT_FUNCTION void transform_operation(unsigned operation, const double* v, ParticleView& p) {
  switch (operation) {
    case kTransformShiftXY: transform_shift_xy_(v, p); break;
    case kTransformShiftS: transform_shift_s_(v[0], p); break;
    case kTransformRotateY: transform_rotate_y_(v[0], v[1], v[2], p); break;
    case kTransformRotateX: transform_rotate_x_(v[0], v[1], v[2], p); break;
    case kTransformRotateS: transform_rotate_s_(v, p); break;
    default: break;
  }
}

/// The operation lists of a shifted and rolled straight element (entry: shift then roll; exit:
/// roll then shift), the common case of misaligned thin multipoles.
constexpr unsigned long long kTransformShiftThenRoll = kTransformShiftXY | (kTransformRotateS << 4);
constexpr unsigned long long kTransformRollThenShift = kTransformRotateS | (kTransformShiftXY << 4);

/// Runs the operations `ops` (4 bits each) with their values from `v`; returns the values after them.
FT_FUNCTION const double* transform_apply(unsigned long long ops, const double* v, ParticleView& p) {
  // The most common lists as straight-line code: the same operations in the same order as the
  // loop below, so the same results, without its per-operation dispatch.
  if (ops == kTransformShiftThenRoll) {
    transform_shift_xy_(v, p);
    transform_rotate_s_(v + 2, p);
    return v + 4;
  }
  if (ops == kTransformRollThenShift) {
    transform_rotate_s_(v, p);
    transform_shift_xy_(v + 2, p);
    return v + 4;
  }
  for (; ops != 0ull; ops >>= 4) {
    const unsigned operation = static_cast<unsigned>(ops & 15ull);
    if (operation < kTransformShiftXY || operation > kTransformRotateS) return v;
    transform_operation(operation, v, p);
    v += transform_value_count(operation);
  }
  return v;
}

/// The header word of a block.
FT_FUNCTION unsigned long long transform_header(const unsigned char* block) {
  return *reinterpret_cast<const unsigned long long*>(block);
}

/// Number of values of the operations `ops`.
FT_FUNCTION int transform_values_of(unsigned long long ops) {
  if (ops == kTransformShiftThenRoll) return 4;
  int n = 0;
  for (; ops != 0ull; ops >>= 4) n += transform_value_count(static_cast<unsigned>(ops & 15ull));
  return n;
}

/// Into the element's frame; returns the element's own parameters (after the block).
FT_FUNCTION const unsigned char* transform_entry(const unsigned char* block, ParticleView& p) {
  const unsigned long long h = transform_header(block);
  transform_apply(h & 0xffffffull, reinterpret_cast<const double*>(block) + 1, p);
  return block + 8 * (h >> 48);
}

/// Back to the line's frame.
FT_FUNCTION void transform_exit(const unsigned char* block, ParticleView& p) {
  const unsigned long long h = transform_header(block);
  const double* v = reinterpret_cast<const double*>(block) + 1 + transform_values_of(h & 0xffffffull);
  transform_apply((h >> 24) & 0xffffffull, v, p);
}

}  // namespace ft
