// String helpers of the core's sources, defined once (the core library is compiled in unity files).
#pragma once

#include <string>

namespace ft {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace ft
