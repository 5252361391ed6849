// Strong-strong beam-beam, 6D: the physics core shared by the host and NVRTC (one source).
//
// Frames and coordinates. The tracked particle is in (x, px, y, py, zeta, delta) of its beam at the
// interaction point (IP). A crossing angle 2 phi in the plane alpha (alpha = 0: horizontal crossing)
// is removed by the Lorentz boost of Hirata, Moshammer, Ruggiero, "A symplectic beam-beam
// interaction with energy change", Part. Accel. 40 (1993) 205 (HMR), eqs. (2)-(5), in the form of
// SixTrack / Xsuite xfields (K. Ohmi; L. Leunissen, "6D beam-beam kick including coupling",
// CERN LHC Project Note 2000): bb6d_boost / bb6d_boost_inverse below; zeta plays the role of HMR's
// sigma. In the boosted (head-on) frame both beams move along s in opposite directions. The
// differences 1 + delta - pz are written as pt^2 / (1 + delta + pz) (no cancellation); otherwise the
// formulas are HMR's term by term.
//
// Partner slices. The partner bunch arrives as slices, each a Bb6dSlice: its particle count, its
// centroid and the second moments Sigma_ij of (x, px, y, py) at the IP, all given in the tracked
// particle's boosted frame with the convention that a partner particle's transverse position at
// the longitudinal position s of this frame is x + px s (so that Sigma_11(s) = S11 + 2 S12 s + S22 s^2).
// The integration converts the partner's own coordinates into this frame.
//
// Synchro-beam mapping (HMR section 3). For each partner slice, in the order the caller gives (head
// first: the order the particle meets them), with S = (zeta - zeta_slice) / 2 the collision point:
//   1. drift to S: x_bar = x + px S, y_bar = y + py S, delta -= (px^2 + py^2) / 4      (the Lie map of
//      H = S(zeta) (px^2 + py^2) / 2: dS/dzeta = 1/2 gives the energy change);
//   2. kick of the potential V = k U(x_bar - x_s(S), y_bar - y_s(S); Sigma_11(S), Sigma_33(S)):
//      px += k Kx, py += k Ky, delta -= dV/dzeta = (k/2) [Kx px_s + Ky py_s + Gx dSigma_11/dS + Gy dSigma_33/dS],
//      with K = -grad U the field of the unit-normalised 2D Gaussian (K -> r / r^2 far away; the
//      BeamBeam4D plugin's K), Gx = dU/dSigma_11 = -(1/2) dKx/dx, Gy = dU/dSigma_33 = -(1/2) dKy/dy
//      (HMR eq. (20); the Gaussian's density obeys d rho / dSigma_11 = (1/2) d^2 rho / dx^2), the slice
//      centroid x_s(S) = x_slice + px_slice S, and k = F_k N_slice with the plugin's
//      F_k = q0 q_s e (1 + beta0 beta_s) / (2 pi eps0 p0c (beta0 + beta_s)) per partner particle;
//   3. drift back with the new momenta: x = x_bar - px S, delta += (px^2 + py^2) / 4.
// Each step is the exact flow of a Hamiltonian, so the map is symplectic; steps 1 and 3 together give
// HMR's delta += (1/2) [dpx (px + dpx / 2) + dpy (py + dpy / 2)], written so (no cancellation).
// Coupling: a slice with x-y correlations (Sigma_13, Sigma_14, Sigma_23, Sigma_24) acts in the frame,
// rotated by theta(S), where its covariance at the collision point is uncoupled (bb6d_shape_at; L.
// Leunissen, LHC Project Note 2000, as SixTrack and xfields); the energy change gains the turning of
// that frame with S.
// 4D case: bb6d_track with longitudinal = 0 sets S = 0 and skips the energy change: one slice of a
// frozen partner then gives exactly the BeamBeam4D plugin's kick.
//
// Field K, G of a Gaussian with variances sx2 = Sigma_11, sy2 = Sigma_33 (bb6d_gauss_field):
//  - round (|sx - sy| <= 1e-8 sx): the closed form K = r q(u) / (2 s), u = r^2 / (2 s), q = (1 - e^-u) / u,
//    without cancellation (series for small u, 2 e^(-u/2) sinh(u/2) below 1), and
//    Gx = -(q + x^2 q'(u) / s) / (4 s), q'(u) = (e^-u - q) / u;
//  - elliptic: Bassetti & Erskine, CERN-ISR-TH/80-06 (1980), eq. (18), with the Faddeeva function w of
//    fusetrack/device/faddeeva.h, arithmetic identical to the plugin's; G from the identity (HMR eq. (21))
//      Gx = [x Kx + y Ky - 1 + (sy / sx) exp(-x^2 / (2 sx2) - y^2 / (2 sy2))] / (2 (sx2 - sy2)),
//      Gy = [1 - x Kx - y Ky - (sx / sy) exp(...)] / (2 (sx2 - sy2))
//    (Gx + Gy = -pi rho: the Laplacian; far away Kx - i Ky = 1/z + (sx2 - sy2) / z^3);
//  - core (x^2 / (2 sx2) + y^2 / (2 sy2) < 1e-5, where the Bassetti-Erskine bracket cancels): the series
//    of the integral representation Kx = x int exp(-x^2/A - y^2/B) A^-3/2 B^-1/2 dq (A = 2 sx2 + q,
//    B = 2 sy2 + q) to first order in (x^2, y^2): Kx = x (J10 - x^2 J20 - y^2 J11), Ky = y (J01 - x^2 J11 - y^2 J02),
//    with the closed forms (a = sqrt(2 sx2), b = sqrt(2 sy2)) J10 = 2 / (a (a + b)), J01 = 2 / (b (a + b)),
//    J20 = 2 (2a + b) / (3 a^3 (a + b)^2), J11 = 2 / (a b (a + b)^2), J02 = 2 (a + 2b) / (3 b^3 (a + b)^2)
//    (J_i+1,j = -dJ_ij/dA / (i + 1/2)). Truncation < rho^4 / 2 ~ 5e-11 relative at the threshold.
//    Near-round beams (relative size difference 1e-8 .. 1e-4) lose up to ~1e-8 relative in G and in the
//    elliptic field (cancellation ~ eps / (relative difference)); the plugin's higher-order core
//    (precomputed moments) is not possible here because the sizes change with S for every particle.
#pragma once
#include "fusetrack/device/faddeeva.h"
#include "fusetrack/device/math.h"
#include "fusetrack/device/qualifiers.h"

/// One partner slice (see the header comment for the frame). Plain data: the shared reduction fills it.
struct Bb6dSlice {
  double n_particles;                ///< number of real particles in the slice (macro-particles times their weight)
  double x, px, y, py, zeta, delta;  ///< centroid; zeta is the slice centre
  double sigma_11, sigma_12, sigma_13, sigma_14;  ///< second central moments of (x, px, y, py) at the IP
  double sigma_22, sigma_23, sigma_24;
  double sigma_33, sigma_34, sigma_44;
};

/// The crossing and the kick strength (bb6d_prepare_params fills the derived members on the host).
struct Bb6dParams {
  double phi;                ///< half crossing angle [rad]
  double alpha;              ///< crossing plane [rad] (0: horizontal)
  double kick_per_particle;  ///< F_k per partner particle [m]: q0 q_s e (1 + b0 bs) / (2 pi eps0 p0c (b0 + bs))
  int longitudinal;          ///< 1: synchro-beam map (6D); 0: S = 0, no energy change (4D)
  // derived
  double sin_phi, cos_phi, tan_phi, sin_alpha, cos_alpha;
};

/// Lorentz boost to the head-on frame (HMR eqs. (2)-(5); SixTrack BOOST / xfields boost): in place on
/// (x, px, y, py, zeta, delta).
FT_FUNCTION void bb6d_boost(const Bb6dParams& p, double& x, double& px, double& y, double& py, double& zeta,
                            double& delta) {
  const double sphi = p.sin_phi, cphi = p.cos_phi, tphi = p.tan_phi;
  const double salpha = p.sin_alpha, calpha = p.cos_alpha;
  // h = 1 + delta - pz = (px^2 + py^2) / (1 + delta + pz), written without cancellation
  const double pt2 = px * px + py * py;
  const double h = pt2 / ((1.0 + delta) + sqrt((1.0 + delta) * (1.0 + delta) - pt2));
  const double px_st = px / cphi - h * calpha * tphi / cphi;
  const double py_st = py / cphi - h * salpha * tphi / cphi;
  const double delta_st = delta - px * calpha * tphi - py * salpha * tphi + h * tphi * tphi;
  const double pt2_st = px_st * px_st + py_st * py_st;
  const double pz_st = sqrt((1.0 + delta_st) * (1.0 + delta_st) - pt2_st);
  const double hx_st = px_st / pz_st;
  const double hy_st = py_st / pz_st;
  const double hz_st = -pt2_st / ((1.0 + delta_st + pz_st) * pz_st);  // 1 - (1 + delta*) / pz*
  const double l11 = 1.0 + hx_st * calpha * sphi, l12 = hx_st * salpha * sphi, l13 = calpha * tphi;
  const double l21 = hy_st * calpha * sphi, l22 = 1.0 + hy_st * salpha * sphi, l23 = salpha * tphi;
  const double l31 = hz_st * calpha * sphi, l32 = hz_st * salpha * sphi, l33 = 1.0 / cphi;
  const double x_st = l11 * x + l12 * y + l13 * zeta;
  const double y_st = l21 * x + l22 * y + l23 * zeta;
  const double zeta_st = l31 * x + l32 * y + l33 * zeta;
  x = x_st;
  px = px_st;
  y = y_st;
  py = py_st;
  zeta = zeta_st;
  delta = delta_st;
}

/// The inverse of bb6d_boost (HMR eq. (6); SixTrack BOOSTI / xfields inv_boost).
FT_FUNCTION void bb6d_boost_inverse(const Bb6dParams& p, double& x, double& px, double& y, double& py, double& zeta,
                                    double& delta) {
  const double sphi = p.sin_phi, cphi = p.cos_phi, tphi = p.tan_phi;
  const double salpha = p.sin_alpha, calpha = p.cos_alpha;
  const double pt2 = px * px + py * py;
  const double pz_st = sqrt((1.0 + delta) * (1.0 + delta) - pt2);
  const double hx_st = px / pz_st;
  const double hy_st = py / pz_st;
  const double hz_st = -pt2 / ((1.0 + delta + pz_st) * pz_st);  // 1 - (1 + delta*) / pz*
  const double det = 1.0 / cphi + (hx_st * calpha + hy_st * salpha - hz_st * sphi) * tphi;
  const double i11 = (1.0 / cphi + salpha * tphi * (hy_st - hz_st * salpha * sphi)) / det;
  const double i12 = (salpha * tphi * (hz_st * calpha * sphi - hx_st)) / det;
  const double i13 = -tphi * (calpha - hx_st * salpha * salpha * sphi + hy_st * calpha * salpha * sphi) / det;
  const double i21 = (calpha * tphi * (hz_st * salpha * sphi - hy_st)) / det;
  const double i22 = (1.0 / cphi + calpha * tphi * (hx_st - hz_st * calpha * sphi)) / det;
  const double i23 = -tphi * (salpha - hy_st * calpha * calpha * sphi + hx_st * calpha * salpha * sphi) / det;
  const double i31 = -hz_st * calpha * sphi / det;
  const double i32 = -hz_st * salpha * sphi / det;
  const double i33 = (1.0 + hx_st * calpha * sphi + hy_st * salpha * sphi) / det;
  const double x_new = i11 * x + i12 * y + i13 * zeta;
  const double y_new = i21 * x + i22 * y + i23 * zeta;
  const double zeta_new = i31 * x + i32 * y + i33 * zeta;
  const double h = pt2 / (1.0 + delta + pz_st) * cphi * cphi;  // (1 + delta* - pz*) cos^2(phi)
  const double px_new = px * cphi + h * calpha * tphi;
  const double py_new = py * cphi + h * salpha * tphi;
  const double delta_new = delta + px_new * calpha * tphi + py_new * salpha * tphi - h * tphi * tphi;
  x = x_new;
  px = px_new;
  y = y_new;
  py = py_new;
  zeta = zeta_new;
  delta = delta_new;
}

/// K of a round Gaussian of variance s at (x, y), and G = dU/dSigma_11, dU/dSigma_33 (header comment).
FT_FUNCTION void bb6d_round_field(double x, double y, double s, double& kx, double& ky, double& gx, double& gy) {
  const double half_inv = 1.0 / (2.0 * s);
  const double u = (x * x + y * y) * half_inv;
  double q, dq;
  if (u < 1e-2) {
    q = 1.0 - u * (1.0 / 2.0 - u * (1.0 / 6.0 - u * (1.0 / 24.0 - u * (1.0 / 120.0 - u * (1.0 / 720.0)))));
    dq = -1.0 / 2.0 +
         u * (1.0 / 3.0 -
              u * (1.0 / 8.0 - u * (1.0 / 30.0 - u * (1.0 / 144.0 - u * (1.0 / 840.0 - u * (1.0 / 5760.0))))));
  } else if (u < 1.0) {
    const double e = ft_exp(-u);
    q = 2.0 * ft_exp(-0.5 * u) * ft_sinh(0.5 * u) / u;
    dq = (e - q) / u;
  } else {
    const double e = ft_exp(-u);
    q = (1.0 - e) / u;
    dq = (e - q) / u;
  }
  const double factor = half_inv * q;
  kx = x * factor;
  ky = y * factor;
  gx = -(q + x * x * dq / s) / (4.0 * s);
  gy = -(q + y * y * dq / s) / (4.0 * s);
}

/// Bassetti-Erskine K in the first quadrant of a beam with sizes sa > sb along (a, b), as the plugin.
FT_FUNCTION void bb6d_bassetti_erskine(double a, double b, double sa, double sb, double& ka, double& kb,
                                       double& gauss) {
  const double xa = fabs(a);
  const double yb = fabs(b);
  const double s = sqrt(2.0 * (sa - sb) * (sa + sb));
  const double inv_s = 1.0 / s;
  const double field_scale = 1.7724538509055160273 / s;  // sqrt(pi) / S
  const double half_inv_a2 = 1.0 / (2.0 * sa * sa);
  const double half_inv_b2 = 1.0 / (2.0 * sb * sb);
  double w1r, w1i, w2r, w2i;
  ft_faddeeva_w(xa * inv_s, yb * inv_s, w1r, w1i);
  ft_faddeeva_w(xa * (sb / sa) * inv_s, yb * (sa / sb) * inv_s, w2r, w2i);
  const double g = ft_exp(-(xa * xa * half_inv_a2 + yb * yb * half_inv_b2));
  const double k_a = field_scale * (w1i - g * w2i);
  const double k_b = field_scale * (w1r - g * w2r);
  ka = a == 0.0 ? 0.0 : (a < 0.0 ? -k_a : k_a);
  kb = b == 0.0 ? 0.0 : (b < 0.0 ? -k_b : k_b);
  gauss = g;
}

/// Field K = -grad U of the unit-normalised Gaussian with variances sx2, sy2 at (x, y) [1/m], and
/// gx = dU/dsx2, gy = dU/dsy2 [1/m^2] (header comment).
FT_FUNCTION void bb6d_gauss_field(double x, double y, double sx2, double sy2, double& kx, double& ky, double& gx,
                                  double& gy) {
  const double sx = sqrt(sx2);
  const double sy = sqrt(sy2);
  if (fabs(sx - sy) <= 1e-8 * (sx > sy ? sx : sy)) {
    bb6d_round_field(x, y, 0.5 * (sx2 + sy2), kx, ky, gx, gy);
    return;
  }
  const double rho2 = x * x / (2.0 * sx2) + y * y / (2.0 * sy2);
  if (rho2 < 1e-5) {
    const double a = sqrt(2.0 * sx2), b = sqrt(2.0 * sy2);
    const double ab = a + b;
    const double j10 = 2.0 / (a * ab);
    const double j01 = 2.0 / (b * ab);
    const double j20 = 2.0 * (2.0 * a + b) / (3.0 * a * a * a * ab * ab);
    const double j11 = 2.0 / (a * b * ab * ab);
    const double j02 = 2.0 * (a + 2.0 * b) / (3.0 * b * b * b * ab * ab);
    const double xx = x * x, yy = y * y;
    kx = x * (j10 - xx * j20 - yy * j11);
    ky = y * (j01 - xx * j11 - yy * j02);
    gx = -0.5 * (j10 - 3.0 * xx * j20 - yy * j11);
    gy = -0.5 * (j01 - xx * j11 - 3.0 * yy * j02);
    return;
  }
  double g;
  if (sx > sy) {
    bb6d_bassetti_erskine(x, y, sx, sy, kx, ky, g);
    // the plugin's ordering: K_b + i K_a, here a = x
  } else {
    bb6d_bassetti_erskine(y, x, sy, sx, ky, kx, g);
  }
  const double d = sx2 - sy2;
  gx = (x * kx + y * ky - 1.0 + (sy / sx) * g) / (2.0 * d);
  gy = (1.0 - x * kx - y * ky - (sx / sy) * g) / (2.0 * d);
}

/// The partner slice's transverse shape at the collision point S: its (x, y) covariance carried to S,
/// Sigma_11(S) = S11 + 2 S12 S + S22 S^2, Sigma_33(S) alike, Sigma_13(S) = S13 + (S14 + S23) S + S24 S^2,
/// in the frame rotated by theta (x_hat = c x + s y, y_hat = -s x + c y) where it is uncoupled, and the
/// S-derivatives of the sizes and of c, s (Leunissen, LHC Project Note 2000; the convention of SixTrack
/// and xfields: cos(2 theta) = |R| / q >= 0, R = Sigma_11 - Sigma_33, q = sqrt(R^2 + 4 Sigma_13^2), so the
/// rotation is the smaller one and Sigma_11_hat = (W + sgn(R) q) / 2, W = Sigma_11 + Sigma_33).
/// Uncoupled slices (S13 = S14 = S23 = S24 = 0) take theta = 0 exactly.
struct Bb6dShape {
  double sig11, sig33, dsig11, dsig33;  // sizes in the rotated frame and their dS
  double c, s, dc, ds;                  // cos, sin of theta and their dS
};

FT_FUNCTION void bb6d_shape_at(const Bb6dSlice& sl, double S, Bb6dShape& o) {
  const double sig11 = sl.sigma_11 + (2.0 * sl.sigma_12 + sl.sigma_22 * S) * S;
  const double sig33 = sl.sigma_33 + (2.0 * sl.sigma_34 + sl.sigma_44 * S) * S;
  const double dsig11 = 2.0 * (sl.sigma_12 + sl.sigma_22 * S);
  const double dsig33 = 2.0 * (sl.sigma_34 + sl.sigma_44 * S);
  o.c = 1.0, o.s = 0.0, o.dc = 0.0, o.ds = 0.0;
  o.sig11 = sig11, o.sig33 = sig33, o.dsig11 = dsig11, o.dsig33 = dsig33;
  if (sl.sigma_13 == 0.0 && sl.sigma_14 == 0.0 && sl.sigma_23 == 0.0 && sl.sigma_24 == 0.0) return;
  const double sig13 = sl.sigma_13 + (sl.sigma_14 + sl.sigma_23 + sl.sigma_24 * S) * S;
  const double dsig13 = sl.sigma_14 + sl.sigma_23 + 2.0 * sl.sigma_24 * S;
  const double r = sig11 - sig33, w = sig11 + sig33, dr = dsig11 - dsig33, dw = dsig11 + dsig33;
  const double q = sqrt(r * r + 4.0 * sig13 * sig13);
  if (!(q > 0.0)) {  // round and uncoupled at S: every rotation diagonalises it, the field is radial
    o.sig11 = o.sig33 = 0.5 * w;
    o.dsig11 = o.dsig33 = 0.5 * dw;
    return;
  }
  const double sgn = r >= 0.0 ? 1.0 : -1.0;
  const double dq = (r * dr + 4.0 * sig13 * dsig13) / q;
  const double cos2 = sgn * r / q, sin2 = sgn * 2.0 * sig13 / q;
  const double dcos2 = sgn * (dr * q - r * dq) / (q * q), dsin2 = sgn * 2.0 * (dsig13 * q - sig13 * dq) / (q * q);
  const double dtheta = 0.5 * (cos2 * dsin2 - sin2 * dcos2);
  o.c = sqrt(0.5 * (1.0 + cos2));  // >= 1/sqrt(2)
  o.s = sin2 / (2.0 * o.c);
  o.dc = -o.s * dtheta;
  o.ds = o.c * dtheta;
  o.sig11 = 0.5 * (w + sgn * q);
  o.sig33 = 0.5 * (w - sgn * q);
  o.dsig11 = 0.5 * (dw + sgn * dq);
  o.dsig33 = 0.5 * (dw - sgn * dq);
}

/// The synchro-beam map of one partner slice on a particle in the boosted frame (header comment).
/// A coupled slice acts in its uncoupled frame (bb6d_shape_at): the field of the rotated Gaussian is
/// rotated back, and the energy change gains the frame's turning with S, (k/2) K_hat . d(x_hat)/dS.
FT_FUNCTION void bb6d_kick_slice(const Bb6dParams& p, const Bb6dSlice& sl, double& x, double& px, double& y, double& py,
                                 double zeta, double& delta) {
  const double S = p.longitudinal ? 0.5 * (zeta - sl.zeta) : 0.0;
  Bb6dShape sh;
  bb6d_shape_at(sl, S, sh);  // the partner's moments at the collision point (drift; hourglass)
  const double x_bar = x + px * S;
  const double y_bar = y + py * S;
  const double dx = x_bar - (sl.x + sl.px * S), dy = y_bar - (sl.y + sl.py * S);
  const double x_hat = sh.c * dx + sh.s * dy, y_hat = -sh.s * dx + sh.c * dy;
  double kx_hat, ky_hat, gx, gy;
  bb6d_gauss_field(x_hat, y_hat, sh.sig11, sh.sig33, kx_hat, ky_hat, gx, gy);
  const double kx = sh.c * kx_hat - sh.s * ky_hat, ky = sh.s * kx_hat + sh.c * ky_hat;
  const double k = p.kick_per_particle * sl.n_particles;
  const double dpx = k * kx;
  const double dpy = k * ky;
  if (p.longitudinal) {
    double turning = 0.0;  // K_hat . d(x_hat)/dS from the rotating frame (0 for uncoupled slices)
    if (sh.dc != 0.0 || sh.ds != 0.0)
      turning = kx_hat * (dx * sh.dc + dy * sh.ds) + ky_hat * (-dx * sh.ds + dy * sh.dc);
    delta += 0.5 * (dpx * (px + 0.5 * dpx) + dpy * (py + 0.5 * dpy)) -
             0.5 * k * (kx * sl.px + ky * sl.py + gx * sh.dsig11 + gy * sh.dsig33 - turning);
  }
  px += dpx;
  py += dpy;
  x = x_bar - px * S;
  y = y_bar - py * S;
}

/// The full beam-beam map of n_slices partner slices (head first) on one particle of the tracked beam:
/// boost, the synchro-beam map of every slice, inverse boost.
FT_FUNCTION void bb6d_track(const Bb6dParams& p, const Bb6dSlice* slices, int n_slices, double& x, double& px,
                            double& y, double& py, double& zeta, double& delta) {
  bb6d_boost(p, x, px, y, py, zeta, delta);
  for (int i = 0; i < n_slices; ++i) bb6d_kick_slice(p, slices[i], x, px, y, py, zeta, delta);
  bb6d_boost_inverse(p, x, px, y, py, zeta, delta);
}

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>

/// Fills the derived members of p; q0, p0c [eV], beta0: the tracked beam's reference; q_partner,
/// beta_partner: the partner's. Throws std::invalid_argument naming the bad value.
inline void bb6d_prepare_params(Bb6dParams& p, double q0, double p0c, double beta0, double q_partner,
                                double beta_partner) {
  char msg[200];
  const auto require = [&](bool ok, const char* what, double value) {
    if (!ok) {
      std::snprintf(msg, sizeof(msg), "beam-beam 6D: %s (got %.17g)", what, value);
      throw std::invalid_argument(msg);
    }
  };
  require(std::isfinite(p.phi) && std::fabs(p.phi) < 1.5, "the half crossing angle phi must be finite, |phi| < 1.5 rad",
          p.phi);
  require(std::isfinite(p.alpha), "the crossing plane alpha must be finite", p.alpha);
  require(p0c > 0.0, "the reference momentum p0c must be positive", p0c);
  require(beta0 > 0.0 && beta0 <= 1.0, "beta0 must be in (0, 1]", beta0);
  require(beta_partner > 0.0 && beta_partner <= 1.0, "the partner's beta must be in (0, 1]", beta_partner);
  require(p.longitudinal == 0 || p.longitudinal == 1, "longitudinal must be 0 or 1", p.longitudinal);
  const double elementary_charge = 1.602176634e-19;  // C, exact (SI 2019)
  const double epsilon0 = 8.8541878128e-12;          // F/m, CODATA 2018
  const double pi = 3.14159265358979323846;
  p.kick_per_particle = q0 * q_partner * (elementary_charge / (2.0 * pi * epsilon0)) / p0c *
                        ((1.0 + beta0 * beta_partner) / (beta0 + beta_partner));
  p.sin_phi = std::sin(p.phi);
  p.cos_phi = std::cos(p.phi);
  p.tan_phi = std::tan(p.phi);
  p.sin_alpha = std::sin(p.alpha);
  p.cos_alpha = std::cos(p.alpha);
}

/// Rejects a slice the kick cannot handle: negative or non-finite count, non-positive sizes, an (x, y)
/// covariance that is not positive definite, non-finite correlations. index names the slice.
inline void bb6d_check_slice(const Bb6dSlice& s, int index) {
  char msg[240];
  const auto fail = [&](const char* what, double value) {
    std::snprintf(msg, sizeof(msg), "beam-beam 6D: slice %d: %s (got %.17g)", index, what, value);
    throw std::invalid_argument(msg);
  };
  if (!(std::isfinite(s.n_particles) && s.n_particles >= 0.0))
    fail("n_particles must be finite and >= 0", s.n_particles);
  if (!(s.sigma_11 > 0.0 && std::isfinite(s.sigma_11))) fail("sigma_11 must be positive", s.sigma_11);
  if (!(s.sigma_33 > 0.0 && std::isfinite(s.sigma_33))) fail("sigma_33 must be positive", s.sigma_33);
  if (!(s.sigma_22 >= 0.0 && s.sigma_44 >= 0.0)) fail("sigma_22 and sigma_44 must be >= 0", s.sigma_22);
  if (!(s.sigma_13 * s.sigma_13 < s.sigma_11 * s.sigma_33))
    fail("the (x, y) covariance must be positive definite: sigma_13^2 < sigma_11 sigma_33", s.sigma_13);
  for (double v : {s.sigma_12, s.sigma_13, s.sigma_14, s.sigma_23, s.sigma_24, s.sigma_34})
    if (!std::isfinite(v)) fail("the correlations must be finite", v);
}
#endif
