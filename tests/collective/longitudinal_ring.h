// A 160 m proton ring for the longitudinal tests: two thin-quadrupole FODO cells (60 deg per
// cell: sin(mu / 2) = L k1l / 2 with L = 40 m, k1l = 0.025 1/m; no bends, so
// eta = -1/gamma^2 exactly to first order: the slip comes from the velocity alone), one RF cavity
// and, optionally, a LongitudinalImpedance right after it (both kicks at one place, so the
// linear one-turn map is exactly drift(|eta| C) x kick(total slope)).
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "support/registry.h"

namespace ft::test {

struct LongitudinalRing {
  double p0c = 2e9;          // [eV]
  double voltage = 1e6;      // [V]
  double harmonic = 4;
  double lag = 0.0;          // [deg] below transition: 0 is stable
  double intensity = 0.0;    // protons per bunch; 0: no impedance element
  double z_over_n = 0.0;     // [Ohm] inductive impedance Im Z / n
  int n_slices = 256;
  double zeta_cut = 6.0;     // slicing over [-zeta_cut, zeta_cut] [m]
  std::string method = "frequency";
};

inline nlohmann::ordered_json longitudinal_ring_json(const LongitudinalRing& o) {
  using json = nlohmann::ordered_json;
  json elements = {{"qf_half", {{"type", "Multipole"}, {"knl", {0.0, 0.0125}}}},
                   {"qd", {{"type", "Multipole"}, {"knl", {0.0, -0.025}}}},
                   {"d", {{"type", "Drift"}, {"length", 40.0}}},
                   {"rf", {{"type", "Cavity"}, {"voltage", o.voltage}, {"harmonic", o.harmonic}, {"lag", o.lag}}}};
  json sequence = {"qf_half", "d", "qd", "d", "qf_half", "rf"};
  if (o.intensity > 0.0) {
    elements["impedance"] = {{"type", "LongitudinalImpedance"},
                             {"n_slices", o.n_slices},
                             {"zeta_min", -o.zeta_cut},
                             {"zeta_max", o.zeta_cut},
                             {"intensity", o.intensity},
                             {"method", o.method},
                             {"deposition", "linear"},
                             {"sources", json::array({{{"type", "InductiveImpedance"}, {"z_over_n", o.z_over_n}}})}};
    sequence.push_back("impedance");
  }
  for (const char* e : {"qf_half", "d", "qd", "d", "qf_half"}) sequence.push_back(e);
  return {{"fusetrack_lattice", 1},
          {"description", "longitudinal test ring"},
          {"reference", {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", o.p0c}}},
          {"elements", elements},
          {"sequence", sequence}};
}

/// |a - b| / |b|: a relative difference (doctest::Approx scales its epsilon by 1 + |value|, which
/// is meaningless for values far below 1).
inline double rel_diff(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

inline Lattice longitudinal_ring(const LongitudinalRing& o) {
  return lattice_from_json(longitudinal_ring_json(o), "longitudinal_ring", builtin_registry());
}

}  // namespace ft::test
