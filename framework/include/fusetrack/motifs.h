// Motifs of the switch kernel: recurring runs of consecutive elements that share their switch case
// and their integer fields (a drift, an edge, a drift, a quadrupole kick of order 1, ...), each
// compiled as one straight-line case. One dispatch then runs the whole run, the compiler sees the
// integer fields as constants (the Horner loop of a multipole of fixed order unrolls) and it can
// schedule the elements' independent arithmetic and parameter loads together. This is the
// "superinstruction" of interpreters (Proebsting, POPL 1995; Ertl and Gregg, PLDI 2003), chosen
// greedily by the dispatches it saves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ft {

/// Key of an element that never joins a motif (collective elements, keys beyond the planner's range).
constexpr uint32_t kNoMotifKey = UINT32_MAX;

struct MotifLimits {
  int max_motifs = 24;           // switch cases added
  int max_length = 8;            // elements per motif
  int max_total_elements = 160;  // sum of the motifs' lengths: a bound on the added code
  int min_occurrences = 4;       // a motif must recur at least this often
};

struct MotifPlan {
  /// The key sequence of each motif; motif k has the id k + 1.
  std::vector<std::vector<uint32_t>> motifs;
  /// Per sequence position: 0, or (id << 8 | length) where an occurrence of motif `id` starts.
  std::vector<uint32_t> motif_at;
};

/// What a motif table (MotifPlan::motif_at, KernelSource::motif_at) makes of one turn.
struct MotifCounts {
  size_t motifs = 0;      // the highest motif id used
  size_t covered = 0;     // positions inside occurrences
  size_t dispatches = 0;  // occurrences plus the positions outside them (0 for an empty table)
};
MotifCounts count_motifs(const std::vector<uint32_t>& motif_at);

/// Chooses motifs over `keys` (one per sequence position) greedily: at each step the run of 2 to
/// max_length keys whose non-overlapping occurrences among the positions not yet covered save the
/// most dispatches (occurrences x (length - 1)). Then single positions whose key is `worth_alone`
/// (an integer field to fix) get motifs of length 1, most frequent first, within the limits.
/// Deterministic: the same keys give the same plan.
MotifPlan plan_motifs(const std::vector<uint32_t>& keys, const std::vector<bool>& worth_alone,
                      const MotifLimits& limits = {});

}  // namespace ft
