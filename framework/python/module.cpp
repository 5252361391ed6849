// The fusetrack Python module (pybind11): a thin layer over the library API that the command line
// uses (fusetrack/session.h and the headers it names). Python-facing docs and conveniences are in
// fusetrack/__init__.py; this file defines the module: its errors, then the bindings of each concept (bind_*.cpp).
//
// Memory: Particles arrays are NumPy views of the C++ vectors (zero-copy, kept alive by the
// Particles object); the tracker works on those vectors in place (on a GPU: copied to the device
// and back into the same vectors).
#include "bindings.h"

using namespace fusetrack_python;

PYBIND11_MODULE(_fusetrack, m) {
  m.doc() = "fusetrack's C++ library (see the fusetrack package for documentation)";

  // Errors: the C++ messages unchanged (file, element, field).
  static py::exception<ft::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<ft::InputError> input_error(m, "InputError", error.ptr());
  static py::exception<ft::PluginError> plugin_error(m, "PluginError", error.ptr());
  static py::exception<ft::DeviceError> device_error(m, "DeviceError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ft::InputError& e) {
      input_error(e.what());
    } catch (const ft::PluginError& e) {
      plugin_error(e.what());
    } catch (const ft::DeviceError& e) {
      device_error(e.what());
    } catch (const ft::Error& e) {
      error(e.what());
    }
  });

  bind_registry(m);
  bind_lattice(m);
  bind_particles(m);
  bind_tracking(m);
  bind_optics(m);
  bind_da(m);
  bind_space_charge(m);
  bind_collider(m);
  bind_trains(m);
}
