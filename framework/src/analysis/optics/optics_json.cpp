// The optics at the start of the ring as JSON (optics_to_json).
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/optics/optics_internal.hpp"

namespace ft::optics_internal {

nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

}  // namespace ft::optics_internal

namespace ft {

nlohmann::ordered_json optics_to_json(const LinearOptics& o) {
  using namespace optics_internal;
  using json = nlohmann::ordered_json;
  json j;
  j["method"] = o.six_d ? "6d" : "4d";
  j["method_reason"] = o.mode_reason;
  j["reference"] = {{"beta0", o.beta0}, {"gamma0", o.gamma0}};
  j["circumference"] = o.circumference;
  json co = json::object();
  for (int k = 0; k < 6; ++k) co[kCoordinateNames[k]] = o.closed_orbit[static_cast<size_t>(k)];
  j["closed_orbit"] = co;
  j["closed_orbit_residual"] = o.map.residual;
  j["newton_iterations"] = o.map.iterations;
  auto matrix_json = [](const Matrix6& m) {
    json rows = json::array();
    for (const auto& row : m) {
      json r = json::array();
      for (double v : row) r.push_back(number(v));
      rows.push_back(r);
    }
    return rows;
  };
  j["one_turn_matrix"] = {{"coordinates", {"x", "px", "y", "py", "zeta", "pzeta"}},
                          {"method", o.six_d ? "6d" : "4d"},
                          {"rows", matrix_json(o.map.matrix)}};
  if (o.six_d) j["one_turn_matrix_4d"] = {{"rows", matrix_json(o.map_4d.matrix)}};
  j["finite_difference_steps"] = {{"x", o.steps[0]},  {"px", o.steps[1]},   {"y", o.steps[2]},
                                  {"py", o.steps[3]}, {"zeta", o.steps[4]}, {"delta", o.steps[5]}};
  j["finite_difference_steps"]["stencil_points"] = o.map.stencil_points;
  // qx, qy: the method's map (6D eigen-tunes in 6D); qx_4d, qy_4d: the 4D map (delta frozen).
  j["tunes"] = {{"qx", o.six_d ? o.qx_6d : o.qx},
                {"qy", o.six_d ? o.qy_6d : o.qy},
                {"qs", number(o.qs)},
                {"qx_4d", o.qx},
                {"qy_4d", o.qy},
                {"source", o.six_d ? "eigenvalues of the 6D one-turn matrix" : "4D one-turn matrix"}};
  j["twiss"] = {{"betx", o.beta_x},
                {"alfx", o.alpha_x},
                {"gamx", o.gamma_x},
                {"bety", o.beta_y},
                {"alfy", o.alpha_y},
                {"gamy", o.gamma_y},
                {"dx", o.dx},
                {"dpx", o.dpx},
                {"dy", o.dy},
                {"dpy", o.dpy},
                {"bets", number(o.beta_s)},
                {"alfs", number(o.alpha_s)}};
  j["chromaticity"] = {
      {"dqx", o.dqx}, {"dqy", o.dqy}, {"delta_chrom", o.delta_chrom}, {"stencil_points", o.chrom_points}};
  j["longitudinal"] = {{"slip_factor", o.eta}, {"momentum_compaction", o.alpha_c}, {"gamma_tr", number(o.gamma_tr)}};
  return j;
}

}  // namespace ft
