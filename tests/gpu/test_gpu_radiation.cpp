// Synchrotron radiation on the GPU (elements/radiation.h): CPU == GPU bit for bit with fma=off for the
// radiating magnets (thick Bend and ThickMultipole, thin Multipole), the mean and the quantum modes, the
// baked and the switch kernels; and the energy spread of a bunch tracked with quantum excitation to its
// equilibrium against the radiation integrals' (fusetrack/radiation_integrals.h).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "support/lattice_builders.h"
#include "support/radiation_ring.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_radiation.
namespace test_gpu_radiation {

using namespace ft;
using json = nlohmann::ordered_json;

TEST_CASE("fma=off: radiating thick and thin magnets, mean and quantum, reproduce bitwise on the GPU" *
          doctest::test_suite("elements")) {
  const double energy = 4.86e9, voltage = 20e6;
  for (const bool thin : {false, true}) {
    for (const char* mode : {"mean", "quantum"}) {
      json doc = ft::test::radiation_test_ring(energy, "off", voltage, 4, thin);
      const Lattice plain = lattice_from_json(doc, "ring.json", ft::test::builtin_registry());
      doc["radiation"] = mode;
      doc["elements"]["rf"]["lag"] =
          ft::test::radiation_synchronous_lag(voltage, radiation_integrals(plain).energy_loss_per_turn);
      const Lattice lattice = lattice_from_json(doc, "radiating.json", ft::test::builtin_registry());
      const Particles initial = make_grid(lattice.reference().beta0(), -0.002, 0.002, 40, -0.001, 0.001, 40, -1e-3);
      Particles cpu = initial;
      TrackOptions o;
      o.turns = 300;
      o.fma = FmaMode::Off;
      make_cpu_backend(lattice)->track(cpu, o);
      for (const Dispatch dispatch : {Dispatch::Baked, Dispatch::Switch}) {
        Particles gpu = initial;
        CudaBackendOptions options;
        options.dispatch = dispatch;
        CudaBackend backend(lattice, options);
        backend.track(gpu, o);
        const ParticleComparison c = compare_particles(cpu, gpu);
        const std::string what = fmt::format("{} bends, radiation {}, {} kernel", thin ? "thin" : "thick", mode,
                                             dispatch == Dispatch::Baked ? "baked" : "switch");
        MESSAGE(fmt::format("{}: alive {} of {}, bitwise equal {}/{}, state mismatches {}, max ulp {}", what,
                            cpu.alive_count(), cpu.size(), c.bitwise_equal, c.coordinates, c.state_mismatches,
                            c.max_ulp));
        CHECK_MESSAGE(c.identical(), what);
      }
    }
  }
}

TEST_CASE("quantum excitation: the energy spread tracked to equilibrium is the radiation integrals'" *
          doctest::test_suite("rings")) {
  // 3 GeV, U0 / E = 9.4e-4 per turn: tau_zeta = 900 turns; 2700 turns (3 damping times) from a bunch of
  // the integrals' sizes, the spread averaged over the last 600. 10,000 particles: 0.7% statistical error.
  // (Where the damping per turn is several 1e-3 and the RF strong, the cavity at a dispersive point of this
  // FODO ring couples the planes and the plane-by-plane integrals no longer hold.)
  const double energy = 3e9, voltage = 10e6;
  json doc = ft::test::radiation_test_ring(energy, "off", voltage, 2);
  const Lattice plain = lattice_from_json(doc, "ring.json", ft::test::builtin_registry());
  const RadiationIntegrals r = radiation_integrals(plain);
  doc["radiation"] = "quantum";
  doc["elements"]["rf"]["lag"] = ft::test::radiation_synchronous_lag(voltage, r.energy_loss_per_turn);
  const Lattice ring = lattice_from_json(doc, "quantum.json", ft::test::builtin_registry());
  CudaBackend backend(ring, CudaBackendOptions{});
  const double spread = ft::test::tracked_equilibrium_spread(plain, ring, backend, r, 10000, 2700, 600);
  CAPTURE(spread);
  CAPTURE(r.sigma_delta);
  CHECK(std::fabs(spread / r.sigma_delta - 1.0) < 0.02);
}

}  // namespace test_gpu_radiation
