// Shard sets: the particles of a run over several MPI ranks, one file per rank and an index
// (fusetrack/particle_files.h), written in parallel without gathering the particles on one rank.
#include "particle_shards.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "core/text.hpp"

namespace ft {

namespace fs = std::filesystem;

namespace {

constexpr const char* kShardCountsMember = "fusetrack_shard_counts";
constexpr const char* kCsvIndexHeader = "fusetrack_shard,count";
// An index holds 8 bytes per shard: anything larger is a particle file, not read twice to find out.
constexpr uintmax_t kLargestIndexBytes = uintmax_t(16) << 20;

std::string extension_of(const std::string& path) { return ends_with(path, ".csv") ? ".csv" : ".npz"; }

std::string shard_name(int rank, const std::string& extension) { return fmt::format("rank{:04d}{}", rank, extension); }

void write_index(const std::string& path, const std::vector<int64_t>& counts) {
  if (ends_with(path, ".csv")) {
    const std::string dir_name = fs::path(path + ".d").filename().string();
    write_file_atomically(path, [&](std::ostream& out) {
      out << kCsvIndexHeader << '\n';
      for (size_t r = 0; r < counts.size(); ++r)
        out << dir_name << '/' << shard_name(static_cast<int>(r), ".csv") << ',' << counts[r] << '\n';
    });
    return;
  }
  write_npz(path, {{kShardCountsMember, NpyArray::from(counts)}});
}

/// Shard files that an earlier run with more ranks left behind (rankNNNN beyond `ranks`).
void remove_stale_shards(const std::string& path, int ranks) {
  const fs::path dir(path + ".d");
  const std::regex pattern("rank([0-9]{4,})" + std::regex_replace(extension_of(path), std::regex("\\."), "\\."));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, pattern) && std::stol(m[1].str()) >= ranks) fs::remove(entry.path(), ec);
  }
}

}  // namespace

std::string particle_shard_path(const std::string& path, int rank) {
  return (fs::path(path + ".d") / shard_name(rank, extension_of(path))).string();
}

bool is_particle_shard_index(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec || bytes > kLargestIndexBytes) return false;
  if (ends_with(path, ".csv")) {
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    if (!first.empty() && first.back() == '\r') first.pop_back();
    return first == kCsvIndexHeader;
  }
  if (!ends_with(path, ".npz")) return false;
  try {
    const NpzArchive a = read_npz(path);
    return a.size() == 1 && a.count(kShardCountsMember) == 1;
  } catch (const Error&) {
    return false;  // not an archive: the particle reader reports it
  }
}

std::vector<ParticleShard> read_shard_index(const std::string& path) {
  std::vector<ParticleShard> shards;
  const fs::path base = fs::path(path).parent_path();
  InputLocation at{path};
  if (ends_with(path, ".csv")) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    size_t line_no = 1;
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const size_t comma = line.find(',');
      char* end = nullptr;
      const long long count = comma == std::string::npos ? -1 : std::strtoll(line.c_str() + comma + 1, &end, 10);
      if (count < 0 || !end || *end != '\0')
        throw InputError(at, fmt::format("line {}: expected 'shard file,count', got '{}'", line_no, line));
      shards.push_back({(base / line.substr(0, comma)).string(), static_cast<size_t>(count)});
    }
  } else {
    const NpzArchive a = read_npz(path);
    at.field = kShardCountsMember;
    std::vector<int64_t> counts;
    try {
      counts = a.at(kShardCountsMember).to_int64();
    } catch (const Error& e) {
      throw InputError(at, e.what());
    }
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] < 0) throw InputError(at, fmt::format("shard {} has a negative count {}", r, counts[r]));
      shards.push_back({particle_shard_path(path, static_cast<int>(r)), static_cast<size_t>(counts[r])});
    }
  }
  if (shards.empty()) throw InputError(at, "the shard index lists no shards");
  return shards;
}

Particles read_particle_shards(const std::string& path, const std::function<Particles(const std::string&)>& read_one) {
  const std::vector<ParticleShard> shards = read_shard_index(path);
  Particles all;
  for (size_t r = 0; r < shards.size(); ++r) {
    if (!fs::exists(shards[r].file))
      throw InputError(InputLocation{path},
                       fmt::format("shard {} of {} is missing: {}", r, shards.size(), shards[r].file));
    Particles part = read_one(shards[r].file);
    if (part.size() != shards[r].count)
      throw InputError(InputLocation{shards[r].file},
                       fmt::format("holds {} particles, the index {} says {}", part.size(), path, shards[r].count));
    if (r == 0) all.beta0 = part.beta0;
    append_particles(all, part);
  }
  return all;
}

void write_particle_shards(const std::string& path, const Particles& share, Communicator& comm) {
  if (comm.size() == 1) {
    write_particles(path, share);
    return;
  }
  // Every rank writes its own shard; the counts are summed into one vector (each rank fills its own
  // slot); rank 0 writes the index once every shard is written.
  std::string failure;
  auto attempt = [&](const std::function<void()>& step) {
    if (!failure.empty()) return;
    try {
      step();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  };
  // Every rank makes the directory (whichever comes first creates it).
  attempt([&] {
    std::error_code ec;
    fs::create_directories(path + ".d", ec);
    if (ec && !fs::is_directory(path + ".d"))
      throw Error(fmt::format("{}: cannot create the shard directory: {}", path + ".d", ec.message()));
  });
  if (!comm.all(failure.empty()))
    throw Error(failure.empty() ? fmt::format("{}: another rank could not create the shard directory", path) : failure);
  attempt([&] { write_particles(particle_shard_path(path, comm.rank()), share); });
  std::vector<uint64_t> counts(static_cast<size_t>(comm.size()), 0);
  counts[static_cast<size_t>(comm.rank())] = share.size();
  comm.allreduce_sum(counts.data(), counts.size());
  if (!comm.all(failure.empty()))
    throw Error(failure.empty() ? fmt::format("{}: another rank failed to write its shard", path) : failure);
  if (comm.is_root())
    attempt([&] {
      write_index(path, std::vector<int64_t>(counts.begin(), counts.end()));
      remove_stale_shards(path, comm.size());
    });
  if (!comm.all(failure.empty()))
    throw Error(failure.empty() ? fmt::format("{}: rank 0 failed to write the shard index", path) : failure);
}

}  // namespace ft
