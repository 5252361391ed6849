// Bunch monitors: moments against values computed directly from the particles (energy from delta
// through the exact relativistic relation, not from ptau), the .npz archive as written, profile
// snapshots every K turns equal to the backend's, and identical files for identical particles.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "collective/longitudinal_ring.h"
#include "fusetrack/collective.h"
#include "fusetrack/longitudinal.h"
#include "fusetrack/monitor.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_monitor.
namespace test_monitor {

using namespace ft;
using ft::test::LongitudinalRing;

namespace {

struct Direct {
  long alive = 0;
  double mz = 0, sz = 0, md = 0, sd = 0, emit = 0, emit_evs = 0;
};

/// Straightforward moments in long double; the eV s emittance from t = -zeta / (beta0 c) and
/// E = sqrt((p0c (1 + delta))^2 + m^2).
Direct direct_moments(const Particles& p, double p0c, double mass) {
  const long double c = 299792458.0L;
  std::vector<long double> z, d, t, e;
  const long double e0 = std::sqrt(static_cast<long double>(p0c) * p0c + static_cast<long double>(mass) * mass);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.state[i] <= 0) continue;
    z.push_back(p.zeta[i]);
    d.push_back(p.delta[i]);
    t.push_back(-p.zeta[i] / (p.beta0 * c));
    const long double pc = static_cast<long double>(p0c) * (1.0L + p.delta[i]);
    e.push_back(std::sqrt(pc * pc + static_cast<long double>(mass) * mass) - e0);
  }
  auto mean = [](const std::vector<long double>& v) {
    long double s = 0;
    for (auto x : v) s += x;
    return s / v.size();
  };
  auto cov = [&](const std::vector<long double>& a, const std::vector<long double>& b) {
    const long double ma = mean(a), mb = mean(b);
    long double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (a[i] - ma) * (b[i] - mb);
    return s / a.size();
  };
  Direct r;
  r.alive = static_cast<long>(z.size());
  r.mz = static_cast<double>(mean(z));
  r.md = static_cast<double>(mean(d));
  r.sz = static_cast<double>(std::sqrt(cov(z, z)));
  r.sd = static_cast<double>(std::sqrt(cov(d, d)));
  r.emit = static_cast<double>(std::sqrt(cov(z, z) * cov(d, d) - cov(z, d) * cov(z, d)));
  r.emit_evs = static_cast<double>(4.0L * 3.14159265358979323846L *
                                   std::sqrt(cov(t, t) * cov(e, e) - cov(t, e) * cov(t, e)));
  return r;
}

}  // namespace

TEST_CASE("bunch monitor: moments, the npz archive and profile snapshots every K turns") {
  LongitudinalRing r;
  r.intensity = 1e12;
  r.z_over_n = 50.0;
  r.n_slices = 64;
  const Lattice lattice = ft::test::longitudinal_ring(r);
  MatchedBunchOptions o;
  o.sigma_zeta = 1.0;
  o.seed = 9;
  MatchedBunch m = generate_matched_bunch(lattice, 3000, o);
  // A correlated bunch (a zeta-delta chirp) and two lost particles, to exercise every term.
  for (size_t i = 0; i < m.particles.size(); ++i)
    m.particles.set(i, 0, 0, 0, 0, m.particles.zeta[i], m.particles.delta[i] + 1e-4 * m.particles.zeta[i]);
  m.particles.state[5] = 0;
  m.particles.state[17] = -1;

  auto backend = make_cpu_backend(lattice);
  MonitorOptions mo;
  mo.every = 2;
  mo.profile_every = 6;
  mo.progress = "off";
  mo.total_turns = 12;
  BunchMonitor monitor(lattice, mo);
  TrackOptions t;
  t.turns = 12;
  t.threads = 2;
  std::vector<Particles> seen;
  std::vector<std::vector<CollectiveSnapshot>> snaps;
  t.callback_every = 2;  // chained: called after the monitor, at its own period
  t.callback = [&](int64_t, const Particles& p) {
    seen.push_back(p);
    snaps.push_back(backend->collective_snapshots());
    return true;
  };
  monitor.attach(t, *backend);
  seen.push_back(m.particles);
  snaps.push_back({});
  monitor.record(0, m.particles, backend.get());
  backend->track(m.particles, t);
  monitor.finish();

  REQUIRE(monitor.turns() == std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12});
  REQUIRE(seen.size() == 7);
  const double p0c = lattice.reference().p0c, mass = lattice.reference().mass0;
  for (size_t k = 0; k < seen.size(); ++k) {
    const Direct d = direct_moments(seen[k], p0c, mass);
    const BunchMoments& b = monitor.moments()[k];
    CHECK(b.alive == d.alive);
    // Double-precision sums of 3000 terms against long double: ~1e-13 relative.
    CHECK(std::fabs(b.mean_zeta - d.mz) < 1e-13 * d.sz);
    CHECK(std::fabs(b.mean_delta - d.md) < 1e-13 * d.sd);
    CHECK(ft::test::rel_diff(b.rms_zeta, d.sz) < 1e-12);
    CHECK(ft::test::rel_diff(b.rms_delta, d.sd) < 1e-12);
    CHECK(ft::test::rel_diff(b.emittance, d.emit) < 1e-10);
    // ptau p0c against the energy from delta: the same quantity, rounded differently
    // (E - E0 ~ 1e6 eV out of E0 ~ 2e9 eV: ~1e-12 relative).
    CHECK(ft::test::rel_diff(b.emittance_evs, d.emit_evs) < 1e-9);
  }
  CHECK(monitor.moments().front().alive == 2998);

  const std::string path = ft::test::write_temp_file("monitor.npz", "");
  monitor.write(path);
  const NpzArchive a = read_npz(path);
  for (const char* name : {"turn", "alive", "mean_zeta", "rms_zeta", "mean_delta", "rms_delta", "cov_zeta_delta",
                           "emittance", "emittance_evs", "profile_turn", "profile_unit", "profile_0_zeta",
                           "profile_0_counts", "profile_0_field", "profile_0_sequence_index", "beta0", "p0c"})
    CHECK_MESSAGE(a.count(name) == 1, name);
  CHECK(a.at("turn").to_int64() == std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12});
  const std::vector<double> rms = a.at("rms_zeta").to_doubles();
  for (size_t k = 0; k < rms.size(); ++k) CHECK(rms[k] == monitor.moments()[k].rms_zeta);  // bitwise
  // Profiles at turns 6 and 12, equal to the backend's snapshots then.
  CHECK(a.at("profile_turn").to_int64() == std::vector<int64_t>{6, 12});
  CHECK(a.at("profile_0_counts").shape == std::vector<size_t>{2, 64});
  CHECK(a.at("profile_0_field").shape == std::vector<size_t>{2, 64});
  CHECK(a.at("profile_0_sequence_index").to_int64() == std::vector<int64_t>{6});
  const std::vector<int64_t> counts = a.at("profile_0_counts").to_int64();
  const std::vector<double> field = a.at("profile_0_field").to_doubles();
  for (size_t s = 0; s < 2; ++s) {
    const CollectiveSnapshot& ref = snaps[s == 0 ? 3 : 6][0];
    int64_t total = 0;
    for (size_t i = 0; i < 64; ++i) {
      CHECK(counts[s * 64 + i] == static_cast<int64_t>(ref.counts[i]));
      CHECK(field[s * 64 + i] == ref.field[i]);
      total += counts[s * 64 + i];
    }
    // Every alive particle inside the cuts deposits exactly one profile unit (integer sums).
    const Particles& p = seen[s == 0 ? 3 : 6];
    int64_t inside = 0;
    for (size_t i = 0; i < p.size(); ++i) inside += (p.state[i] > 0 && p.zeta[i] >= -6.0 && p.zeta[i] < 6.0) ? 1 : 0;
    CHECK(total == inside * static_cast<int64_t>(kProfileUnit));
  }
  const std::vector<double> centres = a.at("profile_0_zeta").to_doubles();
  CHECK(centres.front() == doctest::Approx(-6.0 + 12.0 / 128));
  CHECK(centres.back() == doctest::Approx(6.0 - 12.0 / 128));
}

TEST_CASE("bunch monitor: identical particles give identical monitor files (1 and 2 threads)") {
  LongitudinalRing r;
  r.intensity = 1e12;
  r.z_over_n = 50.0;
  r.n_slices = 64;
  const Lattice lattice = ft::test::longitudinal_ring(r);
  MatchedBunchOptions o;
  o.sigma_zeta = 1.0;
  const MatchedBunch m = generate_matched_bunch(lattice, 2000, o);
  std::vector<std::vector<std::pair<std::string, NpyArray>>> files;
  for (int threads : {1, 2}) {
    Particles p = m.particles;
    auto backend = make_cpu_backend(lattice);
    MonitorOptions mo;
    mo.profile_every = 5;
    mo.progress = "off";
    BunchMonitor monitor(lattice, mo);
    TrackOptions t;
    t.turns = 10;
    t.threads = threads;
    monitor.attach(t, *backend);
    backend->track(p, t);
    files.push_back(monitor.arrays());
  }
  REQUIRE(files[0].size() == files[1].size());
  for (size_t k = 0; k < files[0].size(); ++k) {
    CHECK(files[0][k].first == files[1][k].first);
    CHECK(files[0][k].second.data == files[1][k].second.data);
  }
}

}  // namespace test_monitor
