#include "cuda_staging.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ft::cuda {

namespace {

/// memcpy of `bytes` on the OpenMP threads in pieces of 1 MiB (one thread moves about 10 GB/s, less than the bus).
void threaded_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPiece = size_t(1) << 20;
  const long pieces = static_cast<long>((bytes + kPiece - 1) / kPiece);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (long i = 0; i < pieces; ++i) {
    const size_t offset = static_cast<size_t>(i) * kPiece;
    std::memcpy(d + offset, s + offset, std::min(kPiece, bytes - offset));
  }
}

}  // namespace

StagedCopier::StagedCopier(const Driver& d) : m_d(d) {
  const char* env = std::getenv("FUSETRACK_STAGED_COPIES");
  m_enabled = !(env && std::string(env) == "0");
}

StagedCopier::~StagedCopier() {
  for (int b = 0; b < 2; ++b) {
    if (m_done[b]) m_d.event_destroy(m_done[b]);
    if (m_buffer[b]) m_d.mem_free_host(m_buffer[b]);
  }
}

bool StagedCopier::ready() {
  if (!m_enabled) return false;
  if (m_tried) return m_buffer[1] != nullptr;
  m_tried = true;
  for (int b = 0; b < 2; ++b)
    if (m_d.mem_alloc_host(&m_buffer[b], kChunkBytes) != CUDA_SUCCESS ||
        m_d.event_create(&m_done[b], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      for (int c = 0; c <= b; ++c) {  // no page-locked memory to be had: plain copies from now on
        if (m_done[c]) m_d.event_destroy(m_done[c]);
        if (m_buffer[c]) m_d.mem_free_host(m_buffer[c]);
        m_done[c] = nullptr;
        m_buffer[c] = nullptr;
      }
      return false;
    }
  return true;
}

void StagedCopier::to_device(CUdeviceptr dst, const void* src, size_t bytes) {
  if (bytes < kMinStagedBytes || !ready()) {
    check(m_d.memcpy_htod(dst, src, bytes), "cuMemcpyHtoD(particles)");
    return;
  }
  // Chunk i fills buffer i % 2 once the copy engine has emptied it (its event), then goes up asynchronously.
  const char* s = static_cast<const char*>(src);
  bool pending[2] = {false, false};
  size_t chunk = 0;
  for (size_t offset = 0; offset < bytes; offset += kChunkBytes, ++chunk) {
    const int b = static_cast<int>(chunk % 2);
    const size_t n = std::min(kChunkBytes, bytes - offset);
    if (pending[b]) check(m_d.event_synchronize(m_done[b]), "cuEventSynchronize(staged copy)");
    threaded_copy(m_buffer[b], s + offset, n);
    check(m_d.memcpy_htod_async(dst + offset, m_buffer[b], n, nullptr), "cuMemcpyHtoDAsync(particles)");
    check(m_d.event_record(m_done[b], nullptr), "cuEventRecord(staged copy)");
    pending[b] = true;
  }
  for (int b = 0; b < 2; ++b)
    if (pending[b]) check(m_d.event_synchronize(m_done[b]), "cuEventSynchronize(staged copy)");
}

void StagedCopier::to_host(void* dst, CUdeviceptr src, size_t bytes) {
  if (bytes < kMinStagedBytes || !ready()) {
    check(m_d.memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH(particles)");
    return;
  }
  // Chunk i + 1 comes down into one buffer while the host threads empty chunk i from the other.
  char* out = static_cast<char*>(dst);
  const size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  auto request = [&](size_t chunk) {
    const size_t offset = chunk * kChunkBytes;
    const int b = static_cast<int>(chunk % 2);
    check(m_d.memcpy_dtoh_async(m_buffer[b], src + offset, std::min(kChunkBytes, bytes - offset), nullptr),
          "cuMemcpyDtoHAsync(particles)");
    check(m_d.event_record(m_done[b], nullptr), "cuEventRecord(staged copy)");
  };
  request(0);
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + 1 < chunks) request(chunk + 1);  // its buffer was emptied in the previous iteration
    const int b = static_cast<int>(chunk % 2);
    check(m_d.event_synchronize(m_done[b]), "cuEventSynchronize(staged copy)");
    const size_t offset = chunk * kChunkBytes;
    threaded_copy(out + offset, m_buffer[b], std::min(kChunkBytes, bytes - offset));
  }
}

}  // namespace ft::cuda
