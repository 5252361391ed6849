// Threads that stand for MPI ranks of a whole run: each thread gets a Communicator whose pairwise exchanges,
// element-wise sums (in rank order, on every rank) and barriers pair with the other threads' calls as over MPI,
// so that a test can run e.g. ft::run_collide on 1, 2, 3 ... ranks in one process. A wait longer than two
// minutes (a deadlock) throws instead of hanging the test.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fusetrack/parallel.h"

namespace ft::test {

class ThreadRanks {
 public:
  explicit ThreadRanks(int size)
      : m_size(size), m_parts_u64(static_cast<size_t>(size)), m_parts_f64(static_cast<size_t>(size)) {}

  /// Runs body(comm) on `size` threads, one rank each; rethrows the first rank's error (naming the rank).
  template <class Result>
  std::vector<Result> run(const std::function<Result(Communicator&)>& body) {
    std::vector<Result> results(static_cast<size_t>(m_size));
    std::vector<std::string> errors(static_cast<size_t>(m_size));
    std::vector<std::thread> threads;
    for (int r = 0; r < m_size; ++r)
      threads.emplace_back([&, r] {
        Rank comm(*this, r);
        try {
          results[static_cast<size_t>(r)] = body(comm);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
          abort_all();
        }
      });
    for (std::thread& t : threads) t.join();
    std::string message;
    for (int r = 0; r < m_size; ++r)
      if (!errors[static_cast<size_t>(r)].empty())
        message += (message.empty() ? "" : "; ") + ("thread rank " + std::to_string(r) + ": ") +
                   errors[static_cast<size_t>(r)];
    if (!message.empty()) throw std::runtime_error(message);
    return results;
  }

 private:
  class Rank : public Communicator {
   public:
    Rank(ThreadRanks& shared, int rank) : m_shared(shared), m_rank(rank) {}
    int rank() const override { return m_rank; }
    int size() const override { return m_shared.m_size; }
    void allreduce_sum(uint64_t* data, size_t count) override { m_shared.allreduce(m_rank, data, count); }
    void allreduce_sum(double* data, size_t count) override { m_shared.allreduce(m_rank, data, count); }
    void exchange(int peer, const uint64_t* send, uint64_t* receive, size_t count, int tag) override {
      m_shared.exchange(m_rank, peer, send, receive, count, tag);
    }
    bool all(bool value) override {
      uint64_t failed = value ? 0 : 1;
      m_shared.allreduce(m_rank, &failed, 1);
      return failed == 0;
    }
    void barrier() override { m_shared.allreduce(m_rank, static_cast<uint64_t*>(nullptr), 0); }
    std::string describe() const override {
      return "thread rank " + std::to_string(m_rank) + " of " + std::to_string(m_shared.m_size);
    }

   private:
    ThreadRanks& m_shared;
    int m_rank;
  };

  template <class Predicate>
  void wait(std::unique_lock<std::mutex>& lock, Predicate ready) {
    if (!m_cv.wait_for(lock, std::chrono::minutes(2), [&] { return m_aborted || ready(); }))
      throw std::runtime_error("thread ranks: a wait of two minutes (deadlock)");
    if (m_aborted) throw std::runtime_error("thread ranks: another rank failed");
  }

  void abort_all() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_aborted = true;
    m_cv.notify_all();
  }

  std::vector<std::vector<uint64_t>>& parts(uint64_t*) { return m_parts_u64; }
  std::vector<std::vector<double>>& parts(double*) { return m_parts_f64; }

  /// MPI_Allreduce(MPI_SUM): every rank's array added in rank order, the sum on every rank.
  template <class T>
  void allreduce(int rank, T* data, size_t count) {
    std::unique_lock<std::mutex> lock(m_mutex);
    wait(lock, [&] { return m_leaving == 0; });  // the previous collective has been read by every rank
    auto& all = parts(data);
    all[static_cast<size_t>(rank)].assign(data, data + count);
    const int64_t generation = m_generation;
    if (++m_arrived == m_size) {
      ++m_generation;
      m_arrived = 0;
      m_leaving = m_size;
      m_cv.notify_all();
    } else {
      wait(lock, [&] { return m_generation != generation; });
    }
    for (size_t k = 0; k < count; ++k) {
      T sum = 0;
      for (const auto& part : all) sum += part.at(k);
      data[k] = sum;
    }
    if (--m_leaving == 0) m_cv.notify_all();
  }

  /// MPI_Sendrecv with the same peer on both sides: the message is posted, the peer's taken.
  void exchange(int rank, int peer, const uint64_t* send, uint64_t* receive, size_t count, int tag) {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_mail[std::make_tuple(rank, peer, tag)].emplace_back(send, send + count);
    m_cv.notify_all();
    auto& box = m_mail[std::make_tuple(peer, rank, tag)];
    wait(lock, [&] { return !box.empty(); });
    if (box.front().size() != count)
      throw std::runtime_error("thread ranks: exchange of " + std::to_string(count) + " words met one of " +
                               std::to_string(box.front().size()));
    std::copy(box.front().begin(), box.front().end(), receive);
    box.pop_front();
  }

  int m_size;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_aborted = false;
  std::vector<std::vector<uint64_t>> m_parts_u64;
  std::vector<std::vector<double>> m_parts_f64;
  int m_arrived = 0, m_leaving = 0;
  int64_t m_generation = 0;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<uint64_t>>> m_mail;
};

}  // namespace ft::test
