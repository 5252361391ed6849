// What limits the PIC element's deterministic deposit on the GPU (a probe, not part of the build).
//   nvcc -O3 -arch=sm_90 -o deposit_probe tools/device/deposit_probe.cu && ./deposit_probe [particles]
// 10^7 Gaussian macroparticles on a 256 x 256 x 64 grid (+-6 sigma transverse, +-4 sigma in zeta, the PIC
// benchmark's), cloud-in-cell integer weights (8 corners), deposited with integer atomics in several forms, in random
// order and ordered by cell; and the gather of a node-interleaved (Ex, Ey) field at the same positions. Each form's
// grid is checked against the 64-bit deposit's (integer sums: the same for any order). Times: mean of 5 launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e = (x);                                                                  \
    if (e != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

constexpr int NX = 256, NY = 256, NZ = 64;

struct Grid {
  double min[3], inv_d[3];
  int weight_bits;  // per dimension: the project's 12 for 10^7 particles in 3D; 10 keeps a corner's weight in 32 bits
};

__device__ __forceinline__ int corners(const Grid& g, double x, double y, double z, long long* node,
                                       unsigned long long* w) {
  const double p[3] = {x, y, z};
  const int n[3] = {NX, NY, NZ};
  long long idx[3];
  unsigned long long w1[3][2];
  const unsigned long long unit = 1ull << g.weight_bits;
  for (int d = 0; d < 3; ++d) {
    const double u = (p[d] - g.min[d]) * g.inv_d[d];
    if (!(u >= 0.0 && u < n[d] - 1)) return 0;
    const double lo = floor(u);
    unsigned long long r = static_cast<unsigned long long>((u - lo) * unit + 0.5);
    if (r > unit) r = unit;
    idx[d] = static_cast<long long>(lo);
    w1[d][0] = unit - r;
    w1[d][1] = r;
  }
  for (int c = 0; c < 8; ++c) {
    const int ox = c & 1, oy = (c >> 1) & 1, oz = (c >> 2) & 1;
    node[c] = ((idx[2] + oz) * NY + idx[1] + oy) * NX + idx[0] + ox;
    w[c] = w1[0][ox] * w1[1][oy] * w1[2][oz];
  }
  return 8;
}

// mode 0: 64-bit atomicAdd (RED.64) into acc64.
// mode 1: 32-bit low words with carries: atomicAdd on the low word (returns), the carry (and the high part) into hi32.
// mode 2: as 1 with the particles' streams loaded with __ldcs (evict first).
// mode 3: 64-bit, lanes of a warp with the same first node summed first (__match_any_sync), one atomic per group.
// mode 4: as 3 into 32-bit low words with carries.
__global__ void deposit(const double* x, const double* y, const double* z, int n, Grid g, int mode,
                        unsigned long long* acc64, unsigned int* lo32, unsigned int* hi32) {
  const int lane = threadIdx.x & 31;
  for (long long base = blockIdx.x * (long long)blockDim.x + (threadIdx.x & ~31); base < n;
       base += (long long)gridDim.x * blockDim.x) {
    const long long i = base + lane;
    long long node[8];
    unsigned long long w[8];
    int m = 0;
    if (i < n) {
      const double px = mode == 2 ? __ldcs(x + i) : x[i], py = mode == 2 ? __ldcs(y + i) : y[i],
                   pz = mode == 2 ? __ldcs(z + i) : z[i];
      m = corners(g, px, py, pz, node, w);
    }
    if (mode >= 3) {
      const unsigned active = __ballot_sync(0xffffffffu, m > 0);
      if (m == 0) continue;
      const unsigned peers = __match_any_sync(active, node[0]);
      const int leader = __ffs(peers) - 1;
      for (int c = 0; c < 8; ++c) {
        // the group's sum: shuffles over the group's lanes (up to 32), the leader adds it
        unsigned long long s = 0;
        unsigned rest = peers;
        while (rest) {
          const int src = __ffs(rest) - 1;
          rest &= rest - 1;
          s += __shfl_sync(peers, w[c], src);
        }
        if (lane == leader) {
          if (mode == 3) {
            atomicAdd(acc64 + node[c], s);
          } else {
            const unsigned low = static_cast<unsigned>(s);
            const unsigned old = atomicAdd(lo32 + node[c], low);
            const unsigned high = static_cast<unsigned>(s >> 32) + (old + low < old ? 1u : 0u);
            if (high) atomicAdd(hi32 + node[c], high);
          }
        }
      }
      continue;
    }
    for (int c = 0; c < m; ++c) {
      if (mode == 0) {
        atomicAdd(acc64 + node[c], w[c]);
      } else {
        const unsigned low = static_cast<unsigned>(w[c]);
        const unsigned old = atomicAdd(lo32 + node[c], low);
        const unsigned high = static_cast<unsigned>(w[c] >> 32) + (old + low < old ? 1u : 0u);
        if (high) atomicAdd(hi32 + node[c], high);
      }
    }
  }
}

// The field at each particle from 8 corners of a node-interleaved (Ex, Ey) grid, written to out (2 doubles).
__global__ void gather(const double* x, const double* y, const double* z, int n, Grid g, const double* e, double* out) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long node[8];
    unsigned long long w[8];
    const int m = corners(g, x[i], y[i], z[i], node, w);
    double sx = 0, sy = 0;
    for (int c = 0; c < m; ++c) {
      const double2 v = *reinterpret_cast<const double2*>(e + 2 * node[c]);
      sx += static_cast<double>(w[c]) * v.x;
      sy += static_cast<double>(w[c]) * v.y;
    }
    out[2 * i] = sx;
    out[2 * i + 1] = sy;
  }
}

// A segment-like kernel: the 9 doubles and the state of each particle loaded, the field gathered at 8 corners, a kick
// on px, py and a drift, 5 doubles stored, then the deposit at the new position (u64 atomics). min_blocks: the
// __launch_bounds__ minimum of resident blocks (registers).
template <int MinBlocks>
__global__ void __launch_bounds__(256, MinBlocks)
    segment(double* x, double* px, double* y, double* py, double* z, const double* delta, const double* rpp,
            const double* rvv, const double* ptau, const int* state, int n, Grid g, const double* e,
            unsigned long long* acc) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    if (state[i] <= 0) continue;
    double X = x[i], PX = px[i], Y = y[i], PY = py[i], Z = z[i];
    const double D = delta[i], RPP = rpp[i], RVV = rvv[i], PT = ptau[i];
    long long node[8];
    unsigned long long w[8];
    int m = corners(g, X, Y, Z, node, w);
    double sx = 0, sy = 0;
    for (int c = 0; c < m; ++c) {
      const double2 v = *reinterpret_cast<const double2*>(e + 2 * node[c]);
      sx += static_cast<double>(w[c]) * v.x;
      sy += static_cast<double>(w[c]) * v.y;
    }
    PX += 1e-12 * sx;
    PY += 1e-12 * sy;
    const double L = 10.0;
    X += L * PX * RPP;
    Y += L * PY * RPP;
    Z += L * (1.0 - RVV * (1.0 + 0.5 * (PX * PX + PY * PY) * RPP * RPP)) + 0.0 * D * PT;
    x[i] = X;
    px[i] = PX;
    y[i] = Y;
    py[i] = PY;
    z[i] = Z;
    m = corners(g, X, Y, Z, node, w);
    for (int c = 0; c < m; ++c) atomicAdd(acc + node[c], w[c]);
  }
}

__global__ void combine(const unsigned* lo, const unsigned* hi, unsigned long long* out, long long nodes) {
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < nodes;
       k += (long long)gridDim.x * blockDim.x)
    out[k] = (static_cast<unsigned long long>(hi[k]) << 32) | lo[k];
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10000000;
  const long long nodes = static_cast<long long>(NX) * NY * NZ;
  const double sx = 3e-3, sy = 2e-3, sz = 2.0;
  Grid g{{-6 * sx, -6 * sy, -4 * sz}, {(NX - 1) / (12 * sx), (NY - 1) / (12 * sy), (NZ - 1) / (8 * sz)}, 12};
  std::mt19937_64 rng(9);
  std::normal_distribution<double> N01;
  std::vector<double> hx(n), hy(n), hz(n);
  for (int i = 0; i < n; ++i) {
    hx[i] = sx * N01(rng);
    hy[i] = sy * N01(rng);
    hz[i] = sz * N01(rng);
  }
  // the same particles ordered by cell (zeta, y, x)
  std::vector<long long> cell(n);
  for (int i = 0; i < n; ++i) {
    const long long ix = std::clamp<long long>((long long)((hx[i] - g.min[0]) * g.inv_d[0]), 0, NX - 1);
    const long long iy = std::clamp<long long>((long long)((hy[i] - g.min[1]) * g.inv_d[1]), 0, NY - 1);
    const long long iz = std::clamp<long long>((long long)((hz[i] - g.min[2]) * g.inv_d[2]), 0, NZ - 1);
    cell[i] = (iz * NY + iy) * NX + ix;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return cell[a] < cell[b]; });
  std::vector<double> sxv(n), syv(n), szv(n);
  for (int i = 0; i < n; ++i) {
    sxv[i] = hx[order[i]];
    syv[i] = hy[order[i]];
    szv[i] = hz[order[i]];
  }
  double *dx, *dy, *dz, *ex, *out;
  unsigned long long *acc64, *ref, *tmp;
  unsigned *lo, *hi;
  CHECK(cudaMalloc(&dx, n * 8));
  CHECK(cudaMalloc(&dy, n * 8));
  CHECK(cudaMalloc(&dz, n * 8));
  CHECK(cudaMalloc(&out, 2ll * n * 8));
  CHECK(cudaMalloc(&ex, 2 * nodes * 8));
  CHECK(cudaMemset(ex, 0, 2 * nodes * 8));
  CHECK(cudaMalloc(&acc64, nodes * 8));
  CHECK(cudaMalloc(&ref, nodes * 8));
  CHECK(cudaMalloc(&tmp, nodes * 8));
  CHECK(cudaMalloc(&lo, nodes * 4));
  CHECK(cudaMalloc(&hi, nodes * 4));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms * 8, threads = 256;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<unsigned long long> h_ref(nodes), h_out(nodes);
  for (int pass = 0; pass < 4; ++pass) {
    const int sorted = pass & 1;
    g.weight_bits = pass < 2 ? 12 : 10;
    CHECK(cudaMemcpy(dx, sorted ? sxv.data() : hx.data(), n * 8, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, sorted ? syv.data() : hy.data(), n * 8, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dz, sorted ? szv.data() : hz.data(), n * 8, cudaMemcpyHostToDevice));
    const char* names[] = {"u64 atomics", "u32 low + carry", "u32 low + carry, __ldcs", "u64, warp groups by cell",
                           "u32 low + carry, warp groups"};
    for (int mode = 0; mode < 5; ++mode) {
      float total = 0;
      for (int rep = 0; rep < 6; ++rep) {
        CHECK(cudaMemset(acc64, 0, nodes * 8));
        CHECK(cudaMemset(lo, 0, nodes * 4));
        CHECK(cudaMemset(hi, 0, nodes * 4));
        cudaEventRecord(a);
        deposit<<<blocks, threads>>>(dx, dy, dz, n, g, mode, acc64, lo, hi);
        if (mode == 1 || mode == 2 || mode == 4) combine<<<blocks, threads>>>(lo, hi, acc64, nodes);
        cudaEventRecord(b);
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (rep > 0) total += ms;
      }
      CHECK(cudaMemcpy(h_out.data(), acc64, nodes * 8, cudaMemcpyDeviceToHost));
      if (mode == 0 && sorted == 0) h_ref = h_out;
      const bool same = h_out == h_ref;
      std::printf("weights %d bits, %s, deposit %-30s %8.3f ms  grid %s\n", 3 * g.weight_bits,
                  sorted ? "by cell" : "random ", names[mode], total / 5, same ? "identical to u64 random" : "DIFFERS");
    }
    float total = 0;
    for (int rep = 0; rep < 6; ++rep) {
      cudaEventRecord(a);
      gather<<<blocks, threads>>>(dx, dy, dz, n, g, ex, out);
      cudaEventRecord(b);
      CHECK(cudaEventSynchronize(b));
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      if (rep > 0) total += ms;
    }
    if (pass < 2)
      std::printf("%s, gather of (Ex, Ey) at 8 corners        %8.3f ms\n", sorted ? "by cell" : "random ", total / 5);
  }
  // one particle per thread (n / 256 blocks), random order, u64 (as the standalone deposit kernel launches)
  {
    std::vector<double> zero(n, 0.0), one(n, 1.0);
    std::vector<int> alive(n, 1);
    double *dpx, *dpy, *dd, *drpp, *drvv, *dpt;
    int* dst;
    for (double** p : {&dpx, &dpy, &dd, &drpp, &drvv, &dpt}) CHECK(cudaMalloc(p, n * 8));
    CHECK(cudaMalloc(&dst, n * 4));
    for (double* p : {dpx, dpy, dd, dpt}) CHECK(cudaMemcpy(p, zero.data(), n * 8, cudaMemcpyHostToDevice));
    for (double* p : {drpp, drvv}) CHECK(cudaMemcpy(p, one.data(), n * 8, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dst, alive.data(), n * 4, cudaMemcpyHostToDevice));
    for (int sorted = 0; sorted < 2; ++sorted) {
      g.weight_bits = 12;
      CHECK(cudaMemcpy(dx, sorted ? sxv.data() : hx.data(), n * 8, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(dy, sorted ? syv.data() : hy.data(), n * 8, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(dz, sorted ? szv.data() : hz.data(), n * 8, cudaMemcpyHostToDevice));
      for (int variant = 0; variant < 4; ++variant) {
        float total = 0;
        for (int rep = 0; rep < 6; ++rep) {
          CHECK(cudaMemset(acc64, 0, nodes * 8));
          cudaEventRecord(a);
          if (variant == 0) deposit<<<(n + 255) / 256, 256>>>(dx, dy, dz, n, g, 0, acc64, lo, hi);
          if (variant == 1)
            segment<1><<<blocks, 256>>>(dx, dpx, dy, dpy, dz, dd, drpp, drvv, dpt, dst, n, g, ex, acc64);
          if (variant == 2)
            segment<3><<<sms * 3, 256>>>(dx, dpx, dy, dpy, dz, dd, drpp, drvv, dpt, dst, n, g, ex, acc64);
          if (variant == 3)
            segment<6><<<sms * 6, 256>>>(dx, dpx, dy, dpy, dz, dd, drpp, drvv, dpt, dst, n, g, ex, acc64);
          cudaEventRecord(b);
          CHECK(cudaEventSynchronize(b));
          float ms = 0;
          cudaEventElapsedTime(&ms, a, b);
          if (rep > 0) total += ms;
          // the drift moved the particles: put them back for the next repetition
          if (variant > 0) {
            CHECK(cudaMemcpy(dx, sorted ? sxv.data() : hx.data(), n * 8, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(dy, sorted ? syv.data() : hy.data(), n * 8, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(dz, sorted ? szv.data() : hz.data(), n * 8, cudaMemcpyHostToDevice));
          }
        }
        const char* vn[] = {"deposit, one particle per thread", "segment-like, launch bounds (256, 1), 8 blocks/SM",
                            "segment-like, (256, 3), 3 blocks/SM", "segment-like, (256, 6), 6 blocks/SM"};
        cudaFuncAttributes fa{};
        if (variant == 1) cudaFuncGetAttributes(&fa, segment<1>);
        if (variant == 2) cudaFuncGetAttributes(&fa, segment<3>);
        if (variant == 3) cudaFuncGetAttributes(&fa, segment<6>);
        std::printf("%s, %-52s %8.3f ms (registers %d, local %zu B)\n", sorted ? "by cell" : "random ", vn[variant],
                    total / 5, fa.numRegs, fa.localSizeBytes);
      }
    }
  }
  // copy bandwidth for reference
  float total = 0;
  for (int rep = 0; rep < 6; ++rep) {
    cudaEventRecord(a);
    CHECK(cudaMemcpy(out, ex, 2 * nodes * 8, cudaMemcpyDeviceToDevice));
    cudaEventRecord(b);
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (rep > 0) total += ms;
  }
  std::printf("copy of %.1f MB: %.3f ms (%.0f GB/s read + write)\n", 2 * nodes * 8 / 1e6, total / 5,
              2 * 2 * nodes * 8 / (total / 5 * 1e-3) / 1e9);
  return 0;
}
