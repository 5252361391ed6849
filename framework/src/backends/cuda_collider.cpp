// Collider bunches on a GPU (fusetrack/cuda_collider.h).
#include "fusetrack/cuda_collider.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <string>

#include "gpu_module.h"

namespace ft {

namespace {

// Two kernels per crossing: arrival (one block per chunk, one thread per lane) and departure (one
// thread per particle); and the generation of a matched Gaussian bunch in place.
const char* kColliderKernels = R"(
#include "fusetrack/device/collider_steps.h"
#include "fusetrack/device/gaussian_bunch.h"
// Particles first, ..., first + n - 1 of the matched Gaussian bunch `seed` into [0, n) of the arrays: alive,
// not lost, id first + i (ft::sample_gaussian_bunch on the host).
extern "C" __global__ void collider_gaussian_bunch(ft::ft_gaussian_bunch b, unsigned long long seed,
    unsigned long long first, long n, double* x, double* px, double* y, double* py, double* zeta, double* delta,
    double* ptau, double* rpp, double* rvv, int* state, int* lost_turn, long long* lost_element, long long* id) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const ft::ParticleView p = ft::ft_gaussian_bunch_particle(b, seed, first + static_cast<unsigned long long>(i));
  x[i] = p.x, px[i] = p.px, y[i] = p.y, py[i] = p.py, zeta[i] = p.zeta, delta[i] = p.delta;
  ptau[i] = p.ptau, rpp[i] = p.rpp, rvv[i] = p.rvv;
  state[i] = p.state, lost_turn[i] = -1, lost_element[i] = -1;
  id[i] = static_cast<long long>(first) + i;
}
// Arrival: one block of kColliderLanes threads per chunk. Each lane adds its particles to the record
// sums and boosts them as collider_lane_arrival does (the CPU's loop), and deposits the boosted
// particle's slice moments into the block's integers in shared memory (exact), added to the global
// accumulators once per block. deposit = 0: the slice moments are left to fusetrack_slice_moments.
extern "C" __global__ void collider_arrival(Bb6dParams p, ft::SliceGrid g, ft::SliceMomentScales sc, int deposit,
    double* x, double* px, double* y, double* py, double* zeta, double* delta, const int* state, long n,
    double* sums, unsigned long long* acc, unsigned long long* rejected) {
  extern __shared__ unsigned long long block_acc[];
  __shared__ double lanes[kColliderLanes * kColliderSums];
  const int c = blockIdx.x, lane = threadIdx.x;
  const int count = deposit ? g.n_slices * ft::kSliceAccumulators : 0;
  for (int k = lane; k < count; k += kColliderLanes) block_acc[k] = 0;
  __syncthreads();
  long b, e;
  collider_chunk(n, c, b, e);
  double s[kColliderSums] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  unsigned long long lane_rejected = 0;
  for (long i = b + lane; i < e; i += kColliderLanes) {
    if (state[i] <= 0) continue;
    collider_accumulate(x[i], px[i], y[i], py[i], zeta[i], delta[i], s);
    double q[6] = {x[i], px[i], y[i], py[i], zeta[i], delta[i]};
    bb6d_boost(p, q[0], q[1], q[2], q[3], q[4], q[5]);
    x[i] = q[0], px[i] = q[1], y[i] = q[2], py[i] = q[3], zeta[i] = q[4], delta[i] = q[5];
    if (!deposit) continue;
    int bins[2];
    long long out[2][ft::kSliceAccumulators];
    const int m = ft::slice_moment_contributions(g, sc, q, bins, out);
    if (m < 0) { ++lane_rejected; continue; }
    for (int j = 0; j < m; ++j)
      for (int k = 0; k < ft::kSliceAccumulators; ++k)
        ft::shared_add_u64(block_acc, bins[j] * ft::kSliceAccumulators + k, static_cast<unsigned long long>(out[j][k]));
  }
  for (int k = 0; k < kColliderSums; ++k) lanes[lane * kColliderSums + k] = s[k];
  if (lane_rejected) atomicAdd(rejected, lane_rejected);
  __syncthreads();
  for (int k = lane; k < count; k += kColliderLanes)
    if (block_acc[k]) atomicAdd(acc + k, block_acc[k]);
  if (lane != 0) return;
  collider_combine_lanes(lanes, kColliderSums);
  for (int k = 0; k < kColliderSums; ++k) sums[kColliderSums * c + k] = lanes[k];
}
// Departure: one thread per particle (collider_depart).
extern "C" __global__ void collider_departure(Bb6dParams p, const Bb6dSlice* slices, int n_slices, int ring,
    ColliderRingMap m, double beta0, int turn, double* x, double* px, double* y, double* py, double* zeta,
    double* delta, double* ptau, double* rpp, double* rvv, int* state, int* lost_turn, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n || state[i] <= 0) return;
  collider_depart(p, slices, n_slices, ring, m, x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, i,
                  beta0, turn);
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

double GpuColliderContext::kernel_seconds() {
  m_kernel_seconds += m_module->settle_timed_launches();
  return m_kernel_seconds;
}

namespace {

void check_bunch_size(size_t n) {
  if (n > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error(
        fmt::format("collider on the GPU: {} particles in one bunch; at most {}", n, std::numeric_limits<int>::max()));
}

}  // namespace

void GpuColliderBunch::allocate() {
  GpuModule& g = m_gpu.module();
  const size_t d = m_n * sizeof(double), i32 = m_n * sizeof(int32_t), i64 = m_n * sizeof(int64_t);
  m_x = g.zeros(d), m_px = g.zeros(d), m_y = g.zeros(d), m_py = g.zeros(d), m_zeta = g.zeros(d);
  m_delta = g.zeros(d), m_ptau = g.zeros(d), m_rpp = g.zeros(d), m_rvv = g.zeros(d);
  m_state = g.zeros(i32), m_lost_turn = g.zeros(i32), m_lost_element = g.zeros(i64), m_id = g.zeros(i64);
  m_chunks = g.zeros(static_cast<size_t>(kColliderSums) * kColliderChunks * sizeof(double));
  m_rejected = g.zeros(sizeof(uint64_t));
}

GpuColliderBunch::GpuColliderBunch(GpuColliderContext& gpu, const Particles& p)
    : m_gpu(gpu), m_n(p.size()), m_beta0(p.beta0) {
  check_bunch_size(m_n);
  allocate();
  upload(p);
}

GpuColliderBunch::GpuColliderBunch(GpuColliderContext& gpu, const ft_gaussian_bunch& bunch, uint64_t seed, size_t first,
                                   size_t count)
    : m_gpu(gpu), m_n(count), m_beta0(bunch.beta0) {
  check_bunch_size(m_n);
  allocate();
  if (m_n == 0) return;
  GpuModule& g = m_gpu.module();
  ft_gaussian_bunch b = bunch;
  unsigned long long s = seed, f = first;
  long n = static_cast<long>(m_n);
  void* args[] = {&b,      &s,     &f,     &n,       &m_x,         &m_px,           &m_y, &m_py, &m_zeta, &m_delta,
                  &m_ptau, &m_rpp, &m_rvv, &m_state, &m_lost_turn, &m_lost_element, &m_id};
  const unsigned threads = 256;
  g.launch_timed_async(g.function("collider_gaussian_bunch"), static_cast<unsigned>((m_n + threads - 1) / threads),
                       threads, 0, args);
}

GpuColliderBunch::~GpuColliderBunch() {
  try {
    m_gpu.kernel_seconds();  // waits for the queued kernels: none may still use the buffers
  } catch (const std::exception&) {
    // the run already ends with the launch's error
  }
  GpuModule& g = m_gpu.module();
  for (uint64_t p : {m_x, m_px, m_y, m_py, m_zeta, m_delta, m_ptau, m_rpp, m_rvv, m_state, m_lost_turn, m_lost_element,
                     m_id, m_chunks, m_slices, m_acc, m_rejected})
    if (p) g.release(p);
}

void GpuColliderBunch::download(Particles& p) { download(p, 0, m_n); }

void GpuColliderBunch::download(Particles& p, size_t first, size_t count) {
  if (first > m_n || count > m_n - first)
    throw Error(fmt::format("collider on the GPU: particles [{}, {}) of a bunch of {}", first, first + count, m_n));
  GpuModule& g = m_gpu.module();
  p.resize(count);
  p.beta0 = m_beta0;
  const auto get = [&](auto& v, uint64_t d) {
    g.copy_to_host(v.data(), d + first * sizeof(v[0]), count * sizeof(v[0]));
  };
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

std::vector<double> GpuColliderBunch::arrive(const Bb6dParams& params, const SliceGrid& grid,
                                             const SliceMomentScales& scales, std::vector<uint64_t>& acc,
                                             uint64_t& rejected) {
  launch_arrival(params, grid, scales, acc.size());
  return finish_arrival(acc, rejected);
}

void GpuColliderBunch::launch_arrival(const Bb6dParams& params, const SliceGrid& grid, const SliceMomentScales& scales,
                                      size_t accumulators) {
  GpuModule& g = m_gpu.module();
  if (m_acc_capacity < accumulators) {
    if (m_acc) g.release(m_acc);
    m_acc = g.zeros(accumulators * sizeof(uint64_t));
    m_acc_capacity = accumulators;
  }
  g.zero(m_acc, accumulators * sizeof(uint64_t));
  g.zero(m_rejected, sizeof(uint64_t));
  m_pending_accumulators = accumulators;
  // The block's integers in shared memory when they fit (up to ~300 slices), else a second kernel.
  const size_t shared = accumulators * sizeof(uint64_t);
  int deposit = shared <= 40 * 1024 ? 1 : 0;
  Bb6dParams p = params;
  SliceGrid gr = grid;
  SliceMomentScales sc = scales;
  long n = static_cast<long>(m_n);
  void* args[] = {&p,    &gr,   &sc,      &deposit, &m_x,    &m_px,   &m_y,    &m_py,
                  &m_zeta, &m_delta, &m_state, &n,      &m_chunks, &m_acc, &m_rejected};
  g.launch_timed_async(g.function("collider_arrival"), kColliderChunks, kColliderLanes,
                       deposit ? static_cast<unsigned>(shared) : 0, args);
  if (!deposit) {
    int n32 = static_cast<int>(m_n);
    void* dargs[] = {&gr, &sc, &m_x, &m_px, &m_y, &m_py, &m_zeta, &m_delta, &m_state, &n32, &m_acc, &m_rejected};
    const unsigned threads = 256;
    g.launch_timed_async(g.function("fusetrack_slice_moments"),
                         static_cast<unsigned>(std::max<size_t>((m_n + threads - 1) / threads, 1)), threads, 0, dargs);
  }
}

std::vector<double> GpuColliderBunch::finish_arrival(std::vector<uint64_t>& acc, uint64_t& rejected) {
  if (acc.size() != m_pending_accumulators)
    throw Error(
        fmt::format("collider on the GPU: {} accumulators expected, {} given", m_pending_accumulators, acc.size()));
  GpuModule& g = m_gpu.module();
  // The copies wait for the queued kernels (the default stream).
  const std::vector<uint64_t> got = g.download<uint64_t>(m_acc, acc.size());
  for (size_t k = 0; k < acc.size(); ++k) acc[k] += got[k];
  rejected += g.download<uint64_t>(m_rejected, 1)[0];
  std::vector<double> sums = g.download<double>(m_chunks, static_cast<size_t>(kColliderSums) * kColliderChunks);
  m_gpu.kernel_seconds();  // the queued launches have passed: their times are added and their events freed
  return sums;
}

void GpuColliderBunch::depart(const Bb6dParams& params, const std::vector<Bb6dSlice>& slices,
                              const ColliderRingMap* ring, int turn) {
  GpuModule& g = m_gpu.module();
  if (m_slice_capacity < slices.size()) {
    if (m_slices) g.release(m_slices);
    m_slices = g.zeros(slices.size() * sizeof(Bb6dSlice));
    m_slice_capacity = slices.size();
  }
  g.copy_to_device_async(m_slices, slices.data(), slices.size() * sizeof(Bb6dSlice));  // behind the queued kernels
  Bb6dParams p = params;
  int n_slices = static_cast<int>(slices.size()), ring_on = ring ? 1 : 0;
  ColliderRingMap m = ring ? *ring : ColliderRingMap{};
  double beta0 = m_beta0;
  long n = static_cast<long>(m_n);
  void* args[] = {&p,       &m_slices, &n_slices, &ring_on, &m,     &beta0, &turn,    &m_x,         &m_px, &m_y,
                  &m_py,    &m_zeta,   &m_delta,  &m_ptau,  &m_rpp, &m_rvv, &m_state, &m_lost_turn, &n};
  const unsigned threads = 256;
  g.launch_timed_async(g.function("collider_departure"),
                       static_cast<unsigned>(std::max<size_t>((m_n + threads - 1) / threads, 1)), threads, 0, args);
}

}  // namespace ft
