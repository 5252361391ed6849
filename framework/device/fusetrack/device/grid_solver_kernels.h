// GPU kernels of the grid collective elements (space charge) outside the segment kernels: one rank's
// solve on the GPU around the Poisson solve (GridCollectiveSolver::solve's steps, the same operations)
// and the moment pass and deposit of adapted grids (the same per-particle steps as the segment kernels).
// Included by the generated collective kernels (NVRTC) of lattices with grid elements.
#pragma once
#include "fusetrack/device/particle_arrays.h"
#include "fusetrack/device/space_charge.h"

#if defined(FT_DEVICE_COMPILE)

// The GPU solve of one rank's grid (GridCollectiveSolver::solve's steps, the same operations):
// node charge density from the integers, then after the Poisson solve the 3D frame factor on E_perp
// and the largest |E| (an order-independent maximum of non-negative doubles' bits).
extern "C" __global__ void fusetrack_grid_density(const unsigned long long* __restrict__ acc, double* __restrict__ rho,
                                                  long long n, double factor) {
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x)
    rho[k] = static_cast<double>(acc[k]) * factor;
}
// The field's components side by side: node k's E_x, E_y[, E_z] at e[k * stride + c], stride 2 (or 3 in 3D).
extern "C" __global__ void fusetrack_grid_field_finish(double* __restrict__ e, long long n, double gamma0, int three_d,
                                                       unsigned long long* __restrict__ max_bits) {
  double m = 0.0;
  const long long stride = three_d ? 3 : 2;
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    double* ek = e + k * stride;
    if (three_d) {
      ek[0] *= gamma0;
      ek[1] *= gamma0;
      m = fmax(m, fabs(ek[2]));
    }
    m = fmax(m, fmax(fabs(ek[0]), fabs(ek[1])));
  }
  // The warp's maximum first (the bits of non-negative doubles order as the values): one atomic per warp.
  unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(m));
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, bits, offset);
    bits = other > bits ? other : bits;
  }
  if ((threadIdx.x & 31) == 0) atomicMax(max_bits, bits);
}
// Moments of the alive particles about the declared centres (fixed point; acc[kExtentAccumulators]
// counts those outside the declared ranges): thread sums, block sums in shared memory, global atomics.
extern "C" __global__ void __launch_bounds__(256)
    fusetrack_grid_extent(FtParticleArrays P, int n_particles, ft::ExtentScales extent,
                          unsigned long long* __restrict__ acc) {
  __shared__ unsigned long long block[ft::kExtentAccumulators + 1];
  for (int a = threadIdx.x; a <= ft::kExtentAccumulators; a += blockDim.x) block[a] = 0ull;
  __syncthreads();
  unsigned long long sum[ft::kExtentAccumulators + 1] = {0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_particles; i += gridDim.x * blockDim.x) {
    if (P.state[i] <= 0) continue;
    const double pos[3] = {P.x[i], P.y[i], P.zeta[i]};
    long long out[ft::kExtentAccumulators];
    if (ft::extent_contributions(extent, pos, out)) {
      for (int a = 0; a < ft::kExtentAccumulators; ++a) sum[a] += static_cast<unsigned long long>(out[a]);
    } else {
      sum[ft::kExtentAccumulators] += 1ull;
    }
  }
  for (int a = 0; a <= ft::kExtentAccumulators; ++a)
    if (sum[a]) atomicAdd(&block[a], sum[a]);
  __syncthreads();
  for (int a = threadIdx.x; a <= ft::kExtentAccumulators; a += blockDim.x)
    if (block[a]) atomicAdd(&acc[a], block[a]);
}

// Cloud-in-cell integer charge of the alive particles on the grid `spec`; acc[outside_slot] counts
// the particles outside it. Integer atomics only: the same integers as the CPU for any order.
extern "C" __global__ void __launch_bounds__(256)
    fusetrack_grid_deposit(FtParticleArrays P, int n_particles, ft::ChargeGridSpec spec,
                           unsigned long long* __restrict__ acc, long long outside_slot) {
  unsigned int outside = 0;  // summed per warp at the end: one atomic, not one per particle outside
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_particles; i += gridDim.x * blockDim.x) {
    if (P.state[i] <= 0) continue;
    const double pos[3] = {P.x[i], P.y[i], P.zeta[i]};
    long long nodes[8];
    unsigned long long w[8];
    const int m = ft::charge_deposit(spec, pos, nodes, w);
    if (m == 0) ++outside;
    FT_UNROLL
    for (int q = 0; q < 8; ++q)
      if (q < m) atomicAdd(&acc[nodes[q]], w[q]);
  }
  ft::warp_count_add(outside, &acc[outside_slot]);
}

#endif  // FT_DEVICE_COMPILE
