// Python bindings: dynamic-aperture scans and studies.
#include "bindings.h"

namespace fusetrack_python {

namespace {

/// A study's results (DaJob::study_summary) as NumPy: names, per row the statistics, per variant the DA.
py::dict study_dict(const ft::DaStudySummary& st, const ft::DaScan& scan) {
  py::dict d;
  d["names"] = st.names;
  std::vector<double> delta, angle, lo, mean, sd, hi;
  py::array_t<double> per({st.rows.size(), st.names.size()});
  for (size_t r = 0; r < st.rows.size(); ++r) {
    const ft::DaStudyRow& row = st.rows[r];
    delta.push_back(row.delta);
    angle.push_back(row.angle);
    lo.push_back(row.min);
    mean.push_back(row.mean);
    sd.push_back(row.std);
    hi.push_back(row.max);
    for (size_t v = 0; v < row.per_variant.size(); ++v) per.mutable_at(r, v) = row.per_variant[v];
  }
  d["delta"] = copy_array(delta);
  d[scan.config.grid == ft::DaGrid::Cartesian ? "x" : "angle"] = copy_array(angle);
  d["min"] = copy_array(lo);
  d["mean"] = copy_array(mean);
  d["std"] = copy_array(sd);
  d["max"] = copy_array(hi);
  d["per_variant"] = per;
  std::vector<double> da_min;
  for (const ft::DaSummary& s : st.per_variant) da_min.push_back(s.da_min);
  d["da_min_per_variant"] = copy_array(da_min);
  d["variant"] = copy_array(scan.variant);
  return d;
}

py::dict da_scan(const LatticePtr& h, const ft::DaConfig& config, const std::string& device, const std::string& fma,
                 int threads, const std::string& dispatch, const std::string& output, int64_t checkpoint_every,
                 const std::vector<std::string>& variant_files) {
  // The scan sets the lattice's per-turn limits: it works on a copy.
  ft::Lattice lattice = h->lattice;
  ft::LatticeVariants variants;
  if (!variant_files.empty()) variants = ft::load_variants(lattice, variant_files, *h->registry);
  ft::DaJobOptions jo;
  jo.lattice_file = h->lattice.source_file();
  jo.output = output;
  jo.checkpoint_every = checkpoint_every;
  jo.fma = ft::parse_fma_mode(fma, "fma");
  jo.threads = threads;
  ft::BackendChoice choice;
  choice.device = device;
  choice.dispatch = dispatch_from_name(dispatch);
  ft::DaJobStatus status;
  std::unique_ptr<ft::DaJob> job;
  std::string backend_name;
  {
    py::gil_scoped_release release;
    job = variant_files.empty() ? std::make_unique<ft::DaJob>(lattice, config, jo)
                                : std::make_unique<ft::DaJob>(variants, config, jo);
    auto backend = ft::make_backend(variant_files.empty() ? lattice : variants.lattices[0], choice, nullptr);
    backend_name = backend->name();
    status = job->run(*backend);
  }
  if (status != ft::DaJobStatus::Finished) throw ft::Error("the DA scan stopped before its last turn");
  const ft::DaScan& scan = job->scan();
  const ft::DaSummary& summary = job->summary();
  py::dict d;
  d["backend"] = backend_name;
  d["turns"] = scan.config.turns;
  d["amplitude"] = copy_array(scan.amplitude);
  d["angle"] = copy_array(scan.angle);
  d["grid_x"] = copy_array(scan.grid_x);
  d["grid_y"] = copy_array(scan.grid_y);
  d["delta_index"] = copy_array(scan.delta_index);
  d["initial"] = scan.initial;
  d["final"] = scan.particles;
  d["lost_turn"] = copy_array(scan.particles.lost_turn);
  d["survived"] = [&] {
    std::vector<uint8_t> alive(scan.particles.size());
    for (size_t i = 0; i < alive.size(); ++i) alive[i] = scan.particles.state[i] > 0;
    return py::array_t<bool>(alive.size(), reinterpret_cast<const bool*>(alive.data()));
  }();
  std::vector<double> a_delta, a_angle, first, last, refined;
  for (const auto& r : summary.per_angle) {
    a_delta.push_back(r.delta);
    a_angle.push_back(r.angle);
    first.push_back(r.da_first_loss);
    last.push_back(r.da_last_stable);
    refined.push_back(r.da_refined);
  }
  py::dict per_angle;
  per_angle["delta"] = copy_array(a_delta);
  per_angle["angle"] = copy_array(a_angle);
  per_angle["da_first_loss"] = copy_array(first);
  per_angle["da_last_stable"] = copy_array(last);
  per_angle["da_refined"] = copy_array(refined);
  d["per_angle"] = per_angle;
  d["da_min"] = summary.da_min;
  d["da_mean"] = summary.da_mean;
  d["da_max"] = summary.da_max;
  d["turn_checkpoints"] = copy_array(summary.turn_checkpoints);
  py::array_t<double> vs({summary.da_vs_turns.size(), summary.turn_checkpoints.size()});
  for (size_t i = 0; i < summary.da_vs_turns.size(); ++i)
    for (size_t j = 0; j < summary.da_vs_turns[i].size() && j < summary.turn_checkpoints.size(); ++j)
      vs.mutable_at(i, j) = summary.da_vs_turns[i][j];
  d["da_vs_turns"] = vs;
  d["closed_orbit"] = py::array_t<double>(6, scan.closed_orbit);
  if (job->study()) d["study"] = study_dict(job->study_summary(), scan);
  return d;
}

}  // namespace

void bind_da(py::module_& m) {
  py::class_<ft::DaConfig>(m, "_DaConfig")
      .def(py::init<>())
      .def_readwrite("turns", &ft::DaConfig::turns)
      .def_property(
          "grid", [](const ft::DaConfig& c) { return c.grid == ft::DaGrid::Cartesian ? "cartesian" : "polar"; },
          [](ft::DaConfig& c, const std::string& g) {
            c.grid =
                choice<ft::DaGrid>("grid", g, {{"polar", ft::DaGrid::Polar}, {"cartesian", ft::DaGrid::Cartesian}});
          })
      .def_property(
          "units", [](const ft::DaConfig& c) { return c.units == ft::DaUnits::Sigma ? "sigma" : "m"; },
          [](ft::DaConfig& c, const std::string& u) {
            c.units = choice<ft::DaUnits>("units", u, {{"m", ft::DaUnits::Metres}, {"sigma", ft::DaUnits::Sigma}});
          })
      .def_readwrite("angles", &ft::DaConfig::angles)
      .def_readwrite("angle_min", &ft::DaConfig::angle_min)
      .def_readwrite("angle_max", &ft::DaConfig::angle_max)
      .def_readwrite("amplitudes", &ft::DaConfig::amplitudes)
      .def_readwrite("amplitude_min", &ft::DaConfig::amplitude_min)
      .def_readwrite("amplitude_max", &ft::DaConfig::amplitude_max)
      .def_readwrite("nx", &ft::DaConfig::nx)
      .def_readwrite("ny", &ft::DaConfig::ny)
      .def_readwrite("x_min", &ft::DaConfig::x_min)
      .def_readwrite("x_max", &ft::DaConfig::x_max)
      .def_readwrite("y_min", &ft::DaConfig::y_min)
      .def_readwrite("y_max", &ft::DaConfig::y_max)
      .def_readwrite("emittance_nx", &ft::DaConfig::emittance_nx)
      .def_readwrite("emittance_ny", &ft::DaConfig::emittance_ny)
      .def_readwrite("px0", &ft::DaConfig::px0)
      .def_readwrite("py0", &ft::DaConfig::py0)
      .def_readwrite("zeta0", &ft::DaConfig::zeta0)
      .def_readwrite("deltas", &ft::DaConfig::deltas)
      .def_readwrite("around_closed_orbit", &ft::DaConfig::around_closed_orbit)
      .def_property(
          "turn_limits", [](const ft::DaConfig& c) { return std::vector<double>(c.turn_limits, c.turn_limits + 6); },
          [](ft::DaConfig& c, const std::vector<double>& v) {
            if (v.size() != 6) {
              argument_error("limits", "expects six values: x px y py zeta delta (0: no limit)");
            }
            std::copy(v.begin(), v.end(), c.turn_limits);
          })
      .def_readwrite("refine_resolution", &ft::DaConfig::refine_resolution);
  m.def("_da_scan", &da_scan, py::arg("lattice"), py::arg("config"), py::arg("device"), py::arg("fma"),
        py::arg("threads"), py::arg("dispatch"), py::arg("output"), py::arg("checkpoint_every"), py::arg("variants"));
}

}  // namespace fusetrack_python
