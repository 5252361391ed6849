// Host model of the SpaceChargePIC element (elements/space_charge_pic.h): reads the host-only
// "model" field and checks the grid, then hands the framework its ft_grid_model. Compiled into the
// built-in plugin (with impedance_model.cpp).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "space_charge_pic.h"

namespace {

constexpr double kElementaryCharge = 1.602176634e-19;  // [C]

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.12g", v);
  return buf;
}

[[noreturn]] void fail(const std::string& field, const std::string& problem) {
  throw std::invalid_argument("field '" + field + "': " + problem);
}

}  // namespace

void SpaceChargePIC_create_grid(const SpaceChargePIC& e, const char* json_definition, const char* /*base_directory*/,
                                const ft_reference& reference, ft_grid_model& model) {
  using nlohmann::json;
  const json def = json::parse(json_definition);
  std::string kind = "2.5D";
  if (def.contains("model")) {
    const json& m = def.at("model");
    if (!m.is_string()) fail("model", "expected \"2.5D\" or \"3D\", got " + m.dump());
    kind = m.get<std::string>();
    if (kind != "2.5D" && kind != "3D") fail("model", "unknown model '" + kind + "'; known: \"2.5D\", \"3D\"");
  }
  if (!std::isfinite(e.length)) fail("length", "must be finite, got " + number(e.length) + " m");
  if (!(e.intensity >= 0.0) || !std::isfinite(e.intensity))
    fail("intensity", "must be finite and >= 0, got " + number(e.intensity));

  const int nodes[3] = {e.nodes_x, e.nodes_y, e.nodes_zeta};
  const char* node_fields[3] = {"nodes_x", "nodes_y", "nodes_zeta"};
  const double lo[3] = {e.x_min, e.y_min, e.zeta_min}, hi[3] = {e.x_max, e.y_max, e.zeta_max};
  const char* min_fields[3] = {"x_min", "y_min", "zeta_min"};
  const char* max_fields[3] = {"x_max", "y_max", "zeta_max"};
  double total = 1.0;
  for (int d = 0; d < 3; ++d) {
    if (nodes[d] < 2)
      fail(node_fields[d], "the grid needs at least 2 nodes per dimension, got " + std::to_string(nodes[d]));
    if (nodes[d] > (1 << 16)) fail(node_fields[d], "at most 65536 nodes per dimension, got " + std::to_string(nodes[d]));
    total *= nodes[d];
  }
  if (total > double(1u << 30))
    fail("nodes_zeta", "the grid of " + number(total) + " nodes is larger than 2^30 nodes (nodes_x * nodes_y * nodes_zeta)");

  model = ft_grid_model{};
  model.solver = kind == "3D" ? FT_GRID_3D : FT_GRID_2P5D;
  bool adapts = false;
  for (int d = 0; d < 3; ++d) {
    model.nodes[d] = nodes[d];
    if (lo[d] == 0.0 && hi[d] == 0.0) {  // adapted to the bunch
      adapts = true;
      model.adapt_sigmas[d] = e.extent_sigmas;
      continue;
    }
    if (!std::isfinite(lo[d]) || !std::isfinite(hi[d]))
      fail(max_fields[d], "the grid's extent must be finite, got [" + number(lo[d]) + ", " + number(hi[d]) + "] m");
    if (!(hi[d] > lo[d]))
      fail(max_fields[d], std::string("the grid needs ") + min_fields[d] + " < " + max_fields[d] + ", got [" +
                              number(lo[d]) + ", " + number(hi[d]) + "] m (both 0: adapted to the bunch)");
    model.min[d] = lo[d];
    model.max[d] = hi[d];
  }
  if (adapts && !(e.extent_sigmas > 0.0 && std::isfinite(e.extent_sigmas)))
    fail("extent_sigmas", "the adapted extent needs extent_sigmas > 0, got " + number(e.extent_sigmas));
  model.bunch_charge = reference.q0 * kElementaryCharge * e.intensity;
}
