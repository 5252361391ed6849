// Particle files: .npz (every array) and .csv (coordinates and loss records), read and written
// with errors that name the file and the column; and shard sets, the output of a run over several
// MPI ranks (one file per rank and an index, written in parallel, read back as one set).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "fusetrack/npy.h"
#include "fusetrack/particles.h"

namespace ft {

class Communicator;

/// Reads particles from .npz (arrays) or .csv (a header line naming the columns), or from the index
/// of a shard set (write_particle_shards) as one set. The six coordinates x, px, y, py, zeta, delta
/// are required; besides them only the arrays that write_particles writes (id, ptau, rpp, rvv,
/// state, lost_turn, lost_element) are accepted, and ignored: the particles start alive with ids
/// 0..n-1 and ptau, rpp, rvv from delta. An unknown or missing array or column is an InputError
/// naming the file and the array.
Particles read_particles(const std::string& path, double beta0);

/// Every array (coordinates, ptau, rpp, rvv, state, loss records, ids) of an .npz written by
/// write_particles, or of a shard set of them, in order: the exact state a run wrote.
Particles read_particle_set(const std::string& path, double beta0);

/// Shard sets. A run over N > 1 ranks writes `path` (x.npz or x.csv) as
///   x.npz.d/rank0000.npz ... x.npz.d/rank{N-1}.npz   each rank's contiguous share, in rank order
///   x.npz                                             the index: member fusetrack_shard_counts
///                                                     (int64, particles per shard)
/// (.csv: x.csv.d/rank0000.csv ..., and x.csv a CSV "fusetrack_shard,count" listing the shard
/// files relative to the index's directory). Each rank writes its own shard; rank 0 writes the
/// index last, after every shard is complete, so a reader never sees a partial set.
std::string particle_shard_path(const std::string& path, int rank);
/// Every rank calls it with its share (collective): writes this rank's shard and, on rank 0, the
/// index; with one process writes `path` as write_particles does. Throws ft::Error on every rank
/// when any rank failed (naming the file on the rank that failed).
void write_particle_shards(const std::string& path, const Particles& share, Communicator& comm);
/// True when `path` is the index of a shard set.
bool is_particle_shard_index(const std::string& path);

/// Every array of the particles (coordinates, ptau, rpp, rvv, state, loss records, id) as named
/// members of an .npz archive; the inverse is read by read_particles / the DA checkpoint.
std::vector<std::pair<std::string, NpyArray>> particle_arrays(const Particles& particles);

/// Writes .npz (all arrays) or .csv (coordinates, state, lost_turn, lost_element).
void write_particles(const std::string& path, const Particles& particles);

}  // namespace ft
