// CPU backend: particles in blocks, each block taken through the elements one at a time by the
// plugin's host-compiled loop (ft::element_sdk::track_block), blocks spread over OpenMP threads.
// Built with -ffp-contract=off: the bitwise reference for the GPU with fma=off.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "fusetrack/error.h"
#include "fusetrack/tracker.h"

namespace ft {

namespace {

constexpr size_t kBlockSize = 64;

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const Lattice& lattice) : m_lattice(lattice) {}
  std::string name() const override { return "cpu"; }
  void track(Particles& particles, const TrackOptions& options) override;

 private:
  const Lattice& m_lattice;
};

void CpuBackend::track(Particles& particles, const TrackOptions& options) {
  const size_t n_elements = m_lattice.sequence().size();
  const size_t begin = std::min(options.element_begin, n_elements);
  const size_t end = std::min(options.element_end, n_elements);
  const bool full_turn_end = end == n_elements;
  const GlobalLimits limits = m_lattice.limits();
  const size_t n = particles.size();
  const size_t n_blocks = (n + kBlockSize - 1) / kBlockSize;

  // Resolve what each sequence entry calls once, outside the hot loop.
  struct Step {
    ft_track_block_fn fn;
    const void* params;
  };
  std::vector<Step> steps(n_elements);
  for (size_t e = 0; e < n_elements; ++e) {
    const auto& entry = m_lattice.sequence()[e];
    steps[e] = {m_lattice.definitions()[entry.definition].type->track_block, m_lattice.params(entry.definition)};
  }

  const int64_t chunk = options.callback_every > 0 ? options.callback_every : options.turns;
  int64_t done = 0;
  while (done < options.turns) {
    const int64_t turns_now = std::min(chunk, options.turns - done);
    std::atomic<bool> failed{false};
    std::string failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(options.threads > 0 ? options.threads : omp_get_max_threads())
    for (size_t blk = 0; blk < n_blocks; ++blk) {
      const size_t first = blk * kBlockSize;
      const size_t count = std::min(kBlockSize, n - first);
      ft_particle_block b = particles.block(first, count);
      b.limit_x = limits.x;
      b.limit_y = limits.y;
      for (int64_t t = 0; t < turns_now && !failed.load(std::memory_order_relaxed); ++t) {
        const int64_t turn = options.first_turn + done + t;
        bool any_alive = false;
        for (size_t i = 0; i < count; ++i) any_alive |= b.state[i] > 0;
        if (!any_alive) break;
        b.turn = static_cast<int32_t>(turn);
        for (size_t e = begin; e < end; ++e) {
          b.element_index = static_cast<int64_t>(e);
          ft_error err{};
          if (steps[e].fn(steps[e].params, &b, &err) != 0) {
            const auto& def = m_lattice.element(e);
#pragma omp critical(ft_cpu_failure)
            if (!failed.exchange(true))
              failure = fmt::format("element #{} '{}' ({}, plugin {}) failed on the CPU at turn {}: {}", e, def.name,
                                    def.type->name, def.type->plugin->file(), turn, err.message);
            break;
          }
        }
        if (full_turn_end) {
          for (size_t i = 0; i < count; ++i) {
            if (b.state[i] <= 0) continue;
            ParticleView p = particles.view(first + i);
            apply_turn_limits(p, limits);
            if (p.state <= 0) {
              b.state[i] = p.state;
              b.lost_turn[i] = static_cast<int32_t>(turn);
              b.lost_element[i] = static_cast<int64_t>(n_elements) - 1;
            }
          }
        }
      }
    }
    if (failed) throw Error(failure);
    done += turns_now;
    if (options.callback && !options.callback(done, particles)) break;
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Lattice& lattice) { return std::make_unique<CpuBackend>(lattice); }

}  // namespace ft
