// Fuzz target: the .npz particle reader (libzip archive, .npy headers, dtypes, shapes, lengths,
// non-finite values), as `fusetrack track -p FILE.npz` reads it.
#include "fuzz_support.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/particles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ft::fuzz::write_input(data, size, "particles.npz");
  try {
    const ft::Particles p = ft::read_particles(path, 0.9);
    (void)p.alive_count();
  } catch (const ft::Error&) {
  }
  return 0;
}
