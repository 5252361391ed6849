// A DA scan tracked: the survivors compacted between backend calls, shared by MPI ranks, checkpointed.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <optional>
#include <vector>

#include "analysis/da/checkpoint.hpp"
#include "analysis/da/shared_scan.hpp"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/parallel.h"

namespace ft {

/// The longest backend call of a DA scan, in turns (the survivors are compacted between calls).
constexpr int64_t kLongestCallTurns = 1000;

bool run_da_scan(DaScan& scan, Backend& backend, const DaRunOptions& options, DaProgress* progress_out) {
  DaProgress progress;
  progress.turns_total = scan.config.turns;
  progress.total = scan.particles.size();
  Communicator* ranks = options.ranks && options.ranks->size() > 1 ? options.ranks : nullptr;
  const bool writes = !ranks || ranks->is_root();
  // FUSETRACK_DA_FIRST_CALL_TURNS (1000: the calls of earlier versions) for the benchmarks' baseline;
  // FUSETRACK_DA_BALANCE_SECONDS (SharedScan; the tests: 0, every call moves the shares' boundaries).
  static const int64_t first_call_from_env = [] {
    const char* v = std::getenv("FUSETRACK_DA_FIRST_CALL_TURNS");
    return v ? std::clamp<int64_t>(std::atoll(v), 1, kLongestCallTurns) : int64_t{16};
  }();
  static const double balance_seconds_from_env = [] {
    const char* v = std::getenv("FUSETRACK_DA_BALANCE_SECONDS");
    return v ? std::max(0.0, std::atof(v)) : 0.2;
  }();
  int64_t first_call_turns = first_call_from_env;
  double balance_seconds = balance_seconds_from_env;
  std::optional<da_detail::SharedScan> shared;
  if (ranks && ranks->is_root()) {
    const std::string idle = idle_ranks_notice(scan.particles.size(), ranks->size(), "initial conditions");
    if (!idle.empty()) fmt::print(stderr, "note: {}\n", idle);
  }
  if (ranks) {
    // The calls' lengths and the shares must be the same on every rank: rank 0's settings (the
    // environment of remote ranks may differ).
    uint64_t settings[2] = {0, 0};
    if (ranks->is_root()) {
      settings[0] = static_cast<uint64_t>(first_call_turns);
      std::memcpy(&settings[1], &balance_seconds, sizeof(double));
    }
    ranks->allreduce_sum(settings, 2);
    first_call_turns = static_cast<int64_t>(settings[0]);
    std::memcpy(&balance_seconds, &settings[1], sizeof(double));
    shared.emplace(scan.particles, *ranks, balance_seconds);
  }
  // Checkpoints every `checkpoint_every` turns (default 1000). The survivors are compacted before every
  // backend call, and the calls are short at first (16, 32, 64, ... turns, then at most 1000): most of
  // the particles that a scan loses go early, and on the GPU a lost particle's lane idles, its warp
  // running on, until the next compaction. Each particle's result does not depend on the calls.
  const int64_t checkpoint_every = options.checkpoint_every > 0 ? options.checkpoint_every : 1000;
  int64_t call_turns = first_call_turns;
  const std::string fingerprint = options.fingerprint.empty() ? da_fingerprint("", scan.config) : options.fingerprint;
  const auto t0 = std::chrono::steady_clock::now();
  // The time in the exchanges between ranks, waits for the slower rank included.
  auto exchange = [&](auto&& f) {
    const auto e0 = std::chrono::steady_clock::now();
    f();
    progress.exchange_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
  };
  // Checkpoints are written on a thread of their own while the next chunk is tracked (a copy of the
  // state); the previous one is finished first, so the files follow in order. A write that failed
  // stops every rank after the next chunk, and the scan throws its error (rank 0's) on every rank.
  std::future<void> checkpoint_writing;
  std::exception_ptr write_error;
  auto finish_write = [&] {
    if (!checkpoint_writing.valid()) return;
    try {
      checkpoint_writing.get();
    } catch (...) {
      if (!write_error) write_error = std::current_exception();
    }
  };
  // A stop asked on any rank stops every rank after the same chunk (no rank waits in an exchange).
  auto stop_asked = [&] {
    const bool local = (options.stop && options.stop->load()) || write_error;
    bool any = local;
    if (ranks) exchange([&] { any = !ranks->all(!local); });
    return any;
  };
  bool completed = true, stopping = stop_asked();
  while (scan.turns_done < scan.config.turns) {
    if (stopping) {
      completed = false;
      break;
    }
    // Compact the survivors: only alive particles go to the backend (MPI: this rank's share of them).
    std::vector<size_t> alive;
    for (size_t i = 0; i < scan.particles.size(); ++i)
      if (scan.particles.state[i] > 0) alive.push_back(i);
    if (alive.empty()) {
      scan.turns_done = scan.config.turns;
      break;
    }
    Share mine{0, alive.size()};
    if (shared) exchange([&] { mine = shared->take_share(alive); });
    Particles batch(mine.size(), scan.particles.beta0);
    for (size_t k = 0; k < mine.size(); ++k) {
      batch.store(k, scan.particles.view(alive[mine.begin + k]));
      batch.id[k] = scan.particles.id[alive[mine.begin + k]];
    }
    if (!scan.variant.empty()) {
      batch.variant.resize(mine.size());
      for (size_t k = 0; k < mine.size(); ++k) batch.variant[k] = scan.variant[alive[mine.begin + k]];
    }
    TrackOptions o;
    o.turns = std::min(
        {call_turns, checkpoint_every - scan.turns_done % checkpoint_every, scan.config.turns - scan.turns_done});
    call_turns = std::min(2 * call_turns, kLongestCallTurns);
    o.first_turn = scan.turns_done;
    o.fma = options.fma;
    o.threads = options.threads;
    const auto b0 = std::chrono::steady_clock::now();
    if (mine.size() > 0) backend.track(batch, o);
    const double call_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    progress.backend_seconds += call_seconds;
    for (size_t k = 0; k < mine.size(); ++k) {
      const size_t i = alive[mine.begin + k];
      scan.particles.store(i, batch.view(k));
      scan.particles.lost_turn[i] = batch.lost_turn[k];
      scan.particles.lost_element[i] = batch.lost_element[k];
    }
    if (shared) exchange([&] { shared->share_states(alive, mine, call_seconds); });
    progress.surviving_particle_turns += static_cast<double>(alive.size()) * static_cast<double>(o.turns);
    scan.turns_done += o.turns;
    progress.turns_done = scan.turns_done;
    progress.alive = scan.particles.alive_count();
    progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.on_progress) options.on_progress(progress);  // may ask to stop
    stopping = stop_asked();
    if (!options.checkpoint_file.empty() &&
        (scan.turns_done % checkpoint_every == 0 || scan.turns_done >= scan.config.turns || stopping)) {
      if (shared) exchange([&] { shared->synchronise(); });
      if (writes) {
        finish_write();
        if (!write_error) try {
            checkpoint_writing =
                std::async(std::launch::async, [members = da_detail::checkpoint_members(scan, fingerprint),
                                                file = options.checkpoint_file] { write_npz(file, members); });
          } catch (...) {
            write_error = std::current_exception();
          }
      }
    }
  }
  if (shared) exchange([&] { shared->synchronise(); });
  finish_write();  // the last checkpoint written before the scan returns
  bool written = !write_error;
  if (ranks) exchange([&] { written = ranks->all(written); });
  if (!written) {
    if (write_error) std::rethrow_exception(write_error);
    throw Error("DA scan: rank 0 could not write the checkpoint (its message names the file)");
  }
  progress.turns_done = scan.turns_done;
  progress.alive = scan.particles.alive_count();
  progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress_out) *progress_out = progress;
  return completed && scan.turns_done >= scan.config.turns;
}

}  // namespace ft
