#include "fusetrack/motifs.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace ft {

namespace {

/// free_run[i]: how many consecutive positions from i are neither covered nor kNoMotifKey.
std::vector<int> free_runs(const std::vector<uint32_t>& keys, const std::vector<bool>& covered, int cap) {
  std::vector<int> run(keys.size() + 1, 0);
  for (size_t i = keys.size(); i-- > 0;)
    run[i] = covered[i] || keys[i] == kNoMotifKey ? 0 : std::min(cap, run[i + 1] + 1);
  return run;
}

uint64_t window_hash(const uint32_t* k, int length) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the keys
  for (int j = 0; j < length; ++j) h = (h ^ k[j]) * 1099511628211ull;
  return h;
}

struct Candidate {
  size_t first = 0;  // position of the first occurrence
  int count = 0;     // non-overlapping occurrences, left to right
  size_t end = 0;    // end of the last counted occurrence
};

/// Marks the non-overlapping occurrences of `motif` among the free positions, left to right.
int place(const std::vector<uint32_t>& keys, const std::vector<uint32_t>& motif, uint32_t id, MotifPlan& plan,
          std::vector<bool>& covered) {
  const int length = static_cast<int>(motif.size());
  const std::vector<int> run = free_runs(keys, covered, length);
  int placed = 0;
  for (size_t i = 0; i + motif.size() <= keys.size();) {
    if (run[i] >= length && std::equal(motif.begin(), motif.end(), keys.begin() + static_cast<long>(i))) {
      plan.motif_at[i] = (id << 8) | static_cast<uint32_t>(length);
      for (int j = 0; j < length; ++j) covered[i + j] = true;
      ++placed;
      i += motif.size();
    } else {
      ++i;
    }
  }
  return placed;
}

}  // namespace

MotifPlan plan_motifs(const std::vector<uint32_t>& keys, const std::vector<bool>& worth_alone,
                      const MotifLimits& limits) {
  MotifPlan plan;
  plan.motif_at.assign(keys.size(), 0);
  std::vector<bool> covered(keys.size(), false);
  int total_elements = 0;
  while (static_cast<int>(plan.motifs.size()) < limits.max_motifs) {
    const std::vector<int> run = free_runs(keys, covered, limits.max_length);
    size_t best_gain = 0, best_first = 0;
    int best_length = 0;
    for (int length = 2; length <= limits.max_length; ++length) {
      if (total_elements + length > limits.max_total_elements) break;
      std::unordered_map<uint64_t, Candidate> seen;
      for (size_t i = 0; i + static_cast<size_t>(length) <= keys.size(); ++i) {
        if (run[i] < length) continue;
        Candidate& c = seen[window_hash(&keys[i], length)];
        if (c.count == 0) {
          c.first = i;
        } else if (!std::equal(keys.begin() + static_cast<long>(i), keys.begin() + static_cast<long>(i) + length,
                               keys.begin() + static_cast<long>(c.first))) {
          continue;  // a hash collision: that run is not counted (the plan stays exact)
        }
        if (c.count == 0 || i >= c.end) {
          ++c.count;
          c.end = i + static_cast<size_t>(length);
        }
      }
      for (const auto& [hash, c] : seen) {
        if (c.count < limits.min_occurrences) continue;
        const size_t gain = static_cast<size_t>(c.count) * static_cast<size_t>(length - 1);
        // Ties go to the longer motif, then to the earlier first occurrence (independent of the map's order).
        if (gain > best_gain || (gain == best_gain && gain > 0 &&
                                 (length > best_length || (length == best_length && c.first < best_first)))) {
          best_gain = gain;
          best_first = c.first;
          best_length = length;
        }
      }
    }
    if (best_gain == 0) break;
    std::vector<uint32_t> motif(keys.begin() + static_cast<long>(best_first),
                                keys.begin() + static_cast<long>(best_first) + best_length);
    place(keys, motif, static_cast<uint32_t>(plan.motifs.size() + 1), plan, covered);
    plan.motifs.push_back(std::move(motif));
    total_elements += best_length;
  }
  // Single elements with an integer field to fix, most frequent first.
  std::unordered_map<uint32_t, int> alone;
  for (size_t i = 0; i < keys.size(); ++i)
    if (!covered[i] && keys[i] != kNoMotifKey && keys[i] < worth_alone.size() && worth_alone[keys[i]]) ++alone[keys[i]];
  std::vector<std::pair<int, uint32_t>> by_count;
  for (const auto& [key, count] : alone)
    if (count >= limits.min_occurrences) by_count.emplace_back(-count, key);
  std::sort(by_count.begin(), by_count.end());
  for (const auto& [negative_count, key] : by_count) {
    if (static_cast<int>(plan.motifs.size()) >= limits.max_motifs || total_elements + 1 > limits.max_total_elements)
      break;
    place(keys, {key}, static_cast<uint32_t>(plan.motifs.size() + 1), plan, covered);
    plan.motifs.push_back({key});
    total_elements += 1;
  }
  if (plan.motifs.empty()) plan.motif_at.clear();
  return plan;
}

MotifCounts count_motifs(const std::vector<uint32_t>& motif_at) {
  MotifCounts c;
  for (size_t i = 0; i < motif_at.size(); ++c.dispatches) {
    const uint32_t m = motif_at[i];
    if (m == 0) {
      ++i;
      continue;
    }
    c.motifs = std::max<size_t>(c.motifs, m >> 8);
    c.covered += m & 0xffu;
    i += m & 0xffu;
  }
  return c;
}

}  // namespace ft
