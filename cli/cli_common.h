// Shared pieces of the fusetrack command line: plugin loading, backend choice and exit codes.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/registry.h"
#include "fusetrack/tracker.h"

namespace ft::cli {

/// Exit codes of the fusetrack command (documented in docs/pages/user/tracking.md).
enum ExitCode : int {
  kOk = 0,
  kFailure = 1,      // a runtime failure (tracking error, I/O)
  kBadInput = 2,     // bad command line, lattice, particles or options
  kPluginError = 3,  // a plugin could not be loaded
  kMismatch = 4,     // repro: CPU and GPU differ where they must not
};

/// Options every subcommand that reads a lattice shares.
struct CommonOptions {
  std::vector<std::string> plugins;  // --plugin PATH (repeatable)
  std::string device = "auto";       // auto | cpu | gpu
  std::string fma = "off";           // off | on
  int threads = 0;
  std::string cache_dir;          // kernel cache; empty: default
  std::string dispatch = "auto";  // GPU kernel form: auto | baked | switch | staged
};

void add_common_options(CLI::App& cmd, CommonOptions& o, bool with_device = true);

/// Loads --plugin files, then the default plugin path. Plugin load warnings go to stderr.
void load_plugins(ElementRegistry& registry, const CommonOptions& o);

FmaMode parse_fma(const std::string& s);

/// A backend as chosen by --device: the GPU when asked or available (auto), else the CPU with a
/// one-line notice on stderr explaining why.
std::unique_ptr<Backend> make_backend(const Lattice& lattice, const CommonOptions& o);

/// Fails early (InputError naming the option) when `path` cannot be written: its directory does
/// not exist or it is a directory; a long run is not lost at its end.
void check_output_path(const std::string& path, const std::string& option);

/// Runs the plot module fusetrack.plot.`module` of the Python package (`python3 -m`, the package found
/// installed or in the build tree from libfusetrack's directory) with `arguments` (each passed as one
/// shell word) by the first python3 with matplotlib and numpy. Returns true when it ran; otherwise prints
/// a warning naming `what` (the plots that are not written) and returns false.
bool run_plot_script(const std::string& module, const std::vector<std::string>& arguments, const std::string& what);

/// CPU threads for this process: --threads, or the node's cores shared among its MPI ranks.
int threads_per_rank(const CommonOptions& o);

// Subcommands, one file each.
void add_track_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_repro_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_optics_command(CLI::App& app);
void add_da_command(CLI::App& app);
void add_da_merge_command(CLI::App& app);
void add_codegen_command(CLI::App& app);
void add_collide_command(CLI::App& app);
void add_errors_command(CLI::App& app);
void add_spacecharge_command(CLI::App& app);
void add_momentum_acceptance_command(CLI::App& app);
void add_fma_command(CLI::App& app);
void add_radiation_command(CLI::App& app);
void add_footprint_command(CLI::App& app);
/// The tune-footprint command (cmd_footprint.cpp) as the subcommand `name` of `parent` (also `spacecharge footprint`).
CLI::App* add_footprint_subcommand(CLI::App& parent, const std::string& name, const std::string& description);

}  // namespace ft::cli
