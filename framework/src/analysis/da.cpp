#include "fusetrack/da.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/math_helpers.hpp"
#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"

namespace ft {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

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
    if (!std::isfinite(d) || d <= -1.0) throw InputError(option("--delta"), fmt::format("invalid momentum offset {}", d));
  for (int k = 0; k < 6; ++k)
    if (!(c.turn_limits[k] >= 0)) throw InputError(option("--limit"), "limits must not be negative");
  if (c.refine_resolution < 0) throw InputError(option("--refine"), "the resolution must be positive");
}

namespace {

/// What a scan takes from its lattice: the reference's beta0, the beam sizes per unit amplitude and
/// the closed orbit (the optics at the start). The rest of a scan follows from the configuration.
struct DaFrame {
  double beta0 = 1.0;
  double sigma_x = 1.0, sigma_y = 1.0;
  double closed_orbit[6] = {0, 0, 0, 0, 0, 0};
};
constexpr size_t kFrameWords = 9;  // the doubles of a DaFrame, exchanged between ranks as bit patterns

void frame_to_words(const DaFrame& f, uint64_t* w) {
  const double d[kFrameWords] = {f.beta0, f.sigma_x, f.sigma_y, f.closed_orbit[0], f.closed_orbit[1],
                                 f.closed_orbit[2], f.closed_orbit[3], f.closed_orbit[4], f.closed_orbit[5]};
  std::memcpy(w, d, sizeof d);
}

DaFrame frame_from_words(const uint64_t* w) {
  double d[kFrameWords];
  std::memcpy(d, w, sizeof d);
  DaFrame f;
  f.beta0 = d[0];
  f.sigma_x = d[1];
  f.sigma_y = d[2];
  std::copy(d + 3, d + 9, f.closed_orbit);
  return f;
}

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
    throw InputError(where, "a dynamic-aperture scan tracks independent test particles, but this collective element "
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
      const double angle = config.angles > 1 ? config.angle_min + (config.angle_max - config.angle_min) * a / (config.angles - 1)
                                             : config.angle_min;
      for (int k = 0; k < config.amplitudes; ++k) {
        const double r = config.amplitudes > 1
                             ? config.amplitude_min + (config.amplitude_max - config.amplitude_min) * k / (config.amplitudes - 1)
                             : config.amplitude_max;
        points.emplace_back(r * std::cos(angle * kPi / 180.0), r * std::sin(angle * kPi / 180.0));
        scan.amplitude.push_back(r);
        scan.angle.push_back(angle);
      }
    }
  } else {
    for (int j = 0; j < config.ny; ++j)
      for (int i = 0; i < config.nx; ++i) {
        const double x = config.nx > 1 ? config.x_min + (config.x_max - config.x_min) * i / (config.nx - 1) : config.x_min;
        const double y = config.ny > 1 ? config.y_min + (config.y_max - config.y_min) * j / (config.ny - 1) : config.y_min;
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

}  // namespace

DaScan make_da_scan(const Lattice& lattice, const DaConfig& config) {
  return da_scan_in_frame(da_frame(lattice, config), config);
}

/// The longest backend call of a DA scan, in turns (the survivors are compacted between calls).
constexpr int64_t kLongestCallTurns = 1000;

namespace {

/// The arrays of a checkpoint (a copy of the scan's state: the file can be written while tracking goes on).
std::vector<std::pair<std::string, NpyArray>> checkpoint_members(const DaScan& scan, const std::string& fingerprint) {
  auto members = particle_arrays(scan.particles);
  members.emplace_back("turns_done", NpyArray::from(std::vector<int64_t>{scan.turns_done}));
  members.emplace_back("fingerprint", NpyArray::from(std::vector<int64_t>{static_cast<int64_t>(
                                          std::stoull(fingerprint.empty() ? "0" : fingerprint, nullptr, 16))}));
  return members;
}

/// The words of a particle's state after a chunk (coordinates, energy variables, state, loss),
/// exchanged between ranks as bit patterns.
constexpr size_t kTrackedWords = 12;

void tracked_to_words(const Particles& p, size_t i, uint64_t* w) {
  const double values[9] = {p.x[i], p.px[i], p.y[i], p.py[i], p.zeta[i], p.delta[i], p.ptau[i], p.rpp[i], p.rvv[i]};
  std::memcpy(w, values, sizeof(values));
  w[9] = static_cast<uint64_t>(static_cast<uint32_t>(p.state[i]));
  w[10] = static_cast<uint64_t>(static_cast<uint32_t>(p.lost_turn[i]));
  w[11] = static_cast<uint64_t>(p.lost_element[i]);
}

void tracked_from_words(Particles& p, size_t i, const uint64_t* w) {
  double values[9];
  std::memcpy(values, w, sizeof(values));
  p.x[i] = values[0], p.px[i] = values[1], p.y[i] = values[2], p.py[i] = values[3];
  p.zeta[i] = values[4], p.delta[i] = values[5], p.ptau[i] = values[6], p.rpp[i] = values[7], p.rvv[i] = values[8];
  p.state[i] = static_cast<int32_t>(static_cast<uint32_t>(w[9]));
  p.lost_turn[i] = static_cast<int32_t>(static_cast<uint32_t>(w[10]));
  p.lost_element[i] = static_cast<int64_t>(w[11]);
}

/// Particles `indices[m]` of `p` from the rank `source(m)` to every rank, in pieces of 2^20 particles
/// (each word is summed from its source's value and zeros, which is exact).
template <class Source>
void send_from_sources(Particles& p, const std::vector<size_t>& indices, Source source, Communicator& ranks) {
  constexpr size_t kPiece = size_t{1} << 20;
  const int rank = ranks.rank();
  std::vector<uint64_t> words;
  for (size_t first = 0; first < indices.size(); first += kPiece) {
    const size_t count = std::min(kPiece, indices.size() - first);
    words.assign(count * kTrackedWords, 0);
    for (size_t m = 0; m < count; ++m)
      if (source(first + m) == rank) tracked_to_words(p, indices[first + m], &words[m * kTrackedWords]);
    ranks.allreduce_sum(words.data(), words.size());
    for (size_t m = 0; m < count; ++m)
      if (source(first + m) != rank) tracked_from_words(p, indices[first + m], &words[m * kTrackedWords]);
  }
}

/// The particles of a scan shared by MPI ranks (DaRunOptions::ranks). Every rank holds the whole
/// scan, but a particle's coordinates are current only on the rank that tracked it last (its owner)
/// until the next synchronisation. Between chunks the ranks exchange the survivors' states (one word
/// each) and the coordinates of the particles that change owner (where the shares' boundaries move);
/// everything goes to every rank only where a checkpoint is written and at the end. Each word is summed
/// from its owner's value and zeros, which is exact.
/// The shares are contiguous and sized by weights that follow the ranks' times in the backend: equal at
/// first, then a rank that took longer than the mean over a call gets fewer particles (damped, within
/// bounds). Every rank computes the same shares from the same exchanged times; which rank tracks a
/// particle never changes its result.
class SharedScan {
 public:
  /// `min_balance_seconds`: calls shorter than this on any rank leave the weights alone (their times
  /// are mostly fixed costs). It must be the same on every rank (run_da_scan takes rank 0's).
  SharedScan(Particles& particles, Communicator& ranks, double min_balance_seconds)
      : m_particles(particles),
        m_ranks(ranks),
        m_owner(particles.size(), kEveryRank),
        m_weight(static_cast<size_t>(ranks.size()), 1.0),
        m_min_balance_seconds(min_balance_seconds) {}

  /// This rank's share of the chunk's particles `alive` (the survivors in the scan's order); their
  /// coordinates made current here.
  Share take_share(const std::vector<size_t>& alive) {
    const int n_ranks = m_ranks.size();
    const std::vector<Share> shares = weighted_shares(alive.size());
    const Share mine = shares[static_cast<size_t>(m_ranks.rank())];
    std::vector<size_t> moving;  // particles tracked last by another rank than the one that takes them now
    for (int r = 0; r < n_ranks; ++r) {
      const Share s = shares[static_cast<size_t>(r)];
      for (size_t k = s.begin; k < s.end; ++k) {
        const int owner = m_owner[alive[k]];
        if (owner != kEveryRank && owner != r) moving.push_back(alive[k]);
      }
    }
    send_from_sources(
        m_particles, moving, [&](size_t m) { return m_owner[moving[m]]; }, m_ranks);
    for (int r = 0; r < n_ranks; ++r) {
      const Share s = shares[static_cast<size_t>(r)];
      for (size_t k = s.begin; k < s.end; ++k) m_owner[alive[k]] = r;
    }
    return mine;
  }

  /// After the chunk: every rank learns the state (alive or lost) and loss turn of every particle of it,
  /// and every rank's time in the backend for the chunk (`seconds`: this rank's), which sizes the next shares.
  void share_states(const std::vector<size_t>& alive, const Share& mine, double seconds) {
    const size_t n_ranks = m_weight.size(), rank = static_cast<size_t>(m_ranks.rank());
    std::vector<uint64_t> words(alive.size() + n_ranks, 0);
    for (size_t k = mine.begin; k < mine.end; ++k)
      words[k] = static_cast<uint64_t>(static_cast<uint32_t>(m_particles.state[alive[k]])) |
                 static_cast<uint64_t>(static_cast<uint32_t>(m_particles.lost_turn[alive[k]])) << 32;
    std::memcpy(&words[alive.size() + rank], &seconds, sizeof(double));
    m_ranks.allreduce_sum(words.data(), words.size());
    for (size_t k = 0; k < alive.size(); ++k) {
      m_particles.state[alive[k]] = static_cast<int32_t>(static_cast<uint32_t>(words[k]));
      m_particles.lost_turn[alive[k]] = static_cast<int32_t>(static_cast<uint32_t>(words[k] >> 32));
    }
    std::vector<double> times(n_ranks);
    std::memcpy(times.data(), &words[alive.size()], n_ranks * sizeof(double));
    rebalance(times, alive.size());
  }

  /// Every particle current on every rank (before a checkpoint and at the end).
  void synchronise() {
    std::vector<size_t> owned;
    for (size_t i = 0; i < m_owner.size(); ++i)
      if (m_owner[i] != kEveryRank) owned.push_back(i);
    send_from_sources(
        m_particles, owned, [&](size_t m) { return m_owner[owned[m]]; }, m_ranks);
    for (size_t i : owned) m_owner[i] = kEveryRank;
  }

 private:
  static constexpr int kEveryRank = -1;
  static constexpr double kMinWeight = 0.75, kMaxWeight = 1.33;

  /// Contiguous shares of n in proportion to the weights (rank r: [floor(n W_r / W), floor(n W_r+1 / W))).
  std::vector<Share> weighted_shares(size_t n) const {
    std::vector<Share> shares(m_weight.size());
    double total = 0.0;
    for (double w : m_weight) total += w;
    double below = 0.0;
    size_t begin = 0;
    for (size_t r = 0; r < m_weight.size(); ++r) {
      below += m_weight[r];
      const size_t end = r + 1 == m_weight.size()
                             ? n
                             : std::min(n, static_cast<size_t>(std::floor(static_cast<double>(n) * below / total)));
      shares[r] = Share{begin, std::max(begin, end)};
      begin = shares[r].end;
    }
    return shares;
  }

  /// A rank slower than the mean over the last call gets a smaller weight: w_r *= sqrt(mean / t_r)
  /// (half the correction that would equalise times linear in the particle count), then the weights are
  /// scaled to mean 1 and kept within [kMinWeight, kMaxWeight].
  void rebalance(const std::vector<double>& times, size_t chunk_particles) {
    if (chunk_particles < m_weight.size()) return;
    double mean = 0.0;
    for (double t : times) {
      if (!(t >= m_min_balance_seconds) || !(t > 0.0)) return;
      mean += t;
    }
    mean /= static_cast<double>(times.size());
    double sum = 0.0;
    for (size_t r = 0; r < m_weight.size(); ++r) sum += m_weight[r] *= std::sqrt(mean / times[r]);
    for (double& w : m_weight) w = std::clamp(w * static_cast<double>(m_weight.size()) / sum, kMinWeight, kMaxWeight);
  }

  Particles& m_particles;
  Communicator& m_ranks;
  std::vector<int> m_owner;      // the rank that tracked each particle last, or kEveryRank
  std::vector<double> m_weight;  // the ranks' share weights
  double m_min_balance_seconds;
};

}  // namespace

bool run_da_scan(DaScan& scan, Backend& backend, const DaRunOptions& options, DaProgress* progress_out) {
  DaProgress progress;
  progress.turns_total = scan.config.turns;
  progress.total = scan.particles.size();
  Communicator* ranks = options.ranks && options.ranks->size() > 1 ? options.ranks : nullptr;
  const bool writes = !ranks || ranks->is_root();
  // FUSETRACK_DA_FIRST_CALL_TURNS (1000: the calls of earlier versions) for the benchmarks' baseline;
  // FUSETRACK_DA_BALANCE_SECONDS (SharedScan; the tests: 0, every call moves the shares' boundaries).
  static const int64_t first_call_from_env = [] {
    const char* v = std::getenv("FUSETRACK_DA_FIRST_CALL_TURNS");
    return v ? std::clamp<int64_t>(std::atoll(v), 1, kLongestCallTurns) : int64_t{16};
  }();
  static const double balance_seconds_from_env = [] {
    const char* v = std::getenv("FUSETRACK_DA_BALANCE_SECONDS");
    return v ? std::max(0.0, std::atof(v)) : 0.2;
  }();
  int64_t first_call_turns = first_call_from_env;
  double balance_seconds = balance_seconds_from_env;
  std::optional<SharedScan> shared;
  if (ranks && ranks->is_root()) {
    const std::string idle = idle_ranks_notice(scan.particles.size(), ranks->size(), "initial conditions");
    if (!idle.empty()) fmt::print(stderr, "note: {}\n", idle);
  }
  if (ranks) {
    // The calls' lengths and the shares must be the same on every rank: rank 0's settings (the
    // environment of remote ranks may differ).
    uint64_t settings[2] = {0, 0};
    if (ranks->is_root()) {
      settings[0] = static_cast<uint64_t>(first_call_turns);
      std::memcpy(&settings[1], &balance_seconds, sizeof(double));
    }
    ranks->allreduce_sum(settings, 2);
    first_call_turns = static_cast<int64_t>(settings[0]);
    std::memcpy(&balance_seconds, &settings[1], sizeof(double));
    shared.emplace(scan.particles, *ranks, balance_seconds);
  }
  // Checkpoints every `checkpoint_every` turns (default 1000). The survivors are compacted before every
  // backend call, and the calls are short at first (16, 32, 64, ... turns, then at most 1000): most of
  // the particles that a scan loses go early, and on the GPU a lost particle's lane idles, its warp
  // running on, until the next compaction. Each particle's result does not depend on the calls.
  const int64_t checkpoint_every = options.checkpoint_every > 0 ? options.checkpoint_every : 1000;
  int64_t call_turns = first_call_turns;
  const std::string fingerprint = options.fingerprint.empty() ? da_fingerprint("", scan.config) : options.fingerprint;
  const auto t0 = std::chrono::steady_clock::now();
  // The time in the exchanges between ranks, waits for the slower rank included.
  auto exchange = [&](auto&& f) {
    const auto e0 = std::chrono::steady_clock::now();
    f();
    progress.exchange_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
  };
  // Checkpoints are written on a thread of their own while the next chunk is tracked (a copy of the
  // state); the previous one is finished first, so the files follow in order. A write that failed
  // stops every rank after the next chunk, and the scan throws its error (rank 0's) on every rank.
  std::future<void> checkpoint_writing;
  std::exception_ptr write_error;
  auto finish_write = [&] {
    if (!checkpoint_writing.valid()) return;
    try {
      checkpoint_writing.get();
    } catch (...) {
      if (!write_error) write_error = std::current_exception();
    }
  };
  // A stop asked on any rank stops every rank after the same chunk (no rank waits in an exchange).
  auto stop_asked = [&] {
    const bool local = (options.stop && options.stop->load()) || write_error;
    bool any = local;
    if (ranks) exchange([&] { any = !ranks->all(!local); });
    return any;
  };
  bool completed = true, stopping = stop_asked();
  while (scan.turns_done < scan.config.turns) {
    if (stopping) {
      completed = false;
      break;
    }
    // Compact the survivors: only alive particles go to the backend (MPI: this rank's share of them).
    std::vector<size_t> alive;
    for (size_t i = 0; i < scan.particles.size(); ++i)
      if (scan.particles.state[i] > 0) alive.push_back(i);
    if (alive.empty()) {
      scan.turns_done = scan.config.turns;
      break;
    }
    Share mine{0, alive.size()};
    if (shared) exchange([&] { mine = shared->take_share(alive); });
    Particles batch(mine.size(), scan.particles.beta0);
    for (size_t k = 0; k < mine.size(); ++k) {
      batch.store(k, scan.particles.view(alive[mine.begin + k]));
      batch.id[k] = scan.particles.id[alive[mine.begin + k]];
    }
    if (!scan.variant.empty()) {
      batch.variant.resize(mine.size());
      for (size_t k = 0; k < mine.size(); ++k) batch.variant[k] = scan.variant[alive[mine.begin + k]];
    }
    TrackOptions o;
    o.turns = std::min({call_turns, checkpoint_every - scan.turns_done % checkpoint_every,
                        scan.config.turns - scan.turns_done});
    call_turns = std::min(2 * call_turns, kLongestCallTurns);
    o.first_turn = scan.turns_done;
    o.fma = options.fma;
    o.threads = options.threads;
    const auto b0 = std::chrono::steady_clock::now();
    if (mine.size() > 0) backend.track(batch, o);
    const double call_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    progress.backend_seconds += call_seconds;
    for (size_t k = 0; k < mine.size(); ++k) {
      const size_t i = alive[mine.begin + k];
      scan.particles.store(i, batch.view(k));
      scan.particles.lost_turn[i] = batch.lost_turn[k];
      scan.particles.lost_element[i] = batch.lost_element[k];
    }
    if (shared) exchange([&] { shared->share_states(alive, mine, call_seconds); });
    progress.surviving_particle_turns += static_cast<double>(alive.size()) * static_cast<double>(o.turns);
    scan.turns_done += o.turns;
    progress.turns_done = scan.turns_done;
    progress.alive = scan.particles.alive_count();
    progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.on_progress) options.on_progress(progress);  // may ask to stop
    stopping = stop_asked();
    if (!options.checkpoint_file.empty() &&
        (scan.turns_done % checkpoint_every == 0 || scan.turns_done >= scan.config.turns || stopping)) {
      if (shared) exchange([&] { shared->synchronise(); });
      if (writes) {
        finish_write();
        if (!write_error) try {
            checkpoint_writing =
                std::async(std::launch::async, [members = checkpoint_members(scan, fingerprint),
                                                file = options.checkpoint_file] { write_npz(file, members); });
          } catch (...) {
            write_error = std::current_exception();
          }
      }
    }
  }
  if (shared) exchange([&] { shared->synchronise(); });
  finish_write();  // the last checkpoint written before the scan returns
  bool written = !write_error;
  if (ranks) exchange([&] { written = ranks->all(written); });
  if (!written) {
    if (write_error) std::rethrow_exception(write_error);
    throw Error("DA scan: rank 0 could not write the checkpoint (its message names the file)");
  }
  progress.turns_done = scan.turns_done;
  progress.alive = scan.particles.alive_count();
  progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress_out) *progress_out = progress;
  return completed && scan.turns_done >= scan.config.turns;
}

namespace {
std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}
}  // namespace

void read_da_checkpoint_on_root(DaScan& scan, const std::string& file, const std::string& fingerprint,
                                Communicator& ranks) {
  std::exception_ptr error;
  if (ranks.is_root()) try {
      read_da_checkpoint(scan, file, fingerprint);
    } catch (...) {
      error = std::current_exception();
    }
  if (!ranks.all(!error)) {
    if (error) std::rethrow_exception(error);
    throw InputError(InputLocation(file), "rank 0 could not read the checkpoint to resume from (its message says why)");
  }
  uint64_t turns = ranks.is_root() ? static_cast<uint64_t>(scan.turns_done) : 0;
  ranks.allreduce_sum(&turns, 1);
  scan.turns_done = static_cast<int64_t>(turns);
  std::vector<size_t> all(scan.particles.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  send_from_sources(
      scan.particles, all, [](size_t) { return 0; }, ranks);
}

std::string da_fingerprint(const std::string& lattice_file, const DaConfig& c) {
  json j;
  j["turns"] = c.turns;
  j["grid"] = c.grid == DaGrid::Polar ? "polar" : "cartesian";
  j["polar"] = {c.angles, c.angle_min, c.angle_max, c.amplitudes, c.amplitude_min, c.amplitude_max};
  j["cartesian"] = {c.nx, c.x_min, c.x_max, c.ny, c.y_min, c.y_max};
  j["units"] = c.units == DaUnits::Sigma ? "sigma" : "m";
  j["emittances"] = {c.emittance_nx, c.emittance_ny};
  j["offsets"] = {c.px0, c.py0, c.zeta0};
  j["deltas"] = c.deltas;
  j["closed_orbit"] = c.around_closed_orbit;
  j["limits"] = std::vector<double>(c.turn_limits, c.turn_limits + 6);
  std::string text = j.dump();
  if (!lattice_file.empty()) {
    std::ifstream in(lattice_file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  return fnv1a_hex(text);
}

std::string da_share_fingerprint(const std::string& fingerprint, int index, int count) {
  return fnv1a_hex(fmt::format("{}/{}/{}", fingerprint, index, count));
}

void write_da_checkpoint(const DaScan& scan, const std::string& file, const std::string& fingerprint) {
  write_npz(file, checkpoint_members(scan, fingerprint));
}

void read_da_checkpoint(DaScan& scan, const std::string& file, const std::string& fingerprint) {
  InputLocation where(file);
  if (!fs::exists(file)) throw InputError(where, "no checkpoint to resume from");
  NpzArchive a;
  try {
    a = read_npz(file);
  } catch (const Error& e) {
    throw InputError(where, std::string("unreadable checkpoint: ") + e.what());
  }
  for (const char* key : {"x", "px", "y", "py", "zeta", "delta", "ptau", "rpp", "rvv", "state", "lost_turn",
                          "lost_element", "turns_done", "fingerprint"})
    if (!a.count(key)) throw InputError(where, fmt::format("checkpoint lacks '{}'", key));
  const int64_t stored = a.at("fingerprint").to_int64().at(0);
  if (!fingerprint.empty() && stored != static_cast<int64_t>(std::stoull(fingerprint, nullptr, 16)))
    throw InputError(where, "the checkpoint belongs to another lattice or scan configuration; refusing to resume");
  Particles& p = scan.particles;
  const size_t n = p.size();
  auto doubles = [&](const char* key, std::vector<double>& out) {
    std::vector<double> v = a.at(key).to_doubles();
    if (v.size() != n) throw InputError(where, fmt::format("checkpoint array '{}' has {} entries, expected {}", key, v.size(), n));
    out = std::move(v);
  };
  doubles("x", p.x);
  doubles("px", p.px);
  doubles("y", p.y);
  doubles("py", p.py);
  doubles("zeta", p.zeta);
  doubles("delta", p.delta);
  doubles("ptau", p.ptau);
  doubles("rpp", p.rpp);
  doubles("rvv", p.rvv);
  const auto state = a.at("state").to_int64(), lost_turn = a.at("lost_turn").to_int64(),
             lost_element = a.at("lost_element").to_int64();
  if (state.size() != n || lost_turn.size() != n || lost_element.size() != n)
    throw InputError(where, "checkpoint loss arrays have the wrong size");
  for (size_t i = 0; i < n; ++i) {
    p.state[i] = static_cast<int32_t>(state[i]);
    p.lost_turn[i] = static_cast<int32_t>(lost_turn[i]);
    p.lost_element[i] = lost_element[i];
  }
  scan.turns_done = a.at("turns_done").to_int64().at(0);
}

namespace {

/// Loss turn of particle i as "never" when it survived.
int64_t loss_turn(const Particles& p, size_t i) {
  return p.state[i] > 0 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(p.lost_turn[i]);
}

}  // namespace

namespace {

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

void refine_da(const Lattice& lattice, DaScan& scan, DaSummary& summary, Backend& backend, const DaRunOptions& options) {
  const DaConfig& c = scan.config;
  if (c.refine_resolution <= 0 || c.grid != DaGrid::Polar) return;
  const double beta0 = lattice.reference().beta0();
  struct Ray {
    size_t result;   // index into summary.per_angle
    double lo, hi;   // surviving, lost amplitude
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

namespace {

/// The arrays of da.npz: initial coordinates, grid coordinates, losses, final x and y (and each
/// particle's variant in a study).
std::vector<std::pair<std::string, NpyArray>> da_npz_members(const DaScan& scan) {
  const Particles& in = scan.initial;
  const Particles& out = scan.particles;
  std::vector<std::pair<std::string, NpyArray>> m = {
      {"x0", NpyArray::from(in.x)},          {"px0", NpyArray::from(in.px)},
      {"y0", NpyArray::from(in.y)},          {"py0", NpyArray::from(in.py)},
      {"zeta0", NpyArray::from(in.zeta)},    {"delta0", NpyArray::from(in.delta)},
      {"grid_x", NpyArray::from(scan.grid_x)}, {"grid_y", NpyArray::from(scan.grid_y)},
      {"amplitude", NpyArray::from(scan.amplitude)}, {"angle", NpyArray::from(scan.angle)},
      {"delta_index", NpyArray::from(scan.delta_index)}, {"state", NpyArray::from(out.state)},
      {"lost_turn", NpyArray::from(out.lost_turn)}, {"lost_element", NpyArray::from(out.lost_element)},
      {"x", NpyArray::from(out.x)},           {"y", NpyArray::from(out.y)}};
  if (!scan.variant.empty()) m.emplace_back("variant", NpyArray::from(scan.variant));
  return m;
}

}  // namespace

void write_da_results(const DaScan& scan, const DaSummary& s, const std::string& directory, const std::string& lattice_file) {
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
  write_npz((fs::path(directory) / "da.npz").string(), da_npz_members(scan));
}

}  // namespace ft

namespace ft {

namespace {

/// `scan` with its per-particle columns passed through cut(column) and the particles through
/// cut_particles; the scan-wide fields copied.
template <class Cut, class CutParticles>
DaScan cut_da_scan(const DaScan& scan, Cut cut, CutParticles cut_particles) {
  DaScan part;
  part.config = scan.config;
  part.amplitude = cut(scan.amplitude);
  part.angle = cut(scan.angle);
  part.grid_x = cut(scan.grid_x);
  part.grid_y = cut(scan.grid_y);
  part.delta_index = cut(scan.delta_index);
  part.variants = scan.variants;
  if (!scan.variant.empty()) part.variant = cut(scan.variant);
  part.initial = cut_particles(scan.initial);
  part.particles = cut_particles(scan.particles);
  part.turns_done = scan.turns_done;
  part.sigma_x = scan.sigma_x;
  part.sigma_y = scan.sigma_y;
  std::copy(scan.closed_orbit, scan.closed_orbit + 6, part.closed_orbit);
  return part;
}

}  // namespace

DaScan slice_da_scan(const DaScan& scan, size_t begin, size_t end) {
  return cut_da_scan(
      scan,
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        return V(v.begin() + static_cast<long>(begin), v.begin() + static_cast<long>(end));
      },
      [&](const Particles& p) { return slice_particles(p, begin, end); });
}

std::string da_config_to_json(const DaConfig& c) {
  json j;
  j["turns"] = c.turns;
  j["grid"] = c.grid == DaGrid::Polar ? "polar" : "cartesian";
  j["angles"] = c.angles;
  j["angle_range"] = {c.angle_min, c.angle_max};
  j["amplitudes"] = c.amplitudes;
  j["amplitude_range"] = {c.amplitude_min, c.amplitude_max};
  j["nx"] = c.nx;
  j["ny"] = c.ny;
  j["x_range"] = {c.x_min, c.x_max};
  j["y_range"] = {c.y_min, c.y_max};
  j["units"] = c.units == DaUnits::Sigma ? "sigma" : "m";
  j["emittances"] = {c.emittance_nx, c.emittance_ny};
  j["offsets"] = {c.px0, c.py0, c.zeta0};
  j["deltas"] = c.deltas;
  j["around_closed_orbit"] = c.around_closed_orbit;
  j["limits"] = std::vector<double>(c.turn_limits, c.turn_limits + 6);
  j["refine_resolution"] = c.refine_resolution;
  return j.dump();
}

DaConfig da_config_from_json(const std::string& text, const std::string& file) {
  DaConfig c;
  try {
    const json j = json::parse(text);
    c.turns = j.at("turns").get<int64_t>();
    c.grid = j.at("grid").get<std::string>() == "polar" ? DaGrid::Polar : DaGrid::Cartesian;
    c.angles = j.at("angles").get<int>();
    c.angle_min = j.at("angle_range").at(0).get<double>();
    c.angle_max = j.at("angle_range").at(1).get<double>();
    c.amplitudes = j.at("amplitudes").get<int>();
    c.amplitude_min = j.at("amplitude_range").at(0).get<double>();
    c.amplitude_max = j.at("amplitude_range").at(1).get<double>();
    c.nx = j.at("nx").get<int>();
    c.ny = j.at("ny").get<int>();
    c.x_min = j.at("x_range").at(0).get<double>();
    c.x_max = j.at("x_range").at(1).get<double>();
    c.y_min = j.at("y_range").at(0).get<double>();
    c.y_max = j.at("y_range").at(1).get<double>();
    c.units = j.at("units").get<std::string>() == "sigma" ? DaUnits::Sigma : DaUnits::Metres;
    c.emittance_nx = j.at("emittances").at(0).get<double>();
    c.emittance_ny = j.at("emittances").at(1).get<double>();
    c.px0 = j.at("offsets").at(0).get<double>();
    c.py0 = j.at("offsets").at(1).get<double>();
    c.zeta0 = j.at("offsets").at(2).get<double>();
    c.deltas = j.at("deltas").get<std::vector<double>>();
    c.around_closed_orbit = j.at("around_closed_orbit").get<bool>();
    const auto limits = j.at("limits").get<std::vector<double>>();
    if (limits.size() != 6) throw std::runtime_error("limits must have 6 entries");
    std::copy(limits.begin(), limits.end(), c.turn_limits);
    c.refine_resolution = j.at("refine_resolution").get<double>();
  } catch (const std::exception& e) {
    InputLocation at(file);
    at.field = "config";
    throw InputError(at, std::string("not a DA scan configuration: ") + e.what());
  }
  return c;
}

namespace {

std::string part_stem(int index, int count) { return fmt::format("part_{}_of_{}", index, count); }

json variant_frames_to_json(const std::vector<DaScan::VariantFrame>& frames) {
  json out = json::array();
  for (const auto& f : frames)
    out.push_back({{"name", f.name},
                   {"sigma", {f.sigma_x, f.sigma_y}},
                   {"closed_orbit", std::vector<double>(f.closed_orbit, f.closed_orbit + 6)}});
  return out;
}

std::vector<DaScan::VariantFrame> variant_frames_from_json(const json& j, const std::string& file) {
  std::vector<DaScan::VariantFrame> out;
  try {
    for (const json& f : j) {
      DaScan::VariantFrame v;
      v.name = f.at("name").get<std::string>();
      v.sigma_x = f.at("sigma").at(0).get<double>();
      v.sigma_y = f.at("sigma").at(1).get<double>();
      for (size_t k = 0; k < 6; ++k) v.closed_orbit[k] = f.at("closed_orbit").at(k).get<double>();
      out.push_back(v);
    }
  } catch (const json::exception& ex) {
    throw InputError(InputLocation(file), fmt::format("bad \"variants\" in a study part: {}", ex.what()));
  }
  return out;
}

}  // namespace

void write_da_part(const DaScan& scan, int index, int count, size_t total, const std::string& directory,
                   const std::string& lattice_file, const std::string& fingerprint) {
  fs::create_directories(directory);
  const std::string stem = (fs::path(directory) / part_stem(index, count)).string();
  auto members = particle_arrays(scan.particles);
  for (auto& [name, array] : particle_arrays(scan.initial)) members.emplace_back("initial_" + name, std::move(array));
  members.emplace_back("amplitude", NpyArray::from(scan.amplitude));
  members.emplace_back("angle", NpyArray::from(scan.angle));
  members.emplace_back("grid_x", NpyArray::from(scan.grid_x));
  members.emplace_back("grid_y", NpyArray::from(scan.grid_y));
  members.emplace_back("delta_index", NpyArray::from(scan.delta_index));
  if (!scan.variant.empty()) members.emplace_back("variant", NpyArray::from(scan.variant));
  write_npz(stem + ".npz", members);
  json j;
  j["fusetrack_da_part"] = 1;
  j["part"] = index;
  j["parts"] = count;
  j["total_particles"] = total;
  j["particles"] = scan.particles.size();
  j["turns_done"] = scan.turns_done;
  j["fingerprint"] = fingerprint;
  j["lattice"] = lattice_file;
  j["config"] = json::parse(da_config_to_json(scan.config));
  j["sigma"] = {scan.sigma_x, scan.sigma_y};
  j["closed_orbit"] = std::vector<double>(scan.closed_orbit, scan.closed_orbit + 6);
  j["beta0"] = scan.particles.beta0;
  if (!scan.variants.empty()) j["variants"] = variant_frames_to_json(scan.variants);
  write_file_atomically(stem + ".json", j.dump(2) + "\n");
}

DaScan merge_da_parts(const std::vector<std::string>& inputs, std::string& lattice_file) {
  // The part descriptions: files given, or the part_*_of_*.json files of the directories given.
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    if (fs::is_directory(in)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("part_", 0) == 0 && e.path().extension() == ".json") found.push_back(e.path().string());
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) throw InputError(InputLocation(in), "no part_<i>_of_<N>.json files in this directory");
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(in);
    }
  }
  if (files.empty()) throw InputError(InputLocation(), "no parts to merge");
  struct PartInfo {
    std::string file;
    json meta;
  };
  std::vector<PartInfo> parts;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) throw InputError(InputLocation(f), "cannot open this part");
    PartInfo p{f, json()};
    try {
      p.meta = json::parse(in);
    } catch (const std::exception& e) {
      throw InputError(InputLocation(f), std::string("not a DA part description: ") + e.what());
    }
    if (!p.meta.is_object() || !p.meta.contains("fusetrack_da_part"))
      throw InputError(InputLocation(f), "not a DA part description (written by fusetrack da --part i/N)");
    parts.push_back(std::move(p));
  }
  const json& first = parts.front().meta;
  const int count = first.at("parts").get<int>();
  std::vector<const PartInfo*> by_index(static_cast<size_t>(count), nullptr);
  for (const PartInfo& p : parts) {
    InputLocation at(p.file);
    if (p.meta.at("fingerprint") != first.at("fingerprint") || p.meta.at("config") != first.at("config"))
      throw InputError(at, fmt::format("this part belongs to another scan than {} (the lattice file or the scan "
                                       "options differ: fingerprint {} against {})",
                                       parts.front().file, p.meta.at("fingerprint").get<std::string>(),
                                       first.at("fingerprint").get<std::string>()));
    if (p.meta.at("parts").get<int>() != count)
      throw InputError(at, fmt::format("this part is one of {} parts, {} is one of {}", p.meta.at("parts").get<int>(),
                                       parts.front().file, count));
    const int index = p.meta.at("part").get<int>();
    if (index < 0 || index >= count) throw InputError(at, fmt::format("part index {} is not in 0..{}", index, count - 1));
    if (by_index[static_cast<size_t>(index)])
      throw InputError(at, fmt::format("part {} of {} is given twice (also {})", index, count,
                                       by_index[static_cast<size_t>(index)]->file));
    by_index[static_cast<size_t>(index)] = &p;
  }
  std::vector<std::string> missing;
  for (int i = 0; i < count; ++i)
    if (!by_index[static_cast<size_t>(i)]) missing.push_back(fmt::format("{} ({}.json)", i, part_stem(i, count)));
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw InputError(InputLocation(parts.front().file),
                     fmt::format("{} of {} parts missing: part {}", missing.size(), count, list));
  }
  DaScan scan;
  scan.config = da_config_from_json(first.at("config").dump(), parts.front().file);
  lattice_file = first.at("lattice").get<std::string>();
  const double beta0 = first.at("beta0").get<double>();
  scan.initial.beta0 = scan.particles.beta0 = beta0;
  scan.sigma_x = first.at("sigma").at(0).get<double>();
  scan.sigma_y = first.at("sigma").at(1).get<double>();
  for (int k = 0; k < 6; ++k) scan.closed_orbit[k] = first.at("closed_orbit").at(static_cast<size_t>(k)).get<double>();
  for (int i = 0; i < count; ++i) {
    const PartInfo& p = *by_index[static_cast<size_t>(i)];
    InputLocation at(p.file);
    const int64_t done = p.meta.at("turns_done").get<int64_t>();
    if (done < scan.config.turns)
      throw InputError(at, fmt::format("part {} stopped at turn {} of {}: finish it with --resume first", i, done,
                                       scan.config.turns));
    scan.turns_done = done;
    const std::string npz = fs::path(p.file).replace_extension(".npz").string();
    const NpzArchive a = read_npz(npz);
    auto take = [&](const std::string& prefix, Particles& into) {
      Particles part(0, beta0);
      auto get = [&](const std::string& key) -> const NpyArray& {
        auto it = a.find(prefix + key);
        if (it == a.end()) throw InputError(InputLocation(npz), fmt::format("part archive lacks '{}'", prefix + key));
        return it->second;
      };
      part.x = get("x").to_doubles();
      part.px = get("px").to_doubles();
      part.y = get("y").to_doubles();
      part.py = get("py").to_doubles();
      part.zeta = get("zeta").to_doubles();
      part.delta = get("delta").to_doubles();
      part.ptau = get("ptau").to_doubles();
      part.rpp = get("rpp").to_doubles();
      part.rvv = get("rvv").to_doubles();
      for (int64_t v : get("state").to_int64()) part.state.push_back(static_cast<int32_t>(v));
      for (int64_t v : get("lost_turn").to_int64()) part.lost_turn.push_back(static_cast<int32_t>(v));
      part.lost_element = get("lost_element").to_int64();
      part.id = get("id").to_int64();
      const size_t n = part.x.size();
      if (n != p.meta.at("particles").get<size_t>() || part.state.size() != n || part.id.size() != n)
        throw InputError(InputLocation(npz), "part archive arrays do not match the part description");
      append_particles(into, part);
    };
    take("", scan.particles);
    take("initial_", scan.initial);
    auto add = [&](const char* key, std::vector<double>& to) {
      auto it = a.find(key);
      if (it == a.end()) throw InputError(InputLocation(npz), fmt::format("part archive lacks '{}'", key));
      const auto v = it->second.to_doubles();
      to.insert(to.end(), v.begin(), v.end());
    };
    add("amplitude", scan.amplitude);
    add("angle", scan.angle);
    add("grid_x", scan.grid_x);
    add("grid_y", scan.grid_y);
    auto di = a.find("delta_index");
    if (di == a.end()) throw InputError(InputLocation(npz), "part archive lacks 'delta_index'");
    for (int64_t v : di->second.to_int64()) scan.delta_index.push_back(static_cast<int32_t>(v));
    if (first.contains("variants")) {
      auto vi = a.find("variant");
      if (vi == a.end()) throw InputError(InputLocation(npz), "part archive of a study lacks 'variant'");
      for (int64_t v : vi->second.to_int64()) scan.variant.push_back(static_cast<int32_t>(v));
    }
  }
  if (first.contains("variants")) scan.variants = variant_frames_from_json(first.at("variants"), parts.front().file);
  if (scan.particles.size() != first.at("total_particles").get<size_t>())
    throw InputError(InputLocation(parts.front().file), "the parts do not add up to the scan's particle count");
  return scan;
}

DaScan make_da_study(const std::vector<const Lattice*>& lattices, const std::vector<std::string>& names,
                     const DaConfig& config, Communicator* ranks) {
  if (lattices.empty()) throw Error("a DA study needs at least one lattice");
  if (names.size() != lattices.size()) throw Error("a DA study needs one name per lattice");
  const size_t n = lattices.size();
  const int n_ranks = ranks ? ranks->size() : 1, rank = ranks ? ranks->rank() : 0;
  // Each variant's closed orbit and optics (its frame) on its own thread (independent lattices; the
  // CPU work of a study's set-up, 45 s one after the other for 60 seeds of the CLIC damping ring),
  // and over MPI ranks each rank those of its share of the variants, exchanged after.
  const Share mine = share_of(n, rank, n_ranks);
  std::vector<DaFrame> frames(n);
  std::vector<std::string> failures(n);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t v = mine.begin; v < mine.end; ++v) {
    try {
      frames[v] = da_frame(*lattices[v], config);
    } catch (const std::exception& ex) {  // e.g. no closed orbit: name the variant (an error seed without correction)
      failures[v] = fmt::format("DA study, variant '{}': {}", names[v], ex.what());
    }
  }
  if (n_ranks > 1) {
    // The ranks agree first on the first variant that failed (every rank throws its message: no
    // rank waits in a later exchange), then exchange the frames as bit patterns: each word is
    // summed from its owner's value and zeros, which is exact.
    std::vector<uint64_t> first(static_cast<size_t>(n_ranks), 0);
    first[static_cast<size_t>(rank)] = n;
    for (size_t v = mine.begin; v < mine.end; ++v)
      if (!failures[v].empty()) {
        first[static_cast<size_t>(rank)] = v;
        break;
      }
    ranks->allreduce_sum(first.data(), first.size());
    const size_t failed = static_cast<size_t>(*std::min_element(first.begin(), first.end()));
    if (failed < n) {
      const std::string& own = failures[failed];  // empty except on the rank that computed it
      uint64_t length = own.size();
      ranks->allreduce_sum(&length, 1);
      std::vector<uint64_t> words((length + 7) / 8, 0);
      std::memcpy(words.data(), own.data(), own.size());
      ranks->allreduce_sum(words.data(), words.size());
      throw Error(std::string(reinterpret_cast<const char*>(words.data()), length));
    }
    std::vector<uint64_t> words(n * kFrameWords, 0);
    for (size_t v = mine.begin; v < mine.end; ++v) frame_to_words(frames[v], &words[v * kFrameWords]);
    ranks->allreduce_sum(words.data(), words.size());
    for (size_t v = 0; v < n; ++v) frames[v] = frame_from_words(&words[v * kFrameWords]);
  }
  for (const std::string& f : failures)
    if (!f.empty()) throw Error(f);
  std::vector<DaScan> scans(n);
  for (size_t v = 0; v < n; ++v) scans[v] = da_scan_in_frame(frames[v], config);
  DaScan study = std::move(scans[0]);
  study.variant.assign(study.particles.size(), 0);
  auto frame_of = [&](const DaScan& s, size_t v) {
    DaScan::VariantFrame f;
    f.name = names[v];
    f.sigma_x = s.sigma_x;
    f.sigma_y = s.sigma_y;
    std::copy(s.closed_orbit, s.closed_orbit + 6, f.closed_orbit);
    return f;
  };
  study.variants.push_back(frame_of(study, 0));
  for (size_t v = 1; v < lattices.size(); ++v) {
    const DaScan& s = scans[v];
    study.variants.push_back(frame_of(s, v));
    auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
    add(study.amplitude, s.amplitude);
    add(study.angle, s.angle);
    add(study.grid_x, s.grid_x);
    add(study.grid_y, s.grid_y);
    add(study.delta_index, s.delta_index);
    append_particles(study.initial, s.initial);
    append_particles(study.particles, s.particles);
    study.variant.insert(study.variant.end(), s.particles.size(), static_cast<int32_t>(v));
  }
  return study;
}

DaScan da_variant_scan(const DaScan& study, size_t v) {
  if (study.variants.empty()) {
    if (v != 0) throw Error("a scan of one lattice has only variant 0");
    return study;
  }
  if (v >= study.variants.size()) throw Error(fmt::format("variant {} of a study of {}", v, study.variants.size()));
  // A variant's particles are consecutive (make_da_study; shares and parts keep the order).
  size_t begin = 0;
  while (begin < study.variant.size() && study.variant[begin] != static_cast<int32_t>(v)) ++begin;
  size_t end = begin;
  while (end < study.variant.size() && study.variant[end] == static_cast<int32_t>(v)) ++end;
  DaScan scan = slice_da_scan(study, begin, end);
  scan.variants.clear();
  scan.variant.clear();
  const DaScan::VariantFrame& f = study.variants[v];
  scan.sigma_x = f.sigma_x;
  scan.sigma_y = f.sigma_y;
  std::copy(f.closed_orbit, f.closed_orbit + 6, scan.closed_orbit);
  return scan;
}

namespace {

/// The DA a variant's summary gives for one row: polar, last stable (refined when refined);
/// cartesian, the vertical border min(|y_high|, |y_low|) (NaN when the start is lost).
double row_da(const DaSummary& s, size_t row, bool cartesian) {
  if (cartesian) {
    const DaColumnResult& c = s.per_column[row];
    return std::min(std::fabs(c.y_high), std::fabs(c.y_low));
  }
  const DaAngleResult& r = s.per_angle[row];
  return std::isnan(r.da_refined) ? r.da_last_stable : r.da_refined;
}

/// min, mean, population standard deviation, max of the finite values; the index of the minimum.
void statistics(const std::vector<double>& v, double& min, double& mean, double& std, double& max, size_t& arg_min) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  min = mean = std = max = nan;
  arg_min = 0;
  double sum = 0.0;
  size_t n = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    if (std::isnan(v[k])) continue;
    if (n == 0 || v[k] < min) min = v[k], arg_min = k;
    if (n == 0 || v[k] > max) max = v[k];
    sum += v[k];
    ++n;
  }
  if (n == 0) return;
  mean = sum / static_cast<double>(n);
  double squares = 0.0;
  for (double x : v)
    if (!std::isnan(x)) squares += (x - mean) * (x - mean);
  std = std::sqrt(squares / static_cast<double>(n));
}

json nullable(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

std::string directory_name(size_t v, const std::string& name) {
  std::string safe;
  for (char c : name) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return fmt::format("{:03d}_{}", v, safe);
}

}  // namespace

DaStudySummary summarize_da_study(const DaScan& study, std::vector<DaSummary> per_variant) {
  DaStudySummary out;
  const size_t n_variants = std::max<size_t>(1, study.variants.size());
  if (per_variant.size() != n_variants) throw Error("summarize_da_study: one summary per variant expected");
  for (size_t v = 0; v < n_variants; ++v) out.names.push_back(study.variants.empty() ? "base" : study.variants[v].name);
  out.per_variant = std::move(per_variant);
  const bool cartesian = study.config.grid == DaGrid::Cartesian;
  const size_t rows = cartesian ? out.per_variant[0].per_column.size() : out.per_variant[0].per_angle.size();
  for (size_t r = 0; r < rows; ++r) {
    DaStudyRow row;
    row.delta = cartesian ? out.per_variant[0].per_column[r].delta : out.per_variant[0].per_angle[r].delta;
    row.angle = cartesian ? out.per_variant[0].per_column[r].x : out.per_variant[0].per_angle[r].angle;
    for (const DaSummary& s : out.per_variant) row.per_variant.push_back(row_da(s, r, cartesian));
    statistics(row.per_variant, row.min, row.mean, row.std, row.max, row.worst_variant);
    out.rows.push_back(std::move(row));
  }
  std::vector<double> minima;
  for (const DaSummary& s : out.per_variant) minima.push_back(s.da_min);
  statistics(minima, out.da_min, out.da_mean, out.da_std, out.da_max, out.worst_variant);
  return out;
}

DaStudySummary summarize_da_study(const DaScan& study) {
  std::vector<DaSummary> per_variant;
  for (size_t v = 0; v < std::max<size_t>(1, study.variants.size()); ++v)
    per_variant.push_back(summarize_da(da_variant_scan(study, v)));
  return summarize_da_study(study, std::move(per_variant));
}

void write_da_study_results(const DaScan& study, const DaStudySummary& s, const std::string& directory,
                            const std::string& lattice_file) {
  fs::create_directories(directory);
  const DaConfig& c = study.config;
  const bool cartesian = c.grid == DaGrid::Cartesian;
  const char* unit = c.units == DaUnits::Sigma ? "sigma" : "m";
  json j;
  j["lattice"] = lattice_file;
  j["study"] = true;
  j["variants"] = s.names;
  j["turns"] = c.turns;
  j["grid"] = cartesian ? "cartesian" : "polar";
  j["amplitude_unit"] = unit;
  j["deltas"] = c.deltas;
  j["particles"] = study.particles.size();
  j["survivors"] = study.particles.alive_count();
  j["definition"] = cartesian ? "per x column and variant, the vertical border min(|y_high|, |y_low|) of the stable "
                                "region; across variants min, mean, std (population), max"
                              : "per angle and variant, the DA (largest amplitude below the first loss on the ray that "
                                "survived, refined when refinement is on); across variants min, mean, std "
                                "(population), max";
  j["da_min_over_variants"] = nullable(s.da_min);
  j["da_min_mean"] = nullable(s.da_mean);
  j["da_min_std"] = nullable(s.da_std);
  j["da_min_max"] = nullable(s.da_max);
  j["worst_variant"] = s.names[s.worst_variant];
  json rows = json::array();
  for (const DaStudyRow& r : s.rows) {
    json per = json::array();
    for (double v : r.per_variant) per.push_back(nullable(v));
    rows.push_back({{"delta", r.delta},
                    {cartesian ? "x" : "angle_deg", r.angle},
                    {"min", nullable(r.min)},
                    {"mean", nullable(r.mean)},
                    {"std", nullable(r.std)},
                    {"max", nullable(r.max)},
                    {"worst_variant", s.names[r.worst_variant]},
                    {"per_variant", per}});
  }
  j[cartesian ? "per_column" : "per_angle"] = rows;
  json vs = json::array();
  for (size_t v = 0; v < s.names.size(); ++v) {
    const DaSummary& d = s.per_variant[v];
    vs.push_back({{"name", s.names[v]},
                  {"directory", "variants/" + directory_name(v, s.names[v])},
                  {"da_min", d.da_min},
                  {"da_mean", d.da_mean},
                  {"da_max", d.da_max}});
  }
  j["per_variant"] = vs;
  write_file_atomically((fs::path(directory) / "summary.json").string(), j.dump(2) + "\n");
  write_file_atomically((fs::path(directory) / "summary.csv").string(), [&](std::ostream& csv) {
    csv << (cartesian ? "delta,x,min,mean,std,max,worst_variant" : "delta,angle_deg,min,mean,std,max,worst_variant");
    for (const std::string& name : s.names) csv << ",\"" << name << "\"";
    csv << "\n";
    for (const DaStudyRow& r : s.rows) {
      csv << fmt::format("{:.10g},{:.10g},{:.10g},{:.10g},{:.10g},{:.10g},\"{}\"", r.delta, r.angle, r.min, r.mean,
                         r.std, r.max, s.names[r.worst_variant]);
      for (double v : r.per_variant) csv << fmt::format(",{:.10g}", v);
      csv << "\n";
    }
  });
  std::vector<DaScan> scans;  // each variant's own scan, made once
  for (size_t v = 0; v < s.names.size(); ++v) scans.push_back(da_variant_scan(study, v));
  write_file_atomically((fs::path(directory) / "variants.csv").string(), [&](std::ostream& csv) {
    csv << "variant,name,da_min,da_mean,da_max,particles,survivors\n";
    for (size_t v = 0; v < s.names.size(); ++v)
      csv << fmt::format("{},\"{}\",{:.10g},{:.10g},{:.10g},{},{}\n", v, s.names[v], s.per_variant[v].da_min,
                         s.per_variant[v].da_mean, s.per_variant[v].da_max, scans[v].particles.size(),
                         scans[v].particles.alive_count());
  });
  for (size_t v = 0; v < s.names.size(); ++v)
    write_da_results(scans[v], s.per_variant[v],
                     (fs::path(directory) / "variants" / directory_name(v, s.names[v])).string(),
                     fmt::format("{} (variant '{}')", lattice_file, s.names[v]));
  write_npz((fs::path(directory) / "da.npz").string(), da_npz_members(study));
}

}  // namespace ft
