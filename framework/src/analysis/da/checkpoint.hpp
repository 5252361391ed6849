// The arrays of a DA checkpoint (internal to the DA sources).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fusetrack/da.h"
#include "fusetrack/npy.h"

namespace ft::da_detail {

/// The arrays of a checkpoint (a copy of the scan's state: the file can be written while tracking goes on).
std::vector<std::pair<std::string, NpyArray>> checkpoint_members(const DaScan& scan, const std::string& fingerprint);

}  // namespace ft::da_detail
