// Frozen space charge whose beam sizes follow the beam (ft::SpaceChargeBeamSizes): a matched
// Gaussian beam of the emittances used at installation gives each element back the installed sizes
// (to the sampling noise of the emittances), the alive fraction scales the intensity, and a grown
// beam gives every element sqrt(beta eps + (D sigma_delta)^2) with the installation's optics.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>

#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/monitor.h"
#include "fusetrack/optics.h"
#include "fusetrack/space_charge_install.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_space_charge_beam_sizes.
namespace test_space_charge_beam_sizes {

namespace {

struct Installed {
  ft::InstalledSpaceCharge sc;
  ft::Lattice ring;
};

Installed installed_ring() {
  const ft::Lattice bare = ft::test::bundled_lattice("space_charge_ring.json");
  ft::SpaceChargeInstallOptions o;
  o.elements = 16;
  o.intensity = 1e11;
  o.eps_nx = 2e-6;
  o.eps_ny = 1.5e-6;
  o.sigma_zeta = 8.0;
  o.delta_rms = 1e-3;
  ft::InstalledSpaceCharge sc = ft::install_space_charge(bare, o, ft::test::builtin_registry(), "ring");
  ft::Lattice ring = ft::lattice_from_json(sc.lattice, "ring+sc", ft::test::builtin_registry());
  return {std::move(sc), std::move(ring)};
}

}  // namespace

TEST_CASE("SpaceChargeBeamSizes: a matched beam gives the installed sizes, losses scale the intensity") {
  Installed in = installed_ring();
  ft::Lattice& ring = in.ring;
  const ft::SpaceChargeBeamSizes follow(ring);
  REQUIRE(follow.elements() == 16);
  // A matched Gaussian of the ring without space charge, the installation's bunch.
  const ft::Lattice bare = ft::test::bundled_lattice("space_charge_ring.json");
  const ft::LinearOptics optics = ft::compute_linear_optics(bare);
  ft::Particles p = ft::make_gaussian(bare, optics, 40000, 2e-6, 1.5e-6, 8.0, 1e-3, 11);
  follow.update(ring, p, 1e11);
  for (const ft::SpaceChargeKick& k : in.sc.kicks) {
    const uint32_t d = static_cast<uint32_t>(ring.find_definition(k.name));
    CAPTURE(k.name);
    // 40000 particles: the sampled emittances and rms delta scatter by about 1 %.
    CHECK(ring.field(d, "sigma_x") == doctest::Approx(k.sigma_x).epsilon(0.02));
    CHECK(ring.field(d, "sigma_y") == doctest::Approx(k.sigma_y).epsilon(0.02));
    CHECK(ring.field(d, "sigma_z") == doctest::Approx(8.0).epsilon(0.02));
    CHECK(ring.field(d, "number_of_particles") == 1e11);
  }
  // Half the particles lost: half the intensity.
  for (size_t i = 0; i < p.size(); i += 2) p.state[i] = 0;
  follow.update(ring, p, 1e11);
  const ft::SpaceChargeKick& k0 = in.sc.kicks[0];
  const uint32_t d0 = static_cast<uint32_t>(ring.find_definition(k0.name));
  CHECK(ring.field(d0, "number_of_particles") == doctest::Approx(0.5e11).epsilon(1e-12));
  // A beam of twice the emittances: sigma^2 = beta eps + (D sigma_delta)^2 with the beam's moments and
  // the optics the installation computed (its own Twiss table).
  const ft::Particles wide = ft::make_gaussian(bare, optics, 40000, 4e-6, 3e-6, 8.0, 1e-3, 11);
  follow.update(ring, wide, 1e11);
  const ft::BunchMoments m = ft::bunch_moments(wide, ring.reference().p0c);
  CHECK(m.emittance_nx == doctest::Approx(4e-6).epsilon(0.02));
  for (const ft::SpaceChargeKick& k : in.sc.kicks) {
    const uint32_t d = static_cast<uint32_t>(ring.find_definition(k.name));
    CAPTURE(k.name);
    const double dxs = k.dx * m.rms_delta;
    CHECK(ring.field(d, "sigma_x") == doctest::Approx(std::sqrt(k.beta_x * m.emittance_x + dxs * dxs)).epsilon(1e-9));
    CHECK(ring.field(d, "sigma_y") == doctest::Approx(std::sqrt(k.beta_y * m.emittance_y)).epsilon(1e-9));
    CHECK(ring.field(d, "z0") == doctest::Approx(m.mean_zeta).epsilon(1e-12));
  }
}

TEST_CASE("SpaceChargeBeamSizes: bad input") {
  const ft::Lattice bare = ft::test::bundled_lattice("space_charge_ring.json");
  CHECK_THROWS_WITH_AS(ft::SpaceChargeBeamSizes{bare}, doctest::Contains("has no SpaceChargeBiGaussian"),
                       ft::InputError);
  Installed in = installed_ring();
  const ft::SpaceChargeBeamSizes follow(in.ring);
  ft::Particles p(4, in.ring.reference().beta0());
  CHECK_THROWS_WITH_AS(follow.update(in.ring, p, 1e11), doctest::Contains("has no size"), ft::Error);
  CHECK_THROWS_WITH_AS(follow.update(in.ring, p, -1.0), doctest::Contains("'intensity'"), ft::InputError);
}

}  // namespace test_space_charge_beam_sizes
