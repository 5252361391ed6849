// Python bindings: lattices and their elements, read and written by field name.
#include "bindings.h"

namespace fusetrack_python {

namespace {

ft::InputLocation element_location(const LatticeHandle& h, uint32_t definition, const std::string& field) {
  ft::InputLocation at{h.lattice.source_file()};
  const ft::ElementDefinition& def = h.lattice.definitions()[definition];
  at.element_name = def.name;
  at.element_type = def.type->name;
  at.field = field;
  return at;
}

uint32_t definition_index(const LatticeHandle& h, const std::string& name) {
  const int d = h.lattice.find_definition(name);
  if (d < 0) {
    ft::InputLocation at{h.lattice.source_file()};
    at.element_name = name;
    throw py::key_error(ft::InputError(at, "no element of this name in the lattice").what());
  }
  return static_cast<uint32_t>(d);
}

/// One element definition, read and written by field name (several sequence entries may share it).
struct ElementRef {
  LatticePtr handle;
  uint32_t definition = 0;

  const ft::ElementDefinition& def() const { return handle->lattice.definitions()[definition]; }

  const ft::FieldInfo& field_info(const std::string& field, bool for_writing) const {
    const ft::FieldInfo* f = def().type->find_field(field);
    if (!f || (for_writing && f->derived) || f->host_only()) {
      std::string names;
      for (const auto& fi : def().type->fields)
        if (!fi.derived && !fi.host_only()) names += (names.empty() ? "" : ", ") + fi.name;
      const std::string problem =
          !f           ? fmt::format("{} has no field '{}'; its fields are: {}", def().type->name, field, names)
          : f->derived ? "a derived field (computed from the others) cannot be set"
                       : "a host-only field (JSON) cannot be read or set here: use Lattice.to_dict / from_dict";
      throw ft::InputError(element_location(*handle, definition, field), problem);
    }
    return *f;
  }

  py::object get(const std::string& field) const {
    const ft::FieldInfo& f = field_info(field, false);
    if (f.count == 1) return py::float_(handle->lattice.field(definition, field));
    py::array_t<double> a(f.count);
    for (unsigned k = 0; k < f.count; ++k) a.mutable_at(k) = handle->lattice.field(definition, field, k);
    return std::move(a);
  }

  /// Validated as a lattice file's definition is (ft::Lattice::define on the element's fields
  /// with this one replaced: the same checks and messages), then written, and the lattice
  /// prepared again (derived fields, lengths, s positions).
  void set(const std::string& field, const py::object& value) {
    const ft::FieldInfo& f = field_info(field, true);
    json fields = json::object();
    for (const auto& fi : def().type->fields) {
      if (fi.derived || fi.host_only()) continue;
      auto current = [&](unsigned k) {  // integer fields as JSON integers (as lattice_to_json writes them)
        const double v = handle->lattice.field(definition, fi.name, k);
        return fi.type == FT_FIELD_INT32 ? json(static_cast<int32_t>(v)) : json(v);
      };
      if (fi.count == 1) {
        fields[fi.name] = current(0);
      } else {
        json a = json::array();
        for (unsigned k = 0; k < fi.count; ++k) a.push_back(current(k));
        fields[fi.name] = a;
      }
    }
    const py::object values = py::module_::import("numpy").attr("asarray")(value);
    if (py::isinstance<py::array>(values) && values.attr("dtype").attr("kind").cast<std::string>() == "f" &&
        !py::module_::import("numpy").attr("isfinite")(values).attr("all")().cast<bool>())
      throw ft::InputError(element_location(*handle, definition, field),
                           fmt::format("expected finite numbers, got {}", py::str(value).cast<std::string>()));
    const json given = to_json(values.attr("tolist")());
    fields[f.name] = given;
    ft::Lattice scratch(handle->lattice.reference());
    const ft::ElementDefinition& d = def();
    const uint32_t index = scratch.define(d.name, *d.type, fields, element_location(*handle, definition, ""));
    for (unsigned k = 0; k < f.count; ++k)
      handle->lattice.set_field(definition, f.name, scratch.field(index, f.name, k), k);
    handle->lattice.prepare();
    ++handle->revision;
  }

  py::dict fields() const {
    py::dict out;
    for (const auto& fi : def().type->fields)
      if (!fi.host_only()) out[py::str(fi.name)] = get(fi.name);
    return out;
  }
};

}  // namespace

void bind_lattice(py::module_& m) {
  // Lattice
  py::class_<ElementRef>(m, "Element")
      .def_property_readonly("name", [](const ElementRef& e) { return e.def().name; })
      .def_property_readonly("type", [](const ElementRef& e) { return e.def().type->name; })
      .def("__getitem__", &ElementRef::get)
      .def("__setitem__", &ElementRef::set)
      .def("fields", &ElementRef::fields)
      .def("__repr__", [](const ElementRef& e) {
        return fmt::format("<fusetrack.Element '{}' ({})>", e.def().name, e.def().type->name);
      });

  py::class_<LatticeHandle, LatticePtr>(m, "Lattice")
      .def_static(
          "_from_file",
          [](const std::string& path) { return make_handle(ft::load_lattice(path, *default_registry())); },
          py::arg("path"))
      .def_static(
          "_from_json",
          [](const py::object& doc, const std::string& file) {
            return make_handle(ft::lattice_from_json(to_json(doc), file, *default_registry()));
          },
          py::arg("doc"), py::arg("file"))
      .def("_to_json", [](const LatticeHandle& h) { return from_json(ft::lattice_to_json(h.lattice)); })
      .def("__getitem__",
           [](const LatticePtr& h, const std::string& name) {
             return ElementRef{h, definition_index(*h, name)};
           })
      .def("__contains__",
           [](const LatticeHandle& h, const std::string& name) { return h.lattice.find_definition(name) >= 0; })
      .def("__len__", [](const LatticeHandle& h) { return h.lattice.sequence().size(); })
      .def_property_readonly("element_names",
                             [](const LatticeHandle& h) {
                               std::vector<std::string> names;
                               for (const auto& d : h.lattice.definitions()) names.push_back(d.name);
                               return names;
                             })
      .def_property_readonly("sequence",
                             [](const LatticeHandle& h) {
                               std::vector<std::string> names;
                               names.reserve(h.lattice.sequence().size());
                               for (const auto& e : h.lattice.sequence())
                                 names.push_back(h.lattice.definitions()[e.definition].name);
                               return names;
                             })
      .def_property_readonly("s",
                             [](const LatticeHandle& h) {
                               std::vector<double> s;
                               for (const auto& e : h.lattice.sequence()) s.push_back(e.s);
                               return copy_array(s);
                             })
      .def_property_readonly("circumference", [](const LatticeHandle& h) { return h.lattice.circumference(); })
      .def_property_readonly("has_collective", [](const LatticeHandle& h) { return h.lattice.has_collective(); })
      .def_property_readonly("source_file", [](const LatticeHandle& h) { return h.lattice.source_file(); })
      .def_property_readonly("reference", [](const LatticeHandle& h) {
        const ft::ReferenceParticle& r = h.lattice.reference();
        py::dict d;
        d["mass0"] = r.mass0;
        d["q0"] = r.q0;
        d["p0c"] = r.p0c;
        d["beta0"] = r.beta0();
        d["gamma0"] = r.gamma0();
        d["energy0"] = r.energy0();
        return d;
      });
}

}  // namespace fusetrack_python
