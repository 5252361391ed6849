// Import of Xsuite line JSON (xtrack Line.to_dict()), in both the current layout
// {"__class__": "Line", "elements": ..., "element_names": ..., "particle_ref": ...} and the older
// {"line": {...}, "particle": {...}} one, into fusetrack's lattice JSON.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ft {

struct XsuiteImportOptions {
  /// Replace element classes fusetrack does not know with markers (and warn) instead of failing.
  bool replace_unknown_with_markers = false;
  /// Receives warnings (replaced elements, ignored fields); may be null.
  std::vector<std::string>* warnings = nullptr;
};

/// True if the document looks like an Xsuite line (either layout).
bool is_xsuite_line(const nlohmann::ordered_json& doc);

/// Converts an Xsuite line to fusetrack's lattice format. Throws InputError naming the file,
/// the element and the field for anything it cannot convert; unknown classes are listed with
/// their counts.
nlohmann::ordered_json xsuite_to_fusetrack(const nlohmann::ordered_json& doc, const std::string& file,
                                           const XsuiteImportOptions& options);

}  // namespace ft
