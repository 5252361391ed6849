// Python bindings: particles as NumPy views of their vectors, and the ways to make them.
#include "bindings.h"

namespace fusetrack_python {

namespace {

// ---------------------------------------------------------------------------------------------
// Particles: NumPy views of the vectors

template <typename T>
py::array view_of(std::vector<T>& v, const py::object& owner, bool writable) {
  py::array_t<T> a({v.size()}, {sizeof(T)}, v.data(), owner);
  if (!writable) a.attr("setflags")(py::arg("write") = false);
  return std::move(a);
}

void copy_into(std::vector<double>& dst, const py::array_t<double, py::array::forcecast>& src, const char* name) {
  if (src.ndim() != 1 || static_cast<size_t>(src.shape(0)) != dst.size())
    throw py::value_error(fmt::format("{}: expected a 1-D array of {} values", name, dst.size()));
  auto r = src.unchecked<1>();
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = r(static_cast<py::ssize_t>(i));
}

ft::Particles particles_from_arrays(double beta0, const py::dict& arrays) {
  static const char* names[6] = {"x", "px", "y", "py", "zeta", "delta"};
  std::vector<double> columns[6];
  size_t n = 0;
  bool sized = false;
  for (int k = 0; k < 6; ++k) {
    if (!arrays.contains(names[k]) || arrays[names[k]].is_none()) continue;
    auto a = py::array_t<double, py::array::forcecast>::ensure(arrays[names[k]]);
    if (!a || a.ndim() != 1) throw py::value_error(fmt::format("{}: expected a 1-D array", names[k]));
    if (sized && static_cast<size_t>(a.shape(0)) != n)
      throw py::value_error(fmt::format("{}: {} values, the other arrays have {}", names[k], a.shape(0), n));
    n = static_cast<size_t>(a.shape(0));
    sized = true;
    columns[k].assign(a.data(), a.data() + n);
  }
  for (auto& c : columns) c.resize(n, 0.0);
  ft::Particles p(n, beta0);
  for (size_t i = 0; i < n; ++i)
    p.set(i, columns[0][i], columns[1][i], columns[2][i], columns[3][i], columns[4][i], columns[5][i]);
  return p;
}

py::dict matched_report(const ft::MatchedBunchReport& r) {
  py::dict d;
  d["distribution"] = r.distribution;
  d["eta"] = r.bucket.eta;
  d["zeta_s"] = r.bucket.zeta_s;
  d["bucket"] = py::make_tuple(r.bucket.zeta_left, r.bucket.zeta_right);
  d["bucket_height"] = r.bucket_height;
  d["qs0"] = r.qs0;
  d["qs"] = r.qs;
  d["sigma_zeta"] = r.sigma_zeta;
  d["sigma_zeta_rf"] = r.sigma_zeta_rf;
  d["sigma_delta"] = r.sigma_delta;
  d["potential_well"] = r.potential_well;
  d["converged"] = r.converged;
  d["iterations"] = r.iterations;
  d["residual"] = r.residual;
  d["zeta"] = copy_array(r.zeta);
  d["line_density"] = copy_array(r.line_density);
  return d;
}

}  // namespace

void bind_particles(py::module_& m) {
  // Particles
  py::class_<ft::Particles>(m, "Particles")
      .def(py::init<>())
      .def_static("_from_arrays", &particles_from_arrays, py::arg("beta0"), py::arg("arrays"))
      .def_static("_grid",
                  [](const LatticeHandle& h, double x_min, double x_max, size_t nx, double y_min, double y_max,
                     size_t ny, double delta) {
                    return ft::make_grid(h.lattice.reference().beta0(), x_min, x_max, nx, y_min, y_max, ny, delta);
                  })
      .def_static("_matched_gaussian",
                  [](const LatticeHandle& h, size_t n, double enx, double eny, double sz, double sd, uint64_t seed) {
                    ft::GaussianBunchSpec spec;
                    spec.count = n;
                    spec.emittance_nx = enx;
                    spec.emittance_ny = eny;
                    spec.sigma_zeta = sz;
                    spec.sigma_delta = sd;
                    spec.seed = seed;
                    py::gil_scoped_release release;
                    return ft::make_matched_gaussian(h.lattice, spec);
                  })
      .def_static("_matched_bunch",
                  [](const LatticeHandle& h, size_t n, double sigma_zeta, const std::string& distribution, double mu,
                     bool potential_well, uint64_t seed, const std::string& fma, int threads) {
                    ft::MatchedBunchOptions o;
                    o.distribution = distribution;
                    o.mu = mu;
                    o.sigma_zeta = sigma_zeta;
                    o.potential_well = potential_well;
                    o.seed = seed;
                    o.fma = ft::parse_fma_mode(fma, "fma");
                    o.bucket.threads = threads;
                    ft::MatchedBunch b;
                    {
                      py::gil_scoped_release release;
                      b = ft::generate_matched_bunch(h.lattice, n, o);
                    }
                    return py::make_tuple(std::move(b.particles), matched_report(b.report));
                  })
      .def_static("_repro_particles",
                  [](const LatticeHandle& h, size_t n, double amplitude, double delta) {
                    return ft::make_repro_particles(h.lattice, n, amplitude, delta);
                  })
      .def_static("_read", [](const std::string& path, double beta0) { return ft::read_particles(path, beta0); })
      .def("_write", [](const ft::Particles& p, const std::string& path) { ft::write_particles(path, p); })
      .def(
          "copy", [](const ft::Particles& p) { return ft::Particles(p); }, "An independent copy.")
      .def("__len__", &ft::Particles::size)
      .def_readonly("beta0", &ft::Particles::beta0)
      .def_property_readonly("alive_count", &ft::Particles::alive_count)
      .def("_view",
           [](py::object self, const std::string& name) -> py::array {
             ft::Particles& p = self.cast<ft::Particles&>();
             if (name == "x") return view_of(p.x, self, true);
             if (name == "px") return view_of(p.px, self, true);
             if (name == "y") return view_of(p.y, self, true);
             if (name == "py") return view_of(p.py, self, true);
             if (name == "zeta") return view_of(p.zeta, self, true);
             if (name == "delta") return view_of(p.delta, self, false);
             if (name == "ptau") return view_of(p.ptau, self, false);
             if (name == "rpp") return view_of(p.rpp, self, false);
             if (name == "rvv") return view_of(p.rvv, self, false);
             if (name == "state") return view_of(p.state, self, false);
             if (name == "lost_turn") return view_of(p.lost_turn, self, false);
             if (name == "lost_element") return view_of(p.lost_element, self, false);
             if (name == "id") return view_of(p.id, self, false);
             if (name == "variant") {  // lattice variants: all 0 until assigned
               if (p.variant.empty()) p.variant.assign(p.size(), 0);
               return view_of(p.variant, self, false);
             }
             throw py::attribute_error(name);
           })
      .def("_assign_variant",
           [](ft::Particles& p, const py::array_t<int64_t, py::array::forcecast>& v) {
             if (static_cast<size_t>(v.size()) != p.size())
               argument_error("variant",
                              fmt::format("needs {} entries (one per particle), got {}", p.size(), v.size()));
             p.variant.resize(p.size());
             for (size_t i = 0; i < p.size(); ++i) {
               const int64_t k = v.at(static_cast<py::ssize_t>(i));
               if (k < 0 || k > INT32_MAX) argument_error("variant", fmt::format("entry {} is {}", i, k));
               p.variant[i] = static_cast<int32_t>(k);
             }
           })
      .def("_assign",
           [](ft::Particles& p, const std::string& name, const py::array_t<double, py::array::forcecast>& v) {
             if (name == "x") return copy_into(p.x, v, "x");
             if (name == "px") return copy_into(p.px, v, "px");
             if (name == "y") return copy_into(p.y, v, "y");
             if (name == "py") return copy_into(p.py, v, "py");
             if (name == "zeta") return copy_into(p.zeta, v, "zeta");
             if (name == "delta") {  // ptau, rpp, rvv follow (xtrack's update_delta)
               std::vector<double> d(p.size());
               copy_into(d, v, "delta");
               for (size_t i = 0; i < p.size(); ++i) {
                 ft::ParticleView view = p.view(i);
                 view.update_delta(d[i]);
                 p.store(i, view);
               }
               return;
             }
             throw py::attribute_error(name + " cannot be assigned (only x, px, y, py, zeta, delta)");
           })
      .def("_data_pointer", [](ft::Particles& p, const std::string& name) -> uintptr_t {
        if (name == "x") return reinterpret_cast<uintptr_t>(p.x.data());
        if (name == "delta") return reinterpret_cast<uintptr_t>(p.delta.data());
        if (name == "state") return reinterpret_cast<uintptr_t>(p.state.data());
        throw py::attribute_error(name);
      });
}

}  // namespace fusetrack_python
