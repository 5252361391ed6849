#include "fusetrack/error.h"

#include <fmt/format.h>

namespace ft {

static std::string format_location(const InputLocation& w) {
  std::string s = w.file.empty() ? std::string("<input>") : w.file;
  if (w.element_index >= 0 || !w.element_name.empty()) {
    s += ": element";
    if (w.element_index >= 0) s += fmt::format(" #{}", w.element_index);
    if (!w.element_name.empty()) s += fmt::format(" '{}'", w.element_name);
    if (!w.element_type.empty()) s += fmt::format(" ({})", w.element_type);
  }
  if (!w.field.empty()) s += fmt::format(", field '{}'", w.field);
  return s;
}

InputError::InputError(const InputLocation& where, const std::string& problem)
    : Error(format_location(where) + ": " + problem), m_where(where), m_problem(problem) {}

}  // namespace ft
