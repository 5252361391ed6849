// Grid collective elements on the host (space charge, particle-in-cell; plugin_abi.h,
// ft_grid_model): the element's grid, adapted to the bunch or fixed, the deterministic deposit
// (ChargeGridReducer, integers), the Poisson solve (PoissonSolver) and the field the kick reads.
//
// One turn of one element (docs/pages/theory/space-charge.md):
//   [adaptive extent]  extent moments of the alive particles (fixed-point integers, summed over
//                      threads and ranks) -> set_extent: the same grid on every rank and backend;
//   deposit            cloud-in-cell integer charge on the nodes (threads, GPU blocks, ranks: exact);
//   solve              rho = charge q e N / (N_macro dV) -> E at the nodes: 2.5D a 2D open-boundary
//                      solve per zeta layer; 3D in the bunch's rest frame (zeta stretched by gamma0,
//                      rho / gamma0), then E_perp = gamma0 E'_perp, E_z = E'_z;
//   kick               the element's NAME_kick with E interpolated by the deposit's weights.
// Particles outside the grid (and outside the declared ranges of the extent moments) are counted
// on every turn and reported (warnings()), never dropped in silence.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/device/space_charge.h"
#include "fusetrack/lattice.h"
#include "fusetrack/poisson.h"
#include "fusetrack/reduction.h"
#include "fusetrack/tracker.h"

namespace ft {

/// The bunch-wide solver of one grid collective element of the sequence.
class GridCollectiveSolver {
 public:
  /// Builds the element's grid model (its create_grid(); errors name the file, element and field).
  /// `macroparticles`: the number the bunch charge is spread over (all ranks).
  GridCollectiveSolver(const Lattice& lattice, size_t sequence_index, FmaMode fma, size_t macroparticles);
  ~GridCollectiveSolver();
  GridCollectiveSolver(const GridCollectiveSolver&) = delete;
  GridCollectiveSolver& operator=(const GridCollectiveSolver&) = delete;

  size_t sequence_index() const { return m_sequence_index; }
  const std::string& element_name() const { return m_name; }
  const ft_grid_model& model() const { return m_model; }
  const void* params() const { return m_params; }
  const ft_collective_desc& desc() const { return *m_desc; }
  FmaMode fma() const { return m_fma; }
  size_t macroparticles() const { return m_macroparticles; }

  // ---- adapted extent ----
  /// True when at least one dimension's extent follows the bunch.
  bool adaptive() const { return m_adaptive; }
  /// The moment passes needed before this turn's deposit: 2 on the first turn (a coarse pass with
  /// wide declared ranges, then one about its mean), 1 afterwards (about the last turn's grid).
  int extent_passes() const { return m_have_extent ? 1 : 2; }
  /// The declared centres, ranges and scales of the next moment pass.
  const ExtentScales& extent_scales() const { return m_extent_scales; }
  /// Moments of the alive particles, deterministic over `threads` (extent_contributions): adds
  /// kExtentAccumulators + 1 integers (the last: particles outside the declared ranges) to acc.
  void accumulate_extent(const Particles& particles, int threads, uint64_t* acc) const;
  /// Takes the moment sums of one pass (summed over ranks; kExtentAccumulators + 1 values) and sets
  /// the next pass's scales, or after the last pass the grid of this turn.
  void set_extent(const uint64_t* acc);

  // ---- deposit, solve, field ----
  /// The grid of this turn's deposit (and of the next kick).
  const ChargeGridSpec& spec() const { return m_reducer->spec(); }
  /// A reducer on this turn's grid, cleared.
  ChargeGridReducer& reducer() { return *m_reducer; }
  /// OpenMP threads of the Poisson solves (0: the OpenMP default); the CPU backend passes its thread count
  /// (TrackOptions::threads). The reproducible mode gives the same bits for any count.
  void set_solve_threads(int threads) { m_solve_threads = threads; }
  /// Solves from the reducer's integers (summed over ranks: accumulators and outside()).
  void solve();
  /// The same from integers computed elsewhere (the GPU's), summed over ranks.
  void solve(const uint64_t* acc, uint64_t outside);
  /// The field at the nodes for the kick (grid of spec()).
  ft_grid_field field() const;

  // A solve of the same integers elsewhere (the GPU backend's, on one rank): the host Poisson solver
  // of the current grid (rebuilt when the spacing changes; report().solver_builds counts the builds),
  // the factor from the integers to the node charge density, gamma0 (3D: E_perp = gamma0 E'_perp),
  // and the report's update (as solve() does it).
  const PoissonSolver& poisson() const { return *m_poisson; }
  double charge_density_factor() const;
  double gamma0() const { return m_gamma0; }
  void record_solve(uint64_t outside, double max_field);
  const std::vector<double>& ex() const { return m_ex; }
  const std::vector<double>& ey() const { return m_ey; }
  const std::vector<double>& ez() const { return m_ez; }  // empty for 2.5D
  size_t node_count() const { return m_node_count; }

  const GridCollectiveReport& report() const { return m_report; }
  /// A warning line when particles were outside the grid (or the moments' ranges) since the last
  /// call, else ""; resets the counts it reports.
  std::string take_warning();

 private:
  void build_grid(const std::array<double, 3>& min, const std::array<double, 3>& max);

  int m_solve_threads = 0;
  size_t m_sequence_index;
  std::string m_name;
  const void* m_params;
  const ft_collective_desc* m_desc;
  ft_grid_model m_model{};
  FmaMode m_fma;
  size_t m_macroparticles;
  double m_gamma0 = 1.0;
  double m_circumference = 0.0;
  bool m_adaptive = false;
  bool m_have_extent = false;
  int m_pass = 0;
  ExtentScales m_extent_scales{};
  std::array<double, 3> m_last_half{};  // [m] the last turn's adapted half extents
  size_t m_node_count = 0;
  std::unique_ptr<ChargeGridReducer> m_reducer;
  std::array<double, 3> m_spacing{};  // [m] of the solver built
  std::unique_ptr<PoissonSolver> m_poisson;
  std::vector<double> m_rho, m_ex, m_ey, m_ez;
  GridCollectiveReport m_report;
  uint64_t m_warn_outside = 0, m_warn_outside_max = 0, m_warn_moments = 0;
  int64_t m_warn_turns = 0;
};

}  // namespace ft
