// Threads that stand for MPI ranks: a collective lattice tracked on the CPU with its particles split at
// `cuts` (one part per rank), the ranks' integers summed between the threads as over MPI
// (TrackOptions::reduce_profile with RankSum), so that a test can compare the parts with one whole run.
#pragma once
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/parallel.h"
#include "fusetrack/tracker.h"
#include "support/rank_sum.h"

namespace ft::test {

/// Tracks parts [cuts[r], cuts[r + 1]) of `initial` (cuts from 0 to initial.size()), one thread per part,
/// with `options` and every rank's integers summed through `sum` (made for cuts.size() - 1 ranks). Returns the
/// tracked parts; a rank's error is rethrown as std::runtime_error naming the rank.
inline std::vector<Particles> track_on_emulated_ranks(const Lattice& lattice, const Particles& initial,
                                                      const std::vector<size_t>& cuts, const TrackOptions& options,
                                                      RankSum& sum) {
  const size_t ranks = cuts.size() - 1;
  std::vector<Particles> parts;
  for (size_t r = 0; r < ranks; ++r) parts.push_back(slice_particles(initial, cuts[r], cuts[r + 1]));
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        TrackOptions ro = options;
        ro.macroparticles = initial.size();
        ro.reduce_profile = [&sum](uint64_t* counts, size_t n) { sum.reduce(counts, n); };
        make_cpu_backend(lattice)->track(parts[r], ro);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < ranks; ++r)
    if (!errors[r].empty()) throw std::runtime_error("emulated rank " + std::to_string(r) + ": " + errors[r]);
  return parts;
}

}  // namespace ft::test
