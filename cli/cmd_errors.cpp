// fusetrack errors LATTICE (--table errors.json --seeds N | --madx-table a.tfs ...) -o variants.json:
// seeded random magnet errors (MAD-X EFCOMP / EALIGN as an error table) or errors exported by MAD-X,
// written as a variants file of the lattice (fusetrack/lattice_errors.h; docs: Dynamic aperture, "Error seeds"). Prints
// the elements each entry touched and, per component, the rms drawn over all elements and seeds.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_errors.h"
#include "fusetrack/output_files.h"

namespace ft::cli {

namespace {

struct ErrorsArgs {
  CommonOptions common;
  std::string lattice;
  std::string table;
  std::vector<std::string> madx_tables;
  int64_t seeds = 0;
  bool seeds_given = false;
  uint64_t first_seed = 1;
  double cut = 0.0;
  std::string split_lattice;  // --split-lattice OUT.json
  std::string output;
};

/// The lattice path as the variants file names it: relative to the variants file's directory (as a
/// lattice names its plugins) when the lattice is in that directory or below it, else absolute.
std::string lattice_path_for(const std::string& lattice, const std::string& output) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path from = fs::absolute(fs::path(output), ec).parent_path();
  const fs::path relative = fs::relative(fs::absolute(lattice, ec), from, ec);
  const bool climbs = !relative.empty() && *relative.begin() == "..";
  return ec || relative.empty() || climbs ? fs::absolute(lattice).lexically_normal().string()
                                          : relative.generic_string();
}

/// The variants file as text: one line per element change (a 60-seed file of a ring with 10^3
/// magnets is then ~10^5 short lines, a third of the size of an indented dump).
std::string variants_text(const nlohmann::ordered_json& doc) {
  std::string text = "{\n";
  for (const auto& [key, value] : doc.items()) {
    if (key == "variants") continue;
    text += fmt::format(" {}: {},\n", nlohmann::ordered_json(key).dump(), value.dump());
  }
  text += " \"variants\": [";
  const nlohmann::ordered_json& variants = doc.at("variants");
  for (size_t v = 0; v < variants.size(); ++v) {
    text += fmt::format("{}\n  {{\"name\": {}, \"elements\": [", v ? "," : "", variants[v].at("name").dump());
    const nlohmann::ordered_json& elements = variants[v].at("elements");
    for (size_t e = 0; e < elements.size(); ++e) text += fmt::format("{}\n   {}", e ? "," : "", elements[e].dump());
    text += elements.empty() ? "]}" : "\n  ]}";
  }
  text += "\n ]\n}\n";
  return text;
}

std::string short_list(const std::vector<std::string>& names) {
  const size_t shown = std::min<size_t>(names.size(), 6);
  std::string s;
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > shown) s += fmt::format(", ... ({} more)", names.size() - shown);
  return s;
}

void run_errors(const ErrorsArgs& a) {
  if (a.table.empty() == a.madx_tables.empty())
    throw InputError(InputLocation("fusetrack errors"), "give either --table (seeded errors) or --madx-table (import)");
  if (!a.madx_tables.empty() && (a.seeds_given || a.cut != 0.0 || a.first_seed != 1))
    throw InputError(InputLocation("fusetrack errors"),
                     "--seeds, --first-seed and --cut apply to --table; a MAD-X table holds the errors of one seed");
  if (!a.table.empty() && !a.seeds_given)
    throw InputError(InputLocation("--seeds"), "--table needs --seeds N (the number of error seeds)");
  if (!a.split_lattice.empty() && a.table.empty())
    throw InputError(InputLocation("--split-lattice"), "--split-lattice applies to --table");
  check_output_file(a.output, "--output");
  if (!a.split_lattice.empty()) check_output_file(a.split_lattice, "--split-lattice");
  ElementRegistry registry;
  load_plugins(registry, a.common);
  Lattice lattice = load_lattice(a.lattice, registry);
  std::string lattice_file = a.lattice;

  GeneratedVariants generated;
  if (!a.table.empty()) {
    const ErrorTable table = read_error_table(a.table);
    ErrorSeedsOptions options;
    options.seeds = a.seeds;
    options.first_seed = a.first_seed;
    options.cut = a.cut;
    if (!a.split_lattice.empty()) {
      // Every magnet its own definition, so that each draws its own errors; the variants refer to it.
      const nlohmann::ordered_json split = split_shared_definitions(lattice, error_table_definitions(lattice, table),
                                                                    a.lattice, &options.original_names);
      lattice = lattice_from_json(split, a.split_lattice, registry);
      write_file_atomically(a.split_lattice, split.dump(1) + "\n");
      lattice_file = a.split_lattice;
      fmt::print("split     {} -> {} ({} definitions, {} of them one use each of a shared one)\n", a.lattice,
                 a.split_lattice, lattice.definitions().size(), options.original_names.size());
    }
    generated = generate_error_variants(lattice, table, options);
  } else {
    generated = import_madx_error_tables(lattice, a.madx_tables);
  }
  for (const std::string& w : generated.warnings) fmt::print(stderr, "warning: {}\n", w);
  const nlohmann::ordered_json doc = variants_document(lattice_path_for(lattice_file, a.output), generated);
  write_file_atomically(a.output, variants_text(doc));

  fmt::print("lattice   {} ({} definitions)\n", lattice_file, lattice.definitions().size());
  fmt::print("variants  {} ({}{})\n", a.output, generated.variants.size(),
             generated.variants.empty()
                 ? ""
                 : fmt::format(": {} ... {}", generated.variants.front().name, generated.variants.back().name));
  for (const ErrorEntrySummary& entry : generated.summary) {
    fmt::print("{}: {} elements{}: {}\n", entry.label, entry.elements.size(),
               entry.cut > 0.0 ? fmt::format(", cut {} sigma", entry.cut) : std::string(), short_list(entry.elements));
    if (entry.components.empty()) continue;
    fmt::print("    {:<10} {:>12} {:>14} {:>12} {:>10} {:>9}\n", "random", "rms asked", "rms truncated", "rms drawn",
               "max/rms", "draws");
    for (const ErrorComponentStatistics& c : entry.components)
      fmt::print("    {:<10} {:>12.4g} {:>14.4g} {:>12.4g} {:>10.3f} {:>9}\n", c.component, c.requested_rms,
                 c.expected_rms, c.achieved_rms, c.max_abs_over_rms, c.count);
  }
  if (!generated.warnings.empty()) fmt::print("warnings  {} (on stderr)\n", generated.warnings.size());
}

}  // namespace

void add_errors_command(CLI::App& app) {
  auto args = std::make_shared<ErrorsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "errors",
      "seeded random magnet errors (MAD-X EFCOMP/EALIGN as an error table) or errors exported by MAD-X (ESAVE TFS), "
      "written as a variants file of the lattice (docs: Dynamic aperture, Error seeds)");
  cmd->add_option("lattice", args->lattice, "base lattice file")->required();
  cmd->add_option("--table", args->table, "error table (JSON; docs: Dynamic aperture, Error table)");
  cmd->add_option("--madx-table", args->madx_tables,
                  "MAD-X error tables (ESAVE / SELECT,FLAG=ERROR TFS); one variant per file")
      ->expected(1, -1);
  CLI::Option* seeds = cmd->add_option("--seeds", args->seeds, "number of error seeds (variants seed_<k>)");
  cmd->add_option("--first-seed", args->first_seed, "first seed (default 1)");
  cmd->add_option("--cut", args->cut,
                  "truncation of the Gaussians [sigma] for entries without their own (default: the table's, else 3)");
  cmd->add_option("--split-lattice", args->split_lattice,
                  "write the lattice with one definition per use of every definition the table selects (qf -> "
                  "qf_1, qf_2, ... along the sequence), so that each magnet draws its own errors; the variants "
                  "refer to it");
  cmd->add_option("-o,--output", args->output, "variants file to write (JSON)")->required();
  cmd->add_option("--plugin", args->common.plugins, "load an element plugin (.so); repeatable");
  cmd->callback([args, seeds] {
    args->seeds_given = seeds->count() > 0;
    run_errors(*args);
  });
}

}  // namespace ft::cli
