// The element-by-element pass of the Twiss table and its checks against the whole-turn tracking.
#include "analysis/optics/element_pass.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "analysis/optics/optics_internal.hpp"
#include "fusetrack/error.h"

namespace ft::optics_internal {

namespace {

/// Takes particles through one sequence entry at a time with the CPU backend's own per-entry
/// function (ft::track_sequence_entry: the transformation around the element when it has one,
/// the element, the global limits; collective elements are skipped, as in
/// TrackOptions::collective = false). With `freeze_delta`, delta is restored after the element
/// (the 4D map of RingTracker).
class ElementStepper {
 public:
  ElementStepper(const Lattice& lattice, bool freeze_delta) : m_lattice(lattice), m_freeze(freeze_delta) {
    const GlobalLimits l = lattice.limits();
    m_limit_x = l.x;
    m_limit_y = l.y;
  }

  void step(Particles& p, size_t e) {
    const ElementDefinition& def = m_lattice.element(e);
    if (m_freeze) m_saved = p.delta;
    ft_particle_block b = p.block(0, p.size());
    b.limit_x = m_limit_x;
    b.limit_y = m_limit_y;
    b.turn = 0;
    b.element_index = static_cast<int64_t>(e);
    ft_error err{};
    if (track_sequence_entry(m_lattice, e, b, &err) != 0)
      throw Error(fmt::format("optics along the ring: element #{} '{}' ({}) failed: {}", e, def.name, def.type->name,
                              err.message));
    for (size_t i = 0; i < p.size(); ++i) {
      if (p.state[i] <= 0)
        throw Error(
            fmt::format("optics along the ring: a probe particle near the closed orbit was lost at element #{} "
                        "'{}' ({}, state {})",
                        e, def.name, def.type->name, p.state[i]));
      if (m_freeze && p.delta[i] != m_saved[i]) {
        ParticleView v = p.view(i);
        v.update_delta(m_saved[i]);
        p.store(i, v);
      }
    }
  }

 private:
  const Lattice& m_lattice;
  bool m_freeze;
  double m_limit_x = 0.0, m_limit_y = 0.0;
  std::vector<double> m_saved;
};

/// Puts the centre z into particle 0 and z +- steps[k] into particles 1 + 2k, 2 + 2k (13 in all);
/// returns the represented offsets (z + h) - (z - h).
std::array<double, kJacCols> set_probes(Particles& p, const double* z, const std::array<double, 6>& steps) {
  std::array<double, kJacCols> step_in{};
  p.set(0, z[0], z[1], z[2], z[3], z[4], z[5]);
  for (size_t k = 0; k < kJacCols; ++k) {
    double zp[6], zm[6];
    std::copy(z, z + 6, zp);
    std::copy(z, z + 6, zm);
    zp[k] += steps[k];
    zm[k] -= steps[k];
    step_in[k] = zp[k] - zm[k];
    p.set(1 + 2 * k, zp[0], zp[1], zp[2], zp[3], zp[4], zp[5]);
    p.set(2 + 2 * k, zm[0], zm[1], zm[2], zm[3], zm[4], zm[5]);
  }
  return step_in;
}

ElementJacobian jacobian_of_probes(const Particles& p, const std::array<double, kJacCols>& step_in) {
  ElementJacobian j{};
  const std::vector<double>* out[kJacRows] = {&p.x, &p.px, &p.y, &p.py, &p.zeta};
  for (size_t i = 0; i < kJacRows; ++i)
    for (size_t k = 0; k < kJacCols; ++k)
      j[kJacCols * i + k] = ((*out[i])[1 + 2 * k] - (*out[i])[2 + 2 * k]) / step_in[k];
  return j;
}

}  // namespace

/// One element tracked by the element-by-element pass (ElementStepper) and by the CPU backend's
/// whole-turn kernel restricted to that element (TrackOptions element range, delta restored after
/// it as RingTracker does): the largest difference of their Jacobians around z over
/// max(1, max |entry|).
double stepping_mismatch(const Lattice& lattice, Backend& backend, size_t e, const double* z,
                         const std::array<double, 6>& steps) {
  Particles a(1 + 2 * kJacCols, lattice.reference().beta0());
  const auto step_in = set_probes(a, z, steps);
  Particles b = a;
  const std::vector<double> delta_in = a.delta;
  ElementStepper stepper(lattice, true);
  stepper.step(a, e);
  TrackOptions o;
  o.collective = false;
  o.turns = 1;
  o.element_begin = e;
  o.element_end = e + 1;
  o.threads = 1;
  backend.track(b, o);
  for (size_t i = 0; i < b.size(); ++i)
    if (b.state[i] > 0 && b.delta[i] != delta_in[i]) {
      ParticleView v = b.view(i);
      v.update_delta(delta_in[i]);
      b.store(i, v);
    }
  const ElementJacobian ja = jacobian_of_probes(a, step_in), jb = jacobian_of_probes(b, step_in);
  double diff = 0.0, scale = 1.0;
  for (size_t k = 0; k < ja.size(); ++k) {
    diff = std::max(diff, std::fabs(ja[k] - jb[k]));
    scale = std::max(scale, std::fabs(jb[k]));
  }
  return std::isfinite(diff) ? diff / scale : std::numeric_limits<double>::infinity();
}

ElementPass element_pass(const Lattice& lattice, const std::array<double, 6>& start, const OpticsOptions& options,
                         TwissTable& t) {
  const size_t n = lattice.sequence().size();
  // Particle 0 follows the orbit; 1 + 2k and 2 + 2k start each element at the orbit +- the step in
  // coordinate k (x, px, y, py, zeta, delta).
  Particles p(1 + 2 * kJacCols, lattice.reference().beta0());
  p.set(0, start[0], start[1], start[2], start[3], start[4], start[5]);
  ElementStepper stepper(lattice, true);
  ElementPass pass;
  pass.jacobians.resize(n);
  for (size_t i = 0; i < kJacRows; ++i) pass.product[i][i] = 1.0;
  auto record_orbit = [&](size_t row) {
    t.x[row] = p.x[0];
    t.px[row] = p.px[0];
    t.y[row] = p.y[0];
    t.py[row] = p.py[0];
    t.zeta[row] = p.zeta[0];
    t.delta[row] = p.delta[0];
  };
  t.name[0] = "_start";
  t.type[0] = "";
  t.s[0] = 0.0;
  record_orbit(0);
  for (size_t e = 0; e < n; ++e) {
    double z[6];
    p.coordinates(0, z);
    const auto step_in = set_probes(p, z, options.steps);
    stepper.step(p, e);
    const ElementJacobian& j = pass.jacobians[e] = jacobian_of_probes(p, step_in);
    std::array<std::array<double, kJacCols>, kJacRows> next{};
    for (size_t i = 0; i < kJacRows; ++i)
      for (size_t k = 0; k < kJacCols; ++k) {
        double sum = k == kJacCols - 1 ? j[kJacCols * i + k] : 0.0;
        for (size_t m = 0; m < kJacRows; ++m) sum += j[kJacCols * i + m] * pass.product[m][k];
        next[i][k] = sum;
      }
    pass.product = next;
    const ElementDefinition& def = lattice.element(e);
    t.name[e + 1] = def.name;
    t.type[e + 1] = def.type->name;
    t.s[e + 1] = e + 1 < n ? lattice.sequence()[e + 1].s : t.circumference;
    record_orbit(e + 1);
  }
  return pass;
}

/// Checks of pass 1 against the one-turn tracking: the orbit closes and the product of the
/// element Jacobians is the 4D one-turn matrix. On failure, finds the first element whose
/// stepping differs from the backend's kernel and names it.
void check_element_pass(const Lattice& lattice, const LinearOptics& optics, const ElementPass& pass,
                        const OpticsOptions& options, TwissTable& t) {
  const size_t n = lattice.sequence().size();
  const std::array<double, 6>& start = optics.map_4d.closed_orbit;
  t.orbit_closure = std::max({std::fabs(t.x[n] - start[0]), std::fabs(t.px[n] - start[1]), std::fabs(t.y[n] - start[2]),
                              std::fabs(t.py[n] - start[3])});
  const Matrix6& r = optics.map_4d.matrix;
  const double per_delta = dpzeta_ddelta(start[5], lattice.reference().beta0());  // r's last column is per pzeta
  double diff = 0.0, scale = 1.0;
  for (size_t i = 0; i < kJacRows; ++i)
    for (size_t k = 0; k < kJacCols; ++k) {
      const double ref = k < 5 ? r[i][k] : r[i][5] * per_delta;
      diff = std::max(diff, std::fabs(pass.product[i][k] - ref));
      scale = std::max(scale, std::fabs(ref));
    }
  t.matrix_mismatch = diff / scale;
  if (t.orbit_closure <= 1e-8 && t.matrix_mismatch <= 1e-5) return;
  std::string culprit =
      "no single element's stepping differs from the whole-turn kernel (largest difference below 1e-9)";
  auto backend = make_cpu_backend(lattice);
  for (size_t e = 0; e < n; ++e) {
    const double z[6] = {t.x[e], t.px[e], t.y[e], t.py[e], t.zeta[e], t.delta[e]};
    const double d = stepping_mismatch(lattice, *backend, e, z, options.steps);
    if (!(d <= 1e-9)) {
      const ElementDefinition& def = lattice.element(e);
      culprit = fmt::format(
          "element #{} '{}' ({}) is tracked differently element by element and by the whole-turn "
          "kernel (relative Jacobian difference {:.3g})",
          e, def.name, def.type->name, d);
      break;
    }
  }
  throw Error(fmt::format(
      "optics along the ring: tracking element by element disagrees with tracking whole turns (orbit closure "
      "{:.3g}, relative matrix difference {:.3g}); {}; the optics would not be those of the ring",
      t.orbit_closure, t.matrix_mismatch, culprit));
}

}  // namespace ft::optics_internal

namespace ft {

double element_stepping_mismatch(const Lattice& lattice, size_t e, const std::array<double, 6>& z,
                                 const OpticsOptions& options) {
  using namespace optics_internal;
  check_options(options);
  check_lattice(lattice);
  if (e >= lattice.sequence().size())
    throw Error(fmt::format("element_stepping_mismatch: no sequence entry #{} (the lattice has {})", e,
                            lattice.sequence().size()));
  auto backend = make_cpu_backend(lattice);
  return stepping_mismatch(lattice, *backend, e, z.data(), options.steps);
}

}  // namespace ft
