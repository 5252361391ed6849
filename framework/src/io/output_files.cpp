#include "fusetrack/output_files.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fusetrack/error.h"

namespace ft {

namespace fs = std::filesystem;

namespace {

InputError output_error(const std::string& option, const std::string& problem) {
  InputLocation at;
  at.field = option;
  return InputError(at, problem);
}

/// "" if a file can be created in `dir`, else why not (errno text).
std::string probe_writable(const fs::path& dir) {
  const std::string probe = temporary_path_for((dir / ".fusetrack_write_probe").string());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) return std::strerror(errno);
  std::fclose(f);
  std::remove(probe.c_str());
  return "";
}

}  // namespace

void check_output_file(const std::string& path, const std::string& option) {
  std::error_code ec;
  if (path.empty()) throw output_error(option, "the output file name is empty");
  if (fs::is_directory(path, ec)) throw output_error(option, fmt::format("cannot write '{}': it is a directory", path));
  const fs::path parent = fs::path(path).parent_path();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  if (!fs::exists(dir, ec))
    throw output_error(option, fmt::format("cannot write '{}': the directory '{}' does not exist", path, dir.string()));
  if (!fs::is_directory(dir, ec))
    throw output_error(option, fmt::format("cannot write '{}': '{}' is not a directory", path, dir.string()));
  if (const std::string why = probe_writable(dir); !why.empty())
    throw output_error(option,
                       fmt::format("cannot write '{}': the directory '{}' is not writable ({})", path, dir.string(), why));
}

void check_output_directory(const std::string& directory, const std::string& option) {
  std::error_code ec;
  if (directory.empty()) throw output_error(option, "the output directory name is empty");
  const fs::path dir(directory);
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      throw output_error(option, fmt::format("the output directory '{}' is a file", directory));
    if (const std::string why = probe_writable(dir); !why.empty())
      throw output_error(option, fmt::format("the output directory '{}' is not writable ({})", directory, why));
    return;
  }
  // Created later with its parents: the nearest existing ancestor must be a writable directory.
  fs::path ancestor = dir.parent_path();
  while (!ancestor.empty() && !fs::exists(ancestor, ec)) ancestor = ancestor.parent_path();
  if (ancestor.empty()) ancestor = ".";
  if (!fs::is_directory(ancestor, ec))
    throw output_error(option, fmt::format("cannot create the output directory '{}': '{}' is a file", directory,
                                           ancestor.string()));
  if (const std::string why = probe_writable(ancestor); !why.empty())
    throw output_error(option, fmt::format("cannot create the output directory '{}': '{}' is not writable ({})",
                                           directory, ancestor.string(), why));
}

std::string temporary_path_for(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}.tmp.{}.{}", path, static_cast<long>(getpid()), counter.fetch_add(1));
}

void commit_temporary(const std::string& tmp, const std::string& path) {
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();  // before the clean-up reuses ec
    fs::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot write the file (rename of the finished temporary file failed: {})", path, why));
  }
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& writer, bool binary) {
  const std::string tmp = temporary_path_for(path);
  try {
    std::ofstream out(tmp, binary ? std::ios::binary : std::ios::out);
    if (!out) throw Error(fmt::format("{}: cannot write the file ({})", path, std::strerror(errno)));
    writer(out);
    out.flush();
    if (!out) throw Error(fmt::format("{}: writing the file failed (disk full?)", path));
    out.close();
    if (!out) throw Error(fmt::format("{}: writing the file failed (disk full?)", path));
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  commit_temporary(tmp, path);
}

void write_file_atomically(const std::string& path, const std::string& content) {
  write_file_atomically(path, [&](std::ostream& out) { out.write(content.data(), static_cast<std::streamsize>(content.size())); },
                        true);
}

}  // namespace ft
