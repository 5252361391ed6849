// Matched bunches made in shares (fusetrack/matched_bunch.h): particle i depends only on the seed
// and i, so any split over ranks or threads gives the bunch that one process makes, bit for bit.
#include <doctest/doctest.h>

#include <cstring>

#include "collective/longitudinal_ring.h"
#include "fusetrack/matched_bunch.h"
#include "fusetrack/parallel.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_matched_bunch_shares.
namespace test_matched_bunch_shares {

using namespace ft;

namespace {

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("matched bunch shares: any rank count and thread count gives the same particles") {
  ft::test::LongitudinalRing ring;
  const Lattice lattice = ft::test::longitudinal_ring(ring);
  for (const char* dist : {"gaussian", "binomial"}) {
    CAPTURE(dist);
    MatchedBunchOptions o;
    o.distribution = dist;
    o.sigma_zeta = 0.2;
    o.seed = 12345;
    const size_t n = 10007;
    const MatchedBunch whole = generate_matched_bunch(lattice, n, o);
    const MatchedBunchReport report = match_longitudinal_bunch(lattice, o);
    for (int ranks : {1, 2, 3, 7}) {
      for (int threads : {1, 2}) {
        CAPTURE(ranks);
        CAPTURE(threads);
        Particles joined;
        for (int r = 0; r < ranks; ++r) {
          const Share s = share_of(n, r, ranks);
          append_particles(joined, sample_matched_bunch(report, o.seed, s.begin, s.size(), threads));
        }
        CHECK(same_bits(joined.zeta, whole.particles.zeta));
        CHECK(same_bits(joined.delta, whole.particles.delta));
        CHECK(same_bits(joined.x, whole.particles.x));
        CHECK(joined.id == whole.particles.id);
      }
    }
    // Another seed gives other particles; the first particles do not depend on the bunch size.
    const Particles other = sample_matched_bunch(report, o.seed + 1, 0, 100);
    CHECK(!same_bits(other.zeta, sample_matched_bunch(report, o.seed, 0, 100).zeta));
    const MatchedBunch smaller = generate_matched_bunch(lattice, 100, o);
    CHECK(same_bits(smaller.particles.zeta, sample_matched_bunch(report, o.seed, 0, 100).zeta));
  }
}

}  // namespace test_matched_bunch_shares
