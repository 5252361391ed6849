// Internal: particles made on the device (CudaBackend::track_matched_share): a matched bunch sampled by
// the host's code (fusetrack/device/matched_bunch_kernels.h), the sums of its sample moments and the
// alive count reduced on the device in a fixed order (no particle comes back for them).
#pragma once
#include <cstddef>
#include <string>

#include "cuda_backend_impl.h"
#include "cuda_device_particles.h"
#include "fusetrack/matched_bunch.h"

namespace ft::cuda {

/// Fills particles [0, share.count()) of `dp` with the share's particles, on the device (the sampler
/// kernels compiled or loaded from the cache with their first use, the time into stats.compile_seconds);
/// returns the sums of their zeta, delta and squares. Wall time into stats.generate_seconds.
LongitudinalSums make_particles_on_device(CudaBackend::Impl& impl, const std::string& cache_dir, int arch,
                                          const MatchedBunchShare& share, DeviceParticles& dp, CudaRunStats& stats);

/// Particles [0, n) of `dp` alive (state > 0), counted on the device.
size_t count_alive_on_device(const CudaBackend::Impl& impl, const DeviceParticles& dp, size_t n);

/// Host arrays for the particles of `share` (ids first + i; the rest is overwritten by the copy
/// from the device): the 13 arrays are allocated and first touched in parallel threads, which at
/// 10^8 particles (8.8 GB) takes a fraction of Particles(n)'s single-threaded page faulting.
Particles host_arrays_for(const MatchedBunchShare& share);

}  // namespace ft::cuda
