// The workflows that the command line and the Python module share: choosing a backend, setting up
// particles (grid, file, matched Gaussian, matched longitudinal bunch), tracking a bunch with
// monitors (over MPI ranks when there are several), running a DA scan job (shares, checkpoints,
// resume, job-array parts, results) and the CPU-GPU reproduction check. Front ends only turn
// their options into these structs and print what comes back.
//
// Typical use:
//   ft::ElementRegistry registry;  registry.load_default_plugins();
//   ft::Lattice lattice = ft::load_lattice("ring.json", registry);
//   auto backend = ft::make_backend(lattice, ft::BackendChoice{});   // GPU if usable, else CPU
//   ft::Particles p = ft::make_grid(lattice.reference().beta0(), 1e-4, 1e-3, 10, 1e-4, 1e-3, 10);
//   ft::TrackRunOptions o;  o.turns = 1000;
//   ft::TrackRun run = ft::run_tracking(lattice, *backend, p, o);    // p is tracked in place
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/da.h"
#include "fusetrack/lattice.h"
#include "fusetrack/matched_bunch.h"
#include "fusetrack/monitor.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particles.h"
#include "fusetrack/space_charge_install.h"
#include "fusetrack/tracker.h"
#include "fusetrack/variants.h"

namespace ft {

// ---------------------------------------------------------------------------------------------
// Backends

/// Where and how to track.
struct BackendChoice {
  std::string device = "auto";  // "auto" (the GPU when one is usable), "cpu" or "gpu"
  Dispatch dispatch = Dispatch::Auto;
  std::string cache_dir;  // compiled-kernel cache; "" the default, "off" none
};

/// "off" / "on" -> FmaMode; "auto" / "cpu" / "gpu" checked. Throws InputError naming `option`
/// for anything else.
FmaMode parse_fma_mode(const std::string& text, const std::string& option = "fma");
void check_device_name(const std::string& text, const std::string& option = "device");

/// The backend `choice` asks for. "gpu" without a usable GPU throws DeviceError with the reason;
/// "auto" falls back to the CPU and appends a one-line notice (why) to `notices`. Under MPI each
/// rank takes the GPU of its node-local rank.
std::unique_ptr<Backend> make_backend(const Lattice& lattice, const BackendChoice& choice,
                                      std::vector<std::string>* notices = nullptr);

// ---------------------------------------------------------------------------------------------
// Initial particles

/// A matched Gaussian bunch from the optics at the start (ft::make_gaussian after checking the
/// inputs). The labels name the inputs in error messages (front ends use their own option names).
struct GaussianBunchSpec {
  size_t count = 0;
  double emittance_nx = 0.0, emittance_ny = 0.0;  // normalised emittances [m]
  double sigma_zeta = 0.0, sigma_delta = 0.0;     // [m], [1]
  uint64_t seed = 1;
  std::string emittance_label = "emittance_nx/emittance_ny";
  std::string sigma_label = "sigma_zeta/sigma_delta";
};
Particles make_matched_gaussian(const Lattice& lattice, const GaussianBunchSpec& spec);

/// The particles of a run through every variant of a lattice in one run (Backend::set_variants):
/// `one` copied once per variant, variant after variant, each copy's `variant` column its index.
Particles particles_per_variant(const Particles& one, size_t variants);

/// The particles alive in each of `variants` variants, by their `variant` column.
std::vector<size_t> alive_per_variant(const Particles& particles, size_t variants);

/// The particles of the reproduction check: `count` particles of a square x-y grid of half-width
/// `amplitude` [m] at momentum offset `delta`; on a collective lattice their zeta fills the middle
/// of the first collective element's cuts (a low-discrepancy sequence) and delta alternates in sign.
Particles make_repro_particles(const Lattice& lattice, size_t count, double amplitude, double delta);

// ---------------------------------------------------------------------------------------------
// Tracking a bunch

/// One update of frozen space charge that follows the beam (TrackRunOptions::space_charge).
struct SpaceChargeUpdate {
  int64_t turn = 0;                             // turns done when the beam was measured (the sizes used from then on)
  size_t total = 0, alive = 0;                  // macroparticles over all ranks
  double emittance_x = 0.0, emittance_y = 0.0;  // betatron rms emittances [m] (bunch_moments)
  double rms_delta = 0.0, rms_zeta = 0.0, mean_zeta = 0.0;
  double mean_sigma_x = 0.0, mean_sigma_y = 0.0;  // over the elements [m]
  std::vector<SpaceChargeSizes> sizes;            // per element, SpaceChargeBeamSizes::entries() order
};

/// Frozen space charge whose sizes follow the beam during run_tracking (SpaceChargeBeamSizes): at
/// turns 0, K, 2K, ... (up to and including the last turn) the moments of the whole bunch (gathered
/// from every MPI rank in rank order, so any rank count gives the same values) set every
/// SpaceChargeBiGaussian element of `lattice`; the backend then takes the new values (CPU: read at
/// every element call; GPU: Backend::parameters_changed, the switch kernel's table uploaded again,
/// a baked kernel recompiled). Tracking runs in pieces of K turns between the updates.
struct SpaceChargeFollowOptions {
  int64_t every = 0;           // K; 0: off
  Lattice* lattice = nullptr;  // the lattice run_tracking tracks (the same object), changed in place
  double intensity = -1.0;     // real particles of the whole bunch; < 0: the elements' number_of_particles
  OpticsOptions optics;        // for the elements' beta and D (Twiss table)
  std::string label = "space_charge_update";  // names the option in error messages
  /// Called on the root process after each update (e.g. a line per update).
  std::function<void(const SpaceChargeUpdate&)> on_update;
};

struct TrackRunOptions {
  int64_t turns = 1;
  int threads = 0;  // CPU threads; 0: OpenMP's default
  FmaMode fma = FmaMode::Off;
  /// Bunch monitor (moments every `monitor_every` turns, profiles every `profile_every`).
  bool monitor = false;
  int64_t monitor_every = 1;
  int64_t profile_every = 0;
  /// Progress bar on stderr: "auto" (a terminal), "on", "off".
  std::string progress = "auto";
  /// Several MPI ranks: `particles` is already this rank's share of a bunch of `total_particles`
  /// (share_of order), made on the rank (sample_matched_bunch) or cut from a file. No split and no
  /// gather: the particles stay on their rank (write them with write_particle_shards).
  bool particles_are_share = false;
  size_t total_particles = 0;
  /// Instead of `particles` (which then receives the final particles): this rank's share of a matched
  /// bunch, made where it is tracked. The GPU backend samples it on the device (no host copy, no
  /// upload); other backends get it sampled on the host. Implies particles_are_share.
  const MatchedBunchShare* matched = nullptr;
  /// With `matched`: copy the final particles back into `particles` (an output file needs them);
  /// false lets the GPU leave them on the device (`particles` stays empty; counts and sums come
  /// from device reductions).
  bool keep_particles = true;
  /// Frozen space-charge sizes from the beam every K turns (off unless space_charge.every > 0). With
  /// `matched` the share is sampled on the host. Not with lattice variants, nor with collective
  /// elements on the GPU (its update would restart their multi-turn memory).
  SpaceChargeFollowOptions space_charge;
  /// Called on every rank with this rank's particles after every `on_turn_every` turns and after the last
  /// (`turn`: turns done), e.g. per-bunch moments of a train (fusetrack track --bunches-output). On the GPU
  /// each call downloads the particles.
  std::function<void(int64_t turn, const Particles& local)> on_turn;
  int64_t on_turn_every = 1;
};

/// What a tracking run did.
struct TrackRun {
  double seconds = 0.0;    // tracking time (between barriers)
  std::string backend;     // the backend's name
  int ranks = 1;           // MPI ranks that shared the particles
  bool root = true;        // this process holds the gathered particles and the monitor
  int64_t reductions = 0;  // profile all-reduces over the ranks, and their time on this rank
  double reduce_seconds = 0.0;
  std::vector<CollectiveSnapshot> collective;  // profiles and fields of the last turn
  std::vector<GridCollectiveReport> grid;      // space-charge grids: last grid, field, particles outside
  std::unique_ptr<BunchMonitor> monitor;       // when asked for (root only)
  size_t total = 0, alive = 0;                 // particles over all ranks, and those alive at the end
  /// Where the time went on this rank (GPU backend; 0 on the CPU): kernel compile or cache load
  /// and collective set-up, host->device copies, kernels (as `fusetrack bench` times them),
  /// device->host copies. seconds - (setup + upload + kernel + download) is the rest (waits at
  /// the barriers, profile all-reduces, callbacks).
  double setup_seconds = 0.0, upload_seconds = 0.0, kernel_seconds = 0.0, download_seconds = 0.0;
  /// With options.matched: making the share (on the device or the host; inside `seconds`), and the
  /// sums of the initial particles over all ranks (for the sample moments, set_sample_moments).
  double generate_seconds = 0.0;
  bool generated_on_device = false;  // the GPU made them in device memory (inside `seconds`)
  LongitudinalSums initial_sums;
  /// With options.space_charge: the elements that follow the beam (sequence indices, their optics) and
  /// every update (root only).
  std::vector<SpaceChargeBeamSizes::Element> space_charge_elements;
  std::vector<SpaceChargeUpdate> space_charge_updates;
};

/// Tracks `particles` in place for `options.turns` turns with `backend`. Several MPI ranks (ft::world())
/// each track a contiguous share and rank 0 gathers them back into `particles` (unless
/// options.particles_are_share: then each rank tracks the share it holds and keeps it); collective
/// profiles are summed over the ranks every turn. Throws InputError for bad monitor options.
TrackRun run_tracking(const Lattice& lattice, Backend& backend, Particles& particles, const TrackRunOptions& options);

// ---------------------------------------------------------------------------------------------
// Dynamic-aperture scan jobs

struct DaJobOptions {
  std::string lattice_file;      // ties checkpoints and part files to the lattice (fingerprint)
  std::string output;            // results directory ("" : no files, no checkpoints)
  int64_t checkpoint_every = 0;  // turns between checkpoints (0: 1000)
  std::string part;              // job arrays: "i/N" (option `part_label`), "" for the whole scan
  std::string part_label = "part";
  int64_t stop_after = 0;  // stop at the first checkpoint at or after this many turns (0: never)
  FmaMode fma = FmaMode::Off;
  int threads = 0;
  const std::atomic<bool>* stop = nullptr;             // set (e.g. by SIGINT) to stop after the current chunk
  std::function<void(const DaProgress&)> on_progress;  // on the process that reports (root)
};

enum class DaJobStatus {
  Finished,        // results summarized (and written when there is an output directory)
  StoppedAsAsked,  // stop_after reached: checkpoint written
  Interrupted,     // the stop flag was set: checkpoint written
  PartWritten,     // a job-array part finished and written
  NotRoot,         // an MPI rank other than 0 after the tracking: nothing more to do
};

/// One DA scan run, in stages so that a front end can report between them:
///   DaJob job(lattice, config, options);  [job.resume();]  job.run(backend);  job.summary() ...
/// The lattice's per-turn limits are set from the configuration.
class DaJob {
 public:
  /// Validates the configuration and the part, builds the initial conditions (optics with the
  /// CPU backend) and creates the output directory. Throws InputError naming the option.
  DaJob(Lattice& lattice, const DaConfig& config, const DaJobOptions& options);
  /// A study: the scan on every variant (make_da_study) in one run; the backend is given the
  /// variants (Backend::set_variants) when it runs. Results per variant and across them
  /// (study_summary, write_da_study_results).
  DaJob(LatticeVariants& variants, const DaConfig& config, const DaJobOptions& options);

  /// Continues from the checkpoint in the output directory (a job-array part: the same part of the same
  /// split; MPI ranks: any number, rank 0 reads it; else InputError).
  void resume();
  /// Tracks the scan (a job-array part: its share; MPI ranks: together), then (whole scans, on rank 0)
  /// summarizes, refines and writes the results (summary.json, summary.csv, da.npz), or writes the part files.
  DaJobStatus run(Backend& backend);

  const DaConfig& config() const { return m_scan.config; }
  const DaScan& scan() const { return m_scan; }
  const DaSummary& summary() const { return m_summary; }
  bool study() const { return m_variants != nullptr; }
  const DaStudySummary& study_summary() const { return m_study; }
  const DaProgress& progress() const { return m_progress; }
  /// MPI ranks: each rank's time in the backend in seconds, in rank order (after run); else empty.
  const std::vector<double>& rank_seconds() const { return m_rank_seconds; }
  /// MPI ranks: each rank's time in the exchanges between ranks (waits included), in rank order.
  const std::vector<double>& rank_exchange_seconds() const { return m_rank_exchange_seconds; }
  const std::string& checkpoint_file() const { return m_run.checkpoint_file; }
  const PartSpec& part() const { return m_part; }
  const Share& share() const { return m_share; }
  size_t total() const { return m_total; }
  bool split() const { return m_part.count > 1; }
  bool job_part() const { return m_job_part; }
  /// The process that reports and writes (rank 0, or every job-array part).
  bool root() const { return m_part.index == 0 || m_job_part; }

 private:
  void start(const std::vector<const Lattice*>& lattices, const std::vector<std::string>& names,
             const DaConfig& config);

  const Lattice& m_lattice;
  const LatticeVariants* m_variants = nullptr;  // a study
  DaStudySummary m_study;
  DaJobOptions m_options;
  PartSpec m_part;
  bool m_job_part = false;
  std::string m_fingerprint;
  DaScan m_scan;  // the scan (a job-array part: its share; MPI ranks: all of it, DaRunOptions::ranks)
  Share m_share;
  size_t m_total = 0;
  DaRunOptions m_run;
  DaProgress m_progress;
  std::vector<double> m_rank_seconds, m_rank_exchange_seconds;
  DaSummary m_summary;
};

// ---------------------------------------------------------------------------------------------
// CPU-GPU reproduction

struct ReproOptions {
  int64_t turns = 1000;
  FmaMode fma = FmaMode::Off;
  int threads = 0;
  std::string cache_dir;
};

/// One collective element's last-turn profile and field, CPU against GPU.
struct CollectiveComparison {
  std::string element_name;
  bool counts_identical = false;
  size_t field_equal = 0, field_size = 0;   // slices whose field is bitwise equal
  double max_difference = 0.0, peak = 0.0;  // [V]
};

struct ReproResult {
  std::string gpu_name;
  Particles cpu, gpu;  // final particles
  ParticleComparison comparison;
  std::vector<CollectiveComparison> collective;
  bool identical = false;  // particles, profiles and fields
  double cpu_seconds = 0.0;
  CudaRunStats gpu_stats;
  Divergence divergence;  // where the first differing particle diverges (when not identical)
};

/// Tracks `initial` on the CPU and on the GPU (which must be usable: DeviceError otherwise) and
/// compares the results bit for bit; when they differ, replays the first differing particle to
/// find the turn and element where they part.
ReproResult run_repro(const Lattice& lattice, const Particles& initial, const ReproOptions& options);

}  // namespace ft
