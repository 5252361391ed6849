// The MPI communicator (built when CMake finds MPI): MPI_COMM_WORLD, initialised on first use and
// finalised at exit; node-local ranks from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
#include <fmt/format.h>
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/parallel.h"

namespace ft {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(fmt::format("{} failed: {}", what, std::string(text, static_cast<size_t>(len))));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      check_mpi(MPI_Init(nullptr, nullptr), "MPI_Init");
      std::atexit(finalize_at_exit);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    MPI_Comm local;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m_rank, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type");
    MPI_Comm_rank(local, &m_local_rank);
    MPI_Comm_size(local, &m_local_size);
    MPI_Comm_free(&local);
    // Several ranks on one node each take their share of its cores for OpenMP (set-up, host solves, CPU
    // tracking) unless OMP_NUM_THREADS says otherwise: ranks of all cores each oversubscribe the node (two
    // ranks of a 100-bunch train spent 10x longer in the host wake solve).
    if (m_local_size > 1 && !std::getenv("OMP_NUM_THREADS"))
      omp_set_num_threads(std::max(1, omp_get_num_procs() / m_local_size));
  }
  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  int local_rank() const override { return m_local_rank; }
  int local_size() const override { return m_local_size; }
  std::string describe() const override {
    return fmt::format("MPI rank {} of {} (node-local {} of {})", m_rank, m_size, m_local_rank, m_local_size);
  }

  // MPI counts are int: longer arrays go in pieces of kPieceWords (a DA study's exchange of 10^8
  // particles is 1.2e9 words; the element-wise sums do not depend on the pieces).
  static constexpr size_t kPieceWords = size_t{1} << 28;

  void allreduce_sum(uint64_t* data, size_t count) override {
    static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "uint64_t is unsigned long long");
    for (size_t first = 0; first < count; first += kPieceWords)
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + first, static_cast<int>(std::min(kPieceWords, count - first)),
                              MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD),
                "MPI_Allreduce(integer sums)");
  }

  void allreduce_sum(double* data, size_t count) override {
    for (size_t first = 0; first < count; first += kPieceWords)
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + first, static_cast<int>(std::min(kPieceWords, count - first)),
                              MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                "MPI_Allreduce(sums)");
  }

  void exchange(int peer, const uint64_t* send, uint64_t* receive, size_t count, int tag) override {
    if (peer == m_rank) {
      std::copy(send, send + count, receive);
      return;
    }
    for (size_t first = 0; first < count; first += kPieceWords) {
      const int n = static_cast<int>(std::min(kPieceWords, count - first));
      check_mpi(MPI_Sendrecv(send + first, n, MPI_UNSIGNED_LONG_LONG, peer, tag, receive + first, n,
                             MPI_UNSIGNED_LONG_LONG, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                "MPI_Sendrecv(slice moments)");
    }
  }

  bool all(bool value) override {
    int v = value ? 1 : 0, out = 0;
    check_mpi(MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce(and)");
    return out != 0;
  }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  Particles gather(const Particles& local) override {
    const long long mine = static_cast<long long>(local.size());
    std::vector<long long> counts(static_cast<size_t>(m_size));
    check_mpi(MPI_Gather(&mine, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Gather");
    Particles all;
    all.beta0 = local.beta0;
    size_t total = 0;
    std::vector<int> n(static_cast<size_t>(m_size)), offsets(static_cast<size_t>(m_size));
    if (m_rank == 0) {
      for (int r = 0; r < m_size; ++r) {
        if (counts[static_cast<size_t>(r)] > INT32_MAX)
          throw Error("MPI gather: more than 2^31 particles on one rank");
        n[static_cast<size_t>(r)] = static_cast<int>(counts[static_cast<size_t>(r)]);
        offsets[static_cast<size_t>(r)] = static_cast<int>(total);
        total += static_cast<size_t>(counts[static_cast<size_t>(r)]);
      }
      if (total > INT32_MAX) throw Error("MPI gather: more than 2^31 particles in all");
      all.resize(total);
    }
    auto gather = [&](const auto& from, auto& to, MPI_Datatype type) {
      check_mpi(MPI_Gatherv(from.data(), static_cast<int>(from.size()), type, m_rank == 0 ? to.data() : nullptr,
                            n.data(), offsets.data(), type, 0, MPI_COMM_WORLD),
                "MPI_Gatherv(particles)");
    };
    gather(local.x, all.x, MPI_DOUBLE);
    gather(local.px, all.px, MPI_DOUBLE);
    gather(local.y, all.y, MPI_DOUBLE);
    gather(local.py, all.py, MPI_DOUBLE);
    gather(local.zeta, all.zeta, MPI_DOUBLE);
    gather(local.delta, all.delta, MPI_DOUBLE);
    gather(local.ptau, all.ptau, MPI_DOUBLE);
    gather(local.rpp, all.rpp, MPI_DOUBLE);
    gather(local.rvv, all.rvv, MPI_DOUBLE);
    gather(local.state, all.state, MPI_INT32_T);
    gather(local.lost_turn, all.lost_turn, MPI_INT32_T);
    gather(local.lost_element, all.lost_element, MPI_INT64_T);
    gather(local.id, all.id, MPI_INT64_T);
    return all;
  }

 private:
  int m_rank = 0, m_size = 1, m_local_rank = 0, m_local_size = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace ft
