#include "fusetrack/particle_files.h"

#include <fmt/format.h>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"

namespace ft {

namespace {

const char* const kCoordinateNames[6] = {"x", "px", "y", "py", "zeta", "delta"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  for (size_t c = 0; c < columns.size(); ++c) {
    for (int k = 0; k < 6; ++k)
      if (columns[c] == kCoordinateNames[k]) which[c] = k;
    if (which[c] < 0 && columns[c] != "state" && columns[c] != "lost_turn" && columns[c] != "lost_element" &&
        columns[c] != "id") {
      InputLocation at{path};
      at.field = columns[c];
      throw InputError(at, "unknown column; expected x, px, y, py, zeta, delta");
    }
  }
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
    for (double v : coords[k])
      if (!std::isfinite(v)) throw InputError(at, "contains a value that is not finite");
  }
  if (!any) throw InputError(InputLocation{path}, "no coordinate arrays found; expected x, px, y, py, zeta, delta");
  Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i) {
    double c[6];
    for (int k = 0; k < 6; ++k) c[k] = coords[k].empty() ? 0.0 : coords[k][i];
    p.set(i, c[0], c[1], c[2], c[3], c[4], c[5]);
  }
  return p;
}

}  // namespace

Particles read_particles(const std::string& path, double beta0) {
  if (ends_with(path, ".csv")) return read_csv(path, beta0);
  if (ends_with(path, ".npz")) return read_npz_particles(path, beta0);
  throw InputError(InputLocation{path}, "unsupported particle file; use .npz or .csv");
}

void write_particles(const std::string& path, const Particles& p) {
  if (ends_with(path, ".csv")) {
    write_file_atomically(path, [&](std::ostream& out) {
      out << "id,x,px,y,py,zeta,delta,state,lost_turn,lost_element\n";
      for (size_t i = 0; i < p.size(); ++i)
        out << fmt::format("{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{},{},{}\n", p.id[i], p.x[i], p.px[i],
                           p.y[i], p.py[i], p.zeta[i], p.delta[i], p.state[i], p.lost_turn[i], p.lost_element[i]);
    });
    return;
  }
  if (!ends_with(path, ".npz")) throw Error(fmt::format("{}: unsupported output format; use .npz or .csv", path));
  write_npz(path, particle_arrays(p));
}

std::vector<std::pair<std::string, NpyArray>> particle_arrays(const Particles& p) {
  return {{"id", NpyArray::from(p.id)},       {"x", NpyArray::from(p.x)},
          {"px", NpyArray::from(p.px)},       {"y", NpyArray::from(p.y)},
          {"py", NpyArray::from(p.py)},       {"zeta", NpyArray::from(p.zeta)},
          {"delta", NpyArray::from(p.delta)}, {"ptau", NpyArray::from(p.ptau)},
          {"rpp", NpyArray::from(p.rpp)},     {"rvv", NpyArray::from(p.rvv)},
          {"state", NpyArray::from(p.state)}, {"lost_turn", NpyArray::from(p.lost_turn)},
          {"lost_element", NpyArray::from(p.lost_element)}};
}

}  // namespace ft
