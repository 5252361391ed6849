// Lattice variants of the bundled sextupole ring for the variant tests (CPU and GPU suites): a
// nominal variant, per-instance errors with a misalignment on one instance only, a family change
// (qd[3], sd[5] shifted and rolled, qf_half[7]; sf_.*), and the DA configuration they are scanned with.
#pragma once
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "fusetrack/da.h"
#include "fusetrack/variants.h"
#include "support/lattice_builders.h"

namespace ft::test {

/// The variants (tests/input/fixtures/variants/sextupole_ring_variants.json, also read by `fusetrack codegen
/// --variants` in CTest).
inline std::string sextupole_ring_variants_path() {
  return std::string(FT_SOURCE_DIR) + "/tests/input/fixtures/variants/sextupole_ring_variants.json";
}

inline nlohmann::ordered_json sextupole_ring_variants_doc() {
  std::ifstream in(sextupole_ring_variants_path());
  return nlohmann::ordered_json::parse(in);
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
