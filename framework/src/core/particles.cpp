#include "fusetrack/particles.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"

namespace ft {

Particles::Particles(size_t n, double beta0_) : beta0(beta0_) { resize(n); }

void Particles::resize(size_t n) {
  const size_t old = size();
  if (n > old)
    require_host_memory(saturating_product({n - old, kHostBytesPerParticle}), fmt::format("{} particles", n));
  for (auto* v : {&x, &px, &y, &py, &zeta, &delta, &ptau}) v->resize(n, 0.0);
  rpp.resize(n, 1.0);
  rvv.resize(n, 1.0);
  state.resize(n, kAlive);
  lost_turn.resize(n, -1);
  lost_element.resize(n, -1);
  id.resize(n);
  for (size_t i = old; i < n; ++i) id[i] = static_cast<int64_t>(i);
  if (!variant.empty()) variant.resize(n, 0);
}

void Particles::set(size_t i, double x_, double px_, double y_, double py_, double zeta_, double delta_) {
  store(i, make_particle(x_, px_, y_, py_, zeta_, delta_, beta0));
  lost_turn[i] = -1;
  lost_element[i] = -1;
}

ParticleView Particles::view(size_t i) const {
  return ParticleView{x[i], px[i], y[i], py[i], zeta[i], delta[i], ptau[i], rpp[i], rvv[i], beta0, state[i]};
}

void Particles::store(size_t i, const ParticleView& p) {
  x[i] = p.x;
  px[i] = p.px;
  y[i] = p.y;
  py[i] = p.py;
  zeta[i] = p.zeta;
  delta[i] = p.delta;
  ptau[i] = p.ptau;
  rpp[i] = p.rpp;
  rvv[i] = p.rvv;
  state[i] = p.state;
}

size_t Particles::alive_count() const {
  size_t n = 0;
  for (int32_t s : state) n += s > 0;
  return n;
}

void Particles::derive_energy() {
  for (size_t i = 0; i < size(); ++i) {
    ParticleView p =
        particle_with_derived_energy(x[i], px[i], y[i], py[i], zeta[i], delta[i], ptau[i], beta0, state[i]);
    rpp[i] = p.rpp;
    rvv[i] = p.rvv;
  }
}

ft_particle_block Particles::block(size_t first, size_t count) {
  ft_particle_block b{};
  b.x = x.data() + first;
  b.px = px.data() + first;
  b.y = y.data() + first;
  b.py = py.data() + first;
  b.zeta = zeta.data() + first;
  b.delta = delta.data() + first;
  b.ptau = ptau.data() + first;
  b.rpp = rpp.data() + first;
  b.rvv = rvv.data() + first;
  b.state = state.data() + first;
  b.lost_turn = lost_turn.data() + first;
  b.lost_element = lost_element.data() + first;
  b.count = static_cast<int64_t>(count);
  b.beta0 = beta0;
  return b;
}

void Particles::coordinates(size_t i, double out[6]) const {
  out[0] = x[i];
  out[1] = px[i];
  out[2] = y[i];
  out[3] = py[i];
  out[4] = zeta[i];
  out[5] = delta[i];
}

Particles make_grid(double beta0, double x_min, double x_max, size_t nx, double y_min, double y_max, size_t ny,
                    double delta) {
  require_host_memory(saturating_product({nx, ny, kHostBytesPerParticle}),
                      fmt::format("a grid of {} x {} particles", nx, ny));
  Particles p(nx * ny, beta0);
  for (size_t j = 0; j < ny; ++j)
    for (size_t i = 0; i < nx; ++i) {
      const double x = nx > 1 ? x_min + (x_max - x_min) * static_cast<double>(i) / static_cast<double>(nx - 1) : x_min;
      const double y = ny > 1 ? y_min + (y_max - y_min) * static_cast<double>(j) / static_cast<double>(ny - 1) : y_min;
      p.set(j * nx + i, x, 0.0, y, 0.0, 0.0, delta);
    }
  return p;
}

}  // namespace ft
