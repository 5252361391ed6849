// Lattice variants on the GPU: one switch kernel for every variant, each particle reading its
// variant's parameter table. With fma off the study equals the CPU's study bit for bit, and each
// variant equals that variant tracked alone on the GPU (whatever form the lone run takes).
#include <doctest/doctest.h>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/da.h"
#include "support/variant_study.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_variants.
namespace test_gpu_variants {

using namespace ft;

TEST_CASE("variants on the GPU: a DA study equals the CPU's bit for bit and each variant equals its lone GPU scan" *
          doctest::test_suite("da")) {
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  const DaConfig c = ft::test::variant_study_config(2000);
  DaScan on_cpu = make_da_study(v.pointers(), v.names, c), on_gpu = on_cpu;
  DaRunOptions ro;
  ro.checkpoint_every = 500;
  auto cpu = make_cpu_backend(v.lattices[0]);
  cpu->set_variants(v.pointers());
  CudaBackend gpu(v.lattices[0], CudaBackendOptions{});
  gpu.set_variants(v.pointers());
  REQUIRE(run_da_scan(on_cpu, *cpu, ro));
  REQUIRE(run_da_scan(on_gpu, gpu, ro));
  CHECK(gpu.last_stats().form.dispatch == Dispatch::Switch);
  const ParticleComparison cmp = compare_particles(on_cpu.particles, on_gpu.particles);
  MESSAGE("study of ", v.size(), " variants on ", gpu.name(), ": lost ",
          on_cpu.particles.size() - on_cpu.particles.alive_count(), " of ", on_cpu.particles.size(), "; bitwise equal ",
          cmp.bitwise_equal, "/", cmp.coordinates);
  CHECK(on_cpu.particles.alive_count() < on_cpu.particles.size());
  CHECK(cmp.identical());
  for (size_t k = 0; k < v.size(); ++k) {
    DaScan alone = make_da_scan(v.lattices[k], c);
    CudaBackend lone(v.lattices[k], CudaBackendOptions{});
    REQUIRE(run_da_scan(alone, lone, ro));
    const ParticleComparison each = compare_particles(alone.particles, da_variant_scan(on_gpu, k).particles);
    INFO("variant ", v.names[k], ": lone form ", kernel_form_name(lone.last_stats().form));
    CHECK(each.identical());
  }
}

TEST_CASE(
    "variants on the GPU: every multipole shifted and rolled in every variant (the shift-roll case) equals the CPU" *
    doctest::test_suite("da")) {
  // Misaligned thin multipoles in every variant, each with its own misalignment: the kernel's
  // Multipole case reads the shift-roll blocks at fixed offsets (codegen, transformed_shift_roll).
  const auto doc = nlohmann::ordered_json::parse(R"json({
    "fusetrack_variants": 1,
    "variants": [
      {"name": "seed_a", "elements": [{"match": "(qf_half|qd|sf_half|sd)", "set": {"shift_x": 2e-4, "shift_y": -1e-4, "rot_s_rad": 3e-3}}]},
      {"name": "seed_b", "elements": [{"match": "(qf_half|qd|sf_half|sd)", "set": {"shift_x": -3e-4, "shift_y": 2e-4, "rot_s_rad": -2e-3}},
                                      {"match": "sf_.*", "add": {"knl": [0.0, 0.0, 0.5]}}]}
    ]})json");
  const LatticeVariants v =
      variants_from_json(ft::test::bundled_lattice("sextupole_rf_ring.json"), doc, "shift_roll_variants.json");
  DaConfig c = ft::test::variant_study_config(1000);
  c.around_closed_orbit = false;  // the ring's equal tunes: with rolls no coupled optics exist
  DaScan on_cpu = make_da_study(v.pointers(), v.names, c), on_gpu = on_cpu;
  DaRunOptions ro;
  auto cpu = make_cpu_backend(v.lattices[0]);
  cpu->set_variants(v.pointers());
  CudaBackend gpu(v.lattices[0], CudaBackendOptions{});
  gpu.set_variants(v.pointers());
  REQUIRE(run_da_scan(on_cpu, *cpu, ro));
  REQUIRE(run_da_scan(on_gpu, gpu, ro));
  const ParticleComparison cmp = compare_particles(on_cpu.particles, on_gpu.particles);
  MESSAGE("shift-roll study: lost ", on_cpu.particles.size() - on_cpu.particles.alive_count(), " of ",
          on_cpu.particles.size(), "; bitwise equal ", cmp.bitwise_equal, "/", cmp.coordinates);
  CHECK(on_cpu.particles.alive_count() < on_cpu.particles.size());
  CHECK(cmp.identical());
}

TEST_CASE(
    "two particles per thread: a study of variants equals the CPU bit for bit; a thread's two particles in "
    "different variants" *
    doctest::test_suite("da")) {
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  // The study (each variant's particles one after the other), both kernel forms.
  const DaConfig c = ft::test::variant_study_config(1000);
  DaScan on_cpu = make_da_study(v.pointers(), v.names, c);
  DaRunOptions ro;
  ro.checkpoint_every = 300;
  auto cpu = make_cpu_backend(v.lattices[0]);
  cpu->set_variants(v.pointers());
  REQUIRE(run_da_scan(on_cpu, *cpu, ro));
  CHECK(on_cpu.particles.alive_count() < on_cpu.particles.size());
  for (int few_form : {0, 1}) {
    CAPTURE(few_form);
    CudaBackendOptions co;
    co.few_particles_form = few_form;
    co.particles_per_thread = 2;
    CudaBackend gpu(v.lattices[0], co);
    gpu.set_variants(v.pointers());
    DaScan two = make_da_study(v.pointers(), v.names, c);
    REQUIRE(run_da_scan(two, gpu, ro));
    CHECK(gpu.last_stats().form.particles_per_thread == 2);
    CHECK(compare_particles(on_cpu.particles, two.particles).identical());
  }
  // Particles of the three variants interleaved (neighbours, and so the two particles of most threads, in
  // different variants), an odd count.
  Particles initial = make_grid(v.lattices[0].reference().beta0(), -0.03, 0.03, 45, -0.03, 0.03, 45, 2e-4);
  initial.variant.resize(initial.size());
  for (size_t i = 0; i < initial.size(); ++i) initial.variant[i] = static_cast<int32_t>((i * 7 / 3) % v.size());
  TrackOptions o;
  o.turns = 500;
  o.fma = FmaMode::Off;
  Particles expected = initial;
  cpu->track(expected, o);
  MESSAGE("interleaved variants: lost " << expected.size() - expected.alive_count() << " of " << expected.size());
  CHECK(expected.alive_count() < expected.size());
  for (int few_form : {0, 1})
    for (int particles_per_thread : {1, 2}) {
      CAPTURE(few_form);
      CAPTURE(particles_per_thread);
      CudaBackendOptions co;
      co.few_particles_form = few_form;
      co.particles_per_thread = particles_per_thread;
      CudaBackend gpu(v.lattices[0], co);
      gpu.set_variants(v.pointers());
      Particles p = initial;
      gpu.track(p, o);
      CHECK(gpu.last_stats().form.particles_per_thread == particles_per_thread);
      CHECK(compare_particles(expected, p).identical());
    }
}

}  // namespace test_gpu_variants
