// Import of trackcpp / AT flat lattice files into fusetrack's lattice format;
// the mapping, the coordinate conventions and the known differences are in
// fusetrack/trackcpp_import.h.
#include "fusetrack/trackcpp_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "fusetrack/error.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

constexpr double kNoLimit = std::numeric_limits<double>::max();  // trackcpp's default aperture (DBL_MAX)
constexpr double kPi = 3.141592653589793;
constexpr int kMaxOrder = 5;  // FT_MAGNET_MAX_ORDER (elements/magnet_integrators.h)
// Electron rest energy [eV] as trackcpp computes it (m_e c^2 / e with CODATA
// 2018 m_e and exact c, e).
constexpr double kElectronRestEnergy = 9.1093837015e-31 * 299792458.0 * 299792458.0 / 1.602176634e-19;

// The pass method names trackcpp knows (auxiliary.h, PassMethodsClass and older
// versions).
const std::set<std::string> kTrackcppPassMethods = {"identity_pass",
                                                    "drift_pass",
                                                    "str_mpole_symplectic4_pass",
                                                    "bnd_mpole_symplectic4_pass",
                                                    "corrector_pass",
                                                    "cavity_pass",
                                                    "cavity_0_pass",
                                                    "thinquad_pass",
                                                    "thinsext_pass",
                                                    "kicktable_pass",
                                                    "matrix_pass",
                                                    "drift_g2l_pass",
                                                    "cavity_1comp_pass",
                                                    "cavity_1frac_pass",
                                                    "cavity_2_pass",
                                                    "kickpoly_pass"};
const char *const kSupported =
    "identity_pass, drift_pass, drift_g2l_pass, str_mpole_symplectic4_pass, bnd_mpole_symplectic4_pass, "
    "corrector_pass, cavity_pass, cavity_0_pass";

const char *const kMatrixRows[6] = {"rx", "px", "ry", "py", "de", "dl"};

// The element keys trackcpp's reader accepts (read_flat_file_trackcpp).
bool is_known_key(const std::string &key) {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k = {"length",    "pass_method",   "nr_steps",  "polynom_a", "polynom_b",
                               "vchamber",  "hmin",          "hmax",      "vmin",      "vmax",
                               "hkick",     "vkick",         "angle",     "gap",       "fint_in",
                               "fint_out",  "voltage",       "frequency", "phase_lag", "angle_in",
                               "angle_out", "rescale_kicks", "t_in",      "t_out",     "kicktable_fname"};
    for (const char *row : kMatrixRows)
      for (const char *m : {"|r_in", "|r_out", "|matrix66"}) k.insert(std::string(row) + m);
    return k;
  }();
  return keys.count(key) != 0;
}

std::vector<std::string> split_words(const std::string &line) {
  std::vector<std::string> words;
  std::istringstream ss(line);
  std::string w;
  while (ss >> w) words.push_back(w);
  return words;
}

bool parse_double(const std::string &s, double &out) {
  if (s.empty()) return false;
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_long(const std::string &s, long &out) {
  if (s.empty()) return false;
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  out = v;
  return true;
}

struct Field {
  long line = 0;
  std::vector<std::string> words;  // the values after the key
};

struct RawElement {
  long index = 0;  // position in the file, from 0 (trackcpp's "### 0000 ###")
  long line = 0;   // line of its fam_name
  std::string name;
  std::map<std::string, Field> fields;
};

struct Header {
  double energy = 0.0;
  long energy_line = 0;
  long harmonic_number = 0;
  bool cavity_on = false;
  bool vchamber_on = false;
  long radiation_on = 0;
  long radiation_line = 0;
  std::string lattice_version;
};

/// Counts of one kind of warning, with its first element.
struct Tally {
  long count = 0;
  long first_index = 0;
  std::string first_name;
};

/// One entry of the fusetrack sequence made from a trackcpp element: its base
/// name and definition.
struct Entry {
  std::string base;
  json def;
};

class Importer {
 public:
  Importer(const std::string &file, const TrackcppImportOptions &options) : m_file(file), m_options(options) {}

  json run(const std::string &text);

 private:
  // -- reading --
  void read(const std::string &text);
  void read_header_line(const std::vector<std::string> &words, long line);

  // -- errors --
  InputLocation at(const RawElement &e, const std::string &field) const {
    InputLocation w{m_file};
    w.element_index = e.index;
    w.element_name = e.name;
    auto pm = e.fields.find("pass_method");
    if (pm != e.fields.end() && !pm->second.words.empty()) w.element_type = pm->second.words[0];
    w.field = field;
    return w;
  }
  [[noreturn]] void fail(const RawElement &e, const std::string &key, const std::string &problem) const {
    auto f = e.fields.find(key);
    const long line = f != e.fields.end() ? f->second.line : e.line;
    throw InputError(at(e, key), fmt::format("line {}: {}", line, problem));
  }
  [[noreturn]] void fail_header(const std::string &key, long line, const std::string &problem) const {
    InputLocation w{m_file};
    w.field = key;
    throw InputError(w, line > 0 ? fmt::format("line {}: {}", line, problem) : problem);
  }

  // -- field values of the element being converted --
  const Field *field(const RawElement &e, const std::string &key) {
    m_used.insert(key);
    auto f = e.fields.find(key);
    return f == e.fields.end() ? nullptr : &f->second;
  }
  double number(const RawElement &e, const std::string &key, double fallback);
  double required_number(const RawElement &e, const std::string &key);
  long integer(const RawElement &e, const std::string &key, long fallback);
  std::array<double, 6> vector6(const RawElement &e, const std::string &key, bool &given);
  std::vector<double> polynom(const RawElement &e, const std::string &key);

  // -- conversion --
  std::vector<Entry> convert(const RawElement &e);
  struct Alignment {
    bool active = false;
    double dx = 0.0, dy = 0.0, psi = 0.0;
  };
  Alignment alignment(const RawElement &e);
  void aperture(const RawElement &e, std::vector<Entry> &out);
  void multipole_strengths(const RawElement &e, std::vector<double> &pa, std::vector<double> &pb);
  void warn(const std::string &what, const RawElement &e) {
    auto [it, inserted] = m_warnings.try_emplace(what);
    if (inserted) {
      m_warning_order.push_back(what);
      it->second.first_index = e.index;
      it->second.first_name = e.name;
    }
    ++it->second.count;
  }
  std::string assign_name(const std::string &base, long index, json def);

  const std::string &m_file;
  const TrackcppImportOptions &m_options;
  Header m_header;
  std::vector<RawElement> m_elements;
  std::set<std::string> m_used;  // keys read while converting the current element
  std::map<std::string, Tally> m_warnings;
  std::vector<std::string> m_warning_order;
  // Definitions by base name: (JSON text, assigned name) of each distinct
  // definition.
  std::unordered_map<std::string, std::vector<std::pair<std::string, std::string>>> m_by_base;
  std::set<std::string> m_taken;
  json m_definitions = json::object();
};

void Importer::read_header_line(const std::vector<std::string> &words, long line) {
  // "% key value...", or "%key value..."
  std::vector<std::string> w = words;
  if (w[0] == "%") {
    w.erase(w.begin());
  } else {
    w[0] = w[0].substr(1);
  }
  if (w.empty()) return;  // a lone '%'
  const std::string key = w[0];
  const std::vector<std::string> values(w.begin() + 1, w.end());
  auto boolean = [&](bool &out) {
    if (values.size() != 1 || (values[0] != "true" && values[0] != "false"))
      fail_header(key, line, fmt::format("expected 'true' or 'false', got '{}'", fmt::join(values, " ")));
    out = values[0] == "true";
  };
  if (key == "energy") {
    if (values.empty() || values.size() > 2 || (values.size() == 2 && values[1] != "eV"))
      fail_header(key, line, fmt::format("expected '% energy VALUE eV', got '{}'", fmt::join(values, " ")));
    if (!parse_double(values[0], m_header.energy))
      fail_header(key, line, fmt::format("'{}' is not a number", values[0]));
    if (!(m_header.energy > kElectronRestEnergy))
      fail_header(key, line,
                  fmt::format("the beam energy {} eV must exceed the electron rest energy {:.10g} eV (trackcpp's "
                              "energy is the total energy of an electron)",
                              m_header.energy, kElectronRestEnergy));
    m_header.energy_line = line;
  } else if (key == "harmonic_number") {
    if (values.size() != 1 || !parse_long(values[0], m_header.harmonic_number))
      fail_header(key, line, fmt::format("expected an integer, got '{}'", fmt::join(values, " ")));
  } else if (key == "cavity_on") {
    boolean(m_header.cavity_on);
  } else if (key == "vchamber_on") {
    boolean(m_header.vchamber_on);
  } else if (key == "radiation_on") {
    // trackcpp: 0/1/2 (off, damping, full), or the older true/false.
    const std::string v = values.size() == 1 ? values[0] : "";
    long r = 0;
    if (v == "true" || v == "damping") {
      r = 1;
    } else if (v == "false" || v == "off") {
      r = 0;
    } else if (v == "full") {
      r = 2;
    } else if (!parse_long(v, r) || r < 0 || r > 2) {
      fail_header(key, line,
                  fmt::format("expected 0, 1, 2, off, damping, full, true or false, got '{}'", fmt::join(values, " ")));
    }
    m_header.radiation_on = r;
    m_header.radiation_line = line;
  } else if (key == "lattice_version") {
    m_header.lattice_version = fmt::format("{}", fmt::join(values, " "));
  } else {
    if (m_options.warnings)
      m_options.warnings->push_back(
          fmt::format("{}: line {}: header line '% {}' is not one trackcpp reads; ignored", m_file, line, key));
  }
}

void Importer::read(const std::string &text) {
  std::istringstream in(text);
  std::string line_text;
  long line = 0;
  RawElement *current = nullptr;
  while (std::getline(in, line_text)) {
    ++line;
    if (!line_text.empty() && line_text.back() == '\r') line_text.pop_back();
    const std::vector<std::string> words = split_words(line_text);
    if (words.empty() || words[0][0] == '#') continue;
    if (words[0][0] == '%') {
      read_header_line(words, line);
      continue;
    }
    const std::string &key = words[0];
    if (key == "fam_name") {
      if (words.size() != 2) {
        InputLocation w{m_file};
        w.element_index = static_cast<long>(m_elements.size());
        w.field = "fam_name";
        throw InputError(w, fmt::format("line {}: expected 'fam_name NAME' (one word), got '{}'", line, line_text));
      }
      m_elements.push_back(RawElement{});
      current = &m_elements.back();
      current->index = static_cast<long>(m_elements.size()) - 1;
      current->line = line;
      current->name = words[1];
      continue;
    }
    if (!current) {
      InputLocation w{m_file};
      w.field = key;
      throw InputError(
          w, fmt::format(
                 "line {}: '{}' comes before the first 'fam_name' line (every element starts with 'fam_name NAME')",
                 line, line_text));
    }
    if (!is_known_key(key)) {
      InputLocation w = at(*current, key);
      throw InputError(
          w, fmt::format("line {}: unknown field '{}' (not one trackcpp's flat-file reader knows)", line, key));
    }
    auto [it, inserted] = current->fields.try_emplace(key);
    if (!inserted)
      throw InputError(at(*current, key),
                       fmt::format("line {}: given twice in one element (first on line {})", line, it->second.line));
    it->second.line = line;
    it->second.words.assign(words.begin() + 1, words.end());
    if (it->second.words.empty())
      throw InputError(at(*current, key), fmt::format("line {}: the field has no value", line));
  }
  if (m_elements.empty()) {
    InputLocation w{m_file};
    w.field = "fam_name";
    throw InputError(w,
                     "no elements: a trackcpp flat file has one block per element, each starting with 'fam_name NAME'");
  }
  if (m_header.energy_line == 0) {
    InputLocation w{m_file};
    w.field = "energy";
    throw InputError(w, "the header line '% energy VALUE eV' (the beam energy) is missing");
  }
}

double Importer::number(const RawElement &e, const std::string &key, double fallback) {
  const Field *f = field(e, key);
  if (!f) return fallback;
  if (f->words.size() != 1)
    fail(e, key, fmt::format("expected one number, got {} words '{}'", f->words.size(), fmt::join(f->words, " ")));
  double v = 0.0;
  if (!parse_double(f->words[0], v)) fail(e, key, fmt::format("'{}' is not a finite number", f->words[0]));
  return v;
}

double Importer::required_number(const RawElement &e, const std::string &key) {
  if (!e.fields.count(key)) {
    m_used.insert(key);
    throw InputError(
        at(e, key),
        fmt::format("line {} (the element's fam_name line): the required field '{}' is missing", e.line, key));
  }
  return number(e, key, 0.0);
}

long Importer::integer(const RawElement &e, const std::string &key, long fallback) {
  const Field *f = field(e, key);
  if (!f) return fallback;
  long v = 0;
  if (f->words.size() != 1 || !parse_long(f->words[0], v))
    fail(e, key, fmt::format("expected one integer, got '{}'", fmt::join(f->words, " ")));
  return v;
}

std::array<double, 6> Importer::vector6(const RawElement &e, const std::string &key, bool &given) {
  std::array<double, 6> v{};
  const Field *f = field(e, key);
  given = f != nullptr;
  if (!f) return v;
  if (f->words.size() != 6)
    fail(e, key, fmt::format("expected 6 numbers, got {} words '{}'", f->words.size(), fmt::join(f->words, " ")));
  for (int i = 0; i < 6; ++i)
    if (!parse_double(f->words[i], v[i]))
      fail(e, key, fmt::format("value {} '{}' is not a finite number", i, f->words[i]));
  return v;
}

std::vector<double> Importer::polynom(const RawElement &e, const std::string &key) {
  std::vector<double> p;
  const Field *f = field(e, key);
  if (!f) return p;
  if (f->words.size() % 2 != 0)
    fail(e, key,
         fmt::format("expected 'order value' pairs, got {} words '{}'", f->words.size(), fmt::join(f->words, " ")));
  std::set<long> seen;
  for (size_t i = 0; i < f->words.size(); i += 2) {
    long order = 0;
    double value = 0.0;
    if (!parse_long(f->words[i], order) || order < 0 || order > 1000)
      fail(e, key, fmt::format("'{}' is not a multipole order (an integer from 0)", f->words[i]));
    if (!parse_double(f->words[i + 1], value))
      fail(e, key, fmt::format("the value '{}' of order {} is not a finite number", f->words[i + 1], order));
    if (!seen.insert(order).second) fail(e, key, fmt::format("order {} is given twice", order));
    if (static_cast<size_t>(order) >= p.size()) p.resize(static_cast<size_t>(order) + 1, 0.0);
    p[static_cast<size_t>(order)] = value;
  }
  return p;
}

void Importer::multipole_strengths(const RawElement &e, std::vector<double> &pa, std::vector<double> &pb) {
  pa = polynom(e, "polynom_a");
  pb = polynom(e, "polynom_b");
  for (const auto &[key, p] :
       {std::pair<const char *, const std::vector<double> *>{"polynom_a", &pa}, {"polynom_b", &pb}})
    for (size_t n = kMaxOrder + 1; n < p->size(); ++n)
      if ((*p)[n] != 0.0)
        fail(e, key,
             fmt::format("order {} is {} but fusetrack's magnets go to order {} (dodecapole)", n, (*p)[n], kMaxOrder));
  pa.resize(kMaxOrder + 1, 0.0);
  pb.resize(kMaxOrder + 1, 0.0);
}

Importer::Alignment Importer::alignment(const RawElement &e) {
  Alignment a;
  bool t_in_given = false, t_out_given = false;
  const std::array<double, 6> t_in = vector6(e, "t_in", t_in_given);
  const std::array<double, 6> t_out = vector6(e, "t_out", t_out_given);
  double r_in[6][6], r_out[6][6];
  bool r_given = false;
  for (int i = 0; i < 6; ++i) {
    bool given_in = false, given_out = false;
    const std::array<double, 6> row_in = vector6(e, std::string(kMatrixRows[i]) + "|r_in", given_in);
    const std::array<double, 6> row_out = vector6(e, std::string(kMatrixRows[i]) + "|r_out", given_out);
    r_given = r_given || given_in || given_out;
    for (int j = 0; j < 6; ++j) {
      r_in[i][j] = given_in ? row_in[j] : (i == j ? 1.0 : 0.0);  // trackcpp's default: the identity
      r_out[i][j] = given_out ? row_out[j] : (i == j ? 1.0 : 0.0);
    }
  }
  if (!t_in_given && !t_out_given && !r_given) return a;

  for (int i : {1, 3, 4, 5}) {
    if (t_in[i] != 0.0)
      fail(e, "t_in",
           fmt::format("component {} ({}) is {}: only the transverse displacements (components 0 and 2) of an element "
                       "can be represented",
                       i, kMatrixRows[i], t_in[i]));
    if (t_out[i] != 0.0)
      fail(e, "t_out",
           fmt::format("component {} ({}) is {}: only the transverse displacements (components 0 and 2) of an element "
                       "can be represented",
                       i, kMatrixRows[i], t_out[i]));
  }
  for (int i : {0, 2})
    if (std::fabs(t_out[i] + t_in[i]) > 1e-12 * std::fabs(t_in[i]))
      fail(e, "t_out",
           fmt::format("t_out = ({}, {}) in x, y is not -t_in = ({}, {}): the exit must undo the entry displacement (a "
                       "displaced element)",
                       t_out[0], t_out[2], -t_in[0], -t_in[2]));
  // r_in: a rotation by psi about s, x' = C x + S y, y' = -S x + C y, the same
  // for (px, py).
  const double C = r_in[0][0], S = r_in[0][2];
  double expected[6][6] = {};
  expected[0][0] = expected[1][1] = expected[2][2] = expected[3][3] = C;
  expected[0][2] = expected[1][3] = S;
  expected[2][0] = expected[3][1] = -S;
  expected[4][4] = expected[5][5] = 1.0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      if (std::fabs(r_in[i][j] - expected[i][j]) > 1e-12)
        fail(
            e, std::string(kMatrixRows[i]) + "|r_in",
            fmt::format("r_in[{}][{}] = {}{} where a rotation about s by atan2({}, {}) has {}: only a tilt of the "
                        "element (x, px and y, py rotated together) can be represented",
                        i, j, r_in[i][j],
                        e.fields.count(std::string(kMatrixRows[i]) + "|r_in") ? "" : " (row not given: the identity's)",
                        S, C, expected[i][j]));
  if (std::fabs(C * C + S * S - 1.0) > 1e-12)
    fail(e, "rx|r_in", fmt::format("C = {}, S = {} with C^2 + S^2 != 1: not a rotation", C, S));
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      if (std::fabs(r_out[i][j] - expected[j][i]) > 1e-12)
        fail(e, std::string(kMatrixRows[i]) + "|r_out",
             fmt::format("r_out[{}][{}] = {} is not r_in[{}][{}] = {}: r_out must be the inverse (transpose) of r_in",
                         i, j, r_out[i][j], j, i, expected[j][i]));
  a.dx = -t_in[0];
  a.dy = -t_in[2];
  a.psi = std::atan2(S, C);
  a.active = a.dx != 0.0 || a.dy != 0.0 || a.psi != 0.0;
  return a;
}

void Importer::aperture(const RawElement &e, std::vector<Entry> &out) {
  const char *keys[] = {"hmin", "hmax", "vmin", "vmax", "vchamber"};
  if (!m_header.vchamber_on) {
    for (const char *k : keys)
      if (e.fields.count(k)) {
        m_used.insert(k);
        warn("apertures (hmin, hmax, vmin, vmax, vchamber) ignored, as trackcpp ignores them with 'vchamber_on false'",
             e);
        return;
      }
    return;
  }
  const bool has_hmin = e.fields.count("hmin") != 0, has_vmin = e.fields.count("vmin") != 0;
  const double hmax = number(e, "hmax", kNoLimit);
  const double vmax = number(e, "vmax", kNoLimit);
  // trackcpp: a missing hmin (vmin) is -hmax (-vmax).
  const double hmin = has_hmin ? number(e, "hmin", 0.0) : -hmax;
  const double vmin = has_vmin ? number(e, "vmin", 0.0) : -vmax;
  const long shape = integer(e, "vchamber", 0);
  if (!(hmin < hmax)) fail(e, "hmax", fmt::format("hmin = {} must be below hmax = {}", hmin, hmax));
  if (!(vmin < vmax)) fail(e, "vmax", fmt::format("vmin = {} must be below vmax = {}", vmin, vmax));
  const bool unlimited = hmax == kNoLimit && vmax == kNoLimit && hmin == -kNoLimit && vmin == -kNoLimit;
  if (shape == 0) {  // rectangle
    if (unlimited) return;
    out.push_back({e.name + "/aperture",
                   json{{"type", "LimitRect"}, {"min_x", hmin}, {"max_x", hmax}, {"min_y", vmin}, {"max_y", vmax}}});
    return;
  }
  if (shape != 1 && shape != 2)
    fail(e, "vchamber",
         fmt::format("vchamber = {}: only 0 (rectangle), 1 (rhombus) and 2 (ellipse) are supported{}", shape,
                     shape < 0 ? " (trackcpp loses every particle there)"
                               : "; other p-norm shapes have no fusetrack aperture"));
  for (const auto &[key, v] :
       {std::pair<const char *, double>{"hmin", hmin}, {"hmax", hmax}, {"vmin", vmin}, {"vmax", vmax}})
    if (std::fabs(v) == kNoLimit)
      fail(e, key, fmt::format("a vchamber {} shape needs finite hmin, hmax, vmin and vmax", shape));
  const double lx = (hmax - hmin) / 2, ly = (vmax - vmin) / 2;
  const double xc = (hmax + hmin) / 2, yc = (vmax + vmin) / 2;
  json def;
  if (shape == 2) {
    def = {{"type", "LimitEllipse"}, {"a", lx}, {"b", ly}};
    if (xc != 0.0) def["shift_x"] = xc;
    if (yc != 0.0) def["shift_y"] = yc;
  } else {  // |x - xc| / lx + |y - yc| / ly <= 1: the four-vertex polygon
    def = {{"type", "LimitPolygon"},
           {"n_vertices", 4},
           {"x_vertices", {xc + lx, xc, xc - lx, xc}},
           {"y_vertices", {yc, yc + ly, yc, yc - ly}}};
  }
  out.push_back({e.name + "/aperture", def});
}

std::vector<Entry> Importer::convert(const RawElement &e) {
  m_used = {"pass_method"};
  std::vector<Entry> out;
  const Field *pm_field = field(e, "pass_method");
  if (!pm_field)
    throw InputError(
        at(e, "pass_method"),
        fmt::format("line {} (the element's fam_name line): the required field 'pass_method' is missing", e.line));
  if (pm_field->words.size() != 1)
    fail(e, "pass_method", fmt::format("expected one pass method name, got '{}'", fmt::join(pm_field->words, " ")));
  const std::string pm = pm_field->words[0];
  static const std::set<std::string> supported = {
      "identity_pass",  "drift_pass",  "drift_g2l_pass", "str_mpole_symplectic4_pass", "bnd_mpole_symplectic4_pass",
      "corrector_pass", "cavity_pass", "cavity_0_pass"};
  if (!supported.count(pm)) return {};  // the caller lists them all
  const double length = required_number(e, "length");
  if (length < 0.0) fail(e, "length", fmt::format("the length {} m is negative", length));

  // Explicit XYShift/SRotation around the element's entries (bends, thick
  // cavities), or the generic transformation fields on its one entry.
  auto wrap = [&](std::vector<Entry> body, const Alignment &a, bool explicit_frames) {
    if (!a.active) return body;
    if (!explicit_frames) {
      json &def = body.at(0).def;
      if (a.dx != 0.0) def["shift_x"] = a.dx;
      if (a.dy != 0.0) def["shift_y"] = a.dy;
      if (a.psi != 0.0) def["rot_s_rad"] = a.psi;
      return body;
    }
    std::vector<Entry> wrapped;
    const double degrees = a.psi * 180.0 / kPi;
    if (a.dx != 0.0 || a.dy != 0.0)
      wrapped.push_back({e.name + "/shift_in", json{{"type", "XYShift"}, {"dx", a.dx}, {"dy", a.dy}}});
    if (a.psi != 0.0) wrapped.push_back({e.name + "/tilt_in", json{{"type", "SRotation"}, {"angle", degrees}}});
    for (Entry &b : body) wrapped.push_back(std::move(b));
    if (a.psi != 0.0) wrapped.push_back({e.name + "/tilt_out", json{{"type", "SRotation"}, {"angle", -degrees}}});
    if (a.dx != 0.0 || a.dy != 0.0)
      wrapped.push_back({e.name + "/shift_out", json{{"type", "XYShift"}, {"dx", -a.dx}, {"dy", -a.dy}}});
    return wrapped;
  };
  auto slices = [&]() {
    const long n = integer(e, "nr_steps", 1);  // trackcpp's default is 1
    if (n < 1 || n > 1000000) fail(e, "nr_steps", fmt::format("nr_steps = {} must be in [1, 1000000]", n));
    return n;
  };

  if (pm == "identity_pass") {
    if (length != 0.0)
      fail(e, "length",
           fmt::format("identity_pass with length {} m: trackcpp does not move particles over it, and fusetrack has no "
                       "element with a length that does nothing",
                       length));
    out.push_back({e.name, json{{"type", "Marker"}}});
  } else if (pm == "drift_pass") {
    out.push_back({e.name, json{{"type", "Drift"}, {"length", length}}});
  } else if (pm == "drift_g2l_pass") {
    const Alignment a = alignment(e);
    out = wrap({{e.name, json{{"type", "Drift"}, {"length", length}}}}, a, false);
  } else if (pm == "str_mpole_symplectic4_pass") {
    const long n = slices();
    std::vector<double> pa, pb;
    multipole_strengths(e, pa, pb);
    json kn = json::array(), ks = json::array();
    double factorial = 1.0;
    for (int i = 0; i <= kMaxOrder; ++i) {
      if (i > 1) factorial *= i;
      kn.push_back(pb[static_cast<size_t>(i)] * factorial);
      ks.push_back(pa[static_cast<size_t>(i)] * factorial);
    }
    if (length == 0.0)
      warn(
          "str_mpole_symplectic4_pass of zero length: its kicks are scaled by the length, so it does nothing (in "
          "trackcpp as in fusetrack)",
          e);
    const Alignment a = alignment(e);
    out = wrap({{e.name, json{{"type", "ThickMultipole"},
                              {"length", length},
                              {"kn", kn},
                              {"ks", ks},
                              {"integrator", 0},
                              {"num_slices", n}}}},
               a, false);
  } else if (pm == "bnd_mpole_symplectic4_pass") {
    const long n = slices();
    if (length == 0.0)
      fail(e, "length", "a bnd_mpole_symplectic4_pass needs a positive length (its curvature is angle / length)");
    const double angle = number(e, "angle", 0.0);
    std::vector<double> pa, pb;
    multipole_strengths(e, pa, pb);
    const double gap = number(e, "gap", 0.0);
    const double angle_in = number(e, "angle_in", 0.0), angle_out = number(e, "angle_out", 0.0);
    const double fint_in = number(e, "fint_in", 0.0), fint_out = number(e, "fint_out", 0.0);
    json def = {{"type", "Bend"},
                {"length", length},
                {"angle", angle},
                {"k1", pb[1]},
                {"k2", 2.0 * pb[2]},
                {"k3", 6.0 * pb[3]},
                {"k0s", pa[0]},
                {"k1s", pa[1]},
                {"k2s", 2.0 * pa[2]},
                {"k3s", 6.0 * pa[3]},
                {"model", 0},
                {"integrator", 0},
                {"num_slices", n},
                {"edge_entry_angle", angle_in},
                {"edge_exit_angle", angle_out},
                {"edge_entry_hgap", gap / 2},
                {"edge_exit_hgap", gap / 2},
                {"edge_entry_fint", fint_in},
                {"edge_exit_fint", fint_out}};
    // Orders 0, 4 and 5 go into the integrated strengths knl, ksl (K_n L = n!
    // PolynomB[n] L).
    const double f4 = 24.0, f5 = 120.0;
    def["knl"] = {pb[0] * length, 0.0, 0.0, 0.0, f4 * pb[4] * length, f5 * pb[5] * length};
    def["ksl"] = {0.0, 0.0, 0.0, 0.0, f4 * pa[4] * length, f5 * pa[5] * length};
    if (pb[0] != 0.0)
      warn(
          "bend with polynom_b[0] != 0: fusetrack's Bend has the curvature term h (h + b0) x where trackcpp has h^2 x, "
          "and edges of strength h + b0 where trackcpp has h (differences of order h b0 L x)",
          e);
    if (angle != 0.0 && (angle_in != 0.0 || angle_out != 0.0 || fint_in != 0.0 || fint_out != 0.0))
      warn(
          "bend edges: fusetrack's linear edge kicks do not carry trackcpp's 1 / (1 + delta) factor (equal on "
          "momentum; a chromatic difference of order delta)",
          e);
    const Alignment a = alignment(e);
    out = wrap({{e.name, def}}, a, true);
  } else if (pm == "corrector_pass") {
    const double hkick = number(e, "hkick", 0.0), vkick = number(e, "vkick", 0.0);
    const Alignment a = alignment(e);
    out =
        wrap({{e.name, json{{"type", "Corrector"}, {"length", length}, {"hkick", hkick}, {"vkick", vkick}}}}, a, false);
  } else if (pm == "cavity_pass" || pm == "cavity_0_pass") {
    if (!m_header.cavity_on) {
      for (const char *k : {"voltage", "frequency", "phase_lag"}) m_used.insert(k);  // said by the warning
      warn(
          "cavities tracked as drifts, as trackcpp does with 'cavity_on false' (set it to true in the file to import "
          "them as cavities)",
          e);
      out.push_back({e.name, length == 0.0 ? json{{"type", "Marker"}} : json{{"type", "Drift"}, {"length", length}}});
    } else {
      const double voltage = number(e, "voltage", 0.0);
      const double frequency = number(e, "frequency", 0.0);
      const double phase_lag = number(e, "phase_lag", 0.0);
      if (voltage != 0.0 && !(frequency > 0.0))
        fail(e, "frequency",
             fmt::format("a cavity with voltage {} V needs a positive frequency, got {} Hz", voltage, frequency));
      // trackcpp: de += -(V/E0) sin(2 pi f dl / c - phase_lag) with dl = -zeta;
      // fusetrack: sin(phase - 2 pi f zeta / (beta0 c)) (lag 0): phase = pi -
      // phase_lag.
      const json cavity = {
          {"type", "Cavity"}, {"voltage", voltage}, {"frequency", frequency}, {"phase", kPi - phase_lag}};
      const Alignment a = alignment(e);
      if (length == 0.0) {
        out = wrap({{e.name, cavity}}, a, false);
      } else {
        const json half = {{"type", "Drift"}, {"length", length / 2}};
        out = wrap({{e.name + "/half_drift", half}, {e.name, cavity}, {e.name + "/half_drift", half}}, a, true);
      }
    }
  }
  aperture(e, out);

  for (const char *k : {"hmin", "hmax", "vmin", "vmax", "vchamber"}) m_used.insert(k);
  for (const auto &[key, f] : e.fields) {
    (void)f;
    if (!m_used.count(key)) warn(fmt::format("field '{}' ignored, as trackcpp's {} ignores it", key, pm), e);
  }
  return out;
}

std::string Importer::assign_name(const std::string &base, long index, json def) {
  std::string text = def.dump();
  auto &variants = m_by_base[base];
  for (const auto &[t, name] : variants)
    if (t == text) return name;
  std::string name = base;
  if (m_taken.count(name)) name = fmt::format("{}#{}", base, index);
  while (m_taken.count(name)) name += "_";
  m_taken.insert(name);
  variants.emplace_back(std::move(text), name);
  // ordered_json's operator[] searches linearly: append to the underlying
  // vector (names unique).
  auto &list = static_cast<json::object_t::Container &>(m_definitions.get_ref<json::object_t &>());
  list.emplace_back(name, std::move(def));
  return name;
}

json Importer::run(const std::string &text) {
  read(text);
  if (m_header.radiation_on != 0) {
    if (!m_options.ignore_radiation)
      fail_header("radiation_on", m_header.radiation_line,
                  fmt::format("radiation_on = {}: fusetrack tracks without synchrotron radiation; set it to 0 in the "
                              "file, or import with --ignore-radiation (then the tracking has no radiation damping)",
                              m_header.radiation_on));
    if (m_options.warnings)
      m_options.warnings->push_back(
          fmt::format("{}: radiation_on = {} ignored: fusetrack tracks without synchrotron radiation", m_file,
                      m_header.radiation_on));
  }

  std::vector<std::vector<Entry>> converted(m_elements.size());
  std::map<std::string, Tally> unsupported;
  std::vector<std::string> unsupported_order;
  const RawElement *first_unsupported = nullptr;
  for (size_t i = 0; i < m_elements.size(); ++i) {
    const RawElement &e = m_elements[i];
    converted[i] = convert(e);
    if (converted[i].empty()) {
      const std::string pm = e.fields.at("pass_method").words[0];
      auto [it, inserted] = unsupported.try_emplace(pm);
      if (inserted) {
        unsupported_order.push_back(pm);
        it->second.first_index = e.index;
        it->second.first_name = e.name;
      }
      ++it->second.count;
      if (!first_unsupported) first_unsupported = &e;
    }
  }
  if (first_unsupported) {
    std::string list;
    for (const std::string &pm : unsupported_order) {
      const Tally &t = unsupported.at(pm);
      list += fmt::format("{}{} ({}{} element{}, first #{} '{}')", list.empty() ? "" : ", ", pm,
                          kTrackcppPassMethods.count(pm) ? "" : "unknown to trackcpp, ", t.count,
                          t.count == 1 ? "" : "s", t.first_index, t.first_name);
    }
    fail(*first_unsupported, "pass_method",
         fmt::format("unsupported pass methods: {}; fusetrack imports {}", list, kSupported));
  }

  json sequence = json::array();
  for (size_t i = 0; i < m_elements.size(); ++i)
    for (Entry &entry : converted[i]) sequence.push_back(assign_name(entry.base, m_elements[i].index, entry.def));

  for (const std::string &w : m_warning_order) {
    const Tally &t = m_warnings.at(w);
    if (m_options.warnings)
      m_options.warnings->push_back(fmt::format("{}: {} ({} element{}, first #{} '{}')", m_file, w, t.count,
                                                t.count == 1 ? "" : "s", t.first_index, t.first_name));
  }

  const double mass0 = kElectronRestEnergy;
  const double p0c = std::sqrt((m_header.energy - mass0) * (m_header.energy + mass0));
  json result;
  result["fusetrack_lattice"] = 1;
  result["description"] = fmt::format(
      "converted from the trackcpp flat file {} ({} elements{}{}); electrons of {} eV, harmonic number {}, cavity_on "
      "{}, vchamber_on {}",
      m_file, m_elements.size(), m_header.lattice_version.empty() ? "" : ", lattice_version ", m_header.lattice_version,
      m_header.energy, m_header.harmonic_number, m_header.cavity_on, m_header.vchamber_on);
  result["reference"] = {{"mass0", mass0}, {"q0", -1.0}, {"p0c", p0c}};
  // trackcpp has no global aperture (only its per-element ones and non-finite
  // coordinates).
  result["global_aperture"] = {{"x", kNoLimit}, {"y", kNoLimit}};
  result["elements"] = std::move(m_definitions);
  result["sequence"] = std::move(sequence);
  return result;
}

}  // namespace

bool is_trackcpp_flat_file(const std::string &text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> words = split_words(line);
    if (words.empty() || words[0][0] == '#') continue;
    return words[0][0] == '%' || words[0] == "fam_name";
  }
  return false;
}

nlohmann::ordered_json trackcpp_to_fusetrack(const std::string &text, const std::string &file,
                                             const TrackcppImportOptions &options) {
  Importer importer(file, options);
  return importer.run(text);
}

nlohmann::ordered_json import_trackcpp_file(const std::string &path, const TrackcppImportOptions &options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(InputLocation{path}, "cannot open the file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return trackcpp_to_fusetrack(text.str(), path, options);
}

}  // namespace ft
