// Slice-moment collective elements on the host (fusetrack/slice_wakes.h).
#include "fusetrack/slice_wakes.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "fusetrack/collective.h"
#include "fusetrack/error.h"

namespace ft {

namespace {

constexpr double kSpeedOfLight = 299792458.0;  // [m/s]
static_assert(sizeof(SliceKick) == FT_SLICE_KICK_VALUES * sizeof(double), "SliceKick is FT_SLICE_KICK_VALUES doubles");

/// A table with the components the element does not ask for emptied.
std::shared_ptr<const wakes::WakeSource> masked_table(const wakes::WakeTable& t, const int32_t* components) {
  std::array<std::vector<double>, wakes::kComponents> columns;
  for (int c = 0; c < wakes::kComponents; ++c)
    if (components[c]) columns[static_cast<size_t>(c)] = t.column(static_cast<wakes::Component>(c));
  return std::make_shared<wakes::WakeTable>(t.time(), columns, t.origin());
}

std::vector<std::string> split_words(const char* text) {
  std::vector<std::string> words;
  std::istringstream in(text ? text : "");
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace

MomentsCollectiveSolver::MomentsCollectiveSolver(const Lattice& lattice, size_t sequence_index, size_t macroparticles)
    : m_sequence_index(sequence_index), m_macroparticles(macroparticles) {
  const ElementDefinition& def = lattice.element(sequence_index);
  m_name = def.name;
  m_desc = def.type->collective;
  m_params = lattice.params(lattice.sequence()[sequence_index].definition);
  if (!m_desc || m_desc->kind != FT_COLLECTIVE_MOMENTS)
    throw Error(fmt::format("element '{}' ({}) is not a slice-moment collective element", def.name, def.type->name));
  const InputLocation where = collective_element_location(lattice, sequence_index);
  const ReferenceParticle& ref = lattice.reference();
  const ft_reference abi_ref = ref.to_abi(lattice.circumference());
  ft_error err{};
  const std::string base = lattice.base_directory();
  if (m_desc->create_moments(m_params, def.json.c_str(), base.c_str(), &abi_ref, &m_model, &err) != 0)
    throw InputError(where, err.message);
  // When the constructor throws below (a bad model, a table refused), the destructor does not run:
  // the guard releases the plugin's model then.
  struct ModelGuard {
    ft_moments_model& model;
    bool armed = true;
    ~ModelGuard() {
      if (armed && model.destroy) model.destroy(model.state);
      if (armed) model.destroy = nullptr;
    }
  } guard{m_model};
  auto bad = [&](const char* field, const std::string& problem) {
    InputLocation at = where;
    at.field = field;
    throw InputError(at, problem);
  };
  const ft_profile_grid& g = m_model.grid;
  if (g.n_slices < 1) bad("n_slices", fmt::format("must be at least 1, got {}", g.n_slices));
  if (g.n_slices > (1 << 20)) bad("n_slices", fmt::format("{} slices is more than 2^20", g.n_slices));
  if (!(std::isfinite(g.zeta_min) && std::isfinite(g.zeta_max) && g.zeta_max > g.zeta_min))
    bad("zeta_max", fmt::format("the cuts must satisfy zeta_min < zeta_max, got [{}, {}] m", g.zeta_min, g.zeta_max));
  if (g.linear != 0) bad("n_slices", "slice moments bin to the nearest slice (linear must be 0)");
  for (int k = 0; k < 4; ++k)
    if (!(m_model.ranges[k] > 0.0 && std::isfinite(m_model.ranges[k])))
      bad("ranges", fmt::format("the declared moment ranges must be positive and finite, got {}", m_model.ranges[k]));
  if (!std::isfinite(m_model.bunch_charge)) bad("intensity", "the bunch charge must be finite");
  if (m_model.memory_turns < 0) bad("memory_turns", fmt::format("must be >= 0, got {}", m_model.memory_turns));
  if (!(m_model.feedback_bandwidth >= 0.0) || !std::isfinite(m_model.feedback_bandwidth))
    bad("bandwidth", fmt::format("must be finite and >= 0, got {} Hz", m_model.feedback_bandwidth));
  if (m_model.source_count < 0 || (m_model.source_count > 0 && !m_model.sources))
    bad("sources", "the host model's source list is inconsistent");
  if (macroparticles == 0) throw Error(fmt::format("collective element '{}': no macroparticles", m_name));
  if (!(ref.p0c > 0.0 && ref.beta0() > 0.0 && ref.energy0() > 0.0))
    throw InputError(where, "slice-moment elements need a reference particle with p0c > 0");

  const int n = g.n_slices;
  m_dt = (g.zeta_max - g.zeta_min) / n / (ref.beta0() * kSpeedOfLight);
  m_kick_per_volt = ref.q0 / (ref.beta0() * ref.p0c);
  m_energy_per_volt = ref.q0 / ref.energy0();

  // The wake sources (ft::wakes), each component scaled by its factor and masked by the element's
  // components. Table files are read here: their errors name the file and line, wrapped with the element.
  std::vector<std::shared_ptr<const wakes::WakeSource>> sources;
  for (int i = 0; i < m_model.source_count; ++i) {
    const ft_wake_source& s = m_model.sources[i];
    wakes::ComponentFactors factors;
    for (int c = 0; c < wakes::kComponents; ++c)
      factors.value[static_cast<size_t>(c)] = m_model.components[c] ? s.factors[c] : 0.0;
    try {
      switch (s.type) {
        case FT_WAKE_RESONATOR:
          sources.push_back(std::make_shared<wakes::Resonator>(s.r_shunt, s.frequency, s.quality_factor, factors));
          break;
        case FT_WAKE_RESISTIVE_WALL:
          sources.push_back(std::make_shared<wakes::ResistiveWall>(s.radius, s.length, s.conductivity, factors));
          break;
        case FT_WAKE_TABLE_PYHEADTAIL:
          sources.push_back(masked_table(wakes::read_pyheadtail_table(s.table_path ? s.table_path : "",
                                                                      split_words(s.table_columns)),
                                         m_model.components));
          break;
        case FT_WAKE_TABLE_XSUITE:
          sources.push_back(
              masked_table(wakes::read_xsuite_table(s.table_path ? s.table_path : ""), m_model.components));
          break;
        default:
          bad("sources", fmt::format("source {}: unknown wake source type {}", i, s.type));
      }
    } catch (const std::exception& ex) {  // a table's InputError names its file, line and column
      bad("sources", fmt::format("source {}: {}", i, ex.what()));
    }
  }
  if (!sources.empty()) {
    m_wake = std::make_shared<wakes::WakeSum>(std::move(sources));
    const double revolution_time = lattice.circumference() / (ref.beta0() * kSpeedOfLight);
    if (m_model.memory_turns > 0 && !(revolution_time > 0.0))
      bad("memory_turns", "multi-turn memory needs a ring with a positive circumference");
    m_memory = std::make_unique<wakes::WakeMemory>(m_wake, m_dt, n, revolution_time, m_model.memory_turns);
  }
  m_reducer = std::make_unique<SliceCentroidReducer>(slice_grid(),
                                                     std::array<double, 4>{m_model.ranges[0], m_model.ranges[1],
                                                                           m_model.ranges[2], m_model.ranges[3]},
                                                     macroparticles);
  m_kicks.assign(static_cast<size_t>(n) * FT_SLICE_KICK_VALUES, 0.0);
  guard.armed = false;  // built: the destructor releases the model
}

MomentsCollectiveSolver::~MomentsCollectiveSolver() {
  if (m_model.destroy) m_model.destroy(m_model.state);
}

SliceGrid MomentsCollectiveSolver::slice_grid() const {
  const ft_profile_grid& g = m_model.grid;
  return SliceGrid{g.n_slices, 0, g.zeta_min, g.zeta_max, static_cast<double>(g.n_slices) / (g.zeta_max - g.zeta_min)};
}

ft_slice_kicks MomentsCollectiveSolver::slice_kicks() const {
  ft_slice_kicks k{};
  k.values = m_kicks.data();
  k.grid = m_model.grid;
  k.grid.linear = 0;
  return k;
}

void MomentsCollectiveSolver::solve() {
  std::vector<uint64_t> acc(m_reducer->accumulators());
  solve(acc.data(), m_reducer->out_of_range());
}

void MomentsCollectiveSolver::solve(const uint64_t* acc, uint64_t out_of_range) {
  const int n = n_slices();
  const SliceMomentScales& scales = m_reducer->scales();
  const double charge_per_weight =
      m_model.bunch_charge / (static_cast<double>(m_macroparticles) * static_cast<double>(kProfileUnit));
  m_moments.time_offset = 0.0;
  m_moments.charge.assign(static_cast<size_t>(n), 0.0);
  m_moments.x.assign(static_cast<size_t>(n), 0.0);
  m_moments.y.assign(static_cast<size_t>(n), 0.0);
  std::fill(m_kicks.begin(), m_kicks.end(), 0.0);
  // Centroids per slice (zeta order k; the library's time order r = n - 1 - k: the head first).
  for (int k = 0; k < n; ++k) {
    const uint64_t* a = acc + static_cast<size_t>(k) * kSliceCentroidAccumulators;
    double* out = m_kicks.data() + static_cast<size_t>(k) * FT_SLICE_KICK_VALUES;
    const double w = static_cast<double>(a[0]);
    out[9] = w / static_cast<double>(kProfileUnit);
    if (a[0] == 0) continue;
    for (int q = 0; q < 4; ++q) out[5 + q] = static_cast<double>(static_cast<int64_t>(a[1 + q])) / (scales.scale[1 + q] * w);
    const size_t r = static_cast<size_t>(n - 1 - k);
    m_moments.charge[r] = w * charge_per_weight;
    m_moments.x[r] = out[5];
    m_moments.y[r] = out[7];
  }
  if (m_model.feedback_bandwidth > 0.0) filter_centroids();
  if (m_memory) {
    const wakes::SliceKicks wk = m_memory->kicks({m_moments}, 0);
    for (int k = 0; k < n; ++k) {
      const size_t r = static_cast<size_t>(n - 1 - k);
      double* out = m_kicks.data() + static_cast<size_t>(k) * FT_SLICE_KICK_VALUES;
      auto at = [&](const std::vector<double>& v) { return v.empty() ? 0.0 : v[r]; };
      out[0] = m_kick_per_volt * at(wk.dipolar_x);
      out[1] = m_kick_per_volt * at(wk.dipolar_y);
      out[2] = m_kick_per_volt * at(wk.quadrupolar_x);
      out[3] = m_kick_per_volt * at(wk.quadrupolar_y);
      out[4] = m_energy_per_volt * at(wk.longitudinal);
    }
    m_memory->end_turn({m_moments});
  }
  m_warn_out_of_range += out_of_range;
  ++m_warn_turns;
}

void MomentsCollectiveSolver::filter_centroids() {
  // Gaussian low-pass over the slices, H(f) = exp(-2 pi^2 f^2 sigma^2) = 1/sqrt(2) at the bandwidth f_c:
  // sigma = sqrt(ln 2) / (2 pi f_c). Charge-weighted, so that a rigid bunch keeps its centroid; the sums
  // run over the source slices in increasing order (reproducible).
  const int n = n_slices();
  const double sigma = std::sqrt(std::log(2.0)) / (2.0 * 3.14159265358979323846 * m_model.feedback_bandwidth);
  const double inv_two_sigma2 = 1.0 / (2.0 * sigma * sigma);
  std::vector<double> filtered(static_cast<size_t>(n) * 4, 0.0);
  for (int i = 0; i < n; ++i) {
    double weight_sum = 0.0, sums[4] = {0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < n; ++j) {
      const double* src = m_kicks.data() + static_cast<size_t>(j) * FT_SLICE_KICK_VALUES;
      if (src[9] == 0.0) continue;
      const double delay = static_cast<double>(i - j) * m_dt;
      const double w = src[9] * std::exp(-delay * delay * inv_two_sigma2);
      weight_sum += w;
      for (int q = 0; q < 4; ++q) sums[q] += w * src[5 + q];
    }
    for (int q = 0; q < 4; ++q)
      filtered[static_cast<size_t>(i) * 4 + static_cast<size_t>(q)] = weight_sum > 0.0 ? sums[q] / weight_sum : 0.0;
  }
  for (int i = 0; i < n; ++i)
    for (int q = 0; q < 4; ++q)
      m_kicks[static_cast<size_t>(i) * FT_SLICE_KICK_VALUES + 5 + static_cast<size_t>(q)] =
          filtered[static_cast<size_t>(i) * 4 + static_cast<size_t>(q)];
}

std::string MomentsCollectiveSolver::take_warning() {
  std::string w;
  if (m_warn_out_of_range > 0)
    w = fmt::format(
        "warning: slice-moment element '{}': {} particle passages over {} turns were outside the declared moment "
        "ranges (|x|, |px|, |y|, |py|) and were left out of the slice centroids (they were still kicked)\n",
        m_name, m_warn_out_of_range, m_warn_turns);
  m_warn_out_of_range = 0;
  m_warn_turns = 0;
  return w;
}

}  // namespace ft
