// Bad plugins: each failure is an ft::Error naming the plugin file and the reason, nothing crashes,
// nothing of the bad plugin is registered, and the other plugins stay usable afterwards.
// Fixtures: tests/plugins/fixtures (built by tests/plugins/CMakeLists.txt).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fusetrack/codegen.h"
#include "fusetrack/nvrtc_compiler.h"
#include "plugins/plugin_test_support.h"
#include "support/paths.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_plugin_errors.
namespace test_plugin_errors {

using namespace ft;
using ft::plugin_test::example_plugin;
using ft::plugin_test::fixture;
using ft::plugin_test::registry_with;
namespace fs = std::filesystem;

namespace {

std::string canonical(const std::string& path) { return fs::weakly_canonical(path).string(); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Loads `path` and returns the PluginError; fails the test if loading succeeds or throws anything else.
PluginError load_error(ElementRegistry& registry, const std::string& path) {
  try {
    registry.load_plugin(path);
  } catch (const PluginError& e) {
    return e;
  }
  FAIL("loading " << path << " did not throw a PluginError");
  return PluginError("", "");
}

void check_names_file(const PluginError& e, const std::string& path) {
  CAPTURE(e.what());
  CHECK(e.file() == canonical(path));
  CHECK(std::string(e.what()).rfind(canonical(path) + ": ", 0) == 0);  // the message starts with the file
}

ReferenceParticle protons_2gev() { return ReferenceParticle{938272088.16, 1.0, 2e9}; }

/// The registry still works: built-in types are there and tracking through them and through a good
/// plugin (the tutorial's KickX) gives the expected numbers.
void check_still_usable(ElementRegistry& registry) {
  const size_t types_before = registry.types().size();
  if (!registry.find("KickX")) registry.load_plugin(example_plugin("tutorial"));
  REQUIRE(registry.find("KickX") != nullptr);
  REQUIRE(registry.find("Drift") != nullptr);
  CHECK(registry.types().size() >= types_before);
  Lattice lattice(protons_2gev());
  const InputLocation at("test");
  lattice.append(lattice.define("kick", registry.get("KickX", at), {{"kick", 3e-4}}, at));
  lattice.append(lattice.define("drift", registry.get("Drift", at), {{"length", 2.0}}, at));
  lattice.prepare();
  Particles p(1, lattice.reference().beta0());
  p.set(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  ft::plugin_test::track_cpu(lattice, p, 2);
  CHECK(p.state[0] > 0);
  CHECK(p.px[0] == 3e-4 + 3e-4);
  CHECK(p.x[0] == 3e-4 * 2.0 + (3e-4 + 3e-4) * 2.0);  // delta = 0: rpp == 1, x += px L
}

}  // namespace

TEST_CASE("a plugin file that is not a shared library") {
  auto registry = registry_with();
  const size_t n_types = registry->types().size();

  SUBCASE("text file") {
    const std::string path = (ft::test::temp_dir("plugin_text") / "fusetrack_plugin_text.so").string();
    std::ofstream(path) << "this is a text file, not an ELF shared library\n";
    const PluginError e = load_error(*registry, path);
    check_names_file(e, path);
    CHECK(contains(e.what(), "is not a shared library (no ELF header)"));
  }
  SUBCASE("truncated ELF file") {
    // The first 64 bytes of a real plugin: a valid ELF header, nothing behind it.
    const std::string path = (ft::test::temp_dir("plugin_truncated") / "fusetrack_plugin_truncated.so").string();
    {
      std::ifstream in(example_plugin("tutorial"), std::ios::binary);
      char header[64];
      in.read(header, sizeof header);
      REQUIRE(in.gcount() == 64);
      std::ofstream(path, std::ios::binary).write(header, sizeof header);
    }
    const PluginError e = load_error(*registry, path);
    check_names_file(e, path);
    CHECK(contains(e.what(), "cannot be loaded as a shared library: "));
  }
  SUBCASE("missing file") {
    const std::string path = (ft::test::temp_dir("plugin_missing") / "fusetrack_plugin_missing.so").string();
    const PluginError e = load_error(*registry, path);
    check_names_file(e, path);
    CHECK(contains(e.what(), "plugin file does not exist"));
  }
  CHECK(registry->types().size() == n_types);
  check_still_usable(*registry);
}

TEST_CASE("a shared library without the entry point") {
  auto registry = registry_with();
  const PluginError e = load_error(*registry, fixture("no_entry"));
  check_names_file(e, fixture("no_entry"));
  CHECK(contains(e.what(), "is not a fusetrack plugin: it does not export the entry point 'fusetrack_plugin_entry'"));
  CHECK(registry->plugins().size() == 1);
  check_still_usable(*registry);
}

TEST_CASE("a plugin built for another ABI version") {
  auto registry = registry_with();
  const PluginError e = load_error(*registry, fixture("abi99"));
  check_names_file(e, fixture("abi99"));
  CHECK(contains(e.what(), fmt::format("plugin ABI version 99 does not match this fusetrack's ABI version {}",
                                       FT_PLUGIN_ABI_VERSION)));
  CHECK(contains(e.what(), "rebuild the plugin"));
  CHECK(registry->find("Abi99Kick") == nullptr);
  // Loading it again fails again (the failure is not cached as a success).
  CHECK(contains(load_error(*registry, fixture("abi99")).what(), "ABI version 99"));
  check_still_usable(*registry);
}

TEST_CASE("two plugins define the same element type name") {
  auto registry = registry_with();
  const ElementType* drift = registry->find("Drift");
  REQUIRE(drift != nullptr);
  const std::string builtin_file = drift->plugin->file();

  const PluginError e = load_error(*registry, fixture("duplicate"));
  check_names_file(e, fixture("duplicate"));
  CHECK(contains(e.what(), "element type 'Drift' is already defined by plugin " + builtin_file));
  // Nothing of the refused plugin is registered, not even its unique type; Drift is still the built-in one.
  CHECK(registry->find("DuplicateOnly") == nullptr);
  CHECK(registry->find("Drift") == drift);
  CHECK(registry->find("Drift")->plugin->file() == builtin_file);
  check_still_usable(*registry);

  SUBCASE("the clash is reported whichever plugin comes second") {
    ElementRegistry reversed;
    reversed.load_plugin(fixture("duplicate"));
    REQUIRE(reversed.find("DuplicateOnly") != nullptr);
    const PluginError e2 = load_error(reversed, builtin_file);
    check_names_file(e2, builtin_file);
    CHECK(contains(e2.what(), "element type 'Drift' is already defined by plugin " + canonical(fixture("duplicate"))));
    CHECK(reversed.find("Multipole") == nullptr);  // the whole second plugin is refused
    CHECK(reversed.find("DuplicateOnly") != nullptr);
  }
}

TEST_CASE("a descriptor whose field table does not match the struct") {
  auto registry = registry_with();
  SUBCASE("fields cover less than the struct") {
    const PluginError e = load_error(*registry, fixture("lying_size"));
    check_names_file(e, fixture("lying_size"));
    CHECK(contains(e.what(), "element type 'Lying': field table does not match the struct size: the fields cover 8 "
                             "bytes but the struct has 16"));
  }
  SUBCASE("a field beyond the end of the struct") {
    const PluginError e = load_error(*registry, fixture("lying_span"));
    check_names_file(e, fixture("lying_span"));
    CHECK(contains(e.what(), "element type 'Lying': field table does not match the struct size: field 'b' spans "
                             "bytes [8, 16) but the struct has 8 bytes"));
  }
  CHECK(registry->find("Lying") == nullptr);
  check_still_usable(*registry);
}

TEST_CASE("device code that NVRTC rejects: the error names the plugin and shows the NVRTC log") {
  auto registry = registry_with({fixture("nvrtc_bad")});  // the host side is fine: it loads
  const InputLocation at("test");
  Lattice lattice(protons_2gev());
  lattice.append(lattice.define("d", registry->get("Drift", at), {{"length", 1.0}}, at));
  lattice.append(lattice.define("bad", registry->get("NvrtcBadKick", at), {{"kick", 1e-4}}, at));
  lattice.prepare();

  const KernelCompiler compiler("off");
  for (Dispatch dispatch : {Dispatch::Switch, Dispatch::Baked}) {
    const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, dispatch);
    std::string message, log;
    try {
      compiler.compile(src, 90);
    } catch (const KernelCompileError& e) {
      message = e.what();
      log = e.log();
    }
    CAPTURE(message);
    REQUIRE_FALSE(message.empty());
    CHECK(contains(message, "NVRTC failed to compile the fused kernel"));
    CHECK(contains(log, "nvrtc_bad_kick.h"));                          // the log points into the plugin header
    CHECK(contains(log, "fixture_undeclared_device_function"));       // at the invalid code
    CHECK(contains(message, log));                                     // the message carries the log
    CHECK(contains(message, "nvrtc_bad_kick.h comes from plugin fixture_nvrtc_bad (" +
                                canonical(fixture("nvrtc_bad")) + "): types NvrtcBadKick"));
  }

  // The CPU path of the same plugin works, and lattices without it still compile.
  Particles p(1, lattice.reference().beta0());
  p.set(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  ft::plugin_test::track_cpu(lattice, p);
  CHECK(p.px[0] == 1e-4);
  Lattice good(protons_2gev());
  good.append(good.define("d", registry->get("Drift", at), {{"length", 1.0}}, at));
  good.prepare();
  CHECK(compiler.compile(generate_fused_kernel(good, FmaMode::Off, Dispatch::Switch), 90).cubin.size() > 100);
  check_still_usable(*registry);
}

TEST_CASE("a plugin whose CPU function throws: an ft::Error naming the element and the plugin") {
  auto registry = registry_with({fixture("cpu_throws")});
  const InputLocation at("test");
  Lattice lattice(protons_2gev());
  lattice.append(lattice.define("d", registry->get("Drift", at), {{"length", 1.0}}, at));
  lattice.append(lattice.define("boom", registry->get("ThrowingKick", at), {{"threshold", 1e-4}}, at));
  lattice.prepare();

  Particles p = make_grid(lattice.reference().beta0(), 0.0, 2e-4, 100, 0.0, 0.0, 1);  // half above 1e-4
  std::string message;
  try {
    ft::plugin_test::track_cpu(lattice, p, 3);
  } catch (const ft::Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(contains(message, fmt::format("element #1 'boom' (ThrowingKick, plugin {}) failed on the CPU at turn 0: "
                                      "ThrowingKick fixture: x above the threshold",
                                      canonical(fixture("cpu_throws")))));

  // The same lattice with particles below the threshold tracks, and so do other plugins' types.
  Particles below = make_grid(lattice.reference().beta0(), 0.0, 5e-5, 10, 0.0, 0.0, 1);
  CHECK_NOTHROW(ft::plugin_test::track_cpu(lattice, below, 3));
  CHECK(below.alive_count() == below.size());
  check_still_usable(*registry);
}

TEST_CASE("the default plugin path skips bad plugins with a warning and loads the good ones") {
  const fs::path dir = ft::test::temp_dir("plugin_path");
  std::ofstream(dir / "fusetrack_plugin_garbage.so") << "not a library\n";
  fs::copy_file(fixture("abi99"), dir / "fusetrack_plugin_abi99.so");
  fs::copy_file(fixture("no_entry"), dir / "fusetrack_plugin_no_entry.so");
  fs::copy_file(example_plugin("tutorial"), dir / "fusetrack_plugin_tutorial.so");
  std::ofstream(dir / "not_a_plugin_name.so") << "ignored: the name does not start with fusetrack_plugin_\n";

  const char* old = std::getenv("FUSETRACK_PLUGIN_PATH");
  const std::string saved = old ? old : "";
  setenv("FUSETRACK_PLUGIN_PATH", dir.c_str(), 1);
  ElementRegistry registry;
  registry.load_default_plugins();
  if (old)
    setenv("FUSETRACK_PLUGIN_PATH", saved.c_str(), 1);
  else
    unsetenv("FUSETRACK_PLUGIN_PATH");

  const auto& warnings = registry.load_warnings();
  REQUIRE(warnings.size() == 3);
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  CAPTURE(all);
  CHECK(contains(all, canonical((dir / "fusetrack_plugin_garbage.so").string()) + ": is not a shared library"));
  CHECK(contains(all, canonical((dir / "fusetrack_plugin_abi99.so").string()) + ": plugin ABI version 99"));
  CHECK(contains(all, canonical((dir / "fusetrack_plugin_no_entry.so").string()) + ": is not a fusetrack plugin"));
  CHECK_FALSE(contains(all, "not_a_plugin_name"));
  CHECK(registry.find("KickX") != nullptr);
  CHECK(registry.find("KickX")->plugin->file() == canonical((dir / "fusetrack_plugin_tutorial.so").string()));
  CHECK(registry.find("Drift") != nullptr);
  check_still_usable(registry);
}

}  // namespace test_plugin_errors
