// The coordinates the collective kernels move (codegen.h collective_turn_traffic), from the element
// types' declarations: a longitudinal-only ring moves zeta and the energy, a 6D ring every coordinate.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "fusetrack/codegen.h"
#include "fusetrack/device/particle.h"
#include "fusetrack/lattice.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_coordinate_traffic.
namespace test_coordinate_traffic {

using namespace ft;

TEST_CASE("collective kernels: the bytes per particle-turn follow the elements' declared coordinates") {
  ElementRegistry& registry = ft::test::builtin_registry();
  const std::string dir = std::string(FT_SOURCE_DIR) + "/lattices/";
  {
    // LongitudinalDrift (zeta; delta, rvv), Cavity and the impedance kick (zeta, ptau; the energy),
    // the deposit (zeta): one pass loads zeta, delta and ptau, recomputes rpp and rvv from them, and
    // stores zeta, delta and ptau.
    const Lattice lattice = load_lattice(dir + "longitudinal_only_bench_ring.json", registry);
    REQUIRE(collective_energy_is_derived(lattice));
    const CollectiveTurnTraffic t = collective_turn_traffic(lattice);
    CHECK(t.wrap.loaded == (FT_COORD_ZETA | FT_COORD_DELTA | FT_COORD_PTAU));
    CHECK(t.wrap.stored == (FT_COORD_ZETA | FT_COORD_DELTA | FT_COORD_PTAU));
    CHECK(t.wrap.derived_energy);
    CHECK(t.bytes_per_turn() == 8.0 * (3 + 3) + 4.0);
    CHECK(t.bytes_per_turn_all() == 152.0);
    CHECK(t.bytes_per_turn_needed() == 8.0 * (2 + 2) + 4.0);  // zeta and delta, read and written
  }
  {
    // Thin quadrupoles, drifts and an aperture: the physics reads and writes all six coordinates;
    // rpp and rvv are recomputed.
    const Lattice lattice = load_lattice(dir + "longitudinal_bench_ring.json", registry);
    const CollectiveTurnTraffic t = collective_turn_traffic(lattice);
    const uint32_t moved = FT_COORD_ALL & ~static_cast<uint32_t>(FT_COORD_RPP | FT_COORD_RVV);
    CHECK(t.wrap.loaded == moved);
    CHECK(t.wrap.stored == moved);
    CHECK(t.bytes_per_turn() == 8.0 * (7 + 7) + 4.0);  // the state is stored only on a loss
    CHECK(t.bytes_per_turn_needed() == 8.0 * (6 + 6) + 4.0);
  }
}

TEST_CASE("derived energy: rpp and rvv recomputed from delta and ptau are the bits every writer leaves") {
  // The contract the collective kernels rely on when they load only delta and ptau
  // (collective_energy_is_derived): update_delta and add_to_energy end with set_derived_energy.
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto uniform = [&] {  // xorshift64*, in [-1, 1)
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return static_cast<double>((state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-52 - 1.0;
  };
  size_t checked = 0;
  for (double beta0 : {0.0316, 0.9, 0.999999}) {
    for (int k = 0; k < 2000; ++k) {
      ParticleView p = make_particle(0.0, 0.0, 0.0, 0.0, 0.0, 1e-2 * uniform(), beta0);
      p.add_to_energy(1e-4 * uniform());
      if (k % 2) p.update_delta(p.delta + 1e-6 * uniform());
      const ParticleView q =
          particle_with_derived_energy(p.x, p.px, p.y, p.py, p.zeta, p.delta, p.ptau, beta0, p.state);
      REQUIRE(std::memcmp(&q.rpp, &p.rpp, sizeof(double)) == 0);
      REQUIRE(std::memcmp(&q.rvv, &p.rvv, sizeof(double)) == 0);
      REQUIRE(std::memcmp(&q.rv0v, &p.rv0v, sizeof(double)) == 0);
      ++checked;
    }
  }
  CHECK(checked == 6000);
}

}  // namespace test_coordinate_traffic
