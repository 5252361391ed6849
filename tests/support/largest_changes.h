// The largest differences between two tracked copies of the same particles (the same order): max |Delta px|,
// |Delta py| together, and max |Delta ptau|. The wake tests compare a run with its wakes against the ring alone
// (the wakes' effect) and two wake modes against each other.
#pragma once
#include <algorithm>
#include <cmath>

#include "fusetrack/particles.h"

namespace ft::test {

struct LargestChanges {
  double transverse = 0.0;  // max |Delta px|, |Delta py|
  double ptau = 0.0;        // max |Delta ptau|
};

inline LargestChanges largest_changes(const Particles& a, const Particles& b) {
  LargestChanges c;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    c.transverse = std::max({c.transverse, std::fabs(a.px[i] - b.px[i]), std::fabs(a.py[i] - b.py[i])});
    c.ptau = std::max(c.ptau, std::fabs(a.ptau[i] - b.ptau[i]));
  }
  return c;
}

}  // namespace ft::test
