// Frequency map analysis (tune diffusion) of a dynamic-aperture grid: every particle of a DA scan
// (fusetrack/da.h) is tracked 2N turns; its tunes (qx, qy) come from NAFF (fusetrack/naff.h) on the
// turn-by-turn data of the first window (turns 0 .. N-1) and of the second (N .. 2N-1), and the
// diffusion index is
//   d = log10 sqrt((qx2 - qx1)^2 + (qy2 - qy1)^2)
// (each difference taken modulo 1 into [-1/2, 1/2)). Regular (quasi-periodic) orbits keep their
// tunes, so d is near NAFF's precision for N turns; chaotic orbits near resonances or the DA's edge
// have tunes that wander, d of -4 .. -2 and above.
// J. Laskar, "Frequency analysis for multi-dimensional systems. Global dynamics and diffusion",
// Physica D 67 (1993) 257; H. S. Dumas and J. Laskar, Phys. Rev. Lett. 70 (1993) 2975; J. Laskar,
// C. Froeschle and A. Celletti, Physica D 56 (1992) 253; for accelerators: J. Laskar, "Frequency map
// analysis and quasiperiodic decompositions", PAC 2003 (proceedings), and D. Robin, C. Steier,
// J. Laskar, L. Nadolski, Phys. Rev. Lett. 85 (2000) 558 (the ALS).
//
// Signals: deviations from the closed orbit, off-momentum particles from the dispersive orbit
// co + D delta0 (delta0: the particle's momentum offset from the scan), normalised with the
// Courant-Snyder parameters at the start when the optics are given: z = x_hat - i px_hat (one line
// at +Q for a linear motion, fusetrack/naff.h); raw x - i px otherwise (the mirror line at 1 - Q then
// biases the tune unless NaffOptions finds it: frequencies >= 2 with joint refinement).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fusetrack/da.h"
#include "fusetrack/naff.h"
#include "fusetrack/optics.h"
#include "fusetrack/tracker.h"

namespace ft {

struct FrequencyMapOptions {
  int64_t turns_per_window = 1024;  ///< N (>= 16): 2N turns are tracked
  NaffOptions naff{2, 1, 0};        ///< Hann order 2, the strongest line of each plane
  FmaMode fma = FmaMode::Off;       ///< GPU numerics
  int threads = 0;                  ///< CPU threads of the tracking and of NAFF (0: OpenMP's default)
};

/// Per particle of the scan (its order): the tunes of both windows, the diffusion index and the loss.
struct FrequencyMap {
  int64_t turns_per_window = 0;
  std::vector<double> qx1, qy1, qx2, qy2;  ///< NaN where the particle did not survive the window
  std::vector<double> diffusion;           ///< log10 |dq|; NaN unless both windows' tunes exist; -inf for dq = 0
  std::vector<int64_t> lost_turn;          ///< -1 when it survived the 2N turns
  bool normalised = false;                 ///< Courant-Snyder normalised signals (optics given)
  double beta_x = 1.0, alpha_x = 0.0, beta_y = 1.0, alpha_y = 0.0;  ///< [m], [1] the normalisation used
  double tracking_seconds = 0.0, naff_seconds = 0.0;
};

/// Checks the options; throws InputError naming the option (e.g. "--turns-per-window").
void validate_frequency_map_options(const FrequencyMapOptions& options);

/// Tracks the scan's initial particles 2N turns on `backend` (turn-by-turn data through
/// TrackOptions::callback_every = 1; any backend) and computes the frequency map. `optics`: the
/// ring's optics at the start (normalisation and dispersion), or null for raw signals around the
/// scan's closed orbit. Leaves the tracked particles in scan.particles and 2N in scan.turns_done.
/// NAFF runs on the host after each window, OpenMP over the particles.
FrequencyMap frequency_map(DaScan& scan, const LinearOptics* optics, Backend& backend,
                           const FrequencyMapOptions& options);

/// The diffusion index log10 sqrt(dqx^2 + dqy^2) of two tune pairs, differences modulo 1.
double diffusion_index(double qx1, double qy1, double qx2, double qy2);

/// Writes DIR/fma.npz (per particle: grid_x, grid_y, amplitude, angle, delta, x0, y0, qx1, qy1, qx2,
/// qy2, diffusion, lost_turn), DIR/fma.csv (the same table) and DIR/summary.json (lattice, turns, units,
/// the optics tunes `qx`, `qy` (NaN: unknown), normalisation, survivors and timings).
void write_frequency_map(const DaScan& scan, const FrequencyMap& map, const std::string& directory,
                         const std::string& lattice_file, double optics_qx, double optics_qy);

}  // namespace ft
