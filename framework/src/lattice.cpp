#include "fusetrack/lattice.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fusetrack/xsuite_import.h"

namespace ft {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const char* json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

double ReferenceParticle::energy0() const { return std::sqrt(p0c * p0c + mass0 * mass0); }
double ReferenceParticle::gamma0() const { return energy0() / mass0; }
double ReferenceParticle::beta0() const { return p0c / energy0(); }

ft_reference ReferenceParticle::to_abi(double circumference) const {
  ft_reference r{};
  r.mass0 = mass0;
  r.q0 = q0;
  r.p0c = p0c;
  r.beta0 = beta0();
  r.gamma0 = gamma0();
  r.energy0 = energy0();
  r.circumference = circumference;
  return r;
}

namespace {

std::string list_fields(const ElementType& type) {
  std::string s;
  for (const auto& f : type.fields)
    if (!f.derived) s += (s.empty() ? "" : ", ") + f.name;
  return s.empty() ? "(none)" : s;
}

/// Reads one scalar of a field from JSON into `out`, with the checks every field gets.
void read_scalar(const json& v, const FieldInfo& f, const InputLocation& where, unsigned char* out) {
  if (!v.is_number())
    throw InputError(where, fmt::format("expected {} number, got {}", f.type_name(), json_type_name(v)));
  if (f.type == FT_FIELD_INT32) {
    if (!v.is_number_integer())
      throw InputError(where, fmt::format("expected an integer, got {}", v.dump()));
    const long long i = v.get<long long>();
    if (i < INT32_MIN || i > INT32_MAX) throw InputError(where, fmt::format("integer {} is out of range", i));
    const int32_t x = static_cast<int32_t>(i);
    std::memcpy(out, &x, 4);
    return;
  }
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw InputError(where, fmt::format("value {} is not a finite number", v.dump()));
  if (f.name == "length" && x < 0.0)
    throw InputError(where, fmt::format("length must not be negative, got {} m", x));
  std::memcpy(out, &x, 8);
}

}  // namespace

uint32_t Lattice::define(const std::string& name, const ElementType& type, const json& fields,
                         const InputLocation& where_in) {
  InputLocation where = where_in;
  where.element_name = name;
  where.element_type = type.name;
  if (find_definition(name) >= 0) throw InputError(where, "element name is defined twice");
  if (!fields.is_object())
    throw InputError(where, fmt::format("element definition must be an object, got {}", json_type_name(fields)));

  std::vector<unsigned char> bytes = type.default_params();
  std::set<std::string> given;
  for (const auto& [key, value] : fields.items()) {
    if (key == "type") continue;
    InputLocation at = where;
    at.field = key;
    const FieldInfo* f = type.find_field(key);
    if (!f) throw InputError(at, fmt::format("unknown field for {}; its fields are: {}", type.name, list_fields(type)));
    if (f->derived) throw InputError(at, "this field is computed by the element and cannot be given");
    if (f->host_only()) {
      // Read by the collective element's create() from the definition's JSON text.
    } else if (f->count == 1) {
      read_scalar(value, *f, at, bytes.data() + f->offset);
    } else {
      if (!value.is_array())
        throw InputError(at, fmt::format("expected an array of up to {} numbers, got {}", f->count, json_type_name(value)));
      if (value.size() > f->count)
        throw InputError(at, fmt::format("array has {} entries, at most {} are supported", value.size(), f->count));
      for (size_t k = 0; k < value.size(); ++k) {
        InputLocation ak = at;
        ak.field = fmt::format("{}[{}]", key, k);
        read_scalar(value[k], *f, ak, bytes.data() + f->offset + k * f->element_size());
      }
    }
    given.insert(key);
  }
  for (const auto& f : type.fields) {
    if (f.required && !given.count(f.name)) {
      InputLocation at = where;
      at.field = f.name;
      throw InputError(at, fmt::format("required field is missing ({} [{}]: {})", f.type_name(), f.unit, f.doc));
    }
  }

  ElementDefinition def;
  def.name = name;
  def.type = &type;
  def.param_offset = static_cast<uint32_t>(m_params.size() * sizeof(uint64_t));
  if (type.is_collective()) def.json = fields.dump();
  m_params.resize(m_params.size() + (bytes.size() + 7) / 8, 0);
  std::memcpy(reinterpret_cast<unsigned char*>(m_params.data()) + def.param_offset, bytes.data(), bytes.size());
  m_definitions.push_back(def);
  m_definition_index.emplace(name, static_cast<uint32_t>(m_definitions.size() - 1));
  return static_cast<uint32_t>(m_definitions.size() - 1);
}

void Lattice::append(uint32_t definition) {
  if (definition >= m_definitions.size()) throw Error(fmt::format("no element definition #{}", definition));
  m_sequence.push_back(SequenceEntry{definition, 0.0});
}

void Lattice::append(const std::string& definition_name) {
  const int d = find_definition(definition_name);
  if (d < 0) throw Error(fmt::format("no element named '{}' is defined", definition_name));
  append(static_cast<uint32_t>(d));
}

int Lattice::find_definition(const std::string& name) const {
  auto it = m_definition_index.find(name);
  return it == m_definition_index.end() ? -1 : static_cast<int>(it->second);
}

void Lattice::set_field(uint32_t definition, const std::string& field, double value, unsigned index) {
  const ElementDefinition& def = m_definitions.at(definition);
  const FieldInfo* f = def.type->find_field(field);
  if (!f) throw Error(fmt::format("element type {} has no field '{}'", def.type->name, field));
  if (f->host_only()) throw Error(fmt::format("field '{}' of {} is host-only JSON, not a number", field, def.type->name));
  if (index >= f->count) throw Error(fmt::format("field '{}' has {} entries", field, f->count));
  unsigned char* at = mutable_params(definition) + f->offset + index * f->element_size();
  if (f->type == FT_FIELD_INT32) {
    const int32_t i = static_cast<int32_t>(value);
    std::memcpy(at, &i, 4);
  } else {
    std::memcpy(at, &value, 8);
  }
}

double Lattice::field(uint32_t definition, const std::string& field, unsigned index) const {
  const ElementDefinition& def = m_definitions.at(definition);
  const FieldInfo* f = def.type->find_field(field);
  if (!f) throw Error(fmt::format("element type {} has no field '{}'", def.type->name, field));
  if (f->host_only()) throw Error(fmt::format("field '{}' of {} is host-only JSON, not a number", field, def.type->name));
  if (index >= f->count) throw Error(fmt::format("field '{}' has {} entries", field, f->count));
  const unsigned char* at = params(definition) + f->offset + index * f->element_size();
  if (f->type == FT_FIELD_INT32) {
    int32_t i;
    std::memcpy(&i, at, 4);
    return i;
  }
  double d;
  std::memcpy(&d, at, 8);
  return d;
}

void Lattice::prepare() {
  double s = 0.0;
  for (auto& entry : m_sequence) {
    entry.s = s;
    const ElementDefinition& def = m_definitions[entry.definition];
    if (def.type->thick) s += field(entry.definition, "length");
  }
  m_circumference = s;
  const ft_reference ref = m_reference.to_abi(m_circumference);
  for (uint32_t d = 0; d < m_definitions.size(); ++d) {
    const ElementType& type = *m_definitions[d].type;
    if (!type.prepare) continue;
    ft_error err{};
    if (type.prepare(mutable_params(d), &ref, &err) != 0) {
      InputLocation where;
      where.file = m_source_file;
      where.element_name = m_definitions[d].name;
      where.element_type = type.name;
      throw InputError(where, err.message);
    }
  }
  // Collective elements: build each host model once, so that bad input (tables, sources, cuts)
  // is reported when the lattice loads, not when tracking starts.
  const std::string base = base_directory();
  for (uint32_t d = 0; d < m_definitions.size(); ++d) {
    const ElementType& type = *m_definitions[d].type;
    if (!type.is_collective()) continue;
    ft_collective_model model{};
    ft_error err{};
    const int rc = type.collective->create(params(d), m_definitions[d].json.c_str(), base.c_str(), &ref, &model, &err);
    if (rc == 0 && model.destroy) model.destroy(model.state);
    if (rc != 0) {
      InputLocation where;
      where.file = m_source_file;
      where.element_name = m_definitions[d].name;
      where.element_type = type.name;
      throw InputError(where, err.message);
    }
  }
}

bool Lattice::has_collective() const {
  for (const auto& entry : m_sequence)
    if (m_definitions[entry.definition].type->is_collective()) return true;
  return false;
}

std::string Lattice::base_directory() const {
  if (m_source_file.empty()) return ".";
  const fs::path dir = fs::path(m_source_file).parent_path();
  return dir.empty() ? "." : dir.string();
}

std::vector<const ElementType*> Lattice::types_used() const {
  std::vector<const ElementType*> out;
  for (const auto& entry : m_sequence) {
    const ElementType* t = m_definitions[entry.definition].type;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

json parse_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(InputLocation{path}, "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  try {
    return json::parse(text);
  } catch (const json::out_of_range& e) {
    // A number literal that does not fit a double (e.g. 1e999): not finite. Locate it to name
    // the field and the element that hold it.
    const std::string msg = e.what();
    const size_t q1 = msg.find('\''), q2 = msg.rfind('\'');
    const std::string token = (q1 != std::string::npos && q2 > q1) ? msg.substr(q1 + 1, q2 - q1 - 1) : "";
    InputLocation where{path};
    const size_t at = token.empty() ? std::string::npos : text.find(token);
    if (at == std::string::npos) throw InputError(where, std::string("invalid number: ") + msg);
    auto key_before = [&](size_t pos) {
      const size_t colon = text.rfind(':', pos);
      const size_t close = colon == std::string::npos ? colon : text.rfind('"', colon);
      const size_t open = close == std::string::npos || close == 0 ? std::string::npos : text.rfind('"', close - 1);
      return open == std::string::npos ? std::string() : text.substr(open + 1, close - open - 1);
    };
    where.field = key_before(at);
    // The enclosing object's key is the element name (for definitions in "elements").
    int depth = 0;
    for (size_t k = at; k-- > 0;) {
      if (text[k] == '}' || text[k] == ']') ++depth;
      if (text[k] == '{' || text[k] == '[') {
        if (depth == 0) {
          where.element_name = key_before(k);
          break;
        }
        --depth;
      }
    }
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
    throw InputError(where, fmt::format("value {} at line {} is not a finite number", token, line));
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    size_t line = 1, column = 1;
    const size_t end = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    if (auto pos = what.find("syntax error"); pos != std::string::npos) what = what.substr(pos);
    throw InputError(InputLocation{path}, fmt::format("invalid JSON at line {}, column {}: {}", line, column, what));
  }
}

namespace {

ReferenceParticle read_reference(const json& r, const std::string& file) {
  InputLocation where{file};
  where.field = "reference";
  if (!r.is_object()) throw InputError(where, "expected an object with mass0 [eV], q0 and p0c [eV]");
  ReferenceParticle ref;
  auto get = [&](const char* key, double& out, bool positive) {
    InputLocation at{file};
    at.field = std::string("reference.") + key;
    if (!r.contains(key)) throw InputError(at, "required field is missing");
    const json& v = r.at(key);
    if (!v.is_number()) throw InputError(at, fmt::format("expected a number, got {}", json_type_name(v)));
    out = v.get<double>();
    if (!std::isfinite(out)) throw InputError(at, "value is not a finite number");
    if (positive && !(out > 0)) throw InputError(at, fmt::format("must be positive, got {}", out));
  };
  get("mass0", ref.mass0, true);
  get("q0", ref.q0, false);
  get("p0c", ref.p0c, true);
  for (const auto& [key, v] : r.items()) {
    (void)v;
    if (key != "mass0" && key != "q0" && key != "p0c") {
      InputLocation at{file};
      at.field = "reference." + key;
      throw InputError(at, "unknown field; the reference particle has mass0 [eV], q0 [e] and p0c [eV]");
    }
  }
  return ref;
}

GlobalLimits read_limits(const json& doc, const std::string& file) {
  GlobalLimits lim{1.0, 1.0, {0, 0, 0, 0, 0, 0}};
  if (!doc.contains("global_aperture")) return lim;
  const json& g = doc.at("global_aperture");
  InputLocation where{file};
  where.field = "global_aperture";
  if (!g.is_object()) throw InputError(where, "expected an object {\"x\": metres, \"y\": metres}");
  for (const auto& [key, v] : g.items()) {
    InputLocation at{file};
    at.field = "global_aperture." + key;
    if (key != "x" && key != "y") throw InputError(at, "unknown field; expected x and y [m]");
    if (!v.is_number()) throw InputError(at, fmt::format("expected a number, got {}", json_type_name(v)));
    const double x = v.get<double>();
    if (!(x > 0)) throw InputError(at, fmt::format("must be positive, got {}", v.dump()));
    (key == "x" ? lim.x : lim.y) = x;
  }
  return lim;
}

/// Expands the sequence: names of elements or of lines, or {"line": name, "repeat": n}.
void expand_sequence(const json& items, const json& lines, const std::string& file, Lattice& lattice,
                     std::vector<std::string>& stack, const std::string& context) {
  for (size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    InputLocation at{file};
    at.field = fmt::format("{}[{}]", context, i);
    std::string name;
    long long repeat = 1;
    if (item.is_string()) {
      name = item.get<std::string>();
    } else if (item.is_object() && item.contains("line")) {
      if (!item.at("line").is_string()) throw InputError(at, "\"line\" must be a string");
      name = item.at("line").get<std::string>();
      if (item.contains("repeat")) {
        if (!item.at("repeat").is_number_integer() || item.at("repeat").get<long long>() < 0)
          throw InputError(at, "\"repeat\" must be a non-negative integer");
        repeat = item.at("repeat").get<long long>();
      }
    } else {
      throw InputError(at, fmt::format("expected an element or line name, or {{\"line\": name, \"repeat\": n}}, got {}",
                                       json_type_name(item)));
    }
    const int def = lattice.find_definition(name);
    const bool is_line = lines.is_object() && lines.contains(name);
    if (def >= 0 && is_line) throw InputError(at, fmt::format("'{}' names both an element and a line", name));
    if (def >= 0) {
      for (long long r = 0; r < repeat; ++r) lattice.append(static_cast<uint32_t>(def));
    } else if (is_line) {
      if (std::find(stack.begin(), stack.end(), name) != stack.end())
        throw InputError(at, fmt::format("line '{}' contains itself", name));
      const json& body = lines.at(name);
      if (!body.is_array()) throw InputError(at, fmt::format("line '{}' must be an array of names", name));
      stack.push_back(name);
      for (long long r = 0; r < repeat; ++r) expand_sequence(body, lines, file, lattice, stack, "lines." + name);
      stack.pop_back();
    } else {
      throw InputError(at, fmt::format("'{}' is neither a defined element nor a line", name));
    }
  }
}

}  // namespace

Lattice lattice_from_json(const json& doc, const std::string& file, ElementRegistry& registry) {
  InputLocation top{file};
  if (!doc.is_object()) throw InputError(top, "a lattice file must hold a JSON object");
  static const std::set<std::string> known = {"fusetrack_lattice", "description", "reference", "plugins",
                                              "global_aperture",   "elements",    "lines",     "sequence"};
  for (const auto& [key, v] : doc.items()) {
    (void)v;
    if (!known.count(key)) {
      InputLocation at{file};
      at.field = key;
      throw InputError(at, "unknown top-level field; expected reference, elements, sequence and optionally "
                           "lines, plugins, global_aperture, description");
    }
  }
  if (!doc.contains("reference")) {
    InputLocation at{file};
    at.field = "reference";
    throw InputError(at, "required field is missing (the reference particle: mass0 [eV], q0, p0c [eV])");
  }
  Lattice lattice(read_reference(doc.at("reference"), file));
  lattice.set_source_file(file);
  lattice.set_limits(read_limits(doc, file));

  if (doc.contains("plugins")) {
    const json& plugins = doc.at("plugins");
    InputLocation at{file};
    at.field = "plugins";
    if (!plugins.is_array()) throw InputError(at, "expected an array of plugin file paths");
    const fs::path base = fs::path(file).parent_path();
    for (size_t i = 0; i < plugins.size(); ++i) {
      at.field = fmt::format("plugins[{}]", i);
      if (!plugins[i].is_string()) throw InputError(at, "expected a file path");
      fs::path p = plugins[i].get<std::string>();
      if (p.is_relative()) p = base / p;
      try {
        registry.load_plugin(p.string());
      } catch (const PluginError& e) {
        throw InputError(at, e.what());
      }
    }
  }

  for (const char* key : {"elements", "sequence"}) {
    if (!doc.contains(key)) {
      InputLocation at{file};
      at.field = key;
      throw InputError(at, "required field is missing");
    }
  }
  const json& elements = doc.at("elements");
  if (!elements.is_object()) {
    InputLocation at{file};
    at.field = "elements";
    throw InputError(at, "expected an object mapping element names to {\"type\": ..., fields...}");
  }
  long index = 0;
  for (const auto& [name, def] : elements.items()) {
    InputLocation where{file};
    where.element_index = index;
    where.element_name = name;
    if (!def.is_object() || !def.contains("type") || !def.at("type").is_string()) {
      where.field = "type";
      throw InputError(where, "each element needs a \"type\" string");
    }
    const ElementType& type = registry.get(def.at("type").get<std::string>(), where);
    lattice.define(name, type, def, where);
    ++index;
  }
  const json& sequence = doc.at("sequence");
  const json lines = doc.contains("lines") ? doc.at("lines") : json::object();
  if (!lines.is_object()) {
    InputLocation at{file};
    at.field = "lines";
    throw InputError(at, "expected an object mapping line names to arrays of names");
  }
  if (!sequence.is_array()) {
    InputLocation at{file};
    at.field = "sequence";
    throw InputError(at, fmt::format("expected an array of element or line names, got {}", json_type_name(sequence)));
  }
  std::vector<std::string> stack;
  expand_sequence(sequence, lines, file, lattice, stack, "sequence");
  if (lattice.sequence().empty()) {
    InputLocation at{file};
    at.field = "sequence";
    throw InputError(at, "the sequence is empty: a lattice needs at least one element");
  }
  lattice.prepare();
  return lattice;
}

Lattice load_lattice(const std::string& path, ElementRegistry& registry) {
  const json doc = parse_json_file(path);
  if (is_xsuite_line(doc)) return lattice_from_json(xsuite_to_fusetrack(doc, path, XsuiteImportOptions{}), path, registry);
  return lattice_from_json(doc, path, registry);
}

json lattice_to_json(const Lattice& lattice) {
  json doc;
  doc["fusetrack_lattice"] = 1;
  const auto& r = lattice.reference();
  doc["reference"] = {{"mass0", r.mass0}, {"q0", r.q0}, {"p0c", r.p0c}};
  doc["global_aperture"] = {{"x", lattice.limits().x}, {"y", lattice.limits().y}};
  std::set<std::string> plugin_files;
  json elements = json::object();
  for (uint32_t d = 0; d < lattice.definitions().size(); ++d) {
    const auto& def = lattice.definitions()[d];
    json e;
    e["type"] = def.type->name;
    const json given = def.json.empty() ? json::object() : json::parse(def.json);
    for (const auto& f : def.type->fields) {
      if (f.derived) continue;
      if (f.host_only()) {
        if (given.contains(f.name)) e[f.name] = given.at(f.name);
      } else if (f.count == 1) {
        e[f.name] = lattice.field(d, f.name);
      } else {
        json a = json::array();
        for (unsigned k = 0; k < f.count; ++k) a.push_back(lattice.field(d, f.name, k));
        e[f.name] = a;
      }
    }
    elements[def.name] = e;
    if (def.type->plugin->name() != "builtin") plugin_files.insert(def.type->plugin->file());
  }
  if (!plugin_files.empty()) doc["plugins"] = plugin_files;
  doc["elements"] = elements;
  json seq = json::array();
  for (const auto& entry : lattice.sequence()) seq.push_back(lattice.definitions()[entry.definition].name);
  doc["sequence"] = seq;
  return doc;
}

}  // namespace ft
