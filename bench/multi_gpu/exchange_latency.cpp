// The exchanges of fusetrack's multi-rank runs, measured alone: MPI_Allreduce of 64-bit integers
// (the collective profile's and a grid's sum over ranks; the DA study's survivor counts) and the
// pairwise MPI_Sendrecv of the collider's slice moments, for message sizes from 8 bytes to 8 MiB.
// Host buffers, as fusetrack uses them (page-locked copies from and to the GPU around them).
// Build and run on a machine with MPI (bench/multi_gpu/scaling.sh does it):
//   mpicxx -O2 -o exchange_latency bench/multi_gpu/exchange_latency.cpp
//   mpirun -np 4 --bind-to none ./exchange_latency
// Prints per size: the median over repetitions of the slowest rank's time per call, in microseconds.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

/// The median over `reps` calls of the slowest rank's time per call [us].
template <class Call>
double median_slowest_us(int reps, Call call) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    call();
    double dt = MPI_Wtime() - t0, slowest = 0.0;
    MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(slowest * 1e6);
  }
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[static_cast<size_t>(reps / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) std::printf("# %d ranks; bytes, allreduce_us (uint64 sum), sendrecv_us (pairs r <-> r^1)\n", size);
  for (size_t bytes = 8; bytes <= (size_t{8} << 20); bytes *= 4) {
    const size_t words = bytes / 8;
    std::vector<uint64_t> a(words, static_cast<uint64_t>(rank + 1)), b(words, 0);
    const int reps = bytes <= (size_t{1} << 20) ? 400 : 40;
    const double allreduce = median_slowest_us(reps, [&] {
      MPI_Allreduce(MPI_IN_PLACE, a.data(), static_cast<int>(words), MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    });
    const int peer = rank ^ 1;
    const double sendrecv = median_slowest_us(reps, [&] {
      if (peer >= size) return;  // the last of an odd count waits at the barrier only
      MPI_Sendrecv(a.data(), static_cast<int>(words), MPI_UNSIGNED_LONG_LONG, peer, 7, b.data(), static_cast<int>(words),
                   MPI_UNSIGNED_LONG_LONG, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    });
    if (rank == 0) std::printf("%zu %.2f %.2f\n", bytes, allreduce, sendrecv);
  }
  MPI_Finalize();
  return 0;
}
