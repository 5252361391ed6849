#include "fusetrack/lattice.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "sequence_expander.hpp"

namespace ft {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const char* json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
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

/// Reads one scalar of a field from JSON into `out`, with the checks every field gets. `where`
/// returns the InputLocation (built only for an error).
template <class Where>
void read_scalar(const json& v, const FieldInfo& f, const Where& where, unsigned char* out) {
  if (!v.is_number())
    throw InputError(where(), fmt::format("expected {} number, got {}", f.type_name(), json_type_name(v)));
  if (f.type == FT_FIELD_INT32) {
    if (!v.is_number_integer()) throw InputError(where(), fmt::format("expected an integer, got {}", v.dump()));
    if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(INT32_MAX))
      throw InputError(where(), fmt::format("integer {} is out of range", v.dump()));
    const long long i = v.get<long long>();
    if (i < INT32_MIN || i > INT32_MAX) throw InputError(where(), fmt::format("integer {} is out of range", i));
    const int32_t x = static_cast<int32_t>(i);
    std::memcpy(out, &x, 4);
    return;
  }
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw InputError(where(), fmt::format("value {} is not a finite number", v.dump()));
  if (x < 0.0 && f.name == "length") throw InputError(where(), fmt::format("length must not be negative, got {} m", x));
  std::memcpy(out, &x, 8);
}

}  // namespace

uint32_t Lattice::define(const std::string& name, const ElementType& type, const json& fields,
                         const InputLocation& where_in) {
  // Locations are built only for an error: copying their strings for every definition and field
  // is a noticeable part of loading 10^6 elements.
  auto where = [&](const std::string& field = std::string()) {
    InputLocation w = where_in;
    w.element_name = name;
    w.element_type = type.name;
    w.field = field;
    return w;
  };
  if (find_definition(name) >= 0) throw InputError(where(), "element name is defined twice");
  if (!fields.is_object())
    throw InputError(where(), fmt::format("element definition must be an object, got {}", json_type_name(fields)));

  std::vector<unsigned char> bytes = type.default_params();
  // Fields given, by index into type.fields (a type has few fields).
  std::vector<bool> given(type.fields.size(), false);
  ElementTransformInput transform;  // the generic transformation fields (shift_x, ..., rot_s_rad)
  for (const auto& [key, value] : fields.items()) {
    if (key == "type") continue;
    const FieldInfo* f = type.find_field(key);
    if (!f) {
      const int t = transform_field_index(key);
      if (t < 0)
        throw InputError(where(key), fmt::format("unknown field for {}; its fields are: {} (and the transformation "
                                                 "fields shift_x, shift_y, shift_s, rot_x_rad, rot_y_rad, rot_s_rad, "
                                                 "rot_s_rad_no_frame, rot_shift_anchor)",
                                                 type.name, list_fields(type)));
      if (!value.is_number())
        throw InputError(where(key), fmt::format("expected a number, got {}", json_type_name(value)));
      const double x = value.get<double>();
      if (!std::isfinite(x)) throw InputError(where(key), fmt::format("value {} is not a finite number", value.dump()));
      transform_field(transform, t) = x;
      continue;
    }
    if (f->derived) throw InputError(where(key), "this field is computed by the element and cannot be given");
    if (f->host_only()) {
      // Read by the collective element's create() from the definition's JSON text.
    } else if (f->count == 1) {
      read_scalar(
          value, *f, [&, &field_key = key] { return where(field_key); }, bytes.data() + f->offset);
    } else {
      if (!value.is_array())
        throw InputError(where(key),
                         fmt::format("expected an array of up to {} numbers, got {}", f->count, json_type_name(value)));
      if (value.size() > f->count)
        throw InputError(where(key),
                         fmt::format("array has {} entries, at most {} are supported", value.size(), f->count));
      for (size_t k = 0; k < value.size(); ++k)
        read_scalar(
            value[k], *f, [&, &field_key = key] { return where(fmt::format("{}[{}]", field_key, k)); },
            bytes.data() + f->offset + k * f->element_size());
    }
    given[static_cast<size_t>(f - type.fields.data())] = true;
  }
  for (size_t i = 0; i < type.fields.size(); ++i) {
    const FieldInfo& f = type.fields[i];
    if (f.required && !given[i])
      throw InputError(where(f.name),
                       fmt::format("required field is missing ({} [{}]: {})", f.type_name(), f.unit, f.doc));
  }

  if (m_definitions.size() >= UINT32_MAX - 1) throw InputError(where(), "too many element definitions");
  ElementDefinition def;
  def.name = name;
  def.type = &type;
  def.param_offset = static_cast<uint32_t>(m_params.size() * sizeof(uint64_t));
  if (type.is_collective()) def.json = fields.dump();
  m_params.resize(m_params.size() + (bytes.size() + 7) / 8, 0);
  std::memcpy(reinterpret_cast<unsigned char*>(m_params.data()) + def.param_offset, bytes.data(), bytes.size());
  m_definitions.push_back(std::move(def));
  const uint32_t index = static_cast<uint32_t>(m_definitions.size() - 1);
  index_name(index);
  if (transform.active()) {
    if (type.is_collective())
      throw InputError(where(), "element transformations (shifts, rotations) are not supported on collective elements");
    set_transform(index, transform);
  }
  return index;
}

uint32_t Lattice::duplicate_definition(uint32_t definition, const std::string& new_name) {
  if (find_definition(new_name) >= 0) throw Error(fmt::format("element name '{}' is defined twice", new_name));
  ElementDefinition copy = m_definitions.at(definition);
  copy.name = new_name;
  copy.transform = -1;
  const size_t words = (copy.type->param_size + 7) / 8;
  copy.param_offset = static_cast<uint32_t>(m_params.size() * sizeof(uint64_t));
  const size_t from = m_definitions[definition].param_offset / sizeof(uint64_t);
  m_params.resize(m_params.size() + words, 0);
  std::copy(m_params.begin() + static_cast<long>(from), m_params.begin() + static_cast<long>(from + words),
            m_params.begin() + static_cast<long>(copy.param_offset / sizeof(uint64_t)));
  m_definitions.push_back(std::move(copy));
  const uint32_t index = static_cast<uint32_t>(m_definitions.size() - 1);
  index_name(index);
  if (const ElementTransformInput* t = transform(definition)) set_transform(index, ElementTransformInput(*t));
  return index;
}

void Lattice::set_sequence_definition(size_t e, uint32_t definition) {
  SequenceEntry& entry = m_sequence.at(e);
  if (m_definitions.at(definition).type != m_definitions.at(entry.definition).type)
    throw Error(fmt::format("sequence entry #{} is a {}, '{}' a {}", e, m_definitions[entry.definition].type->name,
                            m_definitions[definition].name, m_definitions[definition].type->name));
  entry.definition = definition;
}

void Lattice::set_transform(uint32_t definition, const ElementTransformInput& t) {
  ElementDefinition& def = m_definitions.at(definition);
  if (!t.active()) {
    if (def.transform >= 0) {  // keep the indices of the others: leave an inactive entry behind
      m_transforms[static_cast<size_t>(def.transform)] = ElementTransformInput{};
      def.transform = -1;
    }
    return;
  }
  if (def.type->is_collective())
    throw Error(fmt::format("element '{}': transformations are not supported on collective elements", def.name));
  if (def.transform < 0) {
    def.transform = static_cast<int32_t>(m_transforms.size());
    m_transforms.push_back(t);
  } else {
    m_transforms[static_cast<size_t>(def.transform)] = t;
  }
}

const ElementTransformInput* Lattice::transform(uint32_t definition) const {
  const int32_t t = m_definitions.at(definition).transform;
  return t < 0 ? nullptr : &m_transforms[static_cast<size_t>(t)];
}

const std::vector<uint64_t>* Lattice::transform_block(uint32_t definition) const {
  const int32_t t = m_definitions[definition].transform;
  if (t < 0 || static_cast<size_t>(t) >= m_transform_blocks.size()) return nullptr;
  return &m_transform_blocks[static_cast<size_t>(t)];
}

bool Lattice::has_transforms() const {
  if (m_transforms.empty()) return false;
  for (const auto& entry : m_sequence)
    if (m_definitions[entry.definition].transform >= 0) return true;
  return false;
}

namespace {
uint64_t name_hash(std::string_view name) { return std::hash<std::string_view>{}(name); }
}  // namespace

bool Lattice::index_name(uint32_t definition) {
  if (2 * (m_definitions.size() + 1) > m_name_slots.size()) {
    // Grow (at most half full) and re-insert: the slots hold the hashes, no name is re-hashed.
    std::vector<uint64_t> old = std::move(m_name_slots);
    m_name_slots.assign(std::max<size_t>(16, 2 * old.size()), 0);
    while (2 * (m_definitions.size() + 1) > m_name_slots.size()) m_name_slots.resize(2 * m_name_slots.size(), 0);
    const size_t mask = m_name_slots.size() - 1;
    for (uint64_t slot : old) {
      if (!slot) continue;
      const uint32_t d = static_cast<uint32_t>(slot) - 1;
      size_t i = name_hash(m_definitions[d].name) & mask;  // low bits (the slot keeps the high ones)
      while (m_name_slots[i]) i = (i + 1) & mask;
      m_name_slots[i] = slot;
    }
  }
  const std::string& name = m_definitions[definition].name;
  const uint64_t h = name_hash(name);
  const uint64_t tag = h >> 32;
  const size_t mask = m_name_slots.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t slot = m_name_slots[i];
    if (!slot) {
      m_name_slots[i] = tag << 32 | (static_cast<uint64_t>(definition) + 1);
      return true;
    }
    if ((slot >> 32) == tag && m_definitions[static_cast<uint32_t>(slot) - 1].name == name) return false;
  }
}

void Lattice::reserve(size_t definitions, size_t sequence_entries) {
  m_definitions.reserve(definitions);
  m_sequence.reserve(sequence_entries);
  if (2 * (definitions + 1) > m_name_slots.size()) {
    size_t n = 16;
    while (2 * (definitions + 1) > n) n *= 2;
    std::vector<uint64_t> slots(n, 0);
    const size_t mask = n - 1;
    for (uint64_t slot : m_name_slots) {
      if (!slot) continue;
      size_t i = name_hash(m_definitions[static_cast<uint32_t>(slot) - 1].name) & mask;
      while (slots[i]) i = (i + 1) & mask;
      slots[i] = slot;
    }
    m_name_slots = std::move(slots);
  }
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
  if (m_name_slots.empty()) return -1;
  const uint64_t h = name_hash(name);
  const uint64_t tag = h >> 32;
  const size_t mask = m_name_slots.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t slot = m_name_slots[i];
    if (!slot) return -1;
    if ((slot >> 32) == tag) {
      const uint32_t d = static_cast<uint32_t>(slot) - 1;
      if (m_definitions[d].name == name) return static_cast<int>(d);
    }
  }
}

void Lattice::set_field(uint32_t definition, const std::string& field, double value, unsigned index) {
  const ElementDefinition& def = m_definitions.at(definition);
  const FieldInfo* f = def.type->find_field(field);
  if (!f) throw Error(fmt::format("element type {} has no field '{}'", def.type->name, field));
  if (f->host_only())
    throw Error(fmt::format("field '{}' of {} is host-only JSON, not a number", field, def.type->name));
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
  if (f->host_only())
    throw Error(fmt::format("field '{}' of {} is host-only JSON, not a number", field, def.type->name));
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
  // Lengths per definition first: a field lookup by name per sequence entry is most of the time
  // of a long sequence.
  std::vector<double> length(m_definitions.size(), 0.0);
  for (uint32_t d = 0; d < m_definitions.size(); ++d)
    if (m_definitions[d].type->thick) length[d] = field(d, "length");
  double s = 0.0;
  for (auto& entry : m_sequence) {
    entry.s = s;
    if (m_definitions[entry.definition].type->thick) s += length[entry.definition];
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
  // Transformations: the entry and exit operations, from the element's length (thick types) and
  // bending angle (a scalar field named `angle` [rad], if the type has one).
  m_transform_blocks.assign(m_transforms.size(), {});
  for (uint32_t d = 0; d < m_definitions.size(); ++d) {
    const int32_t t = m_definitions[d].transform;
    if (t < 0) continue;
    const ElementType& type = *m_definitions[d].type;
    const double len = type.thick ? length[d] : 0.0;
    const FieldInfo* angle_field = type.find_field("angle");
    const double angle =
        angle_field && angle_field->count == 1 && angle_field->type == FT_FIELD_DOUBLE && !angle_field->derived
            ? field(d, "angle")
            : 0.0;
    try {
      m_transform_blocks[static_cast<size_t>(t)] =
          ft::transform_block(m_transforms[static_cast<size_t>(t)], len, angle);
    } catch (const std::exception& ex) {
      InputLocation where;
      where.file = m_source_file;
      where.element_name = m_definitions[d].name;
      where.element_type = type.name;
      for (int k = 0; k < 8 && where.field.empty(); ++k)
        if (transform_field(m_transforms[static_cast<size_t>(t)], k) != 0.0) where.field = kTransformFieldNames[k];
      throw InputError(where, ex.what());
    }
  }
  // Collective elements: build each host model once, so that bad input (tables, sources, cuts)
  // is reported when the lattice loads, not when tracking starts.
  const std::string base = base_directory();
  for (uint32_t d = 0; d < m_definitions.size(); ++d) {
    const ElementType& type = *m_definitions[d].type;
    if (!type.is_collective()) continue;
    ft_error err{};
    int rc = 0;
    if (type.is_grid_collective()) {
      ft_grid_model model{};
      rc = type.collective->create_grid(params(d), m_definitions[d].json.c_str(), base.c_str(), &ref, &model, &err);
    } else if (type.is_moments_collective()) {
      ft_moments_model model{};
      rc = type.collective->create_moments(params(d), m_definitions[d].json.c_str(), base.c_str(), &ref, &model, &err);
      if (rc == 0 && model.destroy) model.destroy(model.state);
    } else {
      ft_collective_model model{};
      rc = type.collective->create(params(d), m_definitions[d].json.c_str(), base.c_str(), &ref, &model, &err);
      if (rc == 0 && model.destroy) model.destroy(model.state);
    }
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
  std::vector<bool> seen(m_definitions.size(), false);  // definitions already looked at
  for (const auto& entry : m_sequence) {
    if (seen[entry.definition]) continue;
    seen[entry.definition] = true;
    const ElementType* t = m_definitions[entry.definition].type;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

ReferenceParticle reference_from_json(const nlohmann::ordered_json& r, const std::string& file,
                                      const std::string& field) {
  InputLocation where{file};
  where.field = field;
  if (!r.is_object()) throw InputError(where, "expected an object with mass0 [eV], q0 and p0c [eV]");
  ReferenceParticle ref;
  auto get = [&](const char* key, double& out, bool positive) {
    InputLocation at{file};
    at.field = field + "." + key;
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
      at.field = field + "." + key;
      throw InputError(at, "unknown field; the reference particle has mass0 [eV], q0 [e] and p0c [eV]");
    }
  }
  return ref;
}

namespace {

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

/// The top-level "radiation" switch: "off" (0, the default), "mean" (1) or "quantum" (2), the value
/// of the field `radiation` of every element type that has it, where the element does not set it
/// (elements/radiation.h).
int read_radiation_switch(const json& doc, const std::string& file) {
  if (!doc.contains("radiation")) return 0;
  const json& r = doc.at("radiation");
  InputLocation at{file};
  at.field = "radiation";
  static const char* const kModes[3] = {"off", "mean", "quantum"};
  if (r.is_string())
    for (int m = 0; m < 3; ++m)
      if (r.get_ref<const std::string&>() == kModes[m]) return m;
  throw InputError(at, fmt::format("expected \"off\", \"mean\" or \"quantum\", got {}", r.dump()));
}

bool has_field(const ElementType& type, const char* name) {
  for (const auto& f : type.fields)
    if (f.name == name) return true;
  return false;
}

}  // namespace

Lattice lattice_from_json(const json& doc, const std::string& file, ElementRegistry& registry) {
  InputLocation top{file};
  if (!doc.is_object()) throw InputError(top, "a lattice file must hold a JSON object");
  static const std::set<std::string> known = {"fusetrack_lattice", "description", "reference", "plugins",
                                              "global_aperture",   "elements",    "lines",     "sequence",
                                              "radiation"};
  for (const auto& [key, v] : doc.items()) {
    (void)v;
    if (!known.count(key)) {
      InputLocation at{file};
      at.field = key;
      throw InputError(at,
                       "unknown top-level field; expected reference, elements, sequence and optionally "
                       "lines, plugins, global_aperture, radiation, description");
    }
  }
  if (!doc.contains("reference")) {
    InputLocation at{file};
    at.field = "reference";
    throw InputError(at, "required field is missing (the reference particle: mass0 [eV], q0, p0c [eV])");
  }
  Lattice lattice(reference_from_json(doc.at("reference"), file));
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
  const int radiation = read_radiation_switch(doc, file);
  lattice.reserve(elements.size(), 0);
  long index = 0;
  const std::string* type_name = nullptr;  // the last type looked up, and what it resolved to
  const ElementType* type = nullptr;
  for (auto it = elements.begin(); it != elements.end(); ++it, ++index) {
    const std::string& name = it.key();
    const json& def = it.value();
    auto where = [&](const char* field = "") {
      InputLocation w{file};
      w.element_index = index;
      w.element_name = name;
      w.field = field;
      return w;
    };
    if (!def.is_object()) throw InputError(where("type"), "each element needs a \"type\" string");
    const auto t = def.find("type");
    if (t == def.end() || !t->is_string()) throw InputError(where("type"), "each element needs a \"type\" string");
    const std::string& tn = t->get_ref<const std::string&>();
    if (!type_name || *type_name != tn) {
      type = &registry.get(tn, where());
      type_name = &tn;
    }
    if (radiation != 0 && !def.contains("radiation") && has_field(*type, "radiation")) {
      json with_radiation = def;
      with_radiation["radiation"] = radiation;
      lattice.define(name, *type, with_radiation, where());
    } else {
      lattice.define(name, *type, def, where());
    }
  }
  const json& sequence = doc.at("sequence");
  const json* lines = doc.contains("lines") ? &doc.at("lines") : nullptr;
  if (lines && !lines->is_object()) {
    InputLocation at{file};
    at.field = "lines";
    throw InputError(at, "expected an object mapping line names to arrays of names");
  }
  if (!sequence.is_array()) {
    InputLocation at{file};
    at.field = "sequence";
    throw InputError(at, fmt::format("expected an array of element or line names, got {}", json_type_name(sequence)));
  }
  // Count the expanded sequence (and refuse it above the limit) before allocating it.
  SequenceExpander expander(lines, file, lattice);
  expander.resolve(sequence);
  if (expander.size() == 0) {
    InputLocation at{file};
    at.field = "sequence";
    throw InputError(at, "the sequence is empty: a lattice needs at least one element");
  }
  lattice.reserve(0, expander.size());
  expander.expand(lattice);
  lattice.prepare();
  return lattice;
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
        const double v = lattice.field(d, f.name);  // integers written as integers, so that they read back
        e[f.name] = f.type == FT_FIELD_INT32 ? json(static_cast<int32_t>(v)) : json(v);
      } else {
        json a = json::array();
        for (unsigned k = 0; k < f.count; ++k) {
          const double v = lattice.field(d, f.name, k);
          a.push_back(f.type == FT_FIELD_INT32 ? json(static_cast<int32_t>(v)) : json(v));
        }
        e[f.name] = a;
      }
    }
    if (const ElementTransformInput* t = lattice.transform(d))
      for (int k = 0; k < 8; ++k)
        if (transform_field(*t, k) != 0.0) e[kTransformFieldNames[k]] = transform_field(*t, k);
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
