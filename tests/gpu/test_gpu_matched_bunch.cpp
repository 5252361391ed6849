// Matched bunches made on the device (CudaBackend::track_matched_share): the sampler kernel runs the
// host's code (fusetrack/device/random.h, make_particle) compiled with fma off, so the particles are
// the host sampler's bit for bit; tracked from there, they equal the CPU's tracking of the host's
// particles (fma off). The sums for the sample moments and the alive count come from device
// reductions and are checked against the host's sums of the same particles.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "collective/longitudinal_ring.h"
#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/matched_bunch.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_matched_bunch.
namespace test_gpu_matched_bunch {

using namespace ft;

namespace {

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

Lattice impedance_ring() {
  ft::test::LongitudinalRing ring;
  ring.intensity = 1e11;  // a collective element: the run goes through the device-resident path
  return ft::test::longitudinal_ring(ring);
}

MatchedBunchReport report_of(const Lattice& lattice, const char* distribution) {
  MatchedBunchOptions o;
  o.distribution = distribution;
  o.sigma_zeta = 0.2;
  o.seed = 777;
  return match_longitudinal_bunch(lattice, o);
}

}  // namespace

TEST_CASE("matched bunch made on the device: the host sampler's particles bit for bit, device sums and counts" *
          doctest::test_suite("quick")) {
  const Lattice lattice = impedance_ring();
  for (const char* dist : {"gaussian", "binomial"}) {
    CAPTURE(dist);
    const MatchedBunchReport report = report_of(lattice, dist);
    // A share that does not start at 0 and is not a multiple of any block size.
    const MatchedBunchShare share(report, 777, 123457, 200003);
    const Particles host = share.sample(2);
    CudaBackend gpu(lattice, CudaBackendOptions{});
    TrackOptions o;
    o.turns = 0;  // made and copied back, not tracked
    Particles device;
    const CudaBackend::MatchedShareRun made = gpu.track_matched_share(share, device, o, true);
    REQUIRE(device.size() == host.size());
    CHECK(same_bits(device.x, host.x));
    CHECK(same_bits(device.px, host.px));
    CHECK(same_bits(device.y, host.y));
    CHECK(same_bits(device.py, host.py));
    CHECK(same_bits(device.zeta, host.zeta));
    CHECK(same_bits(device.delta, host.delta));
    CHECK(same_bits(device.ptau, host.ptau));
    CHECK(same_bits(device.rpp, host.rpp));
    CHECK(same_bits(device.rvv, host.rvv));
    CHECK(device.state == host.state);
    CHECK(device.lost_turn == host.lost_turn);
    CHECK(device.lost_element == host.lost_element);
    CHECK(device.id == host.id);
    CHECK(device.beta0 == host.beta0);
    // The device's sums add the same numbers in another order: equal to rounding.
    const LongitudinalSums h = longitudinal_sums(host);
    CHECK(made.initial.count == h.count);
    CHECK(std::fabs(made.initial.zeta - h.zeta) <= 1e-12 * h.count * std::sqrt(h.zeta2 / h.count));
    CHECK(made.initial.zeta2 == doctest::Approx(h.zeta2).epsilon(1e-12));
    CHECK(std::fabs(made.initial.delta - h.delta) <= 1e-12 * h.count * std::sqrt(h.delta2 / h.count));
    CHECK(made.initial.delta2 == doctest::Approx(h.delta2).epsilon(1e-12));
    CHECK(made.alive == host.size());
    // Without the final copy nothing comes back; the alive count is counted on the device.
    Particles none;
    const CudaBackend::MatchedShareRun kept = gpu.track_matched_share(share, none, o, false);
    CHECK(none.size() == 0);
    CHECK(kept.alive == share.count());
    CHECK(gpu.last_stats().download_seconds == 0.0);
    CHECK(gpu.last_stats().upload_seconds == 0.0);
  }
}

TEST_CASE("matched bunch made on the device and tracked there equals the CPU's run of the host's particles (fma off)" *
          doctest::test_suite("scale")) {
  const Lattice lattice = impedance_ring();
  const MatchedBunchReport report = report_of(lattice, "gaussian");
  const MatchedBunchShare share(report, 777, 0, 50000);
  TrackOptions o;
  o.turns = 30;
  o.fma = FmaMode::Off;
  Particles cpu = share.sample();
  auto cpu_backend = make_cpu_backend(lattice);
  cpu_backend->track(cpu, o);
  CudaBackend gpu(lattice, CudaBackendOptions{});
  Particles device;
  const CudaBackend::MatchedShareRun made = gpu.track_matched_share(share, device, o, true);
  const ParticleComparison c = compare_particles(cpu, device);
  MESSAGE(fmt::format("{} particles, {} turns: bitwise equal {}/{}, state mismatches {}", cpu.size(), o.turns,
                      c.bitwise_equal, c.coordinates, c.state_mismatches));
  CHECK(c.identical());
  CHECK(device.id == cpu.id);
  CHECK(made.alive == cpu.alive_count());
  const auto a = cpu_backend->collective_snapshots(), b = gpu.collective_snapshots();
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].counts == b[k].counts);
    CHECK(same_bits(a[k].field, b[k].field));
  }
}

}  // namespace test_gpu_matched_bunch
