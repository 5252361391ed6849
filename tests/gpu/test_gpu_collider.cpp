// The collider's bunches on the GPU (fusetrack/cuda_collider.h) against the CPU: with fma off every
// per-crossing record (centroids, sizes, emittances, luminosity) bit for bit, strong-strong 6D with a
// crossing angle, chromaticity, synchrotron motion and the gear change (3 and 2 bunches), one beam
// on a lattice ring (its bunches stay on the host, its turn on the backend).
#include <doctest/doctest.h>

#include <cstring>

#include "fusetrack/collider.h"
#include "fusetrack/parallel.h"
#include "support/paths.h"
#include "support/registry.h"

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

TEST_CASE("collider on the GPU: every per-crossing record equals the CPU's bit for bit (fma off)") {
  const CollideResult cpu = run_on("cpu"), gpu = run_on("gpu");
  MESSAGE("GPU run on ", gpu.device, ": ", gpu.records.size(), " records, kernels ", gpu.gpu_kernel_seconds, " s");
  REQUIRE(gpu.device != "CPU");
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
