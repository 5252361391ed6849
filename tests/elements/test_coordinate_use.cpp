// Each built-in element type's declared coordinates (FT_ELEMENT_COORDINATES) against what its track
// function does on the CPU: a coordinate it does not declare written comes out bit for bit as it went
// in, and changing a coordinate it does not declare read changes nothing it writes nor the state. A
// declaration that is too small would make the collective GPU kernels, which load and store only the
// declared coordinates, give wrong results (codegen.h collective_turn_traffic).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"
#include "fusetrack/registry.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_coordinate_use.
namespace test_coordinate_use {

namespace {

constexpr const char* kNames[9] = {"x", "px", "y", "py", "zeta", "delta", "ptau", "rpp", "rvv"};

std::vector<double>& column(ft::Particles& p, int c) {
  std::vector<double>* columns[9] = {&p.x, &p.px, &p.y, &p.py, &p.zeta, &p.delta, &p.ptau, &p.rpp, &p.rvv};
  return *columns[c];
}

/// Particles around the closed orbit of a ring, ptau, rpp and rvv consistent with delta.
ft::Particles sample_particles(double beta0, size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  ft::Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i)
    p.set(i, 2e-3 * u(rng), 2e-4 * u(rng), 2e-3 * u(rng), 2e-4 * u(rng), 0.3 * u(rng), 1e-3 * u(rng));
  return p;
}

/// Runs the element's CPU track function on a copy of `in` (no global limits: only the element acts).
ft::Particles track_once(const ft::ElementType& type, const unsigned char* params, const ft::Particles& in) {
  ft::Particles out = in;
  ft_particle_block b = out.block(0, out.size());
  b.limit_x = INFINITY;
  b.limit_y = INFINITY;
  ft_error error{};
  REQUIRE_MESSAGE(type.track_block(params, &b, &error) == 0, type.name, ": ", error.message);
  return out;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// Checks one element (type and parameters) against its declaration; returns false on a mismatch.
void check_declaration(const ft::ElementType& type, const unsigned char* params, double beta0,
                       const std::string& where) {
  const ft::Particles in = sample_particles(beta0, 64, 7);
  const ft::Particles out = track_once(type, params, in);
  for (int c = 0; c < 9; ++c) {
    if ((type.coordinates_written >> c) & 1u) continue;
    CHECK_MESSAGE(same_bits(column(const_cast<ft::Particles&>(in), c), column(const_cast<ft::Particles&>(out), c)),
                  where, ": ", type.name, " changes ", std::string(kNames[c]), " but does not declare it written");
  }
  for (int c = 0; c < 9; ++c) {
    if ((type.coordinates_read >> c) & 1u) continue;
    ft::Particles changed = in;
    for (double& v : column(changed, c)) v = v * 1.5 + (c >= 7 ? 0.25 : 1e-3);
    const ft::Particles out2 = track_once(type, params, changed);
    for (int w = 0; w < 9; ++w) {
      if (!((type.coordinates_written >> w) & 1u)) continue;
      CHECK_MESSAGE(same_bits(column(const_cast<ft::Particles&>(out), w), column(const_cast<ft::Particles&>(out2), w)),
                    where, ": ", type.name, "'s ", std::string(kNames[w]), " depends on ", std::string(kNames[c]),
                    ", which it does not declare read");
    }
    CHECK_MESSAGE(out.state == out2.state, where, ": ", type.name, "'s losses depend on ", std::string(kNames[c]),
                  ", which it does not declare read");
  }
}

}  // namespace

TEST_CASE("declared coordinates: every built-in element type's declaration matches its track function") {
  ft::ElementRegistry& registry = ft::test::builtin_registry();
  std::vector<std::string> files;
  for (const char* name :
       {"reference_sequence.json", "mba_light_source.json", "sextupole_rf_ring.json", "fodo_ring.json",
        "space_charge_ring.json", "thin_collider_12k.json", "longitudinal_only_bench_ring.json"})
    files.push_back(std::string(FT_SOURCE_DIR) + "/lattices/" + name);
  for (const char* name : {"clic_damping_ring.json", "psb_injection.json"}) {
    const std::string path = std::string(FT_SHARED_DIR) + "/lattices/xsuite/" + name;
    if (std::filesystem::exists(path)) files.push_back(path);
  }
  // The types no bundled lattice has, with apertures that cut into the sampled particles.
  files.push_back(ft::test::write_temp_file("coordinate_use.json", R"({
    "fusetrack_lattice": 1,
    "reference": {"mass0": 938272088.16, "q0": 1, "p0c": 2e9},
    "elements": {
      "corrector": {"type": "Corrector", "length": 0.3, "hkick": 1e-4, "vkick": -2e-4},
      "drift_exact": {"type": "DriftExact", "length": 1.5},
      "edge": {"type": "DipoleEdge", "k": 0.05, "e1": 0.1, "hgap": 0.03, "fint": 0.5},
      "polygon": {"type": "LimitPolygon", "n_vertices": 4, "x_vertices": [-1.5e-3, 1.5e-3, 1.5e-3, -1.5e-3],
                  "y_vertices": [-1.5e-3, -1.5e-3, 1.5e-3, 1.5e-3]},
      "racetrack": {"type": "LimitRacetrack", "min_x": -1.8e-3, "max_x": 1.8e-3, "min_y": -1.8e-3, "max_y": 1.8e-3,
                    "a": 5e-4, "b": 5e-4},
      "rect": {"type": "LimitRect", "min_x": -1.9e-3, "max_x": 1.9e-3, "min_y": -1.9e-3, "max_y": 1.9e-3},
      "rect_ellipse": {"type": "LimitRectEllipse", "max_x": 1.9e-3, "max_y": 1.9e-3, "a": 2.1e-3, "b": 2.1e-3},
      "rf_multipole": {"type": "RFMultipole", "voltage": 1e5, "frequency": 4e8, "lag": 30, "knl": [1e-3, 0.02, 0.5],
                       "ksl": [0, 0.01], "pn": [10, 20, 30], "ps": [5, 15]},
      "s_rotation": {"type": "SRotation", "angle": 0.3},
      "sextupole": {"type": "Sextupole", "length": 0.2, "k2": 30.0},
      "space_charge": {"type": "SpaceChargeBiGaussian", "length": 1.0, "number_of_particles": 1e11,
                       "sigma_z": 0.3, "sigma_x": 1e-3, "sigma_y": 8e-4},
      "shift": {"type": "XYShift", "dx": 1e-4, "dy": -2e-4},
      "lens_2d": {"type": "BeamBeamBiGaussian2D", "other_beam_q0": 1, "other_beam_num_particles": 1e11,
                  "other_beam_Sigma_11": 1e-6, "other_beam_Sigma_33": 6e-7, "other_beam_Sigma_13": 1e-7,
                  "other_beam_shift_x": 1e-4, "post_subtract_px": 1e-7}
    },
    "sequence": ["corrector", "drift_exact", "edge", "polygon", "racetrack", "rect", "rect_ellipse", "rf_multipole",
                 "s_rotation", "sextupole", "space_charge", "shift", "lens_2d"]
  })"));
  std::set<std::string> checked;
  for (const std::string& file : files) {
    const ft::Lattice lattice = ft::load_lattice(file, registry);
    const double beta0 = lattice.reference().beta0();
    std::set<uint32_t> seen;
    for (const ft::SequenceEntry& entry : lattice.sequence()) {
      if (!seen.insert(entry.definition).second) continue;
      const ft::ElementDefinition& def = lattice.definitions()[entry.definition];
      if (def.type->is_collective() || !def.type->coordinates_declared) continue;
      check_declaration(*def.type, lattice.params(entry.definition), beta0,
                        std::filesystem::path(file).filename().string() + " " + def.name);
      checked.insert(def.type->name);
    }
  }
  // Every declared single-particle type must have been checked on a real element somewhere above.
  for (const ft::ElementType* type : registry.types()) {
    if (type->is_collective() || !type->coordinates_declared) continue;
    CHECK_MESSAGE(checked.count(type->name) == 1, type->name,
                  " declares its coordinates but no bundled lattice has one: add one to a checked lattice");
  }
}

TEST_CASE("declared coordinates: an undeclared type reads and writes every coordinate") {
  ft_element_type_desc desc{};
  desc.name = "Undeclared";
  desc.track_function = "Undeclared_track";
  desc.header = "undeclared.h";
  ft::ElementType type = ft::element_type_from_descriptor(desc);
  CHECK_FALSE(type.coordinates_declared);
  CHECK(type.coordinates_read == FT_COORD_ALL);
  CHECK(type.coordinates_written == FT_COORD_ALL);
  desc.coordinates_read = FT_COORD_DECLARED | FT_COORD_ZETA;
  desc.coordinates_written = FT_COORD_ZETA;
  type = ft::element_type_from_descriptor(desc);
  CHECK(type.coordinates_declared);
  CHECK(type.coordinates_read == FT_COORD_ZETA);
  CHECK(type.coordinates_written == FT_COORD_ZETA);
}

}  // namespace test_coordinate_use
