// A DA scan: its configuration checked, its frame (closed orbit, beam sizes) and its grid of initial conditions.

#include "fusetrack/da.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "analysis/da/scan_frame.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"
#include "fusetrack/optics.h"

namespace ft {

namespace {

InputLocation option(const std::string& name) {
  InputLocation at;
  at.field = name;
  return at;
}

}  // namespace

void validate_da_config(const DaConfig& c) {
  if (c.turns < 1 || c.turns > 1000000000)
    throw InputError(option("--turns"), fmt::format("must be between 1 and 10^9, got {}", c.turns));
  if (c.grid == DaGrid::Polar) {
    if (c.angles < 1) throw InputError(option("--angles"), fmt::format("the grid is empty: {} angles", c.angles));
    if (c.amplitudes < 1)
      throw InputError(option("--amplitudes"), fmt::format("the grid is empty: {} amplitudes", c.amplitudes));
    if (!(c.amplitude_min >= 0) || !(c.amplitude_max >= 0))
      throw InputError(option("--amplitude-range"), "amplitudes must not be negative");
    if (!(c.amplitude_max > c.amplitude_min) && c.amplitudes > 1)
      throw InputError(option("--amplitude-range"), "the largest amplitude must exceed the smallest");
    if (!(c.angle_max >= c.angle_min)) throw InputError(option("--angle-range"), "the angle range is reversed");
  } else {
    if (c.nx < 1 || c.ny < 1)
      throw InputError(option("--nx/--ny"), fmt::format("the grid is empty: {} x {} points", c.nx, c.ny));
    if (c.refine_resolution > 0)
      throw InputError(option("--refine"), "adaptive refinement needs a polar grid (rays of amplitude)");
  }
  if (c.units == DaUnits::Sigma) {
    if (!(c.emittance_nx > 0))
      throw InputError(option("--emittance-nx"), "amplitudes in sigma need a positive normalised emittance");
    if (!(c.emittance_ny > 0))
      throw InputError(option("--emittance-ny"), "amplitudes in sigma need a positive normalised emittance");
  }
  if (c.deltas.empty()) throw InputError(option("--delta"), "at least one momentum offset is needed");
  for (double d : c.deltas)
    if (!std::isfinite(d) || d <= -1.0)
      throw InputError(option("--delta"), fmt::format("invalid momentum offset {}", d));
  for (int k = 0; k < 6; ++k)
    if (!(c.turn_limits[k] >= 0)) throw InputError(option("--limit"), "limits must not be negative");
  if (c.refine_resolution < 0) throw InputError(option("--refine"), "the resolution must be positive");
}

namespace da_detail {

/// The lattice-dependent part of make_da_scan (the CPU work of a study's set-up: closed orbit and
/// optics). Throws for a collective element, a lattice without a closed orbit or finite beam sizes.
DaFrame da_frame(const Lattice& lattice, const DaConfig& config) {
  validate_da_config(config);
  // A DA scan tracks independent initial conditions; a collective element would couple them
  // through one bunch profile, which has no meaning for a grid of test particles. Refused.
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    const ElementDefinition& def = lattice.element(e);
    if (!def.type->is_collective()) continue;
    InputLocation where{lattice.source_file()};
    where.element_index = static_cast<long>(e);
    where.element_name = def.name;
    where.element_type = def.type->name;
    throw InputError(where,
                     "a dynamic-aperture scan tracks independent test particles, but this collective element "
                     "needs a whole bunch; remove it from the sequence for a DA scan, or track a bunch with "
                     "`fusetrack track`");
  }
  DaFrame frame;
  frame.beta0 = lattice.reference().beta0();
  double* co = frame.closed_orbit;
  const bool need_optics = config.units == DaUnits::Sigma || config.around_closed_orbit;
  LinearOptics optics;
  if (need_optics) {
    optics = compute_linear_optics(lattice, OpticsOptions{});
    if (config.around_closed_orbit)
      for (int k = 0; k < 6; ++k) co[k] = optics.closed_orbit[k];
  }
  if (config.units == DaUnits::Sigma) {
    const BeamSizes sizes = beam_sizes(optics, config.emittance_nx, config.emittance_ny);
    frame.sigma_x = sizes.sigma_x;
    frame.sigma_y = sizes.sigma_y;
    if (!(frame.sigma_x > 0) || !(frame.sigma_y > 0))
      throw InputError(option("--units"), "the optics at the start give no finite beam size (unstable lattice?)");
  }
  return frame;
}

/// The scan of `config` in a lattice's frame: the grid and the initial conditions around its closed orbit.
DaScan da_scan_in_frame(const DaFrame& frame, const DaConfig& config) {
  DaScan scan;
  scan.config = config;
  const double beta0 = frame.beta0;
  scan.sigma_x = frame.sigma_x;
  scan.sigma_y = frame.sigma_y;
  const double* co = frame.closed_orbit;
  std::copy(co, co + 6, scan.closed_orbit);

  std::vector<std::pair<double, double>> points;  // (grid_x, grid_y) in amplitude units
  if (config.grid == DaGrid::Polar) {
    for (int a = 0; a < config.angles; ++a) {
      const double angle = config.angles > 1
                               ? config.angle_min + (config.angle_max - config.angle_min) * a / (config.angles - 1)
                               : config.angle_min;
      for (int k = 0; k < config.amplitudes; ++k) {
        const double r = config.amplitudes > 1 ? config.amplitude_min + (config.amplitude_max - config.amplitude_min) *
                                                                            k / (config.amplitudes - 1)
                                               : config.amplitude_max;
        points.emplace_back(r * std::cos(angle * kPi / 180.0), r * std::sin(angle * kPi / 180.0));
        scan.amplitude.push_back(r);
        scan.angle.push_back(angle);
      }
    }
  } else {
    for (int j = 0; j < config.ny; ++j)
      for (int i = 0; i < config.nx; ++i) {
        const double x =
            config.nx > 1 ? config.x_min + (config.x_max - config.x_min) * i / (config.nx - 1) : config.x_min;
        const double y =
            config.ny > 1 ? config.y_min + (config.y_max - config.y_min) * j / (config.ny - 1) : config.y_min;
        points.emplace_back(x, y);
        scan.amplitude.push_back(std::hypot(x, y));
        scan.angle.push_back(std::atan2(y, x) * 180.0 / kPi);
      }
  }
  const size_t per_delta = points.size();
  scan.initial = Particles(per_delta * config.deltas.size(), beta0);
  for (size_t d = 0; d < config.deltas.size(); ++d) {
    for (size_t i = 0; i < per_delta; ++i) {
      const size_t n = d * per_delta + i;
      if (d > 0) {
        scan.amplitude.push_back(scan.amplitude[i]);
        scan.angle.push_back(scan.angle[i]);
      }
      scan.grid_x.push_back(points[i].first);
      scan.grid_y.push_back(points[i].second);
      scan.delta_index.push_back(static_cast<int32_t>(d));
      scan.initial.set(n, co[0] + points[i].first * scan.sigma_x, co[1] + config.px0,
                       co[2] + points[i].second * scan.sigma_y, co[3] + config.py0, co[4] + config.zeta0,
                       co[5] + config.deltas[d]);
    }
  }
  scan.particles = scan.initial;
  return scan;
}

}  // namespace da_detail

DaScan make_da_scan(const Lattice& lattice, const DaConfig& config) {
  return da_detail::da_scan_in_frame(da_detail::da_frame(lattice, config), config);
}

}  // namespace ft
