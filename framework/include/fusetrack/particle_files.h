// Particle files: .npz (every array) and .csv (coordinates and loss records), read and written
// with errors that name the file and the column.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "fusetrack/npy.h"
#include "fusetrack/particles.h"

namespace ft {

/// Reads particles from .npz (arrays x, px, y, py, zeta, delta; missing ones are zero) or .csv
/// (a header line naming the columns). Errors name the file and the column.
Particles read_particles(const std::string& path, double beta0);

/// Every array of the particles (coordinates, ptau, rpp, rvv, state, loss records, id) as named
/// members of an .npz archive; the inverse is read by read_particles / the DA checkpoint.
std::vector<std::pair<std::string, NpyArray>> particle_arrays(const Particles& particles);

/// Writes .npz (all arrays) or .csv (coordinates, state, lost_turn, lost_element).
void write_particles(const std::string& path, const Particles& particles);

}  // namespace ft
