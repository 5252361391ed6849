#include "fusetrack/xsuite_import.h"

#include <nlohmann/json.hpp>

#include "fusetrack/error.h"

namespace ft {

bool is_xsuite_line(const nlohmann::ordered_json& doc) {
  return doc.is_object() && (doc.contains("element_names") || (doc.contains("line") && doc.contains("particle")));
}

nlohmann::ordered_json xsuite_to_fusetrack(const nlohmann::ordered_json&, const std::string& file,
                                           const XsuiteImportOptions&) {
  throw InputError(InputLocation{file}, "Xsuite import is not available yet");
}

}  // namespace ft
