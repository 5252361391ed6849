#include "fusetrack/cuda_backend.h"

#include <cufft.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <tuple>

#include "cuda_driver.h"
#include "cuda_staging.h"
#include "fusetrack/collective.h"
#include "fusetrack/cuda_poisson.h"
#include "fusetrack/device/profile_solver_kernels.h"
#include "fusetrack/device/random.h"
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"
#include "fusetrack/slice_wakes.h"
#include "fusetrack/space_charge.h"

namespace ft {

using cuda::check;
using cuda::check_alloc;

namespace {

/// Device copies of the particle arrays, in the layout of FtParticleArrays in the kernel.
struct DeviceParticles {
  CUdeviceptr x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, lost_element;
};

constexpr size_t kBytesPerParticle = 9 * sizeof(double) + 2 * sizeof(int32_t) + sizeof(int64_t);

struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUfunction few_particles = nullptr;  // kFewParticlesKernelName, where the source has it
  KernelSource source;
  CompiledKernel compiled;
};

}  // namespace

/// The device side of one collective element: its host solver (tables, model) and device buffers.
struct DeviceCollective {
  std::unique_ptr<CollectiveSolver> solver;  // profile kind (null for a grid element)
  // Grid kind (space charge): the host solver (grid, Poisson solve) and the device buffers: integer
  // charge per node plus the outside count, the adapted extent's moments, the fields at the nodes.
  std::unique_ptr<GridCollectiveSolver> grid;
  // One rank: the Poisson solve on the GPU (the host solver's spectra, taken again when the adapted
  // grid's spacing changes: grid_builds), no round trip of the grid through the host.
  std::unique_ptr<GpuPoissonSolver> gpu_poisson;
  int64_t grid_builds = 0;
  bool gpu_poisson_failed = false;
  CUdeviceptr rho = 0, max_field_bits = 0;
  // Slice-moment kind (wakes, feedback): the host solver; `counts` holds its integer slice moments
  // (deposit_words: kSliceCentroidAccumulators per slice, then the particles out of range) and
  // `field` its kick table (FT_SLICE_KICK_VALUES doubles per slice).
  std::unique_ptr<MomentsCollectiveSolver> moments;
  size_t deposit_words = 0;  // integers of the deposit in `counts` (profile kind: n_slices)
  // Page-locked host memory for the round trip of the integers over ranks (cuMemAllocHost: the moments, or
  // the profile) and for the moments solver's kick table up (cuMemHostRegister; left pageable where the
  // driver refuses).
  uint64_t* host_moments = nullptr;
  void* registered_kicks = nullptr;
  CUdeviceptr grid_acc = 0, extent_acc = 0;
  // The field at the nodes, a node's components side by side (node k's E_x at grid_field[k * field_stride],
  // E_y one double after it, E_z two): the gather of a corner reads one memory sector, not one per component.
  // ex, ey, ez point into grid_field (ez 0 in 2.5D).
  CUdeviceptr grid_field = 0, ex = 0, ey = 0, ez = 0;
  int field_stride = 2;
  CUdeviceptr counts = 0, field = 0, lambda = 0, conv = 0, wake_kernel = 0;
  CUdeviceptr fft_x = 0, fft_y = 0, spectrum = 0, twiddles = 0;  // fusetrack's FFT (fma off)
  CUdeviceptr half_spectrum = 0, fft_real_out = 0;               // cuFFT (fma on)
  CUdeviceptr mode_field = 0, mode_deposit = 0, mode_turn = 0, mode_wrap = 0, memory = 0, amplitude = 0;
  cufftHandle plan_forward = 0, plan_inverse = 0;
  bool use_cufft = false;
  bool profile_in_shared = false;
  // Slice moments too large for shared memory (bunch trains): the words of a block's window in shared
  // memory (kMomentWindowSlices slices, then the out-of-range count); 0: no window.
  size_t window_words = 0;
};

struct CollectiveKernels {
  CUmodule module = nullptr;
  std::vector<CUfunction> segments;
  CUfunction wrap = nullptr;           // last segment + first segment of the next turn
  CUfunction derive_energy = nullptr;  // rpp and rvv from delta and ptau, before a download
  bool derived_energy = false;         // the segments neither load nor store rpp and rvv (codegen.h)
  CUfunction line_density = nullptr, convolve = nullptr, fft_pass = nullptr, half_spectrum_product = nullptr,
             finish_field = nullptr, mode_update = nullptr;
  CUfunction grid_extent = nullptr, grid_deposit = nullptr;  // lattices with grid elements
  CUfunction grid_density = nullptr, grid_field_finish = nullptr;
  CUfunction tile_keys = nullptr, tile_scan_blocks = nullptr, tile_scan_sums = nullptr, tile_scan_add = nullptr,
             tile_slots = nullptr, tile_gather = nullptr, tile_restore = nullptr;
  KernelSource source;
};

struct CudaBackend::Impl {
  const cuda::Driver* d = nullptr;
  // Collective lattices: state kept across track() calls (multi-turn memory), rebuilt when the
  // numerics mode or the macroparticle count changes.
  std::vector<DeviceCollective> collective;
  CollectiveKernels collective_kernels;
  FmaMode collective_fma = FmaMode::Off;
  size_t collective_macroparticles = 0;
  bool collective_ready = false;
  std::vector<CollectiveSnapshot> snapshots;
  // The particles' copies through page-locked buffers (the buffers made with the first large copy, kept).
  std::unique_ptr<cuda::StagedCopier> staging;

  void free_collective() {
    for (DeviceCollective& c : collective) {
      for (CUdeviceptr p :
           {c.counts,    c.field,    c.lambda,        c.conv,         c.wake_kernel, c.fft_x,        c.fft_y,
            c.spectrum,  c.twiddles, c.half_spectrum, c.fft_real_out, c.mode_field,  c.mode_deposit, c.mode_turn,
            c.mode_wrap, c.memory,   c.amplitude,     c.grid_acc,     c.extent_acc,  c.grid_field})
        if (p) d->mem_free(p);
      if (c.registered_kicks) d->mem_host_unregister(c.registered_kicks);
      if (c.host_moments) d->mem_free_host(c.host_moments);
      if (c.plan_forward) cufftDestroy(c.plan_forward);
      if (c.plan_inverse) cufftDestroy(c.plan_inverse);
    }
    collective.clear();
    if (collective_kernels.module) d->module_unload(collective_kernels.module);
    collective_kernels = CollectiveKernels{};
    collective_ready = false;
  }
  CUcontext context = nullptr;
  // (fma, dispatch, register cap, particles per thread) -> kernel
  std::map<std::tuple<int, int, int, int>, LoadedKernel> kernels;
  std::map<std::pair<int, int>, KernelForm> measured_forms;     // (fma, log10 particles) -> auto's choice
  std::vector<std::pair<KernelForm, double>> last_measurement;  // element-passes/s per candidate
  // The switch kernel's tables (kernel_tables), uploaded with its first use; baked kernels
  // take neither.
  CUdeviceptr switch_steps = 0;
  size_t switch_step_entries = 0;  // the steps, and the motif table after them when uploaded with one
  CUdeviceptr switch_params = 0;
  // Lattice variants (set_variants): the lattices, and the distance between their parameter tables.
  std::vector<const Lattice*> variants;
  unsigned long long variant_stride = 0;
  // Particles made on the device (track_matched_share): compiled with its first use.
  CUmodule sampler_module = nullptr;
  CUfunction sample_matched = nullptr, longitudinal_sums = nullptr, count_alive = nullptr;

  ~Impl() {
    if (!d) return;
    d->ctx_set_current(context);
    free_collective();
    staging.reset();
    for (auto& [key, k] : kernels)
      if (k.module) d->module_unload(k.module);
    if (switch_steps) d->mem_free(switch_steps);
    if (switch_params) d->mem_free(switch_params);
    if (sampler_module) d->module_unload(sampler_module);
  }
};

CudaBackend::CudaBackend(const Lattice& lattice, CudaBackendOptions options)
    : m_impl(std::make_unique<Impl>()), m_lattice(lattice), m_options(std::move(options)) {
  std::string why;
  m_impl->d = cuda::driver(&why);
  if (!m_impl->d) throw DeviceError("no GPU available: " + why);
  m_impl->staging = std::make_unique<cuda::StagedCopier>(*m_impl->d);
  const auto gpus = list_gpus();
  if (m_options.device < 0 || m_options.device >= static_cast<int>(gpus.size()))
    throw DeviceError(fmt::format("GPU {} does not exist ({} found)", m_options.device, gpus.size()));
  m_gpu = gpus[static_cast<size_t>(m_options.device)];
  const cuda::Driver& d = *m_impl->d;
  CUdevice dev;
  check(d.device_get(&dev, m_options.device), "cuDeviceGet");
  check(d.primary_ctx_retain(&m_impl->context, dev), "cuDevicePrimaryCtxRetain");
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::name() const { return fmt::format("gpu ({}, sm_{})", m_gpu.name, m_gpu.arch); }

namespace {

LoadedKernel& get_kernel(CudaBackend::Impl& impl, const Lattice& lattice, const CudaBackendOptions& o, FmaMode fma,
                         KernelForm form, int arch, CudaRunStats& stats) {
  const Dispatch dispatch = form.dispatch;
  const auto key =
      std::make_tuple(static_cast<int>(fma), static_cast<int>(dispatch), form.max_registers, form.particles_per_thread);
  auto it = impl.kernels.find(key);
  if (it != impl.kernels.end()) return it->second;
  LoadedKernel k;
  k.source =
      generate_fused_kernel(lattice, fma, dispatch, form.max_registers, impl.variants, form.particles_per_thread);
  std::string dump_dir;
  if (const char* dump = std::getenv("FUSETRACK_DUMP_SOURCE"); dump && *dump) {
    dump_dir = fmt::format("{}/{}{}{}_{}", dump, dispatch_name(dispatch),
                           form.max_registers > 0 ? fmt::format("_r{}", form.max_registers) : "",
                           k.source.particles_per_thread > 1 ? fmt::format("_k{}", k.source.particles_per_thread) : "",
                           fma == FmaMode::On ? "fma_on" : "fma_off");
    dump_kernel_source(k.source, dump_dir);
  }
  KernelCompiler compiler(o.cache_dir);
  k.compiled = compiler.compile(k.source, arch);
  if (!dump_dir.empty())  // the binary too, for cuobjdump -sass / -res-usage
    std::ofstream(dump_dir + "/fusetrack_fused.cubin", std::ios::binary)
        .write(k.compiled.cubin.data(), static_cast<std::streamsize>(k.compiled.cubin.size()));
  stats.compile_seconds += k.compiled.seconds;
  stats.kernel_from_cache = k.compiled.from_cache;
  const cuda::Driver& d = *impl.d;
  check(d.module_load_data(&k.module, k.compiled.cubin.data()), "cuModuleLoadData");
  check(d.module_get_function(&k.function, k.module, kFusedKernelName), "cuModuleGetFunction");
  if (k.source.few_particles_form)
    check(d.module_get_function(&k.few_particles, k.module, kFewParticlesKernelName), "cuModuleGetFunction");
  // The tables are shared by the switch, staged and collective kernels; a switch kernel with motifs
  // needs the motif table after the steps, and uploads the steps again when a form without came first.
  const size_t step_entries = lattice.sequence().size() + k.source.motif_at.size();
  if (dispatch != Dispatch::Baked && (!impl.switch_steps || impl.switch_step_entries < step_entries)) {
    const KernelTables tables = kernel_tables(lattice, k.source, impl.variants);
    impl.variant_stride = tables.variant_stride_bytes;
    if (impl.switch_steps) d.mem_free(impl.switch_steps);
    CUdeviceptr p = 0;
    check_alloc(d, &p, std::max<size_t>(tables.steps.size() * sizeof(KernelStep), 8), "cuMemAlloc(steps)");
    check(d.memcpy_htod(p, tables.steps.data(), tables.steps.size() * sizeof(KernelStep)), "cuMemcpyHtoD(steps)");
    impl.switch_steps = p;
    impl.switch_step_entries = tables.steps.size();
    if (!impl.switch_params) {
      check_alloc(d, &impl.switch_params, tables.params.size() * sizeof(uint64_t), "cuMemAlloc(parameters)");
      check(d.memcpy_htod(impl.switch_params, tables.params.data(), tables.params.size() * sizeof(uint64_t)),
            "cuMemcpyHtoD(parameters)");
    }
  }
  return impl.kernels.emplace(key, std::move(k)).first->second;
}

template <class T>
void upload(const cuda::Driver& d, CUdeviceptr dst, const std::vector<T>& v, size_t first, size_t n) {
  check(d.memcpy_htod(dst, v.data() + first, n * sizeof(T)), "cuMemcpyHtoD(particles)");
}
template <class T>
void download(const cuda::Driver& d, std::vector<T>& v, CUdeviceptr src, size_t first, size_t n) {
  check(d.memcpy_dtoh(v.data() + first, src, n * sizeof(T)), "cuMemcpyDtoH(particles)");
}

/// `f(host array, device array)` for every particle array, in the order of DeviceParticles.
template <class P, class D, class F>
void for_each_particle_array(P& p, D& dp, F f) {
  f(p.x, dp.x);
  f(p.px, dp.px);
  f(p.y, dp.y);
  f(p.py, dp.py);
  f(p.zeta, dp.zeta);
  f(p.delta, dp.delta);
  f(p.ptau, dp.ptau);
  f(p.rpp, dp.rpp);
  f(p.rvv, dp.rvv);
  f(p.state, dp.state);
  f(p.lost_turn, dp.lost_turn);
  f(p.lost_element, dp.lost_element);
}

constexpr unsigned kFftThreads = 256;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Device arrays for `capacity` particles (freed with the object), and the copies of particles
/// [first, first + count) between them and the host, timed into the run's statistics (through the
/// page-locked staging buffers, cuda_staging.h; synchronous). The single-particle and the collective
/// paths share it.
class DeviceParticleBuffers {
 public:
  DeviceParticleBuffers(const cuda::Driver& d, cuda::StagedCopier& copier, size_t capacity, CudaRunStats& stats)
      : m_d(d), m_copier(copier), m_stats(stats) {
    const size_t n = std::max<size_t>(capacity, 1);
    const Particles types;  // empty: only the element types of its arrays are used
    for_each_particle_array(types, m_dp, [&](const auto& host, CUdeviceptr& device) {
      check_alloc(m_d, &device, n * sizeof(host[0]), "cuMemAlloc(particles)");
    });
  }
  ~DeviceParticleBuffers() {
    const Particles types;
    for_each_particle_array(types, m_dp, [&](const auto&, CUdeviceptr device) {
      if (device) m_d.mem_free(device);
    });
  }
  DeviceParticleBuffers(const DeviceParticleBuffers&) = delete;
  DeviceParticleBuffers& operator=(const DeviceParticleBuffers&) = delete;

  DeviceParticles& arrays() { return m_dp; }
  cuda::StagedCopier& copier() { return m_copier; }
  CudaRunStats& stats() { return m_stats; }
  void upload(const Particles& p, size_t first, size_t count) {
    const auto t0 = std::chrono::steady_clock::now();
    for_each_particle_array(p, m_dp, [&](const auto& host, CUdeviceptr device) {
      m_copier.to_device(device, host.data() + first, count * sizeof(host[0]));
    });
    m_stats.upload_seconds += seconds_since(t0);
  }
  void download(Particles& p, size_t first, size_t count) {
    const auto t0 = std::chrono::steady_clock::now();
    for_each_particle_array(p, m_dp, [&](auto& host, CUdeviceptr device) {
      m_copier.to_host(host.data() + first, device, count * sizeof(host[0]));
    });
    m_stats.download_seconds += seconds_since(t0);
  }

 private:
  const cuda::Driver& m_d;
  cuda::StagedCopier& m_copier;
  CudaRunStats& m_stats;
  DeviceParticles m_dp{};
};

/// The particles of a collective run ordered by grid tile on the device (CudaBackendOptions::tile_sort_every):
/// a counting sort by the cell of the first fixed-grid element (fusetrack_tile_keys, _scan, _scatter of
/// the collective kernels) into a second set of arrays, each slot's original index carried along, and the
/// original order restored before the particles leave the device. With it the fixed-grid deposits sum each
/// block's charge in a window of the grid in shared memory first (window_nodes()). Not for bunch trains
/// (their slice-moment deposits take each bunch's particles as one contiguous range), nor where device
/// memory is short of a second set of arrays (then no sort: every deposit a global atomic add).
class TileOrder {
 public:
  /// Particles per block of a windowed deposit, and the window: nodes from one row before the cell of the
  /// block's first particle, in its zeta layer and the next (2 x 2048 words, 32 KiB of shared memory).
  static constexpr size_t kChunk = 4096;
  static constexpr int kWindowNodes = 2048;
  /// Buckets per block of the prefix sums (FT_TILE_SCAN_PER_THREAD x 1024 threads), at most 1024 blocks.
  static constexpr unsigned kScanBlock = 4096, kMaxScanBlocks = 1024;

  TileOrder(const cuda::Driver& d, const std::vector<DeviceCollective>& collective, DeviceParticleBuffers& buffers,
            size_t n, int every_option)
      : m_d(d), m_n(n) {
    static const int every_from_env = [] {
      const char* v = std::getenv("FUSETRACK_TILE_SORT_EVERY");
      return v ? std::max(0, std::atoi(v)) : -1;
    }();
    bool trains = false;
    int fixed_grids = 0;
    for (const DeviceCollective& c : collective) {
      if (!m_grid && c.grid && !c.grid->adaptive()) m_grid = c.grid.get();
      fixed_grids += c.grid && !c.grid->adaptive() ? 1 : 0;
      trains |= c.window_words > 0;
    }
    m_every = every_from_env >= 0 ? every_from_env
              : every_option >= 0 ? every_option
                                  : (fixed_grids >= kTileSortAutoElements ? 1 : 0);
    if (m_every == 0 || !m_grid || trains || n == 0 || n > static_cast<size_t>(std::numeric_limits<int>::max())) return;
    const size_t cells = m_grid->node_count();
    while ((cells >> m_shift) >= size_t{kScanBlock} * kMaxScanBlocks) ++m_shift;  // at most 4M buckets
    m_buckets = static_cast<unsigned>((cells >> m_shift) + 1);                    // the last: lost or outside the grid
    size_t free_bytes = 0, total_bytes = 0;
    check(d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
    const size_t need = n * (kBytesPerParticle + 4 * sizeof(int32_t)) + m_buckets * sizeof(uint32_t);
    // At most half of what is free: the Poisson solvers allocate their buffers after this, at the first solve.
    if (need > free_bytes / 2) return;
    for (CUdeviceptr* p : {&m_key, &m_source, &m_origin[0], &m_origin[1]})
      check_alloc(d, p, n * sizeof(int32_t), "cuMemAlloc(tile sort)");
    check_alloc(d, &m_count, m_buckets * sizeof(uint32_t), "cuMemAlloc(tile sort)");
    check_alloc(d, &m_sums, kMaxScanBlocks * sizeof(uint32_t), "cuMemAlloc(tile sort)");
    std::vector<int32_t> identity(n);
    for (size_t i = 0; i < n; ++i) identity[i] = static_cast<int32_t>(i);
    check(d.memcpy_htod(m_origin[0], identity.data(), n * sizeof(int32_t)), "cuMemcpyHtoD(tile sort)");
    m_spare = std::make_unique<DeviceParticleBuffers>(d, buffers.copier(), n, buffers.stats());
    m_enabled = true;
  }
  ~TileOrder() {
    for (CUdeviceptr p : {m_key, m_source, m_count, m_sums, m_origin[0], m_origin[1]})
      if (p) m_d.mem_free(p);
  }
  TileOrder(const TileOrder&) = delete;
  TileOrder& operator=(const TileOrder&) = delete;

  /// A sort at the start of turn `done` (counted from the call's first).
  bool due(int64_t done) const { return m_enabled && done % m_every == 0; }
  /// The window of the fixed-grid deposits (0: none, the particles are not sorted).
  int window_nodes() const { return m_enabled ? kWindowNodes : 0; }

  /// `phase_seconds` (optional, synchronising after each phase): the counts and their prefix sums, the
  /// slots, the particles' move.
  void sort(const CollectiveKernels& kk, DeviceParticleBuffers& buffers, int multiprocessors, double* phase_seconds) {
    DeviceParticleBuffers& spare = *m_spare;
    int n = static_cast<int>(m_n);
    auto t = std::chrono::steady_clock::now();
    auto phase = [&](int k) {
      if (!phase_seconds) return;
      check(m_d.ctx_synchronize(), "tile sort");
      const auto now = std::chrono::steady_clock::now();
      phase_seconds[k] += std::chrono::duration<double>(now - t).count();
      t = now;
    };
    check(m_d.memset_d8(m_count, 0, m_buckets * sizeof(uint32_t)), "cuMemset(tile sort)");
    ChargeGridSpec spec = m_grid->spec();
    unsigned last = m_buckets - 1, buckets = m_buckets, scan_blocks = (m_buckets + kScanBlock - 1) / kScanBlock;
    void* key_args[] = {&buffers.arrays(), &n, &spec, &m_shift, &last, &m_key, &m_count};
    launch(kk.tile_keys, blocks(multiprocessors), 256, key_args);
    void* scan_args[] = {&m_count, &buckets, &m_sums};
    launch(kk.tile_scan_blocks, scan_blocks, 1024, scan_args);
    void* sums_args[] = {&m_sums, &scan_blocks};
    launch(kk.tile_scan_sums, 1, 1024, sums_args);
    launch(kk.tile_scan_add, (m_buckets + 255) / 256, 256, scan_args);
    phase(0);
    void* slot_args[] = {&n, &m_key, &m_count, &m_source};
    launch(kk.tile_slots, blocks(multiprocessors), 256, slot_args);
    phase(1);
    void* gather_args[] = {&buffers.arrays(), &spare.arrays(), &n, &m_source, &m_origin[0], &m_origin[1]};
    launch(kk.tile_gather, blocks(multiprocessors), 256, gather_args);
    phase(2);
    std::swap(buffers.arrays(), spare.arrays());
    std::swap(m_origin[0], m_origin[1]);
    m_permuted = true;
  }
  /// The original order back (before a download).
  void restore(const CollectiveKernels& kk, DeviceParticleBuffers& buffers, int multiprocessors) {
    if (!m_permuted) return;
    DeviceParticleBuffers& spare = *m_spare;
    int n = static_cast<int>(m_n);
    void* args[] = {&buffers.arrays(), &spare.arrays(), &n, &m_origin[0], &m_origin[1]};
    launch(kk.tile_restore, blocks(multiprocessors), 256, args);
    std::swap(buffers.arrays(), spare.arrays());
    std::swap(m_origin[0], m_origin[1]);
    m_permuted = false;
  }

 private:
  unsigned blocks(int multiprocessors) const {
    return static_cast<unsigned>(std::min<size_t>((m_n + 255) / 256, static_cast<size_t>(multiprocessors) * 8));
  }
  void launch(CUfunction f, unsigned grid, unsigned threads, void** args) const {
    check(m_d.launch_kernel(f, grid, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel(tile sort)");
  }

  const cuda::Driver& m_d;
  size_t m_n = 0;
  int m_every = 0;
  const GridCollectiveSolver* m_grid = nullptr;
  int m_shift = 0;
  unsigned m_buckets = 0;
  bool m_enabled = false, m_permuted = false;
  CUdeviceptr m_key = 0, m_source = 0, m_count = 0, m_sums = 0, m_origin[2] = {0, 0};
  std::unique_ptr<DeviceParticleBuffers> m_spare;
};

// ---------------------------------------------------------------------------------------------
// Particles made on the device: a matched bunch sampled by the host's code (fusetrack/device/random.h,
// make_particle as Particles::set), compiled with fma off whatever the tracking's mode, so that the
// particles are bitwise those of MatchedBunchShare::sample; the sums of the sample moments and the
// alive count reduced on the device in a fixed order (no particle comes back for them).

constexpr unsigned kSamplerThreads = 256;
constexpr unsigned kSamplerMaxBlocks = 1024;

const char* kSamplerSource = R"(#include "fusetrack/device/random.h"
#include "fusetrack/device/particle.h"

struct FtParticleArrays {
  double* x; double* px; double* y; double* py; double* zeta; double* delta;
  double* ptau; double* rpp; double* rvv;
  int* state; int* lost_turn; long long* lost_element;
};

// Particles [0, n) of the arrays are particles first + [0, n) of the bunch.
extern "C" __global__ void fusetrack_sample_matched(FtParticleArrays P, ft::ft_longitudinal_sampler s,
                                                   unsigned long long seed, unsigned long long first, long long n,
                                                   double x, double px, double y, double py, double beta0) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    double zeta = 0.0, delta = 0.0;
    ft::ft_sample_longitudinal(s, seed, first + (unsigned long long)i, &zeta, &delta);
    const ft::ParticleView p = ft::make_particle(x, px, y, py, zeta, delta, beta0);
    P.x[i] = p.x; P.px[i] = p.px; P.y[i] = p.y; P.py[i] = p.py; P.zeta[i] = p.zeta; P.delta[i] = p.delta;
    P.ptau[i] = p.ptau; P.rpp[i] = p.rpp; P.rvv[i] = p.rvv;
    P.state[i] = p.state; P.lost_turn[i] = -1; P.lost_element[i] = -1;
  }
}

// Sums of zeta, zeta^2, delta, delta^2 per block (4 doubles each): a grid-stride loop, then a fixed
// tree over the block's 256 threads; the host adds the blocks in order (deterministic for a given n).
extern "C" __global__ void __launch_bounds__(256) fusetrack_longitudinal_sums(const double* zeta, const double* delta,
                                                                            long long n, double* out) {
  __shared__ double acc[4][256];
  double a = 0.0, b = 0.0, c = 0.0, d = 0.0;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) {
    const double z = zeta[i], e = delta[i];
    a += z; b += z * z; c += e; d += e * e;
  }
  const int t = threadIdx.x;
  acc[0][t] = a; acc[1][t] = b; acc[2][t] = c; acc[3][t] = d;
  __syncthreads();
  for (int h = 128; h > 0; h >>= 1) {
    if (t < h)
      for (int k = 0; k < 4; ++k) acc[k][t] += acc[k][t + h];
    __syncthreads();
  }
  if (t < 4) out[4 * blockIdx.x + t] = acc[t][0];
}

// Particles alive (state > 0), added into *count (integer atomics: exact).
extern "C" __global__ void __launch_bounds__(256) fusetrack_count_alive(const int* state, long long n,
                                                                      unsigned long long* count) {
  __shared__ unsigned long long acc[256];
  unsigned long long c = 0;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) c += state[i] > 0;
  const int t = threadIdx.x;
  acc[t] = c;
  __syncthreads();
  for (int h = 128; h > 0; h >>= 1) {
    if (t < h) acc[t] += acc[t + h];
    __syncthreads();
  }
  if (t == 0) atomicAdd(count, acc[0]);
}
)";

unsigned sampler_blocks(size_t n) {
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min<size_t>((n + kSamplerThreads - 1) / kSamplerThreads, kSamplerMaxBlocks)));
}

/// Device copies of the sampler's tables (freed with the object) and the view over them.
class DeviceSamplerTables {
 public:
  DeviceSamplerTables(const cuda::Driver& d, const LongitudinalSamplerTables& t) : m_d(d) {
    m_view.zeta = copy(t.zeta);
    m_view.density = copy(t.density);
    m_view.cumulative = copy(t.cumulative);
    m_view.potential = copy(t.potential);
    m_view.n = static_cast<int>(t.zeta.size());
    m_view.gaussian = t.gaussian ? 1 : 0;
    m_view.sigma_delta = t.sigma_delta;
    m_view.k_max = t.k_max;
    m_view.inv_ac = t.inv_ac;
    m_view.u_grid = copy(t.u_grid);
    m_view.u_density = copy(t.u_density);
    m_view.u_cumulative = copy(t.u_cumulative);
    m_view.u_n = static_cast<int>(t.u_grid.size());
  }
  ~DeviceSamplerTables() {
    for (CUdeviceptr p : m_owned) m_d.mem_free(p);
  }
  DeviceSamplerTables(const DeviceSamplerTables&) = delete;
  DeviceSamplerTables& operator=(const DeviceSamplerTables&) = delete;
  ft_longitudinal_sampler& view() { return m_view; }

 private:
  const double* copy(const std::vector<double>& v) {
    if (v.empty()) return nullptr;
    CUdeviceptr p = 0;
    check_alloc(m_d, &p, v.size() * sizeof(double), "cuMemAlloc(sampler tables)");
    m_owned.push_back(p);
    check(m_d.memcpy_htod(p, v.data(), v.size() * sizeof(double)), "cuMemcpyHtoD(sampler tables)");
    return reinterpret_cast<const double*>(static_cast<uintptr_t>(p));
  }
  const cuda::Driver& m_d;
  std::vector<CUdeviceptr> m_owned;
  ft_longitudinal_sampler m_view{};
};

}  // namespace

KernelSource matched_bunch_sampler_source() {
  KernelSource src;
  src.name = "fusetrack_sampler.cu";
  src.text = kSamplerSource;
  src.headers = framework_device_headers();
  src.fma = FmaMode::Off;  // bitwise the host sampler's particles
  return src;
}

namespace {

/// The sampler kernels of `impl`, compiled (or loaded from the cache) with their first use, with fma
/// off; the time into stats.compile_seconds.
void load_sampler_kernels(CudaBackend::Impl& impl, const std::string& cache_dir, int arch, CudaRunStats& stats) {
  if (impl.sampler_module) return;
  const cuda::Driver& d = *impl.d;
  const CompiledKernel compiled = KernelCompiler(cache_dir).compile(matched_bunch_sampler_source(), arch);
  stats.compile_seconds += compiled.seconds;
  check(d.module_load_data(&impl.sampler_module, compiled.cubin.data()), "cuModuleLoadData(sampler)");
  check(d.module_get_function(&impl.sample_matched, impl.sampler_module, "fusetrack_sample_matched"),
        "cuModuleGetFunction");
  check(d.module_get_function(&impl.longitudinal_sums, impl.sampler_module, "fusetrack_longitudinal_sums"),
        "cuModuleGetFunction");
  check(d.module_get_function(&impl.count_alive, impl.sampler_module, "fusetrack_count_alive"), "cuModuleGetFunction");
}

/// Fills particles [0, share.count()) of `dp` with the share's particles, on the device; returns the
/// sums of their zeta, delta and squares. Wall time into stats.generate_seconds.
LongitudinalSums make_particles_on_device(CudaBackend::Impl& impl, const std::string& cache_dir, int arch,
                                          const MatchedBunchShare& share, DeviceParticles& dp, CudaRunStats& stats) {
  load_sampler_kernels(impl, cache_dir, arch, stats);
  const auto t0 = std::chrono::steady_clock::now();
  const cuda::Driver& d = *impl.d;
  LongitudinalSums sums;
  long long n = static_cast<long long>(share.count());
  sums.count = static_cast<double>(n);
  if (n == 0) return sums;
  DeviceSamplerTables tables(d, share.tables());
  unsigned long long seed = share.seed(), first = share.first();
  double x = share.orbit()[0], px = share.orbit()[1], y = share.orbit()[2], py = share.orbit()[3];
  double beta0 = share.beta0();
  const unsigned blocks = sampler_blocks(share.count()) * 8;  // enough resident threads to hide latency
  {
    void* args[] = {&dp, &tables.view(), &seed, &first, &n, &x, &px, &y, &py, &beta0};
    check(d.launch_kernel(impl.sample_matched, blocks, 1, 1, kSamplerThreads, 1, 1, 0, nullptr, args, nullptr),
          "cuLaunchKernel(sample)");
  }
  const unsigned sum_blocks = sampler_blocks(share.count());
  std::vector<double> block_sums(4 * size_t(sum_blocks));
  CUdeviceptr out = 0;
  check_alloc(d, &out, block_sums.size() * sizeof(double), "cuMemAlloc(sums)");
  {
    void* args[] = {&dp.zeta, &dp.delta, &n, &out};
    check(d.launch_kernel(impl.longitudinal_sums, sum_blocks, 1, 1, kSamplerThreads, 1, 1, 0, nullptr, args, nullptr),
          "cuLaunchKernel(sums)");
  }
  const CUresult copied = d.memcpy_dtoh(block_sums.data(), out, block_sums.size() * sizeof(double));
  d.mem_free(out);
  check(copied, "cuMemcpyDtoH(sums)");
  for (size_t b = 0; b < sum_blocks; ++b) {
    sums.zeta += block_sums[4 * b];
    sums.zeta2 += block_sums[4 * b + 1];
    sums.delta += block_sums[4 * b + 2];
    sums.delta2 += block_sums[4 * b + 3];
  }
  stats.generate_seconds += seconds_since(t0);
  return sums;
}

/// Particles [0, n) of `dp` alive (state > 0), counted on the device.
size_t count_alive_on_device(const CudaBackend::Impl& impl, const DeviceParticles& dp, size_t n) {
  if (n == 0) return 0;
  const cuda::Driver& d = *impl.d;
  CUdeviceptr count = 0;
  check_alloc(d, &count, sizeof(unsigned long long), "cuMemAlloc(count)");
  unsigned long long alive = 0;
  CUresult rc = d.memset_d8(count, 0, sizeof(alive));
  if (rc == CUDA_SUCCESS) {
    CUdeviceptr state = dp.state;
    long long nn = static_cast<long long>(n);
    void* args[] = {&state, &nn, &count};
    rc = d.launch_kernel(impl.count_alive, sampler_blocks(n), 1, 1, kSamplerThreads, 1, 1, 0, nullptr, args, nullptr);
  }
  if (rc == CUDA_SUCCESS) rc = d.memcpy_dtoh(&alive, count, sizeof(alive));
  d.mem_free(count);
  check(rc, "counting the particles alive");
  return static_cast<size_t>(alive);
}

/// Host arrays for the particles of `share` (ids first + i; the rest is overwritten by the copy
/// from the device): the 13 arrays are allocated and first touched in parallel threads, which at
/// 10^8 particles (8.8 GB) takes a fraction of Particles(n)'s single-threaded page faulting.
Particles host_arrays_for(const MatchedBunchShare& share) {
  const size_t n = share.count();
  require_host_memory(saturating_product({n, kHostBytesPerParticle}), fmt::format("{} particles", n));
  Particles p;
  p.beta0 = share.beta0();
  const int64_t first = static_cast<int64_t>(share.first());
  const std::function<void()> jobs[] = {[&] { p.x.resize(n); },
                                        [&] { p.px.resize(n); },
                                        [&] { p.y.resize(n); },
                                        [&] { p.py.resize(n); },
                                        [&] { p.zeta.resize(n); },
                                        [&] { p.delta.resize(n); },
                                        [&] { p.ptau.resize(n); },
                                        [&] { p.rpp.resize(n); },
                                        [&] { p.rvv.resize(n); },
                                        [&] { p.state.resize(n); },
                                        [&] { p.lost_turn.resize(n); },
                                        [&] { p.lost_element.resize(n); },
                                        [&] {
                                          p.id.resize(n);
                                          for (size_t i = 0; i < n; ++i) p.id[i] = first + static_cast<int64_t>(i);
                                        }};
  const int count = static_cast<int>(std::size(jobs));
#pragma omp parallel for num_threads(count) schedule(dynamic)
  for (int j = 0; j < count; ++j) jobs[j]();
  return p;
}

}  // namespace

struct CudaBackend::DeviceSource {
  const MatchedBunchShare& share;
  bool download_final = true;
  const std::function<void(const Particles&)>& on_initial;
  MatchedShareRun result;
};

CudaBackend::MatchedShareRun CudaBackend::track_matched_share(const MatchedBunchShare& share, Particles& particles,
                                                              const TrackOptions& options, bool download_final,
                                                              const std::function<void(const Particles&)>& on_initial) {
  if (!runs_collective(m_lattice, options)) {  // single-particle runs keep the particles on the host
    m_stats = CudaRunStats{};
    const auto t0 = std::chrono::steady_clock::now();
    particles = share.sample();
    const double made = seconds_since(t0);
    MatchedShareRun r;
    r.initial = longitudinal_sums(particles);
    if (on_initial) on_initial(particles);
    run(particles, options, false);
    m_stats.generate_seconds = made;
    r.alive = particles.alive_count();
    return r;
  }
  DeviceSource source{share, download_final, on_initial, {}};
  particles = Particles();
  particles.beta0 = share.beta0();
  run_collective(particles, options, &source);
  return source.result;
}

void CudaBackend::track(Particles& particles, const TrackOptions& options) {
  if (runs_collective(m_lattice, options)) {
    run_collective(particles, options);
    return;
  }
  run(particles, options, false);
}

void CudaBackend::parameters_changed() {
  Impl& impl = *m_impl;
  const cuda::Driver& d = *impl.d;
  check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
  // Motifs fix integer fields of the elements as constants (codegen.h, KernelSource::motif_at): when a
  // changed field changes the generated source or the motif table, the switch kernels are made again.
  bool motifs_stale = false;
  for (const auto& [key, k] : impl.kernels) {
    if (k.source.dispatch != Dispatch::Switch || k.source.motif_at.empty()) continue;
    const KernelSource again = generate_fused_kernel(m_lattice, k.source.fma, Dispatch::Switch, k.source.max_registers,
                                                     impl.variants, k.source.particles_per_thread);
    motifs_stale |= again.text != k.source.text || again.motif_at != k.source.motif_at;
  }
  if (motifs_stale) {
    for (auto& [key, k] : impl.kernels)
      if (k.module) d.module_unload(k.module);
    impl.kernels.clear();
    if (impl.switch_steps) d.mem_free(impl.switch_steps);
    if (impl.switch_params) d.mem_free(impl.switch_params);
    impl.switch_steps = impl.switch_params = 0;
  }
  // The switch kernels read the parameter table: it is uploaded again (same layout), no recompile.
  if (impl.switch_params) {
    const KernelSource* source = impl.collective_ready && impl.collective_kernels.source.dispatch == Dispatch::Switch
                                     ? &impl.collective_kernels.source
                                     : nullptr;
    for (const auto& [key, k] : impl.kernels)
      if (!source && static_cast<Dispatch>(std::get<1>(key)) != Dispatch::Baked) source = &k.source;
    if (source) {
      const KernelTables tables = kernel_tables(m_lattice, *source, impl.variants);
      check(d.memcpy_htod(impl.switch_params, tables.params.data(), tables.params.size() * sizeof(uint64_t)),
            "cuMemcpyHtoD(parameters)");
    }
  }
  // Baked kernels carry the parameters as constants: regenerated on their next use.
  for (auto it = impl.kernels.begin(); it != impl.kernels.end();) {
    if (static_cast<Dispatch>(std::get<1>(it->first)) == Dispatch::Baked) {
      if (it->second.module) d.module_unload(it->second.module);
      it = impl.kernels.erase(it);
    } else {
      ++it;
    }
  }
  // Collective solvers copy their element's parameters: rebuilt on the next track().
  if (impl.collective_ready) impl.free_collective();
}

void CudaBackend::set_variants(const std::vector<const Lattice*>& variants) {
  check_variants_trackable(m_lattice, variants);
  Impl& impl = *m_impl;
  const cuda::Driver& d = *impl.d;
  check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
  // The kernels' transformed cases and the tables depend on the variants: made again on next use.
  for (auto& [key, k] : impl.kernels)
    if (k.module) d.module_unload(k.module);
  impl.kernels.clear();
  impl.measured_forms.clear();
  if (impl.switch_steps) d.mem_free(impl.switch_steps);
  if (impl.switch_params) d.mem_free(impl.switch_params);
  impl.switch_steps = impl.switch_params = 0;
  impl.variants = variants;
  impl.variant_stride = 0;
}

void CudaBackend::track_per_element(Particles& particles, const TrackOptions& options) {
  run(particles, options, true);
}

void CudaBackend::run(Particles& particles, const TrackOptions& options, bool per_element) {
  if (per_element && runs_collective(m_lattice, options))
    throw Error("per-element launches are not available for lattices with collective elements");
  const cuda::Driver& d = *m_impl->d;
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
  m_stats = CudaRunStats{};
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  const bool whole_sequence = begin == 0 && end == n_elements;
  KernelForm form{choose_dispatch(m_lattice, m_options.dispatch), m_options.max_registers,
                  particles_per_thread_setting(m_options.particles_per_thread)};
  if ((!whole_sequence || per_element) && form.dispatch == Dispatch::Baked)
    form.dispatch = Dispatch::Switch;  // baked kernels run the whole sequence
  const bool variants = !m_impl->variants.empty();
  if (variants) {
    if (m_options.dispatch != Dispatch::Auto && m_options.dispatch != Dispatch::Switch)
      throw Error(
          fmt::format("lattice variants run with the switch dispatch (each particle reads its variant's "
                      "parameters); {} was asked for",
                      dispatch_name(m_options.dispatch)));
    form.dispatch = Dispatch::Switch;
    for (size_t i = 0; i < particles.variant.size(); ++i) particle_variant(particles, i, m_impl->variants.size());
  } else if (!particles.variant.empty()) {
    for (size_t i = 0; i < particles.variant.size(); ++i) particle_variant(particles, i, 1);
  }
  std::vector<std::pair<KernelForm, double>> measured;
  if (!variants && m_options.dispatch == Dispatch::Auto && !per_element && whole_sequence &&
      worth_measuring(particles, options)) {
    form = measured_form(particles, options);
    measured = m_impl->last_measurement;
  }
  run_form(particles, options, per_element, form);
  m_stats.measured_element_passes_per_s = std::move(measured);
}

namespace {

/// Auto dispatch: the sample of a run that each candidate form is timed on, and its size.
constexpr size_t kProbeMaxParticles = size_t(1) << 20;  // enough to fill any current GPU
constexpr double kProbeElementPasses = 2e9;             // about 10 ms per candidate at 2e11/s
constexpr double kProbeShareOfRun = 0.05;               // the probes' share of the run at most

size_t probe_particles(size_t n) { return std::min(n, kProbeMaxParticles); }

int64_t probe_turns(size_t sample, size_t elements, int64_t turns) {
  const double per_turn = static_cast<double>(sample) * static_cast<double>(std::max<size_t>(elements, 1));
  return std::clamp<int64_t>(static_cast<int64_t>(kProbeElementPasses / per_turn), 1, std::max<int64_t>(turns, 1));
}

}  // namespace

std::string kernel_form_name(const KernelForm& form) {
  std::string name = dispatch_name(form.dispatch);
  if (form.max_registers > 0) name += fmt::format(", {} registers", form.max_registers);
  if (form.particles_per_thread > 1) name += fmt::format(", {} particles per thread", form.particles_per_thread);
  return name;
}

bool CudaBackend::worth_measuring(const Particles& particles, const TrackOptions& options) const {
  const size_t elements = m_lattice.sequence().size();
  const size_t sample = probe_particles(particles.size());
  const double run = static_cast<double>(particles.size()) * static_cast<double>(elements) *
                     static_cast<double>(std::max<int64_t>(options.turns, 0));
  const double probes = 5.0 * static_cast<double>(sample) * static_cast<double>(elements) *
                        static_cast<double>(probe_turns(sample, elements, options.turns));
  return run > 0.0 && (m_options.always_measure || probes <= kProbeShareOfRun * run);
}

KernelForm CudaBackend::measured_form(const Particles& particles, const TrackOptions& options) {
  const auto key = std::make_pair(static_cast<int>(options.fma),
                                  static_cast<int>(std::floor(std::log10(static_cast<double>(particles.size())))));
  m_impl->last_measurement.clear();
  if (auto it = m_impl->measured_forms.find(key); it != m_impl->measured_forms.end()) return it->second;

  const size_t sample = probe_particles(particles.size());
  const size_t elements = m_lattice.sequence().size();
  Particles probe(sample, particles.beta0);
  for (size_t i = 0; i < sample; ++i) probe.store(i, particles.view(i));
  TrackOptions probe_options;
  probe_options.turns = probe_turns(sample, elements, options.turns);
  probe_options.fma = options.fma;
  probe_options.first_turn = options.first_turn;

  // Register caps are not candidates: on the thin collider with 16 crab cavities (H100, 10^6
  // particles) the switch capped at 64 registers ran at 0.42x and at 80 at 0.89x of the uncapped
  // switch (92 registers): the spills cost every element, not only the rare heavy one.
  const int particles_per_thread = particles_per_thread_setting(m_options.particles_per_thread);
  std::vector<KernelForm> candidates = {{Dispatch::Switch, 0, particles_per_thread}, {Dispatch::Staged, 0, 1}};
  if (bakeable(m_lattice)) candidates.push_back({Dispatch::Baked, 0, 1});
  std::vector<std::pair<KernelForm, double>> measured;
  KernelForm best = candidates.front();
  double best_rate = 0.0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    Particles copy = probe;
    run_form(copy, probe_options, false, candidates[c]);
    const double rate = static_cast<double>(sample) * static_cast<double>(elements) *
                        static_cast<double>(probe_options.turns) / std::max(m_stats.kernel_seconds, 1e-12);
    measured.emplace_back(candidates[c], rate);
    if (rate > best_rate) best_rate = rate, best = candidates[c];
  }
  m_impl->measured_forms[key] = best;
  m_impl->last_measurement = measured;
  return best;
}

void CudaBackend::run_form(Particles& particles, const TrackOptions& options, bool per_element, KernelForm form) {
  const cuda::Driver& d = *m_impl->d;
  m_stats = CudaRunStats{};
  m_stats.form = form;
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  LoadedKernel& kernel = get_kernel(*m_impl, m_lattice, m_options, options.fma, form, m_gpu.arch, m_stats);
  const size_t particles_per_thread = static_cast<size_t>(kernel.source.particles_per_thread);
  m_stats.form.particles_per_thread = kernel.source.particles_per_thread;
  CUdeviceptr steps = m_impl->switch_steps;
  CUdeviceptr params = m_impl->switch_params;  // unused (0) by baked kernels

  // Particles resident on the device at once: all of them when they fit in 80% of free memory,
  // otherwise consecutive chunks, each tracked for all turns (single-particle physics is
  // independent per particle, so chunking does not change results).
  // (fusetrack/memory_budget.h: FUSETRACK_GPU_MEMORY_LIMIT caps the memory used.)
  size_t free_bytes = 0, total_bytes = 0;
  check(d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  const size_t n = particles.size();
  const size_t resident =
      plan_gpu_residency(n, kBytesPerParticle, free_bytes, m_options.max_resident_particles,
                         static_cast<bool>(options.callback), "a run with per-turn callbacks (monitors, checkpoints)")
          .resident;

  DeviceParticleBuffers buffers(d, *m_impl->staging, resident, m_stats);
  DeviceParticles& dp = buffers.arrays();
  // Each particle's variant (null: every particle reads the first table).
  const bool with_variants = !m_impl->variants.empty() && !particles.variant.empty();
  CUdeviceptr variant_index = 0;
  if (with_variants)
    check_alloc(d, &variant_index, std::max<size_t>(resident, 1) * sizeof(int32_t), "cuMemAlloc(variants)");
  unsigned long long variant_stride = m_impl->variant_stride;

  CUevent ev0, ev1;
  check(d.event_create(&ev0, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_create(&ev1, CU_EVENT_DEFAULT), "cuEventCreate");
  const GlobalLimits limits = m_lattice.limits();
  double beta0 = particles.beta0;
  int n_el = static_cast<int>(n_elements), eb = static_cast<int>(begin), ee = static_cast<int>(end);

  for (size_t first = 0; first < n; first += resident) {
    const size_t count = std::min(resident, n - first);
    ++m_stats.chunks;
    buffers.upload(particles, first, count);
    if (with_variants)
      check(d.memcpy_htod(variant_index, particles.variant.data() + first, count * sizeof(int32_t)),
            "cuMemcpyHtoD(variants)");
    const int64_t chunk_turns = options.callback_every > 0 ? options.callback_every : options.turns;
    int64_t done = 0;
    int n_particles = static_cast<int>(count);
    // Few particles (a DA scan late in its life): small blocks spread them over every multiprocessor.
    // FUSETRACK_THREADS_PER_BLOCK (1..128) overrides both, for the benchmarks.
    static const int tpb_from_env = [] {
      const char* v = std::getenv("FUSETRACK_THREADS_PER_BLOCK");
      return v ? std::clamp(std::atoi(v), 0, 128) : 0;
    }();
    const bool few = count < static_cast<size_t>(m_gpu.multiprocessors) * 512;
    const int tpb = m_options.threads_per_block > 0 ? m_options.threads_per_block
                    : tpb_from_env > 0              ? tpb_from_env
                    : few                           ? 32
                                                    : 128;
    // The kernel form for few particles, where the source has one (CudaBackendOptions::few_particles_form).
    static const int few_form_from_env = [] {
      const char* v = std::getenv("FUSETRACK_FEW_PARTICLES_FORM");
      return v ? std::atoi(v) : -1;
    }();
    const int few_form = m_options.few_particles_form >= 0 ? m_options.few_particles_form : few_form_from_env;
    const bool use_few_form = kernel.few_particles && (few_form < 0 ? few : few_form > 0);
    CUfunction function = use_few_form ? kernel.few_particles : kernel.function;
    if (first == 0) {  // the resources of the entry point that runs (of the first chunk's)
      d.func_get_attribute(&m_stats.registers_per_thread, CU_FUNC_ATTRIBUTE_NUM_REGS, function);
      d.func_get_attribute(&m_stats.local_bytes_per_thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function);
    }
    const size_t threads = (count + particles_per_thread - 1) / particles_per_thread;
    const unsigned blocks = static_cast<unsigned>((threads + static_cast<size_t>(tpb) - 1) / static_cast<size_t>(tpb));
    while (done < options.turns) {
      int turns_now = static_cast<int>(std::min(chunk_turns, options.turns - done));
      check(d.event_record(ev0, nullptr), "cuEventRecord");
      // Fused: one launch for `turns_now` turns of [begin, end). Per element (benchmark
      // baseline): one launch per element and turn, particles through device memory in between.
      const int64_t turn_launches = per_element ? turns_now : 1;
      for (int64_t t = 0; t < turn_launches; ++t) {
        int first_turn = static_cast<int>(options.first_turn + done + t);
        int launch_turns = per_element ? 1 : turns_now;
        const size_t element_launches = per_element ? end - begin : 1;
        for (size_t k = 0; k < element_launches; ++k) {
          int lb = per_element ? static_cast<int>(begin + k) : eb;
          int le = per_element ? lb + 1 : ee;
          void* args[] = {&dp,
                          &steps,
                          &params,
                          &n_particles,
                          &beta0,
                          &lb,
                          &le,
                          &n_el,
                          &first_turn,
                          &launch_turns,
                          const_cast<GlobalLimits*>(&limits),
                          &variant_index,
                          &variant_stride};
          check(d.launch_kernel(function, blocks, 1, 1, static_cast<unsigned>(tpb), 1, 1, 0, nullptr, args, nullptr),
                "cuLaunchKernel");
          ++m_stats.launches;
        }
      }
      check(d.event_record(ev1, nullptr), "cuEventRecord");
      check(d.event_synchronize(ev1), "kernel execution");
      float ms = 0;
      d.event_elapsed_time(&ms, ev0, ev1);
      m_stats.kernel_seconds += ms * 1e-3;
      done += turns_now;
      if (options.callback) {
        buffers.download(particles, first, count);
        if (!options.callback(done, particles)) break;
      }
    }
    if (!options.callback) buffers.download(particles, first, count);
  }
  d.event_destroy(ev0);
  d.event_destroy(ev1);
  if (variant_index) d.mem_free(variant_index);
}

namespace {

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

void check_cufft(cufftResult rc, const char* what) {
  if (rc != CUFFT_SUCCESS) throw DeviceError(fmt::format("{} failed (cuFFT error {})", what, static_cast<int>(rc)));
}

template <class T>
CUdeviceptr device_copy(const cuda::Driver& d, const std::vector<T>& v, const char* what) {
  CUdeviceptr p = 0;
  check_alloc(d, &p, std::max<size_t>(v.size() * sizeof(T), 8), what);
  if (!v.empty()) check(d.memcpy_htod(p, v.data(), v.size() * sizeof(T)), what);
  return p;
}

CUdeviceptr device_zeros(const cuda::Driver& d, size_t bytes, const char* what) {
  CUdeviceptr p = 0;
  check_alloc(d, &p, std::max<size_t>(bytes, 8), what);
  check(d.memset_d8(p, 0, std::max<size_t>(bytes, 8)), what);
  return p;
}

unsigned blocks_for(size_t n, unsigned threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

std::vector<CollectiveSnapshot> CudaBackend::collective_snapshots() const {
  std::vector<CollectiveSnapshot> profiles;  // the profile kind's (grid elements: grid_reports)
  for (size_t c = 0; c < m_impl->snapshots.size(); ++c)
    if (c < m_impl->collective.size() && m_impl->collective[c].solver) profiles.push_back(m_impl->snapshots[c]);
  return profiles;
}

std::vector<GridCollectiveReport> CudaBackend::grid_reports() const {
  std::vector<GridCollectiveReport> reports;
  for (const DeviceCollective& c : m_impl->collective)
    if (c.grid) reports.push_back(c.grid->report());
  return reports;
}

double CudaBackend::copy_bandwidth(size_t bytes) {
  const cuda::Driver& d = *m_impl->d;
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
  CUdeviceptr a = 0, b = 0;
  check_alloc(d, &a, bytes, "cuMemAlloc(bandwidth)");
  check_alloc(d, &b, bytes, "cuMemAlloc(bandwidth)");
  CUevent e0, e1;
  check(d.event_create(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_create(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
  float best_ms = 1e30f;
  for (int i = 0; i < 6; ++i) {
    check(d.event_record(e0, nullptr), "cuEventRecord");
    check(d.memcpy_dtod(b, a, bytes), "cuMemcpyDtoD");
    check(d.event_record(e1, nullptr), "cuEventRecord");
    check(d.event_synchronize(e1), "bandwidth copy");
    float ms = 0;
    d.event_elapsed_time(&ms, e0, e1);
    if (i > 0) best_ms = std::min(best_ms, ms);
  }
  d.event_destroy(e0);
  d.event_destroy(e1);
  d.mem_free(a);
  d.mem_free(b);
  return 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
}

void CudaBackend::run_collective(Particles& particles, const TrackOptions& options, DeviceSource* source) {
  const cuda::Driver& d = *m_impl->d;
  Impl& impl = *m_impl;
  check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
  m_stats = CudaRunStats{};
  const auto setup_start = std::chrono::steady_clock::now();
  const size_t n_elements = m_lattice.sequence().size();
  if (options.element_begin != 0 || std::min(options.element_end, n_elements) != n_elements)
    throw Error("a lattice with collective elements is tracked whole turns at a time (no element ranges)");
  const TurnProgram program = TurnProgram::build(m_lattice);
  const size_t K = program.collective.size();
  const size_t n = source ? source->share.count() : particles.size();
  const size_t macroparticles = options.macroparticles > 0 ? options.macroparticles : n;

  // Every particle must be resident: the profile is a sum over the whole bunch every turn.
  size_t free_bytes = 0, total_bytes = 0;
  check(d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  plan_gpu_residency(n, kBytesPerParticle, free_bytes, 0, true, "a collective run");

  // The solvers, device tables and kernels, built once and kept (multi-turn memory).
  if (!impl.collective_ready || impl.collective_fma != options.fma ||
      impl.collective_macroparticles != macroparticles) {
    impl.free_collective();
    std::vector<SliceGrid> grids;
    for (size_t c = 0; c < K; ++c) {
      DeviceCollective dc;
      if (m_lattice.element(program.collective[c]).type->is_moments_collective()) {
        dc.moments = std::make_unique<MomentsCollectiveSolver>(m_lattice, program.collective[c], macroparticles);
        const size_t ns = static_cast<size_t>(dc.moments->n_slices());
        dc.deposit_words = ns * kSliceCentroidAccumulators + 1;
        dc.counts = device_zeros(d, dc.deposit_words * sizeof(uint64_t), "cuMemAlloc(slice moments)");
        dc.field = device_zeros(d, ns * FT_SLICE_KICK_VALUES * sizeof(double), "cuMemAlloc(slice kicks)");
        dc.profile_in_shared = dc.deposit_words * sizeof(uint64_t) <= 96 * 1024;
        // FUSETRACK_MOMENT_WINDOW=0: no window, every contribution to global memory (the benchmark's baseline).
        const char* window_env = std::getenv("FUSETRACK_MOMENT_WINDOW");
        if (!dc.profile_in_shared && !(window_env && std::string(window_env) == "0"))
          dc.window_words = std::min(ns, static_cast<size_t>(kMomentWindowSlices)) * kSliceCentroidAccumulators + 1;
        grids.push_back(dc.moments->slice_grid());
        impl.collective.push_back(std::move(dc));
        DeviceCollective& kept = impl.collective.back();  // (its buffers freed by free_collective from here on)
        void* host = nullptr;
        check(d.mem_alloc_host(&host, kept.deposit_words * sizeof(uint64_t)), "cuMemAllocHost(slice moments)");
        kept.host_moments = static_cast<uint64_t*>(host);
        void* kicks = const_cast<double*>(kept.moments->kicks().data());  // (the table is never reallocated)
        if (d.mem_host_register(kicks, kept.moments->kicks().size() * sizeof(double), 0) == CUDA_SUCCESS)
          kept.registered_kicks = kicks;
        continue;
      }
      if (m_lattice.element(program.collective[c]).type->is_grid_collective()) {
        dc.grid = std::make_unique<GridCollectiveSolver>(m_lattice, program.collective[c], options.fma, macroparticles);
        const size_t nodes = dc.grid->node_count();
        dc.grid_acc = device_zeros(d, (nodes + 1) * sizeof(uint64_t), "cuMemAlloc(charge grid)");
        dc.extent_acc = device_zeros(d, (kExtentAccumulators + 1) * sizeof(uint64_t), "cuMemAlloc(grid extent)");
        dc.field_stride = dc.grid->model().solver == FT_GRID_3D ? 3 : 2;
        dc.grid_field =
            device_zeros(d, static_cast<size_t>(dc.field_stride) * nodes * sizeof(double), "cuMemAlloc(grid field)");
        dc.ex = dc.grid_field;
        dc.ey = dc.grid_field + sizeof(double);
        if (dc.field_stride == 3) dc.ez = dc.grid_field + 2 * sizeof(double);
        grids.push_back(SliceGrid{});
        impl.collective.push_back(std::move(dc));
        continue;
      }
      dc.solver = std::make_unique<CollectiveSolver>(m_lattice, program.collective[c], options.fma, macroparticles);
      const CollectiveSolver& sv = *dc.solver;
      const size_t ns = static_cast<size_t>(sv.n_slices());
      grids.push_back(sv.slice_grid());
      dc.counts = device_zeros(d, ns * sizeof(uint64_t), "cuMemAlloc(profile)");
      dc.field = device_zeros(d, ns * sizeof(double), "cuMemAlloc(field)");
      dc.lambda = device_zeros(d, ns * sizeof(double), "cuMemAlloc(line density)");
      dc.conv = device_zeros(d, ns * sizeof(double), "cuMemAlloc(convolution)");
      if (sv.method() == FT_SOLVE_TIME_DOMAIN) {
        dc.wake_kernel = device_copy(d, sv.wake_kernel(), "cuMemAlloc(wake)");
      } else if (options.fma == FmaMode::On) {
        // cuFFT: D2Z of the zero-padded line density, times Z, Z2D.
        const int N = sv.fft_length();
        dc.use_cufft = true;
        std::vector<double> half(sv.spectrum().begin(), sv.spectrum().begin() + 2 * (N / 2 + 1));
        dc.half_spectrum = device_copy(d, half, "cuMemAlloc(spectrum)");
        d.mem_free(dc.lambda);
        dc.lambda = device_zeros(d, static_cast<size_t>(N) * sizeof(double), "cuMemAlloc(line density)");
        dc.fft_y = device_zeros(d, static_cast<size_t>(N / 2 + 1) * 2 * sizeof(double), "cuMemAlloc(FFT spectrum)");
        dc.fft_real_out = device_zeros(d, static_cast<size_t>(N) * sizeof(double), "cuMemAlloc(FFT output)");
        check_cufft(cufftPlan1d(&dc.plan_forward, N, CUFFT_D2Z, 1), "cufftPlan1d(D2Z)");
        check_cufft(cufftPlan1d(&dc.plan_inverse, N, CUFFT_Z2D, 1), "cufftPlan1d(Z2D)");
      } else {
        const int N = sv.fft_length();
        dc.spectrum = device_copy(d, sv.spectrum(), "cuMemAlloc(spectrum)");
        dc.twiddles = device_copy(d, sv.twiddles(), "cuMemAlloc(twiddles)");
        dc.fft_x = device_zeros(d, static_cast<size_t>(N) * 2 * sizeof(double), "cuMemAlloc(FFT)");
        dc.fft_y = device_zeros(d, static_cast<size_t>(N) * 2 * sizeof(double), "cuMemAlloc(FFT)");
      }
      if (sv.mode_count() > 0) {
        dc.mode_field = device_copy(d, sv.mode_field_table(), "cuMemAlloc(modes)");
        dc.mode_deposit = device_copy(d, sv.mode_deposit_table(), "cuMemAlloc(modes)");
        dc.mode_turn = device_copy(d, sv.mode_turn_factor(), "cuMemAlloc(modes)");
        dc.mode_wrap = device_copy(d, sv.mode_wrap_factor(), "cuMemAlloc(modes)");
        dc.memory = device_zeros(d, static_cast<size_t>(sv.mode_count()) * 2 * sizeof(double), "cuMemAlloc(memory)");
        dc.amplitude =
            device_zeros(d, static_cast<size_t>(sv.mode_count()) * 2 * sizeof(double), "cuMemAlloc(amplitude)");
      }
      // A block-local profile in shared memory while it leaves room for two blocks per SM.
      dc.profile_in_shared = ns * sizeof(uint64_t) <= 96 * 1024;
      dc.deposit_words = ns;
      impl.collective.push_back(std::move(dc));
      // The profile's round trip through the host for the sum over ranks, page-locked.
      void* host = nullptr;
      check(d.mem_alloc_host(&host, ns * sizeof(uint64_t)), "cuMemAllocHost(profile)");
      impl.collective.back().host_moments = static_cast<uint64_t*>(host);
    }
    CollectiveKernels& kk = impl.collective_kernels;
    const Dispatch dispatch = choose_dispatch(m_lattice, m_options.dispatch);
    kk.source = generate_collective_kernels(m_lattice, options.fma, dispatch, grids);
    kk.derived_energy = collective_energy_is_derived(m_lattice);  // as the source was generated
    if (const char* dump = std::getenv("FUSETRACK_DUMP_SOURCE"); dump && *dump)
      dump_kernel_source(kk.source,
                         fmt::format("{}/collective_{}_{}", dump, dispatch == Dispatch::Baked ? "baked" : "switch",
                                     options.fma == FmaMode::On ? "fma_on" : "fma_off"));
    KernelCompiler compiler(m_options.cache_dir);
    const CompiledKernel compiled = compiler.compile(kk.source, m_gpu.arch);
    m_stats.compile_seconds += compiled.seconds;
    m_stats.kernel_from_cache = compiled.from_cache;
    check(d.module_load_data(&kk.module, compiled.cubin.data()), "cuModuleLoadData");
    for (size_t k = 0; k <= K; ++k) {
      CUfunction f = nullptr;
      check(d.module_get_function(&f, kk.module, segment_kernel_name(k).c_str()), "cuModuleGetFunction");
      kk.segments.push_back(f);
      if (k < K && impl.collective[k].profile_in_shared) {
        const int bytes = static_cast<int>(impl.collective[k].deposit_words * sizeof(uint64_t));
        check(d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
              "cuFuncSetAttribute(shared profile)");
      }
    }
    check(d.module_get_function(&kk.wrap, kk.module, kWrapKernelName), "cuModuleGetFunction");
    check(d.module_get_function(&kk.derive_energy, kk.module, kDeriveEnergyKernelName), "cuModuleGetFunction");
    if (impl.collective[0].profile_in_shared) {
      const int bytes = static_cast<int>(impl.collective[0].deposit_words * sizeof(uint64_t));
      check(d.func_set_attribute(kk.wrap, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
            "cuFuncSetAttribute(shared profile)");
    }
    const std::pair<CUfunction*, const char*> solver_kernels[] = {
        {&kk.line_density, "fusetrack_line_density"}, {&kk.convolve, "fusetrack_convolve"},
        {&kk.fft_pass, "fusetrack_fft_pass"},         {&kk.half_spectrum_product, "fusetrack_half_spectrum_product"},
        {&kk.finish_field, "fusetrack_finish_field"}, {&kk.mode_update, "fusetrack_mode_update"}};
    for (const auto& [fn, name] : solver_kernels)
      check(d.module_get_function(fn, kk.module, name), "cuModuleGetFunction");
    bool any_grid = false;
    for (const DeviceCollective& c : impl.collective) any_grid |= c.grid != nullptr;
    if (any_grid) {
      const std::pair<CUfunction*, const char*> grid_kernels[] = {
          {&kk.grid_extent, "fusetrack_grid_extent"},       {&kk.grid_deposit, "fusetrack_grid_deposit"},
          {&kk.grid_density, "fusetrack_grid_density"},     {&kk.grid_field_finish, "fusetrack_grid_field_finish"},
          {&kk.tile_keys, "fusetrack_tile_keys"},           {&kk.tile_scan_blocks, "fusetrack_tile_scan_blocks"},
          {&kk.tile_scan_sums, "fusetrack_tile_scan_sums"}, {&kk.tile_scan_add, "fusetrack_tile_scan_add"},
          {&kk.tile_slots, "fusetrack_tile_slots"},         {&kk.tile_gather, "fusetrack_tile_gather"},
          {&kk.tile_restore, "fusetrack_tile_restore"}};
      for (const auto& [fn, name] : grid_kernels)
        check(d.module_get_function(fn, kk.module, name), "cuModuleGetFunction");
    }
    // The switch tables, when that dispatch is used.
    if (kk.source.dispatch == Dispatch::Switch && !impl.switch_steps) {
      const KernelTables tables = kernel_tables(m_lattice, kk.source);
      impl.switch_steps = device_copy(d, std::vector<KernelStep>(tables.steps), "cuMemAlloc(steps)");
      impl.switch_step_entries = tables.steps.size();
      if (!impl.switch_params) impl.switch_params = device_copy(d, tables.params, "cuMemAlloc(parameters)");
    }
    impl.snapshots.assign(K, CollectiveSnapshot{});
    for (size_t c = 0; c < K; ++c) {
      CollectiveSnapshot& snap = impl.snapshots[c];
      snap.sequence_index = program.collective[c];
      if (!impl.collective[c].solver) continue;  // a grid element (grid_reports)
      snap.element_name = impl.collective[c].solver->element_name();
      snap.grid = impl.collective[c].solver->grid();
      snap.counts.assign(static_cast<size_t>(snap.grid.n_slices), 0);
      snap.field.assign(static_cast<size_t>(snap.grid.n_slices), 0.0);
    }
    impl.collective_fma = options.fma;
    impl.collective_macroparticles = macroparticles;
    impl.collective_ready = true;
  }
  CollectiveKernels& kk = impl.collective_kernels;
  d.func_get_attribute(&m_stats.registers_per_thread, CU_FUNC_ATTRIBUTE_NUM_REGS, kk.segments[0]);
  d.func_get_attribute(&m_stats.local_bytes_per_thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, kk.segments[0]);

  // Particles on the device for the whole call.
  m_stats.setup_seconds = seconds_since(setup_start) - m_stats.compile_seconds;
  DeviceParticleBuffers buffers(d, *impl.staging, n, m_stats);
  DeviceParticles& dp = buffers.arrays();
  TileOrder tiles(d, impl.collective, buffers, n, m_options.tile_sort_every);
  // Particles made on the device have a host copy only once one is asked for (ids first + i).
  auto host_particles = [&]() -> Particles& {
    if (source && particles.size() != n) particles = host_arrays_for(source->share);
    return particles;
  };
  // Back to the host: the particles, and the last turn's profiles and fields.
  // The kernels do not store rpp and rvv when they are derived from delta and ptau (codegen.h): a
  // kernel with the segments' numerics writes them before a download that follows segment kernels
  // (particles made on the device keep the sampler's own rpp and rvv until they are tracked).
  bool energy_stale = false;
  auto down_particles = [&] {
    if (kk.derived_energy && energy_stale && n > 0) {
      energy_stale = false;
      int count = static_cast<int>(n);
      double b0 = source ? source->share.beta0() : particles.beta0;
      void* args[] = {&dp, &count, &b0};
      const unsigned blocks = std::min(blocks_for(n, 256), static_cast<unsigned>(m_gpu.multiprocessors) * 8u);
      check(d.launch_kernel(kk.derive_energy, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
    }
    tiles.restore(kk, buffers, m_gpu.multiprocessors);
    buffers.download(host_particles(), 0, n);
  };
  auto down_snapshots = [&] {
    for (size_t c = 0; c < K; ++c) {
      if (!impl.collective[c].solver) continue;  // grid elements keep their state on the host
      download(d, impl.snapshots[c].counts, impl.collective[c].counts, 0, impl.snapshots[c].counts.size());
      download(d, impl.snapshots[c].field, impl.collective[c].field, 0, impl.snapshots[c].field.size());
    }
  };
  auto down = [&] {
    down_particles();
    down_snapshots();
  };
  if (source) {
    source->result.initial =
        make_particles_on_device(impl, m_options.cache_dir, m_gpu.arch, source->share, dp, m_stats);
    if (source->on_initial && n > 0) {
      down_particles();
      source->on_initial(particles);
    }
  } else if (n > 0) {
    buffers.upload(particles, 0, n);
  }

  const GlobalLimits limits = m_lattice.limits();
  double beta0 = source ? source->share.beta0() : particles.beta0;
  int n_particles = static_cast<int>(n), n_el = static_cast<int>(n_elements);
  CUdeviceptr steps = impl.switch_steps, params = impl.switch_params;
  constexpr unsigned kThreads = 256;
  auto launch = [&](CUfunction f, unsigned blocks, unsigned threads, unsigned shared, void** args) {
    check(d.launch_kernel(f, blocks, 1, 1, threads, 1, 1, shared, nullptr, args, nullptr), "cuLaunchKernel");
    ++m_stats.launches;
  };
  // A grid element: the adapted extent's moments (the segment kernel made the first pass), the
  // deposit on this turn's grid (in the segment kernel for fixed grids), the integer grid down, summed
  // over ranks, solved on the host with the CPU backend's code, the fields up for the next kick.
  std::vector<uint64_t> host_grid;
  std::vector<double> host_field;
  bool any_grid = false;
  for (const DeviceCollective& c : impl.collective) any_grid |= c.grid != nullptr;
  auto grid_solve = [&](DeviceCollective& dc) {
    GridCollectiveSolver& g = *dc.grid;
    const size_t nodes = g.node_count();
    const auto t_transfer = std::chrono::steady_clock::now();
    double solve_wall = 0.0;
    if (g.adaptive()) {
      std::vector<uint64_t> acc(kExtentAccumulators + 1);
      const int passes = g.extent_passes();
      for (int pass = 0; pass < passes; ++pass) {
        if (pass > 0) {
          check(d.memset_d8(dc.extent_acc, 0, acc.size() * sizeof(uint64_t)), "cuMemset(grid extent)");
          ExtentScales extent = g.extent_scales();
          void* args[] = {&dp, &n_particles, &extent, &dc.extent_acc};
          launch(kk.grid_extent,
                 std::max(1u, std::min(blocks_for(n, kThreads), static_cast<unsigned>(m_gpu.multiprocessors) * 8u)),
                 kThreads, 0, args);
        }
        download(d, acc, dc.extent_acc, 0, acc.size());
        if (options.reduce_profile) options.reduce_profile(acc.data(), acc.size());
        g.set_extent(acc.data());
      }
      check(d.memset_d8(dc.grid_acc, 0, (nodes + 1) * sizeof(uint64_t)), "cuMemset(charge grid)");
      ChargeGridSpec spec = g.spec();
      long long outside_slot = static_cast<long long>(nodes);
      void* args[] = {&dp, &n_particles, &spec, &dc.grid_acc, &outside_slot};
      launch(kk.grid_deposit,
             std::max(1u, std::min(blocks_for(n, kThreads), static_cast<unsigned>(m_gpu.multiprocessors) * 8u)),
             kThreads, 0, args);
    }
    if (!options.reduce_profile && !dc.gpu_poisson_failed && !std::getenv("FUSETRACK_HOST_POISSON")) {
      // One rank: charge density, Poisson solve and frame factor on the GPU; only the outside count comes down.
      if (!dc.gpu_poisson) {
        try {
          const PoissonSolver& host = g.poisson();
          // A fixed grid with fma on may take the line transforms (GpuPoissonSolver::preferred_fft); an adapted
          // grid keeps the host's mode: it takes the host's spectra at each new spacing (use_spectra).
          const PoissonFft fft =
              g.adaptive() ? host.fft() : GpuPoissonSolver::preferred_fft(host.grid(), host.model(), host.fft());
          dc.gpu_poisson = std::make_unique<GpuPoissonSolver>(host.grid(), host.model(), fft, m_options.device);
          dc.grid_builds = g.report().solver_builds;
          dc.rho = device_zeros(d, nodes * sizeof(double), "cuMemAlloc(grid charge density)");
          dc.max_field_bits = device_zeros(d, sizeof(uint64_t), "cuMemAlloc(grid field maximum)");
        } catch (const DeviceError& e) {
          dc.gpu_poisson_failed = true;  // e.g. a grid beyond the GPU solver's transform lengths
          fmt::print(stderr, "space-charge element '{}': Poisson solve on the host ({})\n", g.element_name(), e.what());
        }
        check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
      }
      if (dc.gpu_poisson) {
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
        check(d.ctx_set_current(impl.context), "cuCtxSetCurrent");
        check(d.memset_d8(dc.max_field_bits, 0, sizeof(uint64_t)), "cuMemset(grid field maximum)");
        {
          void* args[] = {&dc.grid_field, &count, &gamma0, &three_d, &dc.max_field_bits};
          launch(kk.grid_field_finish, blocks, 256, 0, args);
        }
        uint64_t tail[2] = {0, 0};
        check(d.memcpy_dtoh(&tail[0], dc.grid_acc + nodes * sizeof(uint64_t), sizeof(uint64_t)),
              "cuMemcpyDtoH(outside)");
        check(d.memcpy_dtoh(&tail[1], dc.max_field_bits, sizeof(uint64_t)), "cuMemcpyDtoH(field maximum)");
        double max_field = 0.0;
        std::memcpy(&max_field, &tail[1], sizeof(double));
        g.record_solve(tail[0], max_field);
        solve_wall = seconds_since(t_solve);
        m_stats.grid_solve_seconds += solve_wall;
        m_stats.grid_transfer_seconds += seconds_since(t_transfer) - solve_wall;
        m_stats.grid_bytes_transferred += 2 * sizeof(uint64_t);
        return;
      }
    }
    host_grid.resize(nodes + 1);
    download(d, host_grid, dc.grid_acc, 0, nodes + 1);
    if (options.reduce_profile) options.reduce_profile(host_grid.data(), host_grid.size());
    const auto t_solve = std::chrono::steady_clock::now();
    g.solve(host_grid.data(), host_grid[nodes]);
    solve_wall = seconds_since(t_solve);
    {  // the components side by side, as the GPU keeps them
      const size_t s = static_cast<size_t>(dc.field_stride);
      host_field.resize(s * nodes);
      const std::vector<double>* components[3] = {&g.ex(), &g.ey(), s == 3 ? &g.ez() : nullptr};
      for (size_t c = 0; c < s; ++c)
        for (size_t k = 0; k < nodes; ++k) host_field[k * s + c] = (*components[c])[k];
      upload(d, dc.grid_field, host_field, 0, host_field.size());
    }
    m_stats.grid_solve_seconds += solve_wall;
    m_stats.grid_transfer_seconds += seconds_since(t_transfer) - solve_wall;
    m_stats.grid_bytes_transferred += (nodes + 1) * sizeof(uint64_t) + (dc.ez ? 3 : 2) * nodes * sizeof(double);
  };
  bool any_moments = false;
  for (const DeviceCollective& c : impl.collective) any_moments |= c.moments != nullptr;
  // Slice moments: the integers down (a few per slice), summed over ranks, the host solve (the CPU's
  // code: the same kicks), the kick table up.
  auto moments_solve = [&](DeviceCollective& dc) {
    const auto t_down = std::chrono::steady_clock::now();
    check(d.memcpy_dtoh(dc.host_moments, dc.counts, dc.deposit_words * sizeof(uint64_t)),
          "cuMemcpyDtoH(slice moments)");
    const auto t_host = std::chrono::steady_clock::now();
    m_stats.moments_transfer_seconds += seconds_since(t_down);
    double sum_seconds = 0.0;
    if (options.reduce_profile) {  // a train's ranks: each solves its own bunches
      const MomentsCollectiveSolver::RankSum timed_sum = [&](uint64_t* values, size_t count) {
        const auto t_sum = std::chrono::steady_clock::now();
        options.reduce_profile(values, count);
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
      check(d.memcpy_htod(dc.field + begin * sizeof(double), dc.moments->kicks().data() + begin,
                          (end - begin) * sizeof(double)),
            "cuMemcpyHtoD(slice kicks)");
    m_stats.moments_transfer_seconds += seconds_since(t_up);
  };
  auto solve = [&](DeviceCollective& dc) {
    if (dc.grid) {
      grid_solve(dc);
      return;
    }
    if (dc.moments) {
      moments_solve(dc);
      return;
    }
    CollectiveSolver& sv = *dc.solver;
    int ns = sv.n_slices();
    if (options.reduce_profile) {  // the profile summed over the processes of the run
      const size_t bytes = static_cast<size_t>(ns) * sizeof(uint64_t);
      check(d.memcpy_dtoh(dc.host_moments, dc.counts, bytes), "cuMemcpyDtoH(profile)");
      options.reduce_profile(dc.host_moments, static_cast<size_t>(ns));
      check(d.memcpy_htod(dc.counts, dc.host_moments, bytes), "cuMemcpyHtoD(profile)");
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
      fft_solve(dc, kk, launch);
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
  };

  CUevent ev[3];
  for (CUevent& e : ev) check(d.event_create(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_record(ev[0], nullptr), "cuEventRecord");
  const int64_t every = options.callback_every > 0 ? options.callback_every : options.turns;
  // Launch plan per turn: segment kernels 0..K with a solve after each deposit. When the turn is
  // followed by another without a callback in between, its last segment runs fused with the
  // next turn's first (the wrap kernel), which also deposits the next turn's first profile.
  bool head_done = false;  // segment 0 of this turn already ran inside the previous wrap kernel
  // The first turn's kernels load every coordinate (the checks of the coordinates no kernel writes
  // hold for the later turns: collective_turn_traffic in codegen.h); FUSETRACK_FULL_LOADS=1 keeps
  // every turn so (the benchmark's baseline).
  const bool always_full = std::getenv("FUSETRACK_FULL_LOADS") != nullptr;
  const unsigned blocks_per_sm_override = [] {
    const char* v = std::getenv("FUSETRACK_BLOCKS_PER_SM");
    return v ? static_cast<unsigned>(std::max(0, std::atoi(v))) : 0u;
  }();
  int full_load = 1;
  const bool prepare_ahead = [] {
    const char* v = std::getenv("FUSETRACK_PREPARE_AHEAD");
    return !(v && std::string(v) == "0");
  }();
  auto run_segment = [&](CUfunction f, size_t kick_c, size_t deposit_c, bool kick, bool deposit, int turn) {
    CUdeviceptr kick_field = kick ? impl.collective[kick_c].field : 0;
    CUdeviceptr profile = deposit ? impl.collective[deposit_c].counts : 0;
    // 1: the deposit's whole table in shared memory; 2: a window of it (slice moments of a train).
    int in_shared = !deposit                                       ? 0
                    : impl.collective[deposit_c].profile_in_shared ? 1
                    : impl.collective[deposit_c].window_words > 0  ? 2
                                                                   : 0;
    unsigned shared = static_cast<unsigned>(in_shared == 1   ? impl.collective[deposit_c].deposit_words
                                            : in_shared == 2 ? impl.collective[deposit_c].window_words
                                                             : 0) *
                      8u;
    if (deposit && (impl.collective[deposit_c].solver || impl.collective[deposit_c].moments))
      check(d.memset_d8(profile, 0, impl.collective[deposit_c].deposit_words * sizeof(uint64_t)), "cuMemset(profile)");
    SliceMomentScales deposit_scales{};
    if (deposit && impl.collective[deposit_c].moments)
      deposit_scales = impl.collective[deposit_c].moments->reducer().scales();
    // Grid elements (kernel_tables' extra arguments, codegen.h): the kick's field and grid, and the
    // deposit (fixed grid) or the first moment pass (adapted grid).
    CUdeviceptr kick_ex = 0, kick_ey = 0, kick_ez = 0, grid_acc = 0, extent_acc = 0;
    long long kick_stride = 1;
    ChargeGridSpec kick_grid{}, deposit_spec{};
    ExtentScales extent{};
    long long outside_slot = 0;
    int grid_mode = 0, grid_window = 0;
    if (kick && impl.collective[kick_c].grid) {
      const DeviceCollective& kc = impl.collective[kick_c];
      kick_ex = kc.ex, kick_ey = kc.ey, kick_ez = kc.ez, kick_stride = kc.field_stride;
      kick_grid = kc.grid->spec();
    }
    if (deposit && impl.collective[deposit_c].grid) {
      DeviceCollective& dc = impl.collective[deposit_c];
      if (dc.grid->adaptive()) {
        grid_mode = 2;
        extent = dc.grid->extent_scales();
        extent_acc = dc.extent_acc;
        check(d.memset_d8(extent_acc, 0, (kExtentAccumulators + 1) * sizeof(uint64_t)), "cuMemset(grid extent)");
      } else {
        grid_mode = 1;
        grid_window = tiles.window_nodes();
        deposit_spec = dc.grid->spec();
        grid_acc = dc.grid_acc;
        outside_slot = static_cast<long long>(dc.grid->node_count());
        check(d.memset_d8(grid_acc, 0, (dc.grid->node_count() + 1) * sizeof(uint64_t)), "cuMemset(charge grid)");
      }
    }
    if (m_options.time_phases) check(d.event_record(ev[1], nullptr), "cuEventRecord");
    void* profile_args[] = {&dp,         &steps,   &params,    &n_particles,
                            &beta0,      &turn,    &n_el,      const_cast<GlobalLimits*>(&limits),
                            &kick_field, &profile, &in_shared, &full_load};
    void* grid_args[] = {&dp,         &steps,      &params,       &n_particles,
                         &beta0,      &turn,       &n_el,         const_cast<GlobalLimits*>(&limits),
                         &kick_field, &profile,    &in_shared,    &full_load,
                         &kick_ex,    &kick_ey,    &kick_ez,      &kick_stride,
                         &kick_grid,  &grid_acc,   &outside_slot, &deposit_spec,
                         &extent,     &extent_acc, &grid_mode,    &grid_window};
    std::vector<void*> args_all(any_grid ? std::begin(grid_args) : std::begin(profile_args),
                                any_grid ? std::end(grid_args) : std::end(profile_args));
    if (any_moments) args_all.push_back(&deposit_scales);  // kMomentSegmentParameters (codegen)
    void** args = args_all.data();
    // Resident blocks per multiprocessor: 8 of 256 threads, fewer when the block's profile in shared
    // memory would not leave room for 8 (about 200 KiB of shared memory per SM on sm_90).
    // FUSETRACK_BLOCKS_PER_SM overrides it (benchmarks of the occupancy).
    // A windowed grid deposit (particles ordered by tile): the window in shared memory, a chunk of about
    // TileOrder::kChunk particles per block.
    const bool grid_windowed = grid_window > 0;
    if (grid_windowed) shared = static_cast<unsigned>(2 * grid_window) * 8u;
    const unsigned per_sm =
        blocks_per_sm_override > 0
            ? blocks_per_sm_override
            : (in_shared || grid_windowed ? std::clamp(200u * 1024u / std::max(shared, 1u), 1u, 8u) : 8u);
    unsigned blocks =
        std::max(1u, std::min(blocks_for(n, kThreads), static_cast<unsigned>(m_gpu.multiprocessors) * per_sm));
    if (grid_windowed)
      blocks = std::max(blocks, static_cast<unsigned>((n + TileOrder::kChunk - 1) / TileOrder::kChunk));
    launch(f, blocks, kThreads, shared, args);
    energy_stale = true;
    // While the GPU runs the segment: the host work of the next solves that does not wait for its deposit
    // (FUSETRACK_PREPARE_AHEAD=0: left to the solves, the benchmarks' baseline; the same bits either way).
    if (prepare_ahead)
      for (DeviceCollective& c : impl.collective)
        if (c.moments) c.moments->prepare_next_turn();
    if (m_options.time_phases) {
      check(d.event_record(ev[2], nullptr), "cuEventRecord");
      check(d.event_synchronize(ev[2]), "collective segment");
      float ms = 0;
      d.event_elapsed_time(&ms, ev[1], ev[2]);
      m_stats.segment_seconds += ms * 1e-3;
    }
  };
  auto timed_solve = [&](DeviceCollective& dc) {
    if (m_options.time_phases) check(d.event_record(ev[1], nullptr), "cuEventRecord");
    solve(dc);
    if (m_options.time_phases) {
      check(d.event_record(ev[2], nullptr), "cuEventRecord");
      check(d.event_synchronize(ev[2]), "collective solve");
      float ms = 0;
      d.event_elapsed_time(&ms, ev[1], ev[2]);
      m_stats.solve_seconds += ms * 1e-3;
    }
  };
  for (int64_t done = 0; done < options.turns && n > 0;) {
    const int turn = static_cast<int>(options.first_turn + done);
    if (tiles.due(done)) {
      if (m_options.time_phases) check(d.event_record(ev[1], nullptr), "cuEventRecord");
      tiles.sort(kk, buffers, m_gpu.multiprocessors, m_options.time_phases ? m_stats.tile_sort_phase_seconds : nullptr);
      ++m_stats.tile_sorts;
      if (m_options.time_phases) {
        check(d.event_record(ev[2], nullptr), "cuEventRecord");
        check(d.event_synchronize(ev[2]), "tile sort");
        float ms = 0;
        d.event_elapsed_time(&ms, ev[1], ev[2]);
        m_stats.tile_sort_seconds += ms * 1e-3;
      }
    }
    full_load = done == 0 || always_full ? 1 : 0;
    const bool callback_after = options.callback && ((done + 1) % every == 0 || done + 1 == options.turns);
    const bool fuse_tail = done + 1 < options.turns && !callback_after;
    for (size_t k = 0; k <= K; ++k) {
      if (k == 0 && head_done) {
        timed_solve(impl.collective[0]);  // its profile came from the wrap kernel
        continue;
      }
      if (k == K && fuse_tail) {
        run_segment(kk.wrap, K - 1, 0, true, true, turn);
        break;
      }
      run_segment(kk.segments[k], k > 0 ? k - 1 : 0, k, k > 0, k < K, turn);
      if (k < K) timed_solve(impl.collective[k]);
    }
    head_done = fuse_tail;
    ++done;
    if (callback_after) {
      down();
      if (!options.callback(done, particles)) break;
    }
  }
  check(d.event_record(ev[1], nullptr), "cuEventRecord");
  check(d.event_synchronize(ev[1]), "kernel execution");
  float ms = 0;
  d.event_elapsed_time(&ms, ev[0], ev[1]);
  m_stats.kernel_seconds = ms * 1e-3;
  for (CUevent& e : ev) d.event_destroy(e);
  m_stats.chunks = 1;
  if (n > 0) {
    if (!source || source->download_final) down_particles();
    down_snapshots();
  }
  if (source)
    source->result.alive = source->download_final ? particles.alive_count() : count_alive_on_device(impl, dp, n);
  for (DeviceCollective& c : impl.collective) {
    if (!c.grid && !c.moments) continue;
    const std::string warning = c.grid ? c.grid->take_warning() : c.moments->take_warning();
    if (options.warnings && !warning.empty()) std::cerr << warning;
  }
}

}  // namespace ft
