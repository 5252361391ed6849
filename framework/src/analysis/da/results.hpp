// The arrays of a DA scan's da.npz (internal to the DA sources).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fusetrack/da.h"
#include "fusetrack/npy.h"

namespace ft::da_detail {

/// The arrays of da.npz: initial coordinates, grid coordinates, losses, final x and y (and each
/// particle's variant in a study).
std::vector<std::pair<std::string, NpyArray>> da_npz_members(const DaScan& scan);

}  // namespace ft::da_detail
