// The per-particle steps of a collider run (fusetrack/collider.h), one source for the host and
// NVRTC, so that a bunch kept on a GPU gives the CPU's particles bit for bit (fma off):
//   - the linear one-turn map (betatron rotations with chromatic phase advance, linear synchrotron
//     rotation), with fusetrack's portable sin/cos;
//   - the beam-beam kick of the partner's slices and the inverse boost (fusetrack/device/beambeam6d.h),
//     the derived ptau, rpp, rvv and the loss of a particle whose coordinates are not finite;
//   - the whole-bunch sums of the per-crossing records in kColliderChunks fixed chunks of
//     kColliderLanes interleaved lanes, each lane summed in particle order, the lanes combined in a
//     fixed tree, the chunks added in order on the host: independent of the thread count;
//   - one pass on arrival (record sums, boost) and one on departure (kick, inverse boost, one turn).
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
constexpr int kColliderSums = 15;  // count, six sums, eight second sums

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

FT_FUNCTION bool collider_finite6(double a, double b, double c, double d, double e, double f) {
  return collider_finite(a) && collider_finite(b) && collider_finite(c) && collider_finite(d) &&
         collider_finite(e) && collider_finite(f);
}

/// Departure of alive particle i from the IP: the kick of the partner's n slices (none: n = 0) and
/// the inverse boost, then, with `ring` set, one turn of the linear map; stored with its derived
/// quantities. A particle whose coordinates become non-finite is lost at `turn` and keeps the last
/// finite lab-frame ones: its arrival coordinates boosted back (kick overflow), or those after the
/// kick (turn overflow).
FT_FUNCTION void collider_depart(const Bb6dParams& p, const Bb6dSlice* slices, int n, int ring,
                                 const ColliderRingMap& m, double* x, double* px, double* y, double* py, double* zeta,
                                 double* delta, double* ptau, double* rpp, double* rvv, int* state, int* lost_turn,
                                 long i, double beta0, int turn) {
  double a = x[i], b = px[i], c = y[i], d = py[i], e = zeta[i], f = delta[i];
  collider_kick(p, slices, n, a, b, c, d, e, f);
  if (!collider_finite6(a, b, c, d, e, f)) {
    double g = x[i], h = px[i], k = y[i], l = py[i], o = zeta[i], q = delta[i];  // as they arrived, boosted
    bb6d_boost_inverse(p, g, h, k, l, o, q);
    if (collider_finite6(g, h, k, l, o, q))
      collider_store(x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, i, beta0, turn, g, h, k, l, o, q);
    state[i] = ft::kLostNotFinite;
    lost_turn[i] = turn;
    return;
  }
  if (ring) {
    double g = a, h = b, k = c, l = d, o = e, q = f;
    collider_ring_turn(m, g, h, k, l, o, q);
    if (collider_finite6(g, h, k, l, o, q)) {
      collider_store(x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, i, beta0, turn, g, h, k, l, o, q);
      return;
    }
    state[i] = ft::kLostNotFinite;
    lost_turn[i] = turn;
  }
  collider_store(x, px, y, py, zeta, delta, ptau, rpp, rvv, state, lost_turn, i, beta0, turn, a, b, c, d, e, f);
}

/// The particles [begin, end) of chunk c of n.
FT_FUNCTION void collider_chunk(long n, int c, long& begin, long& end) {
  begin = n * c / kColliderChunks;
  end = n * (c + 1) / kColliderChunks;
}

/// Adds one particle to the record sums: s[0] count, s[1..6] the coordinates, s[7..14] the raw second
/// sums xx xpx pxpx yy ypy pypy zz dd (central moments on the host: raw / N - mean^2).
FT_FUNCTION void collider_accumulate(double x, double px, double y, double py, double zeta, double delta, double* s) {
  s[0] += 1.0;
  s[1] += x, s[2] += px, s[3] += y, s[4] += py, s[5] += zeta, s[6] += delta;
  s[7] += x * x, s[8] += x * px, s[9] += px * px, s[10] += y * y, s[11] += y * py, s[12] += py * py;
  s[13] += zeta * zeta, s[14] += delta * delta;
}

/// Arrival of lane `lane` of chunk c (particles begin + lane, begin + lane + kColliderLanes, ...):
/// its record sums of the particles as they arrive (kColliderSums values into out), then, with
/// `boost` set, their boost to the head-on frame in place. On the GPU one thread per lane (coalesced;
/// the same loop deposits the slice moments); the CPU runs the lanes one after another.
FT_FUNCTION void collider_lane_arrival(const Bb6dParams& p, int boost, double* x, double* px, double* y, double* py,
                                       double* zeta, double* delta, const int* state, long n, int c, int lane,
                                       double* out) {
  long b, e;
  collider_chunk(n, c, b, e);
  double s[kColliderSums] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (long i = b + lane; i < e; i += kColliderLanes) {
    if (state[i] <= 0) continue;
    collider_accumulate(x[i], px[i], y[i], py[i], zeta[i], delta[i], s);
    if (boost) bb6d_boost(p, x[i], px[i], y[i], py[i], zeta[i], delta[i]);
  }
  for (int k = 0; k < kColliderSums; ++k) out[k] = s[k];
}

/// Adds the kColliderLanes lane sums (width values each, lane-major) into lane 0's, in a fixed
/// pairwise order (lane l takes lane l + stride, stride 16, 8, 4, 2, 1).
FT_FUNCTION void collider_combine_lanes(double* lanes, int width) {
  for (int stride = kColliderLanes / 2; stride > 0; stride /= 2)
    for (int l = 0; l < stride; ++l)
      for (int k = 0; k < width; ++k) lanes[l * width + k] += lanes[(l + stride) * width + k];
}
