// Memory a run asks for, checked before it is allocated.
//
// Requests that cannot fit (particles, grids, monitor records) are refused up front with the bytes
// needed and the bytes available, never a bare std::bad_alloc. On the GPU, particles that do not fit
// into free memory are tracked in consecutive chunks (plan_gpu_residency); runs that need every
// particle resident (collective elements, per-turn callbacks) are refused with the sizes.
//
// Limits for testing and for sharing a machine:
//   FUSETRACK_HOST_MEMORY_LIMIT  caps the host memory fusetrack assumes available (bytes, or with a
//                                suffix K, M, G, T: powers of 1024);
//   FUSETRACK_GPU_MEMORY_LIMIT   caps the GPU memory the CUDA backend uses (same syntax): particles
//                                beyond it are tracked in chunks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "fusetrack/error.h"

namespace ft {

/// A request that cannot fit into the memory available; what() gives both sizes.
class MemoryError : public Error {
 public:
  using Error::Error;
};

/// Host bytes per particle of ft::Particles: nine doubles, state and lost_turn (int32), lost_element
/// and id (int64).
inline constexpr uint64_t kHostBytesPerParticle = 9 * 8 + 2 * 4 + 2 * 8;

/// The product of the factors, or UINT64_MAX when it overflows.
uint64_t saturating_product(std::initializer_list<uint64_t> factors);

/// "123456789 bytes (117.7 MiB)".
std::string format_bytes(uint64_t bytes);

/// Parses "1048576", "512M", "2G" (powers of 1024). Throws Error naming `what` otherwise.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

/// Host memory available to this process: MemAvailable (/proc/meminfo), capped by the address-space
/// and data limits (ulimit -v, -d) and by FUSETRACK_HOST_MEMORY_LIMIT.
uint64_t available_host_memory();

/// Throws MemoryError "`what` needs N bytes ... but only M bytes are available" when `bytes` exceed
/// the available host memory. Requests below 64 MiB are not checked (no system call per small array).
void require_host_memory(uint64_t bytes, const std::string& what);

/// FUSETRACK_GPU_MEMORY_LIMIT in bytes, or 0 when unset.
uint64_t gpu_memory_limit();

/// How many particles a GPU run keeps resident at once, and in how many chunks it tracks them.
struct GpuResidency {
  size_t resident = 0;  // particles on the device at once
  size_t chunks = 0;    // consecutive chunks tracked for all turns each
};

/// Plans a GPU run of `particles` needing `bytes_per_particle` each, with `free_bytes` of device
/// memory free (capped by FUSETRACK_GPU_MEMORY_LIMIT; 80% of it is used for particles, the rest is
/// left for kernels and tables) and `max_resident` (0: no cap) from the options. With
/// `all_resident` (collective runs, per-turn callbacks) a run that needs chunks is refused with a
/// MemoryError naming `why_all_resident`, the bytes needed and the bytes free.
GpuResidency plan_gpu_residency(size_t particles, size_t bytes_per_particle, uint64_t free_bytes, size_t max_resident,
                                bool all_resident, const std::string& why_all_resident);

}  // namespace ft
