// The collider's bunches on the GPU (fusetrack/cuda_collider.h) against the CPU: with fma off every
// per-crossing record (centroids, sizes, emittances, luminosity) bit for bit, strong-strong 6D with a
// crossing angle, chromaticity, synchrotron motion and the gear change (3 and 2 bunches), one beam
// on a lattice ring (its bunches stay on the host, its turn on the backend).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fusetrack/collider.h"
#include "fusetrack/parallel.h"
#include "support/paths.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_collider.
namespace test_gpu_collider {

using namespace ft;

namespace {

CollideResult run_on(const std::string& device) {
  const ColliderSetup setup = read_collider_setup(ft::test::source_path("tests/mpi/collider_gear.json"));
  CollideOptions o;
  o.turns = 30;
  o.backend.device = device;
  o.fma = FmaMode::Off;
  return run_collide(setup, ft::test::builtin_registry(), o, world());
}

}  // namespace

TEST_CASE("collider on the GPU: every per-crossing record equals the CPU's bit for bit (fma off)" *
          doctest::test_suite("colliders")) {
  const CollideResult cpu = run_on("cpu"), gpu = run_on("gpu");
  MESSAGE("GPU run on ", gpu.device, ": ", gpu.records.size(), " records, kernels ", gpu.gpu_kernel_seconds, " s");
  REQUIRE(gpu.device != "CPU");
  CHECK(gpu.gpu_checks == 3);  // the three linear-map bunches: first crossing replayed on the CPU, equal
  REQUIRE(cpu.records.size() == gpu.records.size());
  size_t differing = 0;
  for (size_t k = 0; k < cpu.records.size(); ++k) {
    const CrossingRecord &a = cpu.records[k], &b = gpu.records[k];
    const double fa[] = {a.alive, a.luminosity, a.mean[0], a.mean[1], a.mean[2], a.mean[3], a.mean[4], a.mean[5],
                         a.sigma_x, a.sigma_y, a.sigma_zeta, a.sigma_delta, a.emittance_x, a.emittance_y};
    const double fb[] = {b.alive, b.luminosity, b.mean[0], b.mean[1], b.mean[2], b.mean[3], b.mean[4], b.mean[5],
                         b.sigma_x, b.sigma_y, b.sigma_zeta, b.sigma_delta, b.emittance_x, b.emittance_y};
    if (std::memcmp(fa, fb, sizeof(fa)) != 0) ++differing;
  }
  CHECK(differing == 0);
}

TEST_CASE(
    "collider on the GPU: small bunches, the fallback deposit (401 slices), checkpointed particles equal the CPU's" *
    doctest::test_suite("colliders")) {
  // Bunches of 700 macroparticles (fewer than the 1024 chunks: empty chunks), 401 slices (the
  // slice integers no longer fit in shared memory: the separate deposit kernel), and the particles
  // themselves compared through the checkpoint files (the GPU bunches are copied back to write them).
  ColliderSetup setup = read_collider_setup(ft::test::source_path("tests/mpi/collider_gear.json"));
  for (ColliderBeam& b : setup.beams) b.bunches.macroparticles = 700;
  setup.ip.slices = 401;
  setup.ip.min_slice_macroparticles = 2;
  const auto run = [&](const std::string& device, const std::string& dir) {
    CollideOptions o;
    o.turns = 6;
    o.backend.device = device;
    o.output_dir = dir;
    o.checkpoint_every = 3;
    std::filesystem::remove_all(dir);
    return run_collide(setup, ft::test::builtin_registry(), o, world());
  };
  const std::string base = std::filesystem::temp_directory_path().string() + "/fusetrack_gpu_collider_";
  const CollideResult cpu = run("cpu", base + "cpu"), gpu = run("gpu", base + "gpu");
  REQUIRE(gpu.device != "CPU");
  REQUIRE(cpu.records.size() == gpu.records.size());
  for (size_t k = 0; k < cpu.records.size(); ++k) {
    const CrossingRecord &a = cpu.records[k], &b = gpu.records[k];
    CHECK(std::memcmp(a.mean.data(), b.mean.data(), sizeof(a.mean)) == 0);
    CHECK(std::memcmp(&a.luminosity, &b.luminosity, sizeof(double)) == 0);
    CHECK(std::memcmp(&a.emittance_x, &b.emittance_x, sizeof(double)) == 0);
  }
  size_t compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(base + "cpu/checkpoint")) {
    if (entry.path().extension() != ".npz") continue;
    const std::string other = base + "gpu/checkpoint/" + entry.path().filename().string();
    REQUIRE(std::filesystem::exists(other));
    std::ifstream fa(entry.path(), std::ios::binary), fb(other, std::ios::binary);
    const std::string a((std::istreambuf_iterator<char>(fa)), {}), b((std::istreambuf_iterator<char>(fb)), {});
    CHECK(a == b);
    ++compared;
  }
  CHECK(compared == 5);
}

}  // namespace test_gpu_collider
