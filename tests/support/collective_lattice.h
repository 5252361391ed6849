// A compact proton ring with RF, an aperture and a longitudinal impedance, for the collective
// tests of every backend: two thin-quadrupole FODO cells of 80 m (160 m, phase advance 47 deg per
// cell from sin(mu/2) = L k1l / 2 = 0.4; eta = -1/gamma^2 = -0.18 at p0c = 2 GeV, no bends), a harmonic-4 cavity (below transition: lag 0 is stable), a circular
// aperture that removes the largest transverse amplitudes, and one LongitudinalImpedance.
#pragma once
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "fusetrack/particles.h"
#include "support/registry.h"

namespace ft::test {

struct CollectiveRingOptions {
  std::string method = "frequency";  // "frequency" | "time"
  std::string deposition = "linear"; // "linear" | "nearest"
  int n_slices = 256;
  double intensity = 2e12;             // protons per bunch
  double r_shunt = 2e3;                // [Ohm] broadband resonator (about 15 kV induced, 15% of the RF)
  double resonator_frequency = 60e6;   // [Hz]
  double q = 1.0;
  bool narrowband = true;              // add a narrowband resonator with multi-turn memory
  double voltage = 1e5;                // [V] RF
};

inline nlohmann::ordered_json collective_ring_json(const CollectiveRingOptions& o = {}) {
  using json = nlohmann::ordered_json;
  json sources = json::array();
  sources.push_back({{"type", "Resonator"}, {"r_shunt", o.r_shunt}, {"frequency", o.resonator_frequency}, {"q", o.q}});
  if (o.narrowband)  // 20 turns of decay: alpha T0 = pi f_r T0 / Q with T0 = 0.59 us
    sources.push_back({{"type", "Resonator"}, {"r_shunt", 1e3}, {"frequency", 13.6e6}, {"q", 500.0}});
  json doc = {
      {"fusetrack_lattice", 1},
      {"description", "collective test ring"},
      {"reference", {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", 2e9}}},
      {"elements",
       {{"qf_half", {{"type", "Multipole"}, {"knl", {0.0, 0.01}}}},
        {"qd", {{"type", "Multipole"}, {"knl", {0.0, -0.02}}}},
        {"d", {{"type", "Drift"}, {"length", 40.0}}},
        {"rf", {{"type", "Cavity"}, {"voltage", o.voltage}, {"harmonic", 4}, {"lag", 0.0}}},
        {"aperture", {{"type", "LimitEllipse"}, {"a", 0.02}, {"b", 0.02}}},
        {"impedance",
         {{"type", "LongitudinalImpedance"},
          {"n_slices", o.n_slices},
          {"zeta_min", -12.0},
          {"zeta_max", 12.0},
          {"intensity", o.intensity},
          {"method", o.method},
          {"deposition", o.deposition},
          {"sources", sources}}}}},
      {"sequence", {"qf_half", "d", "qd", "d", "qf_half", "rf", "impedance", "qf_half", "d", "qd", "d", "qf_half",
                    "aperture"}}};
  return doc;
}

inline Lattice collective_ring(const CollectiveRingOptions& o = {}) {
  return lattice_from_json(collective_ring_json(o), "collective_ring", builtin_registry());
}

/// A Gaussian bunch (sigma_zeta 2 m, sigma_delta 1e-3) with transverse offsets of rms 8 mm, so
/// that the aperture takes some particles; deterministic.
inline Particles collective_bunch(const Lattice& lattice, size_t n, uint64_t seed = 7) {
  Particles p(n, lattice.reference().beta0());
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 2.0), d(0.0, 1e-3), t(0.0, 8e-3);
  for (size_t i = 0; i < n; ++i) {
    const double x = t(rng), px = 1e-4 * t(rng), y = t(rng), py = 1e-4 * t(rng);
    const double zeta = z(rng), delta = d(rng);
    p.set(i, x, px, y, py, zeta, delta);
  }
  return p;
}

}  // namespace ft::test
