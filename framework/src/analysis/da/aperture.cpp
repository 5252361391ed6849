// The aperture a DA scan found: its border per ray or column, over turns, and refined along the rays.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/math_helpers.hpp"
#include "fusetrack/da.h"
#include "fusetrack/error.h"

namespace ft {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Loss turn of particle i as "never" when it survived.
int64_t loss_turn(const Particles& p, size_t i) {
  return p.state[i] > 0 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(p.lost_turn[i]);
}

/// min, mean, max of `values` into the summary (0 when empty).
void set_statistics(const std::vector<double>& values, DaSummary& s) {
  if (values.empty()) return;
  s.da_min = *std::min_element(values.begin(), values.end());
  s.da_max = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.da_mean = sum / static_cast<double>(values.size());
}

/// Cartesian grids (point (i, j) of delta d at d * nx * ny + j * nx + i): the border per column.
void summarize_columns(const DaScan& scan, DaSummary& s) {
  const DaConfig& c = scan.config;
  const size_t nx = static_cast<size_t>(c.nx), ny = static_cast<size_t>(c.ny);
  std::vector<double> borders;
  for (size_t d = 0; d < c.deltas.size(); ++d) {
    for (size_t i = 0; i < nx; ++i) {
      auto at = [&](size_t j) { return d * nx * ny + j * nx + i; };
      auto alive = [&](size_t j) { return scan.particles.state[at(j)] > 0; };
      size_t start = 0;
      for (size_t j = 1; j < ny; ++j)
        if (std::fabs(scan.grid_y[at(j)]) < std::fabs(scan.grid_y[at(start)])) start = j;
      DaColumnResult r;
      r.delta = c.deltas[d];
      r.x = scan.grid_x[at(start)];
      if (!alive(start)) {
        r.y_high = r.y_low = kNaN;
        s.per_column.push_back(r);
        continue;
      }
      size_t hi = start, lo = start;
      while (hi + 1 < ny && alive(hi + 1)) ++hi;
      while (lo > 0 && alive(lo - 1)) --lo;
      r.y_high = scan.grid_y[at(hi)];
      r.y_low = scan.grid_y[at(lo)];
      s.per_column.push_back(r);
      const bool up = start + 1 < ny, down = start > 0;
      const double border = up && down ? std::min(std::fabs(r.y_high), std::fabs(r.y_low))
                                       : (up ? std::fabs(r.y_high) : std::fabs(r.y_low));
      borders.push_back(border);
    }
  }
  set_statistics(borders, s);
}

}  // namespace

DaSummary summarize_da(const DaScan& scan) {
  DaSummary s;
  const DaConfig& c = scan.config;
  // Turn checkpoints: logarithmic from 1 to the number of turns.
  for (int64_t t = 1; t < c.turns; t = std::max<int64_t>(t + 1, static_cast<int64_t>(std::llround(t * 1.5))))
    s.turn_checkpoints.push_back(t);
  s.turn_checkpoints.push_back(c.turns);
  if (c.grid != DaGrid::Polar) {
    summarize_columns(scan, s);
    return s;
  }
  const size_t per_delta = static_cast<size_t>(c.angles) * static_cast<size_t>(c.amplitudes);
  std::vector<double> values;
  for (size_t d = 0; d < c.deltas.size(); ++d) {
    std::vector<double> da_t(s.turn_checkpoints.size(), std::numeric_limits<double>::infinity());
    for (int a = 0; a < c.angles; ++a) {
      DaAngleResult r;
      r.delta = c.deltas[d];
      const size_t base = d * per_delta + static_cast<size_t>(a) * static_cast<size_t>(c.amplitudes);
      r.angle = scan.angle[base];
      r.da_first_loss = kNaN;
      r.da_last_stable = 0.0;
      r.da_refined = kNaN;
      for (int k = 0; k < c.amplitudes; ++k) {
        const size_t i = base + static_cast<size_t>(k);
        if (scan.particles.state[i] <= 0) {
          r.da_first_loss = scan.amplitude[i];
          break;
        }
        r.da_last_stable = scan.amplitude[i];
      }
      // DA against turns, with the same definition for a scan of T turns: the largest amplitude
      // below the first one lost before turn T (the largest amplitude when none is lost).
      for (size_t t = 0; t < s.turn_checkpoints.size(); ++t) {
        double stable = 0.0;
        for (int k = 0; k < c.amplitudes; ++k) {
          const size_t i = base + static_cast<size_t>(k);
          if (loss_turn(scan.particles, i) < s.turn_checkpoints[t]) break;
          stable = scan.amplitude[i];
        }
        da_t[t] = std::min(da_t[t], stable);
      }
      s.per_angle.push_back(r);
    }
    s.da_vs_turns.push_back(da_t);
  }
  for (const auto& r : s.per_angle) values.push_back(r.da_last_stable);
  set_statistics(values, s);
  return s;
}

void refine_da(const Lattice& lattice, DaScan& scan, DaSummary& summary, Backend& backend,
               const DaRunOptions& options) {
  const DaConfig& c = scan.config;
  if (c.refine_resolution <= 0 || c.grid != DaGrid::Polar) return;
  const double beta0 = lattice.reference().beta0();
  struct Ray {
    size_t result;  // index into summary.per_angle
    double lo, hi;  // surviving, lost amplitude
    double angle, delta;
  };
  std::vector<Ray> rays;
  for (size_t r = 0; r < summary.per_angle.size(); ++r) {
    const auto& a = summary.per_angle[r];
    if (std::isnan(a.da_first_loss)) continue;  // nothing lost on this ray: DA beyond the grid
    rays.push_back({r, a.da_last_stable, a.da_first_loss, a.angle, a.delta});
  }
  int64_t particle_turns = 0;
  while (true) {
    std::vector<size_t> active;
    for (size_t k = 0; k < rays.size(); ++k)
      if (rays[k].hi - rays[k].lo > c.refine_resolution) active.push_back(k);
    if (active.empty()) break;
    Particles batch(active.size(), beta0);
    for (size_t j = 0; j < active.size(); ++j) {
      const Ray& ray = rays[active[j]];
      const double mid = 0.5 * (ray.lo + ray.hi);
      const double th = ray.angle * kPi / 180.0;
      batch.set(j, scan.closed_orbit[0] + mid * std::cos(th) * scan.sigma_x, scan.closed_orbit[1] + c.px0,
                scan.closed_orbit[2] + mid * std::sin(th) * scan.sigma_y, scan.closed_orbit[3] + c.py0,
                scan.closed_orbit[4] + c.zeta0, scan.closed_orbit[5] + ray.delta);
    }
    TrackOptions o;
    o.turns = c.turns;
    o.fma = options.fma;
    o.threads = options.threads;
    backend.track(batch, o);
    for (size_t j = 0; j < active.size(); ++j) {
      Ray& ray = rays[active[j]];
      const double mid = 0.5 * (ray.lo + ray.hi);
      particle_turns += batch.state[j] > 0 ? c.turns : batch.lost_turn[j] + 1;
      (batch.state[j] > 0 ? ray.lo : ray.hi) = mid;
    }
  }
  for (const Ray& ray : rays) summary.per_angle[ray.result].da_refined = ray.lo;
  summary.refinement_particle_turns = particle_turns;
  // The equivalent fine grid: amplitudes spaced by the resolution along every ray, each tracked
  // until lost. Below the refined boundary a particle survives all turns; above it, it is
  // counted with the loss turn of the nearest coarse-grid particle (an estimate).
  const size_t per_delta = static_cast<size_t>(c.angles) * static_cast<size_t>(c.amplitudes);
  int64_t fine = 0;
  for (size_t r = 0; r < summary.per_angle.size(); ++r) {
    const auto& a = summary.per_angle[r];
    const size_t d = r / static_cast<size_t>(c.angles), ai = r % static_cast<size_t>(c.angles);
    const size_t base = d * per_delta + ai * static_cast<size_t>(c.amplitudes);
    const double boundary = std::isnan(a.da_refined) ? a.da_last_stable : a.da_refined;
    for (double amp = c.amplitude_min; amp <= c.amplitude_max + 1e-12 * c.amplitude_max; amp += c.refine_resolution) {
      if (amp <= boundary || std::isnan(a.da_first_loss)) {
        fine += c.turns;
        continue;
      }
      size_t nearest = base;
      for (int k = 0; k < c.amplitudes; ++k)
        if (std::fabs(scan.amplitude[base + static_cast<size_t>(k)] - amp) < std::fabs(scan.amplitude[nearest] - amp))
          nearest = base + static_cast<size_t>(k);
      fine += scan.particles.state[nearest] > 0 ? c.turns : scan.particles.lost_turn[nearest] + 1;
    }
  }
  summary.fine_grid_particle_turns_estimate = fine;
  // min/mean/max now from the refined boundary.
  std::vector<double> values;
  for (const auto& a : summary.per_angle) values.push_back(std::isnan(a.da_refined) ? a.da_last_stable : a.da_refined);
  if (!values.empty()) {
    summary.da_min = *std::min_element(values.begin(), values.end());
    summary.da_max = *std::max_element(values.begin(), values.end());
    double sum = 0;
    for (double v : values) sum += v;
    summary.da_mean = sum / static_cast<double>(values.size());
  }
}

}  // namespace ft
