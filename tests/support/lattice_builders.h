// Lattices built in tests: one element of a type (fields from JSON), or a bundled file.
#pragma once
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "fusetrack/space_charge_install.h"
#include "support/registry.h"

namespace ft::test {

/// A lattice of a single element of `type` with the given fields, protons at p0c = 2 GeV
/// unless another reference is given.
inline Lattice single_element_lattice(const std::string& type, const nlohmann::ordered_json& fields,
                                      ReferenceParticle ref = ReferenceParticle{938272088.16, 1.0, 2e9}) {
  Lattice lattice(ref);
  const uint32_t d =
      lattice.define("element", builtin_registry().get(type, InputLocation("test")), fields, InputLocation("test"));
  lattice.append(d);
  lattice.prepare();
  return lattice;
}

/// Fields that make a valid instance of any type: every required field and every optional
/// double set to `value` (the second form satisfies types whose prepare() needs more than the
/// required fields, such as a cavity's frequency).
inline nlohmann::ordered_json sample_fields(const ElementType& type, double value, bool optional_too) {
  nlohmann::ordered_json f = nlohmann::ordered_json::object();
  for (const auto& field : type.fields) {
    if (field.derived || field.count != 1) continue;
    if (field.required || (optional_too && field.type == FT_FIELD_DOUBLE)) {
      if (field.type == FT_FIELD_INT32)
        f[field.name] = 1;
      else
        f[field.name] = value;
    }
  }
  return f;
}

/// Candidate field sets for a valid instance of `type`, tried in order: the required fields at
/// `value`, then one optional double at a time; for a polygon aperture (n_vertices with
/// x_vertices/y_vertices arrays) the square of half-width `value`; for the 6D beam-beam lens one partner
/// slice of size `value`.
inline std::vector<nlohmann::ordered_json> sample_candidates(const ElementType& type, double value) {
  std::vector<nlohmann::ordered_json> candidates = {sample_fields(type, value, false)};
  for (const auto& f : type.fields)
    if (!f.required && !f.derived && f.count == 1 && f.type == FT_FIELD_DOUBLE) {
      candidates.push_back(candidates.front());
      candidates.back()[f.name] = value;
    }
  auto has = [&](const char* name) {
    return std::any_of(type.fields.begin(), type.fields.end(), [&](const auto& f) { return f.name == name; });
  };
  if (has("n_vertices") && has("x_vertices") && has("y_vertices")) {
    nlohmann::ordered_json square = candidates.front();
    square["n_vertices"] = 4;
    square["x_vertices"] = {-value, value, value, -value};
    square["y_vertices"] = {-value, -value, value, value};
    candidates.push_back(square);
  }
  if (has("num_slices_other_beam") && has("slices_other_beam_Sigma_11_star")) {  // the 6D beam-beam lens
    nlohmann::ordered_json lens = candidates.front();
    lens["num_slices_other_beam"] = 1;
    lens["slices_other_beam_num_particles"] = {1e10};
    lens["slices_other_beam_Sigma_11_star"] = {value * value};
    lens["slices_other_beam_Sigma_33_star"] = {0.5 * value * value};
    candidates.push_back(lens);
  }
  return candidates;
}

inline nlohmann::ordered_json parse_bundled(const std::string& name) {
  return parse_json_file(source_path("lattices/" + name));
}

inline Lattice bundled_lattice(const std::string& name) {
  return load_lattice(source_path("lattices/" + name), builtin_registry());
}

/// The bundled 160 MeV ring with `elements` frozen space-charge elements installed (emittances 2 and
/// 1.5 um, sigma_zeta 8 m, rms delta 1e-3, 1.5e11 protons), as `fusetrack spacecharge install` makes it.
inline Lattice space_charge_ring(int elements) {
  const Lattice bare = bundled_lattice("space_charge_ring.json");
  SpaceChargeInstallOptions o;
  o.elements = elements;
  o.intensity = 1.5e11;
  o.eps_nx = 2e-6;
  o.eps_ny = 1.5e-6;
  o.sigma_zeta = 8.0;
  o.delta_rms = 1e-3;
  const InstalledSpaceCharge sc = install_space_charge(bare, o, builtin_registry(), "ring");
  return lattice_from_json(sc.lattice, "ring+sc", builtin_registry());
}

}  // namespace ft::test
