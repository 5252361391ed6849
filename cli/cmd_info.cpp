// fusetrack info: plugins, element types with fields, units and defaults, and devices.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "cli_common.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/nvrtc_compiler.h"

namespace ft::cli {

namespace {

struct InfoArgs {
  CommonOptions common;
  bool fields = true;
  bool markdown = false;
};

/// `|` inside a Markdown table cell must be escaped.
std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out;
}

/// The Markdown table of the built-in element types, written from the registry so that it cannot drift:
/// the types of the built-in plugin only, in registry order.
void print_markdown_types(const ElementRegistry& registry) {
  fmt::print("| type | kind | fields (derived ones left out) | description |\n|---|---|---|---|\n");
  for (const ElementType* t : registry.types()) {
    if (!t->plugin || t->plugin->name() != "builtin") continue;
    std::string fields;
    for (const auto& f : t->fields)
      if (!f.derived)
        fields +=
            (fields.empty() ? "" : ", ") + ("`" + f.name + (f.count > 1 ? fmt::format("[{}]", f.count) : "") + "`");
    fmt::print("| `{}` | {} | {} | {} |\n", t->name, t->is_collective() ? "collective" : (t->thick ? "thick" : "thin"),
               fields, markdown_cell(t->doc));
  }
}

void run_info(const InfoArgs& a) {
  ElementRegistry registry;
  load_plugins(registry, a.common);
  if (a.markdown) {
    print_markdown_types(registry);
    return;
  }
  fmt::print("fusetrack 0.1.0, plugin ABI version {}\n", FT_PLUGIN_ABI_VERSION);
  fmt::print("core library: {}\n", ElementRegistry::core_library_directory());
  fmt::print("plugin search path: ");
  for (size_t i = 0; i < registry.searched_directories().size(); ++i)
    fmt::print("{}{}", i ? ":" : "", registry.searched_directories()[i]);
  fmt::print("\n\nplugins:\n");
  for (const auto& p : registry.plugins()) {
    std::string names;
    for (const ElementType* t : registry.types())
      if (t->plugin.get() == p.get()) names += (names.empty() ? "" : ", ") + t->name;
    fmt::print("  {} (ABI {}): {}\n    types: {}\n", p->name(), p->abi_version(), p->file(), names);
  }
  fmt::print("\nelement types:\n");
  for (const ElementType* t : registry.types()) {
    fmt::print("  {} [{}, {} bytes] {}\n", t->name,
               t->is_collective() ? "collective" : (t->thick ? "thick" : "thin"), t->param_size, t->doc);
    if (!a.fields) continue;
    size_t name_width = 14;
    for (const auto& f : t->fields) name_width = std::max(name_width, f.name.size());
    for (const auto& f : t->fields) {
      // Host-only JSON fields (collective elements) have no numeric default: their doc says it.
      std::string def = f.derived    ? "derived"
                        : f.required ? "required"
                        : f.host_only() ? "optional"
                                        : fmt::format("default {:g}", f.default_value);
      std::string type = f.count > 1 ? fmt::format("{}[{}]", f.type_name(), f.count) : f.type_name();
      fmt::print("      {:<{}} {:<11} [{}] {}; {}\n", f.name, name_width, type, f.unit, def, f.doc);
    }
  }
  fmt::print("\ndevices:\n  cpu: {} OpenMP threads\n", omp_get_max_threads());
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) fmt::print("  gpu: none ({})\n", why);
  for (const GpuInfo& g : list_gpus())
    fmt::print("  gpu {}: {}, sm_{}, {} multiprocessors, {:.1f} GiB\n", g.index, g.name, g.arch, g.multiprocessors,
               static_cast<double>(g.total_memory) / (1024.0 * 1024.0 * 1024.0));
  fmt::print("kernel cache: {}\nNVRTC: {}\n", KernelCompiler::default_cache_dir(), KernelCompiler::nvrtc_version());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "list plugins, element types (fields, units, defaults) and devices");
  cmd->add_flag("--fields,!--no-fields", args->fields, "show the fields of each element type");
  cmd->add_flag("--markdown", args->markdown,
                "print only the Markdown table of the built-in element types");
  add_common_options(*cmd, args->common, false);
  cmd->callback([args] { run_info(*args); });
}

}  // namespace ft::cli
