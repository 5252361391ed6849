// BeamBeamBiGaussian2D: weak-strong beam-beam lens, 4D (transverse kick only). The partner ("other")
// bunch is a frozen 2D Gaussian of other_beam_num_particles particles of charge other_beam_q0 moving
// against the tracked beam with velocity other_beam_beta0 c; its transverse covariance at the lens is
// (Sigma_11, Sigma_13, Sigma_33) and its centre is other_beam_shift_(x, y) from the lens axis, itself
// ref_shift_(x, y) off the reference orbit. The names, fields and conventions are those of xfields
// BeamBeamBiGaussian2D, so that Xsuite lines import (xfields/beam_elements/beambeam2d.py and
// beambeam_src/beambeam2d.h; facts only).
//
// Kick (thin; px, py only). With x_bar = x - ref_shift_x - other_beam_shift_x (y alike):
//   px += k Kx(x_bar, y_bar) - scale_strength post_subtract_px,   py likewise,
//   k = scale_strength F_k N,   F_k = q0 q_other e (1 + beta0 beta_other) / (2 pi eps0 p0c (beta0 + beta_other)),
// q0, p0c [eV], beta0 of the tracked reference, q_other = other_beam_q0, N = other_beam_num_particles
// (only the product q_other N matters: xfields lines converted from SixTrack give q_other = e in coulombs and
// N in units of 1/e), K = -grad U the field of the unit-normalised Gaussian (K -> r / r^2 far away; like
// charges repel). The factor (1 + beta0 beta_other) / (beta0 + beta_other) adds the magnetic force of a
// counter-moving bunch to its electric one (xfields: factor (1 + beta_o beta0) / (beta_o + beta0)).
// A coupled partner (Sigma_13 != 0) acts in the frame rotated by theta where it is uncoupled (L. Leunissen,
// LHC Project Note 2000; the convention of xfields: the smaller rotation, cos(2 theta) = |R| / q, R = S11 - S33,
// q = sqrt(R^2 + 4 S13^2)); the field is rotated back.
// One source with the strong-strong collider: the kick is bb6d_kick_slice of fusetrack/device/beambeam6d.h
// with its longitudinal part off (collision point S = 0, no energy change): one partner slice at the lens.
// Its field: round beams (|sx - sy| <= 1e-8 sx) in closed form; elliptic beams by Bassetti & Erskine,
// CERN-ISR-TH/80-06 (1980), eq. (18), with the Faddeeva function of fusetrack/device/faddeeva.h; the elliptic
// core by the series of the integral representation (beambeam6d.h header comment).
// min_sigma_diff is xfields' absolute threshold for the round formula; it is read and checked (>= 0) but the
// shared field picks its formulas by the relative criteria above (the two agree to ~1e-8 relative where they
// differ).
// Map properties: the kick derives from a potential at fixed zeta (transverse symplectic), delta unchanged.
#pragma once
#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/device/element.h"

#define FT_BEAMBEAM_BIGAUSSIAN_2D_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                         \
  REQUIRED(double, other_beam_num_particles, "1", "number of particles N in the partner bunch")                   \
  REQUIRED(double, other_beam_q0, "e", "charge of a partner particle (only q0 N enters the kick)")                \
  REQUIRED(double, other_beam_Sigma_11, "m^2", "partner's horizontal variance at the lens, > 0")                  \
  REQUIRED(double, other_beam_Sigma_33, "m^2", "partner's vertical variance at the lens, > 0")                    \
  PARAM(double, other_beam_Sigma_13, 0.0, "m^2", "partner's x-y covariance, Sigma_13^2 < Sigma_11 Sigma_33")      \
  PARAM(double, other_beam_beta0, 1.0, "1", "partner's velocity over c, in (0, 1]")                               \
  PARAM(double, scale_strength, 1.0, "1", "factor on the kick and on the post-subtracted dipole kick")            \
  PARAM(double, ref_shift_x, 0.0, "m", "horizontal offset of the lens axis from the reference orbit")             \
  PARAM(double, ref_shift_y, 0.0, "m", "vertical offset of the lens axis from the reference orbit")               \
  PARAM(double, other_beam_shift_x, 0.0, "m", "horizontal offset of the partner's centre from the lens axis")     \
  PARAM(double, other_beam_shift_y, 0.0, "m", "vertical offset of the partner's centre from the lens axis")       \
  PARAM(double, post_subtract_px, 0.0, "1", "px kick subtracted after the beam-beam kick (times scale_strength)") \
  PARAM(double, post_subtract_py, 0.0, "1", "py kick subtracted after the beam-beam kick (times scale_strength)") \
  PARAM(double, min_sigma_diff, 1e-10, "m", "xfields' round-beam threshold; checked, see the header comment")     \
  DERIVED(double, kick_strength, "m", "k = scale_strength F_k N: the kick per unit field")                        \
  DERIVED(double, shift_x, "m", "ref_shift_x + other_beam_shift_x")                                               \
  DERIVED(double, shift_y, "m", "ref_shift_y + other_beam_shift_y")                                               \
  DERIVED(double, subtract_px, "1", "scale_strength post_subtract_px")                                            \
  DERIVED(double, subtract_py, "1", "scale_strength post_subtract_py")

FT_ELEMENT_STRUCT(BeamBeamBiGaussian2D, FT_BEAMBEAM_BIGAUSSIAN_2D_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
inline void BeamBeamBiGaussian2D_prepare(BeamBeamBiGaussian2D& e, const ft_reference& ref) {
  char msg[256];
  const auto require = [&](bool ok, const char* field, double value, const char* what) {
    if (!ok) {
      std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian2D: %s = %.17g %s", field, value, what);
      throw std::invalid_argument(msg);
    }
  };
  require(std::isfinite(e.other_beam_num_particles), "other_beam_num_particles", e.other_beam_num_particles,
          "must be finite");
  require(std::isfinite(e.other_beam_q0), "other_beam_q0", e.other_beam_q0, "must be finite");
  require(e.other_beam_Sigma_11 > 0.0 && std::isfinite(e.other_beam_Sigma_11), "other_beam_Sigma_11",
          e.other_beam_Sigma_11, "must be positive and finite");
  require(e.other_beam_Sigma_33 > 0.0 && std::isfinite(e.other_beam_Sigma_33), "other_beam_Sigma_33",
          e.other_beam_Sigma_33, "must be positive and finite");
  require(e.other_beam_Sigma_13 * e.other_beam_Sigma_13 < e.other_beam_Sigma_11 * e.other_beam_Sigma_33,
          "other_beam_Sigma_13", e.other_beam_Sigma_13,
          "makes the (x, y) covariance not positive definite: Sigma_13^2 < Sigma_11 Sigma_33 is needed");
  require(e.other_beam_beta0 > 0.0 && e.other_beam_beta0 <= 1.0, "other_beam_beta0", e.other_beam_beta0,
          "must be in (0, 1]");
  require(std::isfinite(e.scale_strength), "scale_strength", e.scale_strength, "must be finite");
  require(e.min_sigma_diff >= 0.0 && std::isfinite(e.min_sigma_diff), "min_sigma_diff", e.min_sigma_diff,
          "must be finite and >= 0");
  const struct {
    const char* name;
    double value;
  } offsets[] = {{"ref_shift_x", e.ref_shift_x},
                 {"ref_shift_y", e.ref_shift_y},
                 {"other_beam_shift_x", e.other_beam_shift_x},
                 {"other_beam_shift_y", e.other_beam_shift_y},
                 {"post_subtract_px", e.post_subtract_px},
                 {"post_subtract_py", e.post_subtract_py}};
  for (const auto& f : offsets) require(std::isfinite(f.value), f.name, f.value, "must be finite");
  Bb6dParams p{};
  p.longitudinal = 0;
  try {
    bb6d_prepare_params(p, ref.q0, ref.p0c, ref.beta0, e.other_beam_q0, e.other_beam_beta0);
  } catch (const std::invalid_argument& ex) {
    std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian2D: %s", ex.what());
    throw std::invalid_argument(msg);
  }
  e.kick_strength = e.scale_strength * p.kick_per_particle * e.other_beam_num_particles;
  e.shift_x = e.ref_shift_x + e.other_beam_shift_x;
  e.shift_y = e.ref_shift_y + e.other_beam_shift_y;
  e.subtract_px = e.scale_strength * e.post_subtract_px;
  e.subtract_py = e.scale_strength * e.post_subtract_py;
}
#endif

FT_FUNCTION void BeamBeamBiGaussian2D_track(const BeamBeamBiGaussian2D& e, ft::ParticleView& p) {
  // No crossing, no longitudinal part: bb6d_kick_slice at S = 0 is the 2D lens (beambeam6d.h, "4D case").
  Bb6dParams params{};
  params.kick_per_particle = e.kick_strength;
  params.longitudinal = 0;
  Bb6dSlice slice{};
  slice.n_particles = 1.0;
  slice.sigma_11 = e.other_beam_Sigma_11;
  slice.sigma_13 = e.other_beam_Sigma_13;
  slice.sigma_33 = e.other_beam_Sigma_33;
  double x = p.x - e.shift_x, y = p.y - e.shift_y;
  double px = 0.0, py = 0.0, delta = 0.0;
  bb6d_kick_slice(params, slice, x, px, y, py, 0.0, delta);
  p.px = (p.px + px) - e.subtract_px;
  p.py = (p.py + py) - e.subtract_py;
}

FT_ELEMENT_COORDINATES(BeamBeamBiGaussian2D, FT_COORD_X | FT_COORD_Y | FT_COORD_PX | FT_COORD_PY,
                       FT_COORD_PX | FT_COORD_PY)
FT_REGISTER_ELEMENT(BeamBeamBiGaussian2D, FT_BEAMBEAM_BIGAUSSIAN_2D_FIELDS, FT_THIN | FT_LARGE_CODE, FT_WITH_PREPARE,
                    "Weak-strong beam-beam lens, 4D: kick of a frozen Gaussian partner bunch (xfields "
                    "BeamBeamBiGaussian2D)")
