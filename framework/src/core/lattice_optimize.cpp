// Lattice simplification for tracking (fusetrack/lattice_optimize.h). The rules follow Xsuite's
// Line.optimize_for_tracking (xtrack/line.py: remove_markers, remove_inactive_multipoles,
// remove_zero_length_drifts, merge_consecutive_drifts, merge_consecutive_multipoles). The core names no
// element type elsewhere; here the three built-in types whose maps compose exactly are named, and
// recognised only when they come from the built-in plugin with the field table this file was written
// for (anything else is kept as it is).
#include "fusetrack/lattice_optimize.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace ft {

using json = nlohmann::ordered_json;

namespace {

/// What the optimization may do with a definition.
enum class Role {
  Keep,      // copied as it is, and a barrier to every merge
  Remove,    // a marker: dropped
  Inactive,  // a thin kick of zero strength without bending, or a drift of zero length: dropped
  Drift,     // merged with neighbouring drifts of the same type
  Kick,      // a thin multipole without bending: merged with neighbouring such kicks
};

bool from_builtin_plugin(const ElementType& type) { return type.plugin && type.plugin->name() == "builtin"; }

/// True when the input (non-derived) fields of `type` are exactly `expected`: the layout the
/// merge rules below were written for (elements/drift.h, drift_exact.h, multipole.h).
bool has_input_fields(const ElementType& type, const std::set<std::string>& expected) {
  std::set<std::string> input;
  for (const FieldInfo& f : type.fields)
    if (!f.derived) input.insert(f.name);
  return input == expected;
}

Role role_of(const Lattice& lattice, uint32_t definition) {
  const ElementDefinition& def = lattice.definitions()[definition];
  const ElementType& type = *def.type;
  // A transformation (even on a marker: shift_s is an exact drift in and out) is applied around
  // the element by the framework: such elements are never touched.
  if (def.transform >= 0 || type.is_collective() || !from_builtin_plugin(type)) return Role::Keep;
  // Marker_track is empty (elements/marker.h; xtrack Marker).
  if (type.name == "Marker" && !type.thick) return Role::Remove;
  // Drift_track / DriftExact_track: x += L x', y += L y', zeta += L dzeta with x', y', dzeta
  // functions of px, py, delta, rvv alone, which a drift does not change: two drifts of lengths
  // L1 and L2 are one of length L1 + L2 (elements/drift.h, drift_exact.h).
  if ((type.name == "Drift" || type.name == "DriftExact") && type.thick && has_input_fields(type, {"length"}))
    // A drift of length 0 moves nothing (x += x' 0): xtrack's remove_zero_length_drifts.
    return lattice.field(definition, "length") == 0.0 ? Role::Inactive : Role::Drift;
  // Multipole_track: px -= Re S(x, y), py += Im S(x, y), S linear in knl and ksl. Without bending
  // (hxl = 0) there are no curvature terms and x, y, delta, zeta are untouched, so two adjacent
  // kicks are one with knl1 + knl2, ksl1 + ksl2 (elements/multipole.h). With hxl != 0 the terms
  // h knl[0] x and h knl[1] (...) with h = hxl / length only add up for equal h: xtrack's
  // merge_consecutive_multipoles merges only hxl == 0 kicks, and so does this. A radiating kick
  // (elements/radiation.h) loses energy by the square of its kick over its length: kept as it is.
  if (type.name == "Multipole" && !type.thick &&
      has_input_fields(type, {"knl", "ksl", "hxl", "length", "order", "radiation", "radiation_seed"}) &&
      lattice.field(definition, "hxl") == 0.0 && lattice.field(definition, "radiation") == 0.0) {
    // All of knl and ksl zero (and no bending): the kick adds zero to px and py, the element is the
    // identity (up to the sign of a zero): xtrack's remove_inactive_multipoles.
    const unsigned count = type.find_field("knl")->count;
    bool inactive = true;
    for (unsigned k = 0; k < count; ++k)
      inactive = inactive && lattice.field(definition, "knl", k) == 0.0 && lattice.field(definition, "ksl", k) == 0.0;
    return inactive ? Role::Inactive : Role::Kick;
  }
  return Role::Keep;
}

/// The input fields of a definition as define() reads them (the values it holds now), with the
/// host-only JSON fields of a collective element from its definition text.
json definition_fields(const Lattice& lattice, uint32_t definition) {
  const ElementDefinition& def = lattice.definitions()[definition];
  const json given = def.json.empty() ? json::object() : json::parse(def.json);
  json fields = json::object();
  for (const FieldInfo& f : def.type->fields) {
    if (f.derived) continue;
    if (f.host_only()) {
      if (given.contains(f.name)) fields[f.name] = given.at(f.name);
      continue;
    }
    auto value = [&](unsigned k) {
      const double v = lattice.field(definition, f.name, k);
      return f.type == FT_FIELD_INT32 ? json(static_cast<int32_t>(v)) : json(v);
    };
    if (f.count == 1) {
      fields[f.name] = value(0);
    } else {
      json entries = json::array();
      for (unsigned k = 0; k < f.count; ++k) entries.push_back(value(k));
      fields[f.name] = entries;
    }
  }
  return fields;
}

/// A run of consecutive sequence entries that becomes one entry of the optimized sequence.
struct Run {
  Role role = Role::Keep;
  const ElementType* type = nullptr;
  std::vector<uint32_t> definitions;  // original definition of each part, in order
  size_t first_index = 0;             // original sequence index of the first and last part
  size_t last_index = 0;
};

class Optimizer {
 public:
  explicit Optimizer(const Lattice& original)
      : m_original(original), m_optimized(original.reference()), m_copies(original.definitions().size(), -1) {
    m_optimized.set_limits(original.limits());
    m_optimized.set_source_file(original.source_file());
  }

  /// The optimized lattice, with `roles` by definition index of the original.
  Lattice run(const std::vector<Role>& roles, OptimizeReport& report) {
    const auto& sequence = m_original.sequence();

    report = OptimizeReport{};
    report.elements_before = sequence.size();
    Run current;  // the run being collected
    for (size_t i = 0; i < sequence.size(); ++i) {
      const uint32_t d = sequence[i].definition;
      const Role role = roles[d];
      if (role == Role::Remove || role == Role::Inactive) {
        ++(role == Role::Remove ? report.markers_removed : report.inactive_removed);
        continue;
      }
      const ElementType* type = m_original.definitions()[d].type;
      const bool joins =
          !current.definitions.empty() && role != Role::Keep && role == current.role && type == current.type;
      if (!joins) {
        flush(current, report);
        current = Run{role, type, {}, i, i};
      }
      current.definitions.push_back(d);
      current.last_index = i;
    }
    flush(current, report);
    if (m_optimized.sequence().empty() && !sequence.empty()) {
      // Only removed elements: a lattice needs one element; keep the first.
      --(roles[sequence[0].definition] == Role::Remove ? report.markers_removed : report.inactive_removed);
      append(copy_of(sequence[0].definition), 0, 0, report);
    }
    report.elements_after = m_optimized.sequence().size();
    m_optimized.prepare();
    return std::move(m_optimized);
  }

 private:
  void append(uint32_t definition, size_t first_index, size_t last_index, OptimizeReport& report) {
    m_optimized.append(definition);
    report.first_original_index.push_back(first_index);
    report.last_original_index.push_back(last_index);
  }

  void flush(const Run& run, OptimizeReport& report) {
    if (run.definitions.empty()) return;
    if (run.definitions.size() == 1) {
      append(copy_of(run.definitions[0]), run.first_index, run.last_index, report);
      return;
    }
    const size_t absorbed = run.definitions.size() - 1;
    (run.role == Role::Drift ? report.drifts_merged : report.thin_kicks_merged) += absorbed;
    auto found = m_merged.find(run.definitions);
    if (found == m_merged.end()) {
      const json fields = run.role == Role::Drift ? merged_drift(run) : merged_kick(run);
      const std::string name = unique_name(run);
      const uint32_t d = m_optimized.define(name, *run.type, fields, where(name));
      found = m_merged.emplace(run.definitions, d).first;
    }
    append(found->second, run.first_index, run.last_index, report);
  }

  /// One drift of the summed length, summed in sequence order.
  json merged_drift(const Run& run) const {
    double length = 0.0;
    for (uint32_t d : run.definitions) length += m_original.field(d, "length");
    return json{{"length", length}};
  }

  /// One thin kick with the summed integrated strengths, summed in sequence order (hxl = 0 on every
  /// part). The order is automatic (-1) if it is on every part, else the highest order used by a
  /// part; `length` (used only with hxl != 0) is the summed length of the originating magnets.
  json merged_kick(const Run& run) const {
    const unsigned count = run.type->find_field("knl")->count;
    std::vector<double> knl(count, 0.0), ksl(count, 0.0);
    double length = 0.0;
    bool automatic_order = true;
    int highest_order = 0;
    for (uint32_t d : run.definitions) {
      for (unsigned k = 0; k < count; ++k) {
        knl[k] += m_original.field(d, "knl", k);
        ksl[k] += m_original.field(d, "ksl", k);
      }
      length += m_original.field(d, "length");
      automatic_order = automatic_order && m_original.field(d, "order") < 0;
      highest_order = std::max(highest_order, static_cast<int>(m_original.field(d, "kick_order")));
    }
    return json{
        {"knl", knl}, {"ksl", ksl}, {"hxl", 0.0}, {"length", length}, {"order", automatic_order ? -1 : highest_order}};
  }

  /// "A+B+C", or "A+B+...+Z" for more than four parts; "#2", "#3", ... appended while the name is
  /// taken in the original lattice or the optimized one.
  std::string unique_name(const Run& run) const {
    const auto& defs = m_original.definitions();
    std::string base;
    if (run.definitions.size() <= 4) {
      for (uint32_t d : run.definitions) base += (base.empty() ? "" : "+") + defs[d].name;
    } else {
      base = fmt::format("{}+{}+...+{}", defs[run.definitions[0]].name, defs[run.definitions[1]].name,
                         defs[run.definitions.back()].name);
    }
    std::string name = base;
    for (int k = 2; m_original.find_definition(name) >= 0 || m_optimized.find_definition(name) >= 0; ++k)
      name = fmt::format("{}#{}", base, k);
    return name;
  }

  /// The optimized lattice's copy of an original definition (made on first use).
  uint32_t copy_of(uint32_t definition) {
    if (m_copies[definition] >= 0) return static_cast<uint32_t>(m_copies[definition]);
    const ElementDefinition& def = m_original.definitions()[definition];
    const uint32_t copy =
        m_optimized.define(def.name, *def.type, definition_fields(m_original, definition), where(def.name));
    if (const ElementTransformInput* transform = m_original.transform(definition))
      m_optimized.set_transform(copy, *transform);
    m_copies[definition] = copy;
    return copy;
  }

  InputLocation where(const std::string& name) const {
    InputLocation at(m_original.source_file());
    at.element_name = name;
    return at;
  }

  const Lattice& m_original;
  Lattice m_optimized;
  std::vector<int64_t> m_copies;                       // original definition -> copy, -1: none yet
  std::map<std::vector<uint32_t>, uint32_t> m_merged;  // parts -> merged definition
};

}  // namespace

std::string OptimizeReport::summary() const {
  return fmt::format(
      "optimized: {} -> {} elements (markers removed {}, inactive kicks and zero-length drifts removed {}, drifts "
      "merged {}, thin kicks merged {})",
      elements_before, elements_after, markers_removed, inactive_removed, drifts_merged, thin_kicks_merged);
}

Lattice optimize_for_tracking(const Lattice& lattice, OptimizeReport* report) {
  std::vector<Role> roles(lattice.definitions().size());
  for (uint32_t d = 0; d < roles.size(); ++d) roles[d] = role_of(lattice, d);
  OptimizeReport local;
  return Optimizer(lattice).run(roles, report ? *report : local);
}

std::vector<Lattice> optimize_variants_for_tracking(const std::vector<const Lattice*>& variants,
                                                    OptimizeReport* report) {
  std::vector<Lattice> optimized;
  if (variants.empty()) return optimized;
  const Lattice& base = *variants[0];
  // One role per definition for all: removed or merged only where every variant allows it.
  std::vector<Role> roles(base.definitions().size());
  for (uint32_t d = 0; d < roles.size(); ++d) roles[d] = role_of(base, d);
  for (size_t v = 1; v < variants.size(); ++v) {
    const Lattice& variant = *variants[v];
    bool same = variant.definitions().size() == base.definitions().size() &&
                variant.sequence().size() == base.sequence().size();
    for (size_t i = 0; same && i < base.sequence().size(); ++i)
      same = variant.sequence()[i].definition == base.sequence()[i].definition;
    for (uint32_t d = 0; same && d < roles.size(); ++d)
      same = variant.definitions()[d].type == base.definitions()[d].type;
    if (!same)
      throw Error(
          fmt::format("optimize_variants_for_tracking: variant {} ({}) has another element sequence than "
                      "variant 0; variants must share definitions and sequence",
                      v, variant.source_file()));
    for (uint32_t d = 0; d < roles.size(); ++d)
      if (role_of(variant, d) != roles[d]) roles[d] = Role::Keep;
  }
  optimized.reserve(variants.size());
  OptimizeReport local;
  for (const Lattice* variant : variants) optimized.push_back(Optimizer(*variant).run(roles, report ? *report : local));
  return optimized;
}

void map_lost_elements_to_original(Particles& particles, const OptimizeReport& report) {
  for (size_t i = 0; i < particles.size(); ++i) {
    int64_t& element = particles.lost_element[i];
    if (particles.state[i] > 0 || element < 0 || static_cast<size_t>(element) >= report.first_original_index.size())
      continue;
    const bool turn_end_check = particles.state[i] == kLostOnTurnLimit || particles.state[i] == kLostNotFinite;
    element = turn_end_check ? static_cast<int64_t>(report.elements_before) - 1
                             : static_cast<int64_t>(report.first_original_index[static_cast<size_t>(element)]);
  }
}

}  // namespace ft
