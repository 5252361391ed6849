// CPU backend: particles in blocks, each block taken through the elements one at a time by the
// plugin's host-compiled loop (ft::element_sdk::track_block), blocks spread over OpenMP threads.
// Built with -ffp-contract=off: the bitwise reference for the GPU with fma=off.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <limits>
#include <string>

#include "fusetrack/codegen.h"
#include "fusetrack/collective.h"
#include "fusetrack/device/transform.h"
#include "fusetrack/error.h"
#include "fusetrack/slice_wakes.h"
#include "fusetrack/space_charge.h"
#include "fusetrack/tracker.h"

namespace ft {

namespace {

constexpr size_t kBlockSize = 64;

/// A block of particles copied out of the shared arrays for the time it is tracked. Threads then
/// never write to a cache line another thread writes to: with blocks tracked in place, the lines
/// at block boundaries (the arrays are not 64-byte aligned) moved between cores at every element,
/// and 4 threads ran no faster than one (measured; bench/cpu/). 7 KiB: it stays in L1.
struct alignas(64) BlockBuffer {
  // Arrays kStride apart, not 512 bytes: with 512, x and rvv were 4096 bytes apart, and the CPU
  // took a store to one and a load from the other as dependent (4K aliasing), 40% slower per core.
  static constexpr size_t kStride = kBlockSize + 8;
  double x[kStride], px[kStride], y[kStride], py[kStride], zeta[kStride], delta[kStride];
  double ptau[kStride], rpp[kStride], rvv[kStride];
  int32_t state[2 * kStride], lost_turn[2 * kStride];
  int64_t lost_element[kStride];

  /// Copies particles [first, first + count) in and returns the block that points here.
  ft_particle_block load(Particles& p, size_t first, size_t count) {
    const ft_particle_block shared = p.block(first, count);
    ft_particle_block b = shared;
    b.x = x, b.px = px, b.y = y, b.py = py, b.zeta = zeta, b.delta = delta, b.ptau = ptau, b.rpp = rpp;
    b.rvv = rvv, b.state = state, b.lost_turn = lost_turn, b.lost_element = lost_element;
    copy_arrays(shared, b);
    return b;
  }
  /// Copies the tracked block back into the shared arrays.
  static void store(Particles& p, const ft_particle_block& b, size_t first) {
    copy_arrays(b, p.block(first, static_cast<size_t>(b.count)));
  }

 private:
  static void copy_arrays(const ft_particle_block& from, const ft_particle_block& to) {
    const auto n = static_cast<size_t>(from.count);
    auto copy = [n](const auto* src, auto* dst) { std::copy(src, src + n, dst); };
    copy(from.x, to.x), copy(from.px, to.px), copy(from.y, to.y), copy(from.py, to.py);
    copy(from.zeta, to.zeta), copy(from.delta, to.delta), copy(from.ptau, to.ptau), copy(from.rpp, to.rpp);
    copy(from.rvv, to.rvv), copy(from.state, to.state), copy(from.lost_turn, to.lost_turn);
    copy(from.lost_element, to.lost_element);
  }
};

/// End-of-turn checks of a block (finite coordinates, the per-turn limits); a loss counts at the
/// last element of the turn.
void apply_turn_end(ft_particle_block& b, const GlobalLimits& limits, int64_t turn, size_t n_elements) {
  for (int64_t i = 0; i < b.count; ++i) {
    if (b.state[i] <= 0) continue;
    ParticleView p{b.x[i],    b.px[i],  b.y[i],   b.py[i], b.zeta[i], b.delta[i],
                   b.ptau[i], b.rpp[i], b.rvv[i], b.beta0, b.state[i]};
    apply_turn_limits(p, limits);
    if (p.state <= 0) {
      b.state[i] = p.state;
      b.lost_turn[i] = static_cast<int32_t>(turn);
      b.lost_element[i] = static_cast<int64_t>(n_elements) - 1;
    }
  }
}

/// One element whose definition has a transformation (fusetrack/device/transform.h): every alive
/// particle into the element's frame, the plugin's loop (its global limit lifted: that limit
/// applies in the line's frame), back out for every particle that went in (lost in the element or
/// not, as xtrack's serial CPU and CUDA loops do), then the global limit. The fused GPU kernels do
/// the same per particle: transform_entry, NAME_track, transform_exit, apply_element_limits.
int track_transformed(ft_track_block_fn fn, const void* params, const unsigned char* transform, ft_particle_block& b,
                      ft_error* err) {
  bool entered[kBlockSize];
  for (int64_t i = 0; i < b.count; ++i) {
    entered[i] = b.state[i] > 0;
    if (!entered[i]) continue;
    ParticleView p{b.x[i],    b.px[i],  b.y[i],   b.py[i], b.zeta[i], b.delta[i],
                   b.ptau[i], b.rpp[i], b.rvv[i], b.beta0, b.state[i]};
    transform_entry(transform, p);
    b.x[i] = p.x;
    b.px[i] = p.px;
    b.y[i] = p.y;
    b.py[i] = p.py;
    b.zeta[i] = p.zeta;
  }
  const GlobalLimits limits{b.limit_x, b.limit_y, {0, 0, 0, 0, 0, 0}};
  b.limit_x = b.limit_y = std::numeric_limits<double>::infinity();
  const int rc = fn(params, &b, err);
  b.limit_x = limits.x;
  b.limit_y = limits.y;
  if (rc != 0) return rc;
  for (int64_t i = 0; i < b.count; ++i) {
    if (!entered[i]) continue;
    ParticleView p{b.x[i],    b.px[i],  b.y[i],   b.py[i], b.zeta[i], b.delta[i],
                   b.ptau[i], b.rpp[i], b.rvv[i], b.beta0, b.state[i]};
    transform_exit(transform, p);
    const bool alive = p.state > 0;
    apply_element_limits(p, limits);
    b.x[i] = p.x;
    b.px[i] = p.px;
    b.y[i] = p.y;
    b.py[i] = p.py;
    b.zeta[i] = p.zeta;
    if (alive && p.state <= 0) {
      b.state[i] = p.state;
      b.lost_turn[i] = b.turn;
      b.lost_element[i] = b.element_index;
    }
  }
  return 0;
}

/// The transformation block of a sequence entry's definition, or nullptr.
const unsigned char* transform_of(const Lattice& lattice, uint32_t definition) {
  const std::vector<uint64_t>* block = lattice.transform_block(definition);
  return block ? reinterpret_cast<const unsigned char*>(block->data()) : nullptr;
}

}  // namespace

int track_sequence_entry(const Lattice& lattice, size_t e, ft_particle_block& b, ft_error* err) {
  const uint32_t definition = lattice.sequence()[e].definition;
  const ft_track_block_fn fn = lattice.definitions()[definition].type->track_block;
  if (!fn) return 0;
  const unsigned char* transform = transform_of(lattice, definition);
  if (!transform) return fn(lattice.params(definition), &b, err);
  // track_transformed works on at most kBlockSize particles.
  const ft_particle_block whole = b;
  for (int64_t first = 0; first < whole.count; first += static_cast<int64_t>(kBlockSize)) {
    ft_particle_block part = whole;
    part.count = std::min<int64_t>(static_cast<int64_t>(kBlockSize), whole.count - first);
    part.x += first, part.px += first, part.y += first, part.py += first, part.zeta += first;
    part.delta += first, part.ptau += first, part.rpp += first, part.rvv += first, part.state += first;
    part.lost_turn += first, part.lost_element += first;
    const int rc = track_transformed(fn, lattice.params(definition), transform, part, err);
    if (rc != 0) return rc;
  }
  return 0;
}

namespace {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const Lattice& lattice) : m_lattice(lattice) {}
  std::string name() const override { return "cpu"; }
  void track(Particles& particles, const TrackOptions& options) override;
  std::vector<CollectiveSnapshot> collective_snapshots() const override {
    std::vector<CollectiveSnapshot> profiles;  // the profile kind's (grid elements: grid_reports)
    for (size_t c = 0; c < m_snapshots.size(); ++c)
      if (m_solvers[c]) profiles.push_back(m_snapshots[c]);
    return profiles;
  }
  std::vector<GridCollectiveReport> grid_reports() const override {
    std::vector<GridCollectiveReport> reports;
    for (const auto& g : m_grid_solvers)
      if (g) reports.push_back(g->report());
    return reports;
  }
  // Element functions read the lattice's parameters at every call; collective solvers copy theirs.
  void parameters_changed() override {
    m_solvers.clear();
    m_grid_solvers.clear();
    m_moment_solvers.clear();
  }
  void set_variants(const std::vector<const Lattice*>& variants) override {
    check_variants_trackable(m_lattice, variants);
    m_variants = variants;
  }

 private:
  /// Turn by turn, split at the collective elements (TurnProgram): each segment in parallel
  /// over particle blocks, then the integer profile summed over threads and solved.
  void track_collective(Particles& particles, const TrackOptions& options);
  /// The collective solvers of `program`, made again where their count, the FMA mode or the
  /// macroparticle count changed (else kept: multi-turn wake memory).
  void prepare_collective_solvers(const TurnProgram& program, FmaMode fma, size_t macroparticles);
  class CollectiveRun;

  const Lattice& m_lattice;
  std::vector<const Lattice*> m_variants;  // set_variants; empty: m_lattice for every particle
  // Collective state, kept across track() calls (multi-turn wake memory).
  // Per collective element of the TurnProgram, one of the three kinds (the others null).
  std::vector<std::unique_ptr<CollectiveSolver>> m_solvers;
  std::vector<std::unique_ptr<GridCollectiveSolver>> m_grid_solvers;
  std::vector<std::unique_ptr<MomentsCollectiveSolver>> m_moment_solvers;
  FmaMode m_solver_fma = FmaMode::Off;
  size_t m_solver_macroparticles = 0;
  std::vector<CollectiveSnapshot> m_snapshots;
};

void CpuBackend::track(Particles& particles, const TrackOptions& options) {
  if (runs_collective(m_lattice, options)) {
    if (!m_variants.empty()) throw Error("lattice variants with collective elements are not supported");
    track_collective(particles, options);
    return;
  }
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  const bool full_turn_end = end == n_elements;
  const GlobalLimits limits = m_lattice.limits();
  const size_t n = particles.size();

  // The blocks: at most kBlockSize consecutive particles of one variant (with variants, a block
  // ends where the variant changes; particles ordered by variant make full blocks).
  struct BlockSpan {
    size_t first, count;
    int32_t variant;
  };
  std::vector<BlockSpan> blocks;
  blocks.reserve((n + kBlockSize - 1) / kBlockSize);
  const size_t n_variants = std::max<size_t>(1, m_variants.size());
  for (size_t first = 0; first < n;) {
    const int32_t v = particle_variant(particles, first, n_variants);
    size_t count = 1;
    while (count < kBlockSize && first + count < n && particle_variant(particles, first + count, n_variants) == v)
      ++count;
    blocks.push_back({first, count, v});
    first += count;
  }
  const size_t n_blocks = blocks.size();

  // Resolve what each sequence entry calls once, outside the hot loop (per variant: its own
  // parameters and transformations).
  struct Step {
    ft_track_block_fn fn;
    const void* params;
    const unsigned char* transform;  // nullptr: none
  };
  std::vector<Step> all_steps(n_variants * n_elements);
  for (size_t v = 0; v < n_variants; ++v) {
    const Lattice& lattice = m_variants.empty() ? m_lattice : *m_variants[v];
    for (size_t e = 0; e < n_elements; ++e) {
      const auto& entry = lattice.sequence()[e];
      // Collective elements are skipped here (options.collective is false): fn stays null.
      all_steps[v * n_elements + e] = {lattice.definitions()[entry.definition].type->track_block,
                                       lattice.params(entry.definition), transform_of(lattice, entry.definition)};
    }
  }

  const int64_t chunk = options.callback_every > 0 ? options.callback_every : options.turns;
  int64_t done = 0;
  while (done < options.turns) {
    const int64_t turns_now = std::min(chunk, options.turns - done);
    std::atomic<bool> failed{false};
    std::string failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(options.threads > 0 ? options.threads : omp_get_max_threads())
    for (size_t blk = 0; blk < n_blocks; ++blk) {
      const size_t first = blocks[blk].first;
      const size_t count = blocks[blk].count;
      const Step* steps = all_steps.data() + static_cast<size_t>(blocks[blk].variant) * n_elements;
      BlockBuffer buffer;
      ft_particle_block b = buffer.load(particles, first, count);
      b.limit_x = limits.x;
      b.limit_y = limits.y;
      ft_error err;  // written by an element only when it fails (not cleared per element: 512 bytes)
      err.message[0] = '\0';
      for (int64_t t = 0; t < turns_now && !failed.load(std::memory_order_relaxed); ++t) {
        const int64_t turn = options.first_turn + done + t;
        bool any_alive = false;
        for (size_t i = 0; i < count; ++i) any_alive |= b.state[i] > 0;
        if (!any_alive) break;
        b.turn = static_cast<int32_t>(turn);
        for (size_t e = begin; e < end; ++e) {
          if (!steps[e].fn) continue;
          b.element_index = static_cast<int64_t>(e);
          if ((steps[e].transform ? track_transformed(steps[e].fn, steps[e].params, steps[e].transform, b, &err)
                                  : steps[e].fn(steps[e].params, &b, &err)) != 0) {
            const auto& def = m_lattice.element(e);
#pragma omp critical(ft_cpu_failure)
            if (!failed.exchange(true))
              failure = fmt::format("element #{} '{}' ({}, plugin {}) failed on the CPU at turn {}: {}", e, def.name,
                                    def.type->name, def.type->plugin->file(), turn, err.message);
            break;
          }
        }
        if (full_turn_end) apply_turn_end(b, limits, turn, n_elements);
      }
      BlockBuffer::store(particles, b, first);
    }
    if (failed) throw Error(failure);
    done += turns_now;
    if (options.callback && !options.callback(done, particles)) break;
  }
}

/// Extent (adapted grids), deposit, reduction over ranks and solve of a grid collective element on
/// the particles as they leave the segment before it: integers throughout, so the field does not
/// depend on the thread count, the particle order or the rank count.
void grid_space_charge_step(GridCollectiveSolver& g, const Particles& particles, int threads,
                            const TrackOptions& options) {
  if (g.adaptive()) {
    const int passes = g.extent_passes();
    for (int pass = 0; pass < passes; ++pass) {
      std::vector<uint64_t> acc(kExtentAccumulators + 1, 0);
      g.accumulate_extent(particles, threads, acc.data());
      if (options.reduce_profile) options.reduce_profile(acc.data(), acc.size());
      g.set_extent(acc.data());
    }
  }
  ChargeGridReducer& reducer = g.reducer();
  reducer.clear();
  reducer.deposit(particles, threads);
  g.set_solve_threads(threads);  // the Poisson solve on the run's threads, not the machine's
  if (!options.reduce_profile) {
    g.solve();
    return;
  }
  std::vector<uint64_t> all(reducer.accumulators());  // the grid, then the particles outside it
  all.push_back(reducer.outside());
  options.reduce_profile(all.data(), all.size());
  g.solve(all.data(), all.back());
}

/// Deposit of the slice centroids of a slice-moment element (wakes, feedback) on the particles as they
/// leave the segment before it, the sum over ranks and the host solve of its slice kicks: integers
/// throughout, so the kicks do not depend on the thread count, the particle order or the rank count.
void slice_moments_step(MomentsCollectiveSolver& m, const Particles& particles, int threads,
                        const TrackOptions& options) {
  SliceCentroidReducer& reducer = m.reducer();
  reducer.clear();
  reducer.deposit(particles, threads);
  std::vector<uint64_t> all(reducer.accumulators());  // the slices, then the particles out of range
  all.push_back(reducer.out_of_range());
  if (options.reduce_profile)
    m.solve_over_ranks(all.data(), options.reduce_profile);  // a train's ranks: each solves its own bunches
  else
    m.solve(all.data(), all.back());
}

/// One collective track() call: turn by turn, each segment of the TurnProgram in parallel over
/// particle blocks (the kick of the collective element before it, its elements, the deposit of the
/// profile after it), then the collective element's solve.
class CpuBackend::CollectiveRun {
 public:
  CollectiveRun(CpuBackend& backend, const TurnProgram& program, Particles& particles, const TrackOptions& options)
      : m_backend(backend),
        m_lattice(backend.m_lattice),
        m_program(program),
        m_particles(particles),
        m_options(options),
        m_limits(m_lattice.limits()),
        m_n_elements(m_lattice.sequence().size()),
        m_n_collective(program.collective.size()),
        m_n(particles.size()),
        m_n_blocks((m_n + kBlockSize - 1) / kBlockSize),
        m_threads(options.threads > 0 ? options.threads : omp_get_max_threads()),
        m_local_counts(static_cast<size_t>(m_threads)),
        m_fields(m_n_collective),
        m_grids(m_n_collective),
        m_grid_fields(m_n_collective),
        m_moment_kicks(m_n_collective) {
    for (size_t c = 0; c < m_n_collective; ++c) {
      if (backend.m_grid_solvers[c]) {
        m_grid_fields[c] = backend.m_grid_solvers[c]->field();
        continue;
      }
      if (backend.m_moment_solvers[c]) {
        m_moment_kicks[c] = backend.m_moment_solvers[c]->slice_kicks();
        continue;
      }
      m_fields[c] = ft_slice_field{backend.m_snapshots[c].field.data(), backend.m_solvers[c]->grid()};
      m_grids[c] = backend.m_solvers[c]->slice_grid();
    }
  }

  void run() {
    const int64_t every = m_options.callback_every > 0 ? m_options.callback_every : m_options.turns;
    for (int64_t done = 0; done < m_options.turns;) {
      const int64_t turn = m_options.first_turn + done;
      for (size_t k = 0; k < m_program.segments.size(); ++k) run_segment(k, turn);
      ++done;
      if (m_options.callback && (done % every == 0 || done == m_options.turns) &&
          !m_options.callback(done, m_particles))
        break;
    }
  }

 private:
  /// Segment k of a turn: what its blocks do.
  struct Step {
    TurnProgram::Segment seg;
    size_t k = 0;
    int64_t turn = 0;
    bool kick = false, turn_end = false;
    bool deposit = false;  // the profile kind deposits in the block loop
    bool grid_kick = false, moment_kick = false;
  };

  void run_segment(size_t k, int64_t turn) {
    Step step;
    step.seg = m_program.segments[k];
    step.k = k;
    step.turn = turn;
    step.kick = k > 0;
    step.turn_end = k == m_n_collective;
    GridCollectiveSolver* const grid_solver = k < m_n_collective ? m_backend.m_grid_solvers[k].get() : nullptr;
    MomentsCollectiveSolver* const moment_solver = k < m_n_collective ? m_backend.m_moment_solvers[k].get() : nullptr;
    // The profile kind deposits in this loop; the grid and slice-moment kinds after it (the adapted
    // grid needs the bunch's moments first).
    step.deposit = k < m_n_collective && !grid_solver && !moment_solver;
    step.grid_kick = step.kick && m_backend.m_grid_solvers[k - 1];
    step.moment_kick = step.kick && m_backend.m_moment_solvers[k - 1];
    const size_t n_slices = step.deposit ? static_cast<size_t>(m_grids[k].n_slices) : 0;
    m_failed = false;
    m_failure.clear();
    for (auto& c : m_local_counts) c.assign(n_slices, 0);  // also for threads OpenMP does not start
#pragma omp parallel num_threads(m_threads)
    {
      std::vector<uint64_t>& counts = m_local_counts[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
      for (size_t blk = 0; blk < m_n_blocks; ++blk) {
        if (m_failed.load(std::memory_order_relaxed)) continue;
        track_block(step, blk, counts);
      }
    }
    if (m_failed) throw Error(m_failure);
    if (step.deposit) solve_profile(k);
    if (grid_solver) {
      grid_space_charge_step(*grid_solver, m_particles, m_threads, m_options);
      m_grid_fields[k] = grid_solver->field();
    }
    if (moment_solver) slice_moments_step(*moment_solver, m_particles, m_threads, m_options);
  }

  /// Block `blk` through segment step.k: the kick, the elements, the turn's end, the deposit.
  void track_block(const Step& step, size_t blk, std::vector<uint64_t>& counts) {
    const size_t first = blk * kBlockSize;
    const size_t count = std::min(kBlockSize, m_n - first);
    ft_particle_block b = m_particles.block(first, count);
    bool any_alive = false;
    for (size_t i = 0; i < count; ++i) any_alive |= b.state[i] > 0;
    if (!any_alive) return;
    b.limit_x = m_limits.x;
    b.limit_y = m_limits.y;
    b.turn = static_cast<int32_t>(step.turn);
    if (step.kick && !collective_kick(step, b)) return;
    for (size_t e = step.seg.begin; e < step.seg.end; ++e) {
      const auto& entry = m_lattice.sequence()[e];
      b.element_index = static_cast<int64_t>(e);
      ft_error err{};
      const ft_track_block_fn fn = m_lattice.definitions()[entry.definition].type->track_block;
      const unsigned char* transform = transform_of(m_lattice, entry.definition);
      if ((transform ? track_transformed(fn, m_lattice.params(entry.definition), transform, b, &err)
                     : fn(m_lattice.params(entry.definition), &b, &err)) != 0) {
        fail(e, step.turn, err.message);
        break;
      }
    }
    if (step.turn_end) apply_turn_end(b, m_limits, step.turn, m_n_elements);
    if (step.deposit) {
      for (size_t i = 0; i < count; ++i) {
        if (b.state[i] <= 0) continue;
        int bins[2];
        unsigned long long weights[2];
        const int m = profile_deposit(m_grids[step.k], b.zeta[i], bins, weights);
        for (int q = 0; q < m; ++q) counts[static_cast<size_t>(bins[q])] += weights[q];
      }
    }
  }

  /// The kick of the collective element before segment step.k; false where it failed.
  bool collective_kick(const Step& step, ft_particle_block& b) {
    const size_t c = step.k - 1;
    const size_t e = m_program.collective[c];
    b.element_index = static_cast<int64_t>(e);
    ft_error err{};
    int rc;
    if (step.grid_kick)
      rc = m_backend.m_grid_solvers[c]->desc().grid_kick_block(m_backend.m_grid_solvers[c]->params(), &m_grid_fields[c],
                                                               &b, &err);
    else if (step.moment_kick)
      rc = m_backend.m_moment_solvers[c]->desc().moments_kick_block(m_backend.m_moment_solvers[c]->params(),
                                                                    &m_moment_kicks[c], &b, &err);
    else
      rc = m_backend.m_solvers[c]->desc().kick_block(m_backend.m_solvers[c]->params(), &m_fields[c], &b, &err);
    if (rc == 0) return true;
    fail(e, step.turn, err.message);
    return false;
  }

  /// The first failure of a segment, kept to be thrown after the parallel loop.
  void fail(size_t e, int64_t turn, const char* what) {
    const auto& def = m_lattice.element(e);
#pragma omp critical(ft_cpu_failure)
    if (!m_failed.exchange(true))
      m_failure = fmt::format("element #{} '{}' ({}, plugin {}) failed on the CPU at turn {}: {}", e, def.name,
                              def.type->name, def.type->plugin->file(), turn, what);
  }

  /// The profile of collective element k summed over the threads (integer sums: exact, whatever the
  /// number of threads and their order), over the ranks where asked, and solved.
  void solve_profile(size_t k) {
    std::vector<uint64_t>& total = m_backend.m_snapshots[k].counts;
    std::fill(total.begin(), total.end(), 0);
    for (int t = 0; t < m_threads; ++t) {
      const std::vector<uint64_t>& c = m_local_counts[static_cast<size_t>(t)];
      for (size_t s = 0; s < c.size(); ++s) total[s] += c[s];
    }
    if (m_options.reduce_profile) m_options.reduce_profile(total.data(), total.size());
    m_backend.m_solvers[k]->solve(total.data(), m_backend.m_snapshots[k].field.data());
  }

  CpuBackend& m_backend;
  const Lattice& m_lattice;
  const TurnProgram& m_program;
  Particles& m_particles;
  const TrackOptions& m_options;
  const GlobalLimits m_limits;
  const size_t m_n_elements, m_n_collective, m_n, m_n_blocks;
  const int m_threads;
  std::vector<std::vector<uint64_t>> m_local_counts;  // per thread: the profile deposited
  std::vector<ft_slice_field> m_fields;               // per collective element (profile kind)
  std::vector<SliceGrid> m_grids;
  std::vector<ft_grid_field> m_grid_fields;    // grid kind
  std::vector<ft_slice_kicks> m_moment_kicks;  // slice-moment kind
  std::atomic<bool> m_failed{false};
  std::string m_failure;
};

void CpuBackend::prepare_collective_solvers(const TurnProgram& program, FmaMode fma, size_t macroparticles) {
  const size_t n_collective = program.collective.size();
  if (m_solvers.size() == n_collective && m_solver_fma == fma && m_solver_macroparticles == macroparticles) return;
  m_solvers.clear();
  m_grid_solvers.clear();
  m_moment_solvers.clear();
  for (size_t c = 0; c < n_collective; ++c) {
    const bool grid = m_lattice.element(program.collective[c]).type->is_grid_collective();
    const bool moments = m_lattice.element(program.collective[c]).type->is_moments_collective();
    m_solvers.push_back(
        grid || moments ? nullptr
                        : std::make_unique<CollectiveSolver>(m_lattice, program.collective[c], fma, macroparticles));
    m_moment_solvers.push_back(
        moments ? std::make_unique<MomentsCollectiveSolver>(m_lattice, program.collective[c], macroparticles)
                : nullptr);
    m_grid_solvers.push_back(
        grid ? std::make_unique<GridCollectiveSolver>(m_lattice, program.collective[c], fma, macroparticles) : nullptr);
  }
  m_solver_fma = fma;
  m_solver_macroparticles = macroparticles;
  m_snapshots.assign(n_collective, CollectiveSnapshot{});
  for (size_t c = 0; c < n_collective; ++c) {
    CollectiveSnapshot& snap = m_snapshots[c];
    snap.sequence_index = program.collective[c];
    if (!m_solvers[c]) continue;  // a grid or slice-moment element
    snap.element_name = m_solvers[c]->element_name();
    snap.grid = m_solvers[c]->grid();
    snap.counts.assign(static_cast<size_t>(snap.grid.n_slices), 0);
    snap.field.assign(static_cast<size_t>(snap.grid.n_slices), 0.0);
  }
}

void CpuBackend::track_collective(Particles& particles, const TrackOptions& options) {
  const size_t n_elements = m_lattice.sequence().size();
  if (options.element_begin != 0 || std::min(options.element_end, n_elements) != n_elements)
    throw Error("a lattice with collective elements is tracked whole turns at a time (no element ranges)");
  const TurnProgram program = TurnProgram::build(m_lattice);
  const size_t macroparticles = options.macroparticles > 0 ? options.macroparticles : particles.size();
  prepare_collective_solvers(program, options.fma, macroparticles);
  // rpp and rvv as the GPU's collective kernels recompute them (a no-op for particles made here).
  if (collective_energy_is_derived(m_lattice)) particles.derive_energy();
  CollectiveRun(*this, program, particles, options).run();
  for (auto& g : m_grid_solvers) {
    if (!g) continue;
    const std::string warning = g->take_warning();
    if (options.warnings && !warning.empty()) std::cerr << warning;
  }
  for (auto& m : m_moment_solvers) {
    if (!m) continue;
    const std::string warning = m->take_warning();
    if (options.warnings && !warning.empty()) std::cerr << warning;
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Lattice& lattice) { return std::make_unique<CpuBackend>(lattice); }

}  // namespace ft
