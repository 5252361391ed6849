#include "cli_common.h"

#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>

#include "fusetrack/cuda_backend.h"
#include "fusetrack/error.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/session.h"

namespace ft::cli {

void add_cartesian_grid_options(CLI::App& cmd, DaConfig& config, std::vector<double>& x_range,
                                std::vector<double>& y_range, std::string& units) {
  cmd.add_option("--nx", config.nx, "points in x (cartesian)");
  cmd.add_option("--ny", config.ny, "points in y (cartesian)");
  cmd.add_option("--x-range", x_range, "x min max (cartesian)")->expected(2);
  cmd.add_option("--y-range", y_range, "y min max (cartesian)")->expected(2);
  cmd.add_option("--units", units, "amplitude units: m, or sigma (needs --emittance-nx/-ny)")
      ->check(CLI::IsMember({"m", "sigma"}));
  cmd.add_option("--emittance-nx", config.emittance_nx, "normalised horizontal emittance [m]");
  cmd.add_option("--emittance-ny", config.emittance_ny, "normalised vertical emittance [m]");
}

void add_common_options(CLI::App& cmd, CommonOptions& o, bool with_device) {
  cmd.add_option("--plugin", o.plugins, "load an element plugin (.so); repeatable");
  if (with_device) {
    cmd.add_option("--device", o.device, "where to track: auto (GPU if available), cpu or gpu")
        ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
    cmd.add_option("--dispatch", o.dispatch,
                   "GPU kernel form: auto, baked (parameters as constants), switch (parameter table) or staged "
                   "(switch with parameters staged in shared memory)")
        ->check(CLI::IsMember({"auto", "baked", "switch", "staged"}));
    cmd.add_option("--fma", o.fma, "GPU floating-point contraction: off (bitwise CPU reproduction) or on (fast)")
        ->check(CLI::IsMember({"off", "on"}));
    cmd.add_option("--kernel-cache", o.cache_dir, "directory of the compiled-kernel cache")
        ->envname("FUSETRACK_KERNEL_CACHE");
  }
  cmd.add_option("--threads", o.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
}

void load_plugins(ElementRegistry& registry, const CommonOptions& o) {
  // Defaults first: a --plugin that clashes with a built-in type is then the one refused, with
  // an error naming both files, instead of silently displacing the built-in plugin.
  registry.load_default_plugins();
  for (const auto& p : o.plugins) registry.load_plugin(p);
  for (const auto& w : registry.load_warnings()) fmt::print(stderr, "warning: plugin skipped: {}\n", w);
}

FmaMode parse_fma(const std::string& s) { return s == "on" ? FmaMode::On : FmaMode::Off; }

std::unique_ptr<Backend> make_backend(const Lattice& lattice, const CommonOptions& o) {
  BackendChoice choice;
  choice.device = o.device;
  choice.cache_dir = o.cache_dir;
  if (!parse_dispatch(o.dispatch, choice.dispatch))
    throw Error(fmt::format("--dispatch {}: unknown kernel form", o.dispatch));
  std::vector<std::string> notices;
  auto backend = ft::make_backend(lattice, choice, &notices);
  for (const auto& n : notices) fmt::print(stderr, "note: {}\n", n);
  return backend;
}

void check_output_path(const std::string& path, const std::string& option) { ft::check_output_file(path, option); }

namespace {

/// The first Python with matplotlib and numpy (a user's venv may lack them), or "".
std::string plotting_python() {
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (std::system(fmt::format("{} -c 'import matplotlib, numpy' >/dev/null 2>&1", candidate).c_str()) == 0)
      return candidate;
  return "";
}

/// `s` as one single-quoted shell word.
std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The directory that holds the Python package fusetrack with its plots, found from libfusetrack's
/// directory: the installed package, else the build tree's; "" when neither is there.
std::string plot_package_parent() {
  const std::filesystem::path library = ElementRegistry::core_library_directory();
  for (const char* relative : {FUSETRACK_INSTALLED_PYTHON_FROM_LIBRARY, FUSETRACK_BUILD_PYTHON_FROM_LIBRARY}) {
    if (*relative == '\0') continue;
    const std::filesystem::path parent = (library / relative).lexically_normal();
    if (std::filesystem::exists(parent / "fusetrack" / "plot" / "__init__.py")) return parent.string();
  }
  return "";
}

}  // namespace

bool run_plot_script(const std::string& module, const std::vector<std::string>& arguments, const std::string& what) {
  const std::string python = plotting_python();
  if (python.empty()) {
    fmt::print(stderr, "warning: no python3 with matplotlib and numpy found; {} not written\n", what);
    return false;
  }
  const std::string package_parent = plot_package_parent();
  if (package_parent.empty()) {
    fmt::print(stderr, "warning: the Python package fusetrack (its plots) was not found from {}; {} not written\n",
               ElementRegistry::core_library_directory(), what);
    return false;
  }
  std::string cmd = "PYTHONPATH=" + shell_quoted(package_parent) + "${PYTHONPATH:+:$PYTHONPATH} " + python +
                    " -m fusetrack.plot." + module;
  for (const std::string& a : arguments) cmd += " " + shell_quoted(a);
  if (std::system(cmd.c_str()) != 0) {
    fmt::print(stderr, "warning: plotting failed ({}); {} not written\n", cmd, what);
    return false;
  }
  return true;
}

int threads_per_rank(const CommonOptions& o) {
  if (o.threads > 0) return o.threads;
  Communicator& comm = world();
  if (comm.local_size() <= 1) return 0;  // OpenMP's default
  return std::max(1, omp_get_num_procs() / comm.local_size());
}

}  // namespace ft::cli
