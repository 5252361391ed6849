// A collider bunch kept on a GPU between crossings (fusetrack/collider.h): the per-particle steps of
// fusetrack/device/collider.h and the slice-moment deposit of fusetrack/device/reduction.h as small
// NVRTC kernels; only the slice-moment integers, the chunk sums of the records and the partner's
// slices cross the bus. With fma off every step equals the CPU's bit for bit.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/device/collider.h"
#include "fusetrack/particles.h"
#include "fusetrack/reduction.h"
#include "fusetrack/tracker.h"

namespace ft {

/// The collider kernels' source (compiled by NVRTC; the CPU-only tests compile it too).
const char* collider_kernel_source();

class GpuModule;

/// The compiled collider kernels on one GPU, shared by the bunches of a rank.
class GpuColliderContext {
 public:
  /// Throws DeviceError when the GPU cannot be used.
  GpuColliderContext(int device, FmaMode fma);
  ~GpuColliderContext();
  GpuModule& module() { return *m_module; }
  double kernel_seconds = 0.0;  // all launches so far

 private:
  std::unique_ptr<GpuModule> m_module;
};

class GpuColliderBunch {
 public:
  GpuColliderBunch(GpuColliderContext& gpu, const Particles& initial);
  ~GpuColliderBunch();
  GpuColliderBunch(const GpuColliderBunch&) = delete;
  GpuColliderBunch& operator=(const GpuColliderBunch&) = delete;

  /// The particles as they are on the device (every array).
  void download(Particles& out);
  void upload(const Particles& particles);
  /// Per chunk (kColliderChunks): alive and the six coordinate sums (7 values), then the central
  /// second sums about `mean` (8 values).
  std::vector<double> chunk_first();
  std::vector<double> chunk_second(const std::array<double, 6>& mean);
  void boost(const Bb6dParams& params);
  /// Adds this bunch's slice-moment integers to `acc` (kSliceAccumulators per slice) and counts the
  /// particles outside the declared ranges in `rejected`.
  void deposit(const SliceGrid& grid, const SliceMomentScales& scales, std::vector<uint64_t>& acc, uint64_t& rejected);
  void kick(const Bb6dParams& params, const std::vector<Bb6dSlice>& slices, int turn);
  void ring_turn(const ColliderRingMap& map, int turn);

 private:
  GpuColliderContext& m_gpu;
  size_t m_n = 0;
  double m_beta0 = 1.0;
  uint64_t m_x = 0, m_px = 0, m_y = 0, m_py = 0, m_zeta = 0, m_delta = 0, m_ptau = 0, m_rpp = 0, m_rvv = 0, m_state = 0,
           m_lost_turn = 0, m_lost_element = 0, m_id = 0;
  uint64_t m_chunks = 0, m_slices = 0, m_acc = 0, m_rejected = 0, m_mean = 0;
  size_t m_slice_capacity = 0, m_acc_capacity = 0;
};

}  // namespace ft
