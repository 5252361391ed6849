// Internal: the state of a CudaBackend (its Impl), which the backend's files share: the loaded kernels,
// the switch tables, the collective elements' device state, the sampler of particles made on the device.
#pragma once
#include <cufft.h>

#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_collective_state.h"
#include "cuda_driver.h"
#include "cuda_staging.h"
#include "fusetrack/cuda_backend.h"

namespace ft {

namespace cuda {

/// A compiled form of the fused kernel, loaded.
struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUfunction few_particles = nullptr;  // kFewParticlesKernelName, where the source has it
  KernelSource source;
  CompiledKernel compiled;
};

}  // namespace cuda

struct CudaBackend::Impl {
  const cuda::Driver* d = nullptr;
  // Collective lattices: state kept across track() calls (multi-turn memory), rebuilt when the
  // numerics mode or the macroparticle count changes.
  std::vector<cuda::DeviceCollective> collective;
  cuda::CollectiveKernels collective_kernels;
  FmaMode collective_fma = FmaMode::Off;
  size_t collective_macroparticles = 0;
  bool collective_ready = false;
  std::vector<CollectiveSnapshot> snapshots;
  // The particles' copies through page-locked buffers (the buffers made with the first large copy, kept).
  std::unique_ptr<cuda::StagedCopier> staging;

  void free_collective() {
    for (cuda::DeviceCollective& c : collective) {
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
    collective_kernels = cuda::CollectiveKernels{};
    collective_ready = false;
  }
  CUcontext context = nullptr;
  // (fma, dispatch, register cap, particles per thread) -> kernel
  std::map<std::tuple<int, int, int, int>, cuda::LoadedKernel> kernels;
  std::map<std::pair<int, int>, KernelForm> measured_forms;         // (fma, log10 particles) -> auto's choice
  std::vector<std::pair<KernelForm, double>> last_measurement;      // element-passes/s per candidate
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

/// Particles made on the device for a collective run (track_matched_share), and what the run reports of them.
struct CudaBackend::DeviceSource {
  const MatchedBunchShare& share;
  bool download_final = true;
  const std::function<void(const Particles&)>& on_initial;
  MatchedShareRun result;
};

}  // namespace ft
