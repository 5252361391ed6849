// The Python module's shared pieces (internal): the lattice handle every binding passes around,
// JSON and argument helpers, NumPy copies, and one bind_* function per concept (bind_*.cpp), which
// PYBIND11_MODULE (module.cpp) calls in turn. A new concept's bindings go into a new bind_*.cpp.
#pragma once

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/bunch_train.h"
#include "fusetrack/collider.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/longitudinal.h"
#include "fusetrack/monitor.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/particles.h"
#include "fusetrack/registry.h"
#include "fusetrack/session.h"
#include "fusetrack/space_charge_install.h"
#include "fusetrack/variants.h"

namespace py = pybind11;
using json = nlohmann::ordered_json;

namespace fusetrack_python {

// ---------------------------------------------------------------------------------------------
// Registry and lattices

/// The registry every lattice of the module uses: the default plugins, then those loaded by
/// fusetrack.load_plugin(). Lattices hold it (their element types live in it).
inline std::shared_ptr<ft::ElementRegistry>& default_registry() {
  static std::shared_ptr<ft::ElementRegistry> registry;
  if (!registry) {
    registry = std::make_shared<ft::ElementRegistry>();
    registry->load_default_plugins();
    if (!registry->load_warnings().empty()) {
      auto warn = py::module_::import("warnings").attr("warn");
      for (const auto& w : registry->load_warnings()) warn("plugin skipped: " + w);
    }
  }
  return registry;
}

/// A lattice with the registry its types come from, and a revision counter that field changes
/// advance (trackers refresh their kernel parameters when it moved).
struct LatticeHandle {
  std::shared_ptr<ft::ElementRegistry> registry;
  ft::Lattice lattice;
  uint64_t revision = 0;
};
using LatticePtr = std::shared_ptr<LatticeHandle>;

inline LatticePtr make_handle(ft::Lattice lattice) {
  auto h = std::make_shared<LatticeHandle>();
  h->registry = default_registry();
  h->lattice = std::move(lattice);
  return h;
}

inline json to_json(const py::handle& obj) {
  const std::string text = py::str(py::module_::import("json").attr("dumps")(obj));
  return json::parse(text);
}
inline py::object from_json(const json& doc) { return py::module_::import("json").attr("loads")(doc.dump()); }

/// A bad argument of a Python call: InputError naming the argument (as the CLI names its option).
[[noreturn]] inline void argument_error(const char* field, const std::string& what) {
  ft::InputLocation at;
  at.field = field;
  throw ft::InputError(at, what);
}

/// The enumerator named `value` among `choices`; an InputError listing them otherwise.
template <class Enum>
Enum choice(const char* field, const std::string& value, std::initializer_list<std::pair<const char*, Enum>> choices) {
  std::string names;
  for (const auto& [name, e] : choices) {
    if (value == name) return e;
    names += names.empty() ? name : std::string(" or ") + name;
  }
  argument_error(field, fmt::format("'{}': expected {}", value, names));
}

inline ft::Dispatch dispatch_from_name(const std::string& name) {
  ft::Dispatch d = ft::Dispatch::Auto;
  if (ft::parse_dispatch(name, d)) return d;
  argument_error("dispatch", fmt::format("'{}' is not a kernel form: expected auto, switch, baked or staged", name));
}

template <typename T>
py::array_t<T> copy_array(const std::vector<T>& v) {
  return py::array_t<T>(v.size(), v.data());
}

template <size_t N>
py::array_t<double> array_of(const std::array<double, N>& a) {
  return py::array_t<double>(N, a.data());
}

// The bindings of each concept, in the order the module defines them.
void bind_registry(py::module_& m);
void bind_lattice(py::module_& m);
void bind_particles(py::module_& m);
void bind_tracking(py::module_& m);
void bind_optics(py::module_& m);
void bind_da(py::module_& m);
void bind_space_charge(py::module_& m);
void bind_collider(py::module_& m);
void bind_trains(py::module_& m);

}  // namespace fusetrack_python
