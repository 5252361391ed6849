// Weak-strong 4D beam-beam lens (xfields BeamBeamBiGaussian2D): the transverse kick of a frozen
// partner bunch with a Gaussian (x, y) distribution, integrated over its passage. Thin; changes px and
// py only.
//
// Kick. A partner bunch of N particles of charge q_s e, moving against the tracked beam at beta_s c,
// with (x, y) covariance Sigma_11, Sigma_13, Sigma_33 and centre (other_beam_shift_x, other_beam_shift_y)
// in the tracked beam's frame, gives (Hirata, Moshammer, Ruggiero, Part. Accel. 40 (1993) 205; the
// BeamBeam4D plugin's header derives it)
//   dpx = F_k N Kx(x - x_c, y - y_c) - post_subtract_px,   dpy likewise,
//   F_k = q0 q_s e (1 + beta0 beta_s) / (2 pi eps0 p0c (beta0 + beta_s))   [p0c in eV],
//   x_c = ref_shift_x + other_beam_shift_x,  y_c likewise,
// with K = -grad U the field of the unit-normalised 2D Gaussian (K -> r / r^2 far away): the round
// closed form, or Bassetti-Erskine with the Faddeeva function for an elliptic beam, and a coupled beam
// (Sigma_13 != 0) in the frame rotated to its principal axes (L. Leunissen, LHC Project Note 2000). The
// kick is that of the reference momentum, independent of delta, as in xfields. scale_strength multiplies
// q_s and the post_subtract kicks (xfields: it scales other_beam_q0 and post_subtract_px/py).
// The map is the 4D case of the strong-strong collider's synchro-beam map (longitudinal = 0: collision
// point S = 0, no energy change): bb6d_kick_slice of fusetrack/device/beambeam6d.h, one source with it.
// The tracked particle's charge is the reference q0 (fusetrack has no per-particle charge ratio chi).
// Sources: xfields/beam_elements/beambeam_src/beambeam2d.h and beambeam2d.py (field names and
// conventions); Bassetti & Erskine, CERN-ISR-TH/80-06 (1980), eq. (18).
// xfields' min_sigma_diff (switch to the round formula when |sigma_x - sigma_y| < min_sigma_diff) is not a
// field: the field used here is accurate at every aspect ratio (beambeam6d.h: round closed form below a
// relative size difference 1e-8, elliptic above).
#pragma once
#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/device/element.h"

#define FT_BEAMBEAM_BIGAUSSIAN_2D_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                      \
  REQUIRED(double, other_beam_q0, "e", "charge of one partner particle (xfields other_beam_q0)")               \
  REQUIRED(double, other_beam_num_particles, "1", "number of particles N of the partner bunch")                \
  REQUIRED(double, other_beam_Sigma_11, "m^2", "partner bunch <x^2> (variance of x)")                          \
  REQUIRED(double, other_beam_Sigma_33, "m^2", "partner bunch <y^2> (variance of y)")                          \
  PARAM(double, other_beam_Sigma_13, 0.0, "m^2", "partner bunch <x y> (x-y coupling)")                         \
  PARAM(double, other_beam_beta0, 1.0, "1", "speed of the partner bunch / c, moving against the tracked beam") \
  PARAM(double, scale_strength, 1.0, "1", "factor on the partner's charge and on the post_subtract kicks")     \
  PARAM(double, ref_shift_x, 0.0, "m", "closed-orbit x of the tracked beam at the lens")                       \
  PARAM(double, ref_shift_y, 0.0, "m", "closed-orbit y of the tracked beam at the lens")                       \
  PARAM(double, other_beam_shift_x, 0.0, "m", "partner centre x relative to the tracked beam's closed orbit")  \
  PARAM(double, other_beam_shift_y, 0.0, "m", "partner centre y relative to the tracked beam's closed orbit")  \
  PARAM(double, post_subtract_px, 0.0, "1", "px subtracted after the kick (the dipolar kick on the orbit)")    \
  PARAM(double, post_subtract_py, 0.0, "1", "py subtracted after the kick (the dipolar kick on the orbit)")    \
  DERIVED(double, kick_strength, "m", "F_k N with q_s = scale_strength other_beam_q0 (header comment)")        \
  DERIVED(double, dipole_px, "1", "scale_strength post_subtract_px")                                           \
  DERIVED(double, dipole_py, "1", "scale_strength post_subtract_py")

FT_ELEMENT_STRUCT(BeamBeamBiGaussian2D, FT_BEAMBEAM_BIGAUSSIAN_2D_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
inline void BeamBeamBiGaussian2D_prepare(BeamBeamBiGaussian2D& e, const ft_reference& ref) {
  char msg[256];
  const auto require = [&](bool ok, const char* field, double value, const char* what) {
    if (ok) return;
    std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian2D: %s = %.17g %s", field, value, what);
    throw std::invalid_argument(msg);
  };
  require(std::isfinite(e.other_beam_q0), "other_beam_q0", e.other_beam_q0, "must be finite");
  require(std::isfinite(e.other_beam_num_particles) && e.other_beam_num_particles >= 0.0, "other_beam_num_particles",
          e.other_beam_num_particles, "must be finite and >= 0");
  require(std::isfinite(e.other_beam_Sigma_11) && e.other_beam_Sigma_11 > 0.0, "other_beam_Sigma_11",
          e.other_beam_Sigma_11, "must be finite and > 0");
  require(std::isfinite(e.other_beam_Sigma_33) && e.other_beam_Sigma_33 > 0.0, "other_beam_Sigma_33",
          e.other_beam_Sigma_33, "must be finite and > 0");
  require(std::isfinite(e.other_beam_Sigma_13) &&
              e.other_beam_Sigma_13 * e.other_beam_Sigma_13 < e.other_beam_Sigma_11 * e.other_beam_Sigma_33,
          "other_beam_Sigma_13", e.other_beam_Sigma_13,
          "makes the (x, y) covariance not positive definite (needs Sigma_13^2 < Sigma_11 Sigma_33)");
  require(e.other_beam_beta0 > 0.0 && e.other_beam_beta0 <= 1.0, "other_beam_beta0", e.other_beam_beta0,
          "must be in (0, 1]");
  require(std::isfinite(e.scale_strength), "scale_strength", e.scale_strength, "must be finite");
  const double shifts[] = {e.ref_shift_x,        e.ref_shift_y,      e.other_beam_shift_x,
                           e.other_beam_shift_y, e.post_subtract_px, e.post_subtract_py};
  const char* names[] = {"ref_shift_x",        "ref_shift_y",      "other_beam_shift_x",
                         "other_beam_shift_y", "post_subtract_px", "post_subtract_py"};
  for (int k = 0; k < 6; ++k) require(std::isfinite(shifts[k]), names[k], shifts[k], "must be finite");
  Bb6dParams params{};
  params.longitudinal = 0;
  bb6d_prepare_params(params, ref.q0, ref.p0c, ref.beta0, e.scale_strength * e.other_beam_q0, e.other_beam_beta0);
  e.kick_strength = params.kick_per_particle * e.other_beam_num_particles;
  e.dipole_px = e.scale_strength * e.post_subtract_px;
  e.dipole_py = e.scale_strength * e.post_subtract_py;
}
#endif

FT_FUNCTION void BeamBeamBiGaussian2D_track(const BeamBeamBiGaussian2D& e, ft::ParticleView& p) {
  // One frozen partner slice at the lens (S = 0): the collider's map with longitudinal = 0.
  Bb6dParams params{};
  params.kick_per_particle = e.kick_strength;
  params.longitudinal = 0;
  Bb6dSlice slice{};
  slice.n_particles = 1.0;
  slice.x = e.ref_shift_x + e.other_beam_shift_x;
  slice.y = e.ref_shift_y + e.other_beam_shift_y;
  slice.sigma_11 = e.other_beam_Sigma_11;
  slice.sigma_13 = e.other_beam_Sigma_13;
  slice.sigma_33 = e.other_beam_Sigma_33;
  double x = p.x, px = p.px, y = p.y, py = p.py, delta = p.delta;
  bb6d_kick_slice(params, slice, x, px, y, py, 0.0, delta);  // S = 0: zeta, delta unused
  p.px = px - e.dipole_px;
  p.py = py - e.dipole_py;
}

FT_ELEMENT_COORDINATES(BeamBeamBiGaussian2D, FT_COORD_X | FT_COORD_Y | FT_COORD_PX | FT_COORD_PY,
                       FT_COORD_PX | FT_COORD_PY)
FT_REGISTER_ELEMENT(
    BeamBeamBiGaussian2D, FT_BEAMBEAM_BIGAUSSIAN_2D_FIELDS, FT_THIN, FT_WITH_PREPARE,
    "Weak-strong 4D beam-beam lens: Gaussian partner bunch, transverse kick (xfields BeamBeamBiGaussian2D)")
