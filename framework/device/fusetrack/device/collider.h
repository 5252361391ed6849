// The per-particle steps of a collider run (fusetrack/collider.h), one source for the host and
// NVRTC, so that a bunch kept on a GPU gives the CPU's particles bit for bit (fma off):
//   - the linear one-turn map (betatron rotations with chromatic phase advance, linear synchrotron
//     rotation), with fusetrack's portable sin/cos;
//   - the beam-beam kick of the partner's slices and the inverse boost (fusetrack/device/beambeam6d.h),
//     the derived ptau, rpp, rvv and the loss of a particle whose coordinates are not finite;
//   - the whole-bunch sums of the per-crossing records in kColliderChunks fixed chunks of
//     kColliderLanes interleaved lanes, each lane summed in particle order, the lanes combined in a
//     fixed tree, the chunks added in order on the host: independent of the thread count.
#pragma once
#include "fusetrack/device/beambeam6d.h"
#include "fusetrack/device/math.h"
#include "fusetrack/device/particle.h"
#include "fusetrack/device/qualifiers.h"

/// Linear one-turn map at the IP (fusetrack/collider.h, LinearRingMap); gamma = (1 + alpha^2) / beta.
struct ColliderRingMap {
  double qx, qy, chroma_x, chroma_y;
  double beta_x, alpha_x, gamma_x, beta_y, alpha_y, gamma_y;
  double cos_s, sin_s, beta_s;  // synchrotron rotation by 2 pi Qs
  int longitudinal;             // 0: zeta and delta frozen (Qs = 0)
};

constexpr int kColliderChunks = 1024;
constexpr int kColliderLanes = 32;

/// Rotation of (x, px) by the phase advance mu with the Twiss parameters beta, alpha, gamma.
FT_FUNCTION void collider_rotate(double mu, double beta, double alpha, double gamma, double& x, double& px) {
  double s, c;
  ft_sincos(mu, &s, &c);
  const double x_new = (c + alpha * s) * x + beta * s * px;
  px = -gamma * s * x + (c - alpha * s) * px;
  x = x_new;
}

/// One turn of the linear map on one alive particle (above transition: delta > 0 falls back).
FT_FUNCTION void collider_ring_turn(const ColliderRingMap& m, double& x, double& px, double& y, double& py,
                                    double& zeta, double& delta) {
  const double two_pi = 6.283185307179586476925;
  collider_rotate(two_pi * (m.qx + m.chroma_x * delta), m.beta_x, m.alpha_x, m.gamma_x, x, px);
  collider_rotate(two_pi * (m.qy + m.chroma_y * delta), m.beta_y, m.alpha_y, m.gamma_y, y, py);
  if (m.longitudinal) {
    const double z = m.cos_s * zeta - m.beta_s * m.sin_s * delta;
    delta = m.sin_s / m.beta_s * zeta + m.cos_s * delta;
    zeta = z;
  }
}

/// v is finite (v - v is NaN for an infinity or a NaN), without the C library.
FT_FUNCTION bool collider_finite(double v) { return v - v == 0.0; }

/// Stores the new coordinates of particle i with its derived ptau, rpp, rvv; a particle with a
/// non-finite coordinate is lost at `turn` instead (its coordinates stay as they were).
FT_FUNCTION void collider_store(double* x, double* px, double* y, double* py, double* zeta, double* delta, double* ptau,
                                double* rpp, double* rvv, int* state, int* lost_turn, long i, double beta0, int turn,
                                double nx, double npx, double ny, double npy, double nzeta, double ndelta) {
  if (!(collider_finite(nx) && collider_finite(npx) && collider_finite(ny) && collider_finite(npy) &&
        collider_finite(nzeta) && collider_finite(ndelta))) {
    state[i] = ft::kLostNotFinite;
    lost_turn[i] = turn;
    return;
  }
  const ft::ParticleView p = ft::make_particle(nx, npx, ny, npy, nzeta, ndelta, beta0);
  x[i] = p.x, px[i] = p.px, y[i] = p.y, py[i] = p.py, zeta[i] = p.zeta, delta[i] = p.delta;
  ptau[i] = p.ptau, rpp[i] = p.rpp, rvv[i] = p.rvv;
}

/// The partner's n slices (head first) on one particle of the boosted frame, then the inverse boost.
FT_FUNCTION void collider_kick(const Bb6dParams& p, const Bb6dSlice* slices, int n, double& x, double& px, double& y,
                               double& py, double& zeta, double& delta) {
  for (int s = 0; s < n; ++s) bb6d_kick_slice(p, slices[s], x, px, y, py, zeta, delta);
  bb6d_boost_inverse(p, x, px, y, py, zeta, delta);
}

/// The particles [begin, end) of chunk c of n.
FT_FUNCTION void collider_chunk(long n, int c, long& begin, long& end) {
  begin = n * c / kColliderChunks;
  end = n * (c + 1) / kColliderChunks;
}

/// Lane `lane` of chunk c (particles begin + lane, begin + lane + kColliderLanes, ...): its count
/// and coordinate sums, out[0] alive, out[1..6] x px y py zeta delta. On the GPU one thread per
/// lane (coalesced); the CPU runs the lanes one after another: the same sums.
FT_FUNCTION void collider_lane_first(const double* x, const double* px, const double* y, const double* py,
                                     const double* zeta, const double* delta, const int* state, long n, int c,
                                     int lane, double* out) {
  long b, e;
  collider_chunk(n, c, b, e);
  double s[7] = {0, 0, 0, 0, 0, 0, 0};
  for (long i = b + lane; i < e; i += kColliderLanes) {
    if (state[i] <= 0) continue;
    s[0] += 1.0;
    s[1] += x[i], s[2] += px[i], s[3] += y[i], s[4] += py[i], s[5] += zeta[i], s[6] += delta[i];
  }
  for (int k = 0; k < 7; ++k) out[k] = s[k];
}

/// Lane `lane` of chunk c: central second sums about `mean`, xx xpx pxpx yy ypy pypy zz dd.
FT_FUNCTION void collider_lane_second(const double* x, const double* px, const double* y, const double* py,
                                      const double* zeta, const double* delta, const int* state, long n, int c,
                                      int lane, const double* mean, double* out) {
  long b, e;
  collider_chunk(n, c, b, e);
  double q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (long i = b + lane; i < e; i += kColliderLanes) {
    if (state[i] <= 0) continue;
    const double dx = x[i] - mean[0], dpx = px[i] - mean[1], dy = y[i] - mean[2], dpy = py[i] - mean[3];
    const double dz = zeta[i] - mean[4], dd = delta[i] - mean[5];
    q[0] += dx * dx, q[1] += dx * dpx, q[2] += dpx * dpx, q[3] += dy * dy, q[4] += dy * dpy, q[5] += dpy * dpy;
    q[6] += dz * dz, q[7] += dd * dd;
  }
  for (int k = 0; k < 8; ++k) out[k] = q[k];
}

/// Adds the kColliderLanes lane sums (width values each, lane-major) into lane 0's, in a fixed
/// pairwise order (lane l takes lane l + stride, stride 16, 8, 4, 2, 1).
FT_FUNCTION void collider_combine_lanes(double* lanes, int width) {
  for (int stride = kColliderLanes / 2; stride > 0; stride /= 2)
    for (int l = 0; l < stride; ++l)
      for (int k = 0; k < width; ++k) lanes[l * width + k] += lanes[(l + stride) * width + k];
}
