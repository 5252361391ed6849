// Fuzz target: the kernel-cache entry reader (magic, format version, payload size, checksum). A
// corrupt entry must be reported (and rebuilt by the caller), never trusted for an allocation.
#include <vector>

#include "fuzz_support.h"
#include "fusetrack/nvrtc_compiler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ft::fuzz::write_input(data, size, "entry.cubin");
  std::vector<char> payload;
  std::string why;
  const bool ok = ft::read_kernel_cache_entry(path, payload, why);
  if (!ok && why.empty()) __builtin_trap();  // a refusal always says why
  if (ok && (payload.empty() || payload.size() > size)) __builtin_trap();
  return 0;
}
