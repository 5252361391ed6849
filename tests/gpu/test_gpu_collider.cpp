// The collider's bunches on the GPU (fusetrack/cuda_collider.h) against the CPU: with fma off every
// per-crossing record (centroids, sizes, emittances, luminosity) bit for bit, strong-strong 6D with a
// crossing angle, chromaticity, synchrotron motion and the gear change (3 and 2 bunches), one beam
// on a lattice ring (its bunches stay on the host, its turn on the backend); bunches generated on the device
// equal the host generator's; the check of a bunch's first crossing on a sample.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "fusetrack/collider.h"
#include "fusetrack/cuda_collider.h"
#include "fusetrack/optics.h"
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

namespace {

/// Every particle array of two sets bitwise equal.
bool same_particles(const Particles& a, const Particles& b) {
  const auto same = [](const auto& u, const auto& v) {
    return u.size() == v.size() && (u.empty() || std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])) == 0);
  };
  return same(a.x, b.x) && same(a.px, b.px) && same(a.y, b.y) && same(a.py, b.py) && same(a.zeta, b.zeta) &&
         same(a.delta, b.delta) && same(a.ptau, b.ptau) && same(a.rpp, b.rpp) && same(a.rvv, b.rvv) &&
         same(a.state, b.state) && same(a.lost_turn, b.lost_turn) && same(a.lost_element, b.lost_element) &&
         same(a.id, b.id);
}

}  // namespace

TEST_CASE("collider bunches generated on the GPU equal the host generator's bit for bit (fma off), whole and shares" *
          doctest::test_suite("colliders")) {
  ReferenceParticle ref;
  ref.mass0 = 938272088.16;
  ref.p0c = 7e12;
  LinearOptics o;
  o.beta_x = 0.55, o.alpha_x = -0.2, o.gamma_x = (1 + 0.04) / 0.55;
  o.beta_y = 0.6, o.alpha_y = 0.1, o.gamma_y = (1 + 0.01) / 0.6;
  o.dx = 0.01, o.dpx = 1e-3, o.dy = -0.002, o.dpy = 2e-4;
  o.closed_orbit = {1e-5, 2e-6, -3e-6, 4e-7, 1e-3, 1e-5};
  const ft_gaussian_bunch g = gaussian_bunch(ref, o, 3.75e-6, 3.0e-6, 0.0755, 1.129e-4);
  GpuColliderContext gpu(0, FmaMode::Off);
  int compared = 0;
  for (const auto& [first, count] : {std::pair<size_t, size_t>{0, 100000}, {12345, 4567}, {0, 1}}) {
    GpuColliderBunch device(gpu, g, 42, first, count);
    CHECK(device.size() == count);
    Particles on_device;
    device.download(on_device);
    const Particles on_host = sample_gaussian_bunch(g, 42, first, count, 0);
    CHECK(same_particles(on_device, on_host));
    CHECK(on_device.id.front() == static_cast<int64_t>(first));
    if (count > 150) {  // a ranged download: particles [100, 150)
      Particles part;
      device.download(part, 100, 50);
      CHECK(same_particles(part, slice_particles(on_host, 100, 150)));
    }
    ++compared;
  }
  CHECK(compared == 3);
  MESSAGE("generator kernel time: ", gpu.kernel_seconds(), " s");
}

TEST_CASE(
    "collider on the GPU: the check of the first crossing on a sample passes for bunches of 10^5 particles, "
    "leaves them untouched, and the records equal the CPU's bit for bit" *
    doctest::test_suite("colliders")) {
  // lhc_like.json with 2 + 2 bunches of 10^5 macroparticles and 6 slices.
  ColliderSetup setup = read_collider_setup(ft::test::source_path("lattices/colliders/lhc_like.json"));
  for (ColliderBeam& b : setup.beams) {
    b.bunches.count = 2;
    b.bunches.macroparticles = 100000;
  }
  setup.ip.slices = 6;
  const auto run = [&](const std::string& device, bool check, size_t sample) {
    CollideOptions o;
    o.turns = 2;
    o.backend.device = device;
    o.fma = FmaMode::Off;
    o.check_gpu = check;
    o.check_sample = sample;
    return run_collide(setup, ft::test::builtin_registry(), o, world());
  };
  const CollideResult cpu = run("cpu", true, 65536);
  const CollideResult sampled = run("gpu", true, 65536), whole = run("gpu", true, 0), unchecked = run("gpu", false, 0);
  REQUIRE(sampled.device != "CPU");
  CHECK(sampled.gpu_checks == 4);
  CHECK(whole.gpu_checks == 4);
  CHECK(unchecked.gpu_checks == 0);
  CHECK(cpu.gpu_checks == 0);
  REQUIRE(cpu.records.size() == 2 * 2 * 2);  // 2 turns x 2 slots per turn (bunches of beam 1) x 2 beams
  for (const CollideResult* r : {&sampled, &whole, &unchecked}) {
    REQUIRE(r->records.size() == cpu.records.size());
    size_t differing = 0;
    for (size_t k = 0; k < cpu.records.size(); ++k) {
      const CrossingRecord &a = cpu.records[k], &b = r->records[k];
      const double fa[] = {a.alive,      a.luminosity,  a.mean[0],     a.mean[1],    a.mean[2],
                           a.mean[3],    a.mean[4],     a.mean[5],     a.sigma_x,    a.sigma_y,
                           a.sigma_zeta, a.sigma_delta, a.emittance_x, a.emittance_y};
      const double fb[] = {b.alive,      b.luminosity,  b.mean[0],     b.mean[1],    b.mean[2],
                           b.mean[3],    b.mean[4],     b.mean[5],     b.sigma_x,    b.sigma_y,
                           b.sigma_zeta, b.sigma_delta, b.emittance_x, b.emittance_y};
      if (std::memcmp(fa, fb, sizeof(fa)) != 0) ++differing;
    }
    CHECK(differing == 0);
  }
  MESSAGE("kernels: ", sampled.gpu_kernel_seconds, " s; whole run ", sampled.seconds, " s (CPU ", cpu.seconds, " s)");
}

}  // namespace test_gpu_collider
