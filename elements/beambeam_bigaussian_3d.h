// Weak-strong 6D beam-beam lens (xfields BeamBeamBiGaussian3D): the synchro-beam map of a frozen,
// longitudinally sliced Gaussian partner bunch, with crossing angle, hourglass effect and x-y coupling.
// Thin; changes all six coordinates.
//
// Map (Hirata, Moshammer, Ruggiero, "A symplectic beam-beam interaction with energy change", Part. Accel.
// 40 (1993) 205; in the form of SixTrack and xfields), for the canonical coordinates (x, px, y, py, zeta,
// pzeta = ptau / beta0) of the tracked particle:
//   1. subtract the shifts: u -= ref_shift_u + other_beam_shift_u for u in (x, px, y, py, zeta, pzeta);
//   2. Lorentz boost to the head-on frame of the half crossing angle phi in the plane alpha (alpha = 0:
//      horizontal crossing), with pzeta in the role of HMR's delta as in xfields (bb6d_boost);
//   3. for each partner slice i = 0 .. num_slices_other_beam - 1 in the given order, the synchro-beam
//      kick at the collision point S = (zeta - zeta_i) / 2 of the slice's Gaussian, its (x, px, y, py)
//      second moments Sigma_jk carried to S (Sigma_11(S) = Sigma_11 + 2 Sigma_12 S + Sigma_22 S^2, ...),
//      its centroid x_i + px_i S, y_i + py_i S, kick strength F_k N_i (bb6d_kick_slice); slices with
//      N_i = 0 are skipped, as in xfields;
//   4. the inverse boost (bb6d_boost_inverse), add the shifts back and subtract the post_subtract
//      terms (the dipolar effect on the closed orbit), times scale_strength.
// F_k = q0 q_s e / (2 pi eps0 p0c) per partner particle of charge q_s = scale_strength other_beam_q0
// (xfields: the partner moves at c; p0c in eV). The slice quantities (suffix _star) are in the boosted
// frame, as xfields stores them. Each step is a canonical map of (x, px, y, py, zeta, pzeta), so the lens is
// symplectic. The boost and the kick are those of the strong-strong collider, fusetrack/device/beambeam6d.h
// (one source; its header gives the formulas, the field of the Gaussian and the coupled frames).
// The tracked particle's charge is the reference q0 (fusetrack has no per-particle charge ratio chi).
// At most FT_BEAMBEAM_3D_MAX_SLICES slices: the parameter block of an element must fit the GPU's staged
// kernel (32 blocks in 48 KiB of shared memory); the slice arrays beyond num_slices_other_beam must be 0.
// More slices are consecutive lenses (the Xsuite importer writes them so): the shifts and the boost of one
// cancel against the next one's, so lenses holding slices 0..7, 8..15, ... in order, the post_subtract
// terms on the last, are the map of one lens with all the slices (to rounding).
// Not modelled (the Xsuite importer refuses them when switched on): beamstrahlung, Bhabha scattering and
// luminosity recording; xfields' numerical switches min_sigma_diff and threshold_singular are not needed
// (beambeam6d.h evaluates the field at every aspect ratio and handles uncoupled slices exactly).
// Sources: xfields/beam_elements/beambeam_src/beambeam3d.h, beambeam3d_ref_frame_changes.h,
// beambeam3d_transport_sigmas.h, xfields/beam_elements/beambeam3d.py (field names and conventions).
#pragma once
#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/device/element.h"

#define FT_BEAMBEAM_3D_MAX_SLICES 8

#define FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, name, unit, doc) \
  ARRAY(double, name, FT_BEAMBEAM_3D_MAX_SLICES, 0.0, unit, doc)

#define FT_BEAMBEAM_BIGAUSSIAN_3D_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                             \
  REQUIRED(double, other_beam_q0, "e", "charge of one partner particle (xfields other_beam_q0)")                      \
  REQUIRED(int, num_slices_other_beam, "1", "number of partner slices (1 .. 8); the slice arrays hold that many")     \
  PARAM(double, phi, 0.0, "rad", "half crossing angle")                                                               \
  PARAM(double, alpha, 0.0, "rad", "crossing plane: 0 horizontal, pi/2 vertical")                                     \
  PARAM(double, scale_strength, 1.0, "1", "factor on the partner's charge and on the post_subtract terms")            \
  PARAM(double, ref_shift_x, 0.0, "m", "closed-orbit x of the tracked beam at the lens")                              \
  PARAM(double, ref_shift_px, 0.0, "1", "closed-orbit px of the tracked beam at the lens")                            \
  PARAM(double, ref_shift_y, 0.0, "m", "closed-orbit y of the tracked beam at the lens")                              \
  PARAM(double, ref_shift_py, 0.0, "1", "closed-orbit py of the tracked beam at the lens")                            \
  PARAM(double, ref_shift_zeta, 0.0, "m", "closed-orbit zeta of the tracked beam at the lens")                        \
  PARAM(double, ref_shift_pzeta, 0.0, "1", "closed-orbit pzeta of the tracked beam at the lens")                      \
  PARAM(double, other_beam_shift_x, 0.0, "m", "partner offset in x, subtracted with ref_shift_x")                     \
  PARAM(double, other_beam_shift_px, 0.0, "1", "partner offset in px, subtracted with ref_shift_px")                  \
  PARAM(double, other_beam_shift_y, 0.0, "m", "partner offset in y, subtracted with ref_shift_y")                     \
  PARAM(double, other_beam_shift_py, 0.0, "1", "partner offset in py, subtracted with ref_shift_py")                  \
  PARAM(double, other_beam_shift_zeta, 0.0, "m", "partner offset in zeta, subtracted with ref_shift_zeta")            \
  PARAM(double, other_beam_shift_pzeta, 0.0, "1", "partner offset in pzeta, subtracted with ref_shift_pzeta")         \
  PARAM(double, post_subtract_x, 0.0, "m", "x subtracted after the map (dipolar effect on the orbit)")                \
  PARAM(double, post_subtract_px, 0.0, "1", "px subtracted after the map")                                            \
  PARAM(double, post_subtract_y, 0.0, "m", "y subtracted after the map")                                              \
  PARAM(double, post_subtract_py, 0.0, "1", "py subtracted after the map")                                            \
  PARAM(double, post_subtract_zeta, 0.0, "m", "zeta subtracted after the map")                                        \
  PARAM(double, post_subtract_pzeta, 0.0, "1", "pzeta subtracted after the map")                                      \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_num_particles, "1", "particles in each slice")       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_x_center_star, "m", "slice centroid x (boosted)")    \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_px_center_star, "1", "slice centroid px (boosted)")  \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_y_center_star, "m", "slice centroid y (boosted)")    \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_py_center_star, "1", "slice centroid py (boosted)")  \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_zeta_center_star, "m",                               \
                                        "slice centre zeta (boosted); S = (zeta - zeta_i) / 2")                       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_pzeta_center_star, "1",                              \
                                        "slice centroid pzeta (boosted; xfields uses it for Bhabha scattering only)") \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_11_star, "m^2", "slice <x x> at the IP")       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_12_star, "m", "slice <x px> at the IP")        \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_13_star, "m^2", "slice <x y> at the IP")       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_14_star, "m", "slice <x py> at the IP")        \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_22_star, "1", "slice <px px> at the IP")       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_23_star, "m", "slice <px y> at the IP")        \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_24_star, "1", "slice <px py> at the IP")       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_33_star, "m^2", "slice <y y> at the IP")       \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_34_star, "m", "slice <y py> at the IP")        \
  FT_BEAMBEAM_BIGAUSSIAN_3D_SLICE_ARRAY(ARRAY, slices_other_beam_Sigma_44_star, "1", "slice <py py> at the IP")       \
  DERIVED(double, kick_per_particle, "m", "F_k per partner particle (header comment)")                                \
  DERIVED(double, sin_phi, "1", "sin(phi)")                                                                           \
  DERIVED(double, cos_phi, "1", "cos(phi)")                                                                           \
  DERIVED(double, tan_phi, "1", "tan(phi)")                                                                           \
  DERIVED(double, sin_alpha, "1", "sin(alpha)")                                                                       \
  DERIVED(double, cos_alpha, "1", "cos(alpha)")

FT_ELEMENT_STRUCT(BeamBeamBiGaussian3D, FT_BEAMBEAM_BIGAUSSIAN_3D_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
inline void BeamBeamBiGaussian3D_prepare(BeamBeamBiGaussian3D& e, const ft_reference& ref) {
  char msg[300];
  const auto fail = [&](const char* field, int slice, double value, const char* what) {
    if (slice < 0)
      std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian3D: %s = %.17g %s", field, value, what);
    else
      std::snprintf(msg, sizeof(msg), "BeamBeamBiGaussian3D: %s[%d] = %.17g %s", field, slice, value, what);
    throw std::invalid_argument(msg);
  };
  const int n = e.num_slices_other_beam;
  if (n < 1 || n > FT_BEAMBEAM_3D_MAX_SLICES)
    fail("num_slices_other_beam", -1, n, "is outside [1, 8] (the most slices the element holds)");
  const double scalars[] = {e.other_beam_q0,
                            e.phi,
                            e.alpha,
                            e.scale_strength,
                            e.ref_shift_x,
                            e.ref_shift_px,
                            e.ref_shift_y,
                            e.ref_shift_py,
                            e.ref_shift_zeta,
                            e.ref_shift_pzeta,
                            e.other_beam_shift_x,
                            e.other_beam_shift_px,
                            e.other_beam_shift_y,
                            e.other_beam_shift_py,
                            e.other_beam_shift_zeta,
                            e.other_beam_shift_pzeta,
                            e.post_subtract_x,
                            e.post_subtract_px,
                            e.post_subtract_y,
                            e.post_subtract_py,
                            e.post_subtract_zeta,
                            e.post_subtract_pzeta};
  const char* scalar_names[] = {"other_beam_q0",
                                "phi",
                                "alpha",
                                "scale_strength",
                                "ref_shift_x",
                                "ref_shift_px",
                                "ref_shift_y",
                                "ref_shift_py",
                                "ref_shift_zeta",
                                "ref_shift_pzeta",
                                "other_beam_shift_x",
                                "other_beam_shift_px",
                                "other_beam_shift_y",
                                "other_beam_shift_py",
                                "other_beam_shift_zeta",
                                "other_beam_shift_pzeta",
                                "post_subtract_x",
                                "post_subtract_px",
                                "post_subtract_y",
                                "post_subtract_py",
                                "post_subtract_zeta",
                                "post_subtract_pzeta"};
  for (int k = 0; k < 22; ++k)
    if (!std::isfinite(scalars[k])) fail(scalar_names[k], -1, scalars[k], "must be finite");
  if (!(std::fabs(e.phi) < 1.5)) fail("phi", -1, e.phi, "must satisfy |phi| < 1.5 rad");
  const double* arrays[] = {
      e.slices_other_beam_num_particles,     e.slices_other_beam_x_center_star,  e.slices_other_beam_px_center_star,
      e.slices_other_beam_y_center_star,     e.slices_other_beam_py_center_star, e.slices_other_beam_zeta_center_star,
      e.slices_other_beam_pzeta_center_star, e.slices_other_beam_Sigma_11_star,  e.slices_other_beam_Sigma_12_star,
      e.slices_other_beam_Sigma_13_star,     e.slices_other_beam_Sigma_14_star,  e.slices_other_beam_Sigma_22_star,
      e.slices_other_beam_Sigma_23_star,     e.slices_other_beam_Sigma_24_star,  e.slices_other_beam_Sigma_33_star,
      e.slices_other_beam_Sigma_34_star,     e.slices_other_beam_Sigma_44_star};
  const char* array_names[] = {
      "slices_other_beam_num_particles",     "slices_other_beam_x_center_star",  "slices_other_beam_px_center_star",
      "slices_other_beam_y_center_star",     "slices_other_beam_py_center_star", "slices_other_beam_zeta_center_star",
      "slices_other_beam_pzeta_center_star", "slices_other_beam_Sigma_11_star",  "slices_other_beam_Sigma_12_star",
      "slices_other_beam_Sigma_13_star",     "slices_other_beam_Sigma_14_star",  "slices_other_beam_Sigma_22_star",
      "slices_other_beam_Sigma_23_star",     "slices_other_beam_Sigma_24_star",  "slices_other_beam_Sigma_33_star",
      "slices_other_beam_Sigma_34_star",     "slices_other_beam_Sigma_44_star"};
  for (int a = 0; a < 17; ++a)
    for (int i = 0; i < FT_BEAMBEAM_3D_MAX_SLICES; ++i) {
      const double v = arrays[a][i];
      if (i < n && !std::isfinite(v)) fail(array_names[a], i, v, "must be finite");
      if (i >= n && v != 0.0)
        fail(array_names[a], i, v, "is given beyond num_slices_other_beam (more slices than declared)");
    }
  for (int i = 0; i < n; ++i) {
    const double s11 = e.slices_other_beam_Sigma_11_star[i], s33 = e.slices_other_beam_Sigma_33_star[i];
    const double s13 = e.slices_other_beam_Sigma_13_star[i];
    const double s22 = e.slices_other_beam_Sigma_22_star[i], s44 = e.slices_other_beam_Sigma_44_star[i];
    if (!(e.slices_other_beam_num_particles[i] >= 0.0))
      fail("slices_other_beam_num_particles", i, e.slices_other_beam_num_particles[i], "must be >= 0");
    if (!(s11 > 0.0)) fail("slices_other_beam_Sigma_11_star", i, s11, "must be > 0");
    if (!(s33 > 0.0)) fail("slices_other_beam_Sigma_33_star", i, s33, "must be > 0");
    if (!(s22 >= 0.0)) fail("slices_other_beam_Sigma_22_star", i, s22, "must be >= 0");
    if (!(s44 >= 0.0)) fail("slices_other_beam_Sigma_44_star", i, s44, "must be >= 0");
    if (!(s13 * s13 < s11 * s33))
      fail("slices_other_beam_Sigma_13_star", i, s13,
           "makes the (x, y) covariance not positive definite (needs Sigma_13^2 < Sigma_11 Sigma_33)");
  }
  Bb6dParams params{};
  params.phi = e.phi;
  params.alpha = e.alpha;
  params.longitudinal = 1;
  bb6d_prepare_params(params, ref.q0, ref.p0c, ref.beta0, e.scale_strength * e.other_beam_q0, 1.0);
  e.kick_per_particle = params.kick_per_particle;
  e.sin_phi = params.sin_phi;
  e.cos_phi = params.cos_phi;
  e.tan_phi = params.tan_phi;
  e.sin_alpha = params.sin_alpha;
  e.cos_alpha = params.cos_alpha;
}
#endif

FT_FUNCTION void BeamBeamBiGaussian3D_track(const BeamBeamBiGaussian3D& e, ft::ParticleView& p) {
  Bb6dParams params{};
  params.phi = e.phi;
  params.alpha = e.alpha;
  params.kick_per_particle = e.kick_per_particle;
  params.longitudinal = 1;
  params.sin_phi = e.sin_phi;
  params.cos_phi = e.cos_phi;
  params.tan_phi = e.tan_phi;
  params.sin_alpha = e.sin_alpha;
  params.cos_alpha = e.cos_alpha;
  const double shift_x = e.ref_shift_x + e.other_beam_shift_x;
  const double shift_px = e.ref_shift_px + e.other_beam_shift_px;
  const double shift_y = e.ref_shift_y + e.other_beam_shift_y;
  const double shift_py = e.ref_shift_py + e.other_beam_shift_py;
  const double shift_zeta = e.ref_shift_zeta + e.other_beam_shift_zeta;
  const double shift_pzeta = e.ref_shift_pzeta + e.other_beam_shift_pzeta;
  const double beta0 = p.beta0;
  double x = p.x - shift_x, px = p.px - shift_px, y = p.y - shift_y, py = p.py - shift_py;
  double zeta = p.zeta - shift_zeta, pzeta = p.ptau / beta0 - shift_pzeta;
  bb6d_boost(params, x, px, y, py, zeta, pzeta);
  for (int i = 0; i < e.num_slices_other_beam; ++i) {
    if (e.slices_other_beam_num_particles[i] == 0.0) continue;
    Bb6dSlice slice;
    slice.n_particles = e.slices_other_beam_num_particles[i];
    slice.x = e.slices_other_beam_x_center_star[i];
    slice.px = e.slices_other_beam_px_center_star[i];
    slice.y = e.slices_other_beam_y_center_star[i];
    slice.py = e.slices_other_beam_py_center_star[i];
    slice.zeta = e.slices_other_beam_zeta_center_star[i];
    slice.delta = e.slices_other_beam_pzeta_center_star[i];
    slice.sigma_11 = e.slices_other_beam_Sigma_11_star[i];
    slice.sigma_12 = e.slices_other_beam_Sigma_12_star[i];
    slice.sigma_13 = e.slices_other_beam_Sigma_13_star[i];
    slice.sigma_14 = e.slices_other_beam_Sigma_14_star[i];
    slice.sigma_22 = e.slices_other_beam_Sigma_22_star[i];
    slice.sigma_23 = e.slices_other_beam_Sigma_23_star[i];
    slice.sigma_24 = e.slices_other_beam_Sigma_24_star[i];
    slice.sigma_33 = e.slices_other_beam_Sigma_33_star[i];
    slice.sigma_34 = e.slices_other_beam_Sigma_34_star[i];
    slice.sigma_44 = e.slices_other_beam_Sigma_44_star[i];
    bb6d_kick_slice(params, slice, x, px, y, py, zeta, pzeta);
  }
  bb6d_boost_inverse(params, x, px, y, py, zeta, pzeta);
  const double scale = e.scale_strength;
  p.x = x + shift_x - scale * e.post_subtract_x;
  p.px = px + shift_px - scale * e.post_subtract_px;
  p.y = y + shift_y - scale * e.post_subtract_y;
  p.py = py + shift_py - scale * e.post_subtract_py;
  p.zeta = zeta + shift_zeta - scale * e.post_subtract_zeta;
  // The new energy from pzeta = ptau / beta0: delta = sqrt(ptau^2 + 2 ptau / beta0 + 1) - 1 (as add_to_energy).
  const double ptau = (pzeta + shift_pzeta - scale * e.post_subtract_pzeta) * beta0;
  p.ptau = ptau;
  p.delta = sqrt(ptau * ptau + 2.0 * ptau / beta0 + 1.0) - 1.0;
  p.set_derived_energy();
}

FT_ELEMENT_COORDINATES(BeamBeamBiGaussian3D, FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_PTAU,
                       FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_ENERGY)
FT_REGISTER_ELEMENT(BeamBeamBiGaussian3D, FT_BEAMBEAM_BIGAUSSIAN_3D_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Weak-strong 6D beam-beam lens: synchro-beam map of a sliced Gaussian partner with crossing "
                    "angle (xfields BeamBeamBiGaussian3D)")
