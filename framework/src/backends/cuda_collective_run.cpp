// One run of a lattice with collective elements on the GPU (cuda_collective_run.h).
#include "cuda_collective_run.h"

#include <cufft.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "cuda_matched_bunch.h"
#include "fusetrack/device/profile_solver_kernels.h"
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"

namespace ft {

using cuda::check;
using cuda::CollectiveKernels;
using cuda::DeviceCollective;
using cuda::seconds_since;

namespace {

/// Threads per block of the segment kernels and of the grid elements' moment pass and deposit.
constexpr unsigned kThreads = 256;
constexpr unsigned kFftThreads = 256;

template <class T>
void upload(const cuda::Driver& d, CUdeviceptr dst, const std::vector<T>& v, size_t first, size_t n) {
  check(d.memcpy_htod(dst, v.data() + first, n * sizeof(T)), "cuMemcpyHtoD(particles)");
}
template <class T>
void download(const cuda::Driver& d, std::vector<T>& v, CUdeviceptr src, size_t first, size_t n) {
  check(d.memcpy_dtoh(v.data() + first, src, n * sizeof(T)), "cuMemcpyDtoH(particles)");
}

void check_cufft(cufftResult rc, const char* what) {
  if (rc != CUFFT_SUCCESS) throw DeviceError(fmt::format("{} failed (cuFFT error {})", what, static_cast<int>(rc)));
}

template <class T>
CUdeviceptr device_copy(const cuda::Driver& d, const std::vector<T>& v, const char* what) {
  CUdeviceptr p = 0;
  cuda::check_alloc(d, &p, std::max<size_t>(v.size() * sizeof(T), 8), what);
  if (!v.empty()) check(d.memcpy_htod(p, v.data(), v.size() * sizeof(T)), what);
  return p;
}

CUdeviceptr device_zeros(const cuda::Driver& d, size_t bytes, const char* what) {
  CUdeviceptr p = 0;
  cuda::check_alloc(d, &p, std::max<size_t>(bytes, 8), what);
  check(d.memset_d8(p, 0, std::max<size_t>(bytes, 8)), what);
  return p;
}

unsigned blocks_for(size_t n, unsigned threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

/// The frequency method's solve with fusetrack's FFT (fma off): the forward transform from the integer
/// profile (the first pass writes the line density), ending in the product with the impedance; the
/// modes' step; the inverse transform, ending in the field (fusetrack/device/profile_solver_kernels.h).
template <class Launch>
void fft_solve(DeviceCollective& dc, const CollectiveKernels& kk, Launch& launch) {
  const CollectiveSolver& sv = *dc.solver;
  ProfileSolveArgs args{};
  args.counts = reinterpret_cast<const unsigned long long*>(dc.counts);
  args.n = sv.n_slices();
  args.inv_total = sv.inv_total();
  args.lambda = reinterpret_cast<double*>(dc.lambda);
  args.spectrum = reinterpret_cast<const double*>(dc.spectrum);
  args.y = reinterpret_cast<double*>(dc.fft_y);
  args.scale = sv.field_scale();
  args.mode_field = reinterpret_cast<const double*>(dc.mode_field);
  args.amplitude = reinterpret_cast<const double*>(dc.amplitude);
  args.n_modes = sv.mode_count();
  args.field = reinterpret_cast<double*>(dc.field);
  const int n_fft = sv.fft_length(), log2n = sv.fft_log2();
  auto transform = [&](CUdeviceptr data, int source, int last_target) {
    for (int done = 0; done < log2n;) {
      const FftStageGroup group = fft_stage_group(log2n, done);
      done += group.stages;
      FftPass pass{n_fft,
                   log2n,
                   group.first_log2,
                   group.stages,
                   group.sets_per_block,
                   done == group.stages ? source : 0,
                   done == log2n ? last_target : 0};
      CUdeviceptr twiddles = dc.twiddles;
      void* kernel_args[] = {&data, &twiddles, &pass, &args};
      const unsigned values = (1u << group.stages) * static_cast<unsigned>(group.sets_per_block);
      launch(kk.fft_pass, static_cast<unsigned>(n_fft) / values, kFftThreads, values * 16u, kernel_args);
    }
  };
  transform(dc.fft_x, 1, 1);
  if (args.n_modes > 0) {
    int n = args.n, n_modes = args.n_modes;
    CUdeviceptr lambda = dc.lambda, deposit = dc.mode_deposit, wrap = dc.mode_wrap, turn = dc.mode_turn,
                memory = dc.memory, amplitude = dc.amplitude;
    void* kernel_args[] = {&lambda, &n, &deposit, &wrap, &turn, &memory, &amplitude};
    launch(kk.mode_update, static_cast<unsigned>(n_modes), static_cast<unsigned>(kModeChunks), 0, kernel_args);
  }
  transform(dc.fft_y, 0, 2);
}

}  // namespace

void CudaBackend::run_collective(Particles& particles, const TrackOptions& options, DeviceSource* source) {
  CollectiveRun(*this, particles, options, source).run();
}

/// The arguments of a segment kernel that depend on its kick and its deposit (kernel_tables' extra
/// arguments, codegen.h).
struct CudaBackend::CollectiveRun::SegmentArguments {
  CUdeviceptr kick_field = 0, profile = 0;
  // 1: the deposit's whole table in shared memory; 2: a window of it (slice moments of a train).
  int in_shared = 0;
  unsigned shared = 0;  // bytes of dynamic shared memory
  SliceMomentScales deposit_scales{};
  // Grid elements: the kick's field and grid, and the deposit (fixed grid) or the first moment pass
  // (adapted grid).
  CUdeviceptr kick_ex = 0, kick_ey = 0, kick_ez = 0, grid_acc = 0, extent_acc = 0;
  long long kick_stride = 1;
  ChargeGridSpec kick_grid{}, deposit_spec{};
  ExtentScales extent{};
  long long outside_slot = 0;
  int grid_mode = 0, grid_window = 0;
};

CudaBackend::CollectiveRun::CollectiveRun(CudaBackend& backend, Particles& particles, const TrackOptions& options,
                                          DeviceSource* source)
    : m_impl(*backend.m_impl),
      m_d(*backend.m_impl->d),
      m_lattice(backend.m_lattice),
      m_backend_options(backend.m_options),
      m_gpu(backend.m_gpu),
      m_stats(backend.m_stats),
      m_particles(particles),
      m_track(options),
      m_source(source) {}

CudaBackend::CollectiveRun::~CollectiveRun() {
  for (CUevent e : m_events)
    if (e) m_d.event_destroy(e);
}

void CudaBackend::CollectiveRun::run() {
  start();
  prepare_collective();
  const CollectiveKernels& kk = m_impl.collective_kernels;
  m_d.func_get_attribute(&m_stats.registers_per_thread, CU_FUNC_ATTRIBUTE_NUM_REGS, kk.segments[0]);
  m_d.func_get_attribute(&m_stats.local_bytes_per_thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, kk.segments[0]);
  // Particles on the device for the whole call.
  m_stats.setup_seconds = seconds_since(m_setup_start) - m_stats.compile_seconds;
  m_buffers.emplace(m_d, *m_impl.staging, m_n, m_stats);
  m_tiles.emplace(m_d, m_impl.collective, *m_buffers, m_n, m_backend_options.tile_sort_every);
  make_particles();
  set_segment_constants();
  run_turns();
  finish();
}

void CudaBackend::CollectiveRun::start() {
  check(m_d.ctx_set_current(m_impl.context), "cuCtxSetCurrent");
  m_stats = CudaRunStats{};
  m_setup_start = std::chrono::steady_clock::now();
  const size_t n_elements = m_lattice.sequence().size();
  if (m_track.element_begin != 0 || std::min(m_track.element_end, n_elements) != n_elements)
    throw Error("a lattice with collective elements is tracked whole turns at a time (no element ranges)");
  m_program = TurnProgram::build(m_lattice);
  m_n = m_source ? m_source->share.count() : m_particles.size();
  m_macroparticles = m_track.macroparticles > 0 ? m_track.macroparticles : m_n;
  // Every particle must be resident: the profile is a sum over the whole bunch every turn.
  size_t free_bytes = 0, total_bytes = 0;
  check(m_d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  plan_gpu_residency(m_n, cuda::kBytesPerParticle, free_bytes, 0, true, "a collective run");
}

// ---------------------------------------------------------------------------------------------
// The solvers, device tables and kernels.

void CudaBackend::CollectiveRun::prepare_collective() {
  if (m_impl.collective_ready && m_impl.collective_fma == m_track.fma &&
      m_impl.collective_macroparticles == m_macroparticles)
    return;
  m_impl.free_collective();
  std::vector<SliceGrid> grids;
  for (size_t c = 0; c < collective_count(); ++c) {
    const ElementType& type = *m_lattice.element(m_program.collective[c]).type;
    if (type.is_moments_collective())
      add_moments_element(c, grids);
    else if (type.is_grid_collective())
      add_grid_element(c, grids);
    else
      add_profile_element(c, grids);
  }
  compile_collective_kernels(grids);
  upload_switch_tables();
  reset_snapshots();
  m_impl.collective_fma = m_track.fma;
  m_impl.collective_macroparticles = m_macroparticles;
  m_impl.collective_ready = true;
}

void CudaBackend::CollectiveRun::add_moments_element(size_t c, std::vector<SliceGrid>& grids) {
  DeviceCollective dc;
  dc.moments = std::make_unique<MomentsCollectiveSolver>(m_lattice, m_program.collective[c], m_macroparticles);
  const size_t ns = static_cast<size_t>(dc.moments->n_slices());
  dc.deposit_words = ns * kSliceCentroidAccumulators + 1;
  dc.counts = device_zeros(m_d, dc.deposit_words * sizeof(uint64_t), "cuMemAlloc(slice moments)");
  dc.field = device_zeros(m_d, ns * FT_SLICE_KICK_VALUES * sizeof(double), "cuMemAlloc(slice kicks)");
  dc.profile_in_shared = dc.deposit_words * sizeof(uint64_t) <= 96 * 1024;
  // FUSETRACK_MOMENT_WINDOW=0: no window, every contribution to global memory (the benchmark's baseline).
  const char* window_env = std::getenv("FUSETRACK_MOMENT_WINDOW");
  if (!dc.profile_in_shared && !(window_env && std::string(window_env) == "0"))
    dc.window_words = std::min(ns, static_cast<size_t>(kMomentWindowSlices)) * kSliceCentroidAccumulators + 1;
  grids.push_back(dc.moments->slice_grid());
  m_impl.collective.push_back(std::move(dc));
  DeviceCollective& kept = m_impl.collective.back();  // (its buffers freed by free_collective from here on)
  void* host = nullptr;
  check(m_d.mem_alloc_host(&host, kept.deposit_words * sizeof(uint64_t)), "cuMemAllocHost(slice moments)");
  kept.host_moments = static_cast<uint64_t*>(host);
  void* kicks = const_cast<double*>(kept.moments->kicks().data());  // (the table is never reallocated)
  if (m_d.mem_host_register(kicks, kept.moments->kicks().size() * sizeof(double), 0) == CUDA_SUCCESS)
    kept.registered_kicks = kicks;
}

void CudaBackend::CollectiveRun::add_grid_element(size_t c, std::vector<SliceGrid>& grids) {
  DeviceCollective dc;
  dc.grid = std::make_unique<GridCollectiveSolver>(m_lattice, m_program.collective[c], m_track.fma, m_macroparticles);
  const size_t nodes = dc.grid->node_count();
  dc.grid_acc = device_zeros(m_d, (nodes + 1) * sizeof(uint64_t), "cuMemAlloc(charge grid)");
  dc.extent_acc = device_zeros(m_d, (kExtentAccumulators + 1) * sizeof(uint64_t), "cuMemAlloc(grid extent)");
  dc.field_stride = dc.grid->model().solver == FT_GRID_3D ? 3 : 2;
  dc.grid_field =
      device_zeros(m_d, static_cast<size_t>(dc.field_stride) * nodes * sizeof(double), "cuMemAlloc(grid field)");
  dc.ex = dc.grid_field;
  dc.ey = dc.grid_field + sizeof(double);
  if (dc.field_stride == 3) dc.ez = dc.grid_field + 2 * sizeof(double);
  grids.push_back(SliceGrid{});
  m_impl.collective.push_back(std::move(dc));
}

void CudaBackend::CollectiveRun::add_profile_element(size_t c, std::vector<SliceGrid>& grids) {
  DeviceCollective dc;
  dc.solver = std::make_unique<CollectiveSolver>(m_lattice, m_program.collective[c], m_track.fma, m_macroparticles);
  const CollectiveSolver& sv = *dc.solver;
  const size_t ns = static_cast<size_t>(sv.n_slices());
  grids.push_back(sv.slice_grid());
  dc.counts = device_zeros(m_d, ns * sizeof(uint64_t), "cuMemAlloc(profile)");
  dc.field = device_zeros(m_d, ns * sizeof(double), "cuMemAlloc(field)");
  dc.lambda = device_zeros(m_d, ns * sizeof(double), "cuMemAlloc(line density)");
  dc.conv = device_zeros(m_d, ns * sizeof(double), "cuMemAlloc(convolution)");
  if (sv.method() == FT_SOLVE_TIME_DOMAIN) {
    dc.wake_kernel = device_copy(m_d, sv.wake_kernel(), "cuMemAlloc(wake)");
  } else if (m_track.fma == FmaMode::On) {
    // cuFFT: D2Z of the zero-padded line density, times Z, Z2D.
    const int N = sv.fft_length();
    dc.use_cufft = true;
    std::vector<double> half(sv.spectrum().begin(), sv.spectrum().begin() + 2 * (N / 2 + 1));
    dc.half_spectrum = device_copy(m_d, half, "cuMemAlloc(spectrum)");
    m_d.mem_free(dc.lambda);
    dc.lambda = device_zeros(m_d, static_cast<size_t>(N) * sizeof(double), "cuMemAlloc(line density)");
    dc.fft_y = device_zeros(m_d, static_cast<size_t>(N / 2 + 1) * 2 * sizeof(double), "cuMemAlloc(FFT spectrum)");
    dc.fft_real_out = device_zeros(m_d, static_cast<size_t>(N) * sizeof(double), "cuMemAlloc(FFT output)");
    check_cufft(cufftPlan1d(&dc.plan_forward, N, CUFFT_D2Z, 1), "cufftPlan1d(D2Z)");
    check_cufft(cufftPlan1d(&dc.plan_inverse, N, CUFFT_Z2D, 1), "cufftPlan1d(Z2D)");
  } else {
    const int N = sv.fft_length();
    dc.spectrum = device_copy(m_d, sv.spectrum(), "cuMemAlloc(spectrum)");
    dc.twiddles = device_copy(m_d, sv.twiddles(), "cuMemAlloc(twiddles)");
    dc.fft_x = device_zeros(m_d, static_cast<size_t>(N) * 2 * sizeof(double), "cuMemAlloc(FFT)");
    dc.fft_y = device_zeros(m_d, static_cast<size_t>(N) * 2 * sizeof(double), "cuMemAlloc(FFT)");
  }
  if (sv.mode_count() > 0) {
    dc.mode_field = device_copy(m_d, sv.mode_field_table(), "cuMemAlloc(modes)");
    dc.mode_deposit = device_copy(m_d, sv.mode_deposit_table(), "cuMemAlloc(modes)");
    dc.mode_turn = device_copy(m_d, sv.mode_turn_factor(), "cuMemAlloc(modes)");
    dc.mode_wrap = device_copy(m_d, sv.mode_wrap_factor(), "cuMemAlloc(modes)");
    dc.memory = device_zeros(m_d, static_cast<size_t>(sv.mode_count()) * 2 * sizeof(double), "cuMemAlloc(memory)");
    dc.amplitude =
        device_zeros(m_d, static_cast<size_t>(sv.mode_count()) * 2 * sizeof(double), "cuMemAlloc(amplitude)");
  }
  // A block-local profile in shared memory while it leaves room for two blocks per SM.
  dc.profile_in_shared = ns * sizeof(uint64_t) <= 96 * 1024;
  dc.deposit_words = ns;
  m_impl.collective.push_back(std::move(dc));
  // The profile's round trip through the host for the sum over ranks, page-locked.
  void* host = nullptr;
  check(m_d.mem_alloc_host(&host, ns * sizeof(uint64_t)), "cuMemAllocHost(profile)");
  m_impl.collective.back().host_moments = static_cast<uint64_t*>(host);
}

void CudaBackend::CollectiveRun::compile_collective_kernels(const std::vector<SliceGrid>& grids) {
  CollectiveKernels& kk = m_impl.collective_kernels;
  const Dispatch dispatch = choose_dispatch(m_lattice, m_backend_options.dispatch);
  kk.source = generate_collective_kernels(m_lattice, m_track.fma, dispatch, grids);
  kk.derived_energy = collective_energy_is_derived(m_lattice);  // as the source was generated
  if (const char* dump = std::getenv("FUSETRACK_DUMP_SOURCE"); dump && *dump)
    dump_kernel_source(kk.source,
                       fmt::format("{}/collective_{}_{}", dump, dispatch == Dispatch::Baked ? "baked" : "switch",
                                   m_track.fma == FmaMode::On ? "fma_on" : "fma_off"));
  KernelCompiler compiler(m_backend_options.cache_dir);
  const CompiledKernel compiled = compiler.compile(kk.source, m_gpu.arch);
  m_stats.compile_seconds += compiled.seconds;
  m_stats.kernel_from_cache = compiled.from_cache;
  check(m_d.module_load_data(&kk.module, compiled.cubin.data()), "cuModuleLoadData");
  load_collective_functions();
}

void CudaBackend::CollectiveRun::load_collective_functions() {
  CollectiveKernels& kk = m_impl.collective_kernels;
  const size_t K = collective_count();
  for (size_t k = 0; k <= K; ++k) {
    CUfunction f = nullptr;
    check(m_d.module_get_function(&f, kk.module, segment_kernel_name(k).c_str()), "cuModuleGetFunction");
    kk.segments.push_back(f);
    if (k < K && m_impl.collective[k].profile_in_shared) {
      const int bytes = static_cast<int>(m_impl.collective[k].deposit_words * sizeof(uint64_t));
      check(m_d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
            "cuFuncSetAttribute(shared profile)");
    }
  }
  check(m_d.module_get_function(&kk.wrap, kk.module, kWrapKernelName), "cuModuleGetFunction");
  check(m_d.module_get_function(&kk.derive_energy, kk.module, kDeriveEnergyKernelName), "cuModuleGetFunction");
  if (m_impl.collective[0].profile_in_shared) {
    const int bytes = static_cast<int>(m_impl.collective[0].deposit_words * sizeof(uint64_t));
    check(m_d.func_set_attribute(kk.wrap, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
          "cuFuncSetAttribute(shared profile)");
  }
  const std::pair<CUfunction*, const char*> solver_kernels[] = {
      {&kk.line_density, "fusetrack_line_density"}, {&kk.convolve, "fusetrack_convolve"},
      {&kk.fft_pass, "fusetrack_fft_pass"},         {&kk.half_spectrum_product, "fusetrack_half_spectrum_product"},
      {&kk.finish_field, "fusetrack_finish_field"}, {&kk.mode_update, "fusetrack_mode_update"}};
  for (const auto& [fn, name] : solver_kernels)
    check(m_d.module_get_function(fn, kk.module, name), "cuModuleGetFunction");
  bool any_grid = false;
  for (const DeviceCollective& c : m_impl.collective) any_grid |= c.grid != nullptr;
  if (any_grid) {
    const std::pair<CUfunction*, const char*> grid_kernels[] = {
        {&kk.grid_extent, "fusetrack_grid_extent"},       {&kk.grid_deposit, "fusetrack_grid_deposit"},
        {&kk.grid_density, "fusetrack_grid_density"},     {&kk.grid_field_finish, "fusetrack_grid_field_finish"},
        {&kk.tile_keys, "fusetrack_tile_keys"},           {&kk.tile_scan_blocks, "fusetrack_tile_scan_blocks"},
        {&kk.tile_scan_sums, "fusetrack_tile_scan_sums"}, {&kk.tile_scan_add, "fusetrack_tile_scan_add"},
        {&kk.tile_slots, "fusetrack_tile_slots"},         {&kk.tile_gather, "fusetrack_tile_gather"},
        {&kk.tile_restore, "fusetrack_tile_restore"}};
    for (const auto& [fn, name] : grid_kernels)
      check(m_d.module_get_function(fn, kk.module, name), "cuModuleGetFunction");
  }
}

/// The switch tables, when that dispatch is used.
void CudaBackend::CollectiveRun::upload_switch_tables() {
  const CollectiveKernels& kk = m_impl.collective_kernels;
  if (kk.source.dispatch == Dispatch::Switch && !m_impl.switch_steps) {
    const KernelTables tables = kernel_tables(m_lattice, kk.source);
    m_impl.switch_steps = device_copy(m_d, std::vector<KernelStep>(tables.steps), "cuMemAlloc(steps)");
    m_impl.switch_step_entries = tables.steps.size();
    if (!m_impl.switch_params) m_impl.switch_params = device_copy(m_d, tables.params, "cuMemAlloc(parameters)");
  }
}

void CudaBackend::CollectiveRun::reset_snapshots() {
  m_impl.snapshots.assign(collective_count(), CollectiveSnapshot{});
  for (size_t c = 0; c < collective_count(); ++c) {
    CollectiveSnapshot& snap = m_impl.snapshots[c];
    snap.sequence_index = m_program.collective[c];
    if (!m_impl.collective[c].solver) continue;  // a grid element (grid_reports)
    snap.element_name = m_impl.collective[c].solver->element_name();
    snap.grid = m_impl.collective[c].solver->grid();
    snap.counts.assign(static_cast<size_t>(snap.grid.n_slices), 0);
    snap.field.assign(static_cast<size_t>(snap.grid.n_slices), 0.0);
  }
}

// ---------------------------------------------------------------------------------------------
// The particles.

void CudaBackend::CollectiveRun::make_particles() {
  if (m_source) {
    m_source->result.initial = cuda::make_particles_on_device(m_impl, m_backend_options.cache_dir, m_gpu.arch,
                                                              m_source->share, m_buffers->arrays(), m_stats);
    if (m_source->on_initial && m_n > 0) {
      download_particles();
      m_source->on_initial(m_particles);
    }
  } else if (m_n > 0) {
    m_buffers->upload(m_particles, 0, m_n);
  }
}

Particles& CudaBackend::CollectiveRun::host_particles() {
  if (m_source && m_particles.size() != m_n) m_particles = cuda::host_arrays_for(m_source->share);
  return m_particles;
}

void CudaBackend::CollectiveRun::download_particles() {
  const CollectiveKernels& kk = m_impl.collective_kernels;
  if (kk.derived_energy && m_energy_stale && m_n > 0) {
    m_energy_stale = false;
    int count = static_cast<int>(m_n);
    double b0 = m_source ? m_source->share.beta0() : m_particles.beta0;
    void* args[] = {&m_buffers->arrays(), &count, &b0};
    const unsigned blocks = std::min(blocks_for(m_n, 256), static_cast<unsigned>(m_gpu.multiprocessors) * 8u);
    check(m_d.launch_kernel(kk.derive_energy, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
  }
  m_tiles->restore(kk, *m_buffers, m_gpu.multiprocessors);
  m_buffers->download(host_particles(), 0, m_n);
}

void CudaBackend::CollectiveRun::download_snapshots() {
  for (size_t c = 0; c < collective_count(); ++c) {
    if (!m_impl.collective[c].solver) continue;  // grid elements keep their state on the host
    download(m_d, m_impl.snapshots[c].counts, m_impl.collective[c].counts, 0, m_impl.snapshots[c].counts.size());
    download(m_d, m_impl.snapshots[c].field, m_impl.collective[c].field, 0, m_impl.snapshots[c].field.size());
  }
}

// ---------------------------------------------------------------------------------------------
// The turns.

void CudaBackend::CollectiveRun::set_segment_constants() {
  m_limits = m_lattice.limits();
  m_beta0 = m_source ? m_source->share.beta0() : m_particles.beta0;
  m_n_particles = static_cast<int>(m_n);
  m_n_elements = static_cast<int>(m_lattice.sequence().size());
  m_steps = m_impl.switch_steps;
  m_params = m_impl.switch_params;
  for (const DeviceCollective& c : m_impl.collective) {
    m_any_grid |= c.grid != nullptr;
    m_any_moments |= c.moments != nullptr;
  }
}

void CudaBackend::CollectiveRun::launch(CUfunction f, unsigned blocks, unsigned threads, unsigned shared, void** args) {
  check(m_d.launch_kernel(f, blocks, 1, 1, threads, 1, 1, shared, nullptr, args, nullptr), "cuLaunchKernel");
  ++m_stats.launches;
}

void CudaBackend::CollectiveRun::run_turns() {
  for (CUevent& e : m_events) check(m_d.event_create(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  check(m_d.event_record(m_events[0], nullptr), "cuEventRecord");
  const int64_t every = m_track.callback_every > 0 ? m_track.callback_every : m_track.turns;
  // Launch plan per turn: segment kernels 0..K with a solve after each deposit. When the turn is
  // followed by another without a callback in between, its last segment runs fused with the
  // next turn's first (the wrap kernel), which also deposits the next turn's first profile.
  bool head_done = false;  // segment 0 of this turn already ran inside the previous wrap kernel
  m_always_full = std::getenv("FUSETRACK_FULL_LOADS") != nullptr;
  m_blocks_per_sm_override = [] {
    const char* v = std::getenv("FUSETRACK_BLOCKS_PER_SM");
    return v ? static_cast<unsigned>(std::max(0, std::atoi(v))) : 0u;
  }();
  m_full_load = 1;
  m_prepare_ahead = [] {
    const char* v = std::getenv("FUSETRACK_PREPARE_AHEAD");
    return !(v && std::string(v) == "0");
  }();
  const CollectiveKernels& kk = m_impl.collective_kernels;
  const size_t K = collective_count();
  for (int64_t done = 0; done < m_track.turns && m_n > 0;) {
    const int turn = static_cast<int>(m_track.first_turn + done);
    if (m_tiles->due(done)) sort_tiles();
    m_full_load = done == 0 || m_always_full ? 1 : 0;
    const bool callback_after = m_track.callback && ((done + 1) % every == 0 || done + 1 == m_track.turns);
    const bool fuse_tail = done + 1 < m_track.turns && !callback_after;
    for (size_t k = 0; k <= K; ++k) {
      if (k == 0 && head_done) {
        timed_solve(m_impl.collective[0]);  // its profile came from the wrap kernel
        continue;
      }
      if (k == K && fuse_tail) {
        run_segment(kk.wrap, K - 1, 0, true, true, turn);
        break;
      }
      run_segment(kk.segments[k], k > 0 ? k - 1 : 0, k, k > 0, k < K, turn);
      if (k < K) timed_solve(m_impl.collective[k]);
    }
    head_done = fuse_tail;
    ++done;
    if (callback_after) {
      download_particles();
      download_snapshots();
      if (!m_track.callback(done, m_particles)) break;
    }
  }
}

void CudaBackend::CollectiveRun::sort_tiles() {
  phase_start();
  m_tiles->sort(m_impl.collective_kernels, *m_buffers, m_gpu.multiprocessors,
                m_backend_options.time_phases ? m_stats.tile_sort_phase_seconds : nullptr);
  ++m_stats.tile_sorts;
  phase_end("tile sort", m_stats.tile_sort_seconds);
}

void CudaBackend::CollectiveRun::phase_start() {
  if (m_backend_options.time_phases) check(m_d.event_record(m_events[1], nullptr), "cuEventRecord");
}

void CudaBackend::CollectiveRun::phase_end(const char* what, double& seconds) {
  if (!m_backend_options.time_phases) return;
  check(m_d.event_record(m_events[2], nullptr), "cuEventRecord");
  check(m_d.event_synchronize(m_events[2]), what);
  float ms = 0;
  m_d.event_elapsed_time(&ms, m_events[1], m_events[2]);
  seconds += ms * 1e-3;
}

CudaBackend::CollectiveRun::SegmentArguments CudaBackend::CollectiveRun::prepare_segment(size_t kick_c,
                                                                                         size_t deposit_c, bool kick,
                                                                                         bool deposit) {
  SegmentArguments a;
  a.kick_field = kick ? m_impl.collective[kick_c].field : 0;
  a.profile = deposit ? m_impl.collective[deposit_c].counts : 0;
  a.in_shared = !deposit                                         ? 0
                : m_impl.collective[deposit_c].profile_in_shared ? 1
                : m_impl.collective[deposit_c].window_words > 0  ? 2
                                                                 : 0;
  a.shared = static_cast<unsigned>(a.in_shared == 1   ? m_impl.collective[deposit_c].deposit_words
                                   : a.in_shared == 2 ? m_impl.collective[deposit_c].window_words
                                                      : 0) *
             8u;
  if (deposit && (m_impl.collective[deposit_c].solver || m_impl.collective[deposit_c].moments))
    check(m_d.memset_d8(a.profile, 0, m_impl.collective[deposit_c].deposit_words * sizeof(uint64_t)),
          "cuMemset(profile)");
  if (deposit && m_impl.collective[deposit_c].moments)
    a.deposit_scales = m_impl.collective[deposit_c].moments->reducer().scales();
  if (kick && m_impl.collective[kick_c].grid) {
    const DeviceCollective& kc = m_impl.collective[kick_c];
    a.kick_ex = kc.ex, a.kick_ey = kc.ey, a.kick_ez = kc.ez, a.kick_stride = kc.field_stride;
    a.kick_grid = kc.grid->spec();
  }
  if (deposit && m_impl.collective[deposit_c].grid) {
    DeviceCollective& dc = m_impl.collective[deposit_c];
    if (dc.grid->adaptive()) {
      a.grid_mode = 2;
      a.extent = dc.grid->extent_scales();
      a.extent_acc = dc.extent_acc;
      check(m_d.memset_d8(a.extent_acc, 0, (kExtentAccumulators + 1) * sizeof(uint64_t)), "cuMemset(grid extent)");
    } else {
      a.grid_mode = 1;
      a.grid_window = m_tiles->window_nodes();
      a.deposit_spec = dc.grid->spec();
      a.grid_acc = dc.grid_acc;
      a.outside_slot = static_cast<long long>(dc.grid->node_count());
      check(m_d.memset_d8(a.grid_acc, 0, (dc.grid->node_count() + 1) * sizeof(uint64_t)), "cuMemset(charge grid)");
    }
  }
  // A windowed grid deposit (particles ordered by tile): the window in shared memory.
  if (a.grid_window > 0) a.shared = static_cast<unsigned>(2 * a.grid_window) * 8u;
  return a;
}

/// Resident blocks per multiprocessor: 8 of 256 threads, fewer when the block's profile in shared memory
/// would not leave room for 8 (about 200 KiB of shared memory per SM on sm_90); FUSETRACK_BLOCKS_PER_SM
/// overrides it (benchmarks of the occupancy). A windowed grid deposit: a chunk of about TileOrder::kChunk
/// particles per block.
unsigned CudaBackend::CollectiveRun::segment_blocks(const SegmentArguments& a) const {
  const bool grid_windowed = a.grid_window > 0;
  const unsigned per_sm =
      m_blocks_per_sm_override > 0
          ? m_blocks_per_sm_override
          : (a.in_shared || grid_windowed ? std::clamp(200u * 1024u / std::max(a.shared, 1u), 1u, 8u) : 8u);
  unsigned blocks =
      std::max(1u, std::min(blocks_for(m_n, kThreads), static_cast<unsigned>(m_gpu.multiprocessors) * per_sm));
  if (grid_windowed)
    blocks = std::max(blocks, static_cast<unsigned>((m_n + cuda::TileOrder::kChunk - 1) / cuda::TileOrder::kChunk));
  return blocks;
}

void CudaBackend::CollectiveRun::run_segment(CUfunction f, size_t kick_c, size_t deposit_c, bool kick, bool deposit,
                                             int turn) {
  SegmentArguments a = prepare_segment(kick_c, deposit_c, kick, deposit);
  phase_start();
  void* profile_args[] = {&m_buffers->arrays(), &m_steps,  &m_params,     &m_n_particles, &m_beta0,     &turn,
                          &m_n_elements,        &m_limits, &a.kick_field, &a.profile,     &a.in_shared, &m_full_load};
  void* grid_args[] = {
      &m_buffers->arrays(), &m_steps,        &m_params,     &m_n_particles, &m_beta0,     &turn,
      &m_n_elements,        &m_limits,       &a.kick_field, &a.profile,     &a.in_shared, &m_full_load,
      &a.kick_ex,           &a.kick_ey,      &a.kick_ez,    &a.kick_stride, &a.kick_grid, &a.grid_acc,
      &a.outside_slot,      &a.deposit_spec, &a.extent,     &a.extent_acc,  &a.grid_mode, &a.grid_window};
  std::vector<void*> args_all(m_any_grid ? std::begin(grid_args) : std::begin(profile_args),
                              m_any_grid ? std::end(grid_args) : std::end(profile_args));
  if (m_any_moments) args_all.push_back(&a.deposit_scales);  // kMomentSegmentParameters (codegen)
  launch(f, segment_blocks(a), kThreads, a.shared, args_all.data());
  m_energy_stale = true;
  // While the GPU runs the segment: the host work of the next solves that does not wait for its deposit
  // (FUSETRACK_PREPARE_AHEAD=0: left to the solves, the benchmarks' baseline; the same bits either way).
  if (m_prepare_ahead)
    for (DeviceCollective& c : m_impl.collective)
      if (c.moments) c.moments->prepare_next_turn();
  phase_end("collective segment", m_stats.segment_seconds);
}

void CudaBackend::CollectiveRun::timed_solve(DeviceCollective& dc) {
  phase_start();
  solve(dc);
  phase_end("collective solve", m_stats.solve_seconds);
}

void CudaBackend::CollectiveRun::solve(DeviceCollective& dc) {
  if (dc.grid)
    grid_solve(dc);
  else if (dc.moments)
    moments_solve(dc);
  else
    profile_solve(dc);
}

// ---------------------------------------------------------------------------------------------
// The solves.

void CudaBackend::CollectiveRun::profile_solve(DeviceCollective& dc) {
  const CollectiveKernels& kk = m_impl.collective_kernels;
  CollectiveSolver& sv = *dc.solver;
  int ns = sv.n_slices();
  if (m_track.reduce_profile) {  // the profile summed over the processes of the run
    const size_t bytes = static_cast<size_t>(ns) * sizeof(uint64_t);
    check(m_d.memcpy_dtoh(dc.host_moments, dc.counts, bytes), "cuMemcpyDtoH(profile)");
    m_track.reduce_profile(dc.host_moments, static_cast<size_t>(ns));
    check(m_d.memcpy_htod(dc.counts, dc.host_moments, bytes), "cuMemcpyHtoD(profile)");
  }
  double inv_total = sv.inv_total(), scale = sv.field_scale();
  int n_modes = sv.mode_count();
  // The modes' step before the field: this turn's amplitudes (the memory less the window's wraps).
  auto mode_step = [&] {
    if (n_modes == 0) return;
    void* args[] = {&dc.lambda, &ns, &dc.mode_deposit, &dc.mode_wrap, &dc.mode_turn, &dc.memory, &dc.amplitude};
    launch(kk.mode_update, static_cast<unsigned>(n_modes), static_cast<unsigned>(kModeChunks), 0, args);
  };
  if (sv.method() == FT_SOLVE_FREQUENCY_DOMAIN && !dc.use_cufft) {
    auto launch_kernel = [this](CUfunction f, unsigned blocks, unsigned threads, unsigned shared, void** args) {
      launch(f, blocks, threads, shared, args);
    };
    fft_solve(dc, kk, launch_kernel);
    return;
  }
  {
    void* args[] = {&dc.counts, &ns, &inv_total, &dc.lambda};
    launch(kk.line_density, blocks_for(static_cast<size_t>(ns), 256), 256, 0, args);
  }
  CUdeviceptr conv = dc.conv;
  if (sv.method() == FT_SOLVE_TIME_DOMAIN) {
    void* args[] = {&dc.lambda, &dc.wake_kernel, &ns, &dc.conv};
    launch(kk.convolve, blocks_for(static_cast<size_t>(ns), 128), 128, 0, args);
  } else {
    // cuFFT (fma on). lambda was allocated with N entries: its zero tail is the padding.
    const int N = sv.fft_length();
    check_cufft(cufftExecD2Z(dc.plan_forward, reinterpret_cast<cufftDoubleReal*>(dc.lambda),
                             reinterpret_cast<cufftDoubleComplex*>(dc.fft_y)),
                "cufftExecD2Z");
    int n_half = N / 2 + 1;
    void* args[] = {&dc.fft_y, &dc.half_spectrum, &n_half};
    launch(kk.half_spectrum_product, blocks_for(static_cast<size_t>(n_half), 256), 256, 0, args);
    check_cufft(cufftExecZ2D(dc.plan_inverse, reinterpret_cast<cufftDoubleComplex*>(dc.fft_y),
                             reinterpret_cast<cufftDoubleReal*>(dc.fft_real_out)),
                "cufftExecZ2D");
    conv = dc.fft_real_out;
  }
  mode_step();
  int stride = 1;
  void* args[] = {&conv, &stride, &ns, &scale, &dc.mode_field, &dc.amplitude, &n_modes, &dc.field};
  launch(kk.finish_field, blocks_for(static_cast<size_t>(ns), 256), 256, 0, args);
}

void CudaBackend::CollectiveRun::moments_solve(DeviceCollective& dc) {
  const auto t_down = std::chrono::steady_clock::now();
  check(m_d.memcpy_dtoh(dc.host_moments, dc.counts, dc.deposit_words * sizeof(uint64_t)),
        "cuMemcpyDtoH(slice moments)");
  const auto t_host = std::chrono::steady_clock::now();
  m_stats.moments_transfer_seconds += seconds_since(t_down);
  double sum_seconds = 0.0;
  if (m_track.reduce_profile) {  // a train's ranks: each solves its own bunches
    const MomentsCollectiveSolver::RankSum timed_sum = [&](uint64_t* values, size_t count) {
      const auto t_sum = std::chrono::steady_clock::now();
      m_track.reduce_profile(values, count);
      sum_seconds += seconds_since(t_sum);
    };
    dc.moments->solve_over_ranks(dc.host_moments, timed_sum);
  } else {
    dc.moments->solve(dc.host_moments, dc.host_moments[dc.deposit_words - 1]);
  }
  m_stats.moments_sum_seconds += sum_seconds;
  m_stats.moments_host_seconds += seconds_since(t_host) - sum_seconds;
  // Up: the kicks of this rank's bunches (a train over ranks), else the whole table.
  const auto t_up = std::chrono::steady_clock::now();
  const auto [begin, end] = dc.moments->kicks_in_use();
  if (end > begin)
    check(m_d.memcpy_htod(dc.field + begin * sizeof(double), dc.moments->kicks().data() + begin,
                          (end - begin) * sizeof(double)),
          "cuMemcpyHtoD(slice kicks)");
  m_stats.moments_transfer_seconds += seconds_since(t_up);
}

// A grid element: the adapted extent's moments (the segment kernel made the first pass), the deposit on
// this turn's grid (in the segment kernel for fixed grids), the integer grid down, summed over ranks,
// solved on the host with the CPU backend's code, the fields up for the next kick; on one rank, the
// charge density, Poisson solve and frame factor on the GPU instead.
void CudaBackend::CollectiveRun::grid_solve(DeviceCollective& dc) {
  const auto t_transfer = std::chrono::steady_clock::now();
  if (dc.grid->adaptive()) adapt_grid(dc);
  if (!m_track.reduce_profile && !dc.gpu_poisson_failed && !std::getenv("FUSETRACK_HOST_POISSON")) {
    if (!dc.gpu_poisson) make_gpu_poisson(dc);
    if (dc.gpu_poisson) {
      gpu_grid_solve(dc, t_transfer);
      return;
    }
  }
  host_grid_solve(dc, t_transfer);
}

void CudaBackend::CollectiveRun::adapt_grid(DeviceCollective& dc) {
  const CollectiveKernels& kk = m_impl.collective_kernels;
  GridCollectiveSolver& g = *dc.grid;
  const size_t nodes = g.node_count();
  std::vector<uint64_t> acc(kExtentAccumulators + 1);
  const int passes = g.extent_passes();
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0) {
      check(m_d.memset_d8(dc.extent_acc, 0, acc.size() * sizeof(uint64_t)), "cuMemset(grid extent)");
      ExtentScales extent = g.extent_scales();
      void* args[] = {&m_buffers->arrays(), &m_n_particles, &extent, &dc.extent_acc};
      launch(kk.grid_extent,
             std::max(1u, std::min(blocks_for(m_n, kThreads), static_cast<unsigned>(m_gpu.multiprocessors) * 8u)),
             kThreads, 0, args);
    }
    download(m_d, acc, dc.extent_acc, 0, acc.size());
    if (m_track.reduce_profile) m_track.reduce_profile(acc.data(), acc.size());
    g.set_extent(acc.data());
  }
  check(m_d.memset_d8(dc.grid_acc, 0, (nodes + 1) * sizeof(uint64_t)), "cuMemset(charge grid)");
  ChargeGridSpec spec = g.spec();
  long long outside_slot = static_cast<long long>(nodes);
  void* args[] = {&m_buffers->arrays(), &m_n_particles, &spec, &dc.grid_acc, &outside_slot};
  launch(kk.grid_deposit,
         std::max(1u, std::min(blocks_for(m_n, kThreads), static_cast<unsigned>(m_gpu.multiprocessors) * 8u)), kThreads,
         0, args);
}

void CudaBackend::CollectiveRun::make_gpu_poisson(DeviceCollective& dc) {
  GridCollectiveSolver& g = *dc.grid;
  const size_t nodes = g.node_count();
  try {
    const PoissonSolver& host = g.poisson();
    // A fixed grid with fma on may take the line transforms (GpuPoissonSolver::preferred_fft); an adapted
    // grid keeps the host's mode: it takes the host's spectra at each new spacing (use_spectra).
    const PoissonFft fft =
        g.adaptive() ? host.fft() : GpuPoissonSolver::preferred_fft(host.grid(), host.model(), host.fft());
    dc.gpu_poisson = std::make_unique<GpuPoissonSolver>(host.grid(), host.model(), fft, m_backend_options.device);
    dc.grid_builds = g.report().solver_builds;
    dc.rho = device_zeros(m_d, nodes * sizeof(double), "cuMemAlloc(grid charge density)");
    dc.max_field_bits = device_zeros(m_d, sizeof(uint64_t), "cuMemAlloc(grid field maximum)");
  } catch (const DeviceError& e) {
    dc.gpu_poisson_failed = true;  // e.g. a grid beyond the GPU solver's transform lengths
    fmt::print(stderr, "space-charge element '{}': Poisson solve on the host ({})\n", g.element_name(), e.what());
  }
  check(m_d.ctx_set_current(m_impl.context), "cuCtxSetCurrent");
}

/// One rank: charge density, Poisson solve and frame factor on the GPU; only the outside count comes down.
void CudaBackend::CollectiveRun::gpu_grid_solve(DeviceCollective& dc,
                                                std::chrono::steady_clock::time_point t_transfer) {
  const CollectiveKernels& kk = m_impl.collective_kernels;
  GridCollectiveSolver& g = *dc.grid;
  const size_t nodes = g.node_count();
  if (g.report().solver_builds != dc.grid_builds) {
    dc.gpu_poisson->use_spectra(g.poisson());  // (in the GPU solver's own FFT mode)
    dc.grid_builds = g.report().solver_builds;
  }
  const auto t_solve = std::chrono::steady_clock::now();
  long long count = static_cast<long long>(nodes);
  double factor = g.charge_density_factor(), gamma0 = g.gamma0();
  int three_d = dc.ez ? 1 : 0;
  const unsigned blocks =
      std::max(1u, std::min(blocks_for(nodes, 256), static_cast<unsigned>(m_gpu.multiprocessors) * 8u));
  {
    void* args[] = {&dc.grid_acc, &dc.rho, &count, &factor};
    launch(kk.grid_density, blocks, 256, 0, args);
  }
  dc.gpu_poisson->solve_device(dc.rho, dc.ex, dc.ey, dc.ez, nullptr, dc.field_stride);
  check(m_d.ctx_set_current(m_impl.context), "cuCtxSetCurrent");
  check(m_d.memset_d8(dc.max_field_bits, 0, sizeof(uint64_t)), "cuMemset(grid field maximum)");
  {
    void* args[] = {&dc.grid_field, &count, &gamma0, &three_d, &dc.max_field_bits};
    launch(kk.grid_field_finish, blocks, 256, 0, args);
  }
  uint64_t tail[2] = {0, 0};
  check(m_d.memcpy_dtoh(&tail[0], dc.grid_acc + nodes * sizeof(uint64_t), sizeof(uint64_t)), "cuMemcpyDtoH(outside)");
  check(m_d.memcpy_dtoh(&tail[1], dc.max_field_bits, sizeof(uint64_t)), "cuMemcpyDtoH(field maximum)");
  double max_field = 0.0;
  std::memcpy(&max_field, &tail[1], sizeof(double));
  g.record_solve(tail[0], max_field);
  const double solve_wall = seconds_since(t_solve);
  m_stats.grid_solve_seconds += solve_wall;
  m_stats.grid_transfer_seconds += seconds_since(t_transfer) - solve_wall;
  m_stats.grid_bytes_transferred += 2 * sizeof(uint64_t);
}

/// The integer grid down, summed over ranks, the host solve (the CPU backend's code), the fields up.
void CudaBackend::CollectiveRun::host_grid_solve(DeviceCollective& dc,
                                                 std::chrono::steady_clock::time_point t_transfer) {
  GridCollectiveSolver& g = *dc.grid;
  const size_t nodes = g.node_count();
  m_host_grid.resize(nodes + 1);
  download(m_d, m_host_grid, dc.grid_acc, 0, nodes + 1);
  if (m_track.reduce_profile) m_track.reduce_profile(m_host_grid.data(), m_host_grid.size());
  const auto t_solve = std::chrono::steady_clock::now();
  g.solve(m_host_grid.data(), m_host_grid[nodes]);
  const double solve_wall = seconds_since(t_solve);
  {  // the components side by side, as the GPU keeps them
    const size_t s = static_cast<size_t>(dc.field_stride);
    m_host_field.resize(s * nodes);
    const std::vector<double>* components[3] = {&g.ex(), &g.ey(), s == 3 ? &g.ez() : nullptr};
    for (size_t c = 0; c < s; ++c)
      for (size_t k = 0; k < nodes; ++k) m_host_field[k * s + c] = (*components[c])[k];
    upload(m_d, dc.grid_field, m_host_field, 0, m_host_field.size());
  }
  m_stats.grid_solve_seconds += solve_wall;
  m_stats.grid_transfer_seconds += seconds_since(t_transfer) - solve_wall;
  m_stats.grid_bytes_transferred += (nodes + 1) * sizeof(uint64_t) + (dc.ez ? 3 : 2) * nodes * sizeof(double);
}

// ---------------------------------------------------------------------------------------------
// The end of the run.

void CudaBackend::CollectiveRun::finish() {
  check(m_d.event_record(m_events[1], nullptr), "cuEventRecord");
  check(m_d.event_synchronize(m_events[1]), "kernel execution");
  float ms = 0;
  m_d.event_elapsed_time(&ms, m_events[0], m_events[1]);
  m_stats.kernel_seconds = ms * 1e-3;
  for (CUevent& e : m_events) {
    m_d.event_destroy(e);
    e = nullptr;
  }
  m_stats.chunks = 1;
  if (m_n > 0) {
    if (!m_source || m_source->download_final) download_particles();
    download_snapshots();
  }
  if (m_source)
    m_source->result.alive = m_source->download_final ? m_particles.alive_count()
                                                      : cuda::count_alive_on_device(m_impl, m_buffers->arrays(), m_n);
  for (DeviceCollective& c : m_impl.collective) {
    if (!c.grid && !c.moments) continue;
    const std::string warning = c.grid ? c.grid->take_warning() : c.moments->take_warning();
    if (m_track.warnings && !warning.empty()) std::cerr << warning;
  }
}

}  // namespace ft
