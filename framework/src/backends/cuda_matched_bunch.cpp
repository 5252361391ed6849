#include "cuda_matched_bunch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/device/random.h"
#include "fusetrack/memory_budget.h"
#include "fusetrack/nvrtc_compiler.h"

namespace ft {

KernelSource matched_bunch_sampler_source() {
  KernelSource src;
  src.name = "fusetrack_sampler.cu";
  src.text = "#include \"fusetrack/device/matched_bunch_kernels.h\"\n";
  src.headers = framework_device_headers();
  src.fma = FmaMode::Off;  // bitwise the host sampler's particles
  return src;
}

namespace cuda {

namespace {

constexpr unsigned kSamplerThreads = 256;
constexpr unsigned kSamplerMaxBlocks = 1024;

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

}  // namespace

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

}  // namespace cuda

}  // namespace ft
