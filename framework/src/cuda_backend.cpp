#include "fusetrack/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cuda_driver.h"
#include "fusetrack/error.h"

namespace ft {

using cuda::check;

namespace {

/// Device copies of the particle arrays, in the layout of FtParticleArrays in the kernel.
struct DeviceParticles {
  CUdeviceptr x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, lost_element;
};

constexpr size_t kBytesPerParticle = 9 * sizeof(double) + 2 * sizeof(int32_t) + sizeof(int64_t);

struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  KernelSource source;
  CompiledKernel compiled;
};

}  // namespace

struct CudaBackend::Impl {
  const cuda::Driver* d = nullptr;
  CUcontext context = nullptr;
  std::map<std::pair<int, int>, LoadedKernel> kernels;  // (fma, dispatch) -> kernel
  // The switch kernel's tables (kernel_tables), uploaded with its first use; baked kernels
  // take neither.
  CUdeviceptr switch_steps = 0;
  CUdeviceptr switch_params = 0;

  ~Impl() {
    if (!d) return;
    d->ctx_set_current(context);
    for (auto& [key, k] : kernels)
      if (k.module) d->module_unload(k.module);
    if (switch_steps) d->mem_free(switch_steps);
    if (switch_params) d->mem_free(switch_params);
  }
};

CudaBackend::CudaBackend(const Lattice& lattice, CudaBackendOptions options)
    : m_impl(std::make_unique<Impl>()), m_lattice(lattice), m_options(std::move(options)) {
  std::string why;
  m_impl->d = cuda::driver(&why);
  if (!m_impl->d) throw DeviceError("no GPU available: " + why);
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
                         Dispatch dispatch, int arch, CudaRunStats& stats) {
  const auto key = std::make_pair(static_cast<int>(fma), static_cast<int>(dispatch));
  auto it = impl.kernels.find(key);
  if (it != impl.kernels.end()) return it->second;
  LoadedKernel k;
  k.source = generate_fused_kernel(lattice, fma, dispatch);
  std::string dump_dir;
  if (const char* dump = std::getenv("FUSETRACK_DUMP_SOURCE"); dump && *dump) {
    dump_dir = fmt::format("{}/{}_{}", dump, dispatch == Dispatch::Baked ? "baked" : "switch",
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
  if (dispatch == Dispatch::Switch && !impl.switch_steps) {
    const KernelTables tables = kernel_tables(lattice, k.source);
    CUdeviceptr p = 0;
    check(d.mem_alloc(&p, std::max<size_t>(tables.steps.size() * sizeof(KernelStep), 8)), "cuMemAlloc(steps)");
    check(d.memcpy_htod(p, tables.steps.data(), tables.steps.size() * sizeof(KernelStep)), "cuMemcpyHtoD(steps)");
    impl.switch_steps = p;
    check(d.mem_alloc(&impl.switch_params, tables.params.size() * sizeof(uint64_t)), "cuMemAlloc(parameters)");
    check(d.memcpy_htod(impl.switch_params, tables.params.data(), tables.params.size() * sizeof(uint64_t)),
          "cuMemcpyHtoD(parameters)");
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

}  // namespace

void CudaBackend::track(Particles& particles, const TrackOptions& options) { run(particles, options, false); }

void CudaBackend::track_per_element(Particles& particles, const TrackOptions& options) {
  run(particles, options, true);
}

void CudaBackend::run(Particles& particles, const TrackOptions& options, bool per_element) {
  const cuda::Driver& d = *m_impl->d;
  check(d.ctx_set_current(m_impl->context), "cuCtxSetCurrent");
  m_stats = CudaRunStats{};
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  const bool whole_sequence = begin == 0 && end == n_elements;
  Dispatch dispatch = choose_dispatch(m_lattice, m_options.dispatch);
  if (!whole_sequence || per_element) dispatch = Dispatch::Switch;  // baked kernels run the whole sequence
  LoadedKernel& kernel = get_kernel(*m_impl, m_lattice, m_options, options.fma, dispatch, m_gpu.arch, m_stats);
  d.func_get_attribute(&m_stats.registers_per_thread, CU_FUNC_ATTRIBUTE_NUM_REGS, kernel.function);
  d.func_get_attribute(&m_stats.local_bytes_per_thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, kernel.function);
  CUdeviceptr steps = m_impl->switch_steps;
  CUdeviceptr params = m_impl->switch_params;  // unused (0) by baked kernels

  // Particles resident on the device at once: all of them when they fit in 80% of free memory,
  // otherwise consecutive chunks, each tracked for all turns (single-particle physics is
  // independent per particle, so chunking does not change results).
  size_t free_bytes = 0, total_bytes = 0;
  check(d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  size_t resident = m_options.max_resident_particles;
  if (resident == 0) resident = static_cast<size_t>(0.8 * static_cast<double>(free_bytes)) / kBytesPerParticle;
  if (resident == 0) throw DeviceError("not enough free GPU memory for a single particle");
  const size_t n = particles.size();
  resident = std::min(resident, std::max<size_t>(n, 1));
  if (options.callback && resident < n)
    throw DeviceError(fmt::format("{} particles need {:.1f} GiB of GPU memory, more than is free ({:.1f} GiB); "
                                  "per-turn callbacks need all particles resident: use fewer particles",
                                  n, static_cast<double>(n * kBytesPerParticle) / (1 << 30),
                                  static_cast<double>(free_bytes) / (1 << 30)));

  DeviceParticles dp{};
  CUdeviceptr* arrays[] = {&dp.x, &dp.px, &dp.y, &dp.py, &dp.zeta, &dp.delta, &dp.ptau, &dp.rpp, &dp.rvv};
  for (CUdeviceptr* a : arrays) check(d.mem_alloc(a, resident * sizeof(double)), "cuMemAlloc(particles)");
  check(d.mem_alloc(&dp.state, resident * sizeof(int32_t)), "cuMemAlloc(particles)");
  check(d.mem_alloc(&dp.lost_turn, resident * sizeof(int32_t)), "cuMemAlloc(particles)");
  check(d.mem_alloc(&dp.lost_element, resident * sizeof(int64_t)), "cuMemAlloc(particles)");
  struct Freer {
    const cuda::Driver& d;
    DeviceParticles& dp;
    ~Freer() {
      for (CUdeviceptr p : {dp.x, dp.px, dp.y, dp.py, dp.zeta, dp.delta, dp.ptau, dp.rpp, dp.rvv, dp.state,
                            dp.lost_turn, dp.lost_element})
        if (p) d.mem_free(p);
    }
  } freer{d, dp};

  CUevent ev0, ev1;
  check(d.event_create(&ev0, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_create(&ev1, CU_EVENT_DEFAULT), "cuEventCreate");
  const GlobalLimits limits = m_lattice.limits();
  double beta0 = particles.beta0;
  int n_el = static_cast<int>(n_elements), eb = static_cast<int>(begin), ee = static_cast<int>(end);

  for (size_t first = 0; first < n; first += resident) {
    const size_t count = std::min(resident, n - first);
    ++m_stats.chunks;
    auto up = [&] {
      upload(d, dp.x, particles.x, first, count);
      upload(d, dp.px, particles.px, first, count);
      upload(d, dp.y, particles.y, first, count);
      upload(d, dp.py, particles.py, first, count);
      upload(d, dp.zeta, particles.zeta, first, count);
      upload(d, dp.delta, particles.delta, first, count);
      upload(d, dp.ptau, particles.ptau, first, count);
      upload(d, dp.rpp, particles.rpp, first, count);
      upload(d, dp.rvv, particles.rvv, first, count);
      upload(d, dp.state, particles.state, first, count);
      upload(d, dp.lost_turn, particles.lost_turn, first, count);
      upload(d, dp.lost_element, particles.lost_element, first, count);
    };
    auto down = [&] {
      download(d, particles.x, dp.x, first, count);
      download(d, particles.px, dp.px, first, count);
      download(d, particles.y, dp.y, first, count);
      download(d, particles.py, dp.py, first, count);
      download(d, particles.zeta, dp.zeta, first, count);
      download(d, particles.delta, dp.delta, first, count);
      download(d, particles.ptau, dp.ptau, first, count);
      download(d, particles.rpp, dp.rpp, first, count);
      download(d, particles.rvv, dp.rvv, first, count);
      download(d, particles.state, dp.state, first, count);
      download(d, particles.lost_turn, dp.lost_turn, first, count);
      download(d, particles.lost_element, dp.lost_element, first, count);
    };
    up();
    const int64_t chunk_turns = options.callback_every > 0 ? options.callback_every : options.turns;
    int64_t done = 0;
    int n_particles = static_cast<int>(count);
    // Few particles (a DA scan late in its life): small blocks spread them over every multiprocessor.
    const int tpb = m_options.threads_per_block > 0 ? m_options.threads_per_block
                    : count < static_cast<size_t>(m_gpu.multiprocessors) * 512 ? 32 : 128;
    const unsigned blocks = static_cast<unsigned>((count + static_cast<size_t>(tpb) - 1) / static_cast<size_t>(tpb));
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
          void* args[] = {&dp, &steps, &params, &n_particles, &beta0, &lb, &le, &n_el, &first_turn,
                          &launch_turns, const_cast<GlobalLimits*>(&limits)};
          check(d.launch_kernel(kernel.function, blocks, 1, 1, static_cast<unsigned>(tpb), 1,
                                1, 0, nullptr, args, nullptr),
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
        down();
        if (!options.callback(done, particles)) break;
      }
    }
    if (!options.callback) down();
  }
  d.event_destroy(ev0);
  d.event_destroy(ev1);
}

}  // namespace ft
