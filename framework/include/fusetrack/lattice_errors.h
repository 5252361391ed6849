// Magnet errors as lattice variants: seeded random multipole errors and misalignments from an error
// table (MAD-X's EFCOMP and EALIGN, as MAD-X users know them), and errors exported by MAD-X (ESAVE
// TFS tables), both written as a variants file (fusetrack/variants.h) of one base lattice.
//
// Error table (JSON; docs/pages/user/dynamic-aperture.md, "Error table"):
//   {"fusetrack_error_table": 1, "description": "...", "cut": 3.0,
//    "entries": [{"match": "Q[FD].*", "type": "ThickMultipole", "order": 1, "radius": 0.017, "cut": 2.5,
//                 "systematic":  {"dknr": [0, 0, 2e-4]},
//                 "uncertainty": {"dknr": [0, 0, 1e-4]},
//                 "random":      {"dknr": [0, 0, 5e-4], "dksr": [0, 0, 5e-4], "dx": 1e-4, "dpsi": 2e-4}}]}
// An entry selects element definitions by exact "name" or by "match" (ECMAScript regular expression
// matching whole names), optionally only those of element type "type". Each of its three parts has
// the keys of MAD-X's EFCOMP (dknr, dksr: relative to the main field of order "order" at radius
// "radius" [m]; dkn, dks: integrated strengths K_j L [m^-j]; index j = multipole order) and EALIGN
// (dx, dy, ds [m]; dphi, dtheta, dpsi [rad]):
//   systematic:  the value itself, the same in every element and every seed;
//   uncertainty: the rms of one draw per seed and entry, shared by all its elements (LHC tables);
//   random:      the rms of one draw per seed, element and component.
// Draws are standard normals truncated at "cut" sigma by rejection (MAD-X TGAUSS(cut)). The value
// of a component is systematic + uncertainty_rms g_U + random_rms g_R; entries that select the same
// element add up (MAD-X EOPTION, ADD = true).
//
// Relative errors (MAD-X user guide, chapter "Error definitions", EFCOMP attribute DKNR/DKSR):
//   Delta(K_j L) = DKNR(j) * K_ref L * R^(n - j) * j! / n!,
// n = ORDER, R = |RADIUS| and K_ref L the integrated normal strength of order n of the element
// (its skew strength when RADIUS < 0, as in MAD-X). Misalignments follow Xsuite's reading of MAD-X
// EALIGN: shift_x = DX, shift_y = DY, shift_s = DS, rot_x_rad = DPHI, rot_y_rad = DTHETA,
// rot_s_rad_no_frame = DPSI, rotations about the element's entry (rot_shift_anchor 0).
//
// Random numbers: Philox4x32-10 (fusetrack/device/random.h) keyed by the seed; the counter holds a
// 64-bit FNV-1a hash of the element definition's name, the entry's index in the table, the part, the
// component and the rejection attempt. A value depends on nothing else: not on the order of the
// definitions in the lattice, on other elements, or on threads.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"

namespace ft {

/// The highest multipole order an error table may name (MAD-X: 20). Element types hold fewer.
inline constexpr int kMaxErrorOrder = 20;

/// The EALIGN components, in this order: dx, dy, ds [m], dphi, dtheta, dpsi [rad].
inline constexpr const char* kAlignmentErrorNames[6] = {"dx", "dy", "ds", "dphi", "dtheta", "dpsi"};
/// The transformation field each EALIGN component adds to (fusetrack/transform.h).
inline constexpr const char* kAlignmentTransformFields[6] = {"shift_x",   "shift_y",   "shift_s",
                                                             "rot_x_rad", "rot_y_rad", "rot_s_rad_no_frame"};

/// The field-error kinds of EFCOMP, in this order.
enum class FieldErrorKind { relative_normal = 0, relative_skew = 1, absolute_normal = 2, absolute_skew = 3 };
inline constexpr const char* kFieldErrorNames[4] = {"dknr", "dksr", "dkn", "dks"};

/// One part (systematic, uncertainty or random) of an entry: values or rms values.
struct ErrorComponents {
  std::array<std::vector<double>, 4> field;  // by FieldErrorKind, index = multipole order (<= kMaxErrorOrder)
  std::array<double, 6> alignment{};         // by kAlignmentErrorNames

  bool has_field_errors() const;
  bool has_relative_errors() const;
  bool has_alignment_errors() const;
  bool empty() const { return !has_field_errors() && !has_alignment_errors(); }
};

enum class ErrorPart { systematic = 0, uncertainty = 1, random = 2 };
inline constexpr const char* kErrorPartNames[3] = {"systematic", "uncertainty", "random"};

struct ErrorTableEntry {
  std::string name;                      // exact definition name, or
  std::string pattern;                   // "match": an ECMAScript regular expression for whole names
  std::string type;                      // only definitions of this element type ("" = any)
  int order = 0;                         // ORDER: main (reference) multipole order of relative errors
  double radius = 0.0;                   // RADIUS [m] of relative errors; < 0: skew reference; 0: not given
  double cut = 0.0;                      // truncation [sigma]; 0: the table's
  std::array<ErrorComponents, 3> parts;  // by ErrorPart

  /// "entries[3] (match 'Q.*')": how messages name the entry.
  std::string label(size_t index) const;
};

struct ErrorTable {
  std::string file;
  std::string description;
  double cut = 3.0;  // default truncation [sigma] of every entry
  std::vector<ErrorTableEntry> entries;
};

/// Reads an error table file; InputError naming the file, the entry and the field on anything wrong.
ErrorTable read_error_table(const std::string& path);
ErrorTable error_table_from_json(const nlohmann::ordered_json& doc, const std::string& file);

/// A standard normal truncated at |g| <= cut by rejection (MAD-X TGAUSS), draw `stream` of `seed`:
/// attempts k = 0, 1, ... take the Philox block of counter (stream_lo, stream_hi, tag, k).
double truncated_gaussian(uint64_t seed, uint64_t stream, uint32_t tag, double cut);

/// The changes of one element definition in one variant (the "elements" entries of a variants file).
struct VariantFieldChange {
  std::string field;
  std::vector<double> values;  // entry k applies to index k
  bool is_array = false;       // written as a list (knl, ksl, kn, ks) or as a number
};

struct VariantElementChange {
  std::string name;
  std::vector<VariantFieldChange> add;
  std::vector<VariantFieldChange> set;
};

struct LatticeVariantSpec {
  std::string name;
  std::vector<VariantElementChange> elements;
};

/// What was drawn, per entry and component, for the summary: values in the table's units (relative
/// b_n, a_n for dknr/dksr; K_j L for dkn/dks; m and rad for misalignments), random part only.
struct ErrorComponentStatistics {
  std::string component;  // "dknr[2]", "dx", ...
  double requested_rms = 0.0;
  double expected_rms = 0.0;  // of the truncated Gaussian
  double achieved_rms = 0.0;  // over elements x seeds
  double max_abs_over_rms = 0.0;
  uint64_t count = 0;
};

struct ErrorEntrySummary {
  std::string label;
  std::vector<std::string> elements;  // definition names touched
  double cut = 0.0;
  std::vector<ErrorComponentStatistics> components;
};

struct ErrorSeedsOptions {
  uint64_t first_seed = 1;
  int64_t seeds = 1;
  double cut = 0.0;  // > 0: overrides the table's default cut (not the entries' own)
  /// Definitions of a lattice made by split_shared_definitions: copy name -> the original name the
  /// table's "name" and "match" select (each copy draws its own values, keyed by its own name).
  std::map<std::string, std::string> original_names;
};

struct GeneratedVariants {
  std::vector<LatticeVariantSpec> variants;
  std::vector<ErrorEntrySummary> summary;  // seeded errors: one per table entry
  std::vector<std::string> warnings;
  std::string description;
};

/// One variant per seed, named seed_<k>, from `table` applied to `lattice`. The first variant is
/// read back by the variants reader (fusetrack/variants.h), so that what is written also loads. Throws
/// InputError naming the table file, the entry, the element and the field.
GeneratedVariants generate_error_variants(const Lattice& lattice, const ErrorTable& table,
                                          const ErrorSeedsOptions& options);

/// One variant per MAD-X error table (ESAVE / SELECT, FLAG=ERROR TFS: NAME, K0L, K0SL, ..., K20L,
/// K20SL, DX, DY, DS, DPHI, DTHETA, DPSI, ...), named by the file's stem. Rows are matched to
/// definitions by name: exactly, else without a ":N" occurrence suffix, else ignoring case. Rows of
/// zeros are skipped (ESAVE, FULL writes every element); a row with errors that matches no
/// definition is an error naming the file and the line.
GeneratedVariants import_madx_error_tables(const Lattice& lattice, const std::vector<std::string>& paths);

/// The definitions the entries of `table` select (InputError naming the entry when one selects none).
std::vector<uint32_t> error_table_definitions(const Lattice& lattice, const ErrorTable& table);

/// The lattice (fusetrack format) with every definition of `definitions` that the sequence uses more
/// than once replaced by one definition per use, named <name>_<k> (k = 1, 2, ... along the sequence),
/// so that each magnet draws its own errors (a variant changes definitions, and all uses of a
/// definition share them). A name already taken is an InputError naming `file` and the element.
/// `original_names` (optional) receives copy name -> original name, for ErrorSeedsOptions.
nlohmann::ordered_json split_shared_definitions(const Lattice& lattice, const std::vector<uint32_t>& definitions,
                                                const std::string& file,
                                                std::map<std::string, std::string>* original_names = nullptr);

/// The variants file: {"fusetrack_variants": 1, "lattice", "description", "variants"}.
nlohmann::ordered_json variants_document(const std::string& lattice_path, const GeneratedVariants& generated);

}  // namespace ft
