#include "fusetrack/cuda_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cuda_driver.h"
#include "fusetrack/codegen.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/error.h"
#include "fusetrack/nvrtc_compiler.h"

namespace ft {

namespace {

using cuda::check;

// One thread per particle; integer atomics into the accumulators and the rejected-particle count.
const char* kReductionKernels = R"(#include "fusetrack/device/reduction.h"
extern "C" __global__ void fusetrack_slice_moments(ft::SliceGrid g, ft::SliceMomentScales s, const double* x,
    const double* px, const double* y, const double* py, const double* zeta, const double* delta, const int* state,
    int n, unsigned long long* acc, unsigned long long* rejected) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || state[i] <= 0) return;
  const double c[6] = {x[i], px[i], y[i], py[i], zeta[i], delta[i]};
  int bins[2];
  long long out[2][ft::kSliceAccumulators];
  const int m = ft::slice_moment_contributions(g, s, c, bins, out);
  if (m < 0) { atomicAdd(rejected, 1ull); return; }
  for (int b = 0; b < m; ++b)
    for (int k = 0; k < ft::kSliceAccumulators; ++k)
      atomicAdd(acc + bins[b] * ft::kSliceAccumulators + k, static_cast<unsigned long long>(out[b][k]));
}
extern "C" __global__ void fusetrack_charge_grid(ft::ChargeGridSpec g, const double* x, const double* y,
    const double* zeta, const int* state, int n, unsigned long long* acc, unsigned long long* rejected) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || state[i] <= 0) return;
  const double pos[3] = {x[i], y[i], zeta[i]};
  long long nodes[8];
  unsigned long long w[8];
  const int m = ft::charge_deposit(g, pos, nodes, w);
  if (m == 0) { atomicAdd(rejected, 1ull); return; }
  for (int c = 0; c < m; ++c) atomicAdd(acc + nodes[c], w[c]);
}
)";

/// A primary context on `device`, the reduction module loaded into it, device buffers freed on exit.
class GpuSession {
 public:
  explicit GpuSession(int device) {
    std::string why;
    m_d = cuda::driver(&why);
    if (!m_d) throw DeviceError("no GPU available: " + why);
    const auto gpus = list_gpus();
    if (device < 0 || device >= static_cast<int>(gpus.size()))
      throw DeviceError(fmt::format("GPU {} does not exist ({} found)", device, gpus.size()));
    CUdevice dev;
    check(m_d->device_get(&dev, device), "cuDeviceGet");
    check(m_d->primary_ctx_retain(&m_context, dev), "cuDevicePrimaryCtxRetain");
    check(m_d->ctx_set_current(m_context), "cuCtxSetCurrent");
    KernelSource src;
    src.name = "fusetrack_reduction.cu";
    src.headers = framework_device_headers();
    src.text = kReductionKernels;
    src.fma = FmaMode::Off;
    m_cubin = KernelCompiler().compile(src, gpus[static_cast<size_t>(device)].arch).cubin;
    check(m_d->module_load_data(&m_module, m_cubin.data()), "cuModuleLoadData");
  }
  ~GpuSession() {
    for (CUdeviceptr p : m_buffers) m_d->mem_free(p);
    if (m_module) m_d->module_unload(m_module);
  }
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  CUfunction function(const char* name) {
    CUfunction f;
    check(m_d->module_get_function(&f, m_module, name), "cuModuleGetFunction");
    return f;
  }
  template <class T>
  CUdeviceptr upload(const std::vector<T>& v) {
    CUdeviceptr p = zeros(v.size() * sizeof(T));
    if (!v.empty()) check(m_d->memcpy_htod(p, v.data(), v.size() * sizeof(T)), "cuMemcpyHtoD(reduction)");
    return p;
  }
  CUdeviceptr zeros(size_t bytes) {
    CUdeviceptr p = 0;
    cuda::check_alloc(*m_d, &p, std::max<size_t>(bytes, 8), "cuMemAlloc(reduction)");
    m_buffers.push_back(p);
    check(m_d->memset_d8(p, 0, std::max<size_t>(bytes, 8)), "cuMemsetD8(reduction)");
    return p;
  }
  std::vector<uint64_t> download(CUdeviceptr p, size_t count) {
    std::vector<uint64_t> v(count);
    check(m_d->memcpy_dtoh(v.data(), p, count * sizeof(uint64_t)), "cuMemcpyDtoH(reduction)");
    return v;
  }
  /// Launches one thread per particle and returns the kernel time [s].
  double launch(CUfunction f, size_t n, void** args) {
    CUevent e0, e1;
    check(m_d->event_create(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    check(m_d->event_create(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    const unsigned threads = 256;
    const unsigned blocks = static_cast<unsigned>(std::max<size_t>((n + threads - 1) / threads, 1));
    check(m_d->event_record(e0, nullptr), "cuEventRecord");
    check(m_d->launch_kernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel(reduction)");
    check(m_d->event_record(e1, nullptr), "cuEventRecord");
    check(m_d->event_synchronize(e1), "reduction kernel");
    float ms = 0.0f;
    m_d->event_elapsed_time(&ms, e0, e1);
    m_d->event_destroy(e0);
    m_d->event_destroy(e1);
    return ms * 1e-3;
  }

 private:
  const cuda::Driver* m_d = nullptr;
  CUcontext m_context = nullptr;
  CUmodule m_module = nullptr;
  std::vector<char> m_cubin;
  std::vector<CUdeviceptr> m_buffers;
};

int particle_count(const Particles& p) {
  if (p.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error(
        fmt::format("GPU reduction: {} particles in one call; at most {}", p.size(), std::numeric_limits<int>::max()));
  return static_cast<int>(p.size());
}

}  // namespace

void gpu_deposit(SliceMomentReducer& reducer, const Particles& particles, int device, double* kernel_seconds) {
  GpuSession gpu(device);
  int n = particle_count(particles);
  CUdeviceptr x = gpu.upload(particles.x), px = gpu.upload(particles.px), y = gpu.upload(particles.y),
              py = gpu.upload(particles.py), zeta = gpu.upload(particles.zeta), delta = gpu.upload(particles.delta),
              state = gpu.upload(particles.state);
  const size_t count = reducer.accumulators().size();
  CUdeviceptr acc = gpu.zeros(count * sizeof(uint64_t)), rejected = gpu.zeros(sizeof(uint64_t));
  SliceGrid g = reducer.grid();
  SliceMomentScales s = reducer.scales();
  void* args[] = {&g, &s, &x, &px, &y, &py, &zeta, &delta, &state, &n, &acc, &rejected};
  const double t = gpu.launch(gpu.function("fusetrack_slice_moments"), particles.size(), args);
  if (kernel_seconds) *kernel_seconds = t;
  reducer.add_accumulators(gpu.download(acc, count), gpu.download(rejected, 1)[0]);
}

void gpu_deposit(ChargeGridReducer& reducer, const Particles& particles, int device, double* kernel_seconds) {
  GpuSession gpu(device);
  int n = particle_count(particles);
  CUdeviceptr x = gpu.upload(particles.x), y = gpu.upload(particles.y), zeta = gpu.upload(particles.zeta),
              state = gpu.upload(particles.state);
  const size_t count = reducer.accumulators().size();
  CUdeviceptr acc = gpu.zeros(count * sizeof(uint64_t)), rejected = gpu.zeros(sizeof(uint64_t));
  ChargeGridSpec g = reducer.spec();
  void* args[] = {&g, &x, &y, &zeta, &state, &n, &acc, &rejected};
  const double t = gpu.launch(gpu.function("fusetrack_charge_grid"), particles.size(), args);
  if (kernel_seconds) *kernel_seconds = t;
  reducer.add_accumulators(gpu.download(acc, count), gpu.download(rejected, 1)[0]);
}

}  // namespace ft
