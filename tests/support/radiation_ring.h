// A small isomagnetic electron ring for the radiation tests (elements/radiation.h), and the energy
// spread of a bunch tracked to its radiation equilibrium.
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "fusetrack/optics.h"
#include "fusetrack/radiation_integrals.h"
#include "fusetrack/tracker.h"

namespace ft::test {

/// 8 FODO cells of thick quadrupoles (k = +-4 m^-2, 0.2 m) and two sector bends (1 m, pi / 8, Forest-Ruth
/// with `bend_steps` steps) each, one cavity (harmonic 40, `voltage` [V], lag 180 deg) at the start; electrons
/// of total energy `energy` [eV]; the lattice-wide radiation switch `radiation`. With `thin_bends` each bend
/// is a drift, a thin Multipole (hxl = pi / 8, length 1 m) and a drift instead.
inline nlohmann::ordered_json radiation_test_ring(double energy, const char* radiation, double voltage, int bend_steps,
                                                  bool thin_bends = false) {
  using json = nlohmann::ordered_json;
  const double mass = 510998.95, pi = 3.141592653589793;
  const double p0c = std::sqrt(energy * energy - mass * mass);
  json doc = {
      {"fusetrack_lattice", 1}, {"reference", {{"mass0", mass}, {"q0", -1.0}, {"p0c", p0c}}}, {"radiation", radiation}};
  json elements = json::object();
  elements["qf"] = {{"type", "ThickMultipole"}, {"length", 0.2}, {"kn", {0.0, 4.0}}, {"num_slices", 2}};
  elements["qd"] = {{"type", "ThickMultipole"}, {"length", 0.2}, {"kn", {0.0, -4.0}}, {"num_slices", 2}};
  elements["b"] = {{"type", "Bend"}, {"length", 1.0}, {"angle", pi / 8}, {"num_slices", bend_steps}};
  elements["bt"] = {{"type", "Multipole"}, {"knl", {pi / 8}}, {"hxl", pi / 8}, {"length", 1.0}};
  elements["bd"] = {{"type", "Drift"}, {"length", 0.5}};
  elements["d"] = {{"type", "Drift"}, {"length", 0.25}};
  elements["rf"] = {{"type", "Cavity"}, {"voltage", voltage}, {"harmonic", 40.0}, {"lag", 180.0}};
  doc["elements"] = elements;
  json sequence = json::array({"rf"});
  for (int c = 0; c < 8; ++c)
    for (const char* e : {"qf", "d", "b", "d", "qd", "d", "b", "d"}) {
      if (thin_bends && std::string(e) == "b") {
        for (const char* t : {"bd", "bt", "bd"}) sequence.push_back(t);
      } else {
        sequence.push_back(e);
      }
    }
  doc["sequence"] = sequence;
  return doc;
}

/// The cavity's lag [deg] that gives back U0 [eV] at the synchronous phase, on the stable side of 180.
inline double radiation_synchronous_lag(double voltage, double u0) {
  return 180.0 - std::asin(u0 / voltage) * 180.0 / 3.141592653589793;
}

/// The rms of delta of `particles` around their mean.
inline double rms_delta(const Particles& p) {
  double mean = 0.0, square = 0.0;
  const double n = static_cast<double>(p.size());
  for (size_t i = 0; i < p.size(); ++i) mean += p.delta[i] / n;
  for (size_t i = 0; i < p.size(); ++i) square += (p.delta[i] - mean) * (p.delta[i] - mean) / n;
  return std::sqrt(square);
}

/// The energy spread of `n` particles tracked with quantum excitation on `backend` (its lattice `ring`, the
/// radiating version of `plain`) for `turns` turns from a Gaussian bunch of the integrals' sizes `r` around the
/// closed orbit, averaged over the samples of the last `tail` turns (every 10 turns).
inline double tracked_equilibrium_spread(const Lattice& plain, const Lattice& ring, Backend& backend,
                                         const RadiationIntegrals& r, size_t n, int64_t turns, int64_t tail) {
  const LinearOptics o = compute_linear_optics(plain);
  Lattice damped = ring;  // the closed orbit of the mean radiation (the quantum one-turn map is noise)
  set_radiation(damped, RadiationMode::mean);
  const std::array<double, 6> co = compute_one_turn_map_6d(damped, OpticsOptions{}).closed_orbit;
  const double beta_gamma = plain.reference().p0c / plain.reference().mass0;
  Particles p = make_gaussian(plain, o, n, r.emittance_x * beta_gamma, 1e-3 * r.emittance_x * beta_gamma,
                              r.sigma_delta * o.beta_s, r.sigma_delta, 12345);
  for (size_t i = 0; i < n; ++i)
    p.set(i, p.x[i] + co[0], p.px[i] + co[1], p.y[i] + co[2], p.py[i] + co[3], p.zeta[i] + co[4], p.delta[i] + co[5]);
  std::vector<double> spreads;
  TrackOptions options;
  options.turns = turns;
  options.callback_every = 10;
  options.callback = [&](int64_t done, const Particles& q) {
    if (done > turns - tail) spreads.push_back(rms_delta(q));
    return true;
  };
  backend.track(p, options);
  double mean = 0.0;
  for (double s : spreads) mean += s / static_cast<double>(spreads.size());
  return mean;
}

}  // namespace ft::test
