#include "fusetrack/cuda_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cuda_driver.h"
#include "gpu_module.h"
#include "fusetrack/codegen.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/error.h"
#include "fusetrack/nvrtc_compiler.h"

namespace ft {

namespace {

using cuda::check;

// The kernels (NVRTC, with the framework's device headers).
const char* kReductionKernels = "#include \"fusetrack/device/reduction_kernels.h\"\n";

int particle_count(const Particles& p) {
  if (p.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error(
        fmt::format("GPU reduction: {} particles in one call; at most {}", p.size(), std::numeric_limits<int>::max()));
  return static_cast<int>(p.size());
}

}  // namespace

const char* reduction_kernel_source() { return kReductionKernels; }

void gpu_deposit(SliceMomentReducer& reducer, const Particles& particles, int device, double* kernel_seconds) {
  GpuModule gpu(device, "fusetrack_reduction.cu", kReductionKernels, FmaMode::Off);
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
  GpuModule gpu(device, "fusetrack_reduction.cu", kReductionKernels, FmaMode::Off);
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
