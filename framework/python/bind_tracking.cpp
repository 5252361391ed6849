// Python bindings: the tracker and its monitor, and the CPU-GPU reproduction check.
#include "bindings.h"

namespace fusetrack_python {

namespace {

// ---------------------------------------------------------------------------------------------
// Tracker and monitor

struct Monitor {
  int64_t every = 1;
  int64_t profile_every = 0;
  std::unique_ptr<ft::BunchMonitor> result;
};

py::dict npy_arrays(const std::vector<std::pair<std::string, ft::NpyArray>>& members) {
  py::dict out;
  for (const auto& [name, a] : members) {
    const py::dtype dtype(a.dtype);
    std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
    py::array arr(dtype, shape);
    std::memcpy(arr.mutable_data(), a.data.data(), a.data.size());
    out[py::str(name)] = arr;
  }
  return out;
}

py::dict snapshot_dict(const ft::CollectiveSnapshot& s) {
  py::dict d;
  d["element"] = s.element_name;
  d["sequence_index"] = s.sequence_index;
  d["zeta_min"] = s.grid.zeta_min;
  d["zeta_max"] = s.grid.zeta_max;
  d["n_slices"] = s.grid.n_slices;
  d["counts"] = py::array_t<uint64_t>(s.counts.size(), s.counts.data());
  d["field"] = py::array_t<double>(s.field.size(), s.field.data());
  return d;
}

class Tracker {
 public:
  Tracker(LatticePtr lattice, const std::string& device, const std::string& fma, int threads,
          const std::string& dispatch, const std::string& kernel_cache, const std::vector<std::string>& variants)
      : m_lattice(std::move(lattice)), m_fma(ft::parse_fma_mode(fma, "fma")), m_threads(threads) {
    if (threads < 0) {
      argument_error("threads", fmt::format("must not be negative, got {}", threads));
    }
    ft::BackendChoice choice;
    choice.device = device;
    choice.dispatch = dispatch_from_name(dispatch);
    choice.cache_dir = kernel_cache;
    if (!variants.empty()) m_variants = ft::load_variants(m_lattice->lattice, variants, *m_lattice->registry);
    m_backend = ft::make_backend(tracked(), choice, &m_notices);
    if (!variants.empty()) m_backend->set_variants(m_variants.pointers());
    m_revision = m_lattice->revision;
  }

  /// The lattice the backend tracks: the first variant with variants (their lattices are fixed
  /// when the tracker is made), else the handle's.
  const ft::Lattice& tracked() const {
    return m_variants.lattices.empty() ? m_lattice->lattice : m_variants.lattices[0];
  }
  std::vector<std::string> variant_names() const { return m_variants.names; }

  py::dict track(ft::Particles& particles, int64_t turns, Monitor* monitor, const std::string& progress,
                 int64_t space_charge_update, const py::object& space_charge_intensity) {
    if (turns < 1) {
      argument_error("turns", fmt::format("must be positive, got {}", turns));
    }
    if (progress != "auto" && progress != "on" && progress != "off") {
      argument_error("progress", fmt::format("'{}': expected auto, on or off", progress));
    }
    if (m_lattice->revision != m_revision) {  // fields changed since the last track
      if (!m_variants.lattices.empty())
        throw ft::Error("the lattice changed after the tracker was made with variants: make a new Tracker");
      m_backend->parameters_changed();
      m_revision = m_lattice->revision;
    }
    ft::TrackRunOptions o;
    o.turns = turns;
    o.threads = m_threads;
    o.fma = m_fma;
    o.progress = progress;
    if (monitor) {
      o.monitor = true;
      o.monitor_every = monitor->every;
      o.profile_every = monitor->profile_every;
    }
    // Frozen space charge that follows the beam (the lattice's SpaceChargeBiGaussian fields change).
    const bool follow = space_charge_update != 0;
    if (follow) {
      if (!m_variants.lattices.empty())
        argument_error("space_charge_update", "does not mix with a Tracker made with variants");
      o.space_charge.every = space_charge_update;
      o.space_charge.lattice = &m_lattice->lattice;
      o.space_charge.intensity = space_charge_intensity.is_none() ? -1.0 : space_charge_intensity.cast<double>();
      if (!space_charge_intensity.is_none() && !(o.space_charge.intensity >= 0.0))
        argument_error("space_charge_intensity", fmt::format("must be >= 0, got {}", o.space_charge.intensity));
      o.space_charge.label = "space_charge_update";
    }
    ft::TrackRun run;
    try {
      py::gil_scoped_release release;
      run = ft::run_tracking(tracked(), *m_backend, particles, o);
    } catch (...) {
      if (follow) ++m_lattice->revision;  // other trackers of this lattice take what changed
      throw;
    }
    if (follow) {
      ++m_lattice->revision;  // this tracker's backend has the new values already
      m_revision = m_lattice->revision;
    }
    if (monitor) monitor->result = std::move(run.monitor);
    py::dict out;
    out["seconds"] = run.seconds;
    out["backend"] = run.backend;
    py::list collective;
    for (const auto& s : run.collective) collective.append(snapshot_dict(s));
    out["collective"] = collective;
    if (follow) {
      py::list updates;
      for (const ft::SpaceChargeUpdate& u : run.space_charge_updates) {
        py::dict d;
        d["turn"] = u.turn;
        d["alive"] = u.alive;
        d["emittance_x"] = u.emittance_x;
        d["emittance_y"] = u.emittance_y;
        d["rms_delta"] = u.rms_delta;
        d["rms_zeta"] = u.rms_zeta;
        d["mean_zeta"] = u.mean_zeta;
        d["mean_sigma_x"] = u.mean_sigma_x;
        d["mean_sigma_y"] = u.mean_sigma_y;
        std::vector<double> sx, sy;
        for (const ft::SpaceChargeSizes& z : u.sizes) sx.push_back(z.sigma_x), sy.push_back(z.sigma_y);
        d["sigma_x"] = py::array_t<double>(sx.size(), sx.data());
        d["sigma_y"] = py::array_t<double>(sy.size(), sy.data());
        d["number_of_particles"] = u.sizes.empty() ? 0.0 : u.sizes.front().number_of_particles;
        updates.append(d);
      }
      py::list names;
      for (const auto& e : run.space_charge_elements) names.append(tracked().element(e.sequence_index).name);
      out["space_charge_elements"] = names;
      out["space_charge"] = updates;
    }
    return out;
  }

  std::string backend_name() const { return m_backend->name(); }
  const std::vector<std::string>& notices() const { return m_notices; }
  LatticePtr lattice() const { return m_lattice; }

 private:
  LatticePtr m_lattice;
  ft::FmaMode m_fma;
  int m_threads;
  ft::LatticeVariants m_variants;  // Tracker(variants=...): every particle tracked through its variant
  std::unique_ptr<ft::Backend> m_backend;
  std::vector<std::string> m_notices;
  uint64_t m_revision = 0;
};

py::dict repro(const LatticePtr& h, const ft::Particles& initial, int64_t turns, const std::string& fma, int threads,
               const std::string& kernel_cache) {
  ft::ReproOptions o;
  o.turns = turns;
  o.fma = ft::parse_fma_mode(fma, "fma");
  o.threads = threads;
  o.cache_dir = kernel_cache;
  ft::ReproResult r;
  {
    py::gil_scoped_release release;
    r = ft::run_repro(h->lattice, initial, o);
  }
  py::dict d;
  d["identical"] = r.identical;
  d["gpu"] = r.gpu_name;
  d["coordinates"] = r.comparison.coordinates;
  d["bitwise_equal"] = r.comparison.bitwise_equal;
  d["state_mismatches"] = r.comparison.state_mismatches;
  d["max_ulp"] = r.comparison.max_ulp;
  d["max_relative"] = r.comparison.max_relative;
  d["first_differing"] = r.comparison.first_differing;
  d["cpu_particles"] = r.cpu;
  d["gpu_particles"] = r.gpu;
  d["cpu_seconds"] = r.cpu_seconds;
  d["gpu_kernel_seconds"] = r.gpu_stats.kernel_seconds;
  py::list collective;
  for (const auto& c : r.collective) {
    py::dict cd;
    cd["element"] = c.element_name;
    cd["counts_identical"] = c.counts_identical;
    cd["field_equal"] = c.field_equal;
    cd["field_size"] = c.field_size;
    cd["max_difference"] = c.max_difference;
    collective.append(cd);
  }
  d["collective"] = collective;
  if (r.divergence.found) {
    py::dict dv;
    dv["turn"] = r.divergence.turn;
    dv["element"] = r.divergence.element;
    dv["element_name"] = r.divergence.element_name;
    dv["element_type"] = r.divergence.element_type;
    d["divergence"] = dv;
  } else {
    d["divergence"] = py::none();
  }
  return d;
}

}  // namespace

void bind_tracking(py::module_& m) {
  // Tracking
  py::class_<Monitor>(m, "_Monitor")
      .def(py::init([](int64_t every, int64_t profile_every) {
             auto mon = std::make_unique<Monitor>();
             mon->every = every;
             mon->profile_every = profile_every;
             return mon;
           }),
           py::arg("every") = 1, py::arg("profile_every") = 0)
      .def_readonly("every", &Monitor::every)
      .def_readonly("profile_every", &Monitor::profile_every)
      .def("_arrays",
           [](const Monitor& mon) {
             if (!mon.result) throw ft::Error("the monitor has recorded nothing yet: pass it to Tracker.track");
             return npy_arrays(mon.result->arrays());
           })
      .def("_write", [](const Monitor& mon, const std::string& path) {
        if (!mon.result) throw ft::Error("the monitor has recorded nothing yet: pass it to Tracker.track");
        mon.result->write(path);
      });

  py::class_<Tracker>(m, "_Tracker")
      .def(py::init<LatticePtr, const std::string&, const std::string&, int, const std::string&, const std::string&,
                    const std::vector<std::string>&>(),
           py::arg("lattice"), py::arg("device") = "auto", py::arg("fma") = "off", py::arg("threads") = 0,
           py::arg("dispatch") = "auto", py::arg("kernel_cache") = "", py::arg("variants") = std::vector<std::string>{})
      .def_property_readonly("variant_names", &Tracker::variant_names)
      .def("track", &Tracker::track, py::arg("particles"), py::arg("turns"), py::arg("monitor") = nullptr,
           py::arg("progress") = "off", py::arg("space_charge_update") = 0,
           py::arg("space_charge_intensity") = py::none())
      .def_property_readonly("backend", &Tracker::backend_name)
      .def_property_readonly("notices", &Tracker::notices)
      .def_property_readonly("lattice", &Tracker::lattice);

  m.def("_repro", &repro, py::arg("lattice"), py::arg("particles"), py::arg("turns"), py::arg("fma"),
        py::arg("threads"), py::arg("kernel_cache"));
}

}  // namespace fusetrack_python
