// Fuzz target: the Xsuite line importer (both layouts, with and without replacing unknown classes
// by markers), followed by loading the converted lattice as `fusetrack import-xsuite` and `track` do.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "fusetrack/lattice.h"
#include "fusetrack/xsuite_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the importer's option; the rest is the file.
  const std::string path = ft::fuzz::write_input(data + 1, size - 1, "line.json");
  try {
    const nlohmann::ordered_json doc = ft::parse_json_file(path);
    std::vector<std::string> warnings;
    ft::XsuiteImportOptions options;
    options.replace_unknown_with_markers = (data[0] & 1) != 0;
    options.warnings = &warnings;
    (void)ft::is_xsuite_line(doc);
    const nlohmann::ordered_json converted = ft::xsuite_to_fusetrack(doc, path, options);
    (void)ft::lattice_from_json(converted, path, ft::fuzz::registry());
  } catch (const ft::Error&) {
  }
  return 0;
}
