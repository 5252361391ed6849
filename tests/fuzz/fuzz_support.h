// Shared pieces of the fuzz targets: the input as a file (the readers take paths), one registry
// with the built-in plugin, and the contract every target checks: bad input ends in an ft::Error
// (a clear message), anything else (a crash, a sanitizer report, another exception type, a leak,
// a hang) is a bug.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fusetrack/registry.h"

namespace ft::fuzz {

/// Writes the input to a file named `name` in this process's scratch directory; returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("fusetrack_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string path = (dir / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

/// The registry with the default plugins (the built-in element types), loaded once.
inline ElementRegistry& registry() {
  static ElementRegistry* r = [] {
    auto* reg = new ElementRegistry;
    reg->load_default_plugins();
    return reg;
  }();
  return *r;
}

}  // namespace ft::fuzz
