// BeamBeamBiGaussian3D: weak-strong beam-beam lens, 6D (synchro-beam map with crossing angle). The partner
// bunch is frozen and cut into num_slices_other_beam longitudinal slices, each a Gaussian in (x, px, y, py)
// with its particle count, centroid and second moments Sigma_ij given at the interaction point (IP) in the
// boosted (head-on) frame of the tracked beam (the "_star" quantities). The names, fields and conventions
// are those of xfields BeamBeamBiGaussian3D so that Xsuite lines import (xfields/beam_elements/beambeam3d.py,
// beambeam_src/beambeam3d.h and beambeam3d_ref_frame_changes.h; facts only).
//
// Map, per particle (xfields' order):
//  1. to the lens frame: x -= ref_shift_x + other_beam_shift_x, likewise px, y, py, zeta, and pzeta
//     (pzeta = ptau / beta0);
//  2. Lorentz boost by the half crossing angle phi in the plane alpha (Hirata, Moshammer, Ruggiero, Part.
//     Accel. 40 (1993) 205, eqs. (2)-(5): bb6d_boost);
//  3. for each slice, head first, the synchro-beam kick at the collision point S = (zeta - zeta_slice) / 2:
//     drift to S, transverse kick of the slice's Gaussian with its moments carried to S (hourglass; coupled
//     slices in their uncoupled frame, L. Leunissen, LHC Project Note 2000), the energy change of HMR
//     eqs. (20)-(21), drift back (bb6d_kick_slice);
//  4. inverse boost (HMR eq. (6)), then back to the reference frame: x += shift_x - scale_strength post_subtract_x,
//     likewise for every coordinate, pzeta included.
// Kick strength per partner particle F_k = q0 q_other e (1 + beta0) / (2 pi eps0 p0c (beta0 + 1)) with
// q_other = scale_strength other_beam_q0 (the partner moves at c, as in xfields' Ksl = N q_other q0 e / p0c
// times the field of unit charge; for beta0 -> 1 the two are equal).
// One source with the strong-strong collider: steps 2-4 are the functions of fusetrack/device/beambeam6d.h
// (field: Bassetti & Erskine, CERN-ISR-TH/80-06 (1980), eq. (18), with fusetrack/device/faddeeva.h; round and
// core forms there). Unlike the collider, which acts on delta (HMR's variable), the lens passes pzeta in its
// place, as xfields does: the boost, the kicks and the inverse boost are then canonical maps of the pair
// (zeta, pzeta), so the lens is symplectic at any beta0 and tracks as Xsuite does the lines it imports (the
// two choices agree for beta0 -> 1: pzeta - delta = O(delta / gamma0^2)).
// min_sigma_diff and threshold_singular are xfields' numerical thresholds (round beam, singular coupled
// slice); they are read and checked (>= 0), while the shared code picks its formulas by its own relative
// criteria (beambeam6d.h header comment). xfields' beamstrahlung, Bhabha scattering and luminosity are
// not modelled (the importer refuses them when switched on).
// Map properties: each step is exact Hamiltonian flow or a canonical change of frame, so the 6D map is
// symplectic (tests/elements/test_beambeam_bigaussian.cpp checks the Jacobian with a crossing angle).
#pragma once
#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/device/element.h"

#define FT_BEAMBEAM_3D_MAX_SLICES 32

#define FT_BEAMBEAM_BIGAUSSIAN_3D_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                            \
  REQUIRED(int, num_slices_other_beam, "1",                                                                          \
           "number of partner slices used (1 .. FT_BEAMBEAM_3D_MAX_SLICES); entries after them must be 0")           \
  REQUIRED(double, other_beam_q0, "e", "charge of a partner particle")                                               \
  PARAM(double, phi, 0.0, "rad", "half crossing angle, |phi| < 1.5")                                                 \
  PARAM(double, alpha, 0.0, "rad", "crossing plane (0: horizontal crossing)")                                        \
  PARAM(double, scale_strength, 1.0, "1", "factor on the partner charge and on the post-subtracted offsets")         \
  PARAM(double, ref_shift_x, 0.0, "m", "x of the lens axis (the IP) relative to the reference orbit")                \
  PARAM(double, ref_shift_px, 0.0, "1", "px of the lens axis (the IP) relative to the reference orbit")              \
  PARAM(double, ref_shift_y, 0.0, "m", "y of the lens axis (the IP) relative to the reference orbit")                \
  PARAM(double, ref_shift_py, 0.0, "1", "py of the lens axis (the IP) relative to the reference orbit")              \
  PARAM(double, ref_shift_zeta, 0.0, "m", "zeta of the lens axis (the IP) relative to the reference orbit")          \
  PARAM(double, ref_shift_pzeta, 0.0, "1", "pzeta of the lens axis (the IP) relative to the reference orbit")        \
  PARAM(double, other_beam_shift_x, 0.0, "m", "x offset of the partner relative to the lens axis")                   \
  PARAM(double, other_beam_shift_px, 0.0, "1", "px offset of the partner relative to the lens axis")                 \
  PARAM(double, other_beam_shift_y, 0.0, "m", "y offset of the partner relative to the lens axis")                   \
  PARAM(double, other_beam_shift_py, 0.0, "1", "py offset of the partner relative to the lens axis")                 \
  PARAM(double, other_beam_shift_zeta, 0.0, "m", "zeta offset of the partner relative to the lens axis")             \
  PARAM(double, other_beam_shift_pzeta, 0.0, "1", "pzeta offset of the partner relative to the lens axis")           \
  PARAM(double, post_subtract_x, 0.0, "m", "x subtracted after the lens (times scale_strength)")                     \
  PARAM(double, post_subtract_px, 0.0, "1", "px subtracted after the lens (times scale_strength)")                   \
  PARAM(double, post_subtract_y, 0.0, "m", "y subtracted after the lens (times scale_strength)")                     \
  PARAM(double, post_subtract_py, 0.0, "1", "py subtracted after the lens (times scale_strength)")                   \
  PARAM(double, post_subtract_zeta, 0.0, "m", "zeta subtracted after the lens (times scale_strength)")               \
  PARAM(double, post_subtract_pzeta, 0.0, "1", "pzeta subtracted after the lens (times scale_strength)")             \
  PARAM(double, min_sigma_diff, 1e-10, "m", "xfields' round-beam threshold; checked, see the header comment")        \
  PARAM(double, threshold_singular, 1e-28, "1",                                                                      \
        "xfields' threshold for coupled slices; checked, see the header comment")                                    \
  ARRAY(double, slices_other_beam_num_particles, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "1",                                \
        "number of particles in each partner slice, >= 0")                                                           \
  ARRAY(double, slices_other_beam_x_center_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                                \
        "slice centroid x in the boosted frame")                                                                     \
  ARRAY(double, slices_other_beam_px_center_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "1",                               \
        "slice centroid px in the boosted frame")                                                                    \
  ARRAY(double, slices_other_beam_y_center_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                                \
        "slice centroid y in the boosted frame")                                                                     \
  ARRAY(double, slices_other_beam_py_center_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "1",                               \
        "slice centroid py in the boosted frame")                                                                    \
  ARRAY(double, slices_other_beam_zeta_center_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                             \
        "slice centre zeta in the boosted frame (head first)")                                                       \
  ARRAY(double, slices_other_beam_Sigma_11_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m^2",                              \
        "slice second moment Sigma_11 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_12_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                                \
        "slice second moment Sigma_12 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_13_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m^2",                              \
        "slice second moment Sigma_13 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_14_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                                \
        "slice second moment Sigma_14 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_22_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "1",                                \
        "slice second moment Sigma_22 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_23_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                                \
        "slice second moment Sigma_23 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_24_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "1",                                \
        "slice second moment Sigma_24 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_33_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m^2",                              \
        "slice second moment Sigma_33 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_34_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "m",                                \
        "slice second moment Sigma_34 at the IP, boosted frame")                                                     \
  ARRAY(double, slices_other_beam_Sigma_44_star, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, "1",                                \
        "slice second moment Sigma_44 at the IP, boosted frame")                                                     \
  DERIVED(double, kick_per_particle, "m", "F_k of beambeam6d.h for the partner charge scale_strength other_beam_q0") \
  DERIVED(double, sin_phi, "1", "sin phi")                                                                           \
  DERIVED(double, cos_phi, "1", "cos phi")                                                                           \
  DERIVED(double, tan_phi, "1", "tan phi")                                                                           \
  DERIVED(double, sin_alpha, "1", "sin alpha")                                                                       \
  DERIVED(double, cos_alpha, "1", "cos alpha")                                                                       \
  DERIVED(double, shift_x, "m", "ref_shift_x + other_beam_shift_x")                                                  \
  DERIVED(double, shift_px, "1", "ref_shift_px + other_beam_shift_px")                                               \
  DERIVED(double, shift_y, "m", "ref_shift_y + other_beam_shift_y")                                                  \
  DERIVED(double, shift_py, "1", "ref_shift_py + other_beam_shift_py")                                               \
  DERIVED(double, shift_zeta, "m", "ref_shift_zeta + other_beam_shift_zeta")                                         \
  DERIVED(double, shift_pzeta, "1", "ref_shift_pzeta + other_beam_shift_pzeta")                                      \
  DERIVED(double, subtract_x, "m", "scale_strength post_subtract_x")                                                 \
  DERIVED(double, subtract_px, "1", "scale_strength post_subtract_px")                                               \
  DERIVED(double, subtract_y, "m", "scale_strength post_subtract_y")                                                 \
  DERIVED(double, subtract_py, "1", "scale_strength post_subtract_py")                                               \
  DERIVED(double, subtract_zeta, "m", "scale_strength post_subtract_zeta")                                           \
  DERIVED(double, subtract_pzeta, "1", "scale_strength post_subtract_pzeta")

FT_ELEMENT_STRUCT(BeamBeamBiGaussian3D, FT_BEAMBEAM_BIGAUSSIAN_3D_FIELDS)

/// The slice arrays of BeamBeamBiGaussian3D in Bb6dSlice order (for the checks and the import).
#define FT_BEAMBEAM_3D_FOR_EACH_SLICE_ARRAY(X)                                                                     \
  X(slices_other_beam_num_particles)                                                                               \
  X(slices_other_beam_x_center_star)                                                                               \
  X(slices_other_beam_px_center_star)                                                                              \
  X(slices_other_beam_y_center_star)                                                                               \
  X(slices_other_beam_py_center_star) X(slices_other_beam_zeta_center_star) X(slices_other_beam_Sigma_11_star)     \
      X(slices_other_beam_Sigma_12_star) X(slices_other_beam_Sigma_13_star) X(slices_other_beam_Sigma_14_star)     \
          X(slices_other_beam_Sigma_22_star) X(slices_other_beam_Sigma_23_star) X(slices_other_beam_Sigma_24_star) \
              X(slices_other_beam_Sigma_33_star) X(slices_other_beam_Sigma_34_star) X(slices_other_beam_Sigma_44_star)

/// Slice i of the partner as beambeam6d.h takes it.
FT_FUNCTION Bb6dSlice BeamBeamBiGaussian3D_slice(const BeamBeamBiGaussian3D& e, int i) {
  Bb6dSlice s;
  s.n_particles = e.slices_other_beam_num_particles[i];
  s.x = e.slices_other_beam_x_center_star[i];
  s.px = e.slices_other_beam_px_center_star[i];
  s.y = e.slices_other_beam_y_center_star[i];
  s.py = e.slices_other_beam_py_center_star[i];
  s.zeta = e.slices_other_beam_zeta_center_star[i];
  s.delta = 0.0;
  s.sigma_11 = e.slices_other_beam_Sigma_11_star[i];
  s.sigma_12 = e.slices_other_beam_Sigma_12_star[i];
  s.sigma_13 = e.slices_other_beam_Sigma_13_star[i];
  s.sigma_14 = e.slices_other_beam_Sigma_14_star[i];
  s.sigma_22 = e.slices_other_beam_Sigma_22_star[i];
  s.sigma_23 = e.slices_other_beam_Sigma_23_star[i];
  s.sigma_24 = e.slices_other_beam_Sigma_24_star[i];
  s.sigma_33 = e.slices_other_beam_Sigma_33_star[i];
  s.sigma_34 = e.slices_other_beam_Sigma_34_star[i];
  s.sigma_44 = e.slices_other_beam_Sigma_44_star[i];
  return s;
}

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
inline void BeamBeamBiGaussian3D_prepare(BeamBeamBiGaussian3D& e, const ft_reference& ref) {
  char msg[320];
  const auto fail = [&](const char* field, int index, double value, const char* what) {
    if (index >= 0)
      std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian3D: %s[%d] = %.17g %s", field, index, value, what);
    else
      std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian3D: %s = %.17g %s", field, value, what);
    throw std::invalid_argument(msg);
  };
  const int n = e.num_slices_other_beam;
  if (n < 1 || n > FT_BEAMBEAM_3D_MAX_SLICES) {
    std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian3D: num_slices_other_beam = %d is outside [1, %d]", n,
                  FT_BEAMBEAM_3D_MAX_SLICES);
    throw std::invalid_argument(msg);
  }
#define FT_BB3D_CHECK_ARRAY_(name)                                                                    \
  for (int i = 0; i < FT_BEAMBEAM_3D_MAX_SLICES; ++i) {                                               \
    if (i < n && !std::isfinite(e.name[i])) fail(#name, i, e.name[i], "must be finite");              \
    if (i >= n && e.name[i] != 0.0)                                                                   \
      fail(#name, i, e.name[i], "is given beyond num_slices_other_beam (more slices than declared)"); \
  }
  FT_BEAMBEAM_3D_FOR_EACH_SLICE_ARRAY(FT_BB3D_CHECK_ARRAY_)
#undef FT_BB3D_CHECK_ARRAY_
  for (int i = 0; i < n; ++i) {
    if (!(e.slices_other_beam_num_particles[i] >= 0.0))
      fail("slices_other_beam_num_particles", i, e.slices_other_beam_num_particles[i], "must be >= 0");
    if (!(e.slices_other_beam_Sigma_11_star[i] > 0.0))
      fail("slices_other_beam_Sigma_11_star", i, e.slices_other_beam_Sigma_11_star[i], "must be positive");
    if (!(e.slices_other_beam_Sigma_33_star[i] > 0.0))
      fail("slices_other_beam_Sigma_33_star", i, e.slices_other_beam_Sigma_33_star[i], "must be positive");
    if (!(e.slices_other_beam_Sigma_22_star[i] >= 0.0))
      fail("slices_other_beam_Sigma_22_star", i, e.slices_other_beam_Sigma_22_star[i], "must be >= 0");
    if (!(e.slices_other_beam_Sigma_44_star[i] >= 0.0))
      fail("slices_other_beam_Sigma_44_star", i, e.slices_other_beam_Sigma_44_star[i], "must be >= 0");
    const double s13 = e.slices_other_beam_Sigma_13_star[i];
    if (!(s13 * s13 < e.slices_other_beam_Sigma_11_star[i] * e.slices_other_beam_Sigma_33_star[i]))
      fail("slices_other_beam_Sigma_13_star", i, s13,
           "makes the (x, y) covariance not positive definite: Sigma_13^2 < Sigma_11 Sigma_33 is needed");
    bb6d_check_slice(BeamBeamBiGaussian3D_slice(e, i), i);
  }
  const struct {
    const char* name;
    double value;
  } scalars[] = {{"other_beam_q0", e.other_beam_q0},
                 {"scale_strength", e.scale_strength},
                 {"ref_shift_x", e.ref_shift_x},
                 {"ref_shift_px", e.ref_shift_px},
                 {"ref_shift_y", e.ref_shift_y},
                 {"ref_shift_py", e.ref_shift_py},
                 {"ref_shift_zeta", e.ref_shift_zeta},
                 {"ref_shift_pzeta", e.ref_shift_pzeta},
                 {"other_beam_shift_x", e.other_beam_shift_x},
                 {"other_beam_shift_px", e.other_beam_shift_px},
                 {"other_beam_shift_y", e.other_beam_shift_y},
                 {"other_beam_shift_py", e.other_beam_shift_py},
                 {"other_beam_shift_zeta", e.other_beam_shift_zeta},
                 {"other_beam_shift_pzeta", e.other_beam_shift_pzeta},
                 {"post_subtract_x", e.post_subtract_x},
                 {"post_subtract_px", e.post_subtract_px},
                 {"post_subtract_y", e.post_subtract_y},
                 {"post_subtract_py", e.post_subtract_py},
                 {"post_subtract_zeta", e.post_subtract_zeta},
                 {"post_subtract_pzeta", e.post_subtract_pzeta}};
  for (const auto& f : scalars)
    if (!std::isfinite(f.value)) fail(f.name, -1, f.value, "must be finite");
  if (!(std::isfinite(e.phi) && std::fabs(e.phi) < 1.5)) fail("phi", -1, e.phi, "must be finite with |phi| < 1.5 rad");
  if (!std::isfinite(e.alpha)) fail("alpha", -1, e.alpha, "must be finite");
  if (!(e.min_sigma_diff >= 0.0 && std::isfinite(e.min_sigma_diff)))
    fail("min_sigma_diff", -1, e.min_sigma_diff, "must be finite and >= 0");
  if (!(e.threshold_singular >= 0.0 && std::isfinite(e.threshold_singular)))
    fail("threshold_singular", -1, e.threshold_singular, "must be finite and >= 0");
  Bb6dParams p{};
  p.phi = e.phi;
  p.alpha = e.alpha;
  p.longitudinal = 1;
  try {
    bb6d_prepare_params(p, ref.q0, ref.p0c, ref.beta0, e.scale_strength * e.other_beam_q0, 1.0);
  } catch (const std::invalid_argument& ex) {
    std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian3D: %s", ex.what());
    throw std::invalid_argument(msg);
  }
  e.kick_per_particle = p.kick_per_particle;
  e.sin_phi = p.sin_phi;
  e.cos_phi = p.cos_phi;
  e.tan_phi = p.tan_phi;
  e.sin_alpha = p.sin_alpha;
  e.cos_alpha = p.cos_alpha;
  e.shift_x = e.ref_shift_x + e.other_beam_shift_x;
  e.shift_px = e.ref_shift_px + e.other_beam_shift_px;
  e.shift_y = e.ref_shift_y + e.other_beam_shift_y;
  e.shift_py = e.ref_shift_py + e.other_beam_shift_py;
  e.shift_zeta = e.ref_shift_zeta + e.other_beam_shift_zeta;
  e.shift_pzeta = e.ref_shift_pzeta + e.other_beam_shift_pzeta;
  e.subtract_x = e.scale_strength * e.post_subtract_x;
  e.subtract_px = e.scale_strength * e.post_subtract_px;
  e.subtract_y = e.scale_strength * e.post_subtract_y;
  e.subtract_py = e.scale_strength * e.post_subtract_py;
  e.subtract_zeta = e.scale_strength * e.post_subtract_zeta;
  e.subtract_pzeta = e.scale_strength * e.post_subtract_pzeta;
}
#endif

FT_FUNCTION void BeamBeamBiGaussian3D_track(const BeamBeamBiGaussian3D& e, ft::ParticleView& p) {
  Bb6dParams params;
  params.phi = e.phi;
  params.alpha = e.alpha;
  params.kick_per_particle = e.kick_per_particle;
  params.longitudinal = 1;
  params.sin_phi = e.sin_phi;
  params.cos_phi = e.cos_phi;
  params.tan_phi = e.tan_phi;
  params.sin_alpha = e.sin_alpha;
  params.cos_alpha = e.cos_alpha;
  // The map acts on the canonical pair (zeta, pzeta = ptau / beta0), pzeta in the place of HMR's delta.
  const double beta0 = p.beta0;
  double x = p.x - e.shift_x, px = p.px - e.shift_px, y = p.y - e.shift_y, py = p.py - e.shift_py;
  double zeta = p.zeta - e.shift_zeta, pzeta = p.ptau / beta0 - e.shift_pzeta;
  bb6d_boost(params, x, px, y, py, zeta, pzeta);
  for (int i = 0; i < e.num_slices_other_beam; ++i) {
    const Bb6dSlice slice = BeamBeamBiGaussian3D_slice(e, i);
    bb6d_kick_slice(params, slice, x, px, y, py, zeta, pzeta);
  }
  bb6d_boost_inverse(params, x, px, y, py, zeta, pzeta);
  // The new energy: ptau = pzeta beta0, 1 + delta = sqrt(ptau^2 + 2 ptau / beta0 + 1) (no cancellation).
  const double ptau = ((pzeta + e.shift_pzeta) - e.subtract_pzeta) * beta0;
  const double ptau_terms = ptau * ptau + 2.0 * ptau / beta0;
  p.ptau = ptau;
  p.delta = ptau_terms / (sqrt(ptau_terms + 1.0) + 1.0);
  p.set_derived_energy();
  p.x = (x + e.shift_x) - e.subtract_x;
  p.px = (px + e.shift_px) - e.subtract_px;
  p.y = (y + e.shift_y) - e.subtract_y;
  p.py = (py + e.shift_py) - e.subtract_py;
  p.zeta = (zeta + e.shift_zeta) - e.subtract_zeta;
}

FT_REGISTER_ELEMENT(BeamBeamBiGaussian3D, FT_BEAMBEAM_BIGAUSSIAN_3D_FIELDS, FT_THIN | FT_LARGE_CODE, FT_WITH_PREPARE,
                    "Weak-strong beam-beam lens, 6D: synchro-beam map of a frozen sliced partner bunch with "
                    "crossing angle (xfields BeamBeamBiGaussian3D)")
