// Opt-in simplification of a lattice for tracking (`fusetrack track --optimize`), as Xsuite's
// Line.optimize_for_tracking does (xtrack/line.py: remove_markers, remove_inactive_multipoles,
// remove_zero_length_drifts, merge_consecutive_drifts, merge_consecutive_multipoles):
//   - markers are removed (type Marker: its track function does nothing);
//   - inactive thin kicks (type Multipole with every knl and ksl zero and hxl = 0) and drifts of length
//     zero are removed: each is the identity up to the sign of a zero, and leaves x and y as they were
//     at the previous element's limit check;
//   - runs of consecutive drifts of one type (Drift with Drift, DriftExact with DriftExact) become
//     one drift of the summed length (a drift map is a translation in x, y, zeta linear in the
//     length at fixed px, py, delta);
//   - runs of adjacent thin multipoles (type Multipole) without bending (hxl = 0 on both, the rule
//     of xtrack's merge_consecutive_multipoles) become one kick with the summed knl and ksl: the kick
//     depends only on x and y, which a thin kick leaves unchanged, so the two kicks add.
// Nothing else is merged, nothing is merged across anything else (apertures, cavities, edges,
// collective elements, ...), and elements with a transformation (shift, rotation) are kept as they
// are and never merged. The result is the same map in exact arithmetic; in floating point a merged
// drift or kick rounds differently (L1 then L2 is not bitwise L1 + L2), by a few ulps per pass.
// The global |x|/|y| limit is checked at the exit of every element, so inside a merged drift it is
// checked at fewer places: a particle beyond the limit at the exit of an inner part is found at the
// exit of the merged drift (reported at its first part, map_lost_elements_to_original), in the same
// turn unless it came back inside the limit by that exit (a drift moves it along a straight line).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"

namespace ft {

/// What optimize_for_tracking() did.
struct OptimizeReport {
  size_t elements_before = 0;    // sequence entries of the lattice given
  size_t elements_after = 0;     // sequence entries of the optimized lattice
  size_t markers_removed = 0;    // sequence entries of type Marker dropped
  size_t inactive_removed = 0;   // inactive thin kicks and zero-length drifts dropped
  size_t drifts_merged = 0;      // drift entries absorbed into a preceding drift of their run
  size_t thin_kicks_merged = 0;  // thin-multipole entries absorbed into a preceding kick of their run
  /// By sequence index of the optimized lattice: the index in the original sequence of the first
  /// and of the last element it was made from (equal for an element kept as it was).
  std::vector<size_t> first_original_index;
  std::vector<size_t> last_original_index;

  /// "optimized: N -> M elements (markers removed a, inactive kicks and zero-length drifts removed i, drifts
  /// merged b, thin kicks merged c)"
  std::string summary() const;
};

/// A new, prepared lattice (same reference particle, global limits and source file) with markers,
/// inactive kicks and zero-length drifts removed and consecutive drifts and thin kicks merged by the
/// rules above. Merged definitions are named from their parts ("D1+D2", "D1+D2+...+D9" for long runs;
/// "#2", ... appended if the name is taken); a run that repeats (the same definitions in the same order) reuses its definition, and
/// kept definitions keep their names. A lattice made only of removed elements keeps its first element.
/// `report` (may be null) receives the counts and the index map.
Lattice optimize_for_tracking(const Lattice& lattice, OptimizeReport* report = nullptr);

/// Variants of one lattice (fusetrack/variants.h: the same definitions and sequence, other field
/// values and transformations), optimized alike so that they again share one sequence: an element is
/// removed or merged only where every variant allows it (a drift misaligned in one variant, or a kick
/// with hxl != 0 in one, is kept in all). Each variant's merged elements hold its own values. Throws
/// ft::Error when the sequences differ. `report` (the same for every variant) may be null. For
/// `fusetrack da --variants --optimize`: variants.lattices = optimize_variants_for_tracking(
/// variants.pointers(), &report).
std::vector<Lattice> optimize_variants_for_tracking(const std::vector<const Lattice*>& variants,
                                                    OptimizeReport* report = nullptr);

/// Maps every lost particle's lost_element (an index of the optimized sequence) to an index of the
/// original sequence, so that output files name the elements of the lattice file: a loss on an
/// aperture or on the global limit to the first part of its element (an aperture is never merged;
/// a particle beyond the global limit inside a merged drift went beyond it in the drift run, found
/// at its exit), a loss at the end-of-turn checks (kLostOnTurnLimit, kLostNotFinite) to the last
/// element of the original turn, as the original lattice reports it.
void map_lost_elements_to_original(Particles& particles, const OptimizeReport& report);

}  // namespace ft
