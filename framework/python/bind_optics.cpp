// Python bindings: linear optics at the start and along the ring.
#include "bindings.h"

namespace fusetrack_python {

namespace {

py::array_t<double> matrix_of(const ft::Matrix6& m) {
  py::array_t<double> a({6, 6});
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = 0; j < 6; ++j) a.mutable_at(i, j) = m[i][j];
  return a;
}

py::dict optics_dict(const LatticeHandle& h, bool force_4d, double delta0, int64_t tracking_turns, int threads) {
  if (tracking_turns > 0 && tracking_turns < 16) {
    argument_error("tracking_turns", fmt::format("needs 0 (no tracking) or at least 16 turns, got {}", tracking_turns));
  }
  ft::OpticsOptions options;
  options.force_4d = force_4d;
  options.delta0 = delta0;
  options.threads = threads;
  ft::LinearOptics o;
  ft::TrackedTunes tracked;
  {
    py::gil_scoped_release release;
    o = ft::compute_linear_optics(h.lattice, options);
    if (tracking_turns > 0) tracked = ft::tunes_by_tracking(h.lattice, o, tracking_turns, options);
  }
  py::dict d;
  d["circumference"] = o.circumference;
  d["beta0"] = o.beta0;
  d["gamma0"] = o.gamma0;
  d["six_d"] = o.six_d;
  d["method"] = o.mode_reason;
  d["closed_orbit"] = array_of(o.closed_orbit);
  d["matrix"] = matrix_of(o.map.matrix);
  d["matrix_4d"] = matrix_of(o.map_4d.matrix);
  // qx, qy as the CLI's JSON: the method's map (6D eigen-tunes in 6D); qx_4d, qy_4d: the 4D map.
  const double qx = o.six_d ? o.qx_6d : o.qx, qy = o.six_d ? o.qy_6d : o.qy;
  d["tunes"] = array_of(std::array<double, 3>{qx, qy, o.qs});
  for (const auto& [k, v] : std::vector<std::pair<const char*, double>>{{"qx", qx},
                                                                        {"qy", qy},
                                                                        {"qs", o.qs},
                                                                        {"beta_x", o.beta_x},
                                                                        {"alpha_x", o.alpha_x},
                                                                        {"gamma_x", o.gamma_x},
                                                                        {"beta_y", o.beta_y},
                                                                        {"alpha_y", o.alpha_y},
                                                                        {"gamma_y", o.gamma_y},
                                                                        {"beta_s", o.beta_s},
                                                                        {"alpha_s", o.alpha_s},
                                                                        {"dx", o.dx},
                                                                        {"dpx", o.dpx},
                                                                        {"dy", o.dy},
                                                                        {"dpy", o.dpy},
                                                                        {"dqx", o.dqx},
                                                                        {"dqy", o.dqy},
                                                                        {"eta", o.eta},
                                                                        {"alpha_c", o.alpha_c},
                                                                        {"gamma_tr", o.gamma_tr},
                                                                        {"qx_6d", o.qx_6d},
                                                                        {"qy_6d", o.qy_6d},
                                                                        {"qx_4d", o.qx},
                                                                        {"qy_4d", o.qy}})
    d[k] = v;
  d["residual"] = o.map.residual;
  d["iterations"] = o.map.iterations;
  if (tracking_turns > 0)
    d["tunes_from_tracking"] = array_of(std::array<double, 3>{tracked.qx, tracked.qy, tracked.qs});
  return d;
}

/// Optics at every element (ft::compute_twiss_table): NumPy columns by name.
py::dict twiss_dict(const LatticeHandle& h, bool force_4d, double delta0, int threads) {
  ft::OpticsOptions options;
  options.force_4d = force_4d;
  options.delta0 = delta0;
  options.threads = threads;
  ft::TwissTable t;
  {
    py::gil_scoped_release release;
    t = ft::compute_twiss_table(h.lattice, options);
  }
  py::dict d;
  d["name"] = t.name;
  d["type"] = t.type;
  for (const auto& [name, column] : t.numeric_columns()) d[py::str(name)] = copy_array(*column);
  d["circumference"] = t.circumference;
  d["six_d"] = t.six_d;
  d["method"] = t.mode_reason;
  d["q1"] = t.q1;
  d["q2"] = t.q2;
  d["qx_total"] = t.qx_total;
  d["qy_total"] = t.qy_total;
  d["max_coupling"] = t.max_coupling;
  return d;
}

}  // namespace

void bind_optics(py::module_& m) {
  // Optics, DA, repro
  m.def(
      "_optics",
      [](const LatticeHandle& h, bool force_4d, double delta0, int64_t tracking_turns, int threads) {
        return optics_dict(h, force_4d, delta0, tracking_turns, threads);
      },
      py::arg("lattice"), py::arg("force_4d") = false, py::arg("delta0") = 0.0, py::arg("tracking_turns") = 0,
      py::arg("threads") = 0);

  m.def(
      "_twiss_table",
      [](const LatticeHandle& h, bool force_4d, double delta0, int threads) {
        return twiss_dict(h, force_4d, delta0, threads);
      },
      py::arg("lattice"), py::arg("force_4d") = false, py::arg("delta0") = 0.0, py::arg("threads") = 0);
}

}  // namespace fusetrack_python
