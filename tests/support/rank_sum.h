// Threads that stand for MPI ranks in the collective tests: RankSum sums integer arrays between them with
// MPI_Allreduce semantics (every rank gets the sum, in place; every call pairs with the other ranks' calls of
// the same order), as TrackOptions::reduce_profile does over MPI.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ft::test {

class RankSum {
 public:
  explicit RankSum(int ranks = 2) : m_ranks(ranks) {}
  void reduce(uint64_t* data, size_t n) {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [&] { return m_left == 0; });
    m_largest = std::max(m_largest, n);
    if (m_arrived == 0)
      m_sum.assign(data, data + n);
    else
      for (size_t k = 0; k < n; ++k) m_sum[k] += data[k];
    const int64_t generation = m_generation;
    if (++m_arrived == m_ranks) {
      ++m_generation;
      m_arrived = 0;
      m_left = m_ranks;
      m_cv.notify_all();
    } else {
      m_cv.wait(lock, [&] { return m_generation != generation; });
    }
    std::copy(m_sum.begin(), m_sum.end(), data);
    if (--m_left == 0) m_cv.notify_all();
  }
  /// The longest array summed so far.
  size_t largest() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_largest;
  }

 private:
  int m_ranks;
  size_t m_largest = 0;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::vector<uint64_t> m_sum;
  int m_arrived = 0, m_left = 0;
  int64_t m_generation = 0;
};

}  // namespace ft::test
