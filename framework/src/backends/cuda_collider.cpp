// Collider bunches on a GPU (fusetrack/cuda_collider.h).
#include "fusetrack/cuda_collider.h"

#include <algorithm>
#include <string>

#include "gpu_module.h"

namespace ft {

namespace {

// One thread per particle (the chunk sums: one thread per chunk, each in particle order).
const char* kColliderKernels = R"(
#include "fusetrack/device/collider.h"
extern "C" __global__ void collider_boost(Bb6dParams p, double* x, double* px, double* y, double* py, double* zeta,
                                          double* delta, const int* state, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || state[i] <= 0) return;
  bb6d_boost(p, x[i], px[i], y[i], py[i], zeta[i], delta[i]);
}
extern "C" __global__ void collider_kick_particles(Bb6dParams p, const Bb6dSlice* slices, int n_slices, double beta0,
    int turn, double* x, double* px, double* y, double* py, double* zeta, double* delta, double* ptau, double* rpp,
    double* rvv, int* state, int* lost_turn, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || state[i] <= 0) return;
  double a = x[i], b = px[i], c = y[i], d = py[i], e = zeta[i], f = delta[i];
  collider_kick(p, slices, n_slices, a, b, c, d, e, f);
  collider_store(x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, i, beta0, turn, a, b, c, d, e, f);
}
extern "C" __global__ void collider_ring(ColliderRingMap m, double beta0, int turn, double* x, double* px, double* y,
    double* py, double* zeta, double* delta, double* ptau, double* rpp, double* rvv, int* state, int* lost_turn, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || state[i] <= 0) return;
  double a = x[i], b = px[i], c = y[i], d = py[i], e = zeta[i], f = delta[i];
  collider_ring_turn(m, a, b, c, d, e, f);
  collider_store(x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, i, beta0, turn, a, b, c, d, e, f);
}
// One block of kColliderLanes threads per chunk; thread 0 combines the lanes (the CPU's order).
extern "C" __global__ void collider_sums_first(const double* x, const double* px, const double* y, const double* py,
    const double* zeta, const double* delta, const int* state, long n, double* out) {
  __shared__ double lanes[kColliderLanes * 7];
  const int c = blockIdx.x, lane = threadIdx.x;
  collider_lane_first(x, px, y, py, zeta, delta, state, n, c, lane, lanes + 7 * lane);
  __syncthreads();
  if (lane != 0) return;
  collider_combine_lanes(lanes, 7);
  for (int k = 0; k < 7; ++k) out[7 * c + k] = lanes[k];
}
extern "C" __global__ void collider_sums_second(const double* x, const double* px, const double* y, const double* py,
    const double* zeta, const double* delta, const int* state, long n, const double* mean, double* out) {
  __shared__ double lanes[kColliderLanes * 8];
  const int c = blockIdx.x, lane = threadIdx.x;
  collider_lane_second(x, px, y, py, zeta, delta, state, n, c, lane, mean, lanes + 8 * lane);
  __syncthreads();
  if (lane != 0) return;
  collider_combine_lanes(lanes, 8);
  for (int k = 0; k < 8; ++k) out[8 * c + k] = lanes[k];
}
// Slice moments with a block-level integer reduction in shared memory (exact: integer adds), then
// one global atomic per accumulator and block: the CPU's integers, far fewer contended atomics.
extern "C" __global__ void collider_slice_moments(ft::SliceGrid g, ft::SliceMomentScales s, const double* x,
    const double* px, const double* y, const double* py, const double* zeta, const double* delta, const int* state,
    int n, unsigned long long* acc, unsigned long long* rejected) {
  extern __shared__ unsigned long long block_acc[];
  const int count = g.n_slices * ft::kSliceAccumulators;
  for (int k = threadIdx.x; k < count; k += blockDim.x) block_acc[k] = 0;
  __syncthreads();
  unsigned long long block_rejected = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (state[i] <= 0) continue;
    const double c[6] = {x[i], px[i], y[i], py[i], zeta[i], delta[i]};
    int bins[2];
    long long out[2][ft::kSliceAccumulators];
    const int m = ft::slice_moment_contributions(g, s, c, bins, out);
    if (m < 0) { ++block_rejected; continue; }
    for (int b = 0; b < m; ++b)
      for (int k = 0; k < ft::kSliceAccumulators; ++k)
        atomicAdd(block_acc + bins[b] * ft::kSliceAccumulators + k, static_cast<unsigned long long>(out[b][k]));
  }
  if (block_rejected) atomicAdd(rejected, block_rejected);
  __syncthreads();
  for (int k = threadIdx.x; k < count; k += blockDim.x)
    if (block_acc[k]) atomicAdd(acc + k, block_acc[k]);
}
)";

}  // namespace

const char* collider_kernel_source() {
  static const std::string source = std::string(reduction_kernel_source()) + kColliderKernels;
  return source.c_str();
}

GpuColliderContext::GpuColliderContext(int device, FmaMode fma)
    : m_module(std::make_unique<GpuModule>(device, "fusetrack_collider.cu", collider_kernel_source(), fma)) {}

GpuColliderContext::~GpuColliderContext() = default;

GpuColliderBunch::GpuColliderBunch(GpuColliderContext& gpu, const Particles& p) : m_gpu(gpu), m_n(p.size()), m_beta0(p.beta0) {
  if (p.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error(fmt::format("collider on the GPU: {} particles in one bunch; at most {}", p.size(),
                            std::numeric_limits<int>::max()));
  GpuModule& g = m_gpu.module();
  m_x = g.upload(p.x), m_px = g.upload(p.px), m_y = g.upload(p.y), m_py = g.upload(p.py);
  m_zeta = g.upload(p.zeta), m_delta = g.upload(p.delta), m_ptau = g.upload(p.ptau), m_rpp = g.upload(p.rpp);
  m_rvv = g.upload(p.rvv), m_state = g.upload(p.state), m_lost_turn = g.upload(p.lost_turn);
  m_lost_element = g.upload(p.lost_element), m_id = g.upload(p.id);
  m_chunks = g.zeros(8 * kColliderChunks * sizeof(double));
  m_mean = g.zeros(6 * sizeof(double));
  m_rejected = g.zeros(sizeof(uint64_t));
}

GpuColliderBunch::~GpuColliderBunch() = default;  // the module frees its buffers

void GpuColliderBunch::download(Particles& p) {
  GpuModule& g = m_gpu.module();
  p.resize(m_n);
  p.beta0 = m_beta0;
  const auto get = [&](auto& v, uint64_t d) { g.copy_to_host(v.data(), d, v.size() * sizeof(v[0])); };
  get(p.x, m_x), get(p.px, m_px), get(p.y, m_y), get(p.py, m_py), get(p.zeta, m_zeta), get(p.delta, m_delta);
  get(p.ptau, m_ptau), get(p.rpp, m_rpp), get(p.rvv, m_rvv), get(p.state, m_state), get(p.lost_turn, m_lost_turn);
  get(p.lost_element, m_lost_element), get(p.id, m_id);
}

void GpuColliderBunch::upload(const Particles& p) {
  if (p.size() != m_n) throw Error(fmt::format("collider on the GPU: {} particles uploaded into a bunch of {}", p.size(), m_n));
  GpuModule& g = m_gpu.module();
  const auto put = [&](const auto& v, uint64_t d) { g.copy_to_device(d, v.data(), v.size() * sizeof(v[0])); };
  put(p.x, m_x), put(p.px, m_px), put(p.y, m_y), put(p.py, m_py), put(p.zeta, m_zeta), put(p.delta, m_delta);
  put(p.ptau, m_ptau), put(p.rpp, m_rpp), put(p.rvv, m_rvv), put(p.state, m_state), put(p.lost_turn, m_lost_turn);
  put(p.lost_element, m_lost_element), put(p.id, m_id);
}

std::vector<double> GpuColliderBunch::chunk_first() {
  GpuModule& g = m_gpu.module();
  long n = static_cast<long>(m_n);
  void* args[] = {&m_x, &m_px, &m_y, &m_py, &m_zeta, &m_delta, &m_state, &n, &m_chunks};
  m_gpu.kernel_seconds += g.launch_blocks(g.function("collider_sums_first"), kColliderChunks, kColliderLanes, 0, args);
  return g.download<double>(m_chunks, 7 * kColliderChunks);
}

std::vector<double> GpuColliderBunch::chunk_second(const std::array<double, 6>& mean) {
  GpuModule& g = m_gpu.module();
  g.copy_to_device(m_mean, mean.data(), sizeof(mean));
  long n = static_cast<long>(m_n);
  void* args[] = {&m_x, &m_px, &m_y, &m_py, &m_zeta, &m_delta, &m_state, &n, &m_mean, &m_chunks};
  m_gpu.kernel_seconds += g.launch_blocks(g.function("collider_sums_second"), kColliderChunks, kColliderLanes, 0, args);
  return g.download<double>(m_chunks, 8 * kColliderChunks);
}

void GpuColliderBunch::boost(const Bb6dParams& params) {
  GpuModule& g = m_gpu.module();
  Bb6dParams p = params;
  int n = static_cast<int>(m_n);
  void* args[] = {&p, &m_x, &m_px, &m_y, &m_py, &m_zeta, &m_delta, &m_state, &n};
  m_gpu.kernel_seconds += g.launch(g.function("collider_boost"), m_n, args);
}

void GpuColliderBunch::deposit(const SliceGrid& grid, const SliceMomentScales& scales, std::vector<uint64_t>& acc,
                               uint64_t& rejected) {
  GpuModule& g = m_gpu.module();
  if (m_acc_capacity < acc.size()) {
    m_acc = g.zeros(acc.size() * sizeof(uint64_t));
    m_acc_capacity = acc.size();
  }
  const std::vector<uint64_t> zero(acc.size(), 0);
  g.copy_to_device(m_acc, zero.data(), zero.size() * sizeof(uint64_t));
  const uint64_t none = 0;
  g.copy_to_device(m_rejected, &none, sizeof(none));
  SliceGrid gr = grid;
  SliceMomentScales sc = scales;
  int n = static_cast<int>(m_n);
  void* args[] = {&gr, &sc, &m_x, &m_px, &m_y, &m_py, &m_zeta, &m_delta, &m_state, &n, &m_acc, &m_rejected};
  const size_t shared = acc.size() * sizeof(uint64_t);
  if (shared <= 40 * 1024) {  // the block reduction fits in shared memory (up to 301 slices)
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((m_n + 255) / 256, 1024));
    m_gpu.kernel_seconds +=
        g.launch_blocks(g.function("collider_slice_moments"), std::max(blocks, 1u), 256, static_cast<unsigned>(shared), args);
  } else {
    m_gpu.kernel_seconds += g.launch(g.function("fusetrack_slice_moments"), m_n, args);
  }
  const std::vector<uint64_t> got = g.download<uint64_t>(m_acc, acc.size());
  for (size_t k = 0; k < acc.size(); ++k) acc[k] += got[k];
  rejected += g.download<uint64_t>(m_rejected, 1)[0];
}

void GpuColliderBunch::kick(const Bb6dParams& params, const std::vector<Bb6dSlice>& slices, int turn) {
  GpuModule& g = m_gpu.module();
  if (m_slice_capacity < slices.size()) {
    m_slices = g.zeros(slices.size() * sizeof(Bb6dSlice));
    m_slice_capacity = slices.size();
  }
  g.copy_to_device(m_slices, slices.data(), slices.size() * sizeof(Bb6dSlice));
  Bb6dParams p = params;
  int n_slices = static_cast<int>(slices.size()), n = static_cast<int>(m_n);
  double beta0 = m_beta0;
  void* args[] = {&p,      &m_slices, &n_slices, &beta0, &turn,  &m_x,     &m_px,        &m_y, &m_py,
                  &m_zeta, &m_delta,  &m_ptau,   &m_rpp, &m_rvv, &m_state, &m_lost_turn, &n};
  m_gpu.kernel_seconds += g.launch(g.function("collider_kick_particles"), m_n, args);
}

void GpuColliderBunch::ring_turn(const ColliderRingMap& map, int turn) {
  GpuModule& g = m_gpu.module();
  ColliderRingMap m = map;
  double beta0 = m_beta0;
  int n = static_cast<int>(m_n);
  void* args[] = {&m,     &beta0, &turn,   &m_x,   &m_px,  &m_y,     &m_py,        &m_zeta,
                  &m_delta, &m_ptau, &m_rpp, &m_rvv, &m_state, &m_lost_turn, &n};
  m_gpu.kernel_seconds += g.launch(g.function("collider_ring"), m_n, args);
}

}  // namespace ft
