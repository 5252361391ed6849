// ft::run_tracking with TrackRunOptions::space_charge (frozen space-charge sizes that follow the beam
// every K turns): the run equals a hand-written loop of track(K turns) and SpaceChargeBeamSizes::update
// bit for bit, a monitor whose period does not divide K records the turns it records without updates,
// and bad options are refused before tracking.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/monitor.h"
#include "fusetrack/optics.h"
#include "fusetrack/session.h"
#include "fusetrack/space_charge_install.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_space_charge_follow_run.
namespace test_space_charge_follow_run {

namespace {

ft::Lattice ring_with_space_charge() { return ft::test::space_charge_ring(8); }

ft::Particles wide_beam(const ft::Lattice& ring) {
  ft::GaussianBunchSpec spec;
  spec.count = 1500;
  spec.emittance_nx = 4e-6;  // twice the installation's
  spec.emittance_ny = 3e-6;
  spec.sigma_zeta = 8.0;
  spec.sigma_delta = 1e-3;
  spec.seed = 9;
  return ft::make_matched_gaussian(ring, spec);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("run_tracking with space-charge sizes that follow the beam equals track(K) + update, turn by turn") {
  const int64_t k = 4, turns = 10;  // updates at 0, 4, 8; the last piece 2 turns long
  // By hand: update, track K turns, update, ...
  ft::Lattice manual = ring_with_space_charge();
  const ft::SpaceChargeBeamSizes follow(manual);
  auto manual_backend = ft::make_cpu_backend(manual);
  ft::Particles by_hand = wide_beam(manual);
  std::vector<double> sigma_x_by_hand;
  for (int64_t done = 0; done < turns; done += k) {
    follow.update(manual, by_hand, 1.5e11);
    sigma_x_by_hand.push_back(manual.field(follow.entries()[3].definition, "sigma_x"));
    ft::TrackOptions t;
    t.turns = std::min(k, turns - done);
    t.first_turn = done;
    t.threads = 1;
    manual_backend->track(by_hand, t);
  }

  for (int threads : {1, 2}) {
    CAPTURE(threads);
    ft::Lattice ring = ring_with_space_charge();
    auto backend = ft::make_cpu_backend(ring);
    ft::Particles p = wide_beam(ring);
    ft::TrackRunOptions o;
    o.turns = turns;
    o.threads = threads;
    o.progress = "off";
    o.monitor = true;
    o.monitor_every = 3;  // not a divisor of K: records at 0, 3, 6, 9 and the last turn
    o.space_charge.every = k;
    o.space_charge.lattice = &ring;
    int calls = 0;
    o.space_charge.on_update = [&](const ft::SpaceChargeUpdate&) { ++calls; };
    const ft::TrackRun run = ft::run_tracking(ring, *backend, p, o);
    CHECK(calls == 3);
    REQUIRE(run.space_charge_updates.size() == 3);
    CHECK(run.space_charge_updates[1].turn == 4);
    CHECK(run.space_charge_updates[2].turn == 8);
    REQUIRE(run.space_charge_elements.size() == 8);
    for (size_t u = 0; u < 3; ++u) CHECK(run.space_charge_updates[u].sizes[3].sigma_x == sigma_x_by_hand[u]);
    CHECK(same_bits(p.x, by_hand.x));
    CHECK(same_bits(p.px, by_hand.px));
    CHECK(same_bits(p.py, by_hand.py));
    CHECK(same_bits(p.zeta, by_hand.zeta));
    CHECK(p.lost_turn == by_hand.lost_turn);
    REQUIRE(run.monitor);
    CHECK(run.monitor->turns() == std::vector<int64_t>{0, 3, 6, 9, 10});
    // The monitor's moments at turn 9 are those of the particles then: the beam is larger than installed,
    // and the elements carry its sizes (the update at turn 8 from the moments then).
    const ft::SpaceChargeUpdate& last = run.space_charge_updates.back();
    const ft::SpaceChargeBeamSizes::Element& e = run.space_charge_elements[0];
    CHECK(last.sizes[0].sigma_y == doctest::Approx(std::sqrt(e.beta_y * last.emittance_y + std::pow(e.dy * last.rms_delta, 2)))
                                       .epsilon(1e-14));
    CHECK(ring.field(e.definition, "sigma_y") == last.sizes[0].sigma_y);
  }
}

TEST_CASE("run_tracking with space-charge sizes that follow the beam: bad options") {
  ft::Lattice ring = ring_with_space_charge();
  auto backend = ft::make_cpu_backend(ring);
  ft::Particles p = wide_beam(ring);
  ft::TrackRunOptions o;
  o.turns = 2;
  o.progress = "off";
  o.space_charge.every = -2;
  o.space_charge.lattice = &ring;
  o.space_charge.label = "--space-charge-update";
  CHECK_THROWS_WITH_AS(ft::run_tracking(ring, *backend, p, o), doctest::Contains("'--space-charge-update'"),
                       ft::InputError);
  o.space_charge.every = 1;
  ft::Lattice other = ring;
  o.space_charge.lattice = &other;
  CHECK_THROWS_WITH_AS(ft::run_tracking(ring, *backend, p, o), doctest::Contains("the lattice that is tracked"),
                       ft::Error);
  ft::Lattice bare = ft::test::bundled_lattice("space_charge_ring.json");
  auto bare_backend = ft::make_cpu_backend(bare);
  o.space_charge.lattice = &bare;
  CHECK_THROWS_WITH_AS(ft::run_tracking(bare, *bare_backend, p, o),
                       doctest::Contains("no SpaceChargeBiGaussian element to update (needed by --space-charge-update)"),
                       ft::InputError);
  // A beam with no size (every particle lost) at an update: an error naming the option and the turn.
  for (auto& s : p.state) s = 0;
  o.space_charge.lattice = &ring;
  CHECK_THROWS_WITH_AS(ft::run_tracking(ring, *backend, p, o), doctest::Contains("--space-charge-update: at turn 0"),
                       ft::Error);
}

}  // namespace test_space_charge_follow_run
