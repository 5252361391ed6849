// Lattice variants of the bundled sextupole ring for the variant tests (CPU and GPU suites): a
// nominal variant, per-instance errors with a misalignment on one instance only, a family change,
// and the DA configuration they are scanned with.
#pragma once
#include <nlohmann/json.hpp>

#include "fusetrack/da.h"
#include "fusetrack/variants.h"
#include "support/lattice_builders.h"

namespace ft::test {

inline nlohmann::ordered_json sextupole_ring_variants_doc() {
  return nlohmann::ordered_json::parse(R"({
    "fusetrack_variants": 1,
    "variants": [
      {"name": "nominal"},
      {"name": "errors", "elements": [
         {"name": "qd[3]", "add": {"knl": [0.0, 0.004]}},
         {"name": "sd[5]", "set": {"shift_x": 1e-3, "rot_s_rad": 0.02}},
         {"name": "qf_half[7]", "add": {"knl": [0.0, 0.0, 0.8]}}]},
      {"name": "sextupoles", "elements": [{"match": "sf_.*", "add": {"knl": [0.0, 0.0, 0.7]}}]}
    ]})");
}

inline LatticeVariants sextupole_ring_variants() {
  return variants_from_json(bundled_lattice("sextupole_rf_ring.json"), sextupole_ring_variants_doc(),
                            "sextupole_ring_variants.json");
}

/// A scan that loses part of its particles at the ring's aperture within its turns.
inline DaConfig variant_study_config(int64_t turns) {
  DaConfig c;
  c.turns = turns;
  c.angles = 7;
  c.amplitudes = 16;
  c.amplitude_min = 0.002;
  c.amplitude_max = 0.04;
  c.deltas = {0.0, 1e-3};
  c.around_closed_orbit = true;
  return c;
}

}  // namespace ft::test
