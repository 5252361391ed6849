// Backends track Particles through a Lattice. The CPU backend runs the plugins' host-compiled
// element functions; the CUDA backend runs one fused kernel generated from the same sources.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"

namespace ft {

enum class FmaMode { Off, On };

struct TrackOptions {
  int64_t turns = 1;
  int64_t first_turn = 0;  // number of the first turn (recorded on loss; for resumed runs)
  /// Track only sequence entries [element_begin, element_end) each turn (element-by-element
  /// replay); end-of-turn checks run only when the range ends at the end of the sequence.
  size_t element_begin = 0;
  size_t element_end = std::numeric_limits<size_t>::max();
  /// Called every `callback_every` turns (and after the last) with the number of turns done and
  /// the particles as they are then (copied back from the device). Returning false stops
  /// tracking after that turn. 0: no callback.
  int64_t callback_every = 0;
  std::function<bool(int64_t turns_done, const Particles& particles)> callback;
  int threads = 0;            // CPU threads; 0: OpenMP's default
  FmaMode fma = FmaMode::Off; // GPU numerics (the CPU never contracts)
  /// Collective elements: false skips them (single-particle studies of a collective lattice:
  /// optics, the RF bucket). The bunch intensity is spread over `macroparticles` (0: all the
  /// particles given, lost ones included, so that losses lower the bunch charge).
  bool collective = true;
  size_t macroparticles = 0;
  /// Runs split over processes: sums each integer profile over them, in place, before it is
  /// solved (MPI_Allreduce); every process then computes the same field. Empty: one process.
  std::function<void(uint64_t* counts, size_t n)> reduce_profile;
  /// Warnings of collective elements (space-charge particles outside the grid, with their count)
  /// printed on stderr at the end of track(); false: kept in the reports only (e.g. MPI ranks > 0).
  bool warnings = true;
};

/// What a collective element did on the last turn tracked: its profile and solved field.
struct CollectiveSnapshot {
  size_t sequence_index = 0;
  std::string element_name;
  ft_profile_grid grid{};
  std::vector<uint64_t> counts;  // fixed point, kProfileUnit per macroparticle (zeta order)
  std::vector<double> field;     // [V] at the slice centres (zeta order)
};

/// What a grid collective element (space charge) did over the track() calls since it was set up.
struct GridCollectiveReport {
  size_t sequence_index = 0;
  std::string element_name;
  int solver = 0;                      // enum ft_grid_solver
  std::array<int, 3> nodes{};
  std::array<double, 3> min{}, max{};  // [m] the last turn's grid
  uint64_t outside_last = 0;           // alive particles outside the grid on the last turn (no kick)
  uint64_t outside_total = 0;          // summed over the turns (particle-turns)
  uint64_t outside_max = 0;            // the most in one turn
  int64_t turns_with_outside = 0;
  uint64_t moments_outside_total = 0;  // particle-turns left out of the adapted extent's moments
  int64_t turns = 0;                   // turns solved
  double max_field = 0.0;              // [V/m] max |E_x|, |E_y|, |E_z| at the nodes, last turn
  int64_t solver_builds = 0;           // Poisson solvers built (the adapted grid's spacing changed)
  int solve_threads = 0;               // OpenMP threads of the last Poisson solve on the host (0: none there)
};

/// True when tracking `lattice` with `options` runs collective steps.
inline bool runs_collective(const Lattice& lattice, const TrackOptions& options) {
  return options.collective && lattice.has_collective();
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Tracks in place. Throws ft::Error on failure (e.g. a plugin function threw).
  virtual void track(Particles& particles, const TrackOptions& options) = 0;
  /// Profiles and fields of the collective elements after the last turn tracked (empty for a
  /// single-particle lattice).
  virtual std::vector<CollectiveSnapshot> collective_snapshots() const { return {}; }
  /// Reports of the grid collective elements (space charge), in sequence order.
  virtual std::vector<GridCollectiveReport> grid_reports() const { return {}; }
  /// Tells the backend that field values of the lattice changed (Lattice::set_field, then
  /// Lattice::prepare) so that the next track() uses them: kernels with baked-in parameters are
  /// regenerated, parameter tables uploaded again (the switch kernel is not recompiled), and the
  /// state of collective elements (multi-turn wake memory) starts afresh.
  virtual void parameters_changed() {}
  /// Lattice variants (fusetrack/variants.h): from now on a particle with Particles::variant v is
  /// tracked through `variants[v]`, whose sequence must be this backend's lattice's (field values
  /// and transformations may differ; no collective elements). Each variant's particles come out
  /// bitwise as tracking them through that variant alone. Empty: the backend's own lattice again.
  /// The lattices must outlive the backend's use of them. Throws Error when a variant cannot be
  /// tracked this way (a different sequence, collective elements).
  virtual void set_variants(const std::vector<const Lattice*>& variants);
};

/// Throws Error unless every variant can share `lattice`'s sequence in one run (Backend::set_variants).
void check_variants_trackable(const Lattice& lattice, const std::vector<const Lattice*>& variants);
/// The variant of particle i (0 when the particles carry none); throws Error naming the particle
/// when it is out of range for `n_variants`.
int32_t particle_variant(const Particles& particles, size_t i, size_t n_variants);

std::unique_ptr<Backend> make_cpu_backend(const Lattice& lattice);

/// One sequence entry `e` on a block of particles as the CPU backend tracks it (its transformation
/// around the element when it has one, the element's block function, the global limits of `b`);
/// collective elements do nothing. Returns the element's error code (message in `err`). For
/// element-by-element tools (the Twiss table) that must follow the backend exactly.
int track_sequence_entry(const Lattice& lattice, size_t e, ft_particle_block& b, ft_error* err);

}  // namespace ft
