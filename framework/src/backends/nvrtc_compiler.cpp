#include "fusetrack/nvrtc_compiler.h"

#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

namespace ft {

namespace fs = std::filesystem;

namespace {

/// 64-bit FNV-1a; two independent seeds make the 128-bit cache key and the entry checksum.
uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

struct Hasher {
  uint64_t a = 14695981039346656037ull, b = 0x9e3779b97f4a7c15ull;
  void add(const std::string& s) {
    const uint64_t len = s.size();
    a = fnv1a(&len, sizeof len, a);
    b = fnv1a(&len, sizeof len, b);
    a = fnv1a(s.data(), s.size(), a);
    b = fnv1a(s.data(), s.size(), b);
  }
  std::string hex() const { return fmt::format("{:016x}{:016x}", a, b); }
};

constexpr char kEntryMagic[8] = {'F', 'T', 'K', 'C', 'U', 'B', 'I', 'N'};

struct EntryHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t payload_size;
  uint64_t payload_checksum;
};

}  // namespace

bool read_kernel_cache_entry(const std::string& path, std::vector<char>& out, std::string& why) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    why = "absent";
    return false;
  }
  // The payload size in the header is checked against the file before anything is allocated: a
  // corrupt entry must not ask for gigabytes.
  const std::streamoff file_size = in.tellg();
  in.seekg(0, std::ios::beg);
  EntryHeader h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (in.gcount() != static_cast<std::streamsize>(sizeof h) || std::memcmp(h.magic, kEntryMagic, 8) != 0) {
    why = "bad header";
    return false;
  }
  if (h.format_version != KernelCompiler::kCacheFormatVersion) {
    why = fmt::format("cache format {} (expected {})", h.format_version, KernelCompiler::kCacheFormatVersion);
    return false;
  }
  const uint64_t stored = static_cast<uint64_t>(file_size) - static_cast<uint64_t>(sizeof h);
  if (h.payload_size == 0 || h.payload_size < stored) {
    why = fmt::format("bad payload size {} (the file holds {} bytes after the header)", h.payload_size, stored);
    return false;
  }
  if (h.payload_size > stored) {
    why = fmt::format("truncated ({} of {} payload bytes)", stored, h.payload_size);
    return false;
  }
  out.resize(h.payload_size);
  in.read(out.data(), static_cast<std::streamsize>(h.payload_size));
  if (in.gcount() != static_cast<std::streamsize>(h.payload_size)) {
    why = "truncated";
    return false;
  }
  if (fnv1a(out.data(), out.size(), 14695981039346656037ull) != h.payload_checksum) {
    why = "checksum mismatch";
    return false;
  }
  return true;
}

namespace {

/// Writes a cache entry atomically: a unique temporary file in the same directory, then rename.
void write_entry(const std::string& path, const std::vector<char>& payload) {
  EntryHeader h{};
  std::memcpy(h.magic, kEntryMagic, 8);
  h.format_version = KernelCompiler::kCacheFormatVersion;
  h.payload_size = payload.size();
  h.payload_checksum = fnv1a(payload.data(), payload.size(), 14695981039346656037ull);
  std::random_device rd;
  const std::string tmp = fmt::format("{}.tmp.{}.{:x}", path, getpid(), rd());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error(fmt::format("kernel cache: cannot write {}", tmp));
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out) throw Error(fmt::format("kernel cache: write to {} failed", tmp));
  }
  fs::rename(tmp, path);
}

std::string origins_for_log(const KernelSource& source, const std::string& log) {
  std::string out;
  for (const auto& [header, origin] : source.header_origin)
    if (log.find(header) != std::string::npos) out += fmt::format("\n  {} comes from {}", header, origin);
  return out;
}

}  // namespace

KernelCompiler::KernelCompiler(std::string cache_dir) : m_cache_dir(std::move(cache_dir)) {
  if (m_cache_dir.empty()) m_cache_dir = default_cache_dir();
}

std::string KernelCompiler::default_cache_dir() {
  if (const char* env = std::getenv("FUSETRACK_KERNEL_CACHE"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/fusetrack/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/fusetrack/kernels";
  return (fs::temp_directory_path() / "fusetrack-kernels").string();
}

std::string KernelCompiler::nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::vector<std::string> KernelCompiler::options(const KernelSource& source, int arch) {
  std::vector<std::string> o = {fmt::format("--gpu-architecture=sm_{}", arch), "--std=c++17", "-default-device"};
  if (source.fma == FmaMode::On) {
    o.push_back("--fmad=true");
  } else {
    // IEEE-rounded division and sqrt and no flushing are NVRTC's defaults; stated explicitly.
    o.insert(o.end(), {"--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false"});
  }
  if (source.report_resources) o.push_back("--ptxas-options=--verbose");
  return o;
}

std::string KernelCompiler::cache_key(const KernelSource& source, int arch) const {
  Hasher h;
  h.add(fmt::format("format {}", kCacheFormatVersion));
  h.add(source.text);
  for (const auto& [name, text] : source.headers) {
    h.add(name);
    h.add(text);
  }
  for (const auto& o : options(source, arch)) h.add(o);
  h.add(nvrtc_version());
  h.add(fmt::format("sm_{}", arch));
  return h.hex();
}

CompiledKernel KernelCompiler::compile(const KernelSource& source, int arch) const {
  CompiledKernel result;
  const auto t0 = std::chrono::steady_clock::now();
  const bool use_cache = m_cache_dir != "off";
  if (use_cache) {
    result.cache_file = (fs::path(m_cache_dir) / (cache_key(source, arch) + ".cubin")).string();
    std::string why;
    if (read_kernel_cache_entry(result.cache_file, result.cubin, why)) {
      result.from_cache = true;
      result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return result;
    }
    if (why != "absent") {
      result.cache_note = fmt::format("kernel cache entry {} is corrupt ({}); rebuilding it", result.cache_file, why);
      std::cerr << "warning: " << result.cache_note << "\n";
    }
  }

  std::vector<const char*> header_texts, header_names;
  for (const auto& [name, text] : source.headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  nvrtcProgram prog;
  nvrtcResult rc = nvrtcCreateProgram(&prog, source.text.c_str(), source.name.c_str(),
                                      static_cast<int>(header_texts.size()), header_texts.data(), header_names.data());
  if (rc != NVRTC_SUCCESS) throw Error(fmt::format("NVRTC: cannot create program: {}", nvrtcGetErrorString(rc)));
  const std::vector<std::string> opts = options(source, arch);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  rc = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  result.log.assign(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(prog, result.log.data());
  while (!result.log.empty() && (result.log.back() == '\0' || result.log.back() == '\n')) result.log.pop_back();
  if (rc != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    std::string opt_list;
    for (const auto& o : opts) opt_list += " " + o;
    throw KernelCompileError(fmt::format("NVRTC failed to compile the fused kernel ({}; options:{}):\n{}{}",
                                         nvrtcGetErrorString(rc), opt_list, result.log,
                                         origins_for_log(source, result.log)),
                             result.log);
  }
  size_t cubin_size = 0;
  nvrtcGetCUBINSize(prog, &cubin_size);
  result.cubin.resize(cubin_size);
  nvrtcGetCUBIN(prog, result.cubin.data());
  nvrtcDestroyProgram(&prog);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (use_cache) {
    try {
      fs::create_directories(m_cache_dir);
      write_entry(result.cache_file, result.cubin);
    } catch (const std::exception& e) {
      std::cerr << "warning: kernel cache not written: " << e.what() << "\n";
      result.cache_file.clear();
    }
  }
  return result;
}

}  // namespace ft
