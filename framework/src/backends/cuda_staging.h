// Internal: copies of large pageable host arrays to and from the GPU through page-locked staging buffers.
#pragma once
#include <cstddef>

#include "cuda_driver.h"

namespace ft::cuda {

/// Host <-> device copies of pageable arrays (the particles' std::vectors) through two page-locked buffers:
/// the host threads copy one chunk into (or out of) one buffer while the copy engine moves the other, so a
/// copy runs at the bus's page-locked rate instead of the driver's single-threaded pageable path. The copies
/// go on the default stream, in order with the kernels. Bytes are moved unchanged: results do not depend on
/// the path. Copies below `min_staged_bytes`, and every copy when the page-locked buffers cannot be had, use
/// the plain synchronous cuMemcpy. The buffers are allocated at the first staged copy and kept.
/// FUSETRACK_STAGED_COPIES=0: plain copies always (the benchmark's baseline).
class StagedCopier {
 public:
  static constexpr size_t kChunkBytes = size_t(32) << 20;
  static constexpr size_t kMinStagedBytes = size_t(8) << 20;

  explicit StagedCopier(const Driver& d);
  ~StagedCopier();
  StagedCopier(const StagedCopier&) = delete;
  StagedCopier& operator=(const StagedCopier&) = delete;

  void to_device(CUdeviceptr dst, const void* src, size_t bytes);
  void to_host(void* dst, CUdeviceptr src, size_t bytes);

 private:
  bool ready();  // the buffers and events, made on first use; false: plain copies
  const Driver& m_d;
  bool m_enabled = true, m_tried = false;
  void* m_buffer[2] = {nullptr, nullptr};
  CUevent m_done[2] = {nullptr, nullptr};
};

}  // namespace ft::cuda
