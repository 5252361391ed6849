// Code generation and NVRTC compilation, without a GPU: every element type of every loaded
// plugin and every bundled lattice compiles to a fused kernel in both dispatch and FMA modes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/device/transform.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/slice_wakes.h"
#include "support/lattice_builders.h"
#include "support/variant_study.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_codegen.
namespace test_codegen {

using namespace ft;
using ft::test::builtin_registry;

namespace {

/// A valid single-element lattice of `type`: its required fields at 0.5, plus, if prepare()
/// asks for more, one optional field at a time (e.g. a cavity's frequency).
Lattice lattice_of_type(const ElementType& type) {
  const std::vector<nlohmann::ordered_json> candidates = ft::test::sample_candidates(type, 0.5);
  std::string last_error;
  for (const auto& fields : candidates) {
    try {
      Lattice lattice(ReferenceParticle{938272088.16, 1.0, 2e9});
      lattice.append(lattice.define("e", type, fields, InputLocation("t")));
      lattice.prepare();
      return lattice;
    } catch (const InputError& e) {
      last_error = e.what();
    }
  }
  throw Error("no valid sample instance of " + type.name + ": " + last_error);
}

/// The fused kernel in every dispatch and both fma modes; a whole lattice's baked form (every element inlined,
/// the long NVVM pass: 13-77 s on a CI core for the larger bundled rings) with fma off only unless `baked_fma_on`
/// (the fma modes differ by FT_DEVICE_FAST_MATH alone, compiled in both in the switch and staged forms).
void compile_all_modes(const Lattice& lattice, bool baked_fma_on = true) {
  const KernelCompiler compiler("off");
  for (Dispatch dispatch : {Dispatch::Switch, Dispatch::Baked, Dispatch::Staged})
    for (FmaMode fma : {FmaMode::Off, FmaMode::On}) {
      // The baked form is never chosen for long lattices (compiling 10^4 inlined elements takes minutes).
      if (dispatch == Dispatch::Baked && !bakeable(lattice)) continue;
      if (dispatch == Dispatch::Baked && fma == FmaMode::On && !baked_fma_on) continue;
      const KernelSource src = generate_fused_kernel(lattice, fma, dispatch);
      CompiledKernel k;
      CHECK_NOTHROW(k = compiler.compile(src, 90));
      CHECK(k.cubin.size() > 100);
      CHECK_FALSE(k.from_cache);
    }
  // The switch kernels with two particles per thread, fma off (the fma modes differ by FT_DEVICE_FAST_MATH
  // alone, compiled in the two-particle form in the test below).
  const KernelSource pair = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch, 0, {}, 2);
  CHECK(pair.particles_per_thread == 2);
  CompiledKernel k;
  CHECK_NOTHROW(k = compiler.compile(pair, 90));
  CHECK(k.cubin.size() > 100);
}

}  // namespace

TEST_CASE("every registered element type compiles with NVRTC in a fused kernel") {
  const auto types = builtin_registry().types();
  REQUIRE(types.size() >= 10);
  for (const ElementType* type : types) {
    CAPTURE(type->name);
    // Collective types need a bunch-wide program: every variant of their kernels is compiled in
    // tests/collective/test_collective_framework.cpp.
    if (type->is_collective()) continue;
    compile_all_modes(lattice_of_type(*type));
  }
}

TEST_CASE("every bundled lattice compiles with NVRTC") {
  for (const auto& entry : std::filesystem::directory_iterator(ft::test::source_path("lattices"))) {
    if (entry.path().extension() != ".json") continue;
    CAPTURE(entry.path().string());
    const Lattice lattice = load_lattice(entry.path().string(), builtin_registry());
    compile_all_modes(lattice, false);  // (every element type's baked form with fma on: the test above)
    if (lattice.has_collective()) {  // and its collective kernels (segments, wrap, solvers)
      const TurnProgram program = TurnProgram::build(lattice);
      std::vector<SliceGrid> grids;
      for (size_t c : program.collective)  // slice-moment elements (TransverseWake, TransverseDamper) have their own solver
        grids.push_back(lattice.element(c).type->is_moments_collective()
                            ? MomentsCollectiveSolver(lattice, c, 1).slice_grid()
                            : CollectiveSolver(lattice, c, FmaMode::Off, 1).slice_grid());
      // fma off in the dispatch a GPU run picks (auto), fma on in the switch form: both numerics and both forms
      // compile, without a second NVVM pass over the largest baked kernels (the PS example's and the space-charge
      // ring's take about 100 s each on a CI core).
      const KernelCompiler compiler("off");
      for (const auto& [fma, dispatch] : {std::pair{FmaMode::Off, Dispatch::Auto}, std::pair{FmaMode::On, Dispatch::Switch}}) {
        CompiledKernel k;
        CHECK_NOTHROW(k = compiler.compile(generate_collective_kernels(lattice, fma, dispatch, grids), 90));
        CHECK(k.cubin.size() > 1000);
      }
    }
  }
}

TEST_CASE("generated source: one switch case per type used, layout checks, origins") {
  const Lattice lattice = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  CHECK(src.types.size() == lattice.types_used().size());
  for (size_t k = 0; k < src.types.size(); ++k) {
    CHECK(src.text.find(fmt::format("case {}: {}(", k, src.types[k]->track_function)) != std::string::npos);
    CHECK(src.text.find(fmt::format("static_assert(sizeof({})", src.types[k]->name)) != std::string::npos);
    CHECK(src.header_origin.count(src.types[k]->header) == 1);
  }
  CHECK(src.text.find("FT_DEVICE_FAST_MATH") == std::string::npos);
  const KernelSource fast = generate_fused_kernel(lattice, FmaMode::On, Dispatch::Switch);
  CHECK(fast.text.find("#define FT_DEVICE_FAST_MATH") != std::string::npos);
  const KernelTables tables = kernel_tables(lattice, src);
  REQUIRE(tables.steps.size() == lattice.sequence().size() + src.motif_at.size());
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    const auto& def = lattice.element(e);
    CHECK(src.types[tables.steps[e].type_id()] == def.type);
    // The step's parameter block holds exactly the definition's bytes.
    CHECK(std::memcmp(reinterpret_cast<const unsigned char*>(tables.params.data()) + tables.steps[e].param_offset(),
                      lattice.params(lattice.sequence()[e].definition), def.type->param_size) == 0);
  }
}

TEST_CASE("transformed types whose blocks all hold the same operations read them at fixed offsets") {
  // Every Multipole shifted and rolled: straight-line calls with constant operations
  // (fusetrack/device/transform.h, transform_operation); one of them only shifted: the general case.
  nlohmann::ordered_json doc = ft::test::parse_bundled("sextupole_rf_ring.json");
  for (auto& [name, e] : doc["elements"].items())
    if (e["type"] == "Multipole") e.update({{"shift_x", 1e-5}, {"shift_y", -2e-5}, {"rot_s_rad", 1e-4}});
  const Lattice all = lattice_from_json(doc, "shift_roll", builtin_registry());
  const KernelSource src = generate_fused_kernel(all, FmaMode::Off, Dispatch::Switch);
  REQUIRE(src.transformed_types.size() == 1);
  const uint64_t shift_roll = kTransformShiftThenRoll | (kTransformRollThenShift << 24);
  CHECK(src.transformed_operations[0] == shift_roll);
  CHECK(src.text.find(fmt::format("ft::transform_operation({}, ft_v + 0, p); ft::transform_operation({}, ft_v + 2, p); "
                                  "Multipole_track(*reinterpret_cast<const Multipole*>(prm + 72), p); "
                                  "ft::transform_operation({}, ft_v + 4, p); ft::transform_operation({}, ft_v + 6, p);",
                                  int(kTransformShiftXY), int(kTransformRotateS), int(kTransformRotateS),
                                  int(kTransformShiftXY))) != std::string::npos);
  CHECK(src.text.find("ft::transform_entry(prm, p)") == std::string::npos);
  // The case reads the element's own parameters after the 9 words of [header][dx, dy, sin, cos][sin, cos, dx, dy].
  const KernelTables tables = kernel_tables(all, src);
  const unsigned char* table = reinterpret_cast<const unsigned char*>(tables.params.data());
  size_t transformed = 0;
  for (size_t e = 0; e < tables.steps.size(); ++e) {
    if (tables.steps[e].type_id() < src.types.size()) continue;
    ++transformed;
    const unsigned char* block = table + tables.steps[e].param_offset();
    uint64_t header = 0;
    std::memcpy(&header, block, 8);
    CHECK((header & 0xffffffffffffull) == shift_roll);
    CHECK((header >> 48) == 9u);
    CHECK(std::memcmp(block + 72, all.params(all.sequence()[e].definition), all.element(e).type->param_size) == 0);
  }
  CHECK(transformed > 0);

  for (auto& [name, e] : doc["elements"].items())
    if (e["type"] == "Multipole") {
      e.erase("rot_s_rad");
      break;
    }
  const Lattice mixed = lattice_from_json(doc, "shift_roll_and_shift", builtin_registry());
  const KernelSource general = generate_fused_kernel(mixed, FmaMode::Off, Dispatch::Switch);
  REQUIRE(general.transformed_types.size() == 1);
  CHECK(general.transformed_operations[0] == kMixedTransforms);
  CHECK(general.text.find("ft::transform_entry(prm, p)") != std::string::npos);
  // NVRTC compiles the straight-line case (the general one is compiled by the bundled-lattice test); the
  // staged kernel runs the same switch cases.
  const KernelCompiler compiler("off");
  for (Dispatch dispatch : {Dispatch::Switch, Dispatch::Staged}) {
    CompiledKernel k;
    CHECK_NOTHROW(k = compiler.compile(generate_fused_kernel(all, FmaMode::Off, dispatch), 90));
    CHECK(k.cubin.size() > 100);
  }
}

TEST_CASE("identical parameter blocks are stored once in the switch kernel's table") {
  const Lattice lattice = ft::test::bundled_lattice("reference_sequence.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  const KernelTables tables = kernel_tables(lattice, src);
  size_t distinct_bytes = 0;
  for (const auto& def : lattice.definitions()) distinct_bytes += (def.type->param_size + 7) / 8 * 8;
  CHECK(tables.params.size() * 8 <= distinct_bytes);
  CHECK(tables.steps.size() == 301 + src.motif_at.size());
}

TEST_CASE("baked source spells every parameter exactly") {
  const Lattice lattice = ft::test::bundled_lattice("fodo_ring.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Baked);
  CHECK(src.dispatch == Dispatch::Baked);
  // 0.09 and -0.18 as hexadecimal literals round-trip exactly.
  CHECK(src.text.find(fmt::format("{:a}", 0.09)) != std::string::npos);
  CHECK(src.text.find(fmt::format("{:a}", -0.18)) != std::string::npos);
  CHECK(choose_dispatch(lattice, Dispatch::Auto) == Dispatch::Baked);
}

TEST_CASE("dump writes the source and every header") {
  const Lattice lattice = ft::test::bundled_lattice("fodo_ring.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  const auto dir = ft::test::temp_dir("dump");
  dump_kernel_source(src, dir.string());
  CHECK(std::filesystem::exists(dir / src.name));
  for (const auto& [name, text] : src.headers) {
    const std::string& header_name = name;  // CAPTURE's lambda cannot capture a structured binding (C++17)
    CAPTURE(header_name);
    std::ifstream in(dir / name);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(content == text);
  }
}

TEST_CASE("an NVRTC error names the header and the plugin it came from") {
  const Lattice lattice = ft::test::bundled_lattice("fodo_ring.json");
  KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  const ElementType* drift = builtin_registry().find("Drift");
  REQUIRE(drift);
  src.headers[drift->header] += "\nFT_FUNCTION void broken() { undefined_identifier_in_drift = 1; }\n";
  const std::string msg = ft::test::error_message([&] { KernelCompiler("off").compile(src, 90); });
  CHECK(msg.find("NVRTC failed") != std::string::npos);
  CHECK(msg.find("undefined_identifier_in_drift") != std::string::npos);
  CHECK(msg.find(drift->header + " comes from plugin builtin") != std::string::npos);
  CHECK(msg.find("fusetrack_plugin_builtin.so") != std::string::npos);
}

TEST_CASE("dispatch names round-trip") {
  for (Dispatch d : {Dispatch::Auto, Dispatch::Switch, Dispatch::Baked, Dispatch::Staged}) {
    Dispatch parsed = Dispatch::Baked;
    CHECK(parse_dispatch(dispatch_name(d), parsed));
    CHECK(parsed == d);
  }
  Dispatch unchanged = Dispatch::Switch;
  CHECK_FALSE(parse_dispatch("fast", unchanged));
  CHECK(unchanged == Dispatch::Switch);
}

TEST_CASE("automatic kernel form: many elements of a large-code type go to the switch kernel") {
  // SpaceChargeBiGaussian (FT_LARGE_CODE: the complex error function) inlined 160 times took 105 s of
  // NVRTC; the automatic form bakes at most kBakedMaxLargeCodeElements of them.
  auto ring = [](size_t n_space_charge) {
    nlohmann::ordered_json j;
    j["fusetrack_lattice"] = 1;
    j["reference"] = {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", 5.7e8}};
    j["elements"]["d"] = {{"type", "Drift"}, {"length", 1.0}};
    j["elements"]["sc"] = {{"type", "SpaceChargeBiGaussian"}, {"length", 1.0}, {"number_of_particles", 1e11},
                           {"sigma_z", 1.0}, {"sigma_x", 1e-3}, {"sigma_y", 2e-3}};
    nlohmann::ordered_json seq = nlohmann::ordered_json::array();
    for (size_t k = 0; k < n_space_charge; ++k) {
      seq.push_back("d");
      seq.push_back("sc");
    }
    j["sequence"] = seq;
    return lattice_from_json(j, "large_code.json", builtin_registry());
  };
  CHECK(builtin_registry().find("SpaceChargeBiGaussian")->large_code);
  CHECK_FALSE(builtin_registry().find("Drift")->large_code);
  CHECK(choose_dispatch(ring(kBakedMaxLargeCodeElements), Dispatch::Auto) == Dispatch::Baked);
  CHECK(choose_dispatch(ring(kBakedMaxLargeCodeElements + 1), Dispatch::Auto) == Dispatch::Switch);
  CHECK(choose_dispatch(ring(kBakedMaxLargeCodeElements + 1), Dispatch::Baked) == Dispatch::Baked);  // asked for
}

TEST_CASE("two particles per thread: the switch kernels of a variants study, with and without motifs") {
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  const Lattice& base = v.lattices[0];
  const KernelCompiler compiler("off");
  const KernelSource one = generate_fused_kernel(base, FmaMode::Off, Dispatch::Auto, 0, v.pointers());
  CHECK(one.particles_per_thread == 1);
  for (FmaMode fma : {FmaMode::Off, FmaMode::On}) {
    CAPTURE(static_cast<int>(fma));
    const KernelSource src = generate_fused_kernel(base, fma, Dispatch::Auto, 0, v.pointers(), 2);
    CHECK(src.dispatch == Dispatch::Switch);
    CHECK(src.particles_per_thread == 2);
    CHECK(src.variants);
    // Both entry points, each particle with its own variant's table, and the same tables as one per thread.
    REQUIRE(src.few_particles_form);
    CHECK(src.text.find(std::string("void __launch_bounds__(128) ") + kFusedKernelName + "(") != std::string::npos);
    CHECK(src.text.find(std::string("void __launch_bounds__(128) ") + kFewParticlesKernelName + "(") !=
          std::string::npos);
    CHECK(src.text.find("params + variant[ib] * variant_stride") != std::string::npos);
    CHECK(src.text.find("params_b = params_a;") != std::string::npos);
    CHECK(src.motif_at == one.motif_at);
    CHECK(kernel_tables(base, src, v.pointers()).steps.size() == kernel_tables(base, one, v.pointers()).steps.size());
    // Every element's function runs for a, then for b; the transformed case (sd[5], misaligned in one variant) too.
    CHECK(src.text.find("Drift_track(*reinterpret_cast<const Drift*>(prm_a), pa); "
                        "Drift_track(*reinterpret_cast<const Drift*>(prm_b), pb);") != std::string::npos);
    CHECK(src.text.find("ft::transform_entry(prm_b, pb)") != std::string::npos);
    CHECK(src.text.find(", p)") == std::string::npos);
    CompiledKernel k;
    CHECK_NOTHROW(k = compiler.compile(src, 90));
    CHECK(k.cubin.size() > 100);
  }
  // A register cap applies to both entry points.
  CHECK(generate_fused_kernel(base, FmaMode::Off, Dispatch::Switch, 64, v.pointers(), 2)
            .text.find("__launch_bounds__(128)") == std::string::npos);
  // Without motifs: the plain switch, one entry point.
  setenv("FUSETRACK_MOTIFS", "0", 1);
  const KernelSource plain = generate_fused_kernel(base, FmaMode::Off, Dispatch::Switch, 0, v.pointers(), 2);
  unsetenv("FUSETRACK_MOTIFS");
  CHECK(plain.particles_per_thread == 2);
  CHECK_FALSE(plain.few_particles_form);
  CHECK(plain.text.find(kFewParticlesKernelName) == std::string::npos);
  CompiledKernel k;
  CHECK_NOTHROW(k = compiler.compile(plain, 90));
  CHECK(k.cubin.size() > 100);
  // The baked and staged forms track one particle per thread.
  const Lattice ring = ft::test::bundled_lattice("sextupole_rf_ring.json");
  CHECK(generate_fused_kernel(ring, FmaMode::Off, Dispatch::Baked, 0, {}, 2).particles_per_thread == 1);
  CHECK(generate_fused_kernel(ring, FmaMode::Off, Dispatch::Staged, 0, {}, 2).particles_per_thread == 1);
  CHECK(ft::test::error_message([&] {
          generate_fused_kernel(ring, FmaMode::Off, Dispatch::Switch, 0, {}, 3);
        }).find("1 or 2") != std::string::npos);
}

TEST_CASE("particles per thread: the caller's choice, else FUSETRACK_PARTICLES_PER_THREAD, else the default") {
  unsetenv("FUSETRACK_PARTICLES_PER_THREAD");
  CHECK(particles_per_thread_setting(0) == kDefaultParticlesPerThread);
  CHECK(particles_per_thread_setting(1) == 1);
  CHECK(particles_per_thread_setting(2) == 2);
  setenv("FUSETRACK_PARTICLES_PER_THREAD", "2", 1);
  CHECK(particles_per_thread_setting(0) == 2);
  CHECK(particles_per_thread_setting(1) == 1);
  setenv("FUSETRACK_PARTICLES_PER_THREAD", "1", 1);
  CHECK(particles_per_thread_setting(0) == 1);
  setenv("FUSETRACK_PARTICLES_PER_THREAD", "4", 1);
  CHECK(ft::test::error_message([] { particles_per_thread_setting(0); }).find("FUSETRACK_PARTICLES_PER_THREAD=4") !=
        std::string::npos);
  unsetenv("FUSETRACK_PARTICLES_PER_THREAD");
  CHECK(ft::test::error_message([] { particles_per_thread_setting(3); }).find("1 or 2") != std::string::npos);
}

}  // namespace test_codegen
