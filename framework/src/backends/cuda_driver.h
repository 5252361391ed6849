// Internal: the driver entry points fusetrack uses, resolved with dlsym. Types come from
// cuda.h; no libcuda is linked.
#pragma once
#include <cuda.h>

#include <string>

namespace ft::cuda {

struct Driver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuFuncGetAttribute) func_get_attribute = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemAllocHost) mem_alloc_host = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  decltype(&::cuMemHostRegister) mem_host_register = nullptr;
  decltype(&::cuMemHostUnregister) mem_host_unregister = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuMemcpyDtoD) memcpy_dtod = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpy_dtoh_async = nullptr;
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
  decltype(&::cuMemsetD8) memset_d8 = nullptr;
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
};

/// The driver, loaded and initialised once; nullptr with `why` set when unavailable.
const Driver* driver(std::string* why = nullptr);

/// Throws ft::DeviceError naming the call when rc is not CUDA_SUCCESS.
void check(CUresult rc, const char* what);
/// cuMemAlloc of `bytes` into `ptr`; out of memory is a MemoryError with the bytes asked for and the
/// bytes free (fusetrack/memory_budget.h).
void check_alloc(const Driver& d, CUdeviceptr* ptr, size_t bytes, const char* what);

}  // namespace ft::cuda
