// Turn-by-turn bunch monitors for (collective) tracking runs: longitudinal moments every K turns,
// profile snapshots of the collective elements every P turns, written to one .npz archive, and
// a progress bar with ETA on stderr.
//
// Typical use:
//   ft::BunchMonitor monitor(lattice, {/*every*/ 1, /*profile_every*/ 100});
//   ft::TrackOptions options;  options.turns = 10000;
//   monitor.attach(options, *backend);     // sets callback / callback_every (chains an existing callback)
//   monitor.record(0, particles, backend.get());   // the initial state, turn 0
//   backend->track(particles, options);
//   monitor.write("monitor.npz");          // numpy.load("monitor.npz")["rms_zeta"]
//
// Moments are sums over the alive particles in index order, two passes (means, then central
// moments), in double precision, with no threads: identical particles give identical monitor
// files, whatever the backend that tracked them.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/npy.h"
#include "fusetrack/particles.h"
#include "fusetrack/tracker.h"

namespace ft {

/// Longitudinal moments of the alive particles.
struct BunchMoments {
  int64_t alive = 0;
  double mean_zeta = 0.0, rms_zeta = 0.0;    // [m]
  double mean_delta = 0.0, rms_delta = 0.0;  // [1]
  double cov_zeta_delta = 0.0;               // [m]
  /// rms emittance sqrt(det cov(zeta, delta)) [m]
  double emittance = 0.0;
  /// 4 pi sqrt(det cov(t, E)) [eV s] with t - t0 = -zeta / (beta0 c) and E - E0 = ptau p0c (exact);
  /// 4 pi sigma_t sigma_E for an uncorrelated bunch.
  double emittance_evs = 0.0;
  // Transverse: centroids and rms sizes [m], and the rms emittances [m] of the betatron parts,
  // u_beta = u - (cov(u, delta) / var(delta)) delta for u = x, px (y, py alike; no correction when
  // var(delta) = 0): eps_x = sqrt(det cov(x_beta, px_beta)) (statistical emittance with the
  // dispersive part removed, as MAD-X/PyHEADTAIL users compute it from particle data). The
  // normalized emittances are eps * beta0 gamma0.
  double mean_x = 0.0, mean_y = 0.0, rms_x = 0.0, rms_y = 0.0;
  double emittance_x = 0.0, emittance_y = 0.0;
  double emittance_nx = 0.0, emittance_ny = 0.0;
};

/// The moments of `particles` (alive ones, index order). `p0c` [eV] of the reference.
BunchMoments bunch_moments(const Particles& particles, double p0c);

struct MonitorOptions {
  int64_t every = 1;          // moments every `every` turns (TrackOptions::callback_every)
  int64_t profile_every = 0;  // profile snapshots every that many turns (a multiple of `every`); 0: none
  /// Progress bar on stderr: "auto" (only when stderr is a terminal), "on", "off".
  std::string progress = "auto";
  int64_t total_turns = 0;    // for the progress bar's percentage and ETA
};

/// A progress bar with ETA on stderr, redrawn at most 5 times a second; nothing when disabled.
class ProgressBar {
 public:
  ProgressBar(int64_t total, bool enabled);
  ~ProgressBar();
  void update(int64_t done);
  void finish();
  bool enabled() const { return m_enabled; }
  /// "auto": stderr is a terminal; "on"; "off".
  static bool wanted(const std::string& mode);

 private:
  int64_t m_total;
  bool m_enabled;
  bool m_drawn = false;
  std::chrono::steady_clock::time_point m_start, m_last;
};

class BunchMonitor {
 public:
  BunchMonitor(const Lattice& lattice, const MonitorOptions& options);

  /// Sets options.callback_every and options.callback: records every `every` turns (turn =
  /// options.first_turn + turns done) and then calls the callback that was there (if any, at its
  /// own period, which must be a multiple of `every`). The backend supplies the profiles.
  void attach(TrackOptions& options, const Backend& backend);
  /// Records the moments (and the profiles, if `turn` is a multiple of profile_every and a
  /// backend is given) of the particles after `turn` turns.
  void record(int64_t turn, const Particles& particles, const Backend* backend);
  /// Ends the progress bar.
  void finish();

  /// Members: turn, alive (int64), mean_zeta, rms_zeta, mean_delta, rms_delta, cov_zeta_delta,
  /// emittance [m], emittance_evs [eV s], mean_x, mean_y, rms_x, rms_y [m], emittance_x,
  /// emittance_y, emittance_nx, emittance_ny [m]; per collective element k (sequence order):
  /// profile_turn (int64), profile_<k>_zeta (slice centres [m]), profile_<k>_counts (int64,
  /// snapshots x slices, profile_unit per macroparticle), profile_<k>_field [V],
  /// profile_<k>_sequence_index; profile_unit; beta0, p0c.
  std::vector<std::pair<std::string, NpyArray>> arrays() const;
  void write(const std::string& path) const;

  const std::vector<int64_t>& turns() const { return m_turns; }
  const std::vector<BunchMoments>& moments() const { return m_moments; }
  const std::vector<int64_t>& profile_turns() const { return m_profile_turns; }
  /// Per snapshot, the snapshots of every collective element.
  const std::vector<std::vector<CollectiveSnapshot>>& profiles() const { return m_profiles; }

 private:
  double m_beta0, m_p0c;
  MonitorOptions m_options;
  ProgressBar m_progress;
  std::vector<int64_t> m_turns;
  std::vector<BunchMoments> m_moments;
  std::vector<int64_t> m_profile_turns;
  std::vector<std::vector<CollectiveSnapshot>> m_profiles;
};

}  // namespace ft
