// fusetrack: particle tracking in circular accelerators, on the CPU or a GPU.
#include <fmt/format.h>

#include <iostream>

#include "cli_common.h"
#include "fusetrack/error.h"

int main(int argc, char** argv) {
  CLI::App app{"fusetrack: particle tracking through circular accelerators (CPU and fused GPU kernels)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fusetrack 0.1.0");
  ft::cli::add_track_command(app);
  ft::cli::add_info_command(app);
  ft::cli::add_bench_command(app);
  ft::cli::add_repro_command(app);
  ft::cli::add_import_command(app);
  ft::cli::add_optics_command(app);
  ft::cli::add_da_command(app);
  ft::cli::add_da_merge_command(app);
  ft::cli::add_codegen_command(app);
  ft::cli::add_collide_command(app);
  ft::cli::add_errors_command(app);
  ft::cli::add_spacecharge_command(app);
  ft::cli::add_momentum_acceptance_command(app);
  ft::cli::add_fma_command(app);
  ft::cli::add_radiation_command(app);
  ft::cli::add_footprint_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return ft::cli::kBadInput;
  } catch (const ft::InputError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return ft::cli::kBadInput;
  } catch (const ft::PluginError& e) {
    fmt::print(stderr, "error: plugin {}\n", e.what());
    return ft::cli::kPluginError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return ft::cli::kFailure;
  }
  return ft::cli::kOk;
}
