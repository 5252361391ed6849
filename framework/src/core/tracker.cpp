// The backend contract's shared checks: lattice variants a backend can track, and a particle's variant.
#include "fusetrack/tracker.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "fusetrack/error.h"
#include "fusetrack/variants.h"

namespace ft {

void check_variants_trackable(const Lattice& lattice, const std::vector<const Lattice*>& variants) {
  if (variants.size() > static_cast<size_t>(INT32_MAX)) throw Error("too many lattice variants");
  for (size_t v = 0; v < variants.size(); ++v) {
    if (!variants[v]) throw Error(fmt::format("lattice variant {} is null", v));
    check_same_sequence(lattice, *variants[v], fmt::format("variant {} ({})", v, variants[v]->source_file()));
    if (variants[v]->has_collective()) throw Error("lattice variants with collective elements are not supported");
    const GlobalLimits a = lattice.limits(), b = variants[v]->limits();
    if (std::memcmp(&a, &b, sizeof(GlobalLimits)) != 0)
      throw Error(
          fmt::format("lattice variant {} ({}) has other global limits (limit_x, limit_y, per-turn limits) "
                      "than the base lattice: variants share them",
                      v, variants[v]->source_file()));
  }
}

int32_t particle_variant(const Particles& particles, size_t i, size_t n_variants) {
  if (particles.variant.empty()) return 0;
  const int32_t v = particles.variant[i];
  if (v < 0 || static_cast<size_t>(v) >= n_variants)
    throw Error(fmt::format("particle {} (id {}) is in lattice variant {}, but the backend has {} variant(s)", i,
                            particles.id.at(i), v, n_variants));
  return v;
}

void Backend::set_variants(const std::vector<const Lattice*>& variants) {
  if (!variants.empty()) throw Error(fmt::format("the {} backend does not track lattice variants", name()));
}

}  // namespace ft
