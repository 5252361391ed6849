// core_consumer LATTICE [PLUGIN...]: loads the lattice with the installed core (default plugins
// first, then PLUGIN files), tracks one particle at (1e-3, 0, -5e-4, 0, 0, 0) for 10 turns on the CPU
// and prints the core library's directory and the particle as a row of fusetrack's CSV output.
#include <cstdio>
#include <exception>

#include "fusetrack/lattice.h"
#include "fusetrack/registry.h"
#include "fusetrack/tracker.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: core_consumer LATTICE [PLUGIN...]\n");
    return 2;
  }
  try {
    ft::ElementRegistry registry;
    registry.load_default_plugins();
    for (int i = 2; i < argc; ++i) registry.load_plugin(argv[i]);
    const ft::Lattice lattice = ft::load_lattice(argv[1], registry);
    ft::Particles p(1, lattice.reference().beta0());
    p.set(0, 1e-3, 0.0, -5e-4, 0.0, 0.0, 0.0);
    ft::TrackOptions options;
    options.turns = 10;
    ft::make_cpu_backend(lattice)->track(p, options);
    std::printf("core library: %s\n", ft::ElementRegistry::core_library_directory().c_str());
    std::printf("%lld,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%d,%d,%lld\n", static_cast<long long>(p.id[0]), p.x[0],
                p.px[0], p.y[0], p.py[0], p.zeta[0], p.delta[0], p.state[0], p.lost_turn[0],
                static_cast<long long>(p.lost_element[0]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
