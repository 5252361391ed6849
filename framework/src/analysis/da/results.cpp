// A DA scan's results written: da.npz and the summary.

#include "analysis/da/results.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fusetrack/da.h"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"
#include "fusetrack/particle_files.h"

namespace ft {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace da_detail {

std::vector<std::pair<std::string, NpyArray>> da_npz_members(const DaScan& scan) {
  const Particles& in = scan.initial;
  const Particles& out = scan.particles;
  std::vector<std::pair<std::string, NpyArray>> m = {{"x0", NpyArray::from(in.x)},
                                                     {"px0", NpyArray::from(in.px)},
                                                     {"y0", NpyArray::from(in.y)},
                                                     {"py0", NpyArray::from(in.py)},
                                                     {"zeta0", NpyArray::from(in.zeta)},
                                                     {"delta0", NpyArray::from(in.delta)},
                                                     {"grid_x", NpyArray::from(scan.grid_x)},
                                                     {"grid_y", NpyArray::from(scan.grid_y)},
                                                     {"amplitude", NpyArray::from(scan.amplitude)},
                                                     {"angle", NpyArray::from(scan.angle)},
                                                     {"delta_index", NpyArray::from(scan.delta_index)},
                                                     {"state", NpyArray::from(out.state)},
                                                     {"lost_turn", NpyArray::from(out.lost_turn)},
                                                     {"lost_element", NpyArray::from(out.lost_element)},
                                                     {"x", NpyArray::from(out.x)},
                                                     {"y", NpyArray::from(out.y)}};
  if (!scan.variant.empty()) m.emplace_back("variant", NpyArray::from(scan.variant));
  return m;
}

}  // namespace da_detail

void write_da_results(const DaScan& scan, const DaSummary& s, const std::string& directory,
                      const std::string& lattice_file) {
  fs::create_directories(directory);
  const DaConfig& c = scan.config;
  const char* unit = c.units == DaUnits::Sigma ? "sigma" : "m";
  json j;
  j["lattice"] = lattice_file;
  j["turns"] = c.turns;
  j["grid"] = c.grid == DaGrid::Polar ? "polar" : "cartesian";
  j["amplitude_unit"] = unit;
  j["sigma_x_m"] = scan.sigma_x;
  j["sigma_y_m"] = scan.sigma_y;
  j["closed_orbit"] = std::vector<double>(scan.closed_orbit, scan.closed_orbit + 6);
  j["deltas"] = c.deltas;
  j["particles"] = scan.particles.size();
  j["survivors"] = scan.particles.alive_count();
  j["definition"] =
      "da_first_loss: smallest amplitude on the ray lost before the last turn; da_last_stable: the largest "
      "amplitude below it that survived all turns; da_refined: bisection between the two";
  j["da_min"] = s.da_min;
  j["da_mean"] = s.da_mean;
  j["da_max"] = s.da_max;
  json rows = json::array();
  for (const auto& r : s.per_angle)
    rows.push_back({{"delta", r.delta},
                    {"angle_deg", r.angle},
                    {"da_first_loss", std::isnan(r.da_first_loss) ? json(nullptr) : json(r.da_first_loss)},
                    {"da_last_stable", r.da_last_stable},
                    {"da_refined", std::isnan(r.da_refined) ? json(nullptr) : json(r.da_refined)}});
  j["per_angle"] = rows;
  if (c.grid == DaGrid::Cartesian) {
    j["definition"] =
        "per column (x): from the point nearest y = 0, the largest y (y_high) and smallest y (y_low) reached before "
        "the first point lost before the last turn (null: the start is lost); da_min/mean/max: over the columns "
        "whose start survives, of min(|y_high|, |y_low|)";
    json cols = json::array();
    auto value = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
    for (const auto& r : s.per_column)
      cols.push_back({{"delta", r.delta}, {"x", r.x}, {"y_high", value(r.y_high)}, {"y_low", value(r.y_low)}});
    j["per_column"] = cols;
  }
  j["turn_checkpoints"] = s.turn_checkpoints;
  json vs = json::array();
  for (const auto& v : s.da_vs_turns) {
    json row = json::array();
    for (double x : v) row.push_back(std::isnan(x) ? json(nullptr) : json(x));
    vs.push_back(row);
  }
  j["da_vs_turns"] = vs;
  if (c.refine_resolution > 0) {
    j["refinement"] = {{"resolution", c.refine_resolution},
                       {"particle_turns", s.refinement_particle_turns},
                       {"fine_grid_particle_turns_estimate", s.fine_grid_particle_turns_estimate}};
  }
  write_file_atomically((fs::path(directory) / "summary.json").string(), j.dump(2) + "\n");
  write_file_atomically((fs::path(directory) / "summary.csv").string(), [&](std::ostream& csv) {
    if (c.grid == DaGrid::Cartesian) {
      csv << "delta,x,y_high,y_low\n";
      for (const auto& r : s.per_column)
        csv << fmt::format("{:.10g},{:.10g},{:.10g},{:.10g}\n", r.delta, r.x, r.y_high, r.y_low);
      return;
    }
    csv << "delta,angle_deg,da_first_loss,da_last_stable,da_refined\n";
    for (const auto& r : s.per_angle)
      csv << fmt::format("{:.10g},{:.10g},{:.10g},{:.10g},{:.10g}\n", r.delta, r.angle, r.da_first_loss,
                         r.da_last_stable, r.da_refined);
  });
  write_npz((fs::path(directory) / "da.npz").string(), da_detail::da_npz_members(scan));
}

}  // namespace ft
