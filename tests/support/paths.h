// Paths the tests use: the source tree, the build tree, and ../shared (real lattices).
#pragma once
#include <filesystem>
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

/// A fresh temporary directory for one test (per process, so concurrent runs do not collide).
inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("fusetrack_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace ft::test
