// Colliders: two beams that act on each other at an interaction point (IP), strong-strong or
// weak-strong, several bunches per beam, bunches spread over MPI ranks.
//
// A set-up file (docs/pages/user/colliders.md) names the two beams (reference particle, ring, bunches) and
// the IP (half crossing angle, crossing plane, slices, 6D or 4D). Each bunch alternates a collision
// at the IP and one turn of its ring; the collision is the synchro-beam map of
// fusetrack/device/beambeam6d.h with the partner bunch's slice moments of the same turn, which come
// from the shared deterministic reduction (fusetrack/reduction.h): integers, so that a bunch's
// particles are bitwise the same for any rank count, bunch placement and thread count.
//
// Frames. Each beam is tracked in its own right-handed frame (s along its motion, y up), as a
// single-beam run would be. Beam 2 moves in -s of beam 1's frame, so its x axis is reversed:
// a beam-2 quantity enters beam 1's frame as x -> -x, px -> px, y -> y, py -> -py (slopes of a
// particle moving the other way), i.e. Sigma_12 -> -Sigma_12, Sigma_34 -> -Sigma_34, others kept;
// the map is its own inverse. A crossing angle 2 phi in the plane alpha of beam 1's frame is, in
// beam 2's frame, the same phi in the plane pi - alpha (beam 2's boost).
//
// Schedule. Crossings are numbered k = 0, 1, ... (slots): slot k is bunch k mod n1 of beam 1
// meeting bunch k mod n2 of beam 2. With n1 == n2 the pairs are fixed; with n and n - 1 (the
// "gear change") each bunch meets a different partner every turn. A run of T turns is T n1 slots
// (T turns of beam 1). Every rank walks the slots in waves of min(n1, n2) consecutive slots, which
// hold every bunch at most once, and works only on its own bunches: the arrivals of the wave (record
// sums, boost, slice moments), the exchanges in slot order (the partners' owners swap the integers:
// one MPI_Sendrecv, no particles), the departures (kick, inverse boost, one turn). Each bunch's
// operations are those of a slot-by-slot walk, so results do not depend on the waves; waits only
// ever point to earlier slots, so the walk cannot deadlock.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/lattice.h"
#include "fusetrack/session.h"
#include "fusetrack/tracker.h"

namespace ft {

class Communicator;
class ElementRegistry;

/// A ring given as a linear one-turn map at the IP (uncoupled; as Xsuite's LineSegmentMap):
/// betatron rotations with the Twiss parameters at the IP and phase advance 2 pi (Q + Q' delta),
/// and a linear synchrotron rotation with Qs and beta_s = sigma_zeta / sigma_delta (above
/// transition: a particle with delta > 0 falls back, zeta decreases). Chromaticity makes the
/// map not exactly symplectic (as in the codes that offer it); set Q' = 0 for symplectic runs.
struct LinearRingMap {
  double qx = 0.0, qy = 0.0;             // tunes (integer part irrelevant)
  double beta_x = 0.0, alpha_x = 0.0;    // [m], [1] at the IP
  double beta_y = 0.0, alpha_y = 0.0;    // [m], [1]
  double qs = 0.0;                       // synchrotron tune (0: zeta and delta frozen)
  double beta_s = 0.0;                   // [m] sigma_zeta / sigma_delta of the matched bunch
  double chroma_x = 0.0, chroma_y = 0.0; // Q' = dQ / d delta
  double circumference = 0.0;            // [m] (for the revolution frequency; 0: unknown)
};

/// The bunches of one beam, all alike (a matched Gaussian at the IP, or particles from a file).
struct ColliderBunches {
  int count = 1;
  double intensity = 0.0;                         // particles per bunch
  size_t macroparticles = 0;                      // per bunch
  double emittance_nx = 0.0, emittance_ny = 0.0;  // normalised rms emittances [m]
  double sigma_zeta = 0.0, sigma_delta = 0.0;     // [m], [1]
  uint64_t seed = 1;                              // bunch b of beam j uses seed + 1000003 j + b
  std::string particles_file;                     // instead of the Gaussian: the same initial particles for every bunch
};

struct ColliderBeam {
  std::string name;
  ReferenceParticle reference;
  std::string lattice_file;               // the ring, tracked element by element (IP at its start), or
  std::optional<LinearRingMap> linear_map;  // a linear one-turn map
  ColliderBunches bunches;
};

struct InteractionPoint {
  double phi = 0.0;           // half crossing angle [rad]
  double alpha = 0.0;         // crossing plane in beam 1's frame [rad] (0: horizontal)
  int slices = 1;             // longitudinal slices per bunch (set-up default: 21 in 6D)
  bool six_d = true;          // false: 4D (one slice, no energy change), as the weak-strong 4D element
  double slice_range = 4.0;   // slices cover +-slice_range sigma_zeta (uniform; particles outside: no field)
  double moment_range = 50.0; // fixed-point ranges of the moments, in matched rms sizes (docs)
  int min_slice_macroparticles = 10;  // sparser slices give no field (reported)
};

struct ColliderSetup {
  std::string file;  // where it was read from (directory for relative paths, messages)
  std::array<ColliderBeam, 2> beams;
  InteractionPoint ip;
  /// -1: strong-strong (both beams act on each other); 0 or 1: that beam is frozen (weak-strong:
  /// its bunches keep their initial particles, are not kicked and not tracked).
  int frozen_beam = -1;
};

/// Reads a set-up file; InputError names the file and the field ("beams[1].bunches.intensity").
ColliderSetup read_collider_setup(const std::string& path);
/// The same from a parsed document (`file` for messages and relative paths).
ColliderSetup collider_setup_from_json(const nlohmann::ordered_json& doc, const std::string& file);

enum class BunchPlacement { block, round_robin };
BunchPlacement parse_bunch_placement(const std::string& text, const std::string& option = "placement");

struct CollideOptions {
  int64_t turns = 1;  // turns of beam 1: turns * n1 slots
  int threads = 0;
  BunchPlacement placement = BunchPlacement::block;
  BackendChoice backend;   // lattice rings: the CPU or the GPU backend (each rank its GPU)
  FmaMode fma = FmaMode::Off;
  std::string output_dir;  // bunches.csv and spectra.csv (rank 0); empty: none written
  bool keep_records = true;  // CollideResult::records (off for long runs: the CSV has them)
  /// Progress line every this many slots on stderr (0: none).
  int64_t progress_every = 0;
  /// Checkpoints in output_dir/checkpoint every this many turns (0: none): every bunch's particles
  /// (one file per bunch, any rank count resumes them) and the crossing reached. `resume` continues
  /// from the last one, bitwise as if never stopped; `stop_after` ends (with a checkpoint) after
  /// that many turns.
  int64_t checkpoint_every = 0;
  bool resume = false;
  int64_t stop_after = 0;
  /// With fma off, the first crossing of every GPU bunch is replayed on a sample of its particles, on the
  /// GPU and on the CPU, and compared bit for bit (arrival and departure); a difference ends the run with a
  /// DeviceError. The bunch itself is untouched.
  bool check_gpu = true;
  /// The sample: the bunch's first check_sample particles (0: the whole bunch). Every step's code path runs
  /// on a sample of any size; 16384 keeps the check within a few percent of a run's time (0.07 s for 15
  /// bunches on one H200, against 0.35 s with 65536).
  size_t check_sample = 16384;
  /// Slots per wave (0: min(n1, n2), the most whose crossings are independent; at most that). Fewer walk the
  /// same crossings in more waves, with the same results and more waits between ranks.
  int64_t wave_slots = 0;
};

/// One bunch at one crossing, as it arrives at the IP (before the kick).
struct CrossingRecord {
  int64_t slot = 0;
  int beam = 0, bunch = 0, partner = 0;
  int64_t turn = 0;  // the bunch's own crossing number
  double alive = 0;  // macroparticles
  double luminosity = 0.0;  // this crossing's integral int rho1 rho2 [1/m^2] (the same in both rows)
  std::array<double, 6> mean{};  // x px y py zeta delta, in the beam's own frame
  double sigma_x = 0.0, sigma_y = 0.0, sigma_zeta = 0.0, sigma_delta = 0.0;
  double emittance_x = 0.0, emittance_y = 0.0;  // geometric rms [m]
  double coupling = 0.0;    // max |r| of the partner slices' x-y (and px-py) correlation coefficients
  double unused_charge = 0.0;  // partner macroparticles in no used slice (outside or sparse slices)
};

/// Per beam and bunch: what the whole run gave.
struct BunchSummary {
  int beam = 0, bunch = 0;
  double mean_luminosity = 0.0;  // per crossing [1/m^2]
  double initial_emittance_x = 0.0, initial_emittance_y = 0.0, final_emittance_x = 0.0, final_emittance_y = 0.0;
  double final_alive = 0.0;
  double peak_tune_x = 0.0, peak_tune_y = 0.0;  // strongest line of the centroid spectrum
};

struct CollideResult {
  bool root = true;
  int ranks = 1;
  int64_t slots = 0;
  std::vector<CrossingRecord> records;  // on rank 0: every slot and beam, in slot order
  std::vector<BunchSummary> bunches;    // on rank 0
  /// Beam-beam parameters of the set-up (linear, round/flat Gaussian partner of matched sizes):
  /// xi[beam][plane] = -F N beta / (4 pi sigma_p (sigma_x + sigma_y)).
  std::array<std::array<double, 2>, 2> xi{};
  std::array<std::array<double, 2>, 2> tunes{};  // unperturbed Q of each beam
  /// One bunch per beam: the sigma (lab-frame sum) and pi (difference) mode tunes of the centroid
  /// spectra, [plane]; NaN otherwise.
  std::array<double, 2> sigma_mode{}, pi_mode{};
  double crossing_frequency = 0.0;  // [1/s] crossings per second at the IP (0: unknown circumference)
  double luminosity = 0.0;          // [1/(m^2 s)] mean over the run (0: unknown frequency)
  // This rank's time: arrival (record sums, boost, slice moments: deposit_seconds), the swap of the
  // integers (exchange), departure (kick, inverse boost and a linear map's turn: kick_seconds), a
  // lattice ring's turn (transport_seconds). A GPU bunch's kernels are queued: their time shows where the host
  // waits for them, at the arrival's results (gpu_kernel_seconds has it).
  double seconds = 0.0, exchange_seconds = 0.0, kick_seconds = 0.0, transport_seconds = 0.0,
         deposit_seconds = 0.0;
  int64_t stopped_at = -1;         // the crossing a stop_after run stopped at (-1: ran to the end)
  std::string device = "CPU";     // where this rank's linear-map bunches were tracked
  int gpu_checks = 0;               // GPU bunches whose first crossing equalled the CPU's (check_gpu)
  int idle_ranks = 0;               // ranks that hold no bunch (more ranks than bunches)
  double gpu_kernel_seconds = 0.0;  // this rank's
  std::vector<std::string> output_files;
};

/// Runs the collider on the ranks of `comm`; `registry` resolves lattice rings' element types.
CollideResult run_collide(const ColliderSetup& setup, ElementRegistry& registry, const CollideOptions& options,
                          Communicator& comm);

/// summary.json of a run (rank 0's result): beams, beam-beam parameters, coherent modes,
/// luminosity, per-bunch summaries, this rank's time split.
nlohmann::ordered_json collide_summary_json(const ColliderSetup& setup, const CollideOptions& options,
                                           const CollideResult& result);

/// The partner's slice in the tracked beam's frame (the frame map of the file comment).
Bb6dSlice slice_in_partner_frame(const Bb6dSlice& s);

/// Amplitude spectrum |sum w_n z_n e^{-2 pi i q n}| on tunes q = i / (2 m), i = 0..m (Hann window;
/// the samples are zero-padded to 2m); for the centroid spectra.
std::vector<double> amplitude_spectrum(const std::vector<double>& samples, size_t m);
/// The tune of the strongest line of `samples` (above q = 0.002), refined by a parabola.
double peak_tune(const std::vector<double>& samples);

}  // namespace ft
