// NVRTC compilation of generated kernels, with an on-disk cache of the binaries.
// Compilation needs no GPU: CI compiles every kernel on a machine without one.
#pragma once
#include <string>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/error.h"

namespace ft {

/// NVRTC rejected a generated source. what() holds the log and, for each header the log
/// mentions, the plugin and element types it came from.
class KernelCompileError : public Error {
 public:
  KernelCompileError(const std::string& message, std::string log) : Error(message), m_log(std::move(log)) {}
  const std::string& log() const { return m_log; }

 private:
  std::string m_log;
};

struct CompiledKernel {
  std::vector<char> cubin;
  std::string log;               // NVRTC's log (warnings), may be empty
  bool from_cache = false;
  double seconds = 0.0;          // compile time, or cache lookup time on a hit
  std::string cache_file;        // where the binary is cached ("" when the cache is disabled)
  std::string cache_note;        // e.g. why an entry was rebuilt
};

/// Reads one kernel-cache entry file (header with magic, format version, payload size and checksum,
/// then the binary). Returns true with the binary, or false with `why`: "absent" when the file cannot
/// be opened, else what is wrong with it (the caller rebuilds the entry).
bool read_kernel_cache_entry(const std::string& path, std::vector<char>& payload, std::string& why);

class KernelCompiler {
 public:
  /// `cache_dir`: "" for the default (FUSETRACK_KERNEL_CACHE, else $XDG_CACHE_HOME/fusetrack/kernels,
  /// else ~/.cache/fusetrack/kernels); "off" disables the cache.
  explicit KernelCompiler(std::string cache_dir = "");

  /// Compiles for sm_<arch> (e.g. 90) with --fmad from the source's FMA mode.
  CompiledKernel compile(const KernelSource& source, int arch) const;

  /// The NVRTC options used for a source (part of the cache key).
  static std::vector<std::string> options(const KernelSource& source, int arch);
  static std::string nvrtc_version();
  static std::string default_cache_dir();
  const std::string& cache_dir() const { return m_cache_dir; }
  /// The cache key of a source: hash of source, headers, options, NVRTC version, arch and format.
  std::string cache_key(const KernelSource& source, int arch) const;

  /// Bumped whenever the cache file layout or the generated code's conventions change.
  static constexpr int kCacheFormatVersion = 1;

 private:
  std::string m_cache_dir;
};

}  // namespace ft
