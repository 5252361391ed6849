// The particles of a DA scan shared by MPI ranks (internal to the DA sources).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fusetrack/parallel.h"
#include "fusetrack/particles.h"

namespace ft::da_detail {

/// The words of a particle's state after a chunk (coordinates, energy variables, state, loss),
/// exchanged between ranks as bit patterns.
constexpr size_t kTrackedWords = 12;

inline void tracked_to_words(const Particles& p, size_t i, uint64_t* w) {
  const double values[9] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i], p.ptau[i], p.rpp[i], p.rvv[i]};
  std::memcpy(w, values, sizeof(values));
  w[9] = static_cast<uint64_t>(static_cast<uint32_t>(p.state[i]));
  w[10] = static_cast<uint64_t>(static_cast<uint32_t>(p.lost_turn[i]));
  w[11] = static_cast<uint64_t>(p.lost_element[i]);
}

inline void tracked_from_words(Particles& p, size_t i, const uint64_t* w) {
  double values[9];
  std::memcpy(values, w, sizeof(values));
  p.x[i] = values[0], p.px[i] = values[1], p.y[i] = values[2], p.py[i] = values[3];
  p.zeta[i] = values[4], p.delta[i] = values[5], p.ptau[i] = values[6], p.rpp[i] = values[7], p.rvv[i] = values[8];
  p.state[i] = static_cast<int32_t>(static_cast<uint32_t>(w[9]));
  p.lost_turn[i] = static_cast<int32_t>(static_cast<uint32_t>(w[10]));
  p.lost_element[i] = static_cast<int64_t>(w[11]);
}

/// Particles `indices[m]` of `p` from the rank `source(m)` to every rank, in pieces of 2^20 particles
/// (each word is summed from its source's value and zeros, which is exact).
template <class Source>
void send_from_sources(Particles& p, const std::vector<size_t>& indices, Source source, Communicator& ranks) {
  constexpr size_t kPiece = size_t{1} << 20;
  const int rank = ranks.rank();
  std::vector<uint64_t> words;
  for (size_t first = 0; first < indices.size(); first += kPiece) {
    const size_t count = std::min(kPiece, indices.size() - first);
    words.assign(count * kTrackedWords, 0);
    for (size_t m = 0; m < count; ++m)
      if (source(first + m) == rank) tracked_to_words(p, indices[first + m], &words[m * kTrackedWords]);
    ranks.allreduce_sum(words.data(), words.size());
    for (size_t m = 0; m < count; ++m)
      if (source(first + m) != rank) tracked_from_words(p, indices[first + m], &words[m * kTrackedWords]);
  }
}

/// The particles of a scan shared by MPI ranks (DaRunOptions::ranks). Every rank holds the whole
/// scan, but a particle's coordinates are current only on the rank that tracked it last (its owner)
/// until the next synchronisation. Between chunks the ranks exchange the survivors' states (one word
/// each) and the coordinates of the particles that change owner (where the shares' boundaries move);
/// everything goes to every rank only where a checkpoint is written and at the end. Each word is summed
/// from its owner's value and zeros, which is exact.
/// The shares are contiguous and sized by weights that follow the ranks' times in the backend: equal at
/// first, then a rank that took longer than the mean over a call gets fewer particles (damped, within
/// bounds). Every rank computes the same shares from the same exchanged times; which rank tracks a
/// particle never changes its result.
class SharedScan {
 public:
  /// `min_balance_seconds`: calls shorter than this on any rank leave the weights alone (their times
  /// are mostly fixed costs). It must be the same on every rank (run_da_scan takes rank 0's).
  SharedScan(Particles& particles, Communicator& ranks, double min_balance_seconds)
      : m_particles(particles),
        m_ranks(ranks),
        m_owner(particles.size(), kEveryRank),
        m_weight(static_cast<size_t>(ranks.size()), 1.0),
        m_min_balance_seconds(min_balance_seconds) {}

  /// This rank's share of the chunk's particles `alive` (the survivors in the scan's order); their
  /// coordinates made current here.
  Share take_share(const std::vector<size_t>& alive) {
    const int n_ranks = m_ranks.size();
    const std::vector<Share> shares = weighted_shares(alive.size());
    const Share mine = shares[static_cast<size_t>(m_ranks.rank())];
    std::vector<size_t> moving;  // particles tracked last by another rank than the one that takes them now
    for (int r = 0; r < n_ranks; ++r) {
      const Share s = shares[static_cast<size_t>(r)];
      for (size_t k = s.begin; k < s.end; ++k) {
        const int owner = m_owner[alive[k]];
        if (owner != kEveryRank && owner != r) moving.push_back(alive[k]);
      }
    }
    send_from_sources(
        m_particles, moving, [&](size_t m) { return m_owner[moving[m]]; }, m_ranks);
    for (int r = 0; r < n_ranks; ++r) {
      const Share s = shares[static_cast<size_t>(r)];
      for (size_t k = s.begin; k < s.end; ++k) m_owner[alive[k]] = r;
    }
    return mine;
  }

  /// After the chunk: every rank learns the state (alive or lost) and loss turn of every particle of it,
  /// and every rank's time in the backend for the chunk (`seconds`: this rank's), which sizes the next shares.
  void share_states(const std::vector<size_t>& alive, const Share& mine, double seconds) {
    const size_t n_ranks = m_weight.size(), rank = static_cast<size_t>(m_ranks.rank());
    std::vector<uint64_t> words(alive.size() + n_ranks, 0);
    for (size_t k = mine.begin; k < mine.end; ++k)
      words[k] = static_cast<uint64_t>(static_cast<uint32_t>(m_particles.state[alive[k]])) |
                 static_cast<uint64_t>(static_cast<uint32_t>(m_particles.lost_turn[alive[k]])) << 32;
    std::memcpy(&words[alive.size() + rank], &seconds, sizeof(double));
    m_ranks.allreduce_sum(words.data(), words.size());
    for (size_t k = 0; k < alive.size(); ++k) {
      m_particles.state[alive[k]] = static_cast<int32_t>(static_cast<uint32_t>(words[k]));
      m_particles.lost_turn[alive[k]] = static_cast<int32_t>(static_cast<uint32_t>(words[k] >> 32));
    }
    std::vector<double> times(n_ranks);
    std::memcpy(times.data(), &words[alive.size()], n_ranks * sizeof(double));
    rebalance(times, alive.size());
  }

  /// Every particle current on every rank (before a checkpoint and at the end).
  void synchronise() {
    std::vector<size_t> owned;
    for (size_t i = 0; i < m_owner.size(); ++i)
      if (m_owner[i] != kEveryRank) owned.push_back(i);
    send_from_sources(
        m_particles, owned, [&](size_t m) { return m_owner[owned[m]]; }, m_ranks);
    for (size_t i : owned) m_owner[i] = kEveryRank;
  }

 private:
  static constexpr int kEveryRank = -1;
  static constexpr double kMinWeight = 0.75, kMaxWeight = 1.33;

  /// Contiguous shares of n in proportion to the weights (rank r: [floor(n W_r / W), floor(n W_r+1 / W))).
  std::vector<Share> weighted_shares(size_t n) const {
    std::vector<Share> shares(m_weight.size());
    double total = 0.0;
    for (double w : m_weight) total += w;
    double below = 0.0;
    size_t begin = 0;
    for (size_t r = 0; r < m_weight.size(); ++r) {
      below += m_weight[r];
      const size_t end = r + 1 == m_weight.size()
                             ? n
                             : std::min(n, static_cast<size_t>(std::floor(static_cast<double>(n) * below / total)));
      shares[r] = Share{begin, std::max(begin, end)};
      begin = shares[r].end;
    }
    return shares;
  }

  /// A rank slower than the mean over the last call gets a smaller weight: w_r *= sqrt(mean / t_r)
  /// (half the correction that would equalise times linear in the particle count), then the weights are
  /// scaled to mean 1 and kept within [kMinWeight, kMaxWeight].
  void rebalance(const std::vector<double>& times, size_t chunk_particles) {
    if (chunk_particles < m_weight.size()) return;
    double mean = 0.0;
    for (double t : times) {
      if (!(t >= m_min_balance_seconds) || !(t > 0.0)) return;
      mean += t;
    }
    mean /= static_cast<double>(times.size());
    double sum = 0.0;
    for (size_t r = 0; r < m_weight.size(); ++r) sum += m_weight[r] *= std::sqrt(mean / times[r]);
    for (double& w : m_weight) w = std::clamp(w * static_cast<double>(m_weight.size()) / sum, kMinWeight, kMaxWeight);
  }

  Particles& m_particles;
  Communicator& m_ranks;
  std::vector<int> m_owner;      // the rank that tracked each particle last, or kEveryRank
  std::vector<double> m_weight;  // the ranks' share weights
  double m_min_balance_seconds;
};

}  // namespace ft::da_detail
