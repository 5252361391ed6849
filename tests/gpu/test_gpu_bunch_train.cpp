// Bunch trains through the slice-moment elements on the GPU (TransverseWake and a delayed TransverseDamper
// with n_bunches > 1): the segment kernels deposit and kick on the train's slice grid, the host solves the
// kicks (MomentsCollectiveSolver), so with fma=off a 4-bunch train equals the CPU bit for bit. And a
// benchmark for MPI ranks (skipped by default): N bunches of M macroparticles, the bunches shared over the
// ranks, one GPU per rank, per-bunch hashes of the final particles that are the same for any rank count.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "fusetrack/compare.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/parallel.h"
#include "support/registry.h"
#include "support/wake_test_ring.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_bunch_train.
namespace test_gpu_bunch_train {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

/// The FODO ring of the single-bunch GPU wake test (160 m) with a train of `bunches` bunches `spacing` m
/// apart: a TransverseWake first (resonator and resistive wall, `memory` stored turns, `slices` per bunch)
/// and a bunch-by-bunch TransverseDamper with a delay of `delay` turns after qd. With the ring's tune 0.262 and
/// the gain 0.1, the damper's eigenvalue (transverse_damper.h) has modulus about 0.949 with no delay, 1.044 with 2
/// turns (anti-damping: the train is lost within about 150 turns), 0.941 with 4 (the kick about one betatron
/// period after the pickup: damped in 16 turns).
Lattice train_ring(int bunches, double spacing, int slices, int memory, double intensity = 3e11, int delay = 2) {
  json sources = json::array();
  sources.push_back({{"type", "Resonator"}, {"r_shunt", 1e6}, {"q", 1.0}, {"frequency", 1e9}});
  sources.push_back({{"type", "ResistiveWall"}, {"radius", 0.02}, {"length", 160.0}, {"conductivity", 1e6}});
  json wake = {{"type", "TransverseWake"}, {"n_slices", slices},      {"zeta_min", -0.6},
               {"zeta_max", 0.6},          {"intensity", intensity},       {"memory_turns", memory},
               {"n_bunches", bunches},     {"bunch_spacing", spacing}, {"sources", sources}};
  if (const char* convolution = std::getenv("FUSETRACK_WAKE_CONVOLUTION")) wake["convolution"] = convolution;
  json damper = {{"type", "TransverseDamper"}, {"gain_turns", 20.0}, {"zeta_min", -0.6}, {"zeta_max", 0.6},
                 {"delay", delay},             {"n_bunches", bunches}, {"bunch_spacing", spacing}};
  const json doc =
      ft::test::wake_test_ring({{"wake", wake}, {"damper", damper}}, {"wake"}, 0.01, -0.02, 26e9, "damper");
  return lattice_from_json(doc, "gpu_train_ring.json", ft::test::builtin_registry());
}

/// Bunches [first, first + count) of a train of `per_bunch` macroparticles each (bunch b offset by b mm in x
/// and at zeta - b spacing, rms sigma_zeta and sigma_delta); every bunch drawn from its own seed, so that any share
/// of bunches is the same.
Particles train_bunches(double beta0, int first, int count, size_t per_bunch, double spacing, double sigma_zeta,
                        double sigma_delta = 1e-4) {
  Particles p(static_cast<size_t>(count) * per_bunch, beta0);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int k = 0; k < count; ++k) {
    const int b = first + k;
    std::mt19937_64 rng(1000 + static_cast<uint64_t>(b));
    for (size_t i = 0; i < per_bunch; ++i)
      p.set(static_cast<size_t>(k) * per_bunch + i, 1e-3 * (1 + b % 5) + 1e-3 * g(rng), 2e-5 * g(rng),
            -5e-4 + 1e-3 * g(rng), 2e-5 * g(rng), sigma_zeta * g(rng) - b * spacing, sigma_delta * g(rng));
  }
  return p;
}

/// FNV-1a over the bytes of a bunch's coordinates and states.
uint64_t bunch_hash(const Particles& p, size_t begin, size_t end) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&](const void* data, size_t bytes) {
    const unsigned char* c = static_cast<const unsigned char*>(data);
    for (size_t k = 0; k < bytes; ++k) h = (h ^ c[k]) * 1099511628211ull;
  };
  for (size_t i = begin; i < end; ++i) {
    const double v[6] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i]};
    add(v, sizeof(v));
    add(&p.state[i], sizeof(p.state[i]));
  }
  return h;
}

}  // namespace

TEST_CASE("bunch train on the GPU: 4 bunches, fma off equals the CPU bitwise (both dispatches)" *
          doctest::test_suite("wakes")) {
  // 3.6 m: a whole number of the wake's slices (0.03 m) and of the bunch-by-bunch damper's one slice (1.2 m).
  const Lattice lattice = train_ring(4, 3.6, 40, 3);
  const Particles initial = train_bunches(lattice.reference().beta0(), 0, 4, 1000, 3.6, 0.15);
  for (Dispatch dispatch : {Dispatch::Baked, Dispatch::Switch}) {
    TrackOptions o;
    o.turns = 6;
    o.fma = FmaMode::Off;
    Particles cpu = initial, gpu = initial;
    make_cpu_backend(lattice)->track(cpu, o);
    CudaBackendOptions co;
    co.dispatch = dispatch;
    CudaBackend gpu_backend(lattice, co);
    gpu_backend.track(gpu, o);
    const ParticleComparison c = compare_particles(cpu, gpu);
    MESSAGE(fmt::format("4 bunches x 1000, 6 turns, {}: bitwise equal {}/{}, state mismatches {}, max rel diff {:.3g}",
                        dispatch == Dispatch::Baked ? "baked" : "switch", c.bitwise_equal, c.coordinates,
                        c.state_mismatches, c.max_relative));
    CHECK(c.identical());
  }
}

TEST_CASE("bunch train on the GPU: a slice table larger than shared memory (windowed deposit) equals the CPU bitwise" *
          doctest::test_suite("wakes")) {
  // 50 bunches x 60 slices: 3000 slices x 5 words, more than a block's shared memory, so each block sums a
  // window of the table (kMomentWindowSlices) over a contiguous chunk of the particles. Bunch after bunch,
  // most contributions fall in the window; shuffled, most go to the table in global memory directly.
  const Lattice lattice = train_ring(50, 1.2, 60, 3);
  const Particles ordered = train_bunches(lattice.reference().beta0(), 0, 50, 400, 1.2, 0.1);
  Particles shuffled = ordered;
  std::vector<size_t> order(ordered.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t k = order[i];
    shuffled.set(i, ordered.x[k], ordered.px[k], ordered.y[k], ordered.py[k], ordered.zeta[k], ordered.delta[k]);
  }
  for (const Particles* initial : {&ordered, static_cast<const Particles*>(&shuffled)}) {
    TrackOptions o;
    o.turns = 6;
    o.fma = FmaMode::Off;
    Particles cpu = *initial, gpu = *initial;
    make_cpu_backend(lattice)->track(cpu, o);
    CudaBackend gpu_backend(lattice, CudaBackendOptions{});
    gpu_backend.track(gpu, o);
    const ParticleComparison c = compare_particles(cpu, gpu);
    MESSAGE(fmt::format("50 bunches x 400, 3000 slices, 6 turns, {}: bitwise equal {}/{}, state mismatches {}, "
                        "max rel diff {:.3g}",
                        initial == &ordered ? "bunch after bunch" : "shuffled", c.bitwise_equal, c.coordinates,
                        c.state_mismatches, c.max_relative));
    CHECK(c.identical());
  }
}

// A benchmark of bunch trains on GPUs, not part of the suite (reported as skipped). One GPU per MPI rank:
//   build-gpu/bin/test_gpu -tc="bunch train on the GPU: benchmark*" --no-skip
//   mpirun -n 2 build-gpu/bin/test_gpu -tc="bunch train on the GPU: benchmark*" --no-skip
// FUSETRACK_TRAIN_BUNCHES (default 100) bunches of FUSETRACK_TRAIN_PARTICLES (default 10^6) macroparticles,
// 25 m apart, 500 slices per bunch, FUSETRACK_TRAIN_MEMORY (default 100) stored turns, FUSETRACK_TRAIN_TURNS
// (default 20) turns, FUSETRACK_TRAIN_INTENSITY (default 1e10) particles per bunch, FUSETRACK_TRAIN_DELTA (default
// 1e-4) rms momentum spread (the ring has no RF: with 0 the bunches keep their zeta over long runs),
// FUSETRACK_TRAIN_DELAY (default 4) the damper's delay in turns (4 damps, 2 loses the train: train_ring), fma off.
// The defaults keep the train for 10^3 turns (on the CPU, 100 bunches x 200: every particle within the cuts, the
// emittance x4.4 by turn 1000; at 3e10 the head-tail motion, which a bunch-by-bunch damper does not reach, loses
// most of the train from turn 700, at 3e11 by turn 100);
// FUSETRACK_WAKE_CONVOLUTION=fft: the wake's FFT convolution. The bunches are shared
// over the ranks (whole bunches, share_of): each rank solves its own bunches, the ranks exchange which bunches
// they hold and the bunches' point totals (MomentsCollectiveSolver::solve_over_ranks; FUSETRACK_FULL_RANK_SUM=1:
// the whole integer table summed over the ranks, the baseline). Rank 0 prints turns per second and one hash over the
// per-bunch hashes of the final particles, which must be the same for 1 and 2 ranks (byte-identical outputs).
TEST_CASE("bunch train on the GPU: benchmark, N bunches of M macroparticles over MPI ranks" *
          doctest::test_suite("benchmark") * doctest::skip()) {
  auto env = [](const char* name, double fallback) {
    const char* v = std::getenv(name);
    return v ? std::strtod(v, nullptr) : fallback;
  };
  const int bunches = static_cast<int>(env("FUSETRACK_TRAIN_BUNCHES", 100));
  const size_t per_bunch = static_cast<size_t>(env("FUSETRACK_TRAIN_PARTICLES", 1e6));
  const int memory = static_cast<int>(env("FUSETRACK_TRAIN_MEMORY", 100));
  const int turns = static_cast<int>(env("FUSETRACK_TRAIN_TURNS", 20));
  // Cuts of 1.2 m (500 slices of 2.4 mm), the spacing a whole number of cut lengths that fits the 160 m ring
  // (100 bunches: 1.2 m, the cuts adjacent; sigma_zeta 0.1 m, so the cuts hold 6 sigma).
  const double bunch_spacing = 1.2 * std::max(1, static_cast<int>(std::floor(150.0 / (1.2 * bunches))));
  const int delay = static_cast<int>(env("FUSETRACK_TRAIN_DELAY", 4));
  const Lattice lattice =
      train_ring(bunches, bunch_spacing, 500, memory, env("FUSETRACK_TRAIN_INTENSITY", 1e10), delay);
  Communicator& comm = world();
  Share share = share_of(static_cast<size_t>(bunches), comm.rank(), comm.size());
  // FUSETRACK_TRAIN_SHARE=k/n (one process): only the bunches rank k of n would hold, without the sums over
  // ranks, to time one rank's segment kernels alone on one GPU (a diagnostic; the hash is not comparable).
  const char* share_spec = std::getenv("FUSETRACK_TRAIN_SHARE");
  int share_k = 0, share_n = 0;
  if (share_spec && std::sscanf(share_spec, "%d/%d", &share_k, &share_n) == 2 && comm.size() == 1 && share_n > 0)
    share = share_of(static_cast<size_t>(bunches), share_k, share_n);
  else
    share_spec = nullptr;
  const Particles initial = train_bunches(lattice.reference().beta0(), static_cast<int>(share.begin),
                                          static_cast<int>(share.size()), per_bunch, bunch_spacing, 0.1,
                                          env("FUSETRACK_TRAIN_DELTA", 1e-4));
  CudaBackendOptions co;
  co.time_phases = true;  // the segment kernels and the solves timed apart
  const int gpus = static_cast<int>(list_gpus().size());
  if (gpus > 0) co.device = comm.local_rank() % gpus;
  CudaBackend gpu(lattice, co);
  TrackOptions o;
  o.fma = FmaMode::Off;
  o.macroparticles = static_cast<size_t>(bunches) * per_bunch;
  if (comm.size() > 1) o.reduce_profile = [&comm](uint64_t* data, size_t n) { comm.allreduce_sum(data, n); };
  Particles p = initial;
  o.turns = 1;
  gpu.track(p, o);  // compile, set up, warm up (one turn of the run)
  comm.barrier();
  o.turns = turns - 1;
  o.first_turn = 1;
  const auto t0 = std::chrono::steady_clock::now();
  gpu.track(p, o);
  comm.barrier();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<uint64_t> hashes(static_cast<size_t>(bunches), 0);
  for (size_t k = 0; k < share.size(); ++k) hashes[share.begin + k] = bunch_hash(p, k * per_bunch, (k + 1) * per_bunch);
  comm.allreduce_sum(hashes.data(), hashes.size());  // each slot from its one rank
  uint64_t alive = p.alive_count();  // at the end, over all ranks (the unstable train loses particles)
  comm.allreduce_sum(&alive, 1);
  uint64_t all = 1469598103934665603ull;
  for (uint64_t h : hashes) all = (all ^ h) * 1099511628211ull;
  const CudaRunStats& s = gpu.last_stats();
  if (comm.is_root())
    MESSAGE(
        fmt::format("{} bunches x {} macroparticles ({} m apart, 500 slices each, {} stored turns, damper delay {}) on {} rank(s): "
                    "{:.2f} turns/s over {} turns ({:.2f} without rank 0's particle copies; rank 0: segment kernels {:.3f} ms/turn, solve with transfers "
                    "{:.3f} ms/turn: transfers {:.3f}, sums over ranks {:.3f}, host solve {:.3f}; particles up "
                    "{:.3f} s, down {:.3f} s){}; {} particles alive at the end; hash of the final bunches {:016x}",
                    bunches, per_bunch, bunch_spacing, memory, delay, comm.size(), (turns - 1) / wall, turns - 1,
                    (turns - 1) / (wall - s.upload_seconds - s.download_seconds),
                    1e3 * s.segment_seconds / (turns - 1), 1e3 * s.solve_seconds / (turns - 1),
                    1e3 * s.moments_transfer_seconds / (turns - 1), 1e3 * s.moments_sum_seconds / (turns - 1),
                    1e3 * s.moments_host_seconds / (turns - 1), s.upload_seconds, s.download_seconds,
                    share_spec    ? fmt::format(" (bunches {} to {} alone: share {})", share.begin, share.end - 1, share_spec)
                    : std::getenv("FUSETRACK_FULL_RANK_SUM") ? " (whole table summed over ranks)"
                                                             : "",
                    alive, all));
  // Every rank's split (the waits in the sums show which rank is the slower).
  std::vector<uint64_t> split(4 * static_cast<size_t>(comm.size()), 0);
  const double mine[4] = {s.segment_seconds, s.moments_transfer_seconds, s.moments_sum_seconds, s.moments_host_seconds};
  std::memcpy(&split[4 * static_cast<size_t>(comm.rank())], mine, sizeof(mine));  // each slot from its one rank
  comm.allreduce_sum(split.data(), split.size());
  if (comm.is_root() && comm.size() > 1)
    for (int r = 0; r < comm.size(); ++r) {
      double t[4];
      std::memcpy(t, &split[4 * static_cast<size_t>(r)], sizeof(t));
      MESSAGE(fmt::format("rank {}: segment kernels {:.3f}, transfers {:.3f}, sums {:.3f}, host solve {:.3f} ms/turn",
                          r, 1e3 * t[0] / (turns - 1), 1e3 * t[1] / (turns - 1), 1e3 * t[2] / (turns - 1),
                          1e3 * t[3] / (turns - 1)));
    }
  CHECK(p.size() == share.size() * per_bunch);
}

}  // namespace test_gpu_bunch_train
