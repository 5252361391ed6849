// CPU == GPU bit for bit with fma=off for transformed (misaligned, tilted) elements and the new
// element types (RFMultipole, LimitRectEllipse, LimitPolygon), in the baked, switch and staged
// dispatch modes: the baked blocks, the transformed switch cases and the staged parameter slots.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_transforms.
namespace test_gpu_transforms {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

/// The FODO ring with misaligned magnets and tilted apertures of every kind, a crab cavity and
/// an RF multipole, some elements both plain and transformed (the same type in two switch cases).
Lattice misaligned_ring() {
  json doc = ft::test::parse_bundled("fodo_ring.json");
  json& e = doc["elements"];
  e["qf_moved"] = {{"type", "Multipole"}, {"knl", {0.0, 0.01, 0.4}}, {"shift_x", 1e-3}, {"shift_y", -4e-4}, {"rot_s_rad", 0.01}};
  e["quad_thick"] = {{"type", "Quadrupole"}, {"length", 0.3}, {"k1", 0.05}, {"k1s", 0.01}, {"num_slices", 2},
                     {"shift_s", 0.02}, {"rot_x_rad", 1e-4}, {"rot_y_rad", -2e-4}, {"rot_shift_anchor", 0.15}};
  e["rect"] = {{"type", "LimitRect"}, {"min_x", -0.02}, {"max_x", 0.025}, {"min_y", -0.015}, {"max_y", 0.015}, {"rot_s_rad", 0.3}};
  e["rect_ellipse"] = {{"type", "LimitRectEllipse"}, {"max_x", 0.03}, {"max_y", 0.02}, {"a", 0.032}, {"b", 0.025},
                       {"shift_x", 2e-3}, {"rot_s_rad", -0.2}};
  e["polygon"] = {{"type", "LimitPolygon"}, {"n_vertices", 6},
                  {"x_vertices", {0.03, 0.015, -0.015, -0.03, -0.015, 0.015}},
                  {"y_vertices", {0.0, 0.026, 0.026, 0.0, -0.026, -0.026}}, {"rot_s_rad", 0.1}, {"shift_y", 1e-3}};
  e["crab"] = {{"type", "RFMultipole"}, {"frequency", 400e6}, {"ksl", {3e-5}}, {"ps", {90.0}}, {"shift_x", 5e-4}};
  e["rf_mult"] = {{"type", "RFMultipole"}, {"voltage", 1e3}, {"frequency", 200e6}, {"lag", 170.0},
                  {"knl", {0.0, 1e-3, 0.05}}, {"pn", {0.0, 30.0, -20.0}}};
  doc["sequence"] = json::array({json{{"line", "cell"}, {"repeat", 4}}, "qf_moved", "quad_thick", "rect", "rect_ellipse",
                                 json{{"line", "cell"}, {"repeat", 4}}, "polygon", "crab", "rf_mult",
                                 json{{"line", "cell"}, {"repeat", 8}}});
  return lattice_from_json(doc, "fodo_ring+transforms", ft::test::builtin_registry());
}

}  // namespace

TEST_CASE("fma=off: transformed elements and the new apertures reproduce bitwise in every dispatch mode" *
          doctest::test_suite("elements")) {
  const Lattice lattice = misaligned_ring();
  REQUIRE(lattice.has_transforms());
  const Particles initial = make_grid(lattice.reference().beta0(), -0.03, 0.03, 60, -0.03, 0.03, 60, 2e-4);
  Particles cpu = initial;
  TrackOptions o;
  o.turns = 300;
  o.fma = FmaMode::Off;
  make_cpu_backend(lattice)->track(cpu, o);
  CHECK(cpu.alive_count() > cpu.size() / 10);  // some particles survive ...
  CHECK(cpu.alive_count() < cpu.size());       // ... and the apertures take others
  const std::pair<Dispatch, const char*> modes[] = {
      {Dispatch::Baked, "baked"}, {Dispatch::Switch, "switch"}, {Dispatch::Staged, "staged"}};
  for (const auto& [dispatch, name] : modes) {
    CAPTURE(name);
    Particles gpu = initial;
    CudaBackendOptions co;
    co.dispatch = dispatch;
    CudaBackend backend(lattice, co);
    backend.track(gpu, o);
    const ParticleComparison c = compare_particles(cpu, gpu);
    MESSAGE(fmt::format("{}: bitwise equal {}/{}, state mismatches {}, max ulp {}", name,
                        c.bitwise_equal, c.coordinates, c.state_mismatches, c.max_ulp));
    CHECK(c.identical());
  }
}

}  // namespace test_gpu_transforms
