// Optics along the ring (compute_twiss_table): the coupled eigenvectors and the dispersion
// propagated through the element Jacobians of the element-by-element pass (see fusetrack/optics.h).
#include <cmath>
#include <vector>

#include "analysis/optics/coupled_normal_form.hpp"
#include "analysis/optics/element_pass.hpp"
#include "analysis/optics/one_turn_map.hpp"
#include "analysis/optics/optics_internal.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft::optics_internal {

namespace {

/// (x, px, y, py, zeta): an eigenvector with its zeta part, 0 at the start (zeta starts every
/// turn of the 4D map at the orbit's zeta) and filled in along the ring.
using CVector5 = std::array<Complex, 5>;

CVector5 propagate(const ElementJacobian& j, const CVector5& v) {
  CVector5 r{};
  for (size_t i = 0; i < kJacRows; ++i)
    for (size_t k = 0; k < kJacRows; ++k) r[i] += j[kJacCols * i + k] * v[k];
  return r;
}

double wrap_phase(double d) {
  // into (-pi, pi]
  d = std::remainder(d, 2.0 * kPi);
  if (d <= -kPi) d += 2.0 * kPi;
  return d;
}

/// Pass 2: the eigenvectors and the dispersion, from the start through every element.
void propagate_optics(const ElementPass& pass, TwissTable& t) {
  const size_t n = pass.jacobians.size();
  // Normal form at the start (4x4 transverse block of the product; zeta starts at 0).
  std::array<std::array<double, 4>, 4> m4{};
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 4; ++k) m4[i][k] = pass.product[i][k];
  const TransverseModes modes = transverse_eigenvectors(m4);
  const std::array<CVector4, 2>& v4 = modes.vectors;
  std::array<CVector5, 2> v{};
  for (size_t m = 0; m < 2; ++m)
    for (size_t i = 0; i < 4; ++i) v[m][i] = v4[m][i];
  const std::array<CVector5, 2> v_start = v;
  // Dispersion: (I - R4) D = dR/ddelta at the start, zeta part 0.
  std::array<double, kJacRows> d{};
  {
    std::vector<std::vector<double>> a(4, std::vector<double>(4));
    std::vector<double> b(4);
    for (size_t i = 0; i < 4; ++i) {
      for (size_t k = 0; k < 4; ++k) a[i][k] = (i == k ? 1.0 : 0.0) - pass.product[i][k];
      b[i] = pass.product[i][kJacCols - 1];
    }
    if (!solve(a, b))
      throw Error("optics along the ring: I - R (4x4) is singular: cannot compute the dispersion (integer tune?)");
    for (size_t i = 0; i < 4; ++i) d[i] = b[i];
  }
  double phase[2] = {0.0, 0.0};
  double last_arg[2] = {std::arg(v[0][0]), std::arg(v[1][2])};
  auto record_optics = [&](size_t row) {
    const double b1x = 2.0 * std::norm(v[0][0]), b1y = 2.0 * std::norm(v[0][2]);
    const double b2x = 2.0 * std::norm(v[1][0]), b2y = 2.0 * std::norm(v[1][2]);
    t.beta_1x[row] = b1x;
    t.beta_1y[row] = b1y;
    t.beta_2x[row] = b2x;
    t.beta_2y[row] = b2y;
    t.alpha_1x[row] = -2.0 * (v[0][0] * std::conj(v[0][1])).real();
    t.alpha_1y[row] = -2.0 * (v[0][2] * std::conj(v[0][3])).real();
    t.alpha_2x[row] = -2.0 * (v[1][0] * std::conj(v[1][1])).real();
    t.alpha_2y[row] = -2.0 * (v[1][2] * std::conj(v[1][3])).real();
    t.beta_x[row] = b1x;
    t.alpha_x[row] = t.alpha_1x[row];
    t.beta_y[row] = b2y;
    t.alpha_y[row] = t.alpha_2y[row];
    t.mu_x[row] = phase[0] / (2.0 * kPi);
    t.mu_y[row] = phase[1] / (2.0 * kPi);
    t.dx[row] = d[0];
    t.dpx[row] = d[1];
    t.dy[row] = d[2];
    t.dpy[row] = d[3];
    if (b1x > 0.0) t.max_coupling = std::max(t.max_coupling, b1y / b1x);
    if (b2y > 0.0) t.max_coupling = std::max(t.max_coupling, b2x / b2y);
  };
  record_optics(0);
  for (size_t e = 0; e < n; ++e) {
    const ElementJacobian& j = pass.jacobians[e];
    v[0] = propagate(j, v[0]);
    v[1] = propagate(j, v[1]);
    std::array<double, kJacRows> dn{};
    for (size_t i = 0; i < kJacRows; ++i) {
      double sum = j[kJacCols * i + kJacCols - 1];
      for (size_t k = 0; k < kJacRows; ++k) sum += j[kJacCols * i + k] * d[k];
      dn[i] = sum;
    }
    d = dn;
    const double args[2] = {std::arg(v[0][0]), std::arg(v[1][2])};
    for (int k = 0; k < 2; ++k) {
      phase[k] += wrap_phase(args[k] - last_arg[k]);
      last_arg[k] = args[k];
    }
    record_optics(e + 1);
  }
  t.q1 = t.mu_x[n];
  t.q2 = t.mu_y[n];
  // Periodicity: v(end) = lambda v(start) = |lambda| e^{i mu} v(start) in the transverse components
  // (|lambda| = 1 for a symplectic map; the 4D map with crab cavities: 1 +- 1e-6).
  for (size_t k = 0; k < 2; ++k) {
    const Complex turn = std::polar(std::abs(modes.eigenvalues[k]), phase[k]);
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < 4; ++i) {
      diff += std::norm(v[k][i] - turn * v_start[k][i]);
      norm += std::norm(v_start[k][i]);
    }
    t.periodicity_error = std::max(t.periodicity_error, std::sqrt(diff / norm));
  }
}

/// Total tune: the fraction q of the one-turn matrix plus the integer part of the phase advance mu.
double total_tune(double mu, double q) { return std::round(mu - q) + q; }

}  // namespace

}  // namespace ft::optics_internal

namespace ft {

TwissTable compute_twiss_table(const Lattice& lattice, const OpticsOptions& options) {
  using namespace optics_internal;
  Engine eng(lattice, options);
  LinearOptics o;
  find_orbit_and_maps(eng, o);
  return compute_twiss_table(lattice, o, options);
}

TwissTable compute_twiss_table(const Lattice& lattice, const LinearOptics& optics, const OpticsOptions& options) {
  using namespace optics_internal;
  check_options(options);
  check_lattice(lattice);
  const size_t rows = lattice.sequence().size() + 1;
  TwissTable t;
  t.circumference = lattice.circumference();
  t.six_d = optics.six_d;
  t.mode_reason = optics.mode_reason;
  t.name.resize(rows);
  t.type.resize(rows);
  for (auto* c :
       {&t.s,        &t.x,       &t.px,       &t.y,       &t.py,       &t.zeta,    &t.delta,   &t.beta_x, &t.alpha_x,
        &t.mu_x,     &t.beta_y,  &t.alpha_y,  &t.mu_y,    &t.dx,       &t.dpx,     &t.dy,      &t.dpy,    &t.beta_1x,
        &t.alpha_1x, &t.beta_1y, &t.alpha_1y, &t.beta_2x, &t.alpha_2x, &t.beta_2y, &t.alpha_2y})
    c->resize(rows);
  const ElementPass pass = element_pass(lattice, optics.map_4d.closed_orbit, options, t);
  check_element_pass(lattice, optics, pass, options, t);
  propagate_optics(pass, t);
  const auto q = transverse_tunes(optics.map_4d.matrix);  // as LinearOptics::qx, qy
  t.qx_total = total_tune(t.q1, q[0]);
  t.qy_total = total_tune(t.q2, q[1]);
  return t;
}

}  // namespace ft
