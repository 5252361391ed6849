#include "cuda_tile_order.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <utility>

namespace ft::cuda {

TileOrder::TileOrder(const Driver& d, const std::vector<DeviceCollective>& collective, DeviceParticleBuffers& buffers,
                     size_t n, int every_option)
    : m_d(d), m_n(n) {
  static const int every_from_env = [] {
    const char* v = std::getenv("FUSETRACK_TILE_SORT_EVERY");
    return v ? std::max(0, std::atoi(v)) : -1;
  }();
  bool trains = false;
  int fixed_grids = 0;
  for (const DeviceCollective& c : collective) {
    if (!m_grid && c.grid && !c.grid->adaptive()) m_grid = c.grid.get();
    fixed_grids += c.grid && !c.grid->adaptive() ? 1 : 0;
    trains |= c.window_words > 0;
  }
  m_every = every_from_env >= 0 ? every_from_env
            : every_option >= 0 ? every_option
                                : (fixed_grids >= kTileSortAutoElements ? 1 : 0);
  if (m_every == 0 || !m_grid || trains || n == 0 || n > static_cast<size_t>(std::numeric_limits<int>::max())) return;
  const size_t cells = m_grid->node_count();
  while ((cells >> m_shift) >= size_t{kScanBlock} * kMaxScanBlocks) ++m_shift;  // at most 4M buckets
  m_buckets = static_cast<unsigned>((cells >> m_shift) + 1);                    // the last: lost or outside the grid
  size_t free_bytes = 0, total_bytes = 0;
  check(d.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  const size_t need = n * (kBytesPerParticle + 4 * sizeof(int32_t)) + m_buckets * sizeof(uint32_t);
  // At most half of what is free: the Poisson solvers allocate their buffers after this, at the first solve.
  if (need > free_bytes / 2) return;
  for (CUdeviceptr* p : {&m_key, &m_source, &m_origin[0], &m_origin[1]})
    check_alloc(d, p, n * sizeof(int32_t), "cuMemAlloc(tile sort)");
  check_alloc(d, &m_count, m_buckets * sizeof(uint32_t), "cuMemAlloc(tile sort)");
  check_alloc(d, &m_sums, kMaxScanBlocks * sizeof(uint32_t), "cuMemAlloc(tile sort)");
  std::vector<int32_t> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = static_cast<int32_t>(i);
  check(d.memcpy_htod(m_origin[0], identity.data(), n * sizeof(int32_t)), "cuMemcpyHtoD(tile sort)");
  m_spare = std::make_unique<DeviceParticleBuffers>(d, buffers.copier(), n, buffers.stats());
  m_enabled = true;
}

TileOrder::~TileOrder() {
  for (CUdeviceptr p : {m_key, m_source, m_count, m_sums, m_origin[0], m_origin[1]})
    if (p) m_d.mem_free(p);
}

void TileOrder::sort(const CollectiveKernels& kk, DeviceParticleBuffers& buffers, int multiprocessors,
                     double* phase_seconds) {
  DeviceParticleBuffers& spare = *m_spare;
  int n = static_cast<int>(m_n);
  auto t = std::chrono::steady_clock::now();
  auto phase = [&](int k) {
    if (!phase_seconds) return;
    check(m_d.ctx_synchronize(), "tile sort");
    const auto now = std::chrono::steady_clock::now();
    phase_seconds[k] += std::chrono::duration<double>(now - t).count();
    t = now;
  };
  check(m_d.memset_d8(m_count, 0, m_buckets * sizeof(uint32_t)), "cuMemset(tile sort)");
  ChargeGridSpec spec = m_grid->spec();
  unsigned last = m_buckets - 1, buckets = m_buckets, scan_blocks = (m_buckets + kScanBlock - 1) / kScanBlock;
  void* key_args[] = {&buffers.arrays(), &n, &spec, &m_shift, &last, &m_key, &m_count};
  launch(kk.tile_keys, blocks(multiprocessors), 256, key_args);
  void* scan_args[] = {&m_count, &buckets, &m_sums};
  launch(kk.tile_scan_blocks, scan_blocks, 1024, scan_args);
  void* sums_args[] = {&m_sums, &scan_blocks};
  launch(kk.tile_scan_sums, 1, 1024, sums_args);
  launch(kk.tile_scan_add, (m_buckets + 255) / 256, 256, scan_args);
  phase(0);
  void* slot_args[] = {&n, &m_key, &m_count, &m_source};
  launch(kk.tile_slots, blocks(multiprocessors), 256, slot_args);
  phase(1);
  void* gather_args[] = {&buffers.arrays(), &spare.arrays(), &n, &m_source, &m_origin[0], &m_origin[1]};
  launch(kk.tile_gather, blocks(multiprocessors), 256, gather_args);
  phase(2);
  std::swap(buffers.arrays(), spare.arrays());
  std::swap(m_origin[0], m_origin[1]);
  m_permuted = true;
}

void TileOrder::restore(const CollectiveKernels& kk, DeviceParticleBuffers& buffers, int multiprocessors) {
  if (!m_permuted) return;
  DeviceParticleBuffers& spare = *m_spare;
  int n = static_cast<int>(m_n);
  void* args[] = {&buffers.arrays(), &spare.arrays(), &n, &m_origin[0], &m_origin[1]};
  launch(kk.tile_restore, blocks(multiprocessors), 256, args);
  std::swap(buffers.arrays(), spare.arrays());
  std::swap(m_origin[0], m_origin[1]);
  m_permuted = false;
}

unsigned TileOrder::blocks(int multiprocessors) const {
  return static_cast<unsigned>(std::min<size_t>((m_n + 255) / 256, static_cast<size_t>(multiprocessors) * 8));
}

void TileOrder::launch(CUfunction f, unsigned grid, unsigned threads, void** args) const {
  check(m_d.launch_kernel(f, grid, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel(tile sort)");
}

}  // namespace ft::cuda
