// merge_particle_set IN OUT: reads a particle file or shard set written by `fusetrack track -o`
// (every array, ft::read_particle_set) and writes it as one .npz (ft::write_particles), so that
// multi_process_test.sh can compare the merged set of a multi-rank run byte for byte with the
// output of one process.
#include <cstdio>
#include <exception>

#include "fusetrack/particle_files.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: merge_particle_set IN OUT\n");
    return 1;
  }
  try {
    ft::write_particles(argv[2], ft::read_particle_set(argv[1], 1.0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
