#include "cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

#include "fusetrack/cuda_device.h"
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"

namespace ft::cuda {

namespace {

struct Loaded {
  Driver driver;
  bool ok = false;
  std::string why;
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string& missing) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) missing += std::string(missing.empty() ? "" : ", ") + name;
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.why = "no NVIDIA driver (libcuda.so.1 cannot be loaded)";
    return l;
  }
  Driver& d = l.driver;
  std::string missing;
  // Versioned names: the ones cuda.h maps the plain names to.
  resolve(lib, "cuInit", d.init, missing);
  resolve(lib, "cuDriverGetVersion", d.driver_get_version, missing);
  resolve(lib, "cuDeviceGetCount", d.device_get_count, missing);
  resolve(lib, "cuDeviceGet", d.device_get, missing);
  resolve(lib, "cuDeviceGetName", d.device_get_name, missing);
  resolve(lib, "cuDeviceGetAttribute", d.device_get_attribute, missing);
  resolve(lib, "cuDeviceTotalMem_v2", d.device_total_mem, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain, missing);
  resolve(lib, "cuCtxSetCurrent", d.ctx_set_current, missing);
  resolve(lib, "cuCtxSynchronize", d.ctx_synchronize, missing);
  resolve(lib, "cuModuleLoadData", d.module_load_data, missing);
  resolve(lib, "cuModuleUnload", d.module_unload, missing);
  resolve(lib, "cuModuleGetFunction", d.module_get_function, missing);
  resolve(lib, "cuFuncGetAttribute", d.func_get_attribute, missing);
  resolve(lib, "cuMemAlloc_v2", d.mem_alloc, missing);
  resolve(lib, "cuMemFree_v2", d.mem_free, missing);
  resolve(lib, "cuMemAllocHost_v2", d.mem_alloc_host, missing);
  resolve(lib, "cuMemFreeHost", d.mem_free_host, missing);
  resolve(lib, "cuMemHostRegister_v2", d.mem_host_register, missing);
  resolve(lib, "cuMemHostUnregister", d.mem_host_unregister, missing);
  resolve(lib, "cuMemcpyHtoD_v2", d.memcpy_htod, missing);
  resolve(lib, "cuMemcpyDtoH_v2", d.memcpy_dtoh, missing);
  resolve(lib, "cuMemcpyDtoD_v2", d.memcpy_dtod, missing);
  resolve(lib, "cuMemcpyHtoDAsync_v2", d.memcpy_htod_async, missing);
  resolve(lib, "cuMemcpyDtoHAsync_v2", d.memcpy_dtoh_async, missing);
  resolve(lib, "cuMemGetInfo_v2", d.mem_get_info, missing);
  resolve(lib, "cuMemsetD8_v2", d.memset_d8, missing);
  resolve(lib, "cuFuncSetAttribute", d.func_set_attribute, missing);
  resolve(lib, "cuLaunchKernel", d.launch_kernel, missing);
  resolve(lib, "cuEventCreate", d.event_create, missing);
  resolve(lib, "cuEventRecord", d.event_record, missing);
  resolve(lib, "cuEventSynchronize", d.event_synchronize, missing);
  resolve(lib, "cuEventElapsedTime_v2", d.event_elapsed_time, missing);
  if (!d.event_elapsed_time) {
    missing.clear();
    resolve(lib, "cuEventElapsedTime", d.event_elapsed_time, missing);
  }
  resolve(lib, "cuEventDestroy_v2", d.event_destroy, missing);
  resolve(lib, "cuGetErrorString", d.get_error_string, missing);
  if (!missing.empty()) {
    l.why = "the NVIDIA driver is too old: missing " + missing;
    return l;
  }
  const CUresult rc = d.init(0);
  if (rc != CUDA_SUCCESS) {
    const char* s = nullptr;
    d.get_error_string(rc, &s);
    l.why = fmt::format("the CUDA driver failed to initialise ({})", s ? s : "unknown error");
    return l;
  }
  int count = 0;
  if (d.device_get_count(&count) != CUDA_SUCCESS || count == 0) {
    l.why = "the CUDA driver reports no GPU";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const Driver* driver(std::string* why) {
  static Loaded loaded = load();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.driver;
}

void check(CUresult rc, const char* what) {
  if (rc == CUDA_SUCCESS) return;
  const char* s = nullptr;
  if (const Driver* d = driver()) d->get_error_string(rc, &s);
  throw DeviceError(fmt::format("CUDA error in {}: {} ({})", what, s ? s : "unknown", static_cast<int>(rc)));
}

void check_alloc(const Driver& d, CUdeviceptr* ptr, size_t bytes, const char* what) {
  const CUresult rc = d.mem_alloc(ptr, bytes);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free_bytes = 0, total_bytes = 0;
    d.mem_get_info(&free_bytes, &total_bytes);
    throw MemoryError(fmt::format("GPU out of memory in {}: asked for {}, {} free of {}", what, format_bytes(bytes),
                                  format_bytes(free_bytes), format_bytes(total_bytes)));
  }
  check(rc, what);
}

}  // namespace ft::cuda

namespace ft {

std::string gpu_unavailable_reason() {
  std::string why;
  return cuda::driver(&why) ? std::string() : why;
}

std::vector<GpuInfo> list_gpus() {
  std::vector<GpuInfo> out;
  const cuda::Driver* d = cuda::driver();
  if (!d) return out;
  int count = 0;
  d->device_get_count(&count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    if (d->device_get(&dev, i) != CUDA_SUCCESS) continue;
    GpuInfo g;
    g.index = i;
    char name[256] = {0};
    d->device_get_name(name, sizeof name, dev);
    g.name = name;
    int major = 0, minor = 0;
    d->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    d->device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    d->device_get_attribute(&g.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    g.arch = 10 * major + minor;
    d->device_total_mem(&g.total_memory, dev);
    out.push_back(g);
  }
  return out;
}

}  // namespace ft
