// GPU kernels that make a matched bunch on the device (CudaBackend::track_matched_share): the host's
// sampler (fusetrack/device/random.h, make_particle as Particles::set), compiled with fma off whatever
// the tracking's mode, so that the particles are bitwise those of MatchedBunchShare::sample; the sums of
// the sample moments and the alive count reduced on the device in a fixed order.
#pragma once
#include "fusetrack/device/particle.h"
#include "fusetrack/device/particle_arrays.h"
#include "fusetrack/device/random.h"

#if defined(FT_DEVICE_COMPILE)

// Particles [0, n) of the arrays are particles first + [0, n) of the bunch.
extern "C" __global__ void fusetrack_sample_matched(FtParticleArrays P, ft::ft_longitudinal_sampler s,
                                                    unsigned long long seed, unsigned long long first, long long n,
                                                    double x, double px, double y, double py, double beta0) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    double zeta = 0.0, delta = 0.0;
    ft::ft_sample_longitudinal(s, seed, first + (unsigned long long)i, &zeta, &delta);
    const ft::ParticleView p = ft::make_particle(x, px, y, py, zeta, delta, beta0);
    P.x[i] = p.x;
    P.px[i] = p.px;
    P.y[i] = p.y;
    P.py[i] = p.py;
    P.zeta[i] = p.zeta;
    P.delta[i] = p.delta;
    P.ptau[i] = p.ptau;
    P.rpp[i] = p.rpp;
    P.rvv[i] = p.rvv;
    P.state[i] = p.state;
    P.lost_turn[i] = -1;
    P.lost_element[i] = -1;
  }
}

// Sums of zeta, zeta^2, delta, delta^2 per block (4 doubles each): a grid-stride loop, then a fixed
// tree over the block's 256 threads; the host adds the blocks in order (deterministic for a given n).
extern "C" __global__ void __launch_bounds__(256)
    fusetrack_longitudinal_sums(const double* zeta, const double* delta, long long n, double* out) {
  __shared__ double acc[4][256];
  double a = 0.0, b = 0.0, c = 0.0, d = 0.0;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) {
    const double z = zeta[i], e = delta[i];
    a += z;
    b += z * z;
    c += e;
    d += e * e;
  }
  const int t = threadIdx.x;
  acc[0][t] = a;
  acc[1][t] = b;
  acc[2][t] = c;
  acc[3][t] = d;
  __syncthreads();
  for (int h = 128; h > 0; h >>= 1) {
    if (t < h)
      for (int k = 0; k < 4; ++k) acc[k][t] += acc[k][t + h];
    __syncthreads();
  }
  if (t < 4) out[4 * blockIdx.x + t] = acc[t][0];
}

// Particles alive (state > 0), added into *count (integer atomics: exact).
extern "C" __global__ void __launch_bounds__(256)
    fusetrack_count_alive(const int* state, long long n, unsigned long long* count) {
  __shared__ unsigned long long acc[256];
  unsigned long long c = 0;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) c += state[i] > 0;
  const int t = threadIdx.x;
  acc[t] = c;
  __syncthreads();
  for (int h = 128; h > 0; h >>= 1) {
    if (t < h) acc[t] += acc[t + h];
    __syncthreads();
  }
  if (t == 0) atomicAdd(count, acc[0]);
}

#endif  // FT_DEVICE_COMPILE
