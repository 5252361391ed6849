// The coordinates the collective kernels move (codegen.h collective_turn_traffic), from the element
// types' declarations: a longitudinal-only ring moves zeta and the energy, a 6D ring every coordinate.
#include <doctest/doctest.h>

#include <string>

#include "fusetrack/codegen.h"
#include "fusetrack/lattice.h"
#include "support/registry.h"

using namespace ft;

TEST_CASE("collective kernels: the bytes per particle-turn follow the elements' declared coordinates") {
  ElementRegistry& registry = ft::test::builtin_registry();
  const std::string dir = std::string(FT_SOURCE_DIR) + "/lattices/";
  {
    // LongitudinalDrift (zeta; delta, rvv), Cavity and the impedance kick (zeta, ptau; the energy),
    // the deposit (zeta): one pass loads zeta, delta, ptau, rpp, rvv and stores them.
    const Lattice lattice = load_lattice(dir + "longitudinal_only_bench_ring.json", registry);
    const CollectiveTurnTraffic t = collective_turn_traffic(lattice);
    CHECK(t.wrap.loaded == (FT_COORD_ZETA | FT_COORD_ENERGY));
    CHECK(t.wrap.stored == (FT_COORD_ZETA | FT_COORD_ENERGY));
    CHECK(t.bytes_per_turn() == 8.0 * (5 + 5) + 4.0);
    CHECK(t.bytes_per_turn_all() == 152.0);
    CHECK(t.bytes_per_turn_needed() == 8.0 * (2 + 2) + 4.0);  // zeta and delta, read and written
  }
  {
    // Thin quadrupoles, drifts and an aperture: the physics reads and writes all six coordinates.
    const Lattice lattice = load_lattice(dir + "longitudinal_bench_ring.json", registry);
    const CollectiveTurnTraffic t = collective_turn_traffic(lattice);
    CHECK(t.wrap.loaded == FT_COORD_ALL);
    CHECK(t.wrap.stored == FT_COORD_ALL);
    CHECK(t.bytes_per_turn() == 148.0);  // 152 less the state's store (only on a loss)
    CHECK(t.bytes_per_turn_needed() == 8.0 * (6 + 6) + 4.0);
  }
}
