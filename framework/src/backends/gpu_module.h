// Internal: one GPU module for the small framework kernels (deterministic reductions, the collider's
// per-bunch steps): a primary context, the NVRTC-compiled source, device buffers, timed launches.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda_driver.h"
#include "fusetrack/codegen.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/error.h"
#include "fusetrack/nvrtc_compiler.h"

namespace ft {

using cuda::check;

/// The deterministic-reduction kernels' source (cuda_reduction.cpp): fusetrack_slice_moments, fusetrack_charge_grid.
const char* reduction_kernel_source();

/// A primary context on `device`, one NVRTC-compiled module (`source`, which includes the framework's
/// device headers) loaded into it, and device buffers freed on exit.
class GpuModule {
 public:
  GpuModule(int device, const char* name, const char* source, FmaMode fma) {
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
    src.name = name;
    src.headers = framework_device_headers();
    src.text = source;
    src.fma = fma;
    m_cubin = KernelCompiler().compile(src, gpus[static_cast<size_t>(device)].arch).cubin;
    check(m_d->module_load_data(&m_module, m_cubin.data()), "cuModuleLoadData");
  }
  ~GpuModule() {
    for (const auto& e : m_pending) {
      m_d->event_destroy(e.first);
      m_d->event_destroy(e.second);
    }
    for (CUdeviceptr p : m_buffers) m_d->mem_free(p);
    if (m_module) m_d->module_unload(m_module);
  }
  GpuModule(const GpuModule&) = delete;
  GpuModule& operator=(const GpuModule&) = delete;

  CUfunction function(const char* name) {
    CUfunction f;
    check(m_d->module_get_function(&f, m_module, name), "cuModuleGetFunction");
    return f;
  }
  template <class T>
  CUdeviceptr upload(const std::vector<T>& v) {
    CUdeviceptr p = zeros(v.size() * sizeof(T));
    if (!v.empty()) check(m_d->memcpy_htod(p, v.data(), v.size() * sizeof(T)), "cuMemcpyHtoD");
    return p;
  }
  CUdeviceptr zeros(size_t bytes) {
    CUdeviceptr p = 0;
    cuda::check_alloc(*m_d, &p, std::max<size_t>(bytes, 8), "cuMemAlloc");
    m_buffers.push_back(p);
    check(m_d->memset_d8(p, 0, std::max<size_t>(bytes, 8)), "cuMemsetD8");
    return p;
  }
  template <class T = uint64_t>
  std::vector<T> download(CUdeviceptr p, size_t count) {
    std::vector<T> v(count);
    if (count) check(m_d->memcpy_dtoh(v.data(), p, count * sizeof(T)), "cuMemcpyDtoH");
    return v;
  }
  void copy_to_device(CUdeviceptr p, const void* data, size_t bytes) {
    if (bytes) check(m_d->memcpy_htod(p, data, bytes), "cuMemcpyHtoD");
  }
  /// A copy queued on the default stream behind the kernels launched before it: the host does not wait for
  /// them (the driver stages pageable memory before it returns, so `data` may change right after).
  void copy_to_device_async(CUdeviceptr p, const void* data, size_t bytes) {
    if (bytes) check(m_d->memcpy_htod_async(p, data, bytes, nullptr), "cuMemcpyHtoDAsync");
  }
  void copy_to_host(void* data, CUdeviceptr p, size_t bytes) {
    if (bytes) check(m_d->memcpy_dtoh(data, p, bytes), "cuMemcpyDtoH");
  }
  /// Lets `f` take `bytes` of dynamic shared memory (beyond the default 48 KiB where the device has it).
  void allow_shared_memory(CUfunction f, unsigned bytes) {
    if (bytes > 48u * 1024u)
      check(m_d->func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
            "cuFuncSetAttribute(dynamic shared memory)");
  }
  /// Launches `blocks` blocks of `threads` threads on the default stream without waiting for them (the
  /// launches after it, and copies, are ordered after it).
  void launch_async(CUfunction f, unsigned blocks, unsigned threads, unsigned shared_bytes, void** args) {
    check(m_d->launch_kernel(f, blocks, 1, 1, threads, 1, 1, shared_bytes, nullptr, args, nullptr), "cuLaunchKernel");
  }
  void synchronize() { check(m_d->ctx_synchronize(), "kernel"); }
  /// Frees a buffer of this module before the module goes.
  void release(CUdeviceptr p) {
    const auto it = std::find(m_buffers.begin(), m_buffers.end(), p);
    if (it == m_buffers.end()) return;
    m_d->mem_free(p);
    m_buffers.erase(it);
  }
  /// Launches `blocks` blocks of `threads` threads on the default stream without waiting for them, between
  /// two events whose time settle_timed_launches() adds up once they have passed.
  void launch_timed_async(CUfunction f, unsigned blocks, unsigned threads, unsigned shared_bytes, void** args) {
    CUevent e0, e1;
    check(m_d->event_create(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    check(m_d->event_create(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    m_pending.push_back({e0, e1});
    check(m_d->event_record(e0, nullptr), "cuEventRecord");
    check(m_d->launch_kernel(f, blocks, 1, 1, threads, 1, 1, shared_bytes, nullptr, args, nullptr), "cuLaunchKernel");
    check(m_d->event_record(e1, nullptr), "cuEventRecord");
  }
  /// Waits for the launches of launch_timed_async and returns their kernel time [s].
  double settle_timed_launches() {
    double seconds = 0.0;
    for (const auto& e : m_pending) {
      check(m_d->event_synchronize(e.second), "kernel");
      float ms = 0.0f;
      m_d->event_elapsed_time(&ms, e.first, e.second);
      seconds += ms * 1e-3;
      m_d->event_destroy(e.first);
      m_d->event_destroy(e.second);
    }
    m_pending.clear();
    return seconds;
  }
  void zero(CUdeviceptr p, size_t bytes) {
    if (bytes) check(m_d->memset_d8(p, 0, bytes), "cuMemsetD8");
  }
  /// Launches one thread per particle and returns the kernel time [s].
  double launch(CUfunction f, size_t n, void** args) {
    const unsigned threads = 256;
    return launch_blocks(f, static_cast<unsigned>(std::max<size_t>((n + threads - 1) / threads, 1)), threads, 0, args);
  }
  /// Launches `blocks` blocks of `threads` threads with `shared_bytes` of dynamic shared memory and
  /// returns the kernel time [s].
  double launch_blocks(CUfunction f, unsigned blocks, unsigned threads, unsigned shared_bytes, void** args) {
    CUevent e0, e1;
    check(m_d->event_create(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    check(m_d->event_create(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    check(m_d->event_record(e0, nullptr), "cuEventRecord");
    check(m_d->launch_kernel(f, blocks, 1, 1, threads, 1, 1, shared_bytes, nullptr, args, nullptr), "cuLaunchKernel");
    check(m_d->event_record(e1, nullptr), "cuEventRecord");
    check(m_d->event_synchronize(e1), "kernel");
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
  std::vector<std::pair<CUevent, CUevent>> m_pending;  // launch_timed_async's events
};

}  // namespace ft
