// Import of trackcpp / AT flat lattice files into fusetrack's lattice format;
// the reading rules, the mapping, the coordinate conventions and the known
// differences are in fusetrack/trackcpp_import.h.
//
// The import runs in four steps: FlatFileReader reads the text as trackcpp's
// reader does (header and raw element blocks); the overrides of the options
// replace header values; each element is converted by the converter of its
// pass method (ElementFields gives them its values with trackcpp's defaults and
// errors naming the element); DefinitionNamer names the distinct definitions
// and the document is assembled.
#include "fusetrack/trackcpp_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cctype>
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

#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

constexpr double kNoLimit = std::numeric_limits<double>::max();  // trackcpp's default aperture (DBL_MAX)
constexpr int kMaxOrder = 5;                                     // FT_MAGNET_MAX_ORDER (elements/magnet_integrators.h)
// Electron rest energy [eV] as trackcpp computes it (m_e c^2 / e with CODATA
// 2018 m_e and exact c, e).
constexpr double kElectronRestEnergy = 9.1093837015e-31 * 299792458.0 * 299792458.0 / 1.602176634e-19;
// trackcpp's Element has pass_method = pm_drift_pass unless the file says
// otherwise.
const char* const kDefaultPassMethod = "drift_pass";

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
const char* const kSupported =
    "identity_pass, drift_pass, drift_g2l_pass, str_mpole_symplectic4_pass, bnd_mpole_symplectic4_pass, "
    "corrector_pass, cavity_pass, cavity_0_pass";

const char* const kMatrixRows[6] = {"rx", "px", "ry", "py", "de", "dl"};

// The element keys trackcpp's reader accepts (read_flat_file_trackcpp).
bool is_known_key(const std::string& key) {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k = {"length",    "pass_method",   "nr_steps",  "polynom_a", "polynom_b",
                               "vchamber",  "hmin",          "hmax",      "vmin",      "vmax",
                               "hkick",     "vkick",         "angle",     "gap",       "fint_in",
                               "fint_out",  "voltage",       "frequency", "phase_lag", "angle_in",
                               "angle_out", "rescale_kicks", "t_in",      "t_out",     "kicktable_fname"};
    for (const char* row : kMatrixRows)
      for (const char* m : {"|r_in", "|r_out", "|matrix66"}) k.insert(std::string(row) + m);
    return k;
  }();
  return keys.count(key) != 0;
}

// ---- text ----

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream ss(line);
  std::string w;
  while (ss >> w) words.push_back(w);
  return words;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_long(const std::string& s, long& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  out = v;
  return true;
}

/// "true"/"false" of a header value; false for any other word, as trackcpp's
/// read_boolean_string (`ok` tells whether the word was one of the two).
bool trackcpp_boolean(const std::string& word, bool& ok) {
  ok = word == "true" || word == "false";
  return word == "true";
}

/// radiation_on as trackcpp's process_rad_property reads it: a word starting
/// with a digit is its integer (std::stoi), "true" is 1, anything else 0.
long trackcpp_radiation_state(const std::string& word, bool& ok) {
  ok = true;
  if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0]))) {
    size_t digits = 0;
    while (digits < word.size() && digits < 9 && std::isdigit(static_cast<unsigned char>(word[digits]))) ++digits;
    ok = digits == word.size();
    return std::strtol(word.substr(0, digits).c_str(), nullptr, 10);
  }
  if (word == "true") return 1;
  ok = word == "false";
  return 0;
}

// ---- the file as trackcpp's reader sees it ----

struct Field {
  long line = 0;
  std::vector<std::string> words;   // the values after the key
  bool ends_in_whitespace = false;  // the raw line (with a '\r' trackcpp keeps) ends in whitespace
};

/// Where an element's hmin (vmin) comes from, by trackcpp's reading rule.
enum class Minimum { unset, given, minus_maximum };

struct RawElement {
  long index = 0;  // position in the file, from 0 (trackcpp's "### 0000 ###")
  long line = 0;   // line of its fam_name
  std::string name;
  std::map<std::string, std::vector<Field>> fields;  // every occurrence, in file order
  Minimum hmin = Minimum::unset, vmin = Minimum::unset;
};

struct Header {
  double energy = 0.0;
  long energy_line = 0;  // 0: not in the file
  long harmonic_number = 0;
  bool cavity_on = false;
  bool vchamber_on = false;
  long radiation_on = 0;
  long radiation_line = 0;
  std::string lattice_version;
  std::vector<std::string> overridden;  // keys set by the import options
};

struct FlatFile {
  Header header;
  std::vector<RawElement> elements;
};

/// Warnings counted by their text, each with its first element and line.
class WarningTally {
 public:
  void note(const std::string& what, const RawElement& e, long line) {
    auto [it, inserted] = m_tallies.try_emplace(what);
    if (inserted) {
      m_order.push_back(what);
      it->second.first_index = e.index;
      it->second.first_name = e.name;
      it->second.first_line = line;
    }
    ++it->second.count;
  }
  void emit(const std::string& file, std::vector<std::string>* out) const {
    if (!out) return;
    for (const std::string& w : m_order) {
      const Tally& t = m_tallies.at(w);
      out->push_back(fmt::format("{}: line {}: {} ({} element{}, first #{} '{}')", file, t.first_line, w, t.count,
                                 t.count == 1 ? "" : "s", t.first_index, t.first_name));
    }
  }

 private:
  struct Tally {
    long count = 0;
    long first_index = 0;
    long first_line = 0;
    std::string first_name;
  };
  std::map<std::string, Tally> m_tallies;
  std::vector<std::string> m_order;
};

InputLocation element_location(const std::string& file, const RawElement& e, const std::string& field) {
  InputLocation w{file};
  w.element_index = e.index;
  w.element_name = e.name;
  auto pm = e.fields.find("pass_method");
  if (pm != e.fields.end() && !pm->second.back().words.empty()) w.element_type = pm->second.back().words[0];
  w.field = field;
  return w;
}

[[noreturn]] void fail_header(const std::string& file, const std::string& key, long line, const std::string& problem) {
  InputLocation w{file};
  w.field = key;
  throw InputError(w, line > 0 ? fmt::format("line {}: {}", line, problem) : problem);
}

/// Reads the text line by line as trackcpp's read_flat_file_trackcpp does.
class FlatFileReader {
 public:
  FlatFileReader(const std::string& file, std::vector<std::string>* warnings, WarningTally& tally)
      : m_file(file), m_warnings(warnings), m_tally(tally) {}

  FlatFile read(const std::string& text);

 private:
  void header_line(const std::string& line_text, long line);
  void start_element(const std::vector<std::string>& words, const std::string& line_text, long line);
  void element_line(const std::vector<std::string>& words, const std::string& line_text, bool ends_in_whitespace,
                    long line);
  void follow_aperture_rule(RawElement& e, const std::string& key, long line);
  void warn(const std::string& message) {
    if (m_warnings) m_warnings->push_back(fmt::format("{}: {}", m_file, message));
  }

  const std::string& m_file;
  std::vector<std::string>* m_warnings;
  WarningTally& m_tally;
  FlatFile m_result;
  std::set<std::string> m_unknown_keys;  // warned about once each
  // trackcpp's found_hmin / found_vmin: set by an hmin (vmin) line, cleared by
  // an hmax (vmax) line, never reset between elements.
  bool m_hmin_found = false, m_vmin_found = false;
  long m_hmin_line = 0, m_vmin_line = 0;
};

void FlatFileReader::header_line(const std::string& line_text, long line) {
  // trackcpp: the first word starts with '%'; the key is the NEXT word.
  const std::vector<std::string> words = split_words(line_text);
  if (words[0] != "%") {
    warn(fmt::format(
        "line {}: header line '{}' ignored: trackcpp reads the key from the word after '{}' (write '% {} ...')", line,
        line_text, words[0], words[0].substr(1)));
    return;
  }
  if (words.size() < 2) return;  // a lone '%'
  const std::string& key = words[1];
  const std::string value = words.size() > 2 ? words[2] : "";
  Header& h = m_result.header;
  auto boolean = [&](bool& out) {
    bool ok = false;
    out = trackcpp_boolean(value, ok);
    if (!ok)
      warn(fmt::format("line {}: '% {} {}' reads as false (trackcpp takes only 'true' as true)", line, key, value));
  };
  if (key == "energy") {
    if (!parse_double(value, h.energy)) fail_header(m_file, key, line, fmt::format("'{}' is not a number", value));
    h.energy_line = line;
  } else if (key == "harmonic_number") {
    if (!parse_long(value, h.harmonic_number))
      fail_header(m_file, key, line, fmt::format("expected an integer, got '{}'", value));
  } else if (key == "cavity_on") {
    boolean(h.cavity_on);
  } else if (key == "vchamber_on") {
    boolean(h.vchamber_on);
  } else if (key == "radiation_on") {
    bool ok = false;
    h.radiation_on = trackcpp_radiation_state(value, ok);
    if (!ok)
      warn(fmt::format(
          "line {}: '% radiation_on {}' reads as {}, as trackcpp reads it (0, 1, 2, true or false expected)", line,
          value, h.radiation_on));
    h.radiation_line = line;
  } else if (key == "lattice_version") {
    h.lattice_version = value;
  } else {
    warn(fmt::format("line {}: header line '% {}' is not one trackcpp reads; ignored", line, key));
  }
}

void FlatFileReader::start_element(const std::vector<std::string>& words, const std::string& line_text, long line) {
  if (words.size() != 2) {
    InputLocation w{m_file};
    w.element_index = static_cast<long>(m_result.elements.size());
    w.field = "fam_name";
    throw InputError(w, fmt::format("line {}: expected 'fam_name NAME' (one word), got '{}'", line, line_text));
  }
  RawElement e;
  e.index = static_cast<long>(m_result.elements.size());
  e.line = line;
  e.name = words[1];
  m_result.elements.push_back(std::move(e));
}

void FlatFileReader::follow_aperture_rule(RawElement& e, const std::string& key, long line) {
  auto rule = [&](Minimum& minimum, bool& found, long& found_line, bool is_minimum, const char* min_key) {
    if (is_minimum) {
      minimum = Minimum::given;
      found = true;
      found_line = line;
      return;
    }
    if (!found) {
      minimum = Minimum::minus_maximum;
    } else if (minimum != Minimum::given) {
      // The minimum line was in an earlier element: trackcpp keeps this
      // element's default.
      m_tally.note(fmt::format("{} stays unlimited although {} is given: the {} line on line {} (an earlier element, "
                               "without {}) keeps trackcpp's reader from setting {} = -{}",
                               min_key, key, min_key, found_line, key, min_key, key),
                   e, line);
    }
    found = false;
  };
  if (key == "hmin" || key == "hmax") rule(e.hmin, m_hmin_found, m_hmin_line, key == "hmin", "hmin");
  if (key == "vmin" || key == "vmax") rule(e.vmin, m_vmin_found, m_vmin_line, key == "vmin", "vmin");
}

void FlatFileReader::element_line(const std::vector<std::string>& words, const std::string& line_text,
                                  bool ends_in_whitespace, long line) {
  const std::string& key = words[0];
  if (m_result.elements.empty()) {
    InputLocation w{m_file};
    w.field = key;
    throw InputError(
        w,
        fmt::format("line {}: '{}' comes before the first 'fam_name' line (every element starts with 'fam_name NAME')",
                    line, line_text));
  }
  RawElement& e = m_result.elements.back();
  if (!is_known_key(key)) {
    if (m_unknown_keys.insert(key).second)
      warn(
          fmt::format("line {}: unknown field '{}' in element #{} '{}' ignored (not one trackcpp's flat-file reader "
                      "knows; trackcpp stops reading the file there)",
                      line, key, e.index, e.name));
    return;
  }
  if (words.size() < 2)
    throw InputError(element_location(m_file, e, key), fmt::format("line {}: the field has no value", line));
  std::vector<Field>& occurrences = e.fields[key];
  if (!occurrences.empty() && key != "polynom_a" && key != "polynom_b")
    m_tally.note(
        fmt::format("field '{}' given twice in one element (first on line {}): the last value counts, as in trackcpp",
                    key, occurrences.front().line),
        e, line);
  occurrences.push_back(Field{line, std::vector<std::string>(words.begin() + 1, words.end()), ends_in_whitespace});
  follow_aperture_rule(e, key, line);
}

FlatFile FlatFileReader::read(const std::string& text) {
  std::istringstream in(text);
  std::string line_text;
  long line = 0;
  while (std::getline(in, line_text)) {
    ++line;
    const bool ends_in_whitespace =
        !line_text.empty() && std::isspace(static_cast<unsigned char>(line_text.back())) != 0;
    if (!line_text.empty() && line_text.back() == '\r') line_text.pop_back();
    const std::vector<std::string> words = split_words(line_text);
    if (words.empty() || words[0][0] == '#') continue;
    if (words[0][0] == '%') {
      header_line(line_text, line);
    } else if (words[0] == "fam_name") {
      start_element(words, line_text, line);
    } else {
      element_line(words, line_text, ends_in_whitespace, line);
    }
  }
  if (m_result.elements.empty()) {
    InputLocation w{m_file};
    w.field = "fam_name";
    throw InputError(w,
                     "no elements: a trackcpp flat file has one block per element, each starting with 'fam_name NAME'");
  }
  return std::move(m_result);
}

// ---- the values of one element, with trackcpp's defaults ----

/// One element's fields for its converter: the value trackcpp reads (the last
/// occurrence) or its default, errors naming the element, and the keys read
/// (the others are warned about as ignored).
class ElementFields {
 public:
  ElementFields(const std::string& file, const RawElement& e, WarningTally& tally)
      : m_file(file), m_element(e), m_tally(tally) {}

  const RawElement& raw() const { return m_element; }
  const std::string& name() const { return m_element.name; }
  InputLocation at(const std::string& key) const { return element_location(m_file, m_element, key); }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    const Field* f = find(key);
    throw InputError(at(key), fmt::format("line {}: {}", f ? f->line : m_element.line, problem));
  }
  void warn(const std::string& what) { m_tally.note(what, m_element, m_element.line); }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  void mark_used(const std::string& key) { m_used.insert(key); }

  /// The pass method name (trackcpp's default drift_pass when not given).
  std::string pass_method();
  double number(const std::string& key, double fallback);
  long integer(const std::string& key, long fallback);
  std::array<double, 6> vector6(const std::string& key, bool& given);
  /// polynom_a / polynom_b as trackcpp reads them, to kMaxOrder (higher orders
  /// must be zero).
  std::vector<double> polynom(const std::string& key);
  /// Warnings for the fields the converter did not read.
  void warn_unused(const std::string& pass_method);

 private:
  const Field* find(const std::string& key) const {
    auto f = m_element.fields.find(key);
    return f == m_element.fields.end() ? nullptr : &f->second.back();
  }
  const Field* field(const std::string& key, size_t words_read) {
    m_used.insert(key);
    const Field* f = find(key);
    if (f && f->words.size() > words_read)
      m_tally.note(fmt::format("words after the value{} of '{}' ignored, as trackcpp ignores them",
                               words_read == 1 ? "" : "s", key),
                   m_element, f->line);
    return f;
  }

  const std::string& m_file;
  const RawElement& m_element;
  WarningTally& m_tally;
  std::set<std::string> m_used;
};

std::string ElementFields::pass_method() {
  const Field* f = field("pass_method", 1);
  if (f) return f->words[0];
  warn(fmt::format("no pass_method: trackcpp's default {}", kDefaultPassMethod));
  return kDefaultPassMethod;
}

double ElementFields::number(const std::string& key, double fallback) {
  const Field* f = field(key, 1);
  if (!f) return fallback;
  double v = 0.0;
  if (!parse_double(f->words[0], v)) fail(key, fmt::format("'{}' is not a finite number", f->words[0]));
  return v;
}

long ElementFields::integer(const std::string& key, long fallback) {
  const Field* f = field(key, 1);
  if (!f) return fallback;
  long v = 0;
  if (!parse_long(f->words[0], v)) fail(key, fmt::format("expected one integer, got '{}'", f->words[0]));
  return v;
}

std::array<double, 6> ElementFields::vector6(const std::string& key, bool& given) {
  std::array<double, 6> v{};
  const Field* f = field(key, 6);
  given = f != nullptr;
  if (!f) return v;
  if (f->words.size() < 6)
    fail(key, fmt::format("expected 6 numbers, got {} words '{}'", f->words.size(), fmt::join(f->words, " ")));
  for (int i = 0; i < 6; ++i)
    if (!parse_double(f->words[static_cast<size_t>(i)], v[static_cast<size_t>(i)]))
      fail(key, fmt::format("value {} '{}' is not a finite number", i, f->words[static_cast<size_t>(i)]));
  return v;
}

std::vector<double> ElementFields::polynom(const std::string& key) {
  m_used.insert(key);
  std::vector<double> p(kMaxOrder + 1, 0.0);
  auto it = m_element.fields.find(key);
  if (it == m_element.fields.end()) return p;
  for (const Field& f : it->second) {  // a repeated line adds its pairs
                                       // (trackcpp resizes, never clears)
    if (f.words.size() % 2 != 0)
      throw InputError(at(key), fmt::format("line {}: expected 'order value' pairs, got {} words '{}'", f.line,
                                            f.words.size(), fmt::join(f.words, " ")));
    // trackcpp keeps a pair only if the stream has not reached the end of the
    // line after its value: without trailing whitespace the last pair is lost.
    const size_t kept = f.ends_in_whitespace ? f.words.size() : f.words.size() - 2;
    std::set<long> seen;
    for (size_t i = 0; i < f.words.size(); i += 2) {
      long order = 0;
      double value = 0.0;
      if (!parse_long(f.words[i], order) || order < 0 || order > 1000)
        throw InputError(at(key),
                         fmt::format("line {}: '{}' is not a multipole order (an integer from 0)", f.line, f.words[i]));
      if (!parse_double(f.words[i + 1], value))
        throw InputError(at(key), fmt::format("line {}: the value '{}' of order {} is not a finite number", f.line,
                                              f.words[i + 1], order));
      if (!seen.insert(order).second)
        throw InputError(at(key), fmt::format("line {}: order {} is given twice", f.line, order));
      if (i >= kept) {
        m_tally.note(fmt::format("the last pair of a {} line is dropped, as trackcpp's reader drops it when the line "
                                 "does not end in whitespace (its writer ends every pair with a space)",
                                 key),
                     m_element, f.line);
        break;
      }
      if (order > kMaxOrder) {
        if (value != 0.0)
          throw InputError(at(key),
                           fmt::format("line {}: order {} is {} but fusetrack's magnets go to order {} (dodecapole)",
                                       f.line, order, value, kMaxOrder));
        continue;
      }
      p[static_cast<size_t>(order)] = value;
    }
  }
  return p;
}

void ElementFields::warn_unused(const std::string& pass_method) {
  for (const auto& [key, occurrences] : m_element.fields)
    if (!m_used.count(key))
      m_tally.note(fmt::format("field '{}' ignored, as trackcpp's {} ignores it", key, pass_method), m_element,
                   occurrences.front().line);
}

// ---- conversion ----

/// One entry of the fusetrack sequence made from a trackcpp element: its base
/// name and definition.
struct Entry {
  std::string base;
  json def;
};

struct Alignment {
  bool active = false;
  double dx = 0.0, dy = 0.0, psi = 0.0;
};

/// t_in/t_out and r_in/r_out as a displacement (dx, dy) and a tilt psi about s;
/// anything else is refused.
Alignment read_alignment(ElementFields& e) {
  Alignment a;
  bool t_in_given = false, t_out_given = false;
  const std::array<double, 6> t_in = e.vector6("t_in", t_in_given);
  const std::array<double, 6> t_out = e.vector6("t_out", t_out_given);
  double r_in[6][6], r_out[6][6];
  bool r_given = false;
  for (int i = 0; i < 6; ++i) {
    bool given_in = false, given_out = false;
    const std::array<double, 6> row_in = e.vector6(std::string(kMatrixRows[i]) + "|r_in", given_in);
    const std::array<double, 6> row_out = e.vector6(std::string(kMatrixRows[i]) + "|r_out", given_out);
    r_given = r_given || given_in || given_out;
    for (int j = 0; j < 6; ++j) {
      r_in[i][j] = given_in ? row_in[static_cast<size_t>(j)] : (i == j ? 1.0 : 0.0);  // default: the identity
      r_out[i][j] = given_out ? row_out[static_cast<size_t>(j)] : (i == j ? 1.0 : 0.0);
    }
  }
  if (!t_in_given && !t_out_given && !r_given) return a;

  for (size_t i : {1, 3, 4, 5}) {
    for (const auto& [key, t] :
         {std::pair<const char*, const std::array<double, 6>*>{"t_in", &t_in}, {"t_out", &t_out}})
      if ((*t)[i] != 0.0)
        e.fail(key, fmt::format("component {} ({}) is {}: only the transverse displacements (components 0 and 2) of an "
                                "element can be represented",
                                i, kMatrixRows[i], (*t)[i]));
  }
  for (size_t i : {0, 2})
    if (std::fabs(t_out[i] + t_in[i]) > 1e-12 * std::fabs(t_in[i]))
      e.fail("t_out", fmt::format("t_out = ({}, {}) in x, y is not -t_in = ({}, {}): the exit must undo the entry "
                                  "displacement (a displaced element)",
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
      if (std::fabs(r_in[i][j] - expected[i][j]) > 1e-12) {
        const std::string key = std::string(kMatrixRows[i]) + "|r_in";
        e.fail(key, fmt::format("r_in[{}][{}] = {}{} where a rotation about s by atan2({}, {}) has {}: only a tilt of "
                                "the element (x, px and y, py rotated together) can be represented",
                                i, j, r_in[i][j], e.has(key) ? "" : " (row not given: the identity's)", S, C,
                                expected[i][j]));
      }
  if (std::fabs(C * C + S * S - 1.0) > 1e-12)
    e.fail("rx|r_in", fmt::format("C = {}, S = {} with C^2 + S^2 != 1: not a rotation", C, S));
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      if (std::fabs(r_out[i][j] - expected[j][i]) > 1e-12)
        e.fail(std::string(kMatrixRows[i]) + "|r_out",
               fmt::format("r_out[{}][{}] = {} is not r_in[{}][{}] = {}: r_out must be the inverse (transpose) of r_in",
                           i, j, r_out[i][j], j, i, expected[j][i]));
  a.dx = -t_in[0];
  a.dy = -t_in[2];
  a.psi = std::atan2(S, C);
  a.active = a.dx != 0.0 || a.dy != 0.0 || a.psi != 0.0;
  return a;
}

/// The element's entries with its alignment: explicit XYShift/SRotation around
/// them (bends, thick cavities), or the generic transformation fields on its
/// one entry.
std::vector<Entry> with_alignment(std::vector<Entry> body, const Alignment& a, bool explicit_frames,
                                  const std::string& name) {
  if (!a.active) return body;
  if (!explicit_frames) {
    json& def = body.at(0).def;
    if (a.dx != 0.0) def["shift_x"] = a.dx;
    if (a.dy != 0.0) def["shift_y"] = a.dy;
    if (a.psi != 0.0) def["rot_s_rad"] = a.psi;
    return body;
  }
  std::vector<Entry> wrapped;
  const double degrees = a.psi * 180.0 / kPi;
  if (a.dx != 0.0 || a.dy != 0.0)
    wrapped.push_back({name + "/shift_in", json{{"type", "XYShift"}, {"dx", a.dx}, {"dy", a.dy}}});
  if (a.psi != 0.0) wrapped.push_back({name + "/tilt_in", json{{"type", "SRotation"}, {"angle", degrees}}});
  for (Entry& b : body) wrapped.push_back(std::move(b));
  if (a.psi != 0.0) wrapped.push_back({name + "/tilt_out", json{{"type", "SRotation"}, {"angle", -degrees}}});
  if (a.dx != 0.0 || a.dy != 0.0)
    wrapped.push_back({name + "/shift_out", json{{"type", "XYShift"}, {"dx", -a.dx}, {"dy", -a.dy}}});
  return wrapped;
}

/// The limit that follows the element when "vchamber_on true" (trackcpp's
/// check_particle_loss after every element).
void add_aperture(ElementFields& e, const Header& header, std::vector<Entry>& out) {
  const char* keys[] = {"hmin", "hmax", "vmin", "vmax", "vchamber"};
  for (const char* k : keys) e.mark_used(k);
  if (!header.vchamber_on) {
    for (const char* k : keys)
      if (e.has(k)) {
        e.warn(
            "apertures (hmin, hmax, vmin, vmax, vchamber) ignored, as trackcpp ignores them with 'vchamber_on false'");
        return;
      }
    return;
  }
  const double hmax = e.number("hmax", kNoLimit);
  const double vmax = e.number("vmax", kNoLimit);
  auto minimum = [&](Minimum rule, const char* key, double maximum) {
    if (rule == Minimum::given) return e.number(key, 0.0);
    return rule == Minimum::minus_maximum ? -maximum : -kNoLimit;
  };
  const double hmin = minimum(e.raw().hmin, "hmin", hmax);
  const double vmin = minimum(e.raw().vmin, "vmin", vmax);
  const long shape = e.integer("vchamber", 0);
  if (!(hmin < hmax)) e.fail("hmax", fmt::format("hmin = {} must be below hmax = {}", hmin, hmax));
  if (!(vmin < vmax)) e.fail("vmax", fmt::format("vmin = {} must be below vmax = {}", vmin, vmax));
  const bool unlimited = hmax == kNoLimit && vmax == kNoLimit && hmin == -kNoLimit && vmin == -kNoLimit;
  const std::string name = e.name() + "/aperture";
  if (shape == 0) {  // rectangle
    if (unlimited) return;
    out.push_back(
        {name, json{{"type", "LimitRect"}, {"min_x", hmin}, {"max_x", hmax}, {"min_y", vmin}, {"max_y", vmax}}});
    return;
  }
  if (shape != 1 && shape != 2)
    e.fail("vchamber",
           fmt::format("vchamber = {}: only 0 (rectangle), 1 (rhombus) and 2 (ellipse) are supported{}", shape,
                       shape < 0 ? " (trackcpp loses every particle there)"
                                 : "; other p-norm shapes have no fusetrack aperture"));
  for (const auto& [key, v] :
       {std::pair<const char*, double>{"hmin", hmin}, {"hmax", hmax}, {"vmin", vmin}, {"vmax", vmax}})
    if (std::fabs(v) == kNoLimit)
      e.fail(key, fmt::format("a vchamber {} shape needs finite hmin, hmax, vmin and vmax", shape));
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
  out.push_back({name, def});
}

long integrator_steps(ElementFields& e) {
  const long n = e.integer("nr_steps", 1);  // trackcpp's default is 1
  if (n < 1 || n > 1000000) e.fail("nr_steps", fmt::format("nr_steps = {} must be in [1, 1000000]", n));
  return n;
}

std::vector<Entry> convert_identity(ElementFields& e, double length) {
  if (length != 0.0)
    e.fail("length", fmt::format("identity_pass with length {} m: trackcpp does not move particles over it, and "
                                 "fusetrack has no element with a length that does nothing",
                                 length));
  return {{e.name(), json{{"type", "Marker"}}}};
}

std::vector<Entry> convert_drift_g2l(ElementFields& e, double length) {
  return with_alignment({{e.name(), json{{"type", "Drift"}, {"length", length}}}}, read_alignment(e), false, e.name());
}

/// str_mpole_symplectic4_pass: ThickMultipole with kn[n] = n! PolynomB[n].
std::vector<Entry> convert_straight_multipole(ElementFields& e, double length) {
  const long n = integrator_steps(e);
  const std::vector<double> pa = e.polynom("polynom_a"), pb = e.polynom("polynom_b");
  json kn = json::array(), ks = json::array();
  double factorial = 1.0;
  for (size_t i = 0; i <= kMaxOrder; ++i) {
    if (i > 1) factorial *= static_cast<double>(i);
    kn.push_back(pb[i] * factorial);
    ks.push_back(pa[i] * factorial);
  }
  if (length == 0.0)
    e.warn(
        "str_mpole_symplectic4_pass of zero length: its kicks are scaled by the length, so it does nothing (in "
        "trackcpp as in fusetrack)");
  const json def = {{"type", "ThickMultipole"}, {"length", length}, {"kn", kn}, {"ks", ks},
                    {"integrator", 0},          {"num_slices", n}};
  return with_alignment({{e.name(), def}}, read_alignment(e), false, e.name());
}

/// bnd_mpole_symplectic4_pass: Bend (model 0), k_n = n! PolynomB[n] to order 3,
/// orders 0, 4, 5 as integrated strengths.
std::vector<Entry> convert_bend(ElementFields& e, double length) {
  const long n = integrator_steps(e);
  if (length == 0.0)
    e.fail("length", "a bnd_mpole_symplectic4_pass needs a positive length (its curvature is angle / length)");
  const double angle = e.number("angle", 0.0);
  const std::vector<double> pa = e.polynom("polynom_a"), pb = e.polynom("polynom_b");
  const double gap = e.number("gap", 0.0);
  const double angle_in = e.number("angle_in", 0.0), angle_out = e.number("angle_out", 0.0);
  const double fint_in = e.number("fint_in", 0.0), fint_out = e.number("fint_out", 0.0);
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
    e.warn(
        "bend with polynom_b[0] != 0: fusetrack's Bend has the curvature term h (h + b0) x where trackcpp has h^2 x, "
        "and edges of strength h + b0 where trackcpp has h (differences of order h b0 L x)");
  if (angle != 0.0 && (angle_in != 0.0 || angle_out != 0.0 || fint_in != 0.0 || fint_out != 0.0))
    e.warn(
        "bend edges: fusetrack's linear edge kicks do not carry trackcpp's 1 / (1 + delta) factor (equal on momentum; "
        "a chromatic difference of order delta)");
  return with_alignment({{e.name(), def}}, read_alignment(e), true, e.name());
}

std::vector<Entry> convert_corrector(ElementFields& e, double length) {
  const double hkick = e.number("hkick", 0.0), vkick = e.number("vkick", 0.0);
  const json def = {{"type", "Corrector"}, {"length", length}, {"hkick", hkick}, {"vkick", vkick}};
  return with_alignment({{e.name(), def}}, read_alignment(e), false, e.name());
}

/// cavity_pass, cavity_0_pass: a thin Cavity (between half drifts when thick),
/// or a drift with "cavity_on false".
std::vector<Entry> convert_cavity(ElementFields& e, double length, const Header& header) {
  if (!header.cavity_on) {
    for (const char* k : {"voltage", "frequency", "phase_lag"}) e.mark_used(k);  // said by the warning
    e.warn(
        "cavities tracked as drifts, as trackcpp does with 'cavity_on false' (import with the header value "
        "cavity_on=true, `fusetrack import --trackcpp-header cavity_on=true`, to import them as cavities)");
    return {{e.name(), length == 0.0 ? json{{"type", "Marker"}} : json{{"type", "Drift"}, {"length", length}}}};
  }
  const double voltage = e.number("voltage", 0.0);
  const double frequency = e.number("frequency", 0.0);
  const double phase_lag = e.number("phase_lag", 0.0);
  if (voltage != 0.0 && !(frequency > 0.0))
    e.fail("frequency",
           fmt::format("a cavity with voltage {} V needs a positive frequency, got {} Hz", voltage, frequency));
  // trackcpp: de += -(V/E0) sin(2 pi f dl / c - phase_lag) with dl = -zeta;
  // fusetrack: sin(phase - 2 pi f zeta / (beta0 c)) (lag 0): phase = pi -
  // phase_lag.
  const json cavity = {{"type", "Cavity"}, {"voltage", voltage}, {"frequency", frequency}, {"phase", kPi - phase_lag}};
  const Alignment a = read_alignment(e);
  if (length == 0.0) return with_alignment({{e.name(), cavity}}, a, false, e.name());
  const json half = {{"type", "Drift"}, {"length", length / 2}};
  return with_alignment({{e.name() + "/half_drift", half}, {e.name(), cavity}, {e.name() + "/half_drift", half}}, a,
                        true, e.name());
}

/// The entries of one element, its aperture included; empty for a pass method
/// fusetrack does not import (the caller lists them all).
std::vector<Entry> convert_element(ElementFields& e, const std::string& pm, const Header& header) {
  static const std::set<std::string> supported = {
      "identity_pass",  "drift_pass",  "drift_g2l_pass", "str_mpole_symplectic4_pass", "bnd_mpole_symplectic4_pass",
      "corrector_pass", "cavity_pass", "cavity_0_pass"};
  if (!supported.count(pm)) return {};
  const double length = e.number("length", 0.0);  // trackcpp's default: 0
  if (length < 0.0) e.fail("length", fmt::format("the length {} m is negative", length));
  std::vector<Entry> out;
  if (pm == "identity_pass") {
    out = convert_identity(e, length);
  } else if (pm == "drift_pass") {
    out = {{e.name(), json{{"type", "Drift"}, {"length", length}}}};
  } else if (pm == "drift_g2l_pass") {
    out = convert_drift_g2l(e, length);
  } else if (pm == "str_mpole_symplectic4_pass") {
    out = convert_straight_multipole(e, length);
  } else if (pm == "bnd_mpole_symplectic4_pass") {
    out = convert_bend(e, length);
  } else if (pm == "corrector_pass") {
    out = convert_corrector(e, length);
  } else {
    out = convert_cavity(e, length, header);
  }
  add_aperture(e, header, out);
  e.warn_unused(pm);
  return out;
}

// ---- naming and the document ----

/// Names the distinct definitions: the element's name, or NAME#INDEX where one
/// name has several definitions.
class DefinitionNamer {
 public:
  std::string name(const std::string& base, long index, json def) {
    std::string text = def.dump();
    auto& variants = m_by_base[base];
    for (const auto& [t, name] : variants)
      if (t == text) return name;
    std::string name = base;
    if (m_taken.count(name)) name = fmt::format("{}#{}", base, index);
    while (m_taken.count(name)) name += "_";
    m_taken.insert(name);
    variants.emplace_back(std::move(text), name);
    // ordered_json's operator[] searches linearly: append to the underlying
    // vector (names unique).
    auto& list = static_cast<json::object_t::Container&>(m_definitions.get_ref<json::object_t&>());
    list.emplace_back(name, std::move(def));
    return name;
  }
  json take_definitions() { return std::move(m_definitions); }

 private:
  // Definitions by base name: (JSON text, assigned name) of each distinct
  // definition.
  std::unordered_map<std::string, std::vector<std::pair<std::string, std::string>>> m_by_base;
  std::set<std::string> m_taken;
  json m_definitions = json::object();
};

void apply_header_values(Header& h, const TrackcppHeaderValues& values) {
  auto set = [&](const char* key, auto& target, const auto& value) {
    if (!value) return;
    target = *value;
    h.overridden.push_back(key);
  };
  set("energy", h.energy, values.energy);
  set("harmonic_number", h.harmonic_number, values.harmonic_number);
  set("cavity_on", h.cavity_on, values.cavity_on);
  set("radiation_on", h.radiation_on, values.radiation_on);
  set("vchamber_on", h.vchamber_on, values.vchamber_on);
  if (values.energy) h.energy_line = -1;
  if (values.radiation_on) h.radiation_line = -1;
}

void check_header(const Header& h, const std::string& file, const TrackcppImportOptions& options) {
  if (h.energy_line == 0) {
    InputLocation w{file};
    w.field = "energy";
    throw InputError(w,
                     "the header line '% energy VALUE eV' (the beam energy) is missing (or give it with the import "
                     "options: `fusetrack import --trackcpp-header energy=VALUE`)");
  }
  if (!(h.energy > kElectronRestEnergy))
    fail_header(file, "energy", h.energy_line,
                fmt::format("the beam energy {} eV must exceed the electron rest energy {:.10g} eV (trackcpp's energy "
                            "is the total energy of an electron)",
                            h.energy, kElectronRestEnergy));
  if (h.radiation_on == 0 || !options.ignore_radiation) return;
  if (options.warnings)
    options.warnings->push_back(fmt::format(
        "{}: radiation_on = {} ignored (--ignore-radiation): the lattice is tracked without synchrotron radiation",
        file, h.radiation_on));
}

/// The lattice-wide radiation switch of trackcpp's radiation_on (elements/radiation.h): 1 (damping)
/// is "mean", 2 (full) "quantum"; the magnets trackcpp radiates in (bnd_mpole_symplectic4_pass,
/// str_mpole_symplectic4_pass) import as Bend and ThickMultipole, which radiate alike.
void set_radiation_switch(json& document, const Header& h, const TrackcppImportOptions& options) {
  if (h.radiation_on == 0 || options.ignore_radiation) return;
  document["radiation"] = h.radiation_on == 1 ? "mean" : "quantum";
}

/// Throws, listing every pass method fusetrack does not import, if there is
/// one.
void refuse_unsupported(const std::vector<RawElement>& elements, const std::vector<std::string>& pass_methods,
                        const std::vector<std::vector<Entry>>& converted, const std::string& file) {
  struct Count {
    long count = 0;
    const RawElement* first = nullptr;
  };
  std::map<std::string, Count> unsupported;
  std::vector<std::string> order;
  for (size_t i = 0; i < elements.size(); ++i) {
    if (!converted[i].empty()) continue;
    auto [it, inserted] = unsupported.try_emplace(pass_methods[i]);
    if (inserted) {
      order.push_back(pass_methods[i]);
      it->second.first = &elements[i];
    }
    ++it->second.count;
  }
  if (order.empty()) return;
  std::string list;
  for (const std::string& pm : order) {
    const Count& c = unsupported.at(pm);
    list += fmt::format("{}{} ({}{} element{}, first #{} '{}')", list.empty() ? "" : ", ", pm,
                        kTrackcppPassMethods.count(pm) ? "" : "unknown to trackcpp, ", c.count, c.count == 1 ? "" : "s",
                        c.first->index, c.first->name);
  }
  const RawElement& first = *unsupported.at(order[0]).first;
  auto pm_field = first.fields.find("pass_method");
  const long line = pm_field != first.fields.end() ? pm_field->second.back().line : first.line;
  throw InputError(element_location(file, first, "pass_method"),
                   fmt::format("line {}: unsupported pass methods: {}; fusetrack imports {}", line, list, kSupported));
}

json lattice_document(const std::string& file, const Header& h, size_t element_count, json definitions, json sequence) {
  const double mass0 = kElectronRestEnergy;
  const double p0c = std::sqrt((h.energy - mass0) * (h.energy + mass0));
  json result;
  result["fusetrack_lattice"] = 1;
  result["description"] = fmt::format(
      "converted from the trackcpp flat file {} ({} elements{}{}); electrons of {} eV, harmonic number {}, cavity_on "
      "{}, vchamber_on {}{}",
      file, element_count, h.lattice_version.empty() ? "" : ", lattice_version ", h.lattice_version, h.energy,
      h.harmonic_number, h.cavity_on, h.vchamber_on,
      h.overridden.empty() ? "" : fmt::format(" ({} set by the import options)", fmt::join(h.overridden, ", ")));
  result["reference"] = {{"mass0", mass0}, {"q0", -1.0}, {"p0c", p0c}};
  // trackcpp has no global aperture (only its per-element ones and non-finite
  // coordinates).
  result["global_aperture"] = {{"x", kNoLimit}, {"y", kNoLimit}};
  result["elements"] = std::move(definitions);
  result["sequence"] = std::move(sequence);
  return result;
}

json import_flat_file(const std::string& text, const std::string& file, const TrackcppImportOptions& options) {
  WarningTally tally;
  FlatFile flat = FlatFileReader(file, options.warnings, tally).read(text);
  apply_header_values(flat.header, options.header);
  check_header(flat.header, file, options);

  std::vector<std::vector<Entry>> converted(flat.elements.size());
  std::vector<std::string> pass_methods(flat.elements.size());
  for (size_t i = 0; i < flat.elements.size(); ++i) {
    ElementFields fields(file, flat.elements[i], tally);
    pass_methods[i] = fields.pass_method();
    converted[i] = convert_element(fields, pass_methods[i], flat.header);
  }
  refuse_unsupported(flat.elements, pass_methods, converted, file);

  DefinitionNamer namer;
  json sequence = json::array();
  for (size_t i = 0; i < flat.elements.size(); ++i)
    for (Entry& entry : converted[i]) sequence.push_back(namer.name(entry.base, flat.elements[i].index, entry.def));
  tally.emit(file, options.warnings);
  json document =
      lattice_document(file, flat.header, flat.elements.size(), namer.take_definitions(), std::move(sequence));
  set_radiation_switch(document, flat.header, options);
  return document;
}

}  // namespace

void set_trackcpp_header_value(TrackcppHeaderValues& values, const std::string& assignment, const std::string& origin) {
  const size_t eq = assignment.find('=');
  const std::string key = assignment.substr(0, eq);
  const std::string value = eq == std::string::npos ? "" : assignment.substr(eq + 1);
  InputLocation where{origin};
  where.field = key;
  if (eq == std::string::npos || value.empty())
    throw InputError(where, fmt::format("expected KEY=VALUE, got '{}'", assignment));
  auto boolean = [&](std::optional<bool>& out) {
    if (value != "true" && value != "false")
      throw InputError(where, fmt::format("expected true or false, got '{}'", value));
    out = value == "true";
  };
  if (key == "energy") {
    double e = 0.0;
    if (!parse_double(value, e) || !(e > kElectronRestEnergy))
      throw InputError(where, fmt::format("expected the total electron energy in eV (above {:.10g}), got '{}'",
                                          kElectronRestEnergy, value));
    values.energy = e;
  } else if (key == "harmonic_number") {
    long h = 0;
    if (!parse_long(value, h) || h < 0)
      throw InputError(where, fmt::format("expected a non-negative integer, got '{}'", value));
    values.harmonic_number = h;
  } else if (key == "cavity_on") {
    boolean(values.cavity_on);
  } else if (key == "vchamber_on") {
    boolean(values.vchamber_on);
  } else if (key == "radiation_on") {
    long r = 0;
    if (!parse_long(value, r) || r < 0 || r > 2)
      throw InputError(where, fmt::format("expected 0 (off), 1 (damping) or 2 (full), got '{}'", value));
    values.radiation_on = r;
  } else {
    throw InputError(where,
                     "unknown header key; expected energy, harmonic_number, cavity_on, radiation_on or vchamber_on");
  }
}

bool is_trackcpp_flat_file(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> words = split_words(line);
    if (words.empty() || words[0][0] == '#') continue;
    return words[0][0] == '%' || words[0] == "fam_name";
  }
  return false;
}

nlohmann::ordered_json trackcpp_to_fusetrack(const std::string& text, const std::string& file,
                                             const TrackcppImportOptions& options) {
  return import_flat_file(text, file, options);
}

nlohmann::ordered_json import_trackcpp_file(const std::string& path, const TrackcppImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(InputLocation{path}, "cannot open the file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return trackcpp_to_fusetrack(text.str(), path, options);
}

}  // namespace ft
