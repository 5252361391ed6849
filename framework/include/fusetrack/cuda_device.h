// The CUDA driver, loaded at run time (dlopen of libcuda.so.1), so that the same binary starts
// and tracks on the CPU on a machine with no GPU and no driver: never a link-time failure.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace ft {

struct GpuInfo {
  int index = 0;
  std::string name;
  int arch = 0;            // compute capability as 10*major + minor, e.g. 90
  size_t total_memory = 0; // bytes
  int multiprocessors = 0;
};

/// Why no GPU can be used ("" when one can), e.g. "libcuda.so.1 not found (no NVIDIA driver)".
std::string gpu_unavailable_reason();
/// The GPUs the driver reports (empty without a driver).
std::vector<GpuInfo> list_gpus();

}  // namespace ft
