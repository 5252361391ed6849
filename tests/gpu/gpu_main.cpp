// The GPU suite's main: without a usable GPU every test reports itself skipped (exit code 77,
// which CTest shows as "Skipped"), never passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "fusetrack/cuda_device.h"

int main(int argc, char** argv) {
  bool listing = false;  // CTest's test discovery lists the cases; that needs no GPU
  for (int i = 1; i < argc; ++i) listing |= std::string(argv[i]).rfind("--list", 0) == 0;
  const std::string why = ft::gpu_unavailable_reason();
  if (!listing && !why.empty()) {
    std::printf("SKIPPED: GPU tests need a CUDA device: %s\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
