// A DA scan in parts (one per process): sliced, its configuration as JSON, the parts written and merged.

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"

namespace ft {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

/// `scan` with its per-particle columns passed through cut(column) and the particles through
/// cut_particles; the scan-wide fields copied.
template <class Cut, class CutParticles>
DaScan cut_da_scan(const DaScan& scan, Cut cut, CutParticles cut_particles) {
  DaScan part;
  part.config = scan.config;
  part.amplitude = cut(scan.amplitude);
  part.angle = cut(scan.angle);
  part.grid_x = cut(scan.grid_x);
  part.grid_y = cut(scan.grid_y);
  part.delta_index = cut(scan.delta_index);
  part.variants = scan.variants;
  if (!scan.variant.empty()) part.variant = cut(scan.variant);
  part.initial = cut_particles(scan.initial);
  part.particles = cut_particles(scan.particles);
  part.turns_done = scan.turns_done;
  part.sigma_x = scan.sigma_x;
  part.sigma_y = scan.sigma_y;
  std::copy(scan.closed_orbit, scan.closed_orbit + 6, part.closed_orbit);
  return part;
}

}  // namespace

DaScan slice_da_scan(const DaScan& scan, size_t begin, size_t end) {
  return cut_da_scan(
      scan,
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        return V(v.begin() + static_cast<long>(begin), v.begin() + static_cast<long>(end));
      },
      [&](const Particles& p) { return slice_particles(p, begin, end); });
}

std::string da_config_to_json(const DaConfig& c) {
  json j;
  j["turns"] = c.turns;
  j["grid"] = c.grid == DaGrid::Polar ? "polar" : "cartesian";
  j["angles"] = c.angles;
  j["angle_range"] = {c.angle_min, c.angle_max};
  j["amplitudes"] = c.amplitudes;
  j["amplitude_range"] = {c.amplitude_min, c.amplitude_max};
  j["nx"] = c.nx;
  j["ny"] = c.ny;
  j["x_range"] = {c.x_min, c.x_max};
  j["y_range"] = {c.y_min, c.y_max};
  j["units"] = c.units == DaUnits::Sigma ? "sigma" : "m";
  j["emittances"] = {c.emittance_nx, c.emittance_ny};
  j["offsets"] = {c.px0, c.py0, c.zeta0};
  j["deltas"] = c.deltas;
  j["around_closed_orbit"] = c.around_closed_orbit;
  j["limits"] = std::vector<double>(c.turn_limits, c.turn_limits + 6);
  j["refine_resolution"] = c.refine_resolution;
  return j.dump();
}

DaConfig da_config_from_json(const std::string& text, const std::string& file) {
  DaConfig c;
  try {
    const json j = json::parse(text);
    c.turns = j.at("turns").get<int64_t>();
    c.grid = j.at("grid").get<std::string>() == "polar" ? DaGrid::Polar : DaGrid::Cartesian;
    c.angles = j.at("angles").get<int>();
    c.angle_min = j.at("angle_range").at(0).get<double>();
    c.angle_max = j.at("angle_range").at(1).get<double>();
    c.amplitudes = j.at("amplitudes").get<int>();
    c.amplitude_min = j.at("amplitude_range").at(0).get<double>();
    c.amplitude_max = j.at("amplitude_range").at(1).get<double>();
    c.nx = j.at("nx").get<int>();
    c.ny = j.at("ny").get<int>();
    c.x_min = j.at("x_range").at(0).get<double>();
    c.x_max = j.at("x_range").at(1).get<double>();
    c.y_min = j.at("y_range").at(0).get<double>();
    c.y_max = j.at("y_range").at(1).get<double>();
    c.units = j.at("units").get<std::string>() == "sigma" ? DaUnits::Sigma : DaUnits::Metres;
    c.emittance_nx = j.at("emittances").at(0).get<double>();
    c.emittance_ny = j.at("emittances").at(1).get<double>();
    c.px0 = j.at("offsets").at(0).get<double>();
    c.py0 = j.at("offsets").at(1).get<double>();
    c.zeta0 = j.at("offsets").at(2).get<double>();
    c.deltas = j.at("deltas").get<std::vector<double>>();
    c.around_closed_orbit = j.at("around_closed_orbit").get<bool>();
    const auto limits = j.at("limits").get<std::vector<double>>();
    if (limits.size() != 6) throw std::runtime_error("limits must have 6 entries");
    std::copy(limits.begin(), limits.end(), c.turn_limits);
    c.refine_resolution = j.at("refine_resolution").get<double>();
  } catch (const std::exception& e) {
    InputLocation at(file);
    at.field = "config";
    throw InputError(at, std::string("not a DA scan configuration: ") + e.what());
  }
  return c;
}

namespace {

std::string part_stem(int index, int count) { return fmt::format("part_{}_of_{}", index, count); }

json variant_frames_to_json(const std::vector<DaScan::VariantFrame>& frames) {
  json out = json::array();
  for (const auto& f : frames)
    out.push_back({{"name", f.name},
                   {"sigma", {f.sigma_x, f.sigma_y}},
                   {"closed_orbit", std::vector<double>(f.closed_orbit, f.closed_orbit + 6)}});
  return out;
}

std::vector<DaScan::VariantFrame> variant_frames_from_json(const json& j, const std::string& file) {
  std::vector<DaScan::VariantFrame> out;
  try {
    for (const json& f : j) {
      DaScan::VariantFrame v;
      v.name = f.at("name").get<std::string>();
      v.sigma_x = f.at("sigma").at(0).get<double>();
      v.sigma_y = f.at("sigma").at(1).get<double>();
      for (size_t k = 0; k < 6; ++k) v.closed_orbit[k] = f.at("closed_orbit").at(k).get<double>();
      out.push_back(v);
    }
  } catch (const json::exception& ex) {
    throw InputError(InputLocation(file), fmt::format("bad \"variants\" in a study part: {}", ex.what()));
  }
  return out;
}

}  // namespace

void write_da_part(const DaScan& scan, int index, int count, size_t total, const std::string& directory,
                   const std::string& lattice_file, const std::string& fingerprint) {
  fs::create_directories(directory);
  const std::string stem = (fs::path(directory) / part_stem(index, count)).string();
  auto members = particle_arrays(scan.particles);
  for (auto& [name, array] : particle_arrays(scan.initial)) members.emplace_back("initial_" + name, std::move(array));
  members.emplace_back("amplitude", NpyArray::from(scan.amplitude));
  members.emplace_back("angle", NpyArray::from(scan.angle));
  members.emplace_back("grid_x", NpyArray::from(scan.grid_x));
  members.emplace_back("grid_y", NpyArray::from(scan.grid_y));
  members.emplace_back("delta_index", NpyArray::from(scan.delta_index));
  if (!scan.variant.empty()) members.emplace_back("variant", NpyArray::from(scan.variant));
  write_npz(stem + ".npz", members);
  json j;
  j["fusetrack_da_part"] = 1;
  j["part"] = index;
  j["parts"] = count;
  j["total_particles"] = total;
  j["particles"] = scan.particles.size();
  j["turns_done"] = scan.turns_done;
  j["fingerprint"] = fingerprint;
  j["lattice"] = lattice_file;
  j["config"] = json::parse(da_config_to_json(scan.config));
  j["sigma"] = {scan.sigma_x, scan.sigma_y};
  j["closed_orbit"] = std::vector<double>(scan.closed_orbit, scan.closed_orbit + 6);
  j["beta0"] = scan.particles.beta0;
  if (!scan.variants.empty()) j["variants"] = variant_frames_to_json(scan.variants);
  write_file_atomically(stem + ".json", j.dump(2) + "\n");
}

DaScan merge_da_parts(const std::vector<std::string>& inputs, std::string& lattice_file) {
  // The part descriptions: files given, or the part_*_of_*.json files of the directories given.
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    if (fs::is_directory(in)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("part_", 0) == 0 && e.path().extension() == ".json") found.push_back(e.path().string());
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) throw InputError(InputLocation(in), "no part_<i>_of_<N>.json files in this directory");
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(in);
    }
  }
  if (files.empty()) throw InputError(InputLocation(), "no parts to merge");
  struct PartInfo {
    std::string file;
    json meta;
  };
  std::vector<PartInfo> parts;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) throw InputError(InputLocation(f), "cannot open this part");
    PartInfo p{f, json()};
    try {
      p.meta = json::parse(in);
    } catch (const std::exception& e) {
      throw InputError(InputLocation(f), std::string("not a DA part description: ") + e.what());
    }
    if (!p.meta.is_object() || !p.meta.contains("fusetrack_da_part"))
      throw InputError(InputLocation(f), "not a DA part description (written by fusetrack da --part i/N)");
    parts.push_back(std::move(p));
  }
  const json& first = parts.front().meta;
  const int count = first.at("parts").get<int>();
  std::vector<const PartInfo*> by_index(static_cast<size_t>(count), nullptr);
  for (const PartInfo& p : parts) {
    InputLocation at(p.file);
    if (p.meta.at("fingerprint") != first.at("fingerprint") || p.meta.at("config") != first.at("config"))
      throw InputError(at, fmt::format("this part belongs to another scan than {} (the lattice file or the scan "
                                       "options differ: fingerprint {} against {})",
                                       parts.front().file, p.meta.at("fingerprint").get<std::string>(),
                                       first.at("fingerprint").get<std::string>()));
    if (p.meta.at("parts").get<int>() != count)
      throw InputError(at, fmt::format("this part is one of {} parts, {} is one of {}", p.meta.at("parts").get<int>(),
                                       parts.front().file, count));
    const int index = p.meta.at("part").get<int>();
    if (index < 0 || index >= count)
      throw InputError(at, fmt::format("part index {} is not in 0..{}", index, count - 1));
    if (by_index[static_cast<size_t>(index)])
      throw InputError(at, fmt::format("part {} of {} is given twice (also {})", index, count,
                                       by_index[static_cast<size_t>(index)]->file));
    by_index[static_cast<size_t>(index)] = &p;
  }
  std::vector<std::string> missing;
  for (int i = 0; i < count; ++i)
    if (!by_index[static_cast<size_t>(i)]) missing.push_back(fmt::format("{} ({}.json)", i, part_stem(i, count)));
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw InputError(InputLocation(parts.front().file),
                     fmt::format("{} of {} parts missing: part {}", missing.size(), count, list));
  }
  DaScan scan;
  scan.config = da_config_from_json(first.at("config").dump(), parts.front().file);
  lattice_file = first.at("lattice").get<std::string>();
  const double beta0 = first.at("beta0").get<double>();
  scan.initial.beta0 = scan.particles.beta0 = beta0;
  scan.sigma_x = first.at("sigma").at(0).get<double>();
  scan.sigma_y = first.at("sigma").at(1).get<double>();
  for (int k = 0; k < 6; ++k) scan.closed_orbit[k] = first.at("closed_orbit").at(static_cast<size_t>(k)).get<double>();
  for (int i = 0; i < count; ++i) {
    const PartInfo& p = *by_index[static_cast<size_t>(i)];
    InputLocation at(p.file);
    const int64_t done = p.meta.at("turns_done").get<int64_t>();
    if (done < scan.config.turns)
      throw InputError(at, fmt::format("part {} stopped at turn {} of {}: finish it with --resume first", i, done,
                                       scan.config.turns));
    scan.turns_done = done;
    const std::string npz = fs::path(p.file).replace_extension(".npz").string();
    const NpzArchive a = read_npz(npz);
    auto take = [&](const std::string& prefix, Particles& into) {
      Particles part(0, beta0);
      auto get = [&](const std::string& key) -> const NpyArray& {
        auto it = a.find(prefix + key);
        if (it == a.end()) throw InputError(InputLocation(npz), fmt::format("part archive lacks '{}'", prefix + key));
        return it->second;
      };
      part.x = get("x").to_doubles();
      part.px = get("px").to_doubles();
      part.y = get("y").to_doubles();
      part.py = get("py").to_doubles();
      part.zeta = get("zeta").to_doubles();
      part.delta = get("delta").to_doubles();
      part.ptau = get("ptau").to_doubles();
      part.rpp = get("rpp").to_doubles();
      part.rvv = get("rvv").to_doubles();
      for (int64_t v : get("state").to_int64()) part.state.push_back(static_cast<int32_t>(v));
      for (int64_t v : get("lost_turn").to_int64()) part.lost_turn.push_back(static_cast<int32_t>(v));
      part.lost_element = get("lost_element").to_int64();
      part.id = get("id").to_int64();
      const size_t n = part.x.size();
      if (n != p.meta.at("particles").get<size_t>() || part.state.size() != n || part.id.size() != n)
        throw InputError(InputLocation(npz), "part archive arrays do not match the part description");
      append_particles(into, part);
    };
    take("", scan.particles);
    take("initial_", scan.initial);
    auto add = [&](const char* key, std::vector<double>& to) {
      auto it = a.find(key);
      if (it == a.end()) throw InputError(InputLocation(npz), fmt::format("part archive lacks '{}'", key));
      const auto v = it->second.to_doubles();
      to.insert(to.end(), v.begin(), v.end());
    };
    add("amplitude", scan.amplitude);
    add("angle", scan.angle);
    add("grid_x", scan.grid_x);
    add("grid_y", scan.grid_y);
    auto di = a.find("delta_index");
    if (di == a.end()) throw InputError(InputLocation(npz), "part archive lacks 'delta_index'");
    for (int64_t v : di->second.to_int64()) scan.delta_index.push_back(static_cast<int32_t>(v));
    if (first.contains("variants")) {
      auto vi = a.find("variant");
      if (vi == a.end()) throw InputError(InputLocation(npz), "part archive of a study lacks 'variant'");
      for (int64_t v : vi->second.to_int64()) scan.variant.push_back(static_cast<int32_t>(v));
    }
  }
  if (first.contains("variants")) scan.variants = variant_frames_from_json(first.at("variants"), parts.front().file);
  if (scan.particles.size() != first.at("total_particles").get<size_t>())
    throw InputError(InputLocation(parts.front().file), "the parts do not add up to the scan's particle count");
  return scan;
}

}  // namespace ft
