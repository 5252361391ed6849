// Lattice variants: several versions of one lattice that share its element sequence and differ in
// field values and misalignments (error seeds, knob scans). One run tracks them all: every particle
// carries its variant's index, and the backends read that variant's parameter table. The result of
// each variant is bitwise the result of running that variant alone.
//
// A variants file (JSON) describes variants of a base lattice:
//   {"fusetrack_variants": 1,
//    "variants": [{"name": "seed_1",
//                  "elements": [{"name": "QF1", "set": {"k1": 0.31}, "add": {"knl": [0, 0, 1e-4]}},
//                               {"match": "MO\\..*", "set": {"shift_x": 1e-4}}]}],
//    "scans": [{"match": "MO.*", "field": "k3", "from": -2e3, "to": 2e3, "steps": 11}]}
// Each variant starts from the base; its entries apply in order. "name" is an element definition's
// exact name, "match" an ECMAScript regular expression that must match whole names (and at least
// one); "NAME[k]" names the k-th instance (from 1, as MAD-X counts) of a definition that several
// sequence entries share, which then gets a definition of its own in every variant (per-magnet
// errors on a lattice written with shared definitions). "set" gives values, "add" increments; arrays are lists whose entry k applies to index k.
// Fields are the element type's input fields or a transformation field (shift_x, ..., rot_s_rad).
// "scans" (optional) are knobs: each variant (or the base, without "variants") is repeated for every
// combination of the scans' values ("from"/"to"/"steps" or "values"; "index" for an array entry;
// "mode": "set" (default) or "add"), named "<variant>/<field>=<value>".
#pragma once
#include <set>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/registry.h"

namespace ft {

struct LatticeVariants {
  std::vector<std::string> names;
  std::vector<Lattice> lattices;  // prepared; every one has the sequence of lattices[0]

  size_t size() const { return lattices.size(); }
  /// The lattices in order (what Backend::set_variants takes).
  std::vector<const Lattice*> pointers() const;
};

/// The variants a front end was given: each path a variants file (its variants, applied to `base`)
/// or a lattice file (one variant, named by the file), in order. No paths: the base alone, named
/// "base". Throws InputError naming the file, variant, element and field of anything wrong, and
/// refuses a lattice file whose sequence differs from the base's with the first difference.
LatticeVariants load_variants(const Lattice& base, const std::vector<std::string>& paths, ElementRegistry& registry);

/// The variants of a variants document (already parsed; `file` names it in errors) applied to `base`.
LatticeVariants variants_from_json(const Lattice& base, const nlohmann::ordered_json& doc, const std::string& file);

/// Throws InputError (naming `file`) unless `other` has the element sequence of `base`: the same
/// definitions (names, types) in the same order of the sequence. Field values may differ.
void check_same_sequence(const Lattice& base, const Lattice& other, const std::string& file);

/// `lattice` with each instance named "NAME[k]" in `names` (see above) given a definition of its
/// own (a copy of NAME's) called "NAME[k]"; names that are not such instances are ignored.
Lattice with_own_instances(const Lattice& lattice, const std::set<std::string>& names);

/// A fingerprint of the variants' parameters (names, field bytes, transformations), for checkpoints.
std::string variants_fingerprint(const LatticeVariants& variants);

}  // namespace ft
