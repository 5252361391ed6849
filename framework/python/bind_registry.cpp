// Python bindings: the element registry, plugins and GPUs.
#include "bindings.h"

namespace fusetrack_python {

void bind_registry(py::module_& m) {
  // Registry
  m.def(
      "load_plugin", [](const std::string& path) { return default_registry()->load_plugin(path).file(); },
      py::arg("path"));
  m.def("plugins", [] {
    py::list out;
    for (const auto& p : default_registry()->plugins()) {
      py::dict d;
      d["name"] = p->name();
      d["file"] = p->file();
      d["abi_version"] = p->abi_version();
      out.append(d);
    }
    return out;
  });
  m.def("plugin_search_path", [] { return default_registry()->searched_directories(); });
  m.def("element_types", [] {
    py::list out;
    for (const ft::ElementType* t : default_registry()->types()) {
      py::dict d;
      d["name"] = t->name;
      d["doc"] = t->doc;
      d["kind"] = t->is_collective() ? "collective" : (t->thick ? "thick" : "thin");
      d["plugin"] = t->plugin ? t->plugin->file() : std::string();
      py::list fields;
      for (const auto& f : t->fields) {
        py::dict fd;
        fd["name"] = f.name;
        fd["unit"] = f.unit;
        fd["doc"] = f.doc;
        fd["type"] = f.type_name();
        fd["count"] = f.count;
        fd["required"] = f.required;
        fd["derived"] = f.derived;
        fd["default"] = (f.required || f.derived || f.host_only()) ? py::object(py::none())
                                                                   : py::object(py::float_(f.default_value));
        fields.append(fd);
      }
      d["fields"] = fields;
      out.append(d);
    }
    return out;
  });
  m.def("gpu_unavailable_reason", &ft::gpu_unavailable_reason);
  m.def("gpus", [] {
    py::list out;
    for (const auto& g : ft::list_gpus()) {
      py::dict d;
      d["index"] = g.index;
      d["name"] = g.name;
      d["arch"] = g.arch;
      d["memory"] = g.total_memory;
      d["multiprocessors"] = g.multiprocessors;
      out.append(d);
    }
    return out;
  });
}

}  // namespace fusetrack_python
