// GPU kernels that order the particles of a collective run by grid tile (the CUDA backend's TileOrder).
// Included by the generated collective kernels (NVRTC) of lattices with grid elements.
#pragma once
#include "fusetrack/device/particle_arrays.h"
#include "fusetrack/device/space_charge.h"

#if defined(FT_DEVICE_COMPILE)

// The particles ordered by grid tile on the GPU (CudaBackendOptions::tile_sort_every), a counting sort: each
// particle's bucket (its cell's lower corner node with `shift` bits dropped; lost particles and those outside
// the grid in the last bucket) counted, the counts turned into first slots, each particle given a slot of its
// bucket, the particles gathered into the second set of arrays in slot order with their original index. The order
// inside a bucket depends on thread timing; no result does (every deposit is an integer sum, every other step per
// particle), and the original order comes back before the particles leave the device (fusetrack_tile_restore). The
// loops run whole warps (the lanes past the end take no key), and the lanes of a warp with the same key share one
// atomic: sorted particles hit the same counter a warp at a time.
#define FT_TILE_NO_KEY 0xffffffffu
extern "C" __global__ void fusetrack_tile_keys(FtParticleArrays P, int n_particles, ft::ChargeGridSpec spec, int shift,
                                               unsigned int last, unsigned int* __restrict__ key,
                                               unsigned int* __restrict__ count) {
  const int lane = threadIdx.x & 31;
  for (long long base = blockIdx.x * (long long)blockDim.x + (threadIdx.x & ~31); base < n_particles;
       base += (long long)gridDim.x * blockDim.x) {
    const long long i = base + lane;
    unsigned int k = FT_TILE_NO_KEY;
    if (i < n_particles) {
      long long cell = -1;
      if (P.state[i] > 0) {
        const double pos[3] = {P.x[i], P.y[i], P.zeta[i]};
        cell = ft::charge_grid_cell(spec, pos);
      }
      k = cell < 0 ? last : static_cast<unsigned int>(cell >> shift);
      key[i] = k;
    }
    const unsigned int peers = __match_any_sync(0xffffffffu, k);
    if (k != FT_TILE_NO_KEY && lane == __ffs(peers) - 1) atomicAdd(&count[k], static_cast<unsigned int>(__popc(peers)));
  }
}
// Exclusive prefix sums of count[0, buckets) in place, in three launches: each block of 1024 threads its
// kTileScanBlock buckets (4 per thread) and their total into sums[block], then the block totals (one block,
// at most 1024 of them), then each block's offset added.
#define FT_TILE_SCAN_PER_THREAD 4
extern "C" __global__ void __launch_bounds__(1024)
    fusetrack_tile_scan_blocks(unsigned int* __restrict__ count, unsigned int buckets,
                               unsigned int* __restrict__ sums) {
  __shared__ unsigned int part[2][1024];
  const unsigned int begin = (blockIdx.x * 1024u + threadIdx.x) * FT_TILE_SCAN_PER_THREAD;
  unsigned int v[FT_TILE_SCAN_PER_THREAD], sum = 0;
  for (int k = 0; k < FT_TILE_SCAN_PER_THREAD; ++k) {
    v[k] = begin + k < buckets ? count[begin + k] : 0u;
    sum += v[k];
  }
  part[0][threadIdx.x] = sum;
  __syncthreads();
  int from = 0;
  for (unsigned int d = 1; d < 1024u; d <<= 1) {  // inclusive scan of the threads' sums
    part[1 - from][threadIdx.x] = part[from][threadIdx.x] + (threadIdx.x >= d ? part[from][threadIdx.x - d] : 0u);
    from = 1 - from;
    __syncthreads();
  }
  unsigned int run = part[from][threadIdx.x] - sum;
  for (int k = 0; k < FT_TILE_SCAN_PER_THREAD; ++k) {
    if (begin + k < buckets) count[begin + k] = run;
    run += v[k];
  }
  if (threadIdx.x == 1023u) sums[blockIdx.x] = part[from][1023];
}
extern "C" __global__ void __launch_bounds__(1024)
    fusetrack_tile_scan_sums(unsigned int* __restrict__ sums, unsigned int blocks) {
  __shared__ unsigned int part[2][1024];
  const unsigned int v = threadIdx.x < blocks ? sums[threadIdx.x] : 0u;
  part[0][threadIdx.x] = v;
  __syncthreads();
  int from = 0;
  for (unsigned int d = 1; d < 1024u; d <<= 1) {
    part[1 - from][threadIdx.x] = part[from][threadIdx.x] + (threadIdx.x >= d ? part[from][threadIdx.x - d] : 0u);
    from = 1 - from;
    __syncthreads();
  }
  if (threadIdx.x < blocks) sums[threadIdx.x] = part[from][threadIdx.x] - v;
}
extern "C" __global__ void fusetrack_tile_scan_add(unsigned int* __restrict__ count, unsigned int buckets,
                                                   const unsigned int* __restrict__ sums) {
  const unsigned int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < buckets) count[b] += sums[b / (1024u * FT_TILE_SCAN_PER_THREAD)];
}
// Each particle's slot (its bucket's next; a warp's lanes of one bucket take consecutive slots in lane order),
// recorded as the slot's source; then every slot takes its particle (reads where the particles were, writes in
// order: cheap when they were nearly in order already).
extern "C" __global__ void fusetrack_tile_slots(int n_particles, const unsigned int* __restrict__ key,
                                                unsigned int* __restrict__ cursor, int* __restrict__ source) {
  const int lane = threadIdx.x & 31;
  for (long long base = blockIdx.x * (long long)blockDim.x + (threadIdx.x & ~31); base < n_particles;
       base += (long long)gridDim.x * blockDim.x) {
    const long long i = base + lane;
    const unsigned int k = i < n_particles ? key[i] : FT_TILE_NO_KEY;
    const unsigned int peers = __match_any_sync(0xffffffffu, k);
    const int leader = __ffs(peers) - 1;
    unsigned int first = 0;
    if (k != FT_TILE_NO_KEY && lane == leader) first = atomicAdd(&cursor[k], static_cast<unsigned int>(__popc(peers)));
    first = __shfl_sync(0xffffffffu, first, leader);
    if (k != FT_TILE_NO_KEY) source[first + __popc(peers & ((1u << lane) - 1u))] = static_cast<int>(i);
  }
}
// Every array of particle i of P into slot j of Q (the gather and the restore below).
__device__ __forceinline__ void fusetrack_tile_copy_particle(const FtParticleArrays& P, long long i,
                                                             const FtParticleArrays& Q, long long j) {
  Q.x[j] = P.x[i];
  Q.px[j] = P.px[i];
  Q.y[j] = P.y[i];
  Q.py[j] = P.py[i];
  Q.zeta[j] = P.zeta[i];
  Q.delta[j] = P.delta[i];
  Q.ptau[j] = P.ptau[i];
  Q.rpp[j] = P.rpp[i];
  Q.rvv[j] = P.rvv[i];
  Q.state[j] = P.state[i];
  Q.lost_turn[j] = P.lost_turn[i];
  Q.lost_element[j] = P.lost_element[i];
}
extern "C" __global__ void fusetrack_tile_gather(FtParticleArrays P, FtParticleArrays Q, int n_particles,
                                                 const int* __restrict__ source, const int* __restrict__ origin,
                                                 int* __restrict__ origin_out) {
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n_particles;
       j += (long long)gridDim.x * blockDim.x) {
    const int i = source[j];
    fusetrack_tile_copy_particle(P, i, Q, j);
    origin_out[j] = origin[i];
  }
}
// The original order back: particle i of the sorted arrays to slot origin[i] of Q; origin_out becomes the identity.
extern "C" __global__ void fusetrack_tile_restore(FtParticleArrays P, FtParticleArrays Q, int n_particles,
                                                  const int* __restrict__ origin, int* __restrict__ origin_out) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n_particles;
       i += (long long)gridDim.x * blockDim.x) {
    const int j = origin[i];
    fusetrack_tile_copy_particle(P, i, Q, j);
    origin_out[j] = j;
  }
}

#endif  // FT_DEVICE_COMPILE
