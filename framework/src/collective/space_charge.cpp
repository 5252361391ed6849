#include "fusetrack/space_charge.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "fusetrack/collective.h"
#include "fusetrack/error.h"

namespace ft {

namespace {

/// 2^(j/8), j = 0..8: the steps the adapted half extents are rounded up to.
constexpr double kEighthPowers[9] = {1.0,
                                     1.0905077326652577,
                                     1.1892071150027210,
                                     1.2968395546510096,
                                     1.4142135623730951,
                                     1.5422108254079407,
                                     1.6817928305074290,
                                     1.8340080864093424,
                                     2.0};

/// The smallest 2^(k/8) (k integer) >= v > 0: deterministic (frexp and a table, no libm rounding).
double round_up_eighth_power(double v) {
  int e = 0;
  const double m = 2.0 * std::frexp(v, &e);  // v = m 2^(e-1), m in [1, 2)
  int j = 0;
  while (j < 8 && kEighthPowers[j] < m) ++j;
  return std::ldexp(kEighthPowers[j], e - 1);
}

/// The first-turn coarse ranges of the extent moments [m]: transverse 1 m, zeta half the ring.
constexpr double kCoarseTransverseRange = 1.0;
/// Smallest adapted half extent [m] (a bunch of zero size in a dimension).
constexpr double kMinHalfExtent = 1e-9;

}  // namespace

GridCollectiveSolver::GridCollectiveSolver(const Lattice& lattice, size_t sequence_index, FmaMode fma,
                                           size_t macroparticles)
    : m_sequence_index(sequence_index), m_fma(fma), m_macroparticles(macroparticles) {
  const ElementDefinition& def = lattice.element(sequence_index);
  m_name = def.name;
  m_desc = def.type->collective;
  m_params = lattice.params(lattice.sequence()[sequence_index].definition);
  if (!m_desc || m_desc->kind != FT_COLLECTIVE_GRID)
    throw Error(fmt::format("element '{}' ({}) is not a grid collective element", def.name, def.type->name));
  const InputLocation where = collective_element_location(lattice, sequence_index);
  const ReferenceParticle& ref = lattice.reference();
  const ft_reference abi_ref = ref.to_abi(lattice.circumference());
  ft_error err{};
  const std::string base = lattice.base_directory();
  if (m_desc->create_grid(m_params, def.json.c_str(), base.c_str(), &abi_ref, &m_model, &err) != 0)
    throw InputError(where, err.message);
  auto bad = [&](const std::string& problem) { throw InputError(where, problem); };
  if (m_model.solver != FT_GRID_2P5D && m_model.solver != FT_GRID_3D)
    bad(fmt::format("unknown grid solver {} (ft_grid_model.solver)", m_model.solver));
  const char* names[3] = {"x", "y", "zeta"};
  for (int d = 0; d < 3; ++d) {
    if (m_model.nodes[d] < 2)
      bad(fmt::format("the grid needs at least 2 nodes in {}, got {} (ft_grid_model.nodes)", names[d], m_model.nodes[d]));
    if (m_model.adapt_sigmas[d] > 0.0) {
      if (!std::isfinite(m_model.adapt_sigmas[d]))
        bad(fmt::format("the adapted extent in {} must be finite (ft_grid_model.adapt_sigmas)", names[d]));
      m_adaptive = true;
    } else if (!(std::isfinite(m_model.min[d]) && std::isfinite(m_model.max[d]) && m_model.max[d] > m_model.min[d])) {
      bad(fmt::format("the grid's extent in {} must satisfy min < max, got [{}, {}] m", names[d], m_model.min[d],
                      m_model.max[d]));
    }
  }
  if (!std::isfinite(m_model.bunch_charge)) bad("the bunch charge is not finite");
  if (macroparticles == 0) throw Error(fmt::format("space charge '{}': no macroparticles", m_name));
  m_gamma0 = ref.gamma0();
  m_circumference = lattice.circumference();
  m_node_count = static_cast<size_t>(m_model.nodes[0]) * static_cast<size_t>(m_model.nodes[1]) *
                 static_cast<size_t>(m_model.nodes[2]);
  m_report.sequence_index = sequence_index;
  m_report.element_name = m_name;
  m_report.solver = m_model.solver;
  m_report.nodes = {m_model.nodes[0], m_model.nodes[1], m_model.nodes[2]};
  m_ex.assign(m_node_count, 0.0);
  m_ey.assign(m_node_count, 0.0);
  if (m_model.solver == FT_GRID_3D) m_ez.assign(m_node_count, 0.0);
  m_rho.assign(m_node_count, 0.0);

  if (!m_adaptive) {
    build_grid({m_model.min[0], m_model.min[1], m_model.min[2]}, {m_model.max[0], m_model.max[1], m_model.max[2]});
    return;
  }
  // The first pass of the first turn: wide declared ranges about 0.
  for (int d = 0; d < 3; ++d) {
    m_extent_scales.centre[d] = 0.0;
    m_extent_scales.range[d] = 0.0;
    if (m_model.adapt_sigmas[d] > 0.0)
      m_extent_scales.range[d] =
          d < 2 ? kCoarseTransverseRange : std::max(kCoarseTransverseRange, 0.5 * m_circumference);
  }
  auto set_scales = [&]() {
    for (int d = 0; d < 3; ++d) {
      const double r = m_extent_scales.range[d];
      m_extent_scales.scale1[d] = r > 0.0 ? std::ldexp(fixed_point_scale(r, macroparticles), kProfileWeightBits) : 0.0;
      m_extent_scales.scale2[d] =
          r > 0.0 ? std::ldexp(fixed_point_scale(r * r, macroparticles), kProfileWeightBits) : 0.0;
    }
  };
  set_scales();
  // A provisional grid (replaced by set_extent before any deposit): the fixed dimensions as given.
  std::array<double, 3> lo{}, hi{};
  for (int d = 0; d < 3; ++d) {
    lo[static_cast<size_t>(d)] = m_model.adapt_sigmas[d] > 0.0 ? -1.0 : m_model.min[d];
    hi[static_cast<size_t>(d)] = m_model.adapt_sigmas[d] > 0.0 ? 1.0 : m_model.max[d];
  }
  build_grid(lo, hi);
}

GridCollectiveSolver::~GridCollectiveSolver() = default;

void GridCollectiveSolver::accumulate_extent(const Particles& p, int threads, uint64_t* acc) const {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  const int64_t n = static_cast<int64_t>(p.size());
  std::vector<std::array<uint64_t, kExtentAccumulators + 1>> local(static_cast<size_t>(nt));
  for (auto& l : local) l.fill(0);
  const ExtentScales s = m_extent_scales;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (p.state[k] <= 0) continue;
    auto& l = local[static_cast<size_t>(omp_get_thread_num())];
    const double pos[3] = {p.x[k], p.y[k], p.zeta[k]};
    long long out[kExtentAccumulators];
    if (!extent_contributions(s, pos, out)) {
      ++l[kExtentAccumulators];
      continue;
    }
    for (int a = 0; a < kExtentAccumulators; ++a) l[static_cast<size_t>(a)] += static_cast<uint64_t>(out[a]);
  }
  for (const auto& l : local)  // integer sums: the same for any split
    for (size_t a = 0; a < l.size(); ++a) acc[a] += l[a];
}

void GridCollectiveSolver::set_extent(const uint64_t* acc) {
  const double n = static_cast<double>(acc[0]);
  const uint64_t left_out = acc[kExtentAccumulators];
  m_report.moments_outside_total += left_out;
  m_warn_moments += left_out;
  const int passes = extent_passes();
  ++m_pass;
  const bool last = m_pass >= passes;
  std::array<double, 3> mean{}, sigma{};
  for (int d = 0; d < 3; ++d) {
    const size_t u = static_cast<size_t>(d);
    if (!(m_model.adapt_sigmas[d] > 0.0)) continue;
    if (acc[0] == 0) {  // no particle measured: keep the reference
      mean[u] = m_extent_scales.centre[d];
      sigma[u] = m_have_extent ? m_last_half[u] / m_model.adapt_sigmas[d] : 0.0;
      continue;
    }
    const double m1 = static_cast<double>(static_cast<int64_t>(acc[1 + 2 * d])) / (m_extent_scales.scale1[d] * n);
    const double m2 = static_cast<double>(static_cast<int64_t>(acc[2 + 2 * d])) / (m_extent_scales.scale2[d] * n);
    mean[u] = m_extent_scales.centre[d] + m1;
    sigma[u] = std::sqrt(std::max(0.0, m2 - m1 * m1));
  }
  if (!last) {  // the next pass: about this pass's mean, with ranges of a few extents
    for (int d = 0; d < 3; ++d) {
      if (!(m_model.adapt_sigmas[d] > 0.0)) continue;
      const size_t u = static_cast<size_t>(d);
      const double range = m_extent_scales.range[d];
      m_extent_scales.centre[d] = mean[u];
      m_extent_scales.range[d] =
          std::max({4.0 * m_model.adapt_sigmas[d] * sigma[u], 1e-6 * range, 16.0 * kMinHalfExtent});
    }
  } else {
    std::array<double, 3> lo{}, hi{};
    for (int d = 0; d < 3; ++d) {
      const size_t u = static_cast<size_t>(d);
      if (!(m_model.adapt_sigmas[d] > 0.0)) {
        lo[u] = m_model.min[d];
        hi[u] = m_model.max[d];
        continue;
      }
      const double half = round_up_eighth_power(std::max(m_model.adapt_sigmas[d] * sigma[u], kMinHalfExtent));
      m_last_half[u] = half;
      lo[u] = mean[u] - half;
      hi[u] = mean[u] + half;
      // Next turn's moments: about this grid's centre, within four half extents.
      m_extent_scales.centre[d] = mean[u];
      m_extent_scales.range[d] = 4.0 * half;
    }
    build_grid(lo, hi);
    m_have_extent = true;
    m_pass = 0;
  }
  for (int d = 0; d < 3; ++d) {
    const double r = m_extent_scales.range[d];
    m_extent_scales.scale1[d] = r > 0.0 ? std::ldexp(fixed_point_scale(r, m_macroparticles), kProfileWeightBits) : 0.0;
    m_extent_scales.scale2[d] =
        r > 0.0 ? std::ldexp(fixed_point_scale(r * r, m_macroparticles), kProfileWeightBits) : 0.0;
  }
}

void GridCollectiveSolver::build_grid(const std::array<double, 3>& min, const std::array<double, 3>& max) {
  const std::array<int, 3> nodes{m_model.nodes[0], m_model.nodes[1], m_model.nodes[2]};
  m_reducer = std::make_unique<ChargeGridReducer>(3, nodes, min, max, m_macroparticles);
  m_report.min = min;
  m_report.max = max;
  // The solver depends on the spacing only (free space: translation-invariant); its grid starts at 0.
  std::array<double, 3> spacing{};
  for (int d = 0; d < 3; ++d)
    spacing[static_cast<size_t>(d)] = (max[static_cast<size_t>(d)] - min[static_cast<size_t>(d)]) / (nodes[static_cast<size_t>(d)] - 1);
  if (m_poisson && spacing == m_spacing) return;
  PoissonGrid g;
  g.dims = 3;
  g.nodes = nodes;
  const bool three_d = m_model.solver == FT_GRID_3D;
  for (int d = 0; d < 3; ++d) {
    const size_t u = static_cast<size_t>(d);
    g.min[u] = 0.0;
    // 3D: the rest frame, zeta stretched by gamma0.
    g.max[u] = (d == 2 && three_d ? m_gamma0 : 1.0) * (max[u] - min[u]);
  }
  try {
    m_poisson = std::make_unique<PoissonSolver>(g, three_d ? PoissonModel::Open3D : PoissonModel::Open2p5D,
                                                m_fma == FmaMode::Off ? PoissonFft::Reproducible : PoissonFft::Fast);
  } catch (const std::exception& e) {  // e.g. a grid too large for the doubled-grid solver: name the element
    throw Error(fmt::format("space-charge element '{}': grid of {} x {} x {} nodes: {}", m_name, nodes[0], nodes[1],
                            nodes[2], e.what()));
  }
  m_spacing = spacing;
  ++m_report.solver_builds;
}

void GridCollectiveSolver::solve() { solve(m_reducer->accumulators().data(), m_reducer->outside()); }

double GridCollectiveSolver::charge_density_factor() const {
  // Node charge = acc * q e N / (N_macro 2^(3 wb)), over the lab cell volume dx dy dz; 3D: the
  // rest-frame density rho / gamma0.
  const ChargeGridSpec& g = spec();
  const bool three_d = m_model.solver == FT_GRID_3D;
  const double volume = m_spacing[0] * m_spacing[1] * m_spacing[2];
  const double unit = std::ldexp(1.0, g.dims * g.weight_bits);
  return m_model.bunch_charge / (static_cast<double>(m_macroparticles) * unit * volume) / (three_d ? m_gamma0 : 1.0);
}

void GridCollectiveSolver::solve(const uint64_t* acc, uint64_t outside) {
  const bool three_d = m_model.solver == FT_GRID_3D;
  const double factor = charge_density_factor();
  for (size_t k = 0; k < m_node_count; ++k) m_rho[k] = static_cast<double>(acc[k]) * factor;
  m_poisson->set_threads(m_solve_threads);
  m_report.solve_threads = m_poisson->threads();
  m_poisson->solve(m_rho.data(), m_ex.data(), m_ey.data(), three_d ? m_ez.data() : nullptr);
  double max_field = 0.0;
  if (three_d)
    for (size_t k = 0; k < m_node_count; ++k) {  // E_perp = gamma0 E'_perp, E_z = E'_z
      m_ex[k] *= m_gamma0;
      m_ey[k] *= m_gamma0;
    }
  for (size_t k = 0; k < m_node_count; ++k) {
    max_field = std::max({max_field, std::fabs(m_ex[k]), std::fabs(m_ey[k])});
    if (three_d) max_field = std::max(max_field, std::fabs(m_ez[k]));
  }
  record_solve(outside, max_field);
}

void GridCollectiveSolver::record_solve(uint64_t outside, double max_field) {
  m_report.max_field = max_field;
  ++m_report.turns;
  m_report.outside_last = outside;
  m_report.outside_total += outside;
  m_report.outside_max = std::max(m_report.outside_max, outside);
  if (outside > 0) {
    ++m_report.turns_with_outside;
    ++m_warn_turns;
    m_warn_outside += outside;
    m_warn_outside_max = std::max(m_warn_outside_max, outside);
  }
}

ft_grid_field GridCollectiveSolver::field() const {
  const ChargeGridSpec& g = spec();
  ft_grid_field f{};
  f.ex = m_ex.data();
  f.ey = m_ey.data();
  f.ez = m_model.solver == FT_GRID_3D ? m_ez.data() : nullptr;
  f.dims = g.dims;
  for (int d = 0; d < 3; ++d) {
    f.n[d] = g.n[d];
    f.min[d] = g.min[d];
    f.inv_d[d] = g.inv_d[d];
  }
  f.weight_bits = g.weight_bits;
  return f;
}

std::string GridCollectiveSolver::take_warning() {
  std::string w;
  if (m_warn_outside > 0)
    w += fmt::format(
        "warning: space charge '{}' (#{}): {} particle-turns outside the grid in {} turns (at most {} particles in "
        "one turn; last grid x [{:.6g}, {:.6g}] y [{:.6g}, {:.6g}] zeta [{:.6g}, {:.6g}] m): they got no space-charge "
        "kick; widen the grid or raise extent_sigmas\n",
        m_name, m_sequence_index, m_warn_outside, m_warn_turns, m_warn_outside_max, m_report.min[0], m_report.max[0],
        m_report.min[1], m_report.max[1], m_report.min[2], m_report.max[2]);
  if (m_warn_moments > 0)
    w += fmt::format(
        "warning: space charge '{}' (#{}): {} particle-turns far outside the bunch were left out of the adapted "
        "grid's rms sizes\n",
        m_name, m_sequence_index, m_warn_moments);
  m_warn_outside = m_warn_outside_max = m_warn_moments = 0;
  m_warn_turns = 0;
  return w;
}

}  // namespace ft
