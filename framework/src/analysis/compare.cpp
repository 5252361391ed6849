#include "fusetrack/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ft {

uint64_t ulp_distance(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  if (ia == ib) return 0;
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<uint64_t>::max();
  // Map the sign-magnitude bit patterns onto a monotonic integer line.
  auto ordered = [](int64_t i) { return i < 0 ? std::numeric_limits<int64_t>::min() - i : i; };
  const int64_t oa = ordered(ia), ob = ordered(ib);
  return oa > ob ? static_cast<uint64_t>(oa) - static_cast<uint64_t>(ob) : static_cast<uint64_t>(ob) - static_cast<uint64_t>(oa);
}

ParticleComparison compare_particles(const Particles& a, const Particles& b) {
  ParticleComparison c;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    double ca[6], cb[6];
    a.coordinates(i, ca);
    b.coordinates(i, cb);
    bool differs = false;
    const bool both_alive = a.state[i] > 0 && b.state[i] > 0;
    for (int k = 0; k < 6; ++k) {
      ++c.coordinates;
      if (std::memcmp(&ca[k], &cb[k], 8) == 0) {
        ++c.bitwise_equal;
        continue;
      }
      if (std::isnan(ca[k]) && std::isnan(cb[k])) {
        ++c.bitwise_equal;
        ++c.nan_pairs;
        continue;
      }
      differs = true;
      if (!both_alive) continue;
      c.max_ulp = std::max(c.max_ulp, ulp_distance(ca[k], cb[k]));
      const double scale = std::max(std::fabs(ca[k]), std::fabs(cb[k]));
      if (scale > 0) c.max_relative = std::max(c.max_relative, std::fabs(ca[k] - cb[k]) / scale);
    }
    if (a.state[i] != b.state[i] || a.lost_turn[i] != b.lost_turn[i] || a.lost_element[i] != b.lost_element[i]) {
      ++c.state_mismatches;
      differs = true;
    }
    if (differs && c.first_differing < 0) c.first_differing = static_cast<long>(i);
  }
  if (a.size() != b.size()) c.state_mismatches += std::max(a.size(), b.size()) - n;
  return c;
}

}  // namespace ft

namespace ft {

namespace {

Particles single(const Particles& p, size_t i) {
  Particles one(1, p.beta0);
  one.store(0, p.view(i));
  one.lost_turn[0] = p.lost_turn[i];
  one.lost_element[0] = p.lost_element[i];
  one.id[0] = p.id[i];
  return one;
}

bool same(const Particles& x, const Particles& y) { return compare_particles(x, y).identical(); }

}  // namespace

Divergence find_divergence(const Lattice& lattice, Backend& a, Backend& b, const Particles& initial, size_t particle,
                           int64_t turns, FmaMode fma) {
  Divergence d;
  // A collective lattice couples the particles through the bunch: one particle alone does not
  // replay the run, so there is nothing to bisect.
  if (lattice.has_collective()) return d;
  Particles pa = single(initial, particle), pb = pa;
  TrackOptions one_turn;
  one_turn.turns = 1;
  one_turn.fma = fma;
  for (int64_t t = 0; t < turns; ++t) {
    const Particles start = pa;
    one_turn.first_turn = t;
    a.track(pa, one_turn);
    b.track(pb, one_turn);
    if (same(pa, pb)) {
      if (pa.state[0] <= 0) return d;  // lost identically
      continue;
    }
    // Replay turn t element by element from the common state of backend a.
    Particles common = start;
    for (size_t e = 0; e < lattice.sequence().size(); ++e) {
      TrackOptions step = one_turn;
      step.element_begin = e;
      step.element_end = e + 1;
      Particles sa = common, sb = common;
      a.track(sa, step);
      b.track(sb, step);
      if (!same(sa, sb)) {
        d.found = true;
        d.turn = t;
        d.element = static_cast<long>(e);
        d.element_name = lattice.element(e).name;
        d.element_type = lattice.element(e).type->name;
        common.coordinates(0, d.input);
        sa.coordinates(0, d.output_a);
        sb.coordinates(0, d.output_b);
        return d;
      }
      common = sa;
    }
    // Every single step agrees but the whole turn did not: the difference is in the
    // end-of-turn checks or in how the fused kernel chains the steps.
    d.found = true;
    d.turn = t;
    d.element = -1;
    return d;
  }
  return d;
}

}  // namespace ft
