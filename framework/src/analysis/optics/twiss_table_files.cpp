// The Twiss table's columns and its CSV and NPZ files.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/optics.h"

namespace ft {

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

/// A NumPy fixed-width unicode array ('<U<width>', UCS-4 little endian) of UTF-8 strings (bytes
/// above 0x7f are kept as code points; names are ASCII in practice).
NpyArray unicode_array(const std::vector<std::string>& v) {
  size_t width = 1;
  for (const auto& s : v) width = std::max(width, s.size());
  NpyArray a;
  a.dtype = fmt::format("<U{}", width);
  a.shape = {v.size()};
  a.data.assign(v.size() * width * 4, 0);
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t c = 0; c < v[i].size(); ++c) a.data[(i * width + c) * 4] = static_cast<unsigned char>(v[i][c]);
  return a;
}

}  // namespace

std::vector<std::pair<std::string, const std::vector<double>*>> TwissTable::numeric_columns() const {
  return {{"s", &s},
          {"x", &x},
          {"px", &px},
          {"y", &y},
          {"py", &py},
          {"zeta", &zeta},
          {"delta", &delta},
          {"beta_x", &beta_x},
          {"alpha_x", &alpha_x},
          {"mu_x", &mu_x},
          {"beta_y", &beta_y},
          {"alpha_y", &alpha_y},
          {"mu_y", &mu_y},
          {"dx", &dx},
          {"dpx", &dpx},
          {"dy", &dy},
          {"dpy", &dpy},
          {"beta_1x", &beta_1x},
          {"alpha_1x", &alpha_1x},
          {"beta_1y", &beta_1y},
          {"alpha_1y", &alpha_1y},
          {"beta_2x", &beta_2x},
          {"alpha_2x", &alpha_2x},
          {"beta_2y", &beta_2y},
          {"alpha_2y", &alpha_2y}};
}

void write_twiss_table(const std::string& path, const TwissTable& table, const std::string& field) {
  const auto ends_with = [&](const char* ext) {
    const std::string e(ext);
    return path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  const auto columns = table.numeric_columns();
  if (ends_with(".npz")) {
    std::vector<std::pair<std::string, NpyArray>> members;
    members.emplace_back("name", unicode_array(table.name));
    members.emplace_back("type", unicode_array(table.type));
    for (const auto& c : columns) members.emplace_back(c.first, NpyArray::from(*c.second));
    write_npz(path, members);
    return;
  }
  if (!ends_with(".csv")) {
    InputLocation at;
    at.field = field;
    throw InputError(at, fmt::format("'{}': the file name must end in .csv or .npz", path));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw Error(fmt::format("{}: cannot write file", path));
    out << "name,type";
    for (const auto& c : columns) out << ',' << c.first;
    out << '\n';
    std::string line;
    for (size_t r = 0; r < table.size(); ++r) {
      line = csv_field(table.name[r]);
      line += ',';
      line += csv_field(table.type[r]);
      for (const auto& c : columns) {
        line += ',';
        line += fmt::format("{:.17g}", (*c.second)[r]);
      }
      line += '\n';
      out << line;
    }
    if (!out) throw Error(fmt::format("{}: write failed", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(fmt::format("{}: cannot write file", path));
}

}  // namespace ft
