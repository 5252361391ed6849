// Runs spread over several processes: MPI ranks (one GPU each) or job-array parts. Particles are
// split into contiguous shares in rank order, so that gathering them in rank order gives the
// single-process order back, and every per-particle result is the same whatever the split.
// Collective runs sum their integer profiles over the ranks (exact and order-independent). Large
// runs keep the particles on their ranks: made there (sample_matched_bunch) and written there
// (write_particle_shards, fusetrack/particle_files.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/particles.h"

namespace ft {

/// The processes of one run. Without MPI (or with one rank) a single process.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  /// Rank among the processes of this node (picks the GPU), and their number.
  virtual int local_rank() const { return 0; }
  virtual int local_size() const { return 1; }
  /// Element-wise sum over the ranks, in place, on every rank (exact: integers).
  virtual void allreduce_sum(uint64_t* data, size_t count) { (void)data, (void)count; }
  /// Element-wise sum of doubles (for reports: the rounding depends on the rank count).
  virtual void allreduce_sum(double* data, size_t count) { (void)data, (void)count; }
  /// Sends `count` integers to rank `peer` and receives as many from it (a pairwise exchange, both
  /// ranks call it with each other as peer; `tag` tells exchanges apart). With peer == rank() a copy.
  virtual void exchange(int peer, const uint64_t* send, uint64_t* receive, size_t count, int tag);
  /// The logical and of `value` over the ranks.
  virtual bool all(bool value) { return value; }
  /// Every rank's particles concatenated in rank order, on rank 0 (other ranks get an empty set).
  virtual Particles gather(const Particles& local) { return local; }
  virtual void barrier() {}
  virtual std::string describe() const { return "1 process"; }
  bool is_root() const { return rank() == 0; }
};

/// The run's communicator: MPI's world when fusetrack was built with MPI (initialised on first
/// use, finalised at exit), else a single process. Throws ft::Error when this binary was built
/// without MPI but was started as one of several ranks by mpirun/srun (N copies of one job).
Communicator& world();
/// True when this build has MPI support.
bool built_with_mpi();

/// The contiguous share [begin, end) of `n` items that `rank` of `size` takes: the first
/// n % size ranks take one more.
struct Share {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};
Share share_of(size_t n, int rank, int size);
/// "" when every one of `ranks` ranks holds some of the `work` items ("particles", "bunches"), else the
/// line that says how many hold none (they run, idle, and take part in the exchanges).
std::string idle_ranks_notice(size_t work, int ranks, const std::string& what);

/// Particles [begin, end) of `all`.
Particles slice_particles(const Particles& all, size_t begin, size_t end);
/// Appends `part` to `all` (same beta0).
void append_particles(Particles& all, const Particles& part);

/// A job-array part "i/N" (0 <= i < N), as given to --part; throws InputError naming `option`.
struct PartSpec {
  int index = 0, count = 1;
};
PartSpec parse_part(const std::string& text, const std::string& option);

}  // namespace ft
