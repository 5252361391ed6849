// The Faddeeva function w(z) = exp(-z^2) erfc(-i z) in the upper half plane, for the Bassetti-Erskine
// field of beambeam6d.h and the BeamBeam4D plugin. Written with + - * / only (no libm, no tables), so the host compiler
// and NVRTC (--fmad=false) give the same bits.
//
// Method: J. A. C. Weideman, "Computation of the complex error function", SIAM J. Numer. Anal. 31
// (1994) 1497-1518, eqs. (3.6)-(3.8), with N = 40 terms:
//   w(z) ~ 2 p(Z) / (L - i z)^2 + 1 / (sqrt(pi) (L - i z)),   Z = (L + i z) / (L - i z),
//   p(Z) = sum_{n=0}^{39} a_{n+1} Z^n,   L = sqrt(N / sqrt(2)).
// The a_n (exact hex literals below) are the Fourier coefficients of exp(-t^2) (L^2 + t^2) at
// t = L tan(theta / 2), computed in 50-digit arithmetic by plugins/beambeam4d/tools/weideman_coefficients.py and
// rounded to double. The approximation keeps the exact asymptote w ~ i / (sqrt(pi) z) for large |z|. Accuracy (largest
// |w - w_exact| / |w_exact| seen): 1.0e-15 against a 40-digit reference (mpmath) for Im z >= 0, |z| <= 8, and 3.5e-16
// beyond, up to |z| ~ 1e6; 1.3e-15 in tests/plugins/test_beambeam4d.cpp against an independent long-double evaluation
// (a 97 x 97 grid on [0, 12]^2 and 12000 points with |z| from 1e-9 to 1e8). The leading term is exact and the rest is
// O(1 / z^2), so large |z| stay accurate. Only Im z >= 0 is supported: the beam-beam field uses
// the first quadrant.
#pragma once
#include "fusetrack/device/qualifiers.h"

#define FT_FADDEEVA_W_STEP(a)                      \
  {                                                \
    const double next_r = pr * zr - pi * zi + (a); \
    const double next_i = pr * zi + pi * zr;       \
    pr = next_r;                                   \
    pi = next_i;                                   \
  }

/// w(x + i y) for y >= 0: real part in wr, imaginary part in wi.
FT_FUNCTION void ft_faddeeva_w(double x, double y, double& wr, double& wi) {
  const double L = 0x1.545ef5c0f51a0p+2;            // sqrt(40 / sqrt(2)) = 5.3182958969449885
  const double inv_sqrt_pi = 0x1.20dd750429b6dp-1;  // 1 / sqrt(pi) = 0.5641895835477563
  // d = L - i z = (L + y) - i x,  n = L + i z = (L - y) + i x
  const double dr = L + y;
  const double di = -x;
  const double nr = L - y;
  const double ni = x;
  const double dd = dr * dr + di * di;  // |d|^2 >= L^2: no division by zero
  // Z = n / d = n conj(d) / |d|^2
  const double zr = (nr * dr + ni * di) / dd;
  const double zi = (ni * dr - nr * di) / dd;
  double pr = 0.0;
  double pi = 0.0;
  // Horner's scheme from a_40 down to a_1 (plugins/beambeam4d/tools/weideman_coefficients.py 40).
  FT_FADDEEVA_W_STEP(-0x1.11c65f7e98284p-49);  // a_40 = -1.8996949473949269957e-15
  FT_FADDEEVA_W_STEP(0x1.4525231fde2fdp-50);   // a_39 = 1.1280735623644020605e-15
  FT_FADDEEVA_W_STEP(0x1.99342cacfd05dp-47);   // a_38 = 1.135768719899924165e-14
  FT_FADDEEVA_W_STEP(-0x1.85c82993487b9p-48);  // a_37 = -5.4093102828821422337e-15
  FT_FADDEEVA_W_STEP(-0x1.3e96a96866b32p-44);  // a_36 = -7.0740862602868555223e-14
  FT_FADDEEVA_W_STEP(0x1.ee84814ec1d9fp-47);   // a_35 = 1.3725620586715500429e-14
  FT_FADDEEVA_W_STEP(0x1.fe5dde7bc0d5bp-42);   // a_34 = 4.5329666782606727739e-13
  FT_FADDEEVA_W_STEP(0x1.0eeca272d29f9p-43);   // a_33 = 1.2031458219387987553e-13
  FT_FADDEEVA_W_STEP(-0x1.99388358e0a99p-39);  // a_32 = -2.9076883421828669205e-12
  FT_FADDEEVA_W_STEP(-0x1.7fe03aed69c12p-39);  // a_31 = -2.727602315820045184e-12
  FT_FADDEEVA_W_STEP(0x1.37a2fe79b99e8p-36);   // a_30 = 1.7714495214011191861e-11
  FT_FADDEEVA_W_STEP(0x1.3176da838ee16p-35);   // a_29 = 3.4727267093045500073e-11
  FT_FADDEEVA_W_STEP(-0x1.8e3fa34413163p-34);  // a_28 = -9.0551244509282926874e-11
  FT_FADDEEVA_W_STEP(-0x1.87c81ece8d131p-32);  // a_27 = -3.5632339865976532683e-10
  FT_FADDEEVA_W_STEP(0x1.cfafa9b46b454p-33);   // a_26 = 2.1086006347066517903e-10
  FT_FADDEEVA_W_STEP(0x1.9ec2b6a185630p-29);   // a_25 = 3.0177805400090708496e-9
  FT_FADDEEVA_W_STEP(0x1.bea44a6a58fc8p-29);   // a_24 = 3.2497465180436973908e-9
  FT_FADDEEVA_W_STEP(-0x1.3aa8ef3ad38c2p-26);  // a_23 = -1.8315616783040463185e-8
  FT_FADDEEVA_W_STEP(-0x1.10ce7cf00fdccp-24);  // a_22 = -6.3517734850442910835e-8
  FT_FADDEEVA_W_STEP(0x1.e7dc944f8de06p-27);   // a_21 = 1.4198642399935674566e-8
  FT_FADDEEVA_W_STEP(0x1.3d67caa2b5240p-21);   // a_20 = 5.9121369518994938457e-7
  FT_FADDEEVA_W_STEP(0x1.8e3de312ad6cap-20);   // a_19 = 1.4835661132200779868e-6
  FT_FADDEEVA_W_STEP(-0x1.1e27ead408563p-20);  // a_18 = -1.0660138984947143888e-6
  FT_FADDEEVA_W_STEP(-0x1.2e1d6585afe8bp-16);  // a_17 = -0.000018007447144750957155
  FT_FADDEEVA_W_STEP(-0x1.d50873c0ae8dep-15);  // a_16 = -0.000055913092642483182232
  FT_FADDEEVA_W_STEP(-0x1.4a752dec284fap-15);  // a_15 = -0.000039393631454895687296
  FT_FADDEEVA_W_STEP(0x1.cd2bcc00e1d56p-12);   // a_14 = 0.00043980701598696678275
  FT_FADDEEVA_W_STEP(0x1.629a596ed4a56p-9);    // a_13 = 0.0027054056330737913119
  FT_FADDEEVA_W_STEP(0x1.49424ba5ffe63p-7);    // a_12 = 0.010048186242783424125
  FT_FADDEEVA_W_STEP(0x1.de75e8cc46826p-6);    // a_11 = 0.02920291647124186709
  FT_FADDEEVA_W_STEP(0x1.26308597ddc8cp-4);    // a_10 = 0.071823617790743368281
  FT_FADDEEVA_W_STEP(0x1.3d86fe9e6a9eap-3);    // a_9 = 0.15504263802479494272
  FT_FADDEEVA_W_STEP(0x1.33178328c1601p-2);    // a_8 = 0.2998943799615006298
  FT_FADDEEVA_W_STEP(0x1.0da572e19e018p-1);    // a_7 = 0.5266528988277086387
  FT_FADDEEVA_W_STEP(0x1.b1c67c927e9f6p-1);    // a_6 = 0.84721745765938182153
  FT_FADDEEVA_W_STEP(0x1.41a238f009d09p+0);    // a_5 = 1.2563815675765132352
  FT_FADDEEVA_W_STEP(0x1.b9b2b4b25d642p+0);    // a_4 = 1.725383084817977807
  FT_FADDEEVA_W_STEP(0x1.19cb343b58fc6p+1);    // a_3 = 2.2015137948783119299
  FT_FADDEEVA_W_STEP(0x1.4edadccb56adcp+1);    // a_2 = 2.6160541527618603689
  FT_FADDEEVA_W_STEP(0x1.7326e55b41215p+1);    // a_1 = 2.8996245093897052475
  // 1 / d and 1 / d^2
  const double ir = dr / dd;
  const double ii = -di / dd;
  const double i2r = ir * ir - ii * ii;
  const double i2i = 2.0 * ir * ii;
  wr = 2.0 * (pr * i2r - pi * i2i) + inv_sqrt_pi * ir;
  wi = 2.0 * (pr * i2i + pi * i2r) + inv_sqrt_pi * ii;
}

#undef FT_FADDEEVA_W_STEP
