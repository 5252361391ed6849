// GPU kernels of the deterministic reductions on their own (gpu_deposit, fusetrack/cuda_reduction.h): one
// thread per particle; integer atomics into the accumulators and the rejected-particle count.
#pragma once
#include "fusetrack/device/reduction.h"

#if defined(FT_DEVICE_COMPILE)

extern "C" __global__ void fusetrack_slice_moments(ft::SliceGrid g, ft::SliceMomentScales s, const double* x,
                                                   const double* px, const double* y, const double* py,
                                                   const double* zeta, const double* delta, const int* state, int n,
                                                   unsigned long long* acc, unsigned long long* rejected) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int bins[2];
  long long out[2][ft::kSliceAccumulators];
  int m = 0;
  if (i < n && state[i] > 0) {
    const double c[6] = {x[i], px[i], y[i], py[i], zeta[i], delta[i]};
    m = ft::slice_moment_contributions(g, s, c, bins, out);
  }
  ft::warp_count_add(m < 0 ? 1u : 0u, rejected);  // every lane of the warp gets here
  for (int b = 0; b < m; ++b)
    for (int k = 0; k < ft::kSliceAccumulators; ++k)
      atomicAdd(acc + bins[b] * ft::kSliceAccumulators + k, static_cast<unsigned long long>(out[b][k]));
}
extern "C" __global__ void fusetrack_charge_grid(ft::ChargeGridSpec g, const double* x, const double* y,
                                                 const double* zeta, const int* state, int n, unsigned long long* acc,
                                                 unsigned long long* rejected) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  long long nodes[8];
  unsigned long long w[8];
  int m = 0;
  bool outside = false;
  if (i < n && state[i] > 0) {
    const double pos[3] = {x[i], y[i], zeta[i]};
    m = ft::charge_deposit(g, pos, nodes, w);
    outside = m == 0;
  }
  ft::warp_count_add(outside ? 1u : 0u, rejected);  // every lane of the warp gets here
  FT_UNROLL
  for (int c = 0; c < 8; ++c)
    if (c < m) atomicAdd(acc + nodes[c], w[c]);
}

#endif  // FT_DEVICE_COMPILE
