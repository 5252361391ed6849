// Slice-moment collective elements on the host (transverse wakes, transverse feedback; plugin_abi.h,
// ft_moments_model): the element's slices, the deterministic deposit of the slice centroids
// (SliceCentroidReducer, integers), the solve of the per-slice kicks from the element's wake sources
// (the wake library, fusetrack/transverse_wakes.h: WakeSum of Resonator, ResistiveWall, WakeTable and
// WakeMemory for the stored turns) and the table the kick reads (ft::SliceKick).
//
// One turn of one element:
//   deposit  nearest slice in zeta; per slice the macroparticle weight and the fixed-point sums of
//            x, px, y, py (threads, GPU blocks, MPI ranks: exact integers);
//   solve    slice charges Q_j = q0 e N_bunch w_j / (N_macro kProfileUnit) and centroids -> the
//            library's SliceKicks (a direct convolution, source slices in a fixed order, then the
//            stored turns from the last one back), converted to kicks with the reference particle;
//            the same numbers on every rank (every rank solves the same integers);
//   kick     NAME_kick(e, kick of the particle's slice, p).
//
// A train (ft_moments_model n_bunches > 1, spacing S [m]): bunch b is cut at [zeta_min, zeta_max] - b S. The
// slice grid covers the whole train uniformly (S is a whole number `stride` of slice widths), so the deposit
// and the kick are those of one bunch; the slices between the bunches' cuts are left out of the moments and
// get no kick. Solve: each bunch's own wake of this turn by the exact slice convolution (wakes::WakeMemory),
// the other bunches of this turn (those ahead) and every bunch of the stored turns as point bunches (their
// total charge and dipole moment at the delay between the cut grids; the long-range approximation of
// transverse_wake.h), O(n_bunches n_slices^2 + n_bunches^2 memory_turns) per turn. A feedback's bandwidth
// filters within each bunch. A single bunch (n_bunches 1) is solved as before, bit for bit.
// The convolution "fft" (ft_moments_model convolution): each bunch's own wake and its stored turns through
// wakes::WakeMemory's Fft mode, a train's long range as one convolution over the bunch index per stored turn,
// summed in the frequency domain: O(n_bunches (N log N + memory_turns)) per turn; equal to rounding.
// Delay (ft_moments_model feedback_delay = d): the kick table's centroids are those solved d turns earlier.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fusetrack/device/slice_moments.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/reduction.h"
#include "fusetrack/transverse_wakes.h"

namespace ft {

/// The bunch-wide solver of one slice-moment collective element of the sequence.
class MomentsCollectiveSolver {
 public:
  /// Builds the element's host model (create_moments) and its wake sources (tables read here); errors
  /// name the lattice file, the element and the field. `macroparticles`: the number the bunch charge
  /// is spread over (all ranks; a train: all its bunches, each bunch_charge over macroparticles / n_bunches).
  MomentsCollectiveSolver(const Lattice& lattice, size_t sequence_index, size_t macroparticles);
  ~MomentsCollectiveSolver();
  MomentsCollectiveSolver(const MomentsCollectiveSolver&) = delete;
  MomentsCollectiveSolver& operator=(const MomentsCollectiveSolver&) = delete;

  size_t sequence_index() const { return m_sequence_index; }
  const std::string& element_name() const { return m_name; }
  const ft_moments_model& model() const { return m_model; }
  const void* params() const { return m_params; }
  const ft_collective_desc& desc() const { return *m_desc; }
  /// The grid of the deposit and the kick (a train: all bunches, slices between them included).
  SliceGrid slice_grid() const;
  /// Slices of the grid (a train: n_bunches blocks of slices_per_bunch(), stride() apart, and the gaps).
  int n_slices() const { return m_total_slices; }
  int slices_per_bunch() const { return m_model.grid.n_slices; }
  int n_bunches() const { return m_bunches; }
  /// Slices between the first slices of consecutive bunches (bunch_spacing / slice width).
  int stride() const { return m_stride; }
  /// The grid index (zeta order) of bunch b's first slice (its tail): (n_bunches - 1 - b) stride.
  int bunch_first_slice(int b) const { return (m_bunches - 1 - b) * m_stride; }
  /// Slice width in time [s].
  double dt() const { return m_dt; }
  /// The summed wake sources (components the element does not ask for removed); null without sources.
  const wakes::WakeSource* wake() const { return m_wake.get(); }

  /// A reducer on the element's slices, cleared.
  SliceCentroidReducer& reducer() { return *m_reducer; }
  /// Solves from the reducer's integers (this process's particles only).
  void solve();
  /// Solves from integers summed over ranks (kSliceCentroidAccumulators per slice, zeta order) and the
  /// out-of-range count; stores this turn's moments in the wake memory.
  void solve(const uint64_t* acc, uint64_t out_of_range);
  /// The sum over the ranks of a run (TrackOptions::reduce_profile): every rank's array added in place.
  using RankSum = std::function<void(uint64_t* values, size_t n)>;
  /// A solve from this process's own integers over ranks: `local` holds kSliceCentroidAccumulators per slice,
  /// then the out-of-range count (overwritten). The kicks of this process's bunches are the bits of a solve()
  /// of the whole table summed over the ranks. A train whose bunches each have particles on one
  /// rank only (whole bunches per rank, as trains are shared) exchanges instead which bunches each rank holds
  /// (n_bunches + 1 words) and, for the long range, the bunches' point totals (3 n_bunches words, each from its
  /// one rank: the others add zeros, so the bits travel exactly); each rank solves from its own integers. A bunch
  /// on several ranks (or FUSETRACK_FULL_RANK_SUM=1, the benchmarks' baseline): the whole table is summed.
  /// After the exchange only this process's bunches are measured: kicks() outside kicks_in_use() and the
  /// other bunches' bunch_moments() keep older values.
  void solve_over_ranks(uint64_t* local, const RankSum& sum);
  /// Computes now the part of the next solve that does not depend on the next turn's integers (a train's FFT
  /// long range: the sum over the stored turns), so that a GPU backend can do it while the segment kernels run.
  /// Optional: a solve computes what was not prepared, with the same operations (the same bits).
  void prepare_next_turn();

  /// The kick table of the last solve: FT_SLICE_KICK_VALUES doubles per slice (zeta order, ft::SliceKick).
  const std::vector<double>& kicks() const { return m_kicks; }
  /// The values [begin, end) of kicks() that the last solve wrote for this process's bunches (after
  /// solve_over_ranks; else the whole table): the part a GPU needs uploaded.
  std::pair<size_t, size_t> kicks_in_use() const { return m_kicks_in_use; }
  ft_slice_kicks slice_kicks() const;
  /// This turn's moments of bunch 0 in the library's form (time order: slice 0 is the head, the largest zeta).
  /// The wakes act with the unfiltered centroids; a feedback bandwidth filters only those of the kick table.
  const wakes::SliceMoments& moments() const { return m_moments.front(); }
  /// This turn's moments of every bunch (time_offset: the bunch's delay b bunch_spacing / (beta0 c)).
  const std::vector<wakes::SliceMoments>& bunch_moments() const { return m_moments; }

  /// A warning line when particles were outside the declared ranges since the last call, else "".
  std::string take_warning();

 private:
  // The constructor's steps, after the plugin's model is made: its values checked, the train's slice
  // grid, the wake sources with their memory and long-range kernels, the feedback's low-pass.
  void check_model(const InputLocation& where, const ReferenceParticle& ref, size_t macroparticles) const;
  void set_train_grid(const Lattice& lattice, const InputLocation& where);
  std::vector<std::shared_ptr<const wakes::WakeSource>> wake_sources(const InputLocation& where) const;
  void set_wake_memory(const Lattice& lattice, const InputLocation& where);
  void set_long_range_kernels(const ReferenceParticle& ref, double revolution_time);
  void set_feedback_filter();
  /// The feedback bandwidth's low-pass of the kick table's centroids (model().feedback_bandwidth > 0) over
  /// `count` slices from `first`.
  void filter_centroids(int first, int count);
  /// The feedback delay: the kick table's centroids of this turn stored, those of feedback_delay turns ago used
  /// (the measured bunches').
  void delay_centroids(const std::vector<int>& measured);
  /// A train's wakes from the other bunches and the stored turns (point bunches), added to bunch b's kicks.
  void add_long_range(int b, const std::vector<double>& totals, wakes::SliceKicks& kicks) const;
  /// Per bunch 1 where this process's own integers (the layout of `local_acc`) hold particles of it.
  std::vector<char> local_bunches(const uint64_t* local_acc) const;
  /// solve(acc, out_of_range) for the bunches marked in `local` only (a train's bunches spread over MPI ranks
  /// share the solve; each bunch's kicks are the same bits either way); null or empty: every bunch. With
  /// `share_totals` (solve_over_ranks' exchange) only the local bunches are measured and the train's point totals
  /// are summed over the ranks before the long range.
  void solve(const uint64_t* acc, uint64_t out_of_range, const std::vector<char>* local, const RankSum* share_totals);
  /// FFT mode: this turn's long-range sums of every bunch into m_lr_sums; stores the turn's totals.
  void solve_long_range_fft(const std::vector<double>& totals);
  /// The kernel of the long-range table for k turns ago and d bunches ahead (component c).
  double long_range_kernel(int k, int d, int c) const {
    return m_lr_kernel[(static_cast<size_t>(k) * static_cast<size_t>(2 * m_bunches - 1) +
                        static_cast<size_t>(d + m_bunches - 1)) *
                           wakes::kComponents +
                       static_cast<size_t>(c)];
  }

  size_t m_sequence_index;
  std::string m_name;
  const void* m_params;
  const ft_collective_desc* m_desc;
  ft_moments_model m_model{};
  size_t m_macroparticles;
  double m_dt = 0.0;
  double m_kick_per_volt = 0.0;    // q0 / (beta0 p0c) [1/V]
  double m_energy_per_volt = 0.0;  // q0 / E0 [1/V]
  std::shared_ptr<const wakes::WakeSource> m_wake;
  std::unique_ptr<wakes::WakeMemory> m_memory;
  std::unique_ptr<SliceCentroidReducer> m_reducer;
  int m_bunches = 1, m_stride = 0, m_total_slices = 0;
  double m_train_zeta_min = 0.0;    // [m] the grid's lower edge (bunch n_bunches - 1's zeta_min)
  std::vector<double> m_lr_kernel;  // train: [turn k][d + n_bunches - 1][component]
  std::pair<size_t, size_t> m_kicks_in_use{0, 0};
  bool m_full_rank_sum = false;   // FUSETRACK_FULL_RANK_SUM: solve_over_ranks always sums the whole table
  bool m_kernels_cached = false;  // the own-wake kernel spectra made (the first solve fills the cache)
  std::deque<std::vector<double>> m_lr_history;  // train: per stored turn (front: the last), per bunch Q, Qx, Qy
  /// The FFT convolution of a train: the long range as convolutions over the bunch index (slice_wakes.cpp).
  struct LongRangeFft;
  std::unique_ptr<LongRangeFft> m_lr_fft;
  std::vector<double> m_lr_sums;              // FFT mode: this turn's long-range sums [bunch][component]
  std::deque<std::vector<double>> m_delayed;  // delay: the kick tables' centroids of the last turns
  std::vector<double> m_filter_gaussian;      // bandwidth: the low-pass weights by slice distance + n - 1
  std::vector<wakes::SliceMoments> m_moments;
  std::vector<double> m_kicks;
  uint64_t m_warn_out_of_range = 0;
  int64_t m_warn_turns = 0;
};

}  // namespace ft
