// The registry with the built-in plugin, as the command line loads it.
#pragma once
#include <fstream>
#include <string>

#include "fusetrack/lattice.h"
#include "fusetrack/registry.h"
#include "support/paths.h"

namespace ft::test {

inline ElementRegistry& builtin_registry() {
  static ElementRegistry registry;
  static bool loaded = false;
  if (!loaded) {
    registry.load_default_plugins();
    loaded = true;
  }
  return registry;
}

/// Writes `text` to a file in a temporary directory and returns its path.
inline std::string write_temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("fusetrack_test_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

/// The message of the ft::Error thrown by `f`, or "" if none was thrown.
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace ft::test
