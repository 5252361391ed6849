// Reading a lattice file in any format fusetrack reads. Loading goes one way: the format is told
// apart by the content, the importer of that format writes a fusetrack lattice document, and the
// one parser (lattice_from_json) builds the Lattice.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "fusetrack/lattice.h"
#include "fusetrack/trackcpp_import.h"
#include "fusetrack/xsuite_import.h"

namespace ft {

enum class LatticeFileFormat { fusetrack, xsuite_line, trackcpp_flat_file };

/// The importers' options, each used for files of its format.
struct LatticeFileOptions {
  XsuiteImportOptions xsuite;
  TrackcppImportOptions trackcpp;
};

/// A lattice file as a fusetrack document.
struct LatticeDocument {
  LatticeFileFormat format = LatticeFileFormat::fusetrack;
  nlohmann::ordered_json document;
  size_t source_elements = 0;  // elements of the file as its format counts them (element_names, fam_name blocks)
};

/// The format of a file's text: a JSON object (an Xsuite line or fusetrack's own format, told apart
/// once parsed) or a trackcpp flat file; a text that is neither counts as JSON (its parse error
/// says where).
bool looks_like_json(const std::string& text);

/// Reads `path` once, detects its format and converts it to a fusetrack document.
LatticeDocument read_lattice_document(const std::string& path, const LatticeFileOptions& options);

/// read_lattice_document for a file's text already read (`path` names it in messages).
LatticeDocument lattice_document_from_text(const std::string& text, const std::string& path,
                                           const LatticeFileOptions& options);

/// load_lattice with the importers' options (header values of trackcpp files, unknown Xsuite
/// classes as markers, the converters' warnings).
Lattice load_lattice(const std::string& path, ElementRegistry& registry, const LatticeFileOptions& options);

}  // namespace ft
