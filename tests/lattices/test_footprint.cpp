// Tune footprints (ft::tune_footprint): without amplitude-dependent forces every particle has the
// ring's tunes; with frozen space charge installed around the FODO ring the smallest amplitudes carry
// the Laslett shift and the shift falls with amplitude, as the field of a Gaussian bunch falls off
// beyond one sigma; the same footprint on any thread count; bad options name the field.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>

#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/optics.h"
#include "fusetrack/space_charge_install.h"
#include "support/lattice_builders.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_footprint.
namespace test_footprint {

namespace {

ft::FootprintOptions footprint_options() {
  ft::FootprintOptions o;
  o.emittance_nx = 2e-6;
  o.emittance_ny = 1e-6;
  o.max_sigma = 4.0;
  o.amplitudes = 8;
  o.angles = 3;
  o.turns = 512;
  return o;
}

}  // namespace

TEST_CASE("Tune footprint of a linear ring: every particle has the ring's tunes") {
  const ft::Lattice ring = ft::test::bundled_lattice("fodo_ring.json");
  const ft::LinearOptics optics = ft::compute_linear_optics(ring);
  auto backend = ft::make_cpu_backend(ring);
  const ft::TuneFootprint fp = ft::tune_footprint(ring, optics, *backend, footprint_options());
  REQUIRE(fp.qx.size() == 24u);
  for (size_t i = 0; i < fp.qx.size(); ++i) {
    CAPTURE(i);
    CHECK(fp.lost_turn[i] == -1);
    CHECK(std::fabs(fp.qx[i] - optics.qx) < 1e-9);
    CHECK(std::fabs(fp.qy[i] - optics.qy) < 1e-9);
  }
  CHECK(fp.sigma_x > 0.0);
}

TEST_CASE("Tune footprint with frozen space charge: Laslett shift at the centre, smaller at large amplitude") {
  const ft::Lattice bare = ft::test::bundled_lattice("fodo_ring.json");
  ft::SpaceChargeInstallOptions so;
  so.elements = 64;
  so.intensity = 2e10;
  so.eps_nx = 2e-6;
  so.eps_ny = 1e-6;
  so.sigma_zeta = 1.0;
  const ft::InstalledSpaceCharge sc = ft::install_space_charge(bare, so, ft::test::builtin_registry(), "ring");
  const ft::Lattice ring = ft::lattice_from_json(sc.lattice, "ring+sc", ft::test::builtin_registry());
  const ft::LinearOptics bare_optics = ft::compute_linear_optics(bare);
  // The optics of the ring with space charge: only its closed orbit and Twiss at the start are used
  // to place the particles (the footprint's tunes come from tracking).
  const ft::LinearOptics sc_optics = ft::compute_linear_optics(ring);
  ft::FootprintOptions o = footprint_options();
  o.min_sigma = 0.01;
  o.turns = 1024;
  auto backend = ft::make_cpu_backend(ring);
  const ft::TuneFootprint fp = ft::tune_footprint(ring, sc_optics, *backend, o);
  // Angle index 0: along x (a_y = min_sigma), 2: along y. Amplitude k = 1..8 -> 0.5 .. 4 sigma.
  auto at = [&](int amplitude, int angle) { return static_cast<size_t>((amplitude - 1) * o.angles + angle); };
  double previous_x = -1.0, previous_y = -1.0;
  for (int k = 1; k <= o.amplitudes; ++k) {
    const double dqx = fp.qx[at(k, 0)] - bare_optics.qx, dqy = fp.qy[at(k, 2)] - bare_optics.qy;
    MESSAGE(fmt::format("a = {:.1f} sigma: dQx {:.5f} (along x), dQy {:.5f} (along y)", fp.amplitude_x[at(k, 0)], dqx, dqy));
    CHECK(dqx < 0.0);
    CHECK(dqy < 0.0);
    if (previous_x < 0.0) {
      // 0.5 sigma: within 10% of the first-order small-amplitude shift (the shift at 0.5 sigma is
      // a few percent below the centre's for a Gaussian beam).
      CHECK(dqx / sc.laslett_dqx > 0.85);
      CHECK(dqx / sc.laslett_dqx < 1.02);
      CHECK(dqy / sc.laslett_dqy > 0.85);
      CHECK(dqy / sc.laslett_dqy < 1.02);
    } else {
      CHECK(-dqx < previous_x);  // the shift falls with amplitude
      CHECK(-dqy < previous_y);
    }
    previous_x = -dqx;
    previous_y = -dqy;
  }
  // At 4 sigma the shift is well below half the centre's.
  CHECK(previous_x < 0.5 * -sc.laslett_dqx);
  CHECK(previous_y < 0.5 * -sc.laslett_dqy);

  // The same footprint with 1 and 2 threads.
  o.threads = 1;
  const ft::TuneFootprint one = ft::tune_footprint(ring, sc_optics, *backend, o);
  o.threads = 2;
  const ft::TuneFootprint two = ft::tune_footprint(ring, sc_optics, *backend, o);
  CHECK(one.qx == two.qx);
  CHECK(one.qy == two.qy);
}

TEST_CASE("Tune footprint: bad options name the field") {
  const ft::Lattice ring = ft::test::bundled_lattice("fodo_ring.json");
  const ft::LinearOptics optics = ft::compute_linear_optics(ring);
  auto backend = ft::make_cpu_backend(ring);
  auto message = [&](ft::FootprintOptions o) -> std::string {
    try {
      ft::tune_footprint(ring, optics, *backend, o);
    } catch (const ft::Error& e) {
      return e.what();
    }
    return "";
  };
  ft::FootprintOptions o = footprint_options();
  o.turns = 8;
  CHECK(message(o).find("'turns'") != std::string::npos);
  o = footprint_options();
  o.emittance_nx = 0.0;
  CHECK(message(o).find("'emittances'") != std::string::npos);
  o = footprint_options();
  o.max_sigma = -1.0;
  CHECK(message(o).find("'max_sigma'") != std::string::npos);
  o = footprint_options();
  o.amplitudes = 0;
  CHECK(message(o).find("'amplitudes'") != std::string::npos);
}

TEST_CASE("fusetrack spacecharge footprint (command line) on the bundled space-charge ring") {
  const auto dir = ft::test::temp_dir("footprint_cli");
  const std::string ring = ft::test::source_path("lattices/space_charge_ring.json");
  const std::string sc = (dir / "ring_sc.json").string(), out = (dir / "fp").string();
  const auto r1 = ft::test::run_command(fmt::format(
      "{} spacecharge install {} --elements 32 --intensity 1.5e11 --emittances 2e-6 1.5e-6 --sigma-zeta 8 "
      "--delta-rms 1e-3 -o {}",
      ft::test::fusetrack_binary(), ring, sc));
  REQUIRE(r1.first == 0);
  const auto r2 = ft::test::run_command(fmt::format(
      "{} spacecharge footprint {} --emittances 2e-6 1.5e-6 --amplitudes 3 --angles 2 -n 256 --device cpu --no-plot -o {}",
      ft::test::fusetrack_binary(), sc, out));
  const std::string text = r2.second;
  CAPTURE(text);
  REQUIRE(r2.first == 0);
  CHECK(text.find("without its 32 space-charge elements") != std::string::npos);
  CHECK(text.find("footprint 6 particles (3 amplitudes up to 4 sigma x 2 angles), 256 turns: 0 lost") != std::string::npos);
  std::ifstream csv(out + "/footprint.csv");
  std::string line;
  int rows = 0;
  std::getline(csv, line);  // comment
  std::getline(csv, line);
  CHECK(line == "amplitude_x,amplitude_y,qx,qy,lost_turn");
  while (std::getline(csv, line)) ++rows;
  CHECK(rows == 6);
  // Bad input: exit code 2, the option named.
  const auto r3 = ft::test::run_command(fmt::format("{} spacecharge footprint {} --emittances 2e-6 1e-6 -n 8 --no-plot -o {}",
                                                    ft::test::fusetrack_binary(), sc, out));
  CHECK(r3.first == 2);
  CHECK(r3.second.find("'turns'") != std::string::npos);
}

}  // namespace test_footprint
