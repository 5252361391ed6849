// Slice-moment collective elements on the host (fusetrack/slice_wakes.h).
#include "fusetrack/slice_wakes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

/// A bad value of a slice-moment element's field: InputError naming the element and the field.
[[noreturn]] void bad_moments_field(const InputLocation& where, const char* field, const std::string& problem) {
  InputLocation at = where;
  at.field = field;
  throw InputError(at, problem);
}

}  // namespace

/// The long range of a train in the FFT mode: per stored turn k (0: this turn, the bunches ahead), component c
/// and bunch b, sum_s K(k, b - s, c) T_k(s) is a convolution over the bunch index of the point-bunch totals T
/// (Q, Q x, Q y) with the kernel of delays d = -(n_bunches - 1) .. n_bunches - 1 (m_lr_kernel; zero for k = 0,
/// d <= 0). The kernels' spectra are made once, every stored turn's totals are kept as spectra, and the sum
/// over the turns is taken in the frequency domain: one inverse transform per component and turn.
struct MomentsCollectiveSolver::LongRangeFft {
  wakes::FftConvolver convolver;
  std::vector<std::array<wakes::FftConvolver::Spectrum, wakes::kComponents>> kernels;  // [k][c], empty if absent
  std::deque<std::array<wakes::FftConvolver::Spectrum, 3>> history;                    // front: the last turn's totals
  // The next solve's sum over the stored turns per component (prepare_next_turn), valid while `stored_ready`.
  std::array<wakes::FftConvolver::Spectrum, wakes::kComponents> stored_sum;
  bool stored_ready = false;
  explicit LongRangeFft(int bunches) : convolver(bunches) {}

  /// The stored turns' part of component c's sum, from the oldest turn to the last (the solve's order).
  wakes::FftConvolver::Spectrum sum_over_stored(size_t c, size_t moment) const {
    wakes::FftConvolver::Spectrum sum(static_cast<size_t>(convolver.bins()), wakes::Complex(0.0, 0.0));
    for (size_t k = history.size(); k >= 1; --k)
      wakes::FftConvolver::multiply_add(kernels[k][c], history[k - 1][moment], sum);
    return sum;
  }
};

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
  check_model(where, ref, macroparticles);
  set_train_grid(lattice, where);
  m_kick_per_volt = ref.q0 / (ref.beta0() * ref.p0c);
  m_energy_per_volt = ref.q0 / ref.energy0();

  set_wake_memory(lattice, where);
  m_moments.resize(static_cast<size_t>(m_bunches));
  for (int b = 0; b < m_bunches; ++b)
    m_moments[static_cast<size_t>(b)].time_offset =
        b == 0 ? 0.0 : b * m_model.bunch_spacing / (ref.beta0() * kSpeedOfLight);
  m_reducer = std::make_unique<SliceCentroidReducer>(
      slice_grid(), std::array<double, 4>{m_model.ranges[0], m_model.ranges[1], m_model.ranges[2], m_model.ranges[3]},
      macroparticles);
  m_kicks.assign(static_cast<size_t>(m_total_slices) * FT_SLICE_KICK_VALUES, 0.0);
  m_full_rank_sum = std::getenv("FUSETRACK_FULL_RANK_SUM") != nullptr;
  set_feedback_filter();
  guard.armed = false;  // built: the destructor releases the model
}

void MomentsCollectiveSolver::check_model(const InputLocation& where, const ReferenceParticle& ref,
                                          size_t macroparticles) const {
  const ft_profile_grid& g = m_model.grid;
  if (g.n_slices < 1) bad_moments_field(where, "n_slices", fmt::format("must be at least 1, got {}", g.n_slices));
  if (g.n_slices > (1 << 20))
    bad_moments_field(where, "n_slices", fmt::format("{} slices is more than 2^20", g.n_slices));
  if (!(std::isfinite(g.zeta_min) && std::isfinite(g.zeta_max) && g.zeta_max > g.zeta_min))
    bad_moments_field(where, "zeta_max",
                      fmt::format("the cuts must satisfy zeta_min < zeta_max, got [{}, {}] m", g.zeta_min, g.zeta_max));
  if (g.linear != 0) bad_moments_field(where, "n_slices", "slice moments bin to the nearest slice (linear must be 0)");
  for (int k = 0; k < 4; ++k)
    if (!(m_model.ranges[k] > 0.0 && std::isfinite(m_model.ranges[k])))
      bad_moments_field(
          where, "ranges",
          fmt::format("the declared moment ranges must be positive and finite, got {}", m_model.ranges[k]));
  if (!std::isfinite(m_model.bunch_charge)) bad_moments_field(where, "intensity", "the bunch charge must be finite");
  if (m_model.memory_turns < 0)
    bad_moments_field(where, "memory_turns", fmt::format("must be >= 0, got {}", m_model.memory_turns));
  if (!(m_model.feedback_bandwidth >= 0.0) || !std::isfinite(m_model.feedback_bandwidth))
    bad_moments_field(where, "bandwidth",
                      fmt::format("must be finite and >= 0, got {} Hz", m_model.feedback_bandwidth));
  if (m_model.source_count < 0 || (m_model.source_count > 0 && !m_model.sources))
    bad_moments_field(where, "sources", "the host model's source list is inconsistent");
  if (macroparticles == 0) throw Error(fmt::format("collective element '{}': no macroparticles", m_name));
  if (!(ref.p0c > 0.0 && ref.beta0() > 0.0 && ref.energy0() > 0.0))
    throw InputError(where, "slice-moment elements need a reference particle with p0c > 0");

  if (m_model.feedback_delay < 0)
    bad_moments_field(where, "delay",
                      fmt::format("the feedback delay must be >= 0 turns, got {}", m_model.feedback_delay));
}

void MomentsCollectiveSolver::set_train_grid(const Lattice& lattice, const InputLocation& where) {
  const ReferenceParticle& ref = lattice.reference();
  const ft_profile_grid& g = m_model.grid;
  const int n = g.n_slices;
  // The train: bunch b at [zeta_min, zeta_max] - b spacing on one uniform grid (slice_wakes.h).
  m_bunches = std::max(1, m_model.n_bunches);
  m_stride = n;
  m_train_zeta_min = g.zeta_min;
  if (m_bunches > 1) {
    const double length = g.zeta_max - g.zeta_min, spacing = m_model.bunch_spacing;
    const double stride = spacing / (length / n);
    if (!(std::isfinite(spacing) && spacing >= length))
      bad_moments_field(where, "bunch_spacing",
                        fmt::format("a train needs a spacing >= the cut length {} m, got {} m", length, spacing));
    if (std::fabs(stride - std::round(stride)) > 1e-9 * stride)
      bad_moments_field(
          where, "bunch_spacing",
          fmt::format("{} m is not a whole number of slice widths {} m ({} widths)", spacing, length / n, stride));
    if (std::round(stride) * (m_bunches - 1) + n > double(1 << 24))
      bad_moments_field(where, "bunch_spacing", "the train's slice grid has more than 2^24 slices");
    if (!((m_bunches - 1) * spacing + length <= lattice.circumference()))
      bad_moments_field(where, "n_bunches",
                        fmt::format("the train ({} bunches, {} m apart) is longer than the ring ({} m)", m_bunches,
                                    spacing, lattice.circumference()));
    m_stride = static_cast<int>(std::round(stride));
    m_train_zeta_min = g.zeta_min - (m_bunches - 1) * spacing;
  }
  m_total_slices = (m_bunches - 1) * m_stride + n;
  m_dt = (g.zeta_max - g.zeta_min) / n / (ref.beta0() * kSpeedOfLight);
}

/// The wake sources (ft::wakes), each component scaled by its factor and masked by the element's
/// components. Table files are read here: their errors name the file and line, wrapped with the element.
std::vector<std::shared_ptr<const wakes::WakeSource>> MomentsCollectiveSolver::wake_sources(
    const InputLocation& where) const {
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
          sources.push_back(
              masked_table(wakes::read_pyheadtail_table(s.table_path ? s.table_path : "", split_words(s.table_columns)),
                           m_model.components));
          break;
        case FT_WAKE_TABLE_XSUITE:
          sources.push_back(
              masked_table(wakes::read_xsuite_table(s.table_path ? s.table_path : ""), m_model.components));
          break;
        default:
          bad_moments_field(where, "sources", fmt::format("source {}: unknown wake source type {}", i, s.type));
      }
    } catch (const std::exception& ex) {  // a table's InputError names its file, line and column
      bad_moments_field(where, "sources", fmt::format("source {}: {}", i, ex.what()));
    }
  }
  return sources;
}

void MomentsCollectiveSolver::set_wake_memory(const Lattice& lattice, const InputLocation& where) {
  const ReferenceParticle& ref = lattice.reference();
  const double revolution_time = lattice.circumference() / (ref.beta0() * kSpeedOfLight);
  const int n = m_model.grid.n_slices;
  std::vector<std::shared_ptr<const wakes::WakeSource>> sources = wake_sources(where);
  if (!sources.empty()) {
    m_wake = std::make_shared<wakes::WakeSum>(std::move(sources));
    if (m_model.memory_turns > 0 && !(revolution_time > 0.0))
      bad_moments_field(where, "memory_turns", "multi-turn memory needs a ring with a positive circumference");
    // A train: the exact memory holds the bunch's own wake of this turn only; the rest is long range.
    if (m_model.convolution != FT_WAKE_CONVOLUTION_DIRECT && m_model.convolution != FT_WAKE_CONVOLUTION_FFT)
      bad_moments_field(where, "convolution",
                        fmt::format("unknown convolution code {} (0: direct, 1: fft)", m_model.convolution));
    m_memory = std::make_unique<wakes::WakeMemory>(
        m_wake, m_dt, n, revolution_time, m_bunches > 1 ? 0 : m_model.memory_turns, std::vector<double>{0.0},
        m_model.convolution == FT_WAKE_CONVOLUTION_FFT ? wakes::Convolution::Fft : wakes::Convolution::Direct);
    if (m_bunches > 1) set_long_range_kernels(ref, revolution_time);
  }
}

/// A train's long-range kernel at the delays d spacing / (beta0 c) + k T0 between the cut grids, for k turns
/// ago (0 .. memory_turns) and d bunches ahead (-(n_bunches - 1) .. n_bunches - 1; used where > 0).
void MomentsCollectiveSolver::set_long_range_kernels(const ReferenceParticle& ref, double revolution_time) {
  const int nd = 2 * m_bunches - 1;
  const double bunch_dt = m_model.bunch_spacing / (ref.beta0() * kSpeedOfLight);
  m_lr_kernel.assign(static_cast<size_t>(m_model.memory_turns + 1) * static_cast<size_t>(nd) * wakes::kComponents, 0.0);
  for (int k = 0; k <= m_model.memory_turns; ++k)
    for (int d = -(m_bunches - 1); d < m_bunches; ++d) {
      if (k == 0 && d <= 0) continue;
      const double delay = d * bunch_dt + k * revolution_time;
      for (int c = 0; c < wakes::kComponents; ++c)
        if (m_wake->has(static_cast<wakes::Component>(c)))
          m_lr_kernel[(static_cast<size_t>(k) * static_cast<size_t>(nd) + static_cast<size_t>(d + m_bunches - 1)) *
                          wakes::kComponents +
                      static_cast<size_t>(c)] = m_wake->kernel(static_cast<wakes::Component>(c), delay, m_dt);
    }
  if (m_model.convolution == FT_WAKE_CONVOLUTION_FFT) {
    m_lr_fft = std::make_unique<LongRangeFft>(m_bunches);
    m_lr_fft->kernels.resize(static_cast<size_t>(m_model.memory_turns + 1));
    std::vector<double> kernel(static_cast<size_t>(nd));
    for (int k = 0; k <= m_model.memory_turns; ++k)
      for (int c = 0; c < wakes::kComponents; ++c) {
        if (!m_wake->has(static_cast<wakes::Component>(c))) continue;
        for (int i = 0; i < nd; ++i) kernel[static_cast<size_t>(i)] = long_range_kernel(k, i - (m_bunches - 1), c);
        m_lr_fft->kernels[static_cast<size_t>(k)][static_cast<size_t>(c)] =
            m_lr_fft->convolver.transform(kernel.data(), nd);
      }
  }
}

void MomentsCollectiveSolver::set_feedback_filter() {
  if (!(m_model.feedback_bandwidth > 0.0)) return;
  const int n = m_model.grid.n_slices;
  // The feedback's Gaussian low-pass over the slices, H(f) = exp(-2 pi^2 f^2 sigma^2) = 1/sqrt(2) at the
  // bandwidth f_c: sigma = sqrt(ln 2) / (2 pi f_c). It depends on the slice distance i - j only: its 2n - 1
  // values, computed once (filter_centroids).
  const double sigma = std::sqrt(std::log(2.0)) / (2.0 * 3.14159265358979323846 * m_model.feedback_bandwidth);
  const double inv_two_sigma2 = 1.0 / (2.0 * sigma * sigma);
  m_filter_gaussian.resize(static_cast<size_t>(2 * n - 1));
  for (int m = -(n - 1); m <= n - 1; ++m) {
    const double delay = static_cast<double>(m) * m_dt;
    m_filter_gaussian[static_cast<size_t>(m + n - 1)] = std::exp(-delay * delay * inv_two_sigma2);
  }
}

MomentsCollectiveSolver::~MomentsCollectiveSolver() {
  if (m_model.destroy) m_model.destroy(m_model.state);
}

SliceGrid MomentsCollectiveSolver::slice_grid() const {
  const ft_profile_grid& g = m_model.grid;
  return SliceGrid{m_total_slices, 0, m_train_zeta_min, g.zeta_max,
                   static_cast<double>(m_total_slices) / (g.zeta_max - m_train_zeta_min)};
}

ft_slice_kicks MomentsCollectiveSolver::slice_kicks() const {
  ft_slice_kicks k{};
  k.values = m_kicks.data();
  k.grid = m_model.grid;
  k.grid.n_slices = m_total_slices;
  k.grid.zeta_min = m_train_zeta_min;
  k.grid.linear = 0;
  return k;
}

void MomentsCollectiveSolver::solve() {
  std::vector<uint64_t> acc(m_reducer->accumulators());
  solve(acc.data(), m_reducer->out_of_range());
}

void MomentsCollectiveSolver::solve(const uint64_t* acc, uint64_t out_of_range) {
  solve(acc, out_of_range, nullptr, nullptr);
}

void MomentsCollectiveSolver::solve_over_ranks(uint64_t* local, const RankSum& sum) {
  const size_t words = static_cast<size_t>(m_total_slices) * kSliceCentroidAccumulators + 1;
  if (m_bunches <= 1) {  // one bunch: always solved from the summed table
    sum(local, words);
    solve(local, local[words - 1], nullptr, nullptr);
    return;
  }
  std::vector<char> here = local_bunches(local);
  // Per bunch the number of ranks with its particles, and the out-of-range count.
  std::vector<uint64_t> holders(here.begin(), here.end());
  holders.push_back(local[words - 1]);
  sum(holders.data(), holders.size());
  // Particles outside the moment ranges are in no slice's integers, so a rank may hold particles of a bunch
  // it does not see: then every rank solves every bunch from the summed table.
  const bool out_of_range = holders.back() > 0;
  // A delayed feedback kicks with the centroids of feedback_delay turns ago. Every rank stores every bunch's
  // centroids (the summed table each turn): a particle that drifts into another rank's bunch then gets the
  // same delayed kick as in one process, not the zeros of a bunch its rank never measured.
  const bool delayed_feedback = m_model.feedback_delay > 0;
  if (out_of_range || m_full_rank_sum || delayed_feedback ||
      std::any_of(holders.begin(), holders.end() - 1, [](uint64_t h) { return h > 1; })) {
    sum(local, words);  // a bunch over several ranks: its integers summed
    if (out_of_range) here.clear();
    solve(local, local[words - 1], &here, nullptr);
    return;
  }
  solve(local, 0, &here, &sum);
}

void MomentsCollectiveSolver::solve(const uint64_t* acc, uint64_t out_of_range, const std::vector<char>* local,
                                    const RankSum* share_totals) {
  const bool every_bunch = !local || local->empty();
  const int n = slices_per_bunch();
  const SliceMomentScales& scales = m_reducer->scales();
  // bunch_charge is per bunch; a train's macroparticles (all ranks) are spread evenly over its bunches.
  const double charge_per_weight = m_model.bunch_charge * static_cast<double>(m_bunches) /
                                   (static_cast<double>(m_macroparticles) * static_cast<double>(kProfileUnit));
  // The bunches solved here (those marked in `local`, else all), and those measured: every bunch when `acc`
  // holds them all (a train's long range needs every bunch's totals), else the solved ones.
  std::vector<int> solved, measured;
  for (int b = 0; b < m_bunches; ++b) {
    const bool here = every_bunch || (*local)[static_cast<size_t>(b)];
    if (here) solved.push_back(b);
    if (here || !share_totals) measured.push_back(b);
  }
  const bool long_range = m_memory && m_bunches > 1;
  // A train's point-bunch totals (Q, Q x, Q y) of this turn, for the long range.
  std::vector<double> totals(long_range ? static_cast<size_t>(m_bunches) * 3 : 0, 0.0);
  // Per measured bunch, its slices and the gap above its head (grid index k in zeta order; slice j = k -
  // bunch_first_slice(b), the library's time order r = n - 1 - j: the head first): the centroids and weights
  // into the kick table (kicks zeroed; gap slices keep no centroid), the moments, the totals, the feedback's
  // bandwidth filter. Bunches touch disjoint slices, so they are measured on the OpenMP threads.
  auto measure_bunch = [&](int b) {
    wakes::SliceMoments& m = m_moments[static_cast<size_t>(b)];
    m.charge.assign(static_cast<size_t>(n), 0.0);
    m.x.assign(static_cast<size_t>(n), 0.0);
    m.y.assign(static_cast<size_t>(n), 0.0);
    const int first = bunch_first_slice(b);
    const int end = b == 0 ? m_total_slices : first + m_stride;
    for (int k = first; k < end; ++k) {
      const uint64_t* a = acc + static_cast<size_t>(k) * kSliceCentroidAccumulators;
      double* out = m_kicks.data() + static_cast<size_t>(k) * FT_SLICE_KICK_VALUES;
      const double w = static_cast<double>(a[0]);
      std::fill(out, out + 9, 0.0);
      out[9] = w / static_cast<double>(kProfileUnit);
      const int j = k - first;
      if (a[0] == 0 || j >= n) continue;
      for (int q = 0; q < 4; ++q)
        out[5 + q] = static_cast<double>(static_cast<int64_t>(a[1 + q])) / (scales.scale[1 + q] * w);
      const size_t r = static_cast<size_t>(n - 1 - j);
      m.charge[r] = w * charge_per_weight;
      m.x[r] = out[5];
      m.y[r] = out[7];
    }
    if (long_range) {
      double* t = totals.data() + static_cast<size_t>(b) * 3;
      for (int r = 0; r < n; ++r) {
        t[0] += m.charge[static_cast<size_t>(r)];
        t[1] += m.charge[static_cast<size_t>(r)] * m.x[static_cast<size_t>(r)];
        t[2] += m.charge[static_cast<size_t>(r)] * m.y[static_cast<size_t>(r)];
      }
    }
    if (m_model.feedback_bandwidth > 0.0) filter_centroids(first, n);
  };
  const int n_measured = static_cast<int>(measured.size());
  // On the threads when there is enough to share (a bunch-by-bunch damper's one slice per bunch is not: waking
  // the threads would cost more than the work).
#pragma omp parallel for schedule(dynamic, 1) if (n_measured > 2 && n_measured * n >= 2048)
  for (int i = 0; i < n_measured; ++i) measure_bunch(measured[static_cast<size_t>(i)]);
  if (m_model.feedback_delay > 0) delay_centroids(measured);
  if (m_memory) {
    if (long_range && share_totals) {  // each bunch's totals from its one rank (the others' are +0.0, all-zero bits)
      std::vector<uint64_t> bits(totals.size(), 0);
      std::memcpy(bits.data(), totals.data(), bits.size() * sizeof(double));
      (*share_totals)(bits.data(), bits.size());
      std::memcpy(totals.data(), bits.data(), bits.size() * sizeof(double));
    }
    if (m_lr_fft) solve_long_range_fft(totals);
    // The bunches' solves are independent (each its own bits): a train's are shared among the OpenMP
    // threads; in the first solve after the first solved bunch has filled the memory's kernel cache (offset 0;
    // the cache is locked, so that the other threads would only wait for it).
    auto solve_bunch = [&](int b) {
      wakes::SliceKicks wk = m_memory->kicks({m_moments[static_cast<size_t>(b)]}, 0);
      if (m_bunches > 1) add_long_range(b, totals, wk);
      const int first = bunch_first_slice(b);
      for (int j = 0; j < n; ++j) {
        const size_t r = static_cast<size_t>(n - 1 - j);
        double* out = m_kicks.data() + static_cast<size_t>(first + j) * FT_SLICE_KICK_VALUES;
        auto at = [&](const std::vector<double>& v) { return v.empty() ? 0.0 : v[r]; };
        out[0] = m_kick_per_volt * at(wk.dipolar_x);
        out[1] = m_kick_per_volt * at(wk.dipolar_y);
        out[2] = m_kick_per_volt * at(wk.quadrupolar_x);
        out[3] = m_kick_per_volt * at(wk.quadrupolar_y);
        out[4] = m_energy_per_volt * at(wk.longitudinal);
      }
    };
    const int first_parallel = m_kernels_cached || solved.empty() ? 0 : 1;
    if (first_parallel == 1) solve_bunch(solved.front());
    m_kernels_cached = m_kernels_cached || !solved.empty();
    const int n_solved = static_cast<int>(solved.size());
#pragma omp parallel for schedule(dynamic, 1) if (n_solved > 2)
    for (int i = first_parallel; i < n_solved; ++i) solve_bunch(solved[static_cast<size_t>(i)]);
    if (m_bunches == 1) {
      m_memory->end_turn({m_moments.front()});
    } else if (m_model.memory_turns > 0 && !m_lr_fft) {  // (the FFT mode stores the totals' spectra)
      m_lr_history.push_front(std::move(totals));
      if (static_cast<int>(m_lr_history.size()) > m_model.memory_turns) m_lr_history.pop_back();
    }
  }
  // The kick values of this process's bunches (their slices, contiguous from the last bunch to the first).
  m_kicks_in_use = {0, m_kicks.size()};
  if (!every_bunch) {
    int low = m_total_slices, high = 0;
    for (int b : solved) {
      low = std::min(low, bunch_first_slice(b));
      high = std::max(high, std::min(m_total_slices, bunch_first_slice(b) + m_stride));
    }
    m_kicks_in_use = low < high ? std::make_pair(static_cast<size_t>(low) * FT_SLICE_KICK_VALUES,
                                                 static_cast<size_t>(high) * FT_SLICE_KICK_VALUES)
                                : std::make_pair(size_t(0), size_t(0));
  }
  m_warn_out_of_range += out_of_range;
  ++m_warn_turns;
}

std::vector<char> MomentsCollectiveSolver::local_bunches(const uint64_t* local_acc) const {
  std::vector<char> here(static_cast<size_t>(m_bunches), 0);
  // Per bunch its slices (the grid blocks of stride slices; bunch 0 to the grid's end) up to the first one with
  // particles.
  for (int block = 0; block < m_bunches; ++block) {
    const int end = block == m_bunches - 1 ? m_total_slices : (block + 1) * m_stride;
    for (int k = block * m_stride; k < end; ++k)
      if (local_acc[static_cast<size_t>(k) * kSliceCentroidAccumulators] != 0) {
        here[static_cast<size_t>(m_bunches - 1 - k / m_stride)] = 1;
        break;
      }
  }
  return here;
}

void MomentsCollectiveSolver::solve_long_range_fft(const std::vector<double>& totals) {
  using Spectrum = wakes::FftConvolver::Spectrum;
  LongRangeFft& lr = *m_lr_fft;
  const size_t bunches = static_cast<size_t>(m_bunches);
  std::array<Spectrum, 3> now;
  std::vector<double> values(bunches);
  for (size_t q = 0; q < 3; ++q) {
    for (size_t b = 0; b < bunches; ++b) values[b] = totals[3 * b + q];
    now[q] = lr.convolver.transform(values.data(), m_bunches);
  }
  m_lr_sums.assign(bunches * wakes::kComponents, 0.0);
  std::vector<double> out(bunches);
  for (size_t c = 0; c < static_cast<size_t>(wakes::kComponents); ++c) {
    if (lr.kernels[0][c].empty()) continue;
    // The stored turns' part (prepared while the GPU ran, else now: the same operations), then this turn.
    Spectrum sum = lr.stored_ready ? std::move(lr.stored_sum[c])
                                   : lr.sum_over_stored(c, static_cast<size_t>(wakes::kComponentMoment[c]));
    wakes::FftConvolver::multiply_add(lr.kernels[0][c], now[static_cast<size_t>(wakes::kComponentMoment[c])], sum);
    lr.convolver.inverse(sum, c == 0 ? -1.0 : 1.0, out.data());
    for (size_t b = 0; b < bunches; ++b) m_lr_sums[b * wakes::kComponents + c] = out[b];
  }
  lr.stored_ready = false;
  if (m_model.memory_turns > 0) {
    lr.history.push_front(std::move(now));
    if (static_cast<int>(lr.history.size()) > m_model.memory_turns) lr.history.pop_back();
  }
}

void MomentsCollectiveSolver::prepare_next_turn() {
  // One bunch: its own multi-turn wake's stored turns (the wake memory's Fft mode).
  if (m_bunches == 1 && m_memory && m_model.memory_turns > 0) m_memory->prepare(0);
  if (!m_lr_fft || m_lr_fft->stored_ready) return;
  LongRangeFft& lr = *m_lr_fft;
  for (size_t c = 0; c < static_cast<size_t>(wakes::kComponents); ++c)
    if (!lr.kernels[0][c].empty())
      lr.stored_sum[c] = lr.sum_over_stored(c, static_cast<size_t>(wakes::kComponentMoment[c]));
  lr.stored_ready = true;
}

void MomentsCollectiveSolver::add_long_range(int b, const std::vector<double>& totals, wakes::SliceKicks& kicks) const {
  // Fixed order (every rank the same bits): the stored turns from the oldest, bunches in train order, then the
  // bunches ahead in this turn. Point bunches: V = -sum Q W_long, D = sum Q x W_dip, G = sum Q W_quad.
  double sum[wakes::kComponents] = {0.0, 0.0, 0.0, 0.0, 0.0};
  if (m_lr_fft) {  // the FFT mode's sums of this turn (solve_long_range_fft)
    for (int c = 0; c < wakes::kComponents; ++c)
      sum[c] = m_lr_sums[static_cast<size_t>(b) * wakes::kComponents + static_cast<size_t>(c)];
  } else {
    auto add = [&](int k, int d, const double* t) {
      sum[0] -= long_range_kernel(k, d, 0) * t[0];
      sum[1] += long_range_kernel(k, d, 1) * t[1];
      sum[2] += long_range_kernel(k, d, 2) * t[2];
      sum[3] += long_range_kernel(k, d, 3) * t[0];
      sum[4] += long_range_kernel(k, d, 4) * t[0];
    };
    for (int k = static_cast<int>(m_lr_history.size()); k >= 1; --k)
      for (int s = 0; s < m_bunches; ++s) add(k, b - s, m_lr_history[static_cast<size_t>(k - 1)].data() + 3 * s);
    for (int s = 0; s < b; ++s) add(0, b - s, totals.data() + 3 * s);
  }
  std::vector<double>* out[wakes::kComponents] = {&kicks.longitudinal, &kicks.dipolar_x, &kicks.dipolar_y,
                                                  &kicks.quadrupolar_x, &kicks.quadrupolar_y};
  for (int c = 0; c < wakes::kComponents; ++c) {
    if (!m_wake->has(static_cast<wakes::Component>(c))) continue;
    std::vector<double>& v = *out[c];
    if (v.empty()) v.assign(static_cast<size_t>(slices_per_bunch()), 0.0);
    for (double& x : v) x += sum[c];
  }
}

void MomentsCollectiveSolver::delay_centroids(const std::vector<int>& measured) {
  // Store this turn's centroids (the measured bunches' slices; the others' stay 0), then put those of
  // feedback_delay turns ago in the table (zeros in the first turns: nothing measured yet).
  const int n = slices_per_bunch();
  std::vector<double> now(static_cast<size_t>(m_bunches) * static_cast<size_t>(n) * 4, 0.0);
  for (int b : measured)
    for (int j = 0; j < n; ++j)
      for (int q = 0; q < 4; ++q)
        now[(static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(j)) * 4 + static_cast<size_t>(q)] =
            m_kicks[static_cast<size_t>(bunch_first_slice(b) + j) * FT_SLICE_KICK_VALUES + 5 + static_cast<size_t>(q)];
  m_delayed.push_back(std::move(now));
  const bool ready = static_cast<int>(m_delayed.size()) > m_model.feedback_delay;
  for (int b : measured)
    for (int j = 0; j < n; ++j)
      for (int q = 0; q < 4; ++q)
        m_kicks[static_cast<size_t>(bunch_first_slice(b) + j) * FT_SLICE_KICK_VALUES + 5 + static_cast<size_t>(q)] =
            ready ? m_delayed.front()[(static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(j)) * 4 +
                                      static_cast<size_t>(q)]
                  : 0.0;
  if (ready) m_delayed.pop_front();
}

void MomentsCollectiveSolver::filter_centroids(int first, int n) {
  // The Gaussian low-pass (m_filter_gaussian, by slice distance), charge-weighted so that a rigid bunch keeps
  // its centroid; the sums run over the source slices in increasing order (reproducible).
  const std::vector<double>& gaussian = m_filter_gaussian;
  std::vector<double> filtered(static_cast<size_t>(n) * 4, 0.0);
  double* const table = m_kicks.data() + static_cast<size_t>(first) * FT_SLICE_KICK_VALUES;
  for (int i = 0; i < n; ++i) {
    double weight_sum = 0.0, sums[4] = {0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < n; ++j) {
      const double* src = table + static_cast<size_t>(j) * FT_SLICE_KICK_VALUES;
      if (src[9] == 0.0) continue;
      const double w = src[9] * gaussian[static_cast<size_t>(i - j + n - 1)];
      weight_sum += w;
      for (int q = 0; q < 4; ++q) sums[q] += w * src[5 + q];
    }
    for (int q = 0; q < 4; ++q)
      filtered[static_cast<size_t>(i) * 4 + static_cast<size_t>(q)] = weight_sum > 0.0 ? sums[q] / weight_sum : 0.0;
  }
  for (int i = 0; i < n; ++i)
    for (int q = 0; q < 4; ++q)
      table[static_cast<size_t>(i) * FT_SLICE_KICK_VALUES + 5 + static_cast<size_t>(q)] =
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
