// Fuzz target: the collider set-up reader (every field's checks, the frames, the beams' rings) and,
// for set-ups small enough to run in milliseconds, two turns of the collision itself on the CPU
// (slicing, the fixed-point moments, the kick with whatever sizes the input gives, the luminosity).
#include "fuzz_support.h"
#include "fusetrack/collider.h"
#include "fusetrack/parallel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ft::fuzz::write_input(data, size, "collider.json");
  try {
    const ft::ColliderSetup setup = ft::read_collider_setup(path);
    size_t macroparticles = 0;
    for (const ft::ColliderBeam& b : setup.beams)
      macroparticles += b.bunches.macroparticles * static_cast<size_t>(b.bunches.count);
    if (macroparticles > 4000 || setup.ip.slices > 64) return 0;
    ft::CollideOptions o;
    o.turns = 2;
    o.threads = 1;
    o.backend.device = "cpu";
    (void)ft::run_collide(setup, ft::fuzz::registry(), o, ft::world());
  } catch (const ft::Error&) {
    // A clear error: the expected outcome of bad input.
  }
  return 0;
}
