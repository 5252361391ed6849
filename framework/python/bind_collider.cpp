// Python bindings: collider runs.
#include "bindings.h"

namespace fusetrack_python {

namespace {

// ---------------------------------------------------------------------------------------------
// Colliders

/// The records as NumPy columns, one per CrossingRecord field (beam 1 or 2, as bunches.csv).
py::dict crossing_record_columns(const std::vector<ft::CrossingRecord>& records) {
  const size_t n = records.size();
  std::vector<int64_t> slot(n), turn(n);
  std::vector<int32_t> beam(n), bunch(n), partner(n);
  static const char* kMeanNames[6] = {"x", "px", "y", "py", "zeta", "delta"};
  static const char* kDoubleNames[] = {"alive",       "luminosity",  "sigma_x",     "sigma_y",  "sigma_zeta",
                                       "sigma_delta", "emittance_x", "emittance_y", "coupling", "unused_charge"};
  std::vector<std::vector<double>> means(6, std::vector<double>(n));
  std::vector<std::vector<double>> doubles(std::size(kDoubleNames), std::vector<double>(n));
  for (size_t i = 0; i < n; ++i) {
    const ft::CrossingRecord& r = records[i];
    slot[i] = r.slot, turn[i] = r.turn;
    beam[i] = r.beam + 1, bunch[i] = r.bunch, partner[i] = r.partner;
    for (size_t k = 0; k < 6; ++k) means[k][i] = r.mean[k];
    const double values[] = {r.alive,       r.luminosity,  r.sigma_x,     r.sigma_y,  r.sigma_zeta,
                             r.sigma_delta, r.emittance_x, r.emittance_y, r.coupling, r.unused_charge};
    for (size_t k = 0; k < std::size(kDoubleNames); ++k) doubles[k][i] = values[k];
  }
  py::dict out;
  out["slot"] = copy_array(slot);
  out["beam"] = copy_array(beam);
  out["bunch"] = copy_array(bunch);
  out["partner"] = copy_array(partner);
  out["turn"] = copy_array(turn);
  for (size_t k = 0; k < std::size(kDoubleNames); ++k) out[py::str(kDoubleNames[k])] = copy_array(doubles[k]);
  for (size_t k = 0; k < 6; ++k) out[py::str(kMeanNames[k])] = copy_array(means[k]);
  return out;
}

/// A collider run (ft::run_collide on ft::world(), as `fusetrack collide`). `setup`: a set-up
/// file's path, or its document (a dict; "<dict>" in messages, relative paths from the working
/// directory).
py::dict collide(const py::object& setup_arg, int64_t turns, int threads, const std::string& placement,
                 const std::string& output_dir, const std::string& device, const std::string& fma) {
  if (threads < 0) argument_error("threads", fmt::format("must not be negative, got {}", threads));
  const ft::ColliderSetup setup = py::isinstance<py::dict>(setup_arg)
                                      ? ft::collider_setup_from_json(to_json(setup_arg), "<dict>")
                                      : ft::read_collider_setup(setup_arg.cast<std::string>());
  ft::CollideOptions o;
  o.turns = turns;
  o.threads = threads;
  o.placement = ft::parse_bunch_placement(placement, "placement");
  ft::check_device_name(device, "device");
  o.backend.device = device;
  o.fma = ft::parse_fma_mode(fma, "fma");
  o.output_dir = output_dir;
  ft::Communicator& comm = ft::world();
  if (!output_dir.empty() && comm.is_root()) ft::check_output_directory(output_dir, "output_dir");
  ft::CollideResult r;
  {
    py::gil_scoped_release release;
    r = ft::run_collide(setup, *default_registry(), o, comm);
  }
  const auto pairs = [](const std::array<std::array<double, 2>, 2>& v) {
    py::array_t<double> a({2, 2});
    for (size_t beam = 0; beam < 2; ++beam)
      for (size_t plane = 0; plane < 2; ++plane) a.mutable_at(beam, plane) = v[beam][plane];
    return a;
  };
  py::dict d;
  d["records"] = crossing_record_columns(r.records);
  d["summary"] = from_json(ft::collide_summary_json(setup, o, r));
  d["xi"] = pairs(r.xi);
  d["tunes"] = pairs(r.tunes);
  d["sigma_mode"] = array_of(r.sigma_mode);
  d["pi_mode"] = array_of(r.pi_mode);
  d["luminosity"] = r.luminosity;
  d["crossing_frequency"] = r.crossing_frequency;
  d["output_files"] = r.output_files;
  d["device"] = r.device;  // where the linear-map bunches ran ("CPU" or "GPU i (name)")
  return d;
}

}  // namespace

void bind_collider(py::module_& m) {
  m.def("_collide", &collide, py::arg("setup"), py::arg("turns"), py::arg("threads"), py::arg("placement"),
        py::arg("output_dir"), py::arg("device"), py::arg("fma"));
}

}  // namespace fusetrack_python
