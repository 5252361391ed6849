// The GPU backend: one fused kernel per lattice (codegen.h), compiled by NVRTC (cached), loaded
// through the run-time-loaded driver. Particles stay on the device for all turns of a call;
// they come back only for callbacks (every K turns) and at the end.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/matched_bunch.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/tracker.h"

namespace ft {

/// A compiled form of the fused kernel: the dispatch, the register cap (0: none) and the particles per
/// thread (2 in the switch forms only: KernelSource::particles_per_thread).
struct KernelForm {
  Dispatch dispatch = Dispatch::Switch;
  int max_registers = 0;
  int particles_per_thread = 1;
};
/// "switch", "staged", "baked", with ", 64 registers" for a capped form and ", 2 particles per thread".
std::string kernel_form_name(const KernelForm& form);

/// The NVRTC source of the kernels that make matched bunches on the device (sampling, sums of the
/// sample moments, alive count; fma off whatever the run's mode): CudaBackend::track_matched_share.
KernelSource matched_bunch_sampler_source();

/// CudaBackendOptions::tile_sort_every = -1: the fixed-grid elements per turn from which a sort every turn is the default.
constexpr int kTileSortAutoElements = 32;

struct CudaBackendOptions {
  /// Auto: for runs large enough to amortise it, the form measured fastest on a sample of the run's
  /// particles (CudaBackend::measured_form); otherwise baked for short sequences, else switch.
  Dispatch dispatch = Dispatch::Auto;
  /// Register cap of the fused kernel for an explicit dispatch (0: none).
  int max_registers = 0;
  /// Auto dispatch measures the candidate forms even when the run is short (benchmarks).
  bool always_measure = false;
  std::string cache_dir;  // see KernelCompiler
  int device = 0;
  int threads_per_block = 0;  // 0: 128, or 32 when there are few particles (<= 128 by __launch_bounds__)
  /// The switch kernel's form for few particles (KernelSource::few_particles_form, the same bits): -1
  /// where there are fewer than 512 particles per multiprocessor, 0 never, 1 always. The environment
  /// setting FUSETRACK_FEW_PARTICLES_FORM (0 or 1) overrides -1, for the benchmarks.
  int few_particles_form = -1;
  /// Particles each thread of the switch kernels tracks: 1 or 2 (generate_fused_kernel; the same bits
  /// either way); 0: the environment setting FUSETRACK_PARTICLES_PER_THREAD (1 or 2), else
  /// kDefaultParticlesPerThread. The baked and staged forms track one.
  int particles_per_thread = 0;
  /// Largest number of particles resident on the device at once; 0: from free device memory.
  size_t max_resident_particles = 0;
  /// Collective lattices: time the segment kernels and the solves separately (one device
  /// synchronisation per turn; for benchmarks).
  bool time_phases = false;
  /// Lattices with a fixed-grid space-charge element (SpaceChargePIC): every this many turns the particles
  /// are ordered by grid cell on the device (a counting sort; the original order comes back before they
  /// leave it), and the deposit sums each block's charge in a window of the grid in shared memory before
  /// adding it to the grid. 0: never (every deposit an atomic add to the grid). The results are the same
  /// bits either way (integer charge). Needs memory for a second set of particle arrays (at most half of
  /// the free device memory); where there is none, no sort. -1 (auto): every turn where at least kTileSortAutoElements fixed-grid elements share the
  /// sort (a ring of PIC elements: 1.06x with 160 on an H200), else never (one element per sort loses:
  /// the measurements are in bench/space_charge/). The environment setting FUSETRACK_TILE_SORT_EVERY
  /// overrides it (benchmarks).
  int tile_sort_every = -1;
};

/// What the last track() call did, for benchmarks and reports.
struct CudaRunStats {
  double kernel_seconds = 0.0;   // sum of kernel times (device events)
  double compile_seconds = 0.0;  // NVRTC compile or cache lookup
  double setup_seconds = 0.0;    // collective lattices: solvers, device tables, FFT plans (compile excluded)
  double upload_seconds = 0.0, download_seconds = 0.0;  // particle copies host <-> device (wall time)
  double generate_seconds = 0.0;  // particles made on the device (track_matched_share), wall time
  bool kernel_from_cache = false;
  int launches = 0;
  size_t chunks = 0;             // particle chunks (more than 1 when the device memory was short)
  int registers_per_thread = 0;
  int local_bytes_per_thread = 0;  // spills / stack
  KernelForm form;                 // the form that ran
  /// Auto dispatch: what the measurement found, one entry per candidate form (empty when nothing
  /// was measured in this call).
  std::vector<std::pair<KernelForm, double>> measured_element_passes_per_s;
  // Collective lattices with CudaBackendOptions::time_phases:
  double segment_seconds = 0.0;  // segment kernels (kick, elements, deposit)
  double tile_sort_seconds = 0.0;  // the particles' tile sorts (CudaBackendOptions::tile_sort_every)
  int tile_sorts = 0;
  /// Their phases (host wall time, synchronised): counts and prefix sums, slots, the particles' move.
  double tile_sort_phase_seconds[3] = {0.0, 0.0, 0.0};
  double solve_seconds = 0.0;    // line density, convolution or FFT, field, multi-turn memory
  // Grid collective elements (space charge; always measured, wall time on the host): the integer
  // grid down, the sum over ranks, the Poisson solve on the host, the fields up.
  double grid_transfer_seconds = 0.0;  // grid download + field upload (and the adapted grid's moments)
  double grid_solve_seconds = 0.0;     // the Poisson solve: on the GPU (one rank), else GridCollectiveSolver::solve on the host
  uint64_t grid_bytes_transferred = 0;
  // Slice-moment elements (wakes, feedback; always measured, wall time on the host): the integers down and the
  // kicks up, the sums over ranks (waiting for the other ranks included), the host solve.
  double moments_transfer_seconds = 0.0;
  double moments_sum_seconds = 0.0;
  double moments_host_seconds = 0.0;
};

class CudaBackend : public Backend {
 public:
  /// Throws DeviceError (with the reason) when no GPU is usable.
  CudaBackend(const Lattice& lattice, CudaBackendOptions options);
  ~CudaBackend() override;
  std::string name() const override;
  void track(Particles& particles, const TrackOptions& options) override;

  /// One launch per element instead of one fused kernel: the per-element baseline of the
  /// benchmark (particles go through device memory after every element).
  void track_per_element(Particles& particles, const TrackOptions& options);

  /// A collective run of particles made on the device: the share of a matched bunch is sampled by a
  /// kernel from the same Philox stream as MatchedBunchShare::sample (compiled with fma off: bitwise
  /// the host's particles) straight into device memory, with no host copy and no upload. The final
  /// particles come back into `particles` only when `download_final` (else it stays empty, but
  /// callbacks still see the particles as track() gives them); `on_initial`, when set, sees the
  /// initial particles (copied back once, for a monitor's first record).
  struct MatchedShareRun {
    LongitudinalSums initial;  // of the particles made (device reduction, deterministic order)
    size_t alive = 0;          // alive at the end
  };
  MatchedShareRun track_matched_share(const MatchedBunchShare& share, Particles& particles, const TrackOptions& options,
                                      bool download_final,
                                      const std::function<void(const Particles&)>& on_initial = {});

  const CudaRunStats& last_stats() const { return m_stats; }
  /// Device memory bandwidth [bytes/s] of a device-to-device copy of `bytes` (counted read +
  /// write), the best of five: the bound for memory-bound kernels on this GPU.
  double copy_bandwidth(size_t bytes = size_t(1) << 30);
  std::vector<CollectiveSnapshot> collective_snapshots() const override;
  std::vector<GridCollectiveReport> grid_reports() const override;
  void parameters_changed() override;
  void set_variants(const std::vector<const Lattice*>& variants) override;
  const GpuInfo& gpu() const { return m_gpu; }

 struct Impl;

 private:
  void run(Particles& particles, const TrackOptions& options, bool per_element);
  void run_form(Particles& particles, const TrackOptions& options, bool per_element, KernelForm form);
  /// Auto dispatch: times every candidate form (switch, staged, baked when short enough) on a copy
  /// of a sample of the particles and returns the fastest; remembered per numerics mode and
  /// particle-count decade.
  KernelForm measured_form(const Particles& particles, const TrackOptions& options);
  /// Whether the candidates' probes cost at most a few percent of the run.
  bool worth_measuring(const Particles& particles, const TrackOptions& options) const;
  /// `source`: particles made on the device instead of uploaded from `particles` (see
  /// track_matched_share); null for track().
  struct DeviceSource;
  class CollectiveRun;  // the steps of run_collective (src/backends/cuda_collective_run.h)
  void run_collective(Particles& particles, const TrackOptions& options, DeviceSource* source = nullptr);
  std::unique_ptr<Impl> m_impl;
  const Lattice& m_lattice;
  CudaBackendOptions m_options;
  GpuInfo m_gpu;
  CudaRunStats m_stats;
};

}  // namespace ft
