// Internal: the particles on the device (the CUDA backend's single-particle and collective runs), and
// their copies to and from the host.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "cuda_driver.h"
#include "cuda_staging.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/particles.h"

namespace ft::cuda {

/// Device copies of the particle arrays, in the layout of FtParticleArrays in the kernels
/// (fusetrack/device/particle_arrays.h).
struct DeviceParticles {
  CUdeviceptr x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, lost_element;
};

constexpr size_t kBytesPerParticle = 9 * sizeof(double) + 2 * sizeof(int32_t) + sizeof(int64_t);

/// `f(host array, device array)` for every particle array, in the order of DeviceParticles.
template <class P, class D, class F>
void for_each_particle_array(P& p, D& dp, F f) {
  f(p.x, dp.x);
  f(p.px, dp.px);
  f(p.y, dp.y);
  f(p.py, dp.py);
  f(p.zeta, dp.zeta);
  f(p.delta, dp.delta);
  f(p.ptau, dp.ptau);
  f(p.rpp, dp.rpp);
  f(p.rvv, dp.rvv);
  f(p.state, dp.state);
  f(p.lost_turn, dp.lost_turn);
  f(p.lost_element, dp.lost_element);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Device arrays for `capacity` particles (freed with the object), and the copies of particles
/// [first, first + count) between them and the host, timed into the run's statistics (through the
/// page-locked staging buffers, cuda_staging.h; synchronous). The single-particle and the collective
/// paths share it.
class DeviceParticleBuffers {
 public:
  DeviceParticleBuffers(const Driver& d, StagedCopier& copier, size_t capacity, CudaRunStats& stats)
      : m_d(d), m_copier(copier), m_stats(stats) {
    const size_t n = std::max<size_t>(capacity, 1);
    const Particles types;  // empty: only the element types of its arrays are used
    for_each_particle_array(types, m_dp, [&](const auto& host, CUdeviceptr& device) {
      check_alloc(m_d, &device, n * sizeof(host[0]), "cuMemAlloc(particles)");
    });
  }
  ~DeviceParticleBuffers() {
    const Particles types;
    for_each_particle_array(types, m_dp, [&](const auto&, CUdeviceptr device) {
      if (device) m_d.mem_free(device);
    });
  }
  DeviceParticleBuffers(const DeviceParticleBuffers&) = delete;
  DeviceParticleBuffers& operator=(const DeviceParticleBuffers&) = delete;

  DeviceParticles& arrays() { return m_dp; }
  StagedCopier& copier() { return m_copier; }
  CudaRunStats& stats() { return m_stats; }
  void upload(const Particles& p, size_t first, size_t count) {
    const auto t0 = std::chrono::steady_clock::now();
    for_each_particle_array(p, m_dp, [&](const auto& host, CUdeviceptr device) {
      m_copier.to_device(device, host.data() + first, count * sizeof(host[0]));
    });
    m_stats.upload_seconds += seconds_since(t0);
  }
  void download(Particles& p, size_t first, size_t count) {
    const auto t0 = std::chrono::steady_clock::now();
    for_each_particle_array(p, m_dp, [&](auto& host, CUdeviceptr device) {
      m_copier.to_host(host.data() + first, device, count * sizeof(host[0]));
    });
    m_stats.download_seconds += seconds_since(t0);
  }

 private:
  const Driver& m_d;
  StagedCopier& m_copier;
  CudaRunStats& m_stats;
  DeviceParticles m_dp{};
};

}  // namespace ft::cuda
