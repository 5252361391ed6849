// Internal: one run of a lattice with collective elements on the GPU (CudaBackend::run_collective).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda_backend_impl.h"
#include "cuda_device_particles.h"
#include "cuda_tile_order.h"
#include "fusetrack/collective.h"
#include "fusetrack/cuda_backend.h"

namespace ft {

/// One track() (or track_matched_share()) call on a lattice with collective elements, in steps: the
/// solvers, device tables and kernels built or reused (kept in the backend's Impl across calls: the
/// multi-turn memory), the particles made on the device or uploaded, the turns (segment kernels with a
/// solve after each deposit), the particles and the last turn's profiles back. Every particle stays
/// resident on the device: the profiles are sums over the whole bunch every turn.
class CudaBackend::CollectiveRun {
 public:
  CollectiveRun(CudaBackend& backend, Particles& particles, const TrackOptions& options, DeviceSource* source);
  ~CollectiveRun();
  CollectiveRun(const CollectiveRun&) = delete;
  CollectiveRun& operator=(const CollectiveRun&) = delete;

  void run();

 private:
  struct SegmentArguments;

  // The steps of run(), in order.
  /// The context, the checks of the request (whole turns, every particle resident), the turn program.
  void start();
  /// The solvers, device tables and kernels: built when the numerics mode or the macroparticle count
  /// changed (or on the first call), else those of the previous call.
  void prepare_collective();
  void add_moments_element(size_t c, std::vector<SliceGrid>& grids);
  void add_grid_element(size_t c, std::vector<SliceGrid>& grids);
  void add_profile_element(size_t c, std::vector<SliceGrid>& grids);
  void compile_collective_kernels(const std::vector<SliceGrid>& grids);
  void load_collective_functions();
  void upload_switch_tables();
  void reset_snapshots();
  /// The particles on the device: made there (a matched-bunch share) or uploaded.
  void make_particles();
  /// The arguments every segment kernel takes.
  void set_segment_constants();
  void run_turns();
  /// The kernels' time, the final downloads, the alive count of particles made on the device, warnings.
  void finish();

  // The pieces of a turn.
  void launch(CUfunction f, unsigned blocks, unsigned threads, unsigned shared, void** args);
  /// The segment kernel `f`: the kick of collective element `kick_c` (when `kick`), its elements, the
  /// deposit for element `deposit_c` (when `deposit`).
  void run_segment(CUfunction f, size_t kick_c, size_t deposit_c, bool kick, bool deposit, int turn);
  /// A segment's arguments from its kick and deposit; the deposit's integers zeroed.
  SegmentArguments prepare_segment(size_t kick_c, size_t deposit_c, bool kick, bool deposit);
  unsigned segment_blocks(const SegmentArguments& a) const;
  void sort_tiles();
  void timed_solve(cuda::DeviceCollective& dc);
  void solve(cuda::DeviceCollective& dc);
  /// Profile elements (impedance): line density, convolution or FFT, the modes' step, the field.
  void profile_solve(cuda::DeviceCollective& dc);
  /// Slice-moment elements (wakes, feedback): the integers down (a few per slice), summed over ranks, the
  /// host solve (the CPU's code: the same kicks), the kick table up.
  void moments_solve(cuda::DeviceCollective& dc);
  /// Grid elements (space charge): the adapted extent's moments and the deposit on this turn's grid where
  /// the grid adapts, then the Poisson solve on the GPU (one rank) or on the host.
  void grid_solve(cuda::DeviceCollective& dc);
  void adapt_grid(cuda::DeviceCollective& dc);
  void make_gpu_poisson(cuda::DeviceCollective& dc);
  void gpu_grid_solve(cuda::DeviceCollective& dc, std::chrono::steady_clock::time_point t_transfer);
  void host_grid_solve(cuda::DeviceCollective& dc, std::chrono::steady_clock::time_point t_transfer);
  /// CudaBackendOptions::time_phases: a phase's device time into `seconds` (synchronising at its end).
  void phase_start();
  void phase_end(const char* what, double& seconds);

  // Back to the host.
  /// Particles made on the device have a host copy only once one is asked for (ids first + i).
  Particles& host_particles();
  void download_particles();
  /// The last turn's profiles and fields (profile elements; the others keep their state on the host).
  void download_snapshots();

  size_t collective_count() const { return m_program.collective.size(); }

  Impl& m_impl;
  const cuda::Driver& m_d;
  const Lattice& m_lattice;
  const CudaBackendOptions& m_backend_options;
  const GpuInfo& m_gpu;
  CudaRunStats& m_stats;
  Particles& m_particles;
  const TrackOptions& m_track;
  DeviceSource* m_source;

  std::chrono::steady_clock::time_point m_setup_start;
  TurnProgram m_program;
  size_t m_n = 0;  // particles
  size_t m_macroparticles = 0;
  std::optional<cuda::DeviceParticleBuffers> m_buffers;
  std::optional<cuda::TileOrder> m_tiles;
  // Arguments of every segment kernel.
  GlobalLimits m_limits{};
  double m_beta0 = 0.0;
  int m_n_particles = 0, m_n_elements = 0;
  CUdeviceptr m_steps = 0, m_params = 0;
  bool m_any_grid = false, m_any_moments = false;
  // The first turn's kernels load every coordinate (the checks of the coordinates no kernel writes hold for
  // the later turns: collective_turn_traffic in codegen.h).
  int m_full_load = 1;
  // The kernels do not store rpp and rvv when they are derived from delta and ptau (codegen.h): a kernel
  // with the segments' numerics writes them before a download that follows segment kernels (particles made
  // on the device keep the sampler's own rpp and rvv until they are tracked).
  bool m_energy_stale = false;
  // Benchmark knobs (environment): FUSETRACK_FULL_LOADS=1 loads every coordinate every turn,
  // FUSETRACK_BLOCKS_PER_SM the resident blocks per multiprocessor, FUSETRACK_PREPARE_AHEAD=0 leaves the
  // host work of the next solves to the solves.
  bool m_always_full = false;
  unsigned m_blocks_per_sm_override = 0;
  bool m_prepare_ahead = true;
  // The host solve of grid elements: the integer grid down, the fields up.
  std::vector<uint64_t> m_host_grid;
  std::vector<double> m_host_field;
  // The whole run's start and end, and a phase's (time_phases).
  CUevent m_events[3] = {nullptr, nullptr, nullptr};
};

}  // namespace ft
