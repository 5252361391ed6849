// fusetrack import-xsuite IN.json -o OUT.json: convert an Xsuite line (xtrack Line.to_dict() JSON)
// to a fusetrack lattice file, check that it loads, and print a summary. Warnings go to stderr.
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/output_files.h"
#include "fusetrack/error.h"
#include "fusetrack/xsuite_import.h"

namespace ft::cli {

namespace {

struct ImportArgs {
  CommonOptions common;
  std::string input;
  std::string output;
  bool replace_unknown = false;
};

void run_import(const ImportArgs& a) {
  check_output_file(a.output, "--output");
  const nlohmann::ordered_json doc = parse_json_file(a.input);
  if (!is_xsuite_line(doc))
    throw InputError(InputLocation{a.input},
                     "not an Xsuite line: expected \"elements\" and \"element_names\" (xtrack Line.to_dict()), or "
                     "the older {\"line\": ..., \"particle\": ...} layout");
  std::vector<std::string> warnings;
  XsuiteImportOptions options;
  options.replace_unknown_with_markers = a.replace_unknown;
  options.warnings = &warnings;
  const nlohmann::ordered_json converted = xsuite_to_fusetrack(doc, a.input, options);
  for (const std::string& w : warnings) fmt::print(stderr, "warning: {}\n", w);

  // Load the result before writing it, so that a file that is written also loads.
  ElementRegistry registry;
  load_plugins(registry, a.common);
  const Lattice lattice = lattice_from_json(converted, a.input, registry);

  write_file_atomically(a.output, converted.dump(2) + "\n");

  std::map<std::string, size_t> counts;
  for (const auto& entry : lattice.sequence()) ++counts[lattice.definitions()[entry.definition].type->name];
  const ReferenceParticle& r = lattice.reference();
  const auto& names = doc.contains("element_names") ? doc.at("element_names") : doc.at("line").at("element_names");
  fmt::print("input         {} (Xsuite line, {} elements)\n", a.input, names.size());
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
      app.add_subcommand("import-xsuite", "convert an Xsuite line JSON (xtrack Line.to_dict()) to a fusetrack lattice");
  cmd->add_option("input", args->input, "Xsuite line JSON file")->required();
  cmd->add_option("-o,--output", args->output, "fusetrack lattice file to write (JSON)")->required();
  cmd->add_flag("--replace-unknown-with-markers", args->replace_unknown,
                "replace Xsuite element classes fusetrack does not know by markers (with a warning) instead of "
                "failing; this changes the physics");
  cmd->add_option("--plugin", args->common.plugins,
                  "load an element plugin (.so) to check the result with; repeatable");
  cmd->callback([args] { run_import(*args); });
}

}  // namespace ft::cli
