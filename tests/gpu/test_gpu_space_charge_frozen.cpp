// CPU == GPU bit for bit with fma=off for frozen space charge (SpaceChargeBiGaussian): 48 elements
// installed around the bundled FODO ring (ft::install_space_charge) with a flat, a tall and a round beam
// and a tune shift of ~0.1, 10^4 particles spread over the core (the series branch), the Bassetti-Erskine
// region and far outside, over +-3 sigma_z in zeta, 500 turns; both dispatch forms. The generic test of
// every element type (test_gpu_reproduction.cpp) samples one round beam of negligible intensity only.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <random>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/space_charge_install.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_space_charge_frozen.
namespace test_gpu_space_charge_frozen {

using namespace ft;

TEST_CASE("fma=off: frozen space charge (flat, tall, round beams) reproduces bitwise on the GPU" *
          doctest::test_suite("space-charge")) {
  const Lattice bare = test::bundled_lattice("fodo_ring.json");
  struct Beam {
    double eps_nx, eps_ny;
    const char* what;
  };
  for (const Beam& b : {Beam{4e-6, 1e-6, "flat"}, Beam{1e-6, 3e-6, "tall"}, Beam{2e-6, 2e-6, "round where beta_x = beta_y"}}) {
    CAPTURE(b.what);
    SpaceChargeInstallOptions o;
    o.elements = 48;
    o.intensity = 8e10;
    o.eps_nx = b.eps_nx;
    o.eps_ny = b.eps_ny;
    o.sigma_zeta = 1.0;
    const InstalledSpaceCharge sc = install_space_charge(bare, o, test::builtin_registry(), "fodo");
    const Lattice lattice = lattice_from_json(sc.lattice, "fodo+sc", test::builtin_registry());
    const double sx = sc.kicks[0].sigma_x, sy = sc.kicks[0].sigma_y;
    const size_t n = 10000;
    Particles initial(n, lattice.reference().beta0());
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (size_t i = 0; i < n; ++i) {
      // a quarter in the core (|x| < 1e-3 sigma), the rest out to 6 sigma
      const double scale = i % 4 == 0 ? 1e-3 : 6.0;
      initial.set(i, scale * sx * u(rng), 0.0, scale * sy * u(rng), 0.0, 3.0 * u(rng), 0.0);
    }
    for (const Dispatch dispatch : {Dispatch::Auto, Dispatch::Switch}) {
      Particles cpu = initial, gpu = initial;
      TrackOptions t;
      t.turns = 500;
      t.fma = FmaMode::Off;
      make_cpu_backend(lattice)->track(cpu, t);
      CudaBackendOptions co;
      co.dispatch = dispatch;
      CudaBackend backend(lattice, co);
      backend.track(gpu, t);
      const ParticleComparison c = compare_particles(cpu, gpu);
      MESSAGE(fmt::format("{} beam, dQx {:.3f}, dispatch {}: bitwise equal {}/{}, state mismatches {}, max ulp {}",
                          b.what, sc.laslett_dqx, dispatch == Dispatch::Switch ? "switch" : "auto", c.bitwise_equal,
                          c.coordinates, c.state_mismatches, c.max_ulp));
      CHECK(c.identical());
    }
  }
}

}  // namespace test_gpu_space_charge_frozen
