#include "fusetrack/particle_files.h"

#include <fmt/format.h>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>
#include <type_traits>
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"
#include "particle_shards.hpp"
#include "core/text.hpp"

namespace ft {

namespace {

const char* const kCoordinateNames[6] = {"x", "px", "y", "py", "zeta", "delta"};
/// The arrays that write_particles writes besides the coordinates: accepted in a particle file and
/// ignored (the particles start alive, ptau/rpp/rvv follow from delta, ids count from 0).
const char* const kAcceptedExtras[8] = {"id",    "ptau",      "rpp",          "rvv",
                                        "state", "lost_turn", "lost_element", "variant"};
const char* const kExpectedArrays =
    "expected the coordinates x, px, y, py, zeta, delta (all six), and optionally id, ptau, rpp, rvv, state, "
    "lost_turn, lost_element, variant (as fusetrack writes them; ignored on input)";

int coordinate_index(const std::string& name) {
  for (int k = 0; k < 6; ++k)
    if (name == kCoordinateNames[k]) return k;
  return -1;
}

bool is_accepted_extra(const std::string& name) {
  for (const char* e : kAcceptedExtras)
    if (name == e) return true;
  return false;
}

/// Every coordinate must be given: a missing px or delta would silently start the particles at 0.
void check_no_missing(const std::string& path, const char* what, const bool seen[6]) {
  for (int k = 0; k < 6; ++k)
    if (!seen[k]) {
      InputLocation at{path};
      at.field = kCoordinateNames[k];
      throw InputError(at, fmt::format("the {} is missing; {}", what, kExpectedArrays));
    }
}

Particles read_csv(const std::string& path, double beta0) {
  std::ifstream in(path);
  if (!in) throw InputError(InputLocation{path}, "cannot open file");
  std::string line;
  if (!std::getline(in, line)) throw InputError(InputLocation{path}, "empty file; expected a header line");
  std::vector<std::string> columns;
  {
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) {
      c.erase(0, c.find_first_not_of(" \t\r"));
      c.erase(c.find_last_not_of(" \t\r") + 1);
      columns.push_back(c);
    }
  }
  std::vector<int> which(columns.size(), -1);
  bool seen[6] = {false, false, false, false, false, false};
  for (size_t c = 0; c < columns.size(); ++c) {
    InputLocation at{path};
    at.field = columns[c];
    const int k = coordinate_index(columns[c]);
    if (k >= 0) {
      if (seen[k]) throw InputError(at, "the column appears twice");
      seen[k] = true;
      which[c] = k;
    } else if (!is_accepted_extra(columns[c])) {
      throw InputError(at, fmt::format("unknown column; {}", kExpectedArrays));
    }
  }
  check_no_missing(path, "column", seen);
  std::vector<std::array<double, 6>> rows;
  size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::array<double, 6> r{0, 0, 0, 0, 0, 0};
    std::stringstream ss(line);
    std::string cell;
    size_t c = 0;
    for (; std::getline(ss, cell, ','); ++c) {
      if (c >= columns.size()) throw InputError(InputLocation{path}, fmt::format("line {} has too many columns", line_no));
      if (which[c] < 0) continue;
      InputLocation at{path};
      at.field = columns[c];
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      if (end == cell.c_str()) throw InputError(at, fmt::format("line {}: '{}' is not a number", line_no, cell));
      if (!std::isfinite(v)) throw InputError(at, fmt::format("line {}: value is not finite", line_no));
      r[which[c]] = v;
    }
    if (c != columns.size())
      throw InputError(InputLocation{path}, fmt::format("line {} has {} columns, the header has {}", line_no, c, columns.size()));
    rows.push_back(r);
  }
  Particles p(rows.size(), beta0);
  for (size_t i = 0; i < rows.size(); ++i) p.set(i, rows[i][0], rows[i][1], rows[i][2], rows[i][3], rows[i][4], rows[i][5]);
  return p;
}

Particles read_npz_particles(const std::string& path, double beta0) {
  NpzArchive a;
  try {
    a = read_npz(path);
  } catch (const Error& e) {
    throw InputError(InputLocation{path}, e.what());
  }
  size_t n = 0;
  bool any = false;
  bool seen[6] = {false, false, false, false, false, false};
  std::vector<double> coords[6];
  for (int k = 0; k < 6; ++k) {
    auto it = a.find(kCoordinateNames[k]);
    if (it == a.end()) continue;
    InputLocation at{path};
    at.field = kCoordinateNames[k];
    try {
      coords[k] = it->second.to_doubles();
    } catch (const Error& e) {
      throw InputError(at, e.what());
    }
    if (any && coords[k].size() != n)
      throw InputError(at, fmt::format("has {} entries, other arrays have {}", coords[k].size(), n));
    n = coords[k].size();
    any = true;
    seen[k] = true;
    for (double v : coords[k])
      if (!std::isfinite(v)) throw InputError(at, "contains a value that is not finite");
  }
  std::string members;
  for (const auto& [name, array] : a) members += (members.empty() ? "" : ", ") + name;
  if (!any)
    throw InputError(InputLocation{path},
                     fmt::format("no coordinate arrays found (the archive holds: {}); {}", members, kExpectedArrays));
  for (const auto& [name, array] : a)
    if (coordinate_index(name) < 0 && !is_accepted_extra(name)) {
      InputLocation at{path};
      at.field = name;
      throw InputError(at, fmt::format("unknown array; {}", kExpectedArrays));
    }
  check_no_missing(path, "array", seen);
  Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i) {
    double c[6];
    for (int k = 0; k < 6; ++k) c[k] = coords[k][i];
    p.set(i, c[0], c[1], c[2], c[3], c[4], c[5]);
  }
  return p;
}

}  // namespace

Particles read_particles(const std::string& path, double beta0) {
  if (is_particle_shard_index(path)) {
    Particles p =
        read_particle_shards(path, [beta0](const std::string& shard) { return read_particles(shard, beta0); });
    for (size_t i = 0; i < p.size(); ++i) p.id[i] = static_cast<int64_t>(i);  // numbered as one set
    return p;
  }
  if (ends_with(path, ".csv")) return read_csv(path, beta0);
  if (ends_with(path, ".npz")) return read_npz_particles(path, beta0);
  throw InputError(InputLocation{path}, "unsupported particle file; use .npz or .csv");
}

Particles read_particle_set(const std::string& path, double beta0) {
  if (is_particle_shard_index(path))
    return read_particle_shards(path, [beta0](const std::string& shard) { return read_particle_set(shard, beta0); });
  if (!ends_with(path, ".npz")) throw InputError(InputLocation{path}, "read_particle_set reads .npz files");
  NpzArchive a;
  try {
    a = read_npz(path);
  } catch (const Error& e) {
    throw InputError(InputLocation{path}, e.what());
  }
  Particles p;
  p.beta0 = beta0;
  auto take = [&](const char* name, auto& to) {
    InputLocation at{path};
    at.field = name;
    auto it = a.find(name);
    if (it == a.end()) throw InputError(at, "the array is missing (read_particle_set reads files fusetrack wrote)");
    try {
      using T = typename std::decay_t<decltype(to)>::value_type;
      if constexpr (std::is_same_v<T, double>) {
        to = it->second.to_doubles();
      } else {
        const std::vector<int64_t> v = it->second.to_int64();
        to.resize(v.size());
        for (size_t i = 0; i < v.size(); ++i) to[i] = static_cast<T>(v[i]);
      }
    } catch (const Error& e) {
      throw InputError(at, e.what());
    }
    if (to.size() != p.x.size()) throw InputError(at, fmt::format("has {} entries, x has {}", to.size(), p.x.size()));
  };
  take("x", p.x);
  take("px", p.px);
  take("y", p.y);
  take("py", p.py);
  take("zeta", p.zeta);
  take("delta", p.delta);
  take("ptau", p.ptau);
  take("rpp", p.rpp);
  take("rvv", p.rvv);
  take("state", p.state);
  take("lost_turn", p.lost_turn);
  take("lost_element", p.lost_element);
  take("id", p.id);
  if (a.count("variant")) take("variant", p.variant);  // runs of lattice variants
  return p;
}

void write_particles(const std::string& path, const Particles& p) {
  if (ends_with(path, ".csv")) {
    write_file_atomically(path, [&](std::ostream& out) {
      const bool variants = !p.variant.empty();  // lattice variants: one more column
      out << "id,x,px,y,py,zeta,delta,state,lost_turn,lost_element" << (variants ? ",variant\n" : "\n");
      for (size_t i = 0; i < p.size(); ++i)
        out << fmt::format("{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{},{},{}", p.id[i], p.x[i], p.px[i],
                           p.y[i], p.py[i], p.zeta[i], p.delta[i], p.state[i], p.lost_turn[i], p.lost_element[i])
            << (variants ? fmt::format(",{}\n", p.variant[i]) : std::string("\n"));
    });
    return;
  }
  if (!ends_with(path, ".npz")) throw Error(fmt::format("{}: unsupported output format; use .npz or .csv", path));
  write_npz(path, particle_arrays(p));
}

std::vector<std::pair<std::string, NpyArray>> particle_arrays(const Particles& p) {
  std::vector<std::pair<std::string, NpyArray>> arrays = {
      {"id", NpyArray::from(p.id)},       {"x", NpyArray::from(p.x)},
      {"px", NpyArray::from(p.px)},       {"y", NpyArray::from(p.y)},
      {"py", NpyArray::from(p.py)},       {"zeta", NpyArray::from(p.zeta)},
      {"delta", NpyArray::from(p.delta)}, {"ptau", NpyArray::from(p.ptau)},
      {"rpp", NpyArray::from(p.rpp)},     {"rvv", NpyArray::from(p.rvv)},
      {"state", NpyArray::from(p.state)}, {"lost_turn", NpyArray::from(p.lost_turn)},
      {"lost_element", NpyArray::from(p.lost_element)}};
  if (!p.variant.empty()) arrays.emplace_back("variant", NpyArray::from(p.variant));  // lattice variants
  return arrays;
}

}  // namespace ft
