// Transverse damper (slice-moment collective element): the ideal bunch-by-bunch (n_slices = 1) or
// slice-by-slice feedback, which kicks every particle of a slice by its centroid's angle,
//   Delta px = -g <px>_slice,  Delta py = -g <py>_slice,  g = 2 / n_d,
// so that a coherent oscillation decays as exp(-turns / n_d) (the kick removes g/2 of the amplitude
// per turn on average over the betatron phase; PyHEADTAIL TransverseDamper, dampingrate_x = n_d:
// gain 2 / n_d). The centroids are the framework's exact fixed-point slice moments (all ranks).
// Particles outside the cuts get no kick. With a `bandwidth` f_c > 0 the pickup-to-kicker chain is a
// Gaussian low-pass (H(f) = exp(-2 pi^2 f^2 sigma_t^2), 1/sqrt(2) at f_c, the LongitudinalImpedance
// profile filter's convention): slice i is kicked with the charge-weighted average of the slices' <px>
// with weights exp(-(t_i - t_j)^2 / (2 sigma_t^2)), sigma_t = sqrt(ln 2) / (2 pi f_c): a rigid bunch is
// damped at the full gain, intra-bunch motion shorter than about 1 / f_c less (within each bunch of a
// train: no crosstalk between bunches). With a `delay` of d turns the kick of turn n uses the centroids
// measured at turn n - d (none in the first d turns): Delta px_n = -g <px>_{n-d}, the pickup-to-kicker
// delay of a real feedback (the one-turn map's eigenvalue then solves
// lambda^d (lambda^2 - 2 cos(mu) lambda + 1) + g (cos(mu) lambda - 1) = 0 at alpha = 0).
// A train (n_bunches > 1): bunch b between zeta_min - b bunch_spacing and zeta_max - b bunch_spacing,
// each bunch damped by its own (slice) centroids (MomentsCollectiveSolver).
#pragma once
#include "fusetrack/device/element.h"

#define FT_TRANSVERSE_DAMPER_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                              \
  REQUIRED(double, gain_turns, "turns", "damping time n_d (> 1): the centroid decays as exp(-turns / n_d)")       \
  REQUIRED(double, zeta_min, "m", "lower cut: the bunch (or its slices) between the cuts is damped")              \
  REQUIRED(double, zeta_max, "m", "upper cut (> zeta_min)")                                                       \
  PARAM(int, n_slices, 1, "1", "1: bunch-by-bunch feedback; > 1: each slice damped by its own centroid")          \
  PARAM(int, plane_x, 1, "1", "1: damp x (0: off)")                                                               \
  PARAM(int, plane_y, 1, "1", "1: damp y (0: off)")                                                               \
  PARAM(double, bandwidth, 0.0, "Hz", "0: ideal (each slice its own centroid); > 0: Gaussian low-pass over the slices") \
  PARAM(int, delay, 0, "turns", "the kick uses the centroids measured this many turns earlier (0: this turn's)")   \
  PARAM(int, n_bunches, 1, "1", "a train of n_bunches bunches, bunch b cut at [zeta_min, zeta_max] - b bunch_spacing") \
  PARAM(double, bunch_spacing, 0.0, "m", "train: zeta distance between consecutive bunches (a multiple of the slice width)") \
  PARAM(double, moment_range_xy, 1.0, "m", "declared bound of |x|, |y| for the fixed-point slice centroids")     \
  PARAM(double, moment_range_pxy, 1.0, "1", "declared bound of |px|, |py| for the fixed-point slice centroids")  \
  DERIVED(double, gain_x, "1", "2 / n_d, or 0 when x is off")                                                     \
  DERIVED(double, gain_y, "1", "2 / n_d, or 0 when y is off")

#define FT_TRANSVERSE_DAMPER_JSON_FIELDS(JSON)

FT_ELEMENT_STRUCT(TransverseDamper, FT_TRANSVERSE_DAMPER_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>

inline void TransverseDamper_prepare(TransverseDamper& e, const ft_reference& /*reference*/) {
  if (!(e.gain_turns > 1.0) || !std::isfinite(e.gain_turns)) {
    char msg[200];
    std::snprintf(msg, sizeof(msg),
                  "field 'gain_turns': the damping time must be finite and longer than 1 turn (gain 2/n_d < 2), got "
                  "%.12g turns",
                  e.gain_turns);
    throw std::invalid_argument(msg);
  }
  if (e.delay < 0) {
    char msg[120];
    std::snprintf(msg, sizeof(msg), "field 'delay': the pickup-to-kicker delay must be >= 0 turns, got %d", e.delay);
    throw std::invalid_argument(msg);
  }
  e.gain_x = e.plane_x ? 2.0 / e.gain_turns : 0.0;
  e.gain_y = e.plane_y ? 2.0 / e.gain_turns : 0.0;
}

/// The slices and moment ranges for the framework (no wake sources); throws std::invalid_argument
/// naming the field on bad input. Defined in wake_element_models.cpp.
void TransverseDamper_create_moments(const TransverseDamper& e, const char* json_definition,
                                     const char* base_directory, const ft_reference& reference,
                                     ft_moments_model& model);
#endif

/// k: the centroids of the particle's slice.
FT_FUNCTION void TransverseDamper_kick(const TransverseDamper& e, const ft::SliceKick& k, ft::ParticleView& p) {
  p.px -= e.gain_x * k.mean_px;
  p.py -= e.gain_y * k.mean_py;
}

FT_ELEMENT_COORDINATES(TransverseDamper, FT_COORD_PX | FT_COORD_PY | FT_COORD_ZETA, FT_COORD_PX | FT_COORD_PY)
FT_REGISTER_MOMENTS_COLLECTIVE_ELEMENT(TransverseDamper, FT_TRANSVERSE_DAMPER_FIELDS, FT_TRANSVERSE_DAMPER_JSON_FIELDS,
                                       FT_WITH_PREPARE,
                                       "Ideal transverse damper, bunch-by-bunch or per slice: Delta px = -(2/n_d) "
                                       "<px>, damping time n_d turns (PyHEADTAIL TransverseDamper)")
