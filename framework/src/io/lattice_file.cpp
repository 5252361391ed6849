// load_lattice: a lattice file in any format fusetrack reads, told apart by its content. Kept
// apart from lattice.cpp so that the importers depend on the lattice, not the other way round.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/trackcpp_import.h"
#include "fusetrack/xsuite_import.h"

namespace ft {

Lattice load_lattice(const std::string& path, ElementRegistry& registry) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(InputLocation{path}, "cannot open file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A JSON document starts with '{'; a trackcpp / AT flat file with header lines or fam_name.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if ((first == std::string::npos || text[first] != '{') && is_trackcpp_flat_file(text))
    return lattice_from_json(trackcpp_to_fusetrack(text, path, TrackcppImportOptions{}), path, registry);
  const auto doc = parse_json_file(path);
  if (is_xsuite_line(doc)) return lattice_from_json(xsuite_to_fusetrack(doc, path, XsuiteImportOptions{}), path, registry);
  return lattice_from_json(doc, path, registry);
}

}  // namespace ft
