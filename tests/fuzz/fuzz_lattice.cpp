// Fuzz target: the lattice loader (JSON parsing with its error locations, lines and repeats,
// element definitions and field validation, prepare()), for fusetrack lattices and Xsuite lines
// as `fusetrack track LATTICE` loads them.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "fusetrack/lattice.h"
#include "fusetrack/xsuite_import.h"

namespace {

/// Plugin files named by a fuzzed lattice would be loaded and run: they are replaced by names in the
/// scratch directory, where no plugin exists (the error path is still exercised).
void keep_plugins_in_scratch(nlohmann::ordered_json& doc) {
  if (!doc.is_object() || !doc.contains("plugins") || !doc["plugins"].is_array()) return;
  for (auto& p : doc["plugins"])
    if (p.is_string()) p = "no_such_plugin_" + std::to_string(p.get_ref<const std::string&>().size()) + ".so";
}

/// Sequences up to the loader's limit of 10^8 passes are valid and take seconds and gigabytes to
/// build; the limit itself is tested in tests/input/test_lattice_scale.cpp. Here repeats above 1000
/// are left to the parser alone.
bool has_large_repeat(const nlohmann::ordered_json& v) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "repeat" && it.value().is_number() && !(it.value().get<double>() <= 1000)) return true;
      if (has_large_repeat(it.value())) return true;
    }
  } else if (v.is_array()) {
    for (const auto& e : v)
      if (has_large_repeat(e)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ft::fuzz::write_input(data, size, "lattice.json");
  try {
    nlohmann::ordered_json doc = ft::parse_json_file(path);
    keep_plugins_in_scratch(doc);
    if (has_large_repeat(doc)) return 0;
    const ft::Lattice lattice =
        ft::is_xsuite_line(doc)
            ? ft::lattice_from_json(ft::xsuite_to_fusetrack(doc, path, ft::XsuiteImportOptions{}), path,
                                    ft::fuzz::registry())
            : ft::lattice_from_json(doc, path, ft::fuzz::registry());
    (void)ft::lattice_to_json(lattice);
  } catch (const ft::Error&) {
    // A clear error: the expected outcome of bad input.
  }
  return 0;
}
