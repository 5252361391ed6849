// Python bindings: space-charge elements installed, removed and following the beam; tune footprints.
#include "bindings.h"

namespace fusetrack_python {

namespace {

// Space charge: install/remove frozen or PIC elements (fusetrack/space_charge_install.h) and tune footprints.
py::dict install_space_charge(const LatticePtr& h, int64_t elements, const std::vector<double>& positions,
                              double intensity, double eps_nx, double eps_ny, double sigma_zeta, double delta_rms,
                              const py::object& z0, const std::string& prefix, bool force_4d, int threads,
                              const std::string& model, const std::string& pic_model, const std::vector<int>& nodes,
                              double extent_sigmas, double fixed_grid_sigmas) {
  ft::SpaceChargeInstallOptions o;
  o.elements = elements;
  o.positions = positions;
  o.intensity = intensity;
  o.eps_nx = eps_nx;
  o.eps_ny = eps_ny;
  o.sigma_zeta = sigma_zeta;
  o.delta_rms = delta_rms;
  if (!z0.is_none()) o.z0 = z0.cast<double>();
  o.prefix = prefix;
  o.optics.force_4d = force_4d;
  o.optics.threads = threads;
  if (model != "frozen" && model != "pic") argument_error("model", "frozen or pic");
  if (nodes.size() != 3) argument_error("nodes", "expects three values: nodes in x, y and zeta");
  o.pic = model == "pic";
  o.pic_model = pic_model;
  o.pic_nodes = {nodes[0], nodes[1], nodes[2]};
  o.pic_extent_sigmas = extent_sigmas;
  o.pic_fixed_sigmas = fixed_grid_sigmas;
  ft::InstalledSpaceCharge sc;
  {
    py::gil_scoped_release release;
    sc = ft::install_space_charge(h->lattice, o, *h->registry, h->lattice.source_file());
  }
  py::list kicks;
  for (const ft::SpaceChargeKick& k : sc.kicks) {
    py::dict e;
    e["name"] = k.name;
    e["s"] = k.s;
    e["length"] = k.length;
    e["beta_x"] = k.beta_x;
    e["beta_y"] = k.beta_y;
    e["dx"] = k.dx;
    e["dy"] = k.dy;
    e["sigma_x"] = k.sigma_x;
    e["sigma_y"] = k.sigma_y;
    kicks.append(e);
  }
  py::dict d;
  d["lattice"] =
      make_handle(ft::lattice_from_json(sc.lattice, h->lattice.source_file() + " + space charge", *h->registry));
  d["kicks"] = kicks;
  d["laslett_dqx"] = sc.laslett_dqx;
  d["laslett_dqy"] = sc.laslett_dqy;
  return d;
}

py::dict tune_footprint(const LatticePtr& h, double eps_nx, double eps_ny, double max_sigma, int amplitudes, int angles,
                        int64_t turns, double zeta, double delta, const std::string& device, const std::string& fma,
                        int threads) {
  ft::FootprintOptions o;
  o.emittance_nx = eps_nx;
  o.emittance_ny = eps_ny;
  o.max_sigma = max_sigma;
  o.amplitudes = amplitudes;
  o.angles = angles;
  o.turns = turns;
  o.zeta_offset = zeta;
  o.delta_offset = delta;
  o.threads = threads;
  o.fma = ft::parse_fma_mode(fma, "fma");
  ft::BackendChoice choice;
  choice.device = device;
  ft::TuneFootprint fp;
  ft::LinearOptics optics;
  std::string backend_name;
  {
    py::gil_scoped_release release;
    // As the command line does: beam sizes and reference tunes of the ring without its frozen
    // space-charge elements and with its beam-beam lenses switched off.
    size_t removed = 0;
    const nlohmann::ordered_json bare = ft::remove_space_charge(h->lattice, h->lattice.source_file(), &removed);
    ft::OpticsOptions oo;
    oo.threads = threads;
    optics = ft::compute_linear_optics(
        ft::without_beam_beam_lenses(removed > 0 ? ft::lattice_from_json(bare, "bare", *h->registry) : h->lattice), oo);
    auto backend = ft::make_backend(h->lattice, choice, nullptr);
    backend_name = backend->name();
    fp = ft::tune_footprint(h->lattice, optics, *backend, o);
  }
  py::dict d;
  d["backend"] = backend_name;
  d["amplitude_x"] = copy_array(fp.amplitude_x);
  d["amplitude_y"] = copy_array(fp.amplitude_y);
  d["qx"] = copy_array(fp.qx);
  d["qy"] = copy_array(fp.qy);
  d["lost_turn"] = copy_array(fp.lost_turn);
  d["qx0"] = optics.qx;
  d["qy0"] = optics.qy;
  d["sigma_x"] = fp.sigma_x;
  d["sigma_y"] = fp.sigma_y;
  return d;
}

}  // namespace

void bind_space_charge(py::module_& m) {
  m.def("_install_space_charge", &install_space_charge, py::arg("lattice"), py::arg("elements"), py::arg("positions"),
        py::arg("intensity"), py::arg("eps_nx"), py::arg("eps_ny"), py::arg("sigma_zeta"), py::arg("delta_rms"),
        py::arg("z0"), py::arg("prefix"), py::arg("force_4d"), py::arg("threads"), py::arg("model"),
        py::arg("pic_model"), py::arg("nodes"), py::arg("extent_sigmas"), py::arg("fixed_grid_sigmas"));
  // Frozen space charge that follows the beam: update() changes the lattice's fields (a Tracker of
  // that lattice re-uploads them at its next track()).
  struct SpaceChargeBeamSizes {
    LatticePtr lattice;
    ft::SpaceChargeBeamSizes sizes;
  };
  py::class_<SpaceChargeBeamSizes>(m, "_SpaceChargeBeamSizes")
      .def(py::init([](const LatticePtr& h) {
             return SpaceChargeBeamSizes{h, ft::SpaceChargeBeamSizes(h->lattice)};
           }),
           py::arg("lattice"))
      .def(
          "update",
          [](SpaceChargeBeamSizes& s, const ft::Particles& particles, double intensity) {
            s.sizes.update(s.lattice->lattice, particles, intensity);
            ++s.lattice->revision;
          },
          py::arg("particles"), py::arg("intensity"))
      .def_property_readonly("elements", [](const SpaceChargeBeamSizes& s) { return s.sizes.elements(); });
  m.def(
      "_remove_space_charge",
      [](const LatticePtr& h) {
        return make_handle(ft::lattice_from_json(ft::remove_space_charge(h->lattice, h->lattice.source_file()),
                                                 h->lattice.source_file(), *h->registry));
      },
      py::arg("lattice"));
  m.def("_tune_footprint", &tune_footprint, py::arg("lattice"), py::arg("eps_nx"), py::arg("eps_ny"),
        py::arg("max_sigma"), py::arg("amplitudes"), py::arg("angles"), py::arg("turns"), py::arg("zeta"),
        py::arg("delta"), py::arg("device"), py::arg("fma"), py::arg("threads"));
}

}  // namespace fusetrack_python
