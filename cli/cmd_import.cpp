// fusetrack import IN -o OUT.json: convert an Xsuite line (xtrack Line.to_dict() JSON) or a trackcpp /
// AT flat lattice file (detected from the content) to a fusetrack lattice file, check that it loads,
// and print a summary. Warnings go to stderr. `import-xsuite` is the same command.
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/output_files.h"

namespace ft::cli {

namespace {

struct ImportArgs {
  CommonOptions common;
  std::string input;
  std::string output;
  bool replace_unknown = false;
  bool ignore_radiation = false;
  std::vector<std::string> trackcpp_header;  // KEY=VALUE
};

/// The text of the input file (for the format detection and the trackcpp reader).
std::string read_input_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(InputLocation{path}, "cannot open the file for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

void run_import(const ImportArgs& a) {
  check_output_file(a.output, "--output");
  // A JSON document starts with '{'; anything else that looks like a trackcpp flat file is one.
  const std::string text = read_input_text(a.input);
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool json_input = first != std::string::npos && text[first] == '{';
  if (!json_input && !is_trackcpp_flat_file(text))
    throw InputError(InputLocation{a.input},
                     "neither an Xsuite line JSON (a JSON object) nor a trackcpp flat file (header lines '% key "
                     "value' and element blocks starting with 'fam_name NAME')");
  if (json_input && a.ignore_radiation)
    throw InputError(InputLocation{a.input}, "--ignore-radiation applies to trackcpp flat files only");
  if (json_input && !a.trackcpp_header.empty())
    throw InputError(InputLocation{a.input}, "--trackcpp-header applies to trackcpp flat files only");
  if (!json_input && a.replace_unknown)
    throw InputError(InputLocation{a.input}, "--replace-unknown-with-markers applies to Xsuite lines only");
  std::vector<std::string> warnings;
  LatticeFileOptions options;
  options.xsuite.replace_unknown_with_markers = a.replace_unknown;
  options.xsuite.warnings = &warnings;
  options.trackcpp.ignore_radiation = a.ignore_radiation;
  for (const std::string& assignment : a.trackcpp_header)
    set_trackcpp_header_value(options.trackcpp.header, assignment, "--trackcpp-header");
  options.trackcpp.warnings = &warnings;
  const LatticeDocument imported = lattice_document_from_text(text, a.input, options);
  if (imported.format == LatticeFileFormat::fusetrack)
    throw InputError(InputLocation{a.input},
                     "not an Xsuite line: expected \"elements\" and \"element_names\" (xtrack Line.to_dict()), or "
                     "the older {\"line\": ..., \"particle\": ...} layout");
  const nlohmann::ordered_json& converted = imported.document;
  const std::string input_kind = imported.format == LatticeFileFormat::xsuite_line
                                     ? fmt::format("Xsuite line, {} elements", imported.source_elements)
                                     : "trackcpp flat file";
  for (const std::string& w : warnings) fmt::print(stderr, "warning: {}\n", w);

  // Load the result before writing it, so that a file that is written also loads.
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = lattice_from_json(converted, a.input, registry);

  write_file_atomically(a.output, converted.dump(2) + "\n");

  std::map<std::string, size_t> counts;
  for (const auto& entry : lattice.sequence()) ++counts[lattice.definitions()[entry.definition].type->name];
  const ReferenceParticle& r = lattice.reference();
  fmt::print("input         {} ({})\n", a.input, input_kind);
  fmt::print("output        {} ({} elements, {} definitions)\n", a.output, lattice.sequence().size(),
             lattice.definitions().size());
  std::string types;
  for (const auto& [name, n] : counts) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", name, n);
  fmt::print("types         {}\n", types);
  fmt::print("circumference {:.10g} m\n", lattice.circumference());
  fmt::print("reference     mass0 {:.11g} eV, q0 {:g}, p0c {:.11g} eV, beta0 {:.12f}, gamma0 {:.9g}\n", r.mass0, r.q0,
             r.p0c, r.beta0(), r.gamma0());
  fmt::print("aperture      global |x| <= {:g} m, |y| <= {:g} m\n", lattice.limits().x, lattice.limits().y);
  if (!warnings.empty()) fmt::print("warnings      {} (on stderr)\n", warnings.size());
}

}  // namespace

void add_import_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd =
      app.add_subcommand("import",
                         "convert an Xsuite line JSON (xtrack Line.to_dict()) or a trackcpp / AT flat lattice file "
                         "(the format is detected) to a fusetrack lattice");
  cmd->alias("import-xsuite");
  cmd->add_option("input", args->input, "Xsuite line JSON file or trackcpp flat file")->required();
  cmd->add_option("-o,--output", args->output, "fusetrack lattice file to write (JSON)")->required();
  cmd->add_flag("--replace-unknown-with-markers", args->replace_unknown,
                "replace Xsuite element classes fusetrack does not know by markers (with a warning) instead of "
                "failing; this changes the physics");
  cmd->add_flag("--ignore-radiation", args->ignore_radiation,
                "trackcpp files only: import a file with radiation_on set without radiation (otherwise radiation_on 1 "
                "imports as \"radiation\": \"mean\", 2 as \"quantum\")");
  cmd->add_option("--trackcpp-header", args->trackcpp_header,
                  "trackcpp files only: use KEY=VALUE instead of the file's header line '% KEY ...' (cavity_on, "
                  "vchamber_on, radiation_on, energy, harmonic_number); repeatable")
      ->type_name("KEY=VALUE");
  cmd->add_option("--plugin", args->common.plugins,
                  "load an element plugin (.so) to check the result with; repeatable");
  cmd->callback([args] { run_import(*args); });
}

}  // namespace ft::cli
