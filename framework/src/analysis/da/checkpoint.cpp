// DA checkpoints: the fingerprint of a scan, its state written and read back to resume.

#include "analysis/da/checkpoint.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/da/shared_scan.hpp"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"

namespace ft {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace da_detail {

/// The arrays of a checkpoint (a copy of the scan's state: the file can be written while tracking goes on).
std::vector<std::pair<std::string, NpyArray>> checkpoint_members(const DaScan& scan, const std::string& fingerprint) {
  auto members = particle_arrays(scan.particles);
  members.emplace_back("turns_done", NpyArray::from(std::vector<int64_t>{scan.turns_done}));
  members.emplace_back("fingerprint", NpyArray::from(std::vector<int64_t>{static_cast<int64_t>(
                                          std::stoull(fingerprint.empty() ? "0" : fingerprint, nullptr, 16))}));
  return members;
}

}  // namespace da_detail

namespace {
std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}
}  // namespace

void read_da_checkpoint_on_root(DaScan& scan, const std::string& file, const std::string& fingerprint,
                                Communicator& ranks) {
  std::exception_ptr error;
  if (ranks.is_root()) try {
      read_da_checkpoint(scan, file, fingerprint);
    } catch (...) {
      error = std::current_exception();
    }
  if (!ranks.all(!error)) {
    if (error) std::rethrow_exception(error);
    throw InputError(InputLocation(file), "rank 0 could not read the checkpoint to resume from (its message says why)");
  }
  uint64_t turns = ranks.is_root() ? static_cast<uint64_t>(scan.turns_done) : 0;
  ranks.allreduce_sum(&turns, 1);
  scan.turns_done = static_cast<int64_t>(turns);
  std::vector<size_t> all(scan.particles.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  da_detail::send_from_sources(
      scan.particles, all, [](size_t) { return 0; }, ranks);
}

std::string da_fingerprint(const std::string& lattice_file, const DaConfig& c) {
  json j;
  j["turns"] = c.turns;
  j["grid"] = c.grid == DaGrid::Polar ? "polar" : "cartesian";
  j["polar"] = {c.angles, c.angle_min, c.angle_max, c.amplitudes, c.amplitude_min, c.amplitude_max};
  j["cartesian"] = {c.nx, c.x_min, c.x_max, c.ny, c.y_min, c.y_max};
  j["units"] = c.units == DaUnits::Sigma ? "sigma" : "m";
  j["emittances"] = {c.emittance_nx, c.emittance_ny};
  j["offsets"] = {c.px0, c.py0, c.zeta0};
  j["deltas"] = c.deltas;
  j["closed_orbit"] = c.around_closed_orbit;
  j["limits"] = std::vector<double>(c.turn_limits, c.turn_limits + 6);
  std::string text = j.dump();
  if (!lattice_file.empty()) {
    std::ifstream in(lattice_file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  return fnv1a_hex(text);
}

std::string da_share_fingerprint(const std::string& fingerprint, int index, int count) {
  return fnv1a_hex(fmt::format("{}/{}/{}", fingerprint, index, count));
}

void write_da_checkpoint(const DaScan& scan, const std::string& file, const std::string& fingerprint) {
  write_npz(file, da_detail::checkpoint_members(scan, fingerprint));
}

void read_da_checkpoint(DaScan& scan, const std::string& file, const std::string& fingerprint) {
  InputLocation where(file);
  if (!fs::exists(file)) throw InputError(where, "no checkpoint to resume from");
  NpzArchive a;
  try {
    a = read_npz(file);
  } catch (const Error& e) {
    throw InputError(where, std::string("unreadable checkpoint: ") + e.what());
  }
  for (const char* key : {"x", "px", "y", "py", "zeta", "delta", "ptau", "rpp", "rvv", "state", "lost_turn",
                          "lost_element", "turns_done", "fingerprint"})
    if (!a.count(key)) throw InputError(where, fmt::format("checkpoint lacks '{}'", key));
  const int64_t stored = a.at("fingerprint").to_int64().at(0);
  if (!fingerprint.empty() && stored != static_cast<int64_t>(std::stoull(fingerprint, nullptr, 16)))
    throw InputError(where, "the checkpoint belongs to another lattice or scan configuration; refusing to resume");
  Particles& p = scan.particles;
  const size_t n = p.size();
  auto doubles = [&](const char* key, std::vector<double>& out) {
    std::vector<double> v = a.at(key).to_doubles();
    if (v.size() != n)
      throw InputError(where, fmt::format("checkpoint array '{}' has {} entries, expected {}", key, v.size(), n));
    out = std::move(v);
  };
  doubles("x", p.x);
  doubles("px", p.px);
  doubles("y", p.y);
  doubles("py", p.py);
  doubles("zeta", p.zeta);
  doubles("delta", p.delta);
  doubles("ptau", p.ptau);
  doubles("rpp", p.rpp);
  doubles("rvv", p.rvv);
  const auto state = a.at("state").to_int64(), lost_turn = a.at("lost_turn").to_int64(),
             lost_element = a.at("lost_element").to_int64();
  if (state.size() != n || lost_turn.size() != n || lost_element.size() != n)
    throw InputError(where, "checkpoint loss arrays have the wrong size");
  for (size_t i = 0; i < n; ++i) {
    p.state[i] = static_cast<int32_t>(state[i]);
    p.lost_turn[i] = static_cast<int32_t>(lost_turn[i]);
    p.lost_element[i] = lost_element[i];
  }
  scan.turns_done = a.at("turns_done").to_int64().at(0);
}

}  // namespace ft
