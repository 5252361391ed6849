// CPU == GPU bit for bit with fma=off for the thick magnets (Bend in every model and integrator,
// ThickMultipole in every integrator, Corrector) with realistic strengths: each variant replaces
// the combined-function bends (or is added to every unit cell) of the bundled MBA light-source
// ring, tracked 200 turns with 2,500 particles spread over and beyond the dynamic aperture
// (switch dispatch).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_thick_magnets.
namespace test_gpu_thick_magnets {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

bool reproduces(const json& doc, const std::string& what) {
  const Lattice lattice = lattice_from_json(doc, what, ft::test::builtin_registry());
  const Particles initial = make_grid(lattice.reference().beta0(), -0.006, 0.006, 50, -0.003, 0.003, 50, 1e-3);
  Particles cpu = initial, gpu = initial;
  TrackOptions o;
  o.turns = 200;
  o.fma = FmaMode::Off;
  make_cpu_backend(lattice)->track(cpu, o);
  // The switch kernel: one compiled source for every variant (the parameters differ only). The
  // baked form of this 1481-element thick ring takes minutes in NVRTC (see the closing note).
  CudaBackendOptions options;
  options.dispatch = Dispatch::Switch;
  CudaBackend backend(lattice, options);
  backend.track(gpu, o);
  const ParticleComparison c = compare_particles(cpu, gpu);
  MESSAGE(fmt::format("{}: lost {} of {}, bitwise equal {}/{} (NaN on both sides: {}), state mismatches {}, max ulp {}",
                      what, cpu.size() - cpu.alive_count(), cpu.size(), c.bitwise_equal, c.coordinates, c.nan_pairs,
                      c.state_mismatches, c.max_ulp));
  return c.identical();
}

}  // namespace

TEST_CASE("fma=off: Bend, every model and integrator, reproduces bitwise on the GPU" *
          doctest::test_suite("elements")) {
  const json ring = ft::test::parse_bundled("mba_light_source.json");
  for (const int model : {0, 1, 2}) {
    for (const int integrator : {0, 1, 2, 3}) {
      json doc = ring;
      json& bd = doc["elements"]["bd"];
      bd["model"] = model;
      bd["integrator"] = integrator;
      bd["num_slices"] = integrator == 0 ? 4 : 7;
      bd["k1s"] = 0.01;  // skew terms exercised too
      bd["edge_entry_hgap"] = 0.012;
      bd["edge_entry_fint"] = 0.5;
      CHECK(reproduces(doc, fmt::format("Bend model {} integrator {}", model, integrator)));
    }
  }
}

TEST_CASE("fma=off: ThickMultipole (every integrator, octupole and skew terms) and Corrector reproduce bitwise" *
          doctest::test_suite("elements")) {
  const json ring = ft::test::parse_bundled("mba_light_source.json");
  for (const int integrator : {0, 1, 2, 3}) {
    json doc = ring;
    json& sf = doc["elements"]["sf"];
    sf["integrator"] = integrator;
    // Arrays padded with zeros up to the index set (absent entries would be JSON null).
    auto set = [&sf](const char* field, size_t index, double value) {
      if (!sf.contains(field)) sf[field] = json::array();
      while (sf[field].size() <= index) sf[field].push_back(0.0);
      sf[field][index] = value;
    };
    set("kn", 3, 2000.0);
    set("ks", 2, 5.0);
    CHECK(reproduces(doc, fmt::format("ThickMultipole integrator {}", integrator)));
  }
  json doc = ring;
  doc["elements"]["ds"] = {{"type", "Corrector"}, {"length", 2.5}, {"hkick", 1e-5}, {"vkick", -2e-5}};
  CHECK(reproduces(doc, "Corrector in every straight"));
}

}  // namespace test_gpu_thick_magnets
