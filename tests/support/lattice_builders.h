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
/// x_vertices/y_vertices arrays) the square of half-width `value`.
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
  // Beam-beam lenses: a partner bunch of 1e11 protons, 1 cm x 5 mm (elliptic, the Bassetti-Erskine path), tried
  // first so that the kick is not negligible; the 6D lens with two slices, hourglass, a coupled slice and a
  // crossing angle.
  if (has("other_beam_Sigma_11") && has("other_beam_num_particles")) {
    nlohmann::ordered_json lens = candidates.front();
    lens["other_beam_num_particles"] = 1e11;
    lens["other_beam_q0"] = 1.0;
    lens["other_beam_Sigma_11"] = 1e-4;
    lens["other_beam_Sigma_33"] = 2.5e-5;
    lens["other_beam_shift_x"] = 1e-3;
    lens["post_subtract_px"] = 1e-7;
    candidates.insert(candidates.begin(), lens);
  }
  if (has("num_slices_other_beam") && has("slices_other_beam_Sigma_11_star")) {
    nlohmann::ordered_json lens = candidates.front();
    lens["num_slices_other_beam"] = 2;
    lens["other_beam_q0"] = 1.0;
    lens["phi"] = 2e-3;
    lens["alpha"] = 0.3;
    lens["slices_other_beam_num_particles"] = {5e10, 5e10};
    lens["slices_other_beam_zeta_center_star"] = {-0.05, 0.05};
    lens["slices_other_beam_x_center_star"] = {1e-4, -1e-4};
    lens["slices_other_beam_Sigma_11_star"] = {1e-4, 1.2e-4};
    lens["slices_other_beam_Sigma_12_star"] = {-1e-6, -1e-6};
    lens["slices_other_beam_Sigma_13_star"] = {0.0, 1e-5};
    lens["slices_other_beam_Sigma_22_star"] = {1e-6, 1e-6};
    lens["slices_other_beam_Sigma_33_star"] = {2.5e-5, 2.5e-5};
    lens["slices_other_beam_Sigma_44_star"] = {1e-6, 1e-6};
    lens["ref_shift_pzeta"] = 1e-5;
    candidates.insert(candidates.begin(), lens);
  }
  if (has("n_vertices") && has("x_vertices") && has("y_vertices")) {
    nlohmann::ordered_json square = candidates.front();
    square["n_vertices"] = 4;
    square["x_vertices"] = {-value, value, value, -value};
    square["y_vertices"] = {-value, -value, value, value};
    candidates.push_back(square);
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
