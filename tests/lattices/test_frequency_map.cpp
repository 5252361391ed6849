// Frequency map analysis (ft::frequency_map) of the bundled sextupole ring: at the smallest amplitude the
// NAFF tunes of both windows are the ring's linear tunes (from the one-turn matrix, an independent method)
// and the motion is regular (tiny diffusion index), while the particles that survive near the edge of the
// dynamic aperture have tunes that move between the windows by orders of magnitude more; lost particles
// carry no tunes; the files hold the same map.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "fusetrack/frequency_map.h"
#include "fusetrack/optics.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_frequency_map.
namespace test_frequency_map {

TEST_CASE("Frequency map of a sextupole ring: linear tunes at small amplitude, diffusion near the aperture") {
  const ft::Lattice ring = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const ft::LinearOptics optics = ft::compute_linear_optics(ring);
  ft::DaConfig c;
  c.angles = 2;
  c.angle_min = 30.0;
  c.angle_max = 60.0;
  c.amplitudes = 8;
  c.amplitude_min = 0.0001;
  c.amplitude_max = 0.025;
  ft::DaScan scan = ft::make_da_scan(ring, c);
  auto backend = ft::make_cpu_backend(ring);
  ft::FrequencyMapOptions o;
  o.turns_per_window = 256;
  o.threads = 2;
  const ft::FrequencyMap map = ft::frequency_map(scan, &optics, *backend, o);
  const size_t n = scan.initial.size();
  REQUIRE(map.qx1.size() == n);
  size_t smallest = 0, lost = 0;
  double edge_diffusion = -100.0, largest_survivor = 0.0;
  for (size_t i = 0; i < n; ++i) {
    CAPTURE(i);
    if (scan.amplitude[i] < scan.amplitude[smallest]) smallest = i;
    if (map.lost_turn[i] >= 0) {
      ++lost;
      CHECK(std::isnan(map.diffusion[i]));
      if (map.lost_turn[i] < o.turns_per_window) CHECK(std::isnan(map.qx1[i]));
      continue;
    }
    largest_survivor = std::max(largest_survivor, scan.amplitude[i]);
    CHECK(std::isfinite(map.diffusion[i]));
    CHECK(map.diffusion[i] == doctest::Approx(ft::diffusion_index(map.qx1[i], map.qy1[i], map.qx2[i], map.qy2[i])));
  }
  // Both ends of the grid: a regular core and losses beyond the aperture.
  REQUIRE(lost > 0);
  REQUIRE(lost < n);
  for (size_t i = 0; i < n; ++i)
    if (map.lost_turn[i] < 0 && scan.amplitude[i] >= 0.75 * largest_survivor)
      edge_diffusion = std::max(edge_diffusion, map.diffusion[i]);
  const size_t s = smallest;
  for (const double q : {map.qx1[s], map.qx2[s]}) CHECK(std::fabs(q - optics.qx) < 1e-4);
  for (const double q : {map.qy1[s], map.qy2[s]}) CHECK(std::fabs(q - optics.qy) < 1e-4);
  MESSAGE("diffusion index: " << map.diffusion[s] << " at the smallest amplitude, " << edge_diffusion
                              << " near the aperture (largest survivor " << largest_survivor << " m)");
  CHECK(map.diffusion[s] < edge_diffusion - 3.0);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "fusetrack_test_frequency_map";
  std::filesystem::remove_all(dir);
  ft::write_frequency_map(scan, map, dir.string(), "sextupole_rf_ring.json", optics.qx, optics.qy);
  std::ifstream csv(dir / "fma.csv");
  std::string line;
  size_t rows = 0;
  while (std::getline(csv, line)) ++rows;
  CHECK(rows == n + 1);
  CHECK(std::filesystem::exists(dir / "summary.json"));
  CHECK(std::filesystem::exists(dir / "fma.npz"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Frequency map: bad options name the option") {
  ft::FrequencyMapOptions o;
  o.turns_per_window = 8;
  CHECK_THROWS_AS(ft::validate_frequency_map_options(o), ft::InputError);
  try {
    ft::validate_frequency_map_options(o);
  } catch (const ft::InputError& e) {
    CHECK(e.where().field == "--turns-per-window");
  }
  o.turns_per_window = 64;
  o.naff.window_order = -1;
  CHECK_THROWS_AS(ft::validate_frequency_map_options(o), ft::InputError);
}

}  // namespace test_frequency_map
