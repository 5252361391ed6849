// Errors that reach the user. Every input error names where it happened: the file, the
// element (index in the sequence or definition name) and the field, and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace ft {

/// Base class of every fusetrack error; what() is a complete, user-facing sentence.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Where in an input file something went wrong. Empty parts are left out of the message.
struct InputLocation {
  InputLocation() = default;
  explicit InputLocation(std::string file_) : file(std::move(file_)) {}
  std::string file;
  long element_index = -1;   // index in the sequence, or -1
  std::string element_name;  // definition name
  std::string element_type;
  std::string field;
};

/// Bad input (lattice, particles, options): a message prefixed with its location.
class InputError : public Error {
 public:
  InputError(const InputLocation& where, const std::string& problem);
  const InputLocation& where() const { return m_where; }
  const std::string& problem() const { return m_problem; }

 private:
  InputLocation m_where;
  std::string m_problem;
};

/// A plugin could not be loaded or used; names the plugin file.
class PluginError : public Error {
 public:
  PluginError(const std::string& plugin_file, const std::string& problem)
      : Error(plugin_file + ": " + problem), m_file(plugin_file) {}
  const std::string& file() const { return m_file; }

 private:
  std::string m_file;
};

/// The GPU path failed (no driver, out of memory, NVRTC error, ...).
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace ft
