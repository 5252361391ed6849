// CPU == GPU bit for bit with fma=off for the weak-strong beam-beam lenses: the HL-LHC line of
// ../shared/lattices/xsuite (180 BeamBeamBiGaussian2D, 44 BeamBeamBiGaussian3D with crossing angles, as
// Xsuite configured them) and the bundled FODO ring with a coupled 2D lens and an 8-slice 6D lens with
// crossing angle, hourglass and coupling, in the switch and staged dispatches.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "fusetrack/codegen.h"
#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/lattice_file.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_beambeam_lenses.
namespace test_gpu_beambeam_lenses {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

/// Tracks `initial` on the CPU once and on the GPU in the switch and staged dispatches; true if every
/// GPU result equals the CPU's bit for bit.
bool reproduces(const Lattice& lattice, const Particles& initial, int64_t turns, const std::string& what) {
  TrackOptions o;
  o.turns = turns;
  o.fma = FmaMode::Off;
  Particles cpu = initial;
  make_cpu_backend(lattice)->track(cpu, o);
  bool all = true;
  for (const Dispatch dispatch : {Dispatch::Switch, Dispatch::Staged}) {
    Particles gpu = initial;
    CudaBackendOptions options;
    options.dispatch = dispatch;
    CudaBackend backend(lattice, options);
    backend.track(gpu, o);
    const ParticleComparison c = compare_particles(cpu, gpu);
    MESSAGE(fmt::format("{}, dispatch {}: lost {} of {}, bitwise equal {}/{}, state mismatches {}, max ulp {}", what,
                        dispatch_name(dispatch), cpu.size() - cpu.alive_count(), cpu.size(), c.bitwise_equal,
                        c.coordinates, c.state_mismatches, c.max_ulp));
    all = all && c.identical();
  }
  return all;
}

}  // namespace

TEST_CASE("fma=off: the HL-LHC line's beam-beam lenses reproduce bitwise on the GPU" *
          doctest::test_suite("elements")) {
  const std::string path = ft::test::shared_path("lattices/xsuite/hllhc14_with_beambeam.json");
  if (path.empty()) {
    MESSAGE("../shared/lattices/xsuite/hllhc14_with_beambeam.json is absent: not checked");
    return;
  }
  const Lattice lattice = load_lattice(path, ft::test::builtin_registry());
  // 400 particles within about 2 sigma of the beam at the start (beta ~ 110 m, 2.5 um normalised).
  const Particles initial = make_grid(lattice.reference().beta0(), -4e-4, 4e-4, 20, -4e-4, 4e-4, 20, 1e-4);
  CHECK(reproduces(lattice, initial, 20, "HL-LHC"));
}

TEST_CASE("fma=off: coupled 2D and 8-slice 6D lenses with crossing angle reproduce bitwise on the GPU" *
          doctest::test_suite("elements")) {
  json doc = ft::test::parse_bundled("fodo_ring.json");
  json lens6d = {{"type", "BeamBeamBiGaussian3D"},
                 {"other_beam_q0", 1.0},
                 {"num_slices_other_beam", 8},
                 {"phi", 2e-3},
                 {"alpha", 0.4},
                 {"ref_shift_x", 1e-4},
                 {"post_subtract_px", 1e-7}};
  const char* arrays[] = {
      "slices_other_beam_num_particles", "slices_other_beam_zeta_center_star", "slices_other_beam_x_center_star",
      "slices_other_beam_Sigma_11_star", "slices_other_beam_Sigma_12_star",    "slices_other_beam_Sigma_13_star",
      "slices_other_beam_Sigma_14_star", "slices_other_beam_Sigma_22_star",    "slices_other_beam_Sigma_23_star",
      "slices_other_beam_Sigma_24_star", "slices_other_beam_Sigma_33_star",    "slices_other_beam_Sigma_44_star"};
  const double values[] = {2e10, 0.0, 1e-5, 4e-6, 1e-6, 3e-7, 1e-7, 1e-4, -1e-7, 2e-6, 2e-6, 1e-4};
  for (int a = 0; a < 12; ++a) {
    std::vector<double> v(8);
    for (int i = 0; i < 8; ++i) v[i] = a == 1 ? 0.1 * (3.5 - i) : values[a] * (1.0 + 0.05 * i);
    lens6d[arrays[a]] = v;
  }
  doc["elements"]["lens_6d"] = lens6d;
  doc["elements"]["lens_2d"] = {{"type", "BeamBeamBiGaussian2D"},   {"other_beam_q0", 1.0},
                                {"other_beam_num_particles", 1e11}, {"other_beam_Sigma_11", 4e-6},
                                {"other_beam_Sigma_33", 2e-6},      {"other_beam_Sigma_13", 1e-6},
                                {"other_beam_shift_x", 5e-3},       {"post_subtract_px", 1e-6}};
  doc["sequence"] =
      json::array({json{{"line", "cell"}, {"repeat", 8}}, "lens_2d", "lens_6d", json{{"line", "cell"}, {"repeat", 8}}});
  const Lattice lattice = lattice_from_json(doc, "fodo_ring+lenses", ft::test::builtin_registry());
  const Particles initial = make_grid(lattice.reference().beta0(), -0.01, 0.01, 50, -0.01, 0.01, 50, 2e-4);
  CHECK(reproduces(lattice, initial, 200, "FODO + lenses"));
}

}  // namespace test_gpu_beambeam_lenses
