// Paths the tests use: the source tree, the build tree, and ../shared (real lattices).
#pragma once
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace ft::test {

inline std::string source_path(const std::string& relative) { return std::string(FT_SOURCE_DIR) + "/" + relative; }
inline std::string build_path(const std::string& relative) { return std::string(FT_BUILD_DIR) + "/" + relative; }
/// A file of ../shared, or "" when the folder is absent (the test then reports itself skipped).
inline std::string shared_path(const std::string& relative) {
  const std::string p = std::string(FT_SHARED_DIR) + "/" + relative;
  return std::filesystem::exists(p) ? p : std::string();
}

/// Ends this test process reporting the test as skipped: exit code 77 is CTest's
/// SKIP_RETURN_CODE for every suite (each test case runs in its own process under CTest), so a
/// test whose inputs are absent shows as "Skipped", never as passed.
[[noreturn]] inline void skip_test(const std::string& reason) {
  std::printf("SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
  std::exit(77);
}

/// A file of ../shared, or skips the test when it is absent.
inline std::string require_shared(const std::string& relative) {
  const std::string p = shared_path(relative);
  if (p.empty()) skip_test("../shared/" + relative + " is absent (the folder of real lattices is not next to the project)");
  return p;
}

/// A fresh temporary directory for one test (per process, so concurrent runs do not collide).
inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("fusetrack_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace ft::test
