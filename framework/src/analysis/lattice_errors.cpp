// Magnet errors as lattice variants (fusetrack/lattice_errors.h has the table format, the formulas
// and the conventions).
//
// Steps: the table is read and checked on its own (read_error_table); its entries are resolved
// against the lattice (which definitions, where their errors go, the main field of relative
// errors), which is where a type with no place for field errors is refused; then every seed draws
// its values entry by entry and the sums per definition become the variant's "add" changes. The first
// variant is read back by the variants reader (applied and prepared), so that a file that is written
// loads.
#include "fusetrack/lattice_errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <unordered_map>

#include "fusetrack/device/random.h"
#include "fusetrack/error.h"
#include "fusetrack/variants.h"

namespace ft {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kEntryKeys[] = {"name", "match",      "type",        "order",  "radius",
                                      "cut",  "systematic", "uncertainty", "random", "comment"};
constexpr const char* kTopKeys[] = {"fusetrack_error_table", "description", "cut", "entries"};
// Below this cut the rejection needs more than ~12 attempts per value; a fixed value is a
// systematic error.
constexpr double kMinimumCut = 0.1;

std::string join_names(const char* const* names, size_t count) {
  std::string s;
  for (size_t i = 0; i < count; ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

InputLocation table_location(const std::string& file, const std::string& field) {
  InputLocation where(file);
  where.field = field;
  return where;
}

double finite_number(const json& value, const InputLocation& where) {
  if (!value.is_number()) throw InputError(where, fmt::format("expected a number, got {}", json_type_name(value)));
  const double v = value.get<double>();
  if (!std::isfinite(v)) throw InputError(where, "the value is not finite");
  return v;
}

// ---- the table -------------------------------------------------------------------------------------

ErrorComponents read_components(const json& block, ErrorPart part, const std::string& file, const std::string& prefix) {
  const std::string part_field = prefix + "." + kErrorPartNames[static_cast<int>(part)];
  if (!block.is_object())
    throw InputError(table_location(file, part_field),
                     fmt::format("expected an object of error components, got {}", json_type_name(block)));
  const bool values_are_rms = part != ErrorPart::systematic;
  ErrorComponents c;
  for (const auto& [key, value] : block.items()) {
    const std::string field = part_field + "." + key;
    const auto kind = std::find(std::begin(kFieldErrorNames), std::end(kFieldErrorNames), key);
    const auto align = std::find(std::begin(kAlignmentErrorNames), std::end(kAlignmentErrorNames), key);
    if (kind != std::end(kFieldErrorNames)) {
      if (!value.is_array())
        throw InputError(
            table_location(file, field),
            fmt::format("expected a list of values by multipole order (0: dipole), got {}", json_type_name(value)));
      if (value.size() > static_cast<size_t>(kMaxErrorOrder) + 1)
        throw InputError(table_location(file, field), fmt::format("{} entries, at most {} (orders 0 to {}, as MAD-X)",
                                                                  value.size(), kMaxErrorOrder + 1, kMaxErrorOrder));
      std::vector<double>& out = c.field[static_cast<size_t>(kind - std::begin(kFieldErrorNames))];
      for (size_t j = 0; j < value.size(); ++j) {
        const InputLocation at = table_location(file, fmt::format("{}[{}]", field, j));
        const double v = finite_number(value[j], at);
        if (values_are_rms && v < 0.0) throw InputError(at, fmt::format("an rms must not be negative, got {}", v));
        out.push_back(v);
      }
      while (!out.empty() && out.back() == 0.0) out.pop_back();
    } else if (align != std::end(kAlignmentErrorNames)) {
      const InputLocation at = table_location(file, field);
      const double v = finite_number(value, at);
      if (values_are_rms && v < 0.0) throw InputError(at, fmt::format("an rms must not be negative, got {}", v));
      c.alignment[static_cast<size_t>(align - std::begin(kAlignmentErrorNames))] = v;
    } else {
      throw InputError(table_location(file, field),
                       fmt::format("unknown error component; expected {} (EFCOMP) or {} (EALIGN)",
                                   join_names(kFieldErrorNames, 4), join_names(kAlignmentErrorNames, 6)));
    }
  }
  return c;
}

double read_cut(const json& value, const InputLocation& where) {
  const double cut = finite_number(value, where);
  if (cut < kMinimumCut)
    throw InputError(where,
                     fmt::format("the cut must be at least {} sigma (a truncated Gaussian, MAD-X TGAUSS), got {}; "
                                 "use \"systematic\" for a fixed value",
                                 kMinimumCut, cut));
  return cut;
}

ErrorTableEntry read_entry(const json& e, size_t index, const std::string& file) {
  const std::string position = fmt::format("entries[{}]", index);
  if (!e.is_object())
    throw InputError(table_location(file, position), fmt::format("expected an object, got {}", json_type_name(e)));
  ErrorTableEntry entry;
  for (const auto& [key, value] : e.items()) {
    if (std::find(std::begin(kEntryKeys), std::end(kEntryKeys), key) == std::end(kEntryKeys))
      throw InputError(table_location(file, position + "." + key),
                       fmt::format("unknown key; an entry has {}", join_names(kEntryKeys, std::size(kEntryKeys))));
    if ((key == "name" || key == "match" || key == "type" || key == "comment") && !value.is_string())
      throw InputError(table_location(file, position + "." + key),
                       fmt::format("expected a string, got {}", json_type_name(value)));
  }
  entry.name = e.value("name", std::string());
  entry.pattern = e.value("match", std::string());
  entry.type = e.value("type", std::string());
  if (entry.name.empty() == entry.pattern.empty())
    throw InputError(table_location(file, position),
                     "give exactly one of \"name\" (an exact element name) and \"match\" (a regular expression)");
  const std::string label = entry.label(index);
  if (!entry.pattern.empty()) {
    try {
      std::regex check(entry.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& error) {
      throw InputError(table_location(file, label + ".match"),
                       fmt::format("not an ECMAScript regular expression: {}", error.what()));
    }
  }
  if (e.contains("order")) {
    const InputLocation at = table_location(file, label + ".order");
    const json& order = e.at("order");
    if (!order.is_number_integer() || order.get<int64_t>() < 0 || order.get<int64_t>() > kMaxErrorOrder)
      throw InputError(at,
                       fmt::format("expected an integer from 0 (dipole) to {}, got {}", kMaxErrorOrder, order.dump()));
    entry.order = order.get<int>();
  }
  if (e.contains("radius")) {
    const InputLocation at = table_location(file, label + ".radius");
    entry.radius = finite_number(e.at("radius"), at);
    if (entry.radius == 0.0) throw InputError(at, "the reference radius must not be zero");
  }
  if (e.contains("cut")) entry.cut = read_cut(e.at("cut"), table_location(file, label + ".cut"));
  bool any = false;
  for (int p = 0; p < 3; ++p) {
    const char* part_name = kErrorPartNames[p];
    if (!e.contains(part_name)) continue;
    entry.parts[static_cast<size_t>(p)] = read_components(e.at(part_name), static_cast<ErrorPart>(p), file, label);
    any = any || !entry.parts[static_cast<size_t>(p)].empty();
  }
  if (!any)
    throw InputError(
        table_location(file, label),
        "the entry has no error: give \"systematic\", \"uncertainty\" or \"random\" with a non-zero component");
  bool relative = false;
  for (const ErrorComponents& c : entry.parts) relative = relative || c.has_relative_errors();
  if (relative && entry.radius == 0.0)
    throw InputError(table_location(file, label + ".radius"),
                     "relative errors (dknr, dksr) need the reference radius \"radius\" [m] (MAD-X RADIUS)");
  return entry;
}

// ---- where the errors of a definition go --------------------------------------------------------------

/// The multipole coefficients of an element type that can hold field errors: integrated strengths
/// (knl, ksl [m^-n]) or strengths per length (kn, ks [m^-(n+1)], with a length).
struct MultipoleSlots {
  const FieldInfo* normal = nullptr;
  const FieldInfo* skew = nullptr;
  bool per_length = false;
  int max_order = -1;
  bool valid() const { return normal != nullptr; }
};

const FieldInfo* double_array(const ElementType& type, const char* name) {
  const FieldInfo* f = type.find_field(name);
  return (f && !f->derived && f->type == FT_FIELD_DOUBLE && f->count > 1) ? f : nullptr;
}

MultipoleSlots multipole_slots(const ElementType& type) {
  MultipoleSlots slots;
  if (const FieldInfo* knl = double_array(type, "knl"), *ksl = double_array(type, "ksl"); knl && ksl) {
    slots.normal = knl;
    slots.skew = ksl;
  } else if (const FieldInfo* kn = double_array(type, "kn"), *ks = double_array(type, "ks");
             kn && ks && type.find_field("length")) {
    slots.normal = kn;
    slots.skew = ks;
    slots.per_length = true;
  } else {
    return slots;
  }
  slots.max_order = static_cast<int>(std::min(slots.normal->count, slots.skew->count)) - 1;
  return slots;
}

double field_or_zero(const Lattice& lattice, uint32_t definition, const std::string& name) {
  const FieldInfo* f = lattice.definitions()[definition].type->find_field(name);
  return (f && f->count == 1 && !f->host_only()) ? lattice.field(definition, name) : 0.0;
}

/// The integrated strength K_n L (skew: J_n L) of a definition: its coefficient in the slots plus
/// the type's own k<n> (k<n>s) times the length when it has one (a combined-function Bend: k1, k2,
/// k3, and k0 = angle / length when k0_from_h = 1).
double integrated_strength(const Lattice& lattice, uint32_t definition, const MultipoleSlots& slots, int order,
                           bool skew) {
  const ElementType& type = *lattice.definitions()[definition].type;
  const double length = field_or_zero(lattice, definition, "length");
  const double coefficient =
      lattice.field(definition, skew ? slots.skew->name : slots.normal->name, static_cast<unsigned>(order));
  if (slots.per_length) return coefficient * length;
  double own = 0.0;
  const std::string own_name = fmt::format("k{}{}", order, skew ? "s" : "");
  if (type.find_field(own_name)) own = field_or_zero(lattice, definition, own_name);
  if (!skew && order == 0 && type.find_field("k0_from_h") && field_or_zero(lattice, definition, "k0_from_h") != 0.0 &&
      length != 0.0)
    own = field_or_zero(lattice, definition, "angle") / length;
  return coefficient + own * length;
}

double factorial(int n) {
  double f = 1.0;
  for (int k = 2; k <= n; ++k) f *= k;
  return f;
}

/// 64-bit FNV-1a of a name: the random stream of an element, whatever its position in the lattice.
uint64_t name_stream(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// The counter word of one draw: entry (16 bits), part (2), kind (3: field kinds 0-3, alignment 4),
/// component (5: multipole order or alignment index).
uint32_t draw_tag(size_t entry, ErrorPart part, int kind, int component) {
  return static_cast<uint32_t>(entry) | (static_cast<uint32_t>(part) << 16) | (static_cast<uint32_t>(kind) << 18) |
         (static_cast<uint32_t>(component) << 21);
}
constexpr int kAlignmentKind = 4;

/// Mean square of a standard normal truncated at |g| <= c: 1 - 2 c phi(c) / (2 Phi(c) - 1).
double truncated_second_moment(double c) {
  const double phi = std::exp(-0.5 * c * c) / std::sqrt(2.0 * 3.141592653589793);
  return 1.0 - 2.0 * c * phi / std::erf(c / std::sqrt(2.0));
}

struct ResolvedEntry {
  const ErrorTableEntry* entry = nullptr;
  size_t index = 0;
  std::string label;
  double cut = 0.0;
  std::vector<uint32_t> definitions;
  std::vector<MultipoleSlots> slots;  // by definitions
  std::vector<double> reference;      // K_ref L of relative errors, by definitions
  bool field_errors = false;
  bool alignment_errors = false;
};

int highest_order(const ErrorTableEntry& e) {
  int highest = -1;
  for (const ErrorComponents& c : e.parts)
    for (const std::vector<double>& values : c.field) highest = std::max(highest, static_cast<int>(values.size()) - 1);
  return highest;
}

std::string first_field_key(const ErrorTableEntry& e) {
  for (int p = 0; p < 3; ++p)
    for (int k = 0; k < 4; ++k)
      if (!e.parts[static_cast<size_t>(p)].field[static_cast<size_t>(k)].empty())
        return fmt::format("{}.{}", kErrorPartNames[p], kFieldErrorNames[k]);
  return "";
}

std::string first_alignment_key(const ErrorTableEntry& e) {
  for (int p = 0; p < 3; ++p)
    for (int a = 0; a < 6; ++a)
      if (e.parts[static_cast<size_t>(p)].alignment[static_cast<size_t>(a)] != 0.0)
        return fmt::format("{}.{}", kErrorPartNames[p], kAlignmentErrorNames[a]);
  return "";
}

InputLocation element_location(const std::string& file, const Lattice& lattice, uint32_t definition,
                               const std::string& field) {
  InputLocation where(file);
  where.element_name = lattice.definitions()[definition].name;
  where.element_type = lattice.definitions()[definition].type->name;
  where.field = field;
  return where;
}

const char* kNoSlotsAdvice =
    "this element type has no multipole coefficients to hold field errors (knl/ksl as Multipole and Bend have, or "
    "kn/ks as ThickMultipole has); restrict the entry with \"type\" or a narrower \"match\", or give the magnet a "
    "type with multipole coefficients (a Quadrupole or Sextupole as a ThickMultipole)";

/// Checks that `definition` can take the field errors up to `highest` and returns its slots.
MultipoleSlots checked_slots(const Lattice& lattice, uint32_t definition, int highest, const std::string& file,
                             const std::string& field) {
  const MultipoleSlots slots = multipole_slots(*lattice.definitions()[definition].type);
  const InputLocation where = element_location(file, lattice, definition, field);
  if (!slots.valid()) throw InputError(where, kNoSlotsAdvice);
  if (highest > slots.max_order)
    throw InputError(where,
                     fmt::format("a field error of order {}, but this element type holds orders 0 to {} ({}/{}); "
                                 "drop the higher orders for these elements",
                                 highest, slots.max_order, slots.normal->name, slots.skew->name));
  if (slots.per_length && field_or_zero(lattice, definition, "length") == 0.0)
    throw InputError(where, "the element has zero length: integrated errors cannot be spread over it");
  return slots;
}

/// The definitions entry `index` of `table` selects: by exact name or by regular expression, of its
/// type if it names one. InputError when it selects none.
/// `original_names` (optional): for definitions split by split_shared_definitions, the name the
/// table knows them by (copy name -> original name).
std::vector<uint32_t> matched_definitions(const Lattice& lattice, const ErrorTable& table, size_t index,
                                          const std::map<std::string, std::string>* original_names = nullptr) {
  auto table_name = [&](uint32_t d) -> const std::string& {
    const std::string& name = lattice.definitions()[d].name;
    if (!original_names) return name;
    const auto it = original_names->find(name);
    return it == original_names->end() ? name : it->second;
  };
  const ErrorTableEntry& e = table.entries[index];
  const std::string label = e.label(index);
  std::vector<std::string> types_used;
  for (const ElementType* t : lattice.types_used()) types_used.push_back(t->name);
  std::vector<uint32_t> definitions;
  if (!e.type.empty() && std::find(types_used.begin(), types_used.end(), e.type) == types_used.end())
    throw InputError(
        table_location(table.file, label + ".type"),
        fmt::format("no element of type '{}' in the lattice (its types: {})", e.type, fmt::join(types_used, ", ")));
  if (!e.name.empty()) {
    if (!original_names) {
      if (const int d = lattice.find_definition(e.name); d >= 0) definitions.push_back(static_cast<uint32_t>(d));
    } else {
      for (uint32_t d = 0; d < lattice.definitions().size(); ++d)
        if (table_name(d) == e.name) definitions.push_back(d);
    }
    if (definitions.empty())
      throw InputError(table_location(table.file, label + ".name"),
                       fmt::format("no element named '{}' in the lattice", e.name));
    const std::string& type = lattice.definitions()[definitions.front()].type->name;
    if (!e.type.empty() && type != e.type)
      throw InputError(table_location(table.file, label + ".type"),
                       fmt::format("element '{}' is a {}, not a {}", e.name, type, e.type));
  } else {
    const std::regex pattern(e.pattern, std::regex::ECMAScript);
    for (uint32_t d = 0; d < lattice.definitions().size(); ++d) {
      const ElementDefinition& def = lattice.definitions()[d];
      if (!e.type.empty() && def.type->name != e.type) continue;
      if (std::regex_match(table_name(d), pattern)) definitions.push_back(d);
    }
    if (definitions.empty())
      throw InputError(table_location(table.file, label + ".match"),
                       fmt::format("the pattern '{}' matches no element{} (it must match whole names)", e.pattern,
                                   e.type.empty() ? std::string() : fmt::format(" of type {}", e.type)));
  }
  return definitions;
}

std::vector<ResolvedEntry> resolve_entries(const Lattice& lattice, const ErrorTable& table, double default_cut,
                                           const std::map<std::string, std::string>* original_names) {
  std::vector<ResolvedEntry> resolved;
  for (size_t i = 0; i < table.entries.size(); ++i) {
    const ErrorTableEntry& e = table.entries[i];
    ResolvedEntry r;
    r.entry = &e;
    r.index = i;
    r.label = e.label(i);
    r.cut = e.cut > 0.0 ? e.cut : default_cut;
    r.definitions = matched_definitions(lattice, table, i, original_names);
    const int highest = highest_order(e);
    r.field_errors = highest >= 0;
    for (const ErrorComponents& c : e.parts) r.alignment_errors = r.alignment_errors || c.has_alignment_errors();
    bool relative = false;
    for (const ErrorComponents& c : e.parts) relative = relative || c.has_relative_errors();
    for (const uint32_t d : r.definitions) {
      const ElementDefinition& def = lattice.definitions()[d];
      if (r.alignment_errors && def.type->is_collective())
        throw InputError(element_location(table.file, lattice, d, r.label + "." + first_alignment_key(e)),
                         "collective elements take no misalignment; narrow the entry's \"match\" or \"type\"");
      MultipoleSlots slots;
      double reference = 0.0;
      if (r.field_errors) {
        const std::string field = r.label + "." + first_field_key(e);
        slots = checked_slots(lattice, d, highest, table.file, field);
        if (relative) {
          if (e.order > slots.max_order)
            throw InputError(
                element_location(table.file, lattice, d, r.label + ".order"),
                fmt::format("the main order {} is beyond the element's orders 0 to {}", e.order, slots.max_order));
          reference = integrated_strength(lattice, d, slots, e.order, e.radius < 0.0);
          if (reference == 0.0)
            throw InputError(
                element_location(table.file, lattice, d, r.label + ".order"),
                fmt::format("relative errors refer to the {} strength of order {} (K{}{}L), which is "
                            "zero in this element; set \"order\" to its main order, or give absolute "
                            "errors (dkn, dks)",
                            e.radius < 0.0 ? "skew" : "normal", e.order, e.order, e.radius < 0.0 ? "S" : ""));
        }
      }
      r.slots.push_back(slots);
      r.reference.push_back(reference);
    }
    resolved.push_back(std::move(r));
  }
  return resolved;
}

// ---- the sums per definition and the variant -------------------------------------------------------------

struct DefinitionErrors {
  MultipoleSlots slots;
  std::vector<double> normal, skew;        // integrated Delta K_n L by order
  int normal_orders = 0, skew_orders = 0;  // entries written (highest order touched + 1)
  std::array<double, 6> alignment{};
  std::array<bool, 6> alignment_touched{};
};

void add_field_error(DefinitionErrors& d, const MultipoleSlots& slots, bool skew, int order, double integrated) {
  if (d.normal.empty()) {
    d.slots = slots;
    d.normal.assign(static_cast<size_t>(slots.max_order) + 1, 0.0);
    d.skew.assign(static_cast<size_t>(slots.max_order) + 1, 0.0);
  }
  (skew ? d.skew : d.normal)[static_cast<size_t>(order)] += integrated;
  int& written = skew ? d.skew_orders : d.normal_orders;
  written = std::max(written, order + 1);
}

LatticeVariantSpec variant_from_sums(const Lattice& lattice, const std::string& name,
                                     const std::map<uint32_t, DefinitionErrors>& sums) {
  LatticeVariantSpec variant;
  variant.name = name;
  for (const auto& [definition, errors] : sums) {
    VariantElementChange change;
    change.name = lattice.definitions()[definition].name;
    if (errors.normal_orders > 0 || errors.skew_orders > 0) {
      const double length = errors.slots.per_length ? field_or_zero(lattice, definition, "length") : 1.0;
      auto written = [&](const std::vector<double>& values, int count) {
        std::vector<double> out(values.begin(), values.begin() + count);
        for (double& v : out) v /= length;  // kn, ks: per length
        return out;
      };
      if (errors.normal_orders > 0)
        change.add.push_back({errors.slots.normal->name, written(errors.normal, errors.normal_orders), true});
      if (errors.skew_orders > 0)
        change.add.push_back({errors.slots.skew->name, written(errors.skew, errors.skew_orders), true});
      // A Multipole with an explicit `order` (not -1) sums only up to it: raise it to the errors'.
      const ElementType& type = *lattice.definitions()[definition].type;
      const FieldInfo* order = type.find_field("order");
      if (!errors.slots.per_length && order && order->type == FT_FIELD_INT32 && !order->derived) {
        const int current = static_cast<int>(lattice.field(definition, "order"));
        const int needed = std::max(errors.normal_orders, errors.skew_orders) - 1;
        if (current >= 0 && current < needed) change.set.push_back({"order", {static_cast<double>(needed)}, false});
      }
    }
    for (int a = 0; a < 6; ++a)
      if (errors.alignment_touched[static_cast<size_t>(a)])
        change.add.push_back({kAlignmentTransformFields[a], {errors.alignment[static_cast<size_t>(a)]}, false});
    if (!change.add.empty() || !change.set.empty()) variant.elements.push_back(std::move(change));
  }
  return variant;
}

/// Reads the first variant back with the variants reader (fusetrack/variants.h), which applies it to
/// the lattice and prepares it: a file that is written also loads. The other variants differ only in
/// values, not in which fields they change.
void check_variant_loads(const Lattice& lattice, const GeneratedVariants& generated, const std::string& file) {
  GeneratedVariants first;
  first.variants.push_back(generated.variants.front());
  try {
    variants_from_json(lattice, variants_document("", first), file);
  } catch (const InputError& error) {
    InputLocation where = error.where();
    where.file = file;
    throw InputError(
        where, fmt::format("with the errors of {} (the first variant): {}", first.variants[0].name, error.problem()));
  }
}

struct ComponentAccumulator {
  double requested_rms = 0.0;
  double sum_squares = 0.0;
  double max_abs = 0.0;
  uint64_t count = 0;
};

}  // namespace

// ---- public --------------------------------------------------------------------------------------------

bool ErrorComponents::has_field_errors() const {
  return std::any_of(field.begin(), field.end(), [](const std::vector<double>& v) { return !v.empty(); });
}
bool ErrorComponents::has_relative_errors() const { return !field[0].empty() || !field[1].empty(); }
bool ErrorComponents::has_alignment_errors() const {
  return std::any_of(alignment.begin(), alignment.end(), [](double v) { return v != 0.0; });
}

std::string ErrorTableEntry::label(size_t index) const {
  return name.empty() ? fmt::format("entries[{}] (match '{}')", index, pattern)
                      : fmt::format("entries[{}] (name '{}')", index, name);
}

ErrorTable error_table_from_json(const json& doc, const std::string& file) {
  if (!doc.is_object())
    throw InputError(InputLocation(file), fmt::format("an error table is a JSON object, got {}", json_type_name(doc)));
  for (const auto& [key, value] : doc.items())
    if (std::find(std::begin(kTopKeys), std::end(kTopKeys), key) == std::end(kTopKeys))
      throw InputError(table_location(file, key),
                       fmt::format("unknown key; an error table has {}", join_names(kTopKeys, std::size(kTopKeys))));
  if (!doc.contains("fusetrack_error_table") || doc.at("fusetrack_error_table") != 1)
    throw InputError(table_location(file, "fusetrack_error_table"),
                     "not a fusetrack error table: expected \"fusetrack_error_table\": 1");
  ErrorTable table;
  table.file = file;
  if (doc.contains("description")) {
    if (!doc.at("description").is_string()) throw InputError(table_location(file, "description"), "expected a string");
    table.description = doc.at("description").get<std::string>();
  }
  if (doc.contains("cut")) table.cut = read_cut(doc.at("cut"), table_location(file, "cut"));
  if (!doc.contains("entries") || !doc.at("entries").is_array() || doc.at("entries").empty())
    throw InputError(table_location(file, "entries"), "expected a non-empty list of entries");
  if (doc.at("entries").size() > 0xFFFF) throw InputError(table_location(file, "entries"), "at most 65535 entries");
  for (size_t i = 0; i < doc.at("entries").size(); ++i)
    table.entries.push_back(read_entry(doc.at("entries")[i], i, file));
  return table;
}

ErrorTable read_error_table(const std::string& path) { return error_table_from_json(parse_json_file(path), path); }

double truncated_gaussian(uint64_t seed, uint64_t stream, uint32_t tag, double cut) {
  const auto seed_lo = static_cast<unsigned>(seed), seed_hi = static_cast<unsigned>(seed >> 32);
  for (uint32_t attempt = 0; attempt < 100000000u; ++attempt) {
    const ft_philox_block counter{{static_cast<unsigned>(stream), static_cast<unsigned>(stream >> 32), tag, attempt}};
    const ft_philox_block r = ft_philox4x32_10(counter, seed_lo, seed_hi);
    const double g = ft_box_muller(ft_uniform53(r.v[0], r.v[1]), ft_uniform53(r.v[2], r.v[3]));
    if (std::fabs(g) <= cut) return g;
  }
  throw Error(fmt::format("no normal within {} sigma in 10^8 draws", cut));
}

GeneratedVariants generate_error_variants(const Lattice& lattice, const ErrorTable& table,
                                          const ErrorSeedsOptions& options) {
  if (options.seeds <= 0)
    throw InputError(table_location(table.file, "--seeds"),
                     fmt::format("the number of seeds must be positive, got {}", options.seeds));
  if (options.first_seed == 0)
    throw InputError(table_location(table.file, "--first-seed"),
                     "seeds are numbered from 1: the first seed must be positive");
  if (options.first_seed > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(options.seeds))
    throw InputError(table_location(table.file, "--first-seed"), "the seeds overflow 64 bits");
  if (options.cut != 0.0) read_cut(json(options.cut), table_location(table.file, "--cut"));
  const double default_cut = options.cut > 0.0 ? options.cut : table.cut;
  const std::vector<ResolvedEntry> entries =
      resolve_entries(lattice, table, default_cut, options.original_names.empty() ? nullptr : &options.original_names);

  GeneratedVariants out;
  const uint64_t last_seed = options.first_seed + static_cast<uint64_t>(options.seeds) - 1;
  out.description =
      fmt::format("fusetrack errors: table {}, seeds {} to {}, cut {} sigma{}{}", table.file, options.first_seed,
                  last_seed, default_cut, table.description.empty() ? "" : "; ", table.description);

  // Warn where one definition stands for several magnets: they all get the same errors.
  std::vector<uint32_t> uses(lattice.definitions().size(), 0);
  for (const SequenceEntry& s : lattice.sequence()) ++uses[s.definition];
  for (const ResolvedEntry& r : entries) {
    std::vector<std::string> shared;
    for (const uint32_t d : r.definitions)
      if (uses[d] > 1) shared.push_back(fmt::format("{} x{}", lattice.definitions()[d].name, uses[d]));
    if (!shared.empty())
      out.warnings.push_back(fmt::format(
          "{}: {} of its {} elements stand for several magnets of the sequence ({}{}); every instance of a definition "
          "gets the same errors (give each magnet its own definition for independent errors)",
          r.label, shared.size(), r.definitions.size(),
          fmt::join(shared.begin(), shared.begin() + static_cast<long>(std::min<size_t>(shared.size(), 5)), ", "),
          shared.size() > 5 ? ", ..." : ""));
  }

  // Statistics of the random parts, per entry and component (kind * (kMaxErrorOrder + 1) + order;
  // alignment after the field kinds).
  constexpr int kFieldSlots = 4 * (kMaxErrorOrder + 1);
  std::vector<std::vector<ComponentAccumulator>> stats(entries.size(),
                                                       std::vector<ComponentAccumulator>(kFieldSlots + 6));

  for (uint64_t seed = options.first_seed; seed <= last_seed; ++seed) {
    std::map<uint32_t, DefinitionErrors> sums;
    for (size_t ei = 0; ei < entries.size(); ++ei) {
      const ResolvedEntry& r = entries[ei];
      const ErrorTableEntry& e = *r.entry;
      const ErrorComponents& systematic = e.parts[0];
      const ErrorComponents& uncertainty = e.parts[1];
      const ErrorComponents& random = e.parts[2];
      auto part_value = [](const std::vector<double>& values, int j) {
        return j < static_cast<int>(values.size()) ? values[static_cast<size_t>(j)] : 0.0;
      };
      // One draw per seed and entry for the uncertainty part, shared by its elements.
      std::array<std::array<double, kMaxErrorOrder + 1>, 4> uncertainty_field{};
      std::array<double, 6> uncertainty_alignment{};
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < static_cast<int>(uncertainty.field[static_cast<size_t>(k)].size()); ++j)
          if (part_value(uncertainty.field[static_cast<size_t>(k)], j) != 0.0)
            uncertainty_field[static_cast<size_t>(k)][static_cast<size_t>(j)] =
                part_value(uncertainty.field[static_cast<size_t>(k)], j) *
                truncated_gaussian(seed, 0, draw_tag(r.index, ErrorPart::uncertainty, k, j), r.cut);
      for (int a = 0; a < 6; ++a)
        if (uncertainty.alignment[static_cast<size_t>(a)] != 0.0)
          uncertainty_alignment[static_cast<size_t>(a)] =
              uncertainty.alignment[static_cast<size_t>(a)] *
              truncated_gaussian(seed, 0, draw_tag(r.index, ErrorPart::uncertainty, kAlignmentKind, a), r.cut);

      for (size_t di = 0; di < r.definitions.size(); ++di) {
        const uint32_t d = r.definitions[di];
        const uint64_t stream = name_stream(lattice.definitions()[d].name);
        DefinitionErrors& sum = sums[d];
        for (int k = 0; k < 4; ++k) {
          const auto kind = static_cast<FieldErrorKind>(k);
          const bool relative = kind == FieldErrorKind::relative_normal || kind == FieldErrorKind::relative_skew;
          const bool skew = kind == FieldErrorKind::relative_skew || kind == FieldErrorKind::absolute_skew;
          const size_t ks = static_cast<size_t>(k);
          const int orders = static_cast<int>(
              std::max({systematic.field[ks].size(), uncertainty.field[ks].size(), random.field[ks].size()}));
          for (int j = 0; j < orders; ++j) {
            double value = part_value(systematic.field[ks], j) + uncertainty_field[ks][static_cast<size_t>(j)];
            const double rms = part_value(random.field[ks], j);
            if (rms != 0.0) {
              const double drawn =
                  rms * truncated_gaussian(seed, stream, draw_tag(r.index, ErrorPart::random, k, j), r.cut);
              value += drawn;
              ComponentAccumulator& acc = stats[ei][static_cast<size_t>(k * (kMaxErrorOrder + 1) + j)];
              acc.requested_rms = rms;
              acc.sum_squares += drawn * drawn;
              acc.max_abs = std::max(acc.max_abs, std::fabs(drawn));
              ++acc.count;
            }
            // MAD-X EFCOMP: Delta(K_j L) = DKNR(j) K_ref L R^(n - j) j! / n! (the same for DKSR, with |R|).
            const double integrated = relative ? value * r.reference[di] * std::pow(std::fabs(e.radius), e.order - j) *
                                                     factorial(j) / factorial(e.order)
                                               : value;
            add_field_error(sum, r.slots[di], skew, j, integrated);
          }
        }
        for (int a = 0; a < 6; ++a) {
          const size_t as = static_cast<size_t>(a);
          const double rms = random.alignment[as];
          if (systematic.alignment[as] == 0.0 && uncertainty.alignment[as] == 0.0 && rms == 0.0) continue;
          double value = systematic.alignment[as] + uncertainty_alignment[as];
          if (rms != 0.0) {
            const double drawn =
                rms * truncated_gaussian(seed, stream, draw_tag(r.index, ErrorPart::random, kAlignmentKind, a), r.cut);
            value += drawn;
            ComponentAccumulator& acc = stats[ei][static_cast<size_t>(kFieldSlots + a)];
            acc.requested_rms = rms;
            acc.sum_squares += drawn * drawn;
            acc.max_abs = std::max(acc.max_abs, std::fabs(drawn));
            ++acc.count;
          }
          sum.alignment[as] += value;
          sum.alignment_touched[as] = true;
        }
      }
    }
    out.variants.push_back(variant_from_sums(lattice, fmt::format("seed_{}", seed), sums));
  }

  for (size_t ei = 0; ei < entries.size(); ++ei) {
    const ResolvedEntry& r = entries[ei];
    ErrorEntrySummary summary;
    summary.label = r.label;
    summary.cut = r.cut;
    for (const uint32_t d : r.definitions) summary.elements.push_back(lattice.definitions()[d].name);
    for (int slot = 0; slot < kFieldSlots + 6; ++slot) {
      const ComponentAccumulator& acc = stats[ei][static_cast<size_t>(slot)];
      if (acc.count == 0) continue;
      ErrorComponentStatistics s;
      s.component = slot < kFieldSlots ? fmt::format("{}[{}]", kFieldErrorNames[slot / (kMaxErrorOrder + 1)],
                                                     slot % (kMaxErrorOrder + 1))
                                       : std::string(kAlignmentErrorNames[slot - kFieldSlots]);
      s.requested_rms = acc.requested_rms;
      s.expected_rms = acc.requested_rms * std::sqrt(truncated_second_moment(r.cut));
      s.achieved_rms = std::sqrt(acc.sum_squares / static_cast<double>(acc.count));
      s.max_abs_over_rms = acc.max_abs / acc.requested_rms;
      s.count = acc.count;
      summary.components.push_back(s);
    }
    out.summary.push_back(std::move(summary));
  }
  check_variant_loads(lattice, out, table.file);
  return out;
}

// ---- MAD-X error tables (TFS) ------------------------------------------------------------------------------

namespace {

struct TfsTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> lines;  // line number of each row
};

/// Splits a TFS line into tokens: whitespace-separated, a double-quoted string is one token (quotes
/// removed).
std::vector<std::string> tfs_tokens(const std::string& line, const std::string& file, size_t line_number) {
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < line.size()) {
    if (std::isspace(static_cast<unsigned char>(line[i]))) {
      ++i;
      continue;
    }
    if (line[i] == '"') {
      const size_t end = line.find('"', i + 1);
      if (end == std::string::npos)
        throw InputError(InputLocation(file), fmt::format("line {}: a string without its closing quote", line_number));
      tokens.push_back(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else {
      size_t end = i;
      while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
      tokens.push_back(line.substr(i, end - i));
      i = end;
    }
  }
  return tokens;
}

TfsTable read_tfs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(InputLocation(path), "cannot open the file for reading");
  TfsTable table;
  std::string line;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    const char head = line[first];
    if (head == '@' || head == '#') continue;  // header parameters, comments
    if (head == '$') continue;                 // column formats
    if (head == '*') {
      if (!table.columns.empty())
        throw InputError(InputLocation(path), fmt::format("line {}: a second column line ('*')", line_number));
      table.columns = tfs_tokens(line.substr(first + 1), path, line_number);
      for (std::string& c : table.columns)
        std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::toupper(ch); });
      continue;
    }
    if (table.columns.empty())
      throw InputError(InputLocation(path),
                       fmt::format("line {}: a data row before the column names (a TFS table has a '* NAME ...' line)",
                                   line_number));
    std::vector<std::string> tokens = tfs_tokens(line, path, line_number);
    if (tokens.size() != table.columns.size())
      throw InputError(InputLocation(path), fmt::format("line {}: {} values for {} columns", line_number, tokens.size(),
                                                        table.columns.size()));
    table.rows.push_back(std::move(tokens));
    table.lines.push_back(line_number);
  }
  if (table.columns.empty())
    throw InputError(InputLocation(path), "not a TFS table: no column line ('* NAME K0L K0SL ...')");
  return table;
}

/// Column roles of a MAD-X error table: field errors K<n>L (normal) and K<n>SL (skew), alignment
/// errors, and the rest (monitor, aperture and RF phase errors, which tracking here does not use).
struct MadxErrorColumns {
  int name = -1;
  std::vector<std::pair<int, int>> normal, skew;  // (column, order)
  std::array<int, 6> alignment{-1, -1, -1, -1, -1, -1};
  std::vector<int> unused;
};

MadxErrorColumns classify_columns(const TfsTable& table, const std::string& file) {
  MadxErrorColumns c;
  for (int i = 0; i < static_cast<int>(table.columns.size()); ++i) {
    const std::string& name = table.columns[static_cast<size_t>(i)];
    static const std::regex kFieldColumn("K([0-9]+)(S?)L");
    std::smatch field_column;
    if (name == "NAME") {
      c.name = i;
    } else if (std::regex_match(name, field_column, kFieldColumn) && field_column[1].length() <= 2 &&
               std::stoi(field_column[1].str()) <= kMaxErrorOrder) {
      const int order = std::stoi(field_column[1].str());
      (field_column[2].length() == 0 ? c.normal : c.skew).push_back({i, order});
    } else {
      bool alignment = false;
      for (int a = 0; a < 6; ++a) {
        std::string upper = kAlignmentErrorNames[a];
        std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char ch) { return std::toupper(ch); });
        if (name == upper) {
          c.alignment[static_cast<size_t>(a)] = i;
          alignment = true;
        }
      }
      if (!alignment) c.unused.push_back(i);
    }
  }
  if (c.name < 0) throw InputError(InputLocation(file), "the table has no NAME column (MAD-X ESAVE writes one)");
  return c;
}

double tfs_number(const std::string& token, const std::string& file, size_t line, const std::string& column) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);
  if (end == token.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    InputLocation where(file);
    where.field = column;
    throw InputError(where, fmt::format("line {}: '{}' is not a finite number", line, token));
  }
  return v;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

/// Definition names by lower-case name (several when names differ only in case).
using CaseFoldedNames = std::unordered_map<std::string, std::vector<uint32_t>>;

/// The definition a MAD-X name denotes: the exact name, else without a ":<digits>" occurrence
/// suffix, else the same name ignoring case (MAD-X writes names in upper case); -1 if none.
int madx_definition(const Lattice& lattice, const CaseFoldedNames& folded, const std::string& madx_name,
                    const std::string& file, size_t line) {
  std::vector<std::string> candidates = {madx_name};
  const size_t colon = madx_name.rfind(':');
  if (colon != std::string::npos && colon + 1 < madx_name.size() &&
      std::all_of(madx_name.begin() + static_cast<long>(colon) + 1, madx_name.end(),
                  [](unsigned char ch) { return std::isdigit(ch); }))
    candidates.push_back(madx_name.substr(0, colon));
  for (const std::string& c : candidates)
    if (const int d = lattice.find_definition(c); d >= 0) return d;
  for (const std::string& c : candidates) {
    const auto it = folded.find(lower(c));
    if (it == folded.end()) continue;
    if (it->second.size() > 1) {
      std::vector<std::string> names;
      for (const uint32_t d : it->second) names.push_back(lattice.definitions()[d].name);
      InputLocation where(file);
      where.element_name = madx_name;
      throw InputError(where, fmt::format("line {}: the name matches several elements that differ only in case ({})",
                                          line, fmt::join(names, ", ")));
    }
    return static_cast<int>(it->second.front());
  }
  return -1;
}

std::string variant_name_from_path(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  return stem.empty() ? std::string("madx_errors") : stem;
}

}  // namespace

GeneratedVariants import_madx_error_tables(const Lattice& lattice, const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError(InputLocation("--madx-table"), "no MAD-X error table given");
  CaseFoldedNames folded;
  for (uint32_t d = 0; d < lattice.definitions().size(); ++d) folded[lower(lattice.definitions()[d].name)].push_back(d);

  GeneratedVariants out;
  std::vector<std::string> names;
  for (const std::string& path : paths) {
    const TfsTable table = read_tfs(path);
    const MadxErrorColumns columns = classify_columns(table, path);
    std::map<uint32_t, DefinitionErrors> sums;
    std::map<uint32_t, std::pair<size_t, std::vector<double>>> first_row;  // definition -> (line, values)
    std::map<std::string, size_t> unused_nonzero;
    size_t rows_used = 0;
    for (size_t row = 0; row < table.rows.size(); ++row) {
      const std::vector<std::string>& tokens = table.rows[row];
      const size_t line = table.lines[row];
      const std::string& madx_name = tokens[static_cast<size_t>(columns.name)];
      auto number = [&](int column) {
        return tfs_number(tokens[static_cast<size_t>(column)], path, line, table.columns[static_cast<size_t>(column)]);
      };
      std::vector<double> values;  // normal, skew, alignment: the row's errors
      int highest = -1;
      for (const auto& [column, order] : columns.normal) {
        values.push_back(number(column));
        if (values.back() != 0.0) highest = std::max(highest, order);
      }
      for (const auto& [column, order] : columns.skew) {
        values.push_back(number(column));
        if (values.back() != 0.0) highest = std::max(highest, order);
      }
      bool aligned = false;
      for (const int column : columns.alignment) {
        values.push_back(column >= 0 ? number(column) : 0.0);
        aligned = aligned || values.back() != 0.0;
      }
      for (const int column : columns.unused) {
        const std::string& token = tokens[static_cast<size_t>(column)];
        char* end = nullptr;
        const double v = std::strtod(token.c_str(), &end);
        if (end != token.c_str() && *end == '\0' && v != 0.0)
          ++unused_nonzero[table.columns[static_cast<size_t>(column)]];
      }
      if (highest < 0 && !aligned) continue;  // a row of zeros (ESAVE with SELECT, FULL)
      const int found = madx_definition(lattice, folded, madx_name, path, line);
      if (found < 0) {
        InputLocation where(path);
        where.element_name = madx_name;
        throw InputError(where, fmt::format("line {}: the table gives errors to an element the lattice does not have "
                                            "(matched by exact name, without a ':N' suffix, then ignoring case)",
                                            line));
      }
      const auto d = static_cast<uint32_t>(found);
      const auto [previous, inserted] = first_row.emplace(d, std::make_pair(line, values));
      if (!inserted) {
        if (previous->second.second != values)
          throw InputError(element_location(path, lattice, d, ""),
                           fmt::format("lines {} and {} give different errors to instances of one definition; a "
                                       "variant changes definitions, so give each magnet its own definition",
                                       previous->second.first, line));
        continue;  // the same errors again: one more instance of the definition
      }
      ++rows_used;
      const ElementDefinition& def = lattice.definitions()[d];
      if (aligned && def.type->is_collective())
        throw InputError(element_location(path, lattice, d, "DX"),
                         fmt::format("line {}: collective elements take no misalignment", line));
      DefinitionErrors& sum = sums[d];
      if (highest >= 0) {
        const std::string column = fmt::format("K{}L", highest);
        const MultipoleSlots slots = checked_slots(lattice, d, highest, path, column);
        size_t v = 0;
        for (const auto& [column_index, order] : columns.normal) {
          (void)column_index;
          if (values[v] != 0.0) add_field_error(sum, slots, false, order, values[v]);
          ++v;
        }
        for (const auto& [column_index, order] : columns.skew) {
          (void)column_index;
          if (values[v] != 0.0) add_field_error(sum, slots, true, order, values[v]);
          ++v;
        }
      }
      const size_t alignment_start = columns.normal.size() + columns.skew.size();
      for (size_t a = 0; a < 6; ++a)
        if (values[alignment_start + a] != 0.0) {
          sum.alignment[a] += values[alignment_start + a];
          sum.alignment_touched[a] = true;
        }
    }
    for (const auto& [column, count] : unused_nonzero)
      out.warnings.push_back(
          fmt::format("{}: column {} has {} non-zero values, not imported (only K<n>L, K<n>SL, DX, "
                      "DY, DS, DPHI, DTHETA and DPSI affect tracking here)",
                      path, column, count));
    if (rows_used == 0) out.warnings.push_back(fmt::format("{}: no row with a non-zero error", path));
    std::string name = variant_name_from_path(path);
    if (std::find(names.begin(), names.end(), name) != names.end()) name += fmt::format("_{}", names.size() + 1);
    names.push_back(name);
    GeneratedVariants this_file;
    this_file.variants.push_back(variant_from_sums(lattice, name, sums));
    check_variant_loads(lattice, this_file, path);
    out.variants.push_back(std::move(this_file.variants.front()));
    ErrorEntrySummary summary;
    summary.label = fmt::format("{} ({} rows with errors)", path, rows_used);
    for (const auto& [d, errors] : sums) summary.elements.push_back(lattice.definitions()[d].name);
    out.summary.push_back(std::move(summary));
  }
  out.description = fmt::format("fusetrack errors: MAD-X error tables {}", fmt::join(paths, ", "));
  return out;
}

std::vector<uint32_t> error_table_definitions(const Lattice& lattice, const ErrorTable& table) {
  std::vector<bool> selected(lattice.definitions().size(), false);
  for (size_t i = 0; i < table.entries.size(); ++i)
    for (const uint32_t d : matched_definitions(lattice, table, i)) selected[d] = true;
  std::vector<uint32_t> definitions;
  for (uint32_t d = 0; d < selected.size(); ++d)
    if (selected[d]) definitions.push_back(d);
  return definitions;
}

json split_shared_definitions(const Lattice& lattice, const std::vector<uint32_t>& definitions, const std::string& file,
                              std::map<std::string, std::string>* original_names) {
  std::vector<uint32_t> uses(lattice.definitions().size(), 0);
  for (const SequenceEntry& s : lattice.sequence()) ++uses[s.definition];
  std::vector<bool> split(lattice.definitions().size(), false);
  for (const uint32_t d : definitions) split[d] = uses[d] > 1;
  json doc = lattice_to_json(lattice);
  json elements = json::object();
  for (uint32_t d = 0; d < lattice.definitions().size(); ++d) {
    const std::string& name = lattice.definitions()[d].name;
    if (!split[d]) {
      elements[name] = doc.at("elements").at(name);
      continue;
    }
    for (uint32_t k = 1; k <= uses[d]; ++k) {
      const std::string copy = fmt::format("{}_{}", name, k);
      if (lattice.find_definition(copy) >= 0 || elements.contains(copy)) {
        InputLocation where(file);
        where.element_name = name;
        throw InputError(where, fmt::format("cannot give each use its own definition: the name '{}' is taken", copy));
      }
      elements[copy] = doc.at("elements").at(name);
      if (original_names) (*original_names)[copy] = name;
    }
  }
  std::vector<uint32_t> occurrence(lattice.definitions().size(), 0);
  json sequence = json::array();
  for (const SequenceEntry& s : lattice.sequence()) {
    const std::string& name = lattice.definitions()[s.definition].name;
    sequence.push_back(split[s.definition] ? fmt::format("{}_{}", name, ++occurrence[s.definition]) : name);
  }
  doc["elements"] = std::move(elements);
  doc["sequence"] = std::move(sequence);
  return doc;
}

json variants_document(const std::string& lattice_path, const GeneratedVariants& generated) {
  json doc = json::object();
  doc["fusetrack_variants"] = 1;
  doc["lattice"] = lattice_path;
  doc["description"] = generated.description;
  json variants = json::array();
  for (const LatticeVariantSpec& v : generated.variants) {
    json elements = json::array();
    for (const VariantElementChange& change : v.elements) {
      json e = json::object();
      e["name"] = change.name;
      for (const bool adding : {true, false}) {
        const std::vector<VariantFieldChange>& fields = adding ? change.add : change.set;
        if (fields.empty()) continue;
        json values = json::object();
        for (const VariantFieldChange& f : fields) {
          if (f.is_array)
            values[f.field] = f.values;
          else
            values[f.field] = f.values.front();
        }
        e[adding ? "add" : "set"] = std::move(values);
      }
      elements.push_back(std::move(e));
    }
    variants.push_back(json{{"name", v.name}, {"elements", std::move(elements)}});
  }
  doc["variants"] = std::move(variants);
  return doc;
}

}  // namespace ft
