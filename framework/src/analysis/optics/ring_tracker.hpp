// One turn of the ring with the CPU backend, optionally with delta frozen (the 4D map).
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"
#include "fusetrack/tracker.h"

namespace ft::optics_internal {

/// Tracks through the ring with the CPU backend. With `freeze_delta`, delta (and ptau, rpp,
/// rvv) is restored after every element that changes it, so the turn is the 4D map at fixed
/// delta (what MAD-X gets with the RF off and xtrack with freeze_longitudinal). Which elements
/// change delta is found once by tracking probe particles (no element type is named): a
/// segment of the sequence is bisected while the probes' delta changes across it.
class RingTracker {
 public:
  RingTracker(const Lattice& lattice, bool freeze_delta, int threads)
      : m_lattice(lattice), m_backend(make_cpu_backend(lattice)), m_threads(threads), m_freeze(freeze_delta) {
    if (freeze_delta) find_delta_changers();
  }

  size_t frozen_count() const { return m_cuts.size(); }

  /// Tracks `turns` turns; per_turn(turns_done, particles) after each turn when given. With delta
  /// frozen (the 4D map), every turn after the first also starts at the particles' initial zeta:
  /// zeta is not periodic in 4D (it moves by the path-length difference every turn), and an
  /// element whose transverse kick depends on zeta (a crab cavity, RFMultipole) would otherwise
  /// see a drifting zeta, move the transverse orbit turn after turn and hide the betatron line of
  /// small-amplitude particles (MAD-X's and Xsuite's 4D maps freeze zeta as well). One turn is
  /// the map whose matrix the optics use, so the turn-by-turn motion is that matrix's.
  void track(Particles& p, int64_t turns, int64_t first_turn = 0,
             const std::function<void(int64_t, const Particles&)>& per_turn = {}) const {
    if (!m_freeze || (m_cuts.empty() && turns == 1)) {
      TrackOptions o;
      o.collective = false;  // single-particle optics: collective elements are skipped
      o.turns = turns;
      o.first_turn = first_turn;
      o.threads = m_threads;
      if (per_turn) {
        o.callback_every = 1;
        o.callback = [&per_turn](int64_t done, const Particles& q) {
          per_turn(done, q);
          return true;
        };
      }
      m_backend->track(p, o);
      return;
    }
    const size_t n_elements = m_lattice.sequence().size();
    std::vector<double> saved;
    const std::vector<double> zeta_start = p.zeta;
    for (int64_t t = 0; t < turns; ++t) {
      if (t > 0)
        for (size_t i = 0; i < p.size(); ++i)
          if (p.state[i] > 0) p.zeta[i] = zeta_start[i];
      saved = p.delta;
      size_t begin = 0;
      for (size_t k = 0; k <= m_cuts.size(); ++k) {
        const size_t end = k < m_cuts.size() ? m_cuts[k] + 1 : n_elements;
        if (end > begin) {
          TrackOptions o;
          o.collective = false;  // single-particle optics: collective elements are skipped
          o.turns = 1;
          o.first_turn = first_turn + t;
          o.element_begin = begin;
          o.element_end = end;
          o.threads = m_threads;
          m_backend->track(p, o);
        }
        restore_delta(p, saved);
        begin = end;
      }
      if (per_turn) per_turn(t + 1, p);
    }
  }

 private:
  static void restore_delta(Particles& p, const std::vector<double>& saved) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (p.state[i] <= 0 || p.delta[i] == saved[i]) continue;
      ParticleView v = p.view(i);
      v.update_delta(saved[i]);
      p.store(i, v);
    }
  }

  void track_range(Particles& p, size_t begin, size_t end) const {
    TrackOptions o;
    o.collective = false;  // single-particle optics: collective elements are skipped
    o.turns = 1;
    o.element_begin = begin;
    o.element_end = end;
    o.threads = m_threads;
    m_backend->track(p, o);
    for (size_t i = 0; i < p.size(); ++i)
      if (p.state[i] <= 0) {
        const long e = static_cast<long>(p.lost_element[i]);
        throw Error(fmt::format(
            "optics: a probe particle (offsets <= 3e-3) was lost at element #{} '{}' while looking for elements "
            "that change delta; the lattice has an aperture or instability at the reference orbit",
            e, e >= 0 ? m_lattice.element(static_cast<size_t>(e)).name : std::string("?")));
      }
  }

  static bool delta_changed(const Particles& a, const Particles& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a.delta[i] != b.delta[i]) return true;
    return false;
  }

  void find_delta_changers() {
    const size_t n = m_lattice.sequence().size();
    if (n == 0) return;
    // Probes at several zeta (an RF kick vanishes only at isolated phases), delta and small
    // transverse offsets.
    Particles probes(3, m_lattice.reference().beta0());
    probes.set(0, 1e-5, 1e-6, -1e-5, 2e-6, 1.1e-3, 1e-4);
    probes.set(1, -2e-5, -1e-6, 1.5e-5, -1e-6, -2.7e-3, -1e-4);
    probes.set(2, 0.0, 0.0, 0.0, 0.0, 3.1e-4, 0.0);
    search(0, n, probes);
  }

  /// Elements in [begin, end) that change the probes' delta, given the probes at `begin`.
  void search(size_t begin, size_t end, const Particles& at_begin) {
    Particles p = at_begin;
    track_range(p, begin, end);
    if (!delta_changed(p, at_begin)) return;
    if (end - begin == 1) {
      m_cuts.push_back(begin);
      return;
    }
    const size_t mid = begin + (end - begin) / 2;
    Particles at_mid = at_begin;
    track_range(at_mid, begin, mid);
    search(begin, mid, at_begin);
    search(mid, end, at_mid);
  }

  const Lattice& m_lattice;
  std::unique_ptr<Backend> m_backend;
  int m_threads;
  bool m_freeze;
  std::vector<size_t> m_cuts;  // sequence indices of the elements that change delta, ascending
};

}  // namespace ft::optics_internal
