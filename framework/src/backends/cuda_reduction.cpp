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

// One thread per particle; integer atomics into the accumulators and the rejected-particle count.
const char* kReductionKernels = R"(#include "fusetrack/device/reduction.h"
extern "C" __global__ void fusetrack_slice_moments(ft::SliceGrid g, ft::SliceMomentScales s, const double* x,
    const double* px, const double* y, const double* py, const double* zeta, const double* delta, const int* state,
    int n, unsigned long long* acc, unsigned long long* rejected) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int bins[2];
  long long out[2][ft::kSliceAccumulators];
  int m = 0;
  if (i < n && state[i] > 0) {
    const double c[6] = {x[i], px[i], y[i], py[i], zeta[i], delta[i]};
    m = ft::slice_moment_contributions(g, s, c, bins, out);
  }
  ft::warp_count_add(m < 0 ? 1u : 0u, rejected);  // every lane of the warp gets here
  for (int b = 0; b < m; ++b)
    for (int k = 0; k < ft::kSliceAccumulators; ++k)
      atomicAdd(acc + bins[b] * ft::kSliceAccumulators + k, static_cast<unsigned long long>(out[b][k]));
}
extern "C" __global__ void fusetrack_charge_grid(ft::ChargeGridSpec g, const double* x, const double* y,
    const double* zeta, const int* state, int n, unsigned long long* acc, unsigned long long* rejected) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  long long nodes[8];
  unsigned long long w[8];
  int m = 0;
  bool outside = false;
  if (i < n && state[i] > 0) {
    const double pos[3] = {x[i], y[i], zeta[i]};
    m = ft::charge_deposit(g, pos, nodes, w);
    outside = m == 0;
  }
  ft::warp_count_add(outside ? 1u : 0u, rejected);  // every lane of the warp gets here
  FT_UNROLL
  for (int c = 0; c < 8; ++c)
    if (c < m) atomicAdd(acc + nodes[c], w[c]);
}
)";

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
