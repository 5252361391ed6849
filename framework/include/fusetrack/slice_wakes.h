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
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/device/slice_moments.h"
#include "fusetrack/lattice.h"
#include "fusetrack/reduction.h"
#include "fusetrack/transverse_wakes.h"

namespace ft {

/// The bunch-wide solver of one slice-moment collective element of the sequence.
class MomentsCollectiveSolver {
 public:
  /// Builds the element's host model (create_moments) and its wake sources (tables read here); errors
  /// name the lattice file, the element and the field. `macroparticles`: the number the bunch charge
  /// is spread over (all ranks).
  MomentsCollectiveSolver(const Lattice& lattice, size_t sequence_index, size_t macroparticles);
  ~MomentsCollectiveSolver();
  MomentsCollectiveSolver(const MomentsCollectiveSolver&) = delete;
  MomentsCollectiveSolver& operator=(const MomentsCollectiveSolver&) = delete;

  size_t sequence_index() const { return m_sequence_index; }
  const std::string& element_name() const { return m_name; }
  const ft_moments_model& model() const { return m_model; }
  const void* params() const { return m_params; }
  const ft_collective_desc& desc() const { return *m_desc; }
  SliceGrid slice_grid() const;
  int n_slices() const { return m_model.grid.n_slices; }
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

  /// The kick table of the last solve: FT_SLICE_KICK_VALUES doubles per slice (zeta order, ft::SliceKick).
  const std::vector<double>& kicks() const { return m_kicks; }
  ft_slice_kicks slice_kicks() const;
  /// This turn's moments in the library's form (time order: slice 0 is the head, the largest zeta). The
  /// wakes act with the unfiltered centroids; a feedback bandwidth filters only those of the kick table.
  const wakes::SliceMoments& moments() const { return m_moments; }

  /// A warning line when particles were outside the declared ranges since the last call, else "".
  std::string take_warning();

 private:
  /// The feedback bandwidth's low-pass of the kick table's centroids (model().feedback_bandwidth > 0).
  void filter_centroids();

  size_t m_sequence_index;
  std::string m_name;
  const void* m_params;
  const ft_collective_desc* m_desc;
  ft_moments_model m_model{};
  size_t m_macroparticles;
  double m_dt = 0.0;
  double m_kick_per_volt = 0.0;       // q0 / (beta0 p0c) [1/V]
  double m_energy_per_volt = 0.0;     // q0 / E0 [1/V]
  std::shared_ptr<const wakes::WakeSource> m_wake;
  std::unique_ptr<wakes::WakeMemory> m_memory;
  std::unique_ptr<SliceCentroidReducer> m_reducer;
  wakes::SliceMoments m_moments;
  std::vector<double> m_kicks;
  uint64_t m_warn_out_of_range = 0;
  int64_t m_warn_turns = 0;
};

}  // namespace ft
