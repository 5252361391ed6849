// Transverse (and longitudinal) wakes of the whole bunch (slice-moment collective element): the bunch
// is cut into n_slices slices between zeta_min and zeta_max; the framework sums per slice the
// macroparticles and the centroids (exact fixed-point integers over threads and MPI ranks), and turns
// them into per-slice kicks with the wake library (fusetrack/transverse_wakes.h: direct convolution of
// the slice charges and offsets with the sources' wakes, summed in a fixed order, plus the stored
// slice moments of the last memory_turns turns). Conventions of xwakes and HEADTAIL:
//   Delta px_i = q0 / (beta0 p0c) sum_j Q_j [W_dip,x(t_i - t_j) x_j + W_quad,x(t_i - t_j) x]
//   Delta E_i  = -q0 sum_j Q_j W_long(t_i - t_j)
// (Q_j the charge of slice j [C], t the delay behind the head [s], W [V/C/m] or [V/C], p0c [eV];
// Chao, "Physics of Collective Beam Instabilities", Wiley 1993, ch. 2, with the sign of the HEADTAIL
// tables: W_dip > 0 just behind the source). The framework hands each particle its slice's kick
// (ft::SliceKick, already in units of px and of Delta E / E0); particles outside the cuts get none.
//
// Host-only JSON field "sources": a list of wake sources, summed (framework/src/collective/
// wake_element_models.cpp):
//   {"type": "Resonator", "r_shunt": R_perp [Ohm/m] (R [Ohm] for the longitudinal wake), "q": Q,
//    "frequency": f_r [Hz]}
//   {"type": "ResistiveWall", "radius": b [m], "length": L [m], "conductivity": sigma [S/m]}
//     (classic thick wall)
//   {"type": "WakeTable", "file": path relative to the lattice file, "format": "pyheadtail" (default;
//    "columns": ["time", "dipole_x", ...], units ns, V/pC, V/pC/mm) or "xsuite" (a header line of
//    column names, SI units)}
// Analytic sources take "chamber": "round" (default: dipolar factors 1) or "flat" (Yokoya factors).
//
// Host-only JSON field "convolution": "direct" (default) sums the slices in a fixed order, the same bits on
// every machine; "fft" sums the same discrete convolution through FFTW, in the frequency domain over the
// stored turns (equal to rounding; fast for long memories and many slices; fusetrack/transverse_wakes.h).
//
// A train (n_bunches > 1, Xsuite's multi-bunch convention): bunch b (0 leading) is cut at
// [zeta_min, zeta_max] - b bunch_spacing with the same n_slices; `intensity` is per bunch. A bunch's own
// wake in the same turn is the exact slice convolution above; the wakes of the other bunches and of all
// stored turns (its own included) act as from a point bunch (the standard long-range approximation, as
// PyHEADTAIL's and Xsuite's multi-bunch long-range wakes): the source's total charge and dipole moment
// sum_j Q_j x_j, at the delay between the two bunches' cut grids, kick every slice of the witness alike.
// Cost per turn ~ n_bunches * n_slices^2 + n_bunches^2 * memory_turns.
#pragma once
#include "fusetrack/device/element.h"

#define FT_TRANSVERSE_WAKE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                             \
  REQUIRED(int, n_slices, "1", "number of slices between the cuts (>= 1)")                                    \
  REQUIRED(double, zeta_min, "m", "lower cut of the slicing; particles outside the cuts see no wake")          \
  REQUIRED(double, zeta_max, "m", "upper cut of the slicing (> zeta_min)")                                    \
  REQUIRED(double, intensity, "1", "real particles per bunch, spread over the macroparticles")                \
  PARAM(int, memory_turns, 0, "turns", "multi-turn wake: the slice moments of this many past turns act too")  \
  PARAM(int, n_bunches, 1, "1", "a train of n_bunches bunches, bunch b cut at [zeta_min, zeta_max] - b bunch_spacing") \
  PARAM(double, bunch_spacing, 0.0, "m", "train: zeta distance between consecutive bunches (a multiple of the slice width)") \
  PARAM(int, dipolar_x, 1, "1", "1: the dipolar wake in x acts (0: off)")                                     \
  PARAM(int, dipolar_y, 1, "1", "1: the dipolar wake in y acts")                                              \
  PARAM(int, quadrupolar_x, 0, "1", "1: the quadrupolar (detuning) wake in x acts")                           \
  PARAM(int, quadrupolar_y, 0, "1", "1: the quadrupolar wake in y acts")                                      \
  PARAM(int, longitudinal, 0, "1", "1: the longitudinal wake acts (energy kick)")                             \
  PARAM(double, moment_range_xy, 1.0, "m", "declared bound of |x|, |y| for the fixed-point slice centroids")  \
  PARAM(double, moment_range_pxy, 1.0, "1", "declared bound of |px|, |py| for the fixed-point slice centroids")

#define FT_TRANSVERSE_WAKE_JSON_FIELDS(JSON)                                                                        \
  JSON(sources, 1, "-",                                                                                             \
       "list of wake sources, summed: {type: Resonator, r_shunt [Ohm/m], q, frequency [Hz]}, {type: "               \
       "ResistiveWall, radius [m], length [m], conductivity [S/m]}, {type: WakeTable, file, format: pyheadtail "    \
       "(columns: [time, dipole_x, ...]; ns, V/pC/mm) or xsuite (header; SI)}; analytic ones: chamber round|flat")  \
  JSON(convolution, 0, "-",                                                                                         \
       "\"direct\" (default: the slice sum in a fixed order, the same bits everywhere) or \"fft\" (FFTW: equal to " \
       "rounding, O(N log N + memory_turns N) per turn instead of O(memory_turns n_slices^2))")

FT_ELEMENT_STRUCT(TransverseWake, FT_TRANSVERSE_WAKE_FIELDS)

#ifndef FT_DEVICE_COMPILE
/// The slices, moment ranges and wake sources for the framework; throws std::invalid_argument naming the
/// field on bad input. Defined in wake_element_models.cpp.
void TransverseWake_create_moments(const TransverseWake& e, const char* json_definition, const char* base_directory,
                                   const ft_reference& reference, ft_moments_model& model);
#endif

/// k: the wake kicks of the particle's slice (ft::SliceKick, fusetrack/device/slice_moments.h).
FT_FUNCTION void TransverseWake_kick(const TransverseWake& e, const ft::SliceKick& k, ft::ParticleView& p) {
  (void)e;
  p.px += k.dpx + k.kx * p.x;
  p.py += k.dpy + k.ky * p.y;
  if (k.denergy != 0.0) p.add_to_energy(k.denergy);
}

FT_ELEMENT_COORDINATES(TransverseWake, FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_PTAU, FT_COORD_PX | FT_COORD_PY | FT_COORD_ENERGY)
FT_REGISTER_MOMENTS_COLLECTIVE_ELEMENT(TransverseWake, FT_TRANSVERSE_WAKE_FIELDS, FT_TRANSVERSE_WAKE_JSON_FIELDS,
                                       FT_NO_PREPARE,
                                       "Transverse (dipolar, quadrupolar) and longitudinal wakes of the sliced bunch "
                                       "from resonators, the resistive wall and tables, multi-turn (xwakes/HEADTAIL "
                                       "convention; Chao ch. 2)")
