// Lattice variants (fusetrack/variants.h): variants files and lattice files that share a sequence.
#include "fusetrack/variants.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "fusetrack/error.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

/// Where an edit is, for errors: the file with the variant, the element and the field.
InputLocation edit_location(const std::string& file, const std::string& variant, const Lattice* lattice, int definition,
                            const std::string& field) {
  InputLocation at(fmt::format("{} (variant '{}')", file, variant));
  if (lattice && definition >= 0) {
    at.element_name = lattice->definitions()[static_cast<size_t>(definition)].name;
    at.element_type = lattice->definitions()[static_cast<size_t>(definition)].type->name;
  }
  at.field = field;
  return at;
}

double number_at(const json& v, const InputLocation& at, const std::string& what) {
  if (!v.is_number()) throw InputError(at, fmt::format("{} must be a number, not {}", what, json_type_name(v)));
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw InputError(at, fmt::format("{} is not finite", what));
  return x;
}

/// One field of one definition: `value` is set, or added to the current value.
void apply_field(Lattice& lattice, uint32_t definition, const std::string& field, const json& value, bool add,
                 const InputLocation& at) {
  const int tk = transform_field_index(field);
  if (tk >= 0) {
    const ElementTransformInput* current = lattice.transform(definition);
    ElementTransformInput t = current ? *current : ElementTransformInput{};
    const double v = number_at(value, at, "a transformation value");
    transform_field(t, tk) = add ? transform_field(t, tk) + v : v;
    lattice.set_transform(definition, t);
    return;
  }
  const ElementType& type = *lattice.definitions()[definition].type;
  const FieldInfo* f = type.find_field(field);
  if (!f) {
    std::string names;
    for (const FieldInfo& g : type.fields)
      if (!g.derived && !g.host_only()) names += (names.empty() ? "" : ", ") + g.name;
    for (const char* t : kTransformFieldNames) names += std::string(", ") + t;
    throw InputError(at, fmt::format("{} has no field '{}' (fields: {})", type.name, field, names));
  }
  if (f->derived) throw InputError(at, "is computed from the other fields (derived) and cannot be given");
  if (f->host_only()) throw InputError(at, "is a host-side JSON field; variants change numeric fields only");
  std::vector<json> entries;
  if (value.is_array()) {
    if (f->count == 1) throw InputError(at, "is a single number, not a list");
    if (value.size() > f->count)
      throw InputError(at, fmt::format("has {} entries, the list gives {}", f->count, value.size()));
    entries.assign(value.begin(), value.end());
  } else {
    if (f->count > 1) throw InputError(at, fmt::format("is a list of {} entries: give a list", f->count));
    entries.push_back(value);
  }
  for (size_t k = 0; k < entries.size(); ++k) {
    const std::string what = f->count > 1 ? fmt::format("entry {}", k) : std::string("the value");
    double v = number_at(entries[k], at, what);
    if (f->type == FT_FIELD_INT32 && (add || v != std::floor(v)))
      throw InputError(at, fmt::format("is an integer field: {} must be an integer set, not {}", what,
                                       add ? "added" : fmt::format("{}", v)));
    if (add) v += lattice.field(definition, field, static_cast<unsigned>(k));
    lattice.set_field(definition, field, v, static_cast<unsigned>(k));
  }
}

/// The definitions an entry names: "name" exactly, or "match" as a whole-name regular expression.
std::vector<uint32_t> entry_definitions(const Lattice& lattice, const json& entry, const InputLocation& at) {
  if (!entry.is_object())
    throw InputError(at, fmt::format("an element entry must be an object, not {}", json_type_name(entry)));
  const bool by_name = entry.contains("name"), by_match = entry.contains("match");
  if (by_name == by_match) throw InputError(at, "an element entry needs exactly one of \"name\" and \"match\"");
  const json& key = entry.at(by_name ? "name" : "match");
  if (!key.is_string()) throw InputError(at, fmt::format("\"{}\" must be a string", by_name ? "name" : "match"));
  const std::string text = key.get<std::string>();
  std::vector<uint32_t> out;
  if (by_name) {
    const int d = lattice.find_definition(text);
    if (d < 0) {
      InputLocation where = at;
      where.element_name = text;
      throw InputError(where, "no element of that name in the lattice");
    }
    out.push_back(static_cast<uint32_t>(d));
    return out;
  }
  std::regex pattern;
  try {
    pattern = std::regex(text, std::regex::ECMAScript);
  } catch (const std::regex_error& ex) {
    throw InputError(at, fmt::format("\"match\": '{}' is not a valid regular expression ({})", text, ex.what()));
  }
  for (uint32_t d = 0; d < lattice.definitions().size(); ++d)
    if (std::regex_match(lattice.definitions()[d].name, pattern)) out.push_back(d);
  if (out.empty()) throw InputError(at, fmt::format("\"match\": '{}' matches no element of the lattice", text));
  return out;
}

/// Applies one variant's list of element entries to `lattice`.
void apply_entries(Lattice& lattice, const json& entries, const std::string& file, const std::string& variant) {
  const InputLocation at = edit_location(file, variant, nullptr, -1, "elements");
  if (!entries.is_array())
    throw InputError(at, fmt::format("\"elements\" must be a list, not {}", json_type_name(entries)));
  for (const json& entry : entries) {
    const std::vector<uint32_t> defs = entry_definitions(lattice, entry, at);
    for (const auto& [key, value] : entry.items()) {
      if (key == "name" || key == "match" || key == "comment") continue;
      if (key != "set" && key != "add")
        throw InputError(at,
                         fmt::format("unknown key \"{}\" in an element entry (expected name or match, set, add)", key));
      if (!value.is_object()) throw InputError(at, fmt::format("\"{}\" must be an object of field values", key));
      for (uint32_t d : defs)
        for (const auto& [field, v] : value.items())
          apply_field(lattice, d, field, v, key == "add",
                      edit_location(file, variant, &lattice, static_cast<int>(d), field));
    }
  }
}

void prepare_variant(Lattice& lattice, const std::string& file, const std::string& variant) {
  try {
    lattice.prepare();
  } catch (const InputError& ex) {
    InputLocation at = ex.where();
    at.file = fmt::format("{} (variant '{}')", file, variant);
    throw InputError(at, ex.problem());
  }
}

/// "NAME[k]": the k-th (from 1, as MAD-X counts occurrences) instance of definition NAME, when no
/// definition has that name itself. Returns the definition and the sequence entry, or false.
bool instance_reference(const Lattice& lattice, const std::string& text, uint32_t& definition, size_t& entry) {
  if (lattice.find_definition(text) >= 0 || text.size() < 4 || text.back() != ']') return false;
  const size_t open = text.rfind('[');
  if (open == std::string::npos || open == 0 || open + 2 > text.size() - 1) return false;
  const std::string digits = text.substr(open + 1, text.size() - open - 2);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return false;
  const int d = lattice.find_definition(text.substr(0, open));
  const long k = std::stol(digits);
  if (d < 0 || k < 1) return false;
  long seen = 0;
  for (size_t e = 0; e < lattice.sequence().size(); ++e)
    if (lattice.sequence()[e].definition == static_cast<uint32_t>(d) && ++seen == k) {
      definition = static_cast<uint32_t>(d);
      entry = e;
      return true;
    }
  return false;
}

/// The instance names ("NAME[k]") a variants document refers to (names that end in ']': the
/// others cannot be instances, and with_own_instances would ignore them).
void collect_instance_names(const json& doc, std::set<std::string>& names) {
  auto from_entry = [&](const json& entry) {
    if (!entry.is_object()) return;
    const auto name = entry.find("name");
    if (name == entry.end() || !name->is_string()) return;
    const std::string& text = name->get_ref<const std::string&>();
    if (!text.empty() && text.back() == ']') names.insert(text);
  };
  if (doc.contains("variants") && doc.at("variants").is_array())
    for (const json& v : doc.at("variants"))
      if (v.is_object() && v.contains("elements") && v.at("elements").is_array())
        for (const json& entry : v.at("elements")) from_entry(entry);
  if (doc.contains("scans") && doc.at("scans").is_array())
    for (const json& scan : doc.at("scans")) from_entry(scan);
}

/// A knob of "scans": the elements, the field (entry), its values and how they apply.
struct Scan {
  json entry;  // {"name"/"match": ...}
  std::string field;
  int index = -1;  // array entry, -1 for a scalar
  bool add = false;
  std::vector<double> values;
};

Scan parse_scan(const json& s, const std::string& file, size_t k) {
  InputLocation at(file);
  at.field = fmt::format("scans[{}]", k);
  if (!s.is_object()) throw InputError(at, "a scan must be an object");
  Scan scan;
  for (const char* key : {"name", "match"})
    if (s.contains(key)) scan.entry[key] = s.at(key);
  if (!s.contains("field") || !s.at("field").is_string()) throw InputError(at, "needs \"field\" (a string)");
  scan.field = s.at("field").get<std::string>();
  if (s.contains("index")) {
    if (!s.at("index").is_number_integer() || s.at("index").get<int>() < 0)
      throw InputError(at, "\"index\" must be a non-negative integer");
    scan.index = s.at("index").get<int>();
  }
  const std::string mode = s.value("mode", std::string("set"));
  if (mode != "set" && mode != "add") throw InputError(at, "\"mode\" must be \"set\" or \"add\"");
  scan.add = mode == "add";
  if (s.contains("values")) {
    if (!s.at("values").is_array() || s.at("values").empty())
      throw InputError(at, "\"values\" must be a non-empty list");
    for (const json& v : s.at("values")) scan.values.push_back(number_at(v, at, "each of \"values\""));
  } else {
    if (!s.contains("from") || !s.contains("to") || !s.contains("steps"))
      throw InputError(at, "needs \"values\", or \"from\", \"to\" and \"steps\"");
    const double from = number_at(s.at("from"), at, "\"from\""), to = number_at(s.at("to"), at, "\"to\"");
    if (!s.at("steps").is_number_integer() || s.at("steps").get<int>() < 1)
      throw InputError(at, "\"steps\" must be an integer >= 1");
    const int steps = s.at("steps").get<int>();
    for (int i = 0; i < steps; ++i)
      scan.values.push_back(steps == 1 ? from
                                       : from + (to - from) * static_cast<double>(i) / static_cast<double>(steps - 1));
  }
  for (const auto& [key, v] : s.items()) {
    (void)v;
    if (key != "name" && key != "match" && key != "field" && key != "index" && key != "mode" && key != "values" &&
        key != "from" && key != "to" && key != "steps" && key != "comment")
      throw InputError(at, fmt::format("unknown key \"{}\"", key));
  }
  return scan;
}

/// The JSON value a scan step applies (a list with the value at `index` for array fields).
json scan_value(const Scan& scan, double v) {
  if (scan.index < 0) return v;
  json list = json::array();
  for (int k = 0; k < scan.index; ++k) list.push_back(0.0);
  list.push_back(v);
  return list;
}

/// The index just past the string that starts with the quote at `i` (npos when unterminated).
size_t past_string(const std::string& t, size_t i) {
  for (size_t j = i + 1; j < t.size(); ++j) {
    if (t[j] == '\\')
      ++j;
    else if (t[j] == '"')
      return j + 1;
  }
  return std::string::npos;
}

size_t skip_space(const std::string& t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

/// The list of the top-level key "variants" of the JSON text `t`: the positions of its brackets
/// and the spans of its entries (between the commas directly inside it). False when there is no
/// such list, or it has fewer than two entries, or the text ends inside it.
bool variants_list_spans(const std::string& t, size_t& open, size_t& close,
                         std::vector<std::pair<size_t, size_t>>& spans) {
  int depth = 0;
  size_t i = 0;
  for (open = std::string::npos; i < t.size() && open == std::string::npos;) {
    const char c = t[i];
    if (c == '"') {
      const size_t end = past_string(t, i);
      if (end == std::string::npos) return false;
      if (depth == 1 && end - i == 10 && t.compare(i, 10, "\"variants\"") == 0) {
        const size_t colon = skip_space(t, end);
        if (colon < t.size() && t[colon] == ':') {
          const size_t bracket = skip_space(t, colon + 1);
          if (bracket < t.size() && t[bracket] == '[') open = bracket;
        }
      }
      i = end;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ++i;
  }
  if (open == std::string::npos) return false;
  depth = 0;
  size_t begin = open + 1;
  for (i = open + 1; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') {
      const size_t end = past_string(t, i);
      if (end == std::string::npos) return false;
      i = end - 1;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    } else if (c == ']' || c == '}') {
      close = i;
      spans.emplace_back(begin, i);
      return c == ']' && spans.size() >= 2;
    } else if (c == ',' && depth == 0) {
      spans.emplace_back(begin, i);
      begin = i + 1;
    }
  }
  return false;
}

/// A variants file (JSON) parsed as parse_json_file parses it, but with the entries of its
/// "variants" list parsed on several threads (a file of 60 error seeds of a long ring is 120 MB).
/// Any failure of the pieces falls back to parsing the whole text, whose messages name the line.
json parse_variants_file(const std::string& path) {
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return parse_json_file(path);  // its message
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  size_t open = 0, close = 0;
  std::vector<std::pair<size_t, size_t>> spans;
  if (variants_list_spans(text, open, close, spans)) {
    try {
      // The document with an empty list (every other key checked as in the whole file), then the entries.
      json doc = parse_json_text(text.substr(0, open + 1) + text.substr(close), path);
      std::vector<json> entries(spans.size());
      std::vector<char> failed(spans.size(), 0);
#pragma omp parallel for schedule(dynamic, 1)
      for (size_t k = 0; k < spans.size(); ++k) {
        try {
          entries[k] = parse_json_text(text.substr(spans[k].first, spans[k].second - spans[k].first), path);
        } catch (...) {
          failed[k] = 1;
        }
      }
      if (std::find(failed.begin(), failed.end(), 1) == failed.end() && doc.is_object() && doc.contains("variants") &&
          doc.at("variants").is_array() && doc.at("variants").empty()) {
        json& list = doc.at("variants");
        for (json& entry : entries) list.push_back(std::move(entry));
        return doc;
      }
    } catch (const std::exception&) {  // the whole text's parse below names the line and column
    }
  }
  return parse_json_text(text, path);
}

/// Frees a parsed variants document, the entries of its "variants" list on several threads (the
/// tree of a 120 MB file takes a sizeable part of its parse time to free).
void release_document(json& doc) {
  if (doc.is_object() && doc.contains("variants") && doc.at("variants").is_array()) {
    json& list = doc.at("variants");
    const size_t n = list.size();
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < n; ++i) list[i] = json();
  }
  doc = json();
}

}  // namespace

Lattice with_own_instances(const Lattice& lattice, const std::set<std::string>& names) {
  // Every name resolved against the lattice as given (before any instance has its own definition).
  std::vector<std::pair<size_t, std::string>> instances;  // (sequence entry, name)
  for (const std::string& name : names) {
    uint32_t definition = 0;
    size_t entry = 0;
    if (instance_reference(lattice, name, definition, entry)) instances.emplace_back(entry, name);
  }
  if (instances.empty()) return lattice;
  std::sort(instances.begin(), instances.end());
  Lattice out = lattice;
  for (const auto& [entry, name] : instances)
    out.set_sequence_definition(entry, out.duplicate_definition(lattice.sequence()[entry].definition, name));
  out.prepare();
  return out;
}

std::vector<const Lattice*> LatticeVariants::pointers() const {
  std::vector<const Lattice*> out;
  for (const Lattice& l : lattices) out.push_back(&l);
  return out;
}

void check_same_sequence(const Lattice& base, const Lattice& other, const std::string& file) {
  InputLocation at(file);
  if (base.sequence().size() != other.sequence().size())
    throw InputError(at, fmt::format("a variant must have the base lattice's element sequence: it has {} elements, "
                                     "the base ({}) {}",
                                     other.sequence().size(), base.source_file(), base.sequence().size()));
  for (size_t e = 0; e < base.sequence().size(); ++e) {
    const ElementDefinition& a = base.element(e);
    const ElementDefinition& b = other.element(e);
    if (a.name != b.name || a.type != b.type) {
      at.element_index = static_cast<long>(e);
      at.element_name = b.name;
      at.element_type = b.type->name;
      throw InputError(at, fmt::format("a variant must have the base lattice's element sequence: element #{} is "
                                       "'{}' ({}) in the base ({})",
                                       e, a.name, a.type->name, base.source_file()));
    }
  }
  if (std::memcmp(&base.reference(), &other.reference(), sizeof(ReferenceParticle)) != 0)
    throw InputError(at,
                     fmt::format("a variant must have the base lattice's reference particle (mass0, q0, p0c as in {})",
                                 base.source_file()));
}

LatticeVariants variants_from_json(const Lattice& base, const json& doc, const std::string& file) {
  InputLocation at(file);
  if (!doc.is_object() || !doc.contains("fusetrack_variants"))
    throw InputError(at, "not a variants file (no \"fusetrack_variants\" key)");
  if (doc.at("fusetrack_variants") != 1)
    throw InputError(at, "unsupported \"fusetrack_variants\" version (expected 1)");
  for (const auto& [key, v] : doc.items()) {
    (void)v;
    if (key != "fusetrack_variants" && key != "lattice" && key != "description" && key != "variants" && key != "scans")
      throw InputError(at, fmt::format("unknown key \"{}\" (expected variants, scans, lattice, description)", key));
  }
  LatticeVariants out;
  std::vector<std::pair<std::string, const json*>> listed;
  static const json kNoEntries = json::array();
  if (doc.contains("variants")) {
    const json& vs = doc.at("variants");
    if (!vs.is_array() || vs.empty()) throw InputError(at, "\"variants\" must be a non-empty list");
    for (size_t k = 0; k < vs.size(); ++k) {
      const json& v = vs[k];
      at.field = fmt::format("variants[{}]", k);
      if (!v.is_object()) throw InputError(at, "a variant must be an object {\"name\": ..., \"elements\": [...]}");
      const std::string name = v.contains("name") && v.at("name").is_string() ? v.at("name").get<std::string>()
                                                                              : fmt::format("variant_{}", k);
      for (const auto& p : listed)
        if (p.first == name) throw InputError(at, fmt::format("the name '{}' is given to two variants", name));
      listed.emplace_back(name, v.contains("elements") ? &v.at("elements") : &kNoEntries);
    }
  } else {
    listed.emplace_back("base", &kNoEntries);
  }
  std::vector<Scan> scans;
  if (doc.contains("scans")) {
    if (!doc.at("scans").is_array()) throw InputError(InputLocation(file), "\"scans\" must be a list");
    for (size_t k = 0; k < doc.at("scans").size(); ++k) scans.push_back(parse_scan(doc.at("scans")[k], file, k));
  }
  size_t combinations = 1;
  for (const Scan& s : scans) combinations *= s.values.size();
  if (listed.size() * combinations > 100000)
    throw InputError(InputLocation(file), fmt::format("{} variants: more than 100000", listed.size() * combinations));
  std::set<std::string> instances;
  collect_instance_names(doc, instances);
  const Lattice own = with_own_instances(base, instances);
  // The variants are independent: each is built on a thread of its own (its entries applied to a
  // copy of the base, then each knob combination applied and prepared; the CPU work of reading a
  // study of 60 error seeds of a long ring), and the first failure in the order of the file is
  // thrown, as building them one after the other would.
  const size_t n_listed = listed.size(), total = n_listed * combinations;
  std::vector<Lattice> edited(n_listed);
  std::vector<std::exception_ptr> edit_failure(n_listed), knob_failure(total);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < n_listed; ++i) {
    try {
      edited[i] = own;
      apply_entries(edited[i], *listed[i].second, file, listed[i].first);
    } catch (...) {
      edit_failure[i] = std::current_exception();
    }
  }
  out.names.resize(total);
  out.lattices.resize(total);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < total; ++k) {
    const size_t i = k / combinations, c = k % combinations;
    if (edit_failure[i]) continue;
    try {
      const std::string& name = listed[i].first;
      Lattice knobbed = combinations == 1 ? std::move(edited[i]) : edited[i];
      std::string full = name;
      size_t rest = c;
      for (const Scan& s : scans) {
        const double v = s.values[rest % s.values.size()];
        rest /= s.values.size();
        json entry = s.entry;
        entry[s.add ? "add" : "set"] = json{{s.field, scan_value(s, v)}};
        apply_entries(knobbed, json::array({entry}), file, name);
        full += fmt::format("/{}{}={}", s.field, s.index >= 0 ? fmt::format("[{}]", s.index) : "", v);
      }
      prepare_variant(knobbed, file, full);
      out.names[k] = std::move(full);
      out.lattices[k] = std::move(knobbed);
    } catch (...) {
      knob_failure[k] = std::current_exception();
    }
  }
  for (size_t i = 0; i < n_listed; ++i) {
    if (edit_failure[i]) std::rethrow_exception(edit_failure[i]);
    for (size_t c = 0; c < combinations; ++c)
      if (knob_failure[i * combinations + c]) std::rethrow_exception(knob_failure[i * combinations + c]);
  }
  return out;
}

LatticeVariants load_variants(const Lattice& base, const std::vector<std::string>& paths, ElementRegistry& registry) {
  LatticeVariants out;
  if (paths.empty()) {
    out.names.push_back("base");
    out.lattices.push_back(base);
    return out;
  }
  // Instances named in any variants file get their own definition in every variant (and the
  // lattice files' variants), so that all share one sequence.
  std::vector<json> docs(paths.size());
  std::set<std::string> instances;
  for (size_t k = 0; k < paths.size(); ++k) {
    if (std::filesystem::path(paths[k]).extension() != ".json") continue;
    json doc = parse_variants_file(paths[k]);
    if (doc.is_object() && doc.contains("fusetrack_variants")) {
      collect_instance_names(doc, instances);
      docs[k] = std::move(doc);
    }
  }
  const Lattice own_base = with_own_instances(base, instances);
  for (size_t k = 0; k < paths.size(); ++k) {
    const std::string& path = paths[k];
    // A variants file is JSON with "fusetrack_variants"; anything else is loaded as a lattice.
    const bool is_variants_file = !docs[k].is_null();
    {
      if (is_variants_file) {
        LatticeVariants v = variants_from_json(own_base, docs[k], path);
        release_document(docs[k]);
        for (size_t i = 0; i < v.size(); ++i) {
          out.names.push_back(v.names[i]);
          out.lattices.push_back(std::move(v.lattices[i]));
        }
      }
    }
    if (!is_variants_file) {
      Lattice lattice = with_own_instances(load_lattice(path, registry), instances);
      check_same_sequence(own_base, lattice, path);
      out.names.push_back(std::filesystem::path(path).stem().string());
      out.lattices.push_back(std::move(lattice));
    }
  }
  for (size_t a = 0; a < out.names.size(); ++a)
    for (size_t b = a + 1; b < out.names.size(); ++b)
      if (out.names[a] == out.names[b]) out.names[b] += fmt::format("#{}", b);
  return out;
}

std::string variants_fingerprint(const LatticeVariants& variants) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a over names, parameter bytes and transformations
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (size_t v = 0; v < variants.size(); ++v) {
    mix(variants.names[v].data(), variants.names[v].size());
    const Lattice& l = variants.lattices[v];
    mix(l.param_bytes(), l.param_byte_count());
    for (uint32_t d = 0; d < l.definitions().size(); ++d)
      if (const std::vector<uint64_t>* block = l.transform_block(d)) mix(block->data(), 8 * block->size());
  }
  return fmt::format("{:016x}", h);
}

}  // namespace ft
