// Particles as a structure of arrays: the six coordinates, the derived ptau/rpp/rvv, and the
// bookkeeping of losses. The same layout is copied to the GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fusetrack/device/particle.h"
#include "fusetrack/plugin_abi.h"

namespace ft {

class Lattice;

struct Particles {
  double beta0 = 1.0;  // reference beta, needed to keep ptau, rpp, rvv consistent with delta
  std::vector<double> x, px, y, py, zeta, delta;  // [m], [1], [m], [1], [m], [1]
  std::vector<double> ptau, rpp, rvv;             // derived from delta
  std::vector<int32_t> state;                     // > 0 alive; see ft::ParticleState
  std::vector<int32_t> lost_turn;                 // turn of loss, -1 while alive
  std::vector<int64_t> lost_element;              // sequence index of the element of loss, -1 while alive
  std::vector<int64_t> id;                        // particle number, kept through reordering
  /// Lattice variant of each particle (Backend::set_variants), or empty: every particle in variant 0.
  std::vector<int32_t> variant;

  Particles() = default;
  Particles(size_t n, double beta0_);

  size_t size() const { return x.size(); }
  void resize(size_t n);
  /// Sets particle i alive at the given coordinates (ptau, rpp, rvv from delta).
  void set(size_t i, double x_, double px_, double y_, double py_, double zeta_, double delta_);
  ParticleView view(size_t i) const;
  void store(size_t i, const ParticleView& p);
  size_t alive_count() const;
  /// rpp and rvv of every particle recomputed from delta and ptau (ParticleView::set_derived_energy).
  /// The CPU backend does it before a collective run: the GPU's collective kernels never read the
  /// arrays' rpp and rvv but recompute them (collective_energy_is_derived), so both start alike even
  /// from particles whose rpp and rvv were written another way.
  void derive_energy();
  /// Block of `count` particles from `first`, for the CPU element loop.
  ft_particle_block block(size_t first, size_t count);
  /// The six coordinates of particle i in (x, px, y, py, zeta, delta) order.
  void coordinates(size_t i, double out[6]) const;
};

/// A regular x-y grid: nx x ny particles with x in [x_min, x_max], y in [y_min, y_max], all
/// other coordinates as given.
Particles make_grid(double beta0, double x_min, double x_max, size_t nx, double y_min, double y_max, size_t ny,
                    double delta = 0.0);

}  // namespace ft
