// A collider bunch kept on a GPU between crossings (fusetrack/collider.h): the per-particle steps of
// fusetrack/device/collider_steps.h and the slice-moment deposit of fusetrack/device/reduction.h as small
// NVRTC kernels; only the slice-moment integers, the chunk sums of the records and the partner's
// slices cross the bus. With fma off every step equals the CPU's bit for bit.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/device/collider_steps.h"
#include "fusetrack/device/gaussian_bunch.h"
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
  /// The kernel time of all launches so far [s] (waits for those still queued).
  double kernel_seconds();

 private:
  std::unique_ptr<GpuModule> m_module;
  double m_kernel_seconds = 0.0;
};

class GpuColliderBunch {
 public:
  GpuColliderBunch(GpuColliderContext& gpu, const Particles& initial);
  /// Particles first, ..., first + count - 1 of the matched Gaussian bunch `seed`, generated on the device
  /// (fusetrack/device/gaussian_bunch.h; the same bits as ft::sample_gaussian_bunch with fma off); no host copy.
  GpuColliderBunch(GpuColliderContext& gpu, const ft_gaussian_bunch& bunch, uint64_t seed, size_t first, size_t count);
  ~GpuColliderBunch();
  GpuColliderBunch(const GpuColliderBunch&) = delete;
  GpuColliderBunch& operator=(const GpuColliderBunch&) = delete;

  size_t size() const { return m_n; }
  /// The particles as they are on the device (every array).
  void download(Particles& out);
  /// Particles first, ..., first + count - 1 as they are on the device.
  void download(Particles& out, size_t first, size_t count);
  void upload(const Particles& particles);
  /// Arrival at the IP in one pass: the record sums (kColliderSums per chunk, as the CPU's arrival
  /// gives them), the boost to the head-on frame, and this bunch's slice-moment integers added to
  /// `acc` (kSliceAccumulators per slice; particles outside the declared ranges counted in `rejected`).
  std::vector<double> arrive(const Bb6dParams& params, const SliceGrid& grid, const SliceMomentScales& scales,
                             std::vector<uint64_t>& acc, uint64_t& rejected);
  /// arrive() in two halves, so that several bunches' arrivals queue on the GPU without a wait between them:
  /// launch_arrival queues the kernels (`accumulators`: the length of `acc`), finish_arrival waits for them
  /// and adds their results.
  void launch_arrival(const Bb6dParams& params, const SliceGrid& grid, const SliceMomentScales& scales,
                      size_t accumulators);
  std::vector<double> finish_arrival(std::vector<uint64_t>& acc, uint64_t& rejected);
  /// Departure in one pass: the partner's slices, the inverse boost and, when `ring` is given, one
  /// turn of the linear map (fusetrack/device/collider_steps.h, collider_depart); queued, not waited for.
  void depart(const Bb6dParams& params, const std::vector<Bb6dSlice>& slices, const ColliderRingMap* ring, int turn);

 private:
  void allocate();

  GpuColliderContext& m_gpu;
  size_t m_n = 0;
  double m_beta0 = 1.0;
  uint64_t m_x = 0, m_px = 0, m_y = 0, m_py = 0, m_zeta = 0, m_delta = 0, m_ptau = 0, m_rpp = 0, m_rvv = 0, m_state = 0,
           m_lost_turn = 0, m_lost_element = 0, m_id = 0;
  uint64_t m_chunks = 0, m_slices = 0, m_acc = 0, m_rejected = 0;
  size_t m_slice_capacity = 0, m_acc_capacity = 0;
  size_t m_pending_accumulators = 0;  // launch_arrival's, until finish_arrival
};

}  // namespace ft
