// The example plugins' lattices (plugins/<name>/lattice.json): they load through their "plugins"
// entry, track on the CPU, and their fused kernels compile with NVRTC in every dispatch and FMA mode
// (no GPU needed; CPU == GPU bit for bit is checked by the CTest tests plugins/gpu_repro_* on a GPU).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "fusetrack/codegen.h"
#include "fusetrack/nvrtc_compiler.h"
#include "plugins/plugin_test_support.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_example_lattices.
namespace test_example_lattices {

using namespace ft;

TEST_CASE("example lattices load, track and compile with NVRTC") {
  for (const std::string name : {"tutorial", "beambeam4d", "taylor_map"}) {
    CAPTURE(name);
    auto registry = ft::plugin_test::registry_with();
    const Lattice lattice = load_lattice(ft::plugin_test::example_lattice(name), *registry);
    bool uses_plugin = false;
    for (const ElementType* t : lattice.types_used()) uses_plugin |= t->plugin->name() == name;
    CHECK(uses_plugin);

    Particles p = make_grid(lattice.reference().beta0(), -2e-3, 2e-3, 9, -1e-3, 1e-3, 9, 1e-4);
    ft::plugin_test::track_cpu(lattice, p, 100);
    CHECK(p.alive_count() == p.size());

    const KernelCompiler compiler("off");
    for (Dispatch dispatch : {Dispatch::Switch, Dispatch::Baked})
      for (FmaMode fma : {FmaMode::Off, FmaMode::On}) {
        CompiledKernel k;
        CHECK_NOTHROW(k = compiler.compile(generate_fused_kernel(lattice, fma, dispatch), 90));
        CHECK(k.cubin.size() > 100);
      }
  }
}

TEST_CASE("tutorial: KickX gives the same bits as the built-in Multipole with knl[0] = -kick") {
  auto registry = ft::plugin_test::registry_with();
  const std::string path = ft::plugin_test::example_lattice("tutorial");
  nlohmann::ordered_json doc = parse_json_file(path);
  const double kick = doc["elements"]["corrector"]["kick"].get<double>();
  CHECK(kick != 0.0);
  const Lattice with_plugin = lattice_from_json(doc, path, *registry);
  doc["elements"]["corrector"] = {{"type", "Multipole"}, {"knl", {-kick}}};
  const Lattice with_builtin = lattice_from_json(doc, path, *registry);
  Particles a = make_grid(with_plugin.reference().beta0(), -1e-3, 1e-3, 5, -1e-3, 1e-3, 5, 2e-4), b = a;
  ft::plugin_test::track_cpu(with_plugin, a, 20);
  ft::plugin_test::track_cpu(with_builtin, b, 20);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a.x[i] == b.x[i]);
    CHECK(a.px[i] == b.px[i]);
    CHECK(a.y[i] == b.y[i]);
    CHECK(a.zeta[i] == b.zeta[i]);
  }
}

}  // namespace test_example_lattices
