// Python bindings: bunch trains.
#include "bindings.h"

namespace fusetrack_python {

void bind_trains(py::module_& m) {
  // Bunch trains (fusetrack/bunch_train.h).
  m.def(
      "_declared_train",
      [](const LatticePtr& h) {
        const ft::BunchTrain t = ft::declared_train(h->lattice);
        py::dict d;
        d["bunches"] = t.bunches;
        d["spacing"] = t.spacing;
        d["centre"] = t.centre;
        d["element"] = t.declared_by;
        return d;
      },
      py::arg("lattice"));
  m.def(
      "_make_train",
      [](const std::vector<ft::Particles>& bunches, double spacing) {
        if (bunches.empty()) argument_error("bunches", "a train needs at least one bunch");
        for (const ft::Particles& b : bunches)
          if (b.beta0 != bunches.front().beta0) argument_error("bunches", "the bunches have different beta0");
        return ft::make_bunch_train(static_cast<int>(bunches.size()), spacing,
                                    [&](int b) { return bunches[static_cast<size_t>(b)]; });
      },
      py::arg("bunches"), py::arg("spacing"));
  m.def(
      "_bunch_moments",
      [](const ft::Particles& p, int bunches, double spacing, double centre, size_t total, int threads) {
        ft::BunchTrain t;
        t.bunches = bunches;
        t.spacing = spacing;
        t.centre = centre;
        const ft::TrainMoments moments = ft::bunch_moments(p, t, total == 0 ? p.size() : total, nullptr, threads);
        const char* names[6] = {"mean_x", "mean_px", "mean_y", "mean_py", "mean_zeta", "mean_delta"};
        py::dict d;
        d["macroparticles"] = py::array_t<double>(moments.macroparticles.size(), moments.macroparticles.data());
        for (size_t c = 0; c < 6; ++c) {
          std::vector<double> v;
          for (const auto& u : moments.mean) v.push_back(u[c]);
          d[names[c]] = py::array_t<double>(v.size(), v.data());
        }
        d["emittance_x"] = py::array_t<double>(moments.emittance_x.size(), moments.emittance_x.data());
        d["emittance_y"] = py::array_t<double>(moments.emittance_y.size(), moments.emittance_y.data());
        d["out_of_range"] = moments.out_of_range;
        return d;
      },
      py::arg("particles"), py::arg("bunches"), py::arg("spacing"), py::arg("centre"), py::arg("total"),
      py::arg("threads"));
}

}  // namespace fusetrack_python
