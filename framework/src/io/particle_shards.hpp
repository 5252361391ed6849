// Reading shard sets (fusetrack/particle_files.h): the index and the shards in order.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "fusetrack/particles.h"

namespace ft {

struct ParticleShard {
  std::string file;  // path of the shard
  size_t count = 0;  // particles the index says it holds
};

/// The shards an index lists, in order. Throws InputError naming the index.
std::vector<ParticleShard> read_shard_index(const std::string& path);

/// The particles of every shard, read by `read_one` and concatenated in order; a missing shard or a count
/// that differs from the index is an InputError naming the file.
Particles read_particle_shards(const std::string& path, const std::function<Particles(const std::string&)>& read_one);

}  // namespace ft
