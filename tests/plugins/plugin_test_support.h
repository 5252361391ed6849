// Paths of the plugins built for the plugin tests (tests/plugins/CMakeLists.txt) and small helpers.
#pragma once
#include <memory>
#include <string>

#include "fusetrack/lattice.h"
#include "fusetrack/registry.h"
#include "fusetrack/tracker.h"

namespace ft::plugin_test {

/// An example plugin of plugins/<name>, built in-tree: examples/<name>/build/fusetrack_plugin_<name>.so.
inline std::string example_plugin(const std::string& name) {
  return std::string(FT_EXAMPLES_BUILD_DIR) + "/" + name + "/build/fusetrack_plugin_" + name + ".so";
}
/// The copy of plugins/<name>/lattice.json next to that build (its "plugins" entry resolves).
inline std::string example_lattice(const std::string& name) {
  return std::string(FT_EXAMPLES_BUILD_DIR) + "/" + name + "/lattice.json";
}
/// A bad-plugin fixture: fusetrack_plugin_fixture_<name>.so.
inline std::string fixture(const std::string& name) {
  return std::string(FT_FIXTURES_BUILD_DIR) + "/fusetrack_plugin_fixture_" + name + ".so";
}

/// A fresh registry with the default plugins (the built-in one) and then `plugins`.
inline std::unique_ptr<ElementRegistry> registry_with(std::initializer_list<std::string> plugins = {}) {
  auto r = std::make_unique<ElementRegistry>();
  r->load_default_plugins();
  for (const auto& p : plugins) r->load_plugin(p);
  return r;
}

/// Tracks on the CPU for `turns` turns.
inline void track_cpu(const Lattice& lattice, Particles& particles, int64_t turns = 1) {
  TrackOptions o;
  o.turns = turns;
  make_cpu_backend(lattice)->track(particles, o);
}

}  // namespace ft::plugin_test
