#include "fusetrack/memory_budget.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ft {

namespace {

constexpr uint64_t kUncheckedBytes = 64ull << 20;

uint64_t env_limit(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? parse_byte_size(v, name) : 0;
}

}  // namespace

uint64_t saturating_product(std::initializer_list<uint64_t> factors) {
  uint64_t p = 1;
  for (uint64_t f : factors) {
    if (f == 0) return 0;
    if (p > UINT64_MAX / f) p = UINT64_MAX;
    else p *= f;
  }
  return p;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes == UINT64_MAX) return "more than 2^64 bytes";
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{} bytes ({:.1f} TiB)", bytes, b / (1024.0 * 1024 * 1024 * 1024));
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{} bytes ({:.1f} GiB)", bytes, b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{} bytes ({:.1f} MiB)", bytes, b / (1024.0 * 1024));
  return fmt::format("{} bytes", bytes);
}

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t i = 0;
  uint64_t v = 0;
  bool overflow = false;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (v > (UINT64_MAX - 9) / 10) overflow = true;
    v = v * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  uint64_t unit = 1;
  if (i < text.size()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    unit = s == 'K' ? 1ull << 10 : s == 'M' ? 1ull << 20 : s == 'G' ? 1ull << 30 : s == 'T' ? 1ull << 40 : 0;
    ++i;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;
  }
  if (i == 0 || unit == 0 || i != text.size() || overflow || v > UINT64_MAX / unit)
    throw Error(fmt::format("{}: '{}' is not a size in bytes (e.g. 1048576, 512M, 2G)", what, text));
  return v * unit;
}

uint64_t available_host_memory() {
  uint64_t available = UINT64_MAX;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit rl{};
    if (getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      available = std::min<uint64_t>(available, rl.rlim_cur);
  }
  if (const uint64_t cap = env_limit("FUSETRACK_HOST_MEMORY_LIMIT"); cap > 0) available = std::min(available, cap);
  return available;
}

void require_host_memory(uint64_t bytes, const std::string& what) {
  if (bytes < kUncheckedBytes) return;
  const uint64_t available = available_host_memory();
  if (bytes > available)
    throw MemoryError(fmt::format("{} needs {} of host memory, but only {} are available", what, format_bytes(bytes),
                                  format_bytes(available)));
}

uint64_t gpu_memory_limit() { return env_limit("FUSETRACK_GPU_MEMORY_LIMIT"); }

GpuResidency plan_gpu_residency(size_t particles, size_t bytes_per_particle, uint64_t free_bytes, size_t max_resident,
                                bool all_resident, const std::string& why_all_resident) {
  if (const uint64_t cap = gpu_memory_limit(); cap > 0) free_bytes = std::min(free_bytes, cap);
  const uint64_t usable = free_bytes / 5 * 4;  // 80%: kernels, tables and the driver need the rest
  const uint64_t needed = saturating_product({particles, bytes_per_particle});
  size_t resident = static_cast<size_t>(usable / std::max<size_t>(bytes_per_particle, 1));
  if (max_resident > 0) resident = std::min(resident, max_resident);
  if (all_resident && resident < particles)
    throw MemoryError(fmt::format("{} keeps all {} particles on the GPU: they need {}, but {} of GPU memory {} free "
                                  "(80% of it usable for particles); use fewer particles or more GPUs",
                                  why_all_resident, particles, format_bytes(needed), format_bytes(free_bytes),
                                  gpu_memory_limit() > 0 ? "is allowed by FUSETRACK_GPU_MEMORY_LIMIT" : "is"));
  if (resident == 0)
    throw MemoryError(fmt::format("not enough free GPU memory for a single particle ({} needed, {} free)",
                                  format_bytes(bytes_per_particle), format_bytes(free_bytes)));
  GpuResidency plan;
  plan.resident = std::min(resident, std::max<size_t>(particles, 1));
  plan.chunks = particles == 0 ? 0 : (particles + plan.resident - 1) / plan.resident;
  return plan;
}

}  // namespace ft
