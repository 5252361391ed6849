#!/usr/bin/env python3
"""Coefficients of Weideman's rational approximation of the Faddeeva function, for bb4d_faddeeva.h.

J. A. C. Weideman, "Computation of the complex error function", SIAM J. Numer. Anal. 31 (1994)
1497-1518, eqs. (3.6)-(3.8) and the MATLAB code of its appendix:

    w(z) ~ 2 p(Z) / (L - i z)^2 + 1 / (sqrt(pi) (L - i z)),   Z = (L + i z) / (L - i z),
    p(Z) = sum_{n=0}^{N-1} a_{n+1} Z^n,   L = sqrt(N / sqrt(2)),

with a_n the Fourier coefficients of f(t) = exp(-t^2) (L^2 + t^2) at t = L tan(theta / 2), computed
here as a direct real DFT in 50-digit arithmetic (mpmath) instead of the paper's FFT, then rounded
to the nearest double. Prints the C++ Horner steps (highest power first) as exact hex literals.
Usage: python3 weideman_coefficients.py [N]   (bb4d_faddeeva.h uses N = 40)
"""
import sys

import mpmath

mpmath.mp.dps = 50


def coefficients(n_terms):
    m = 2 * n_terms
    length = mpmath.sqrt(mpmath.mpf(n_terms) / mpmath.sqrt(2))
    f = [mpmath.mpf(0)]
    for k in range(-m + 1, m):
        t = length * mpmath.tan(k * mpmath.pi / m / 2)
        f.append(mpmath.exp(-t * t) * (length * length + t * t))
    n = len(f)  # 2m samples; fftshift, then the real part of the DFT divided by 2m
    f = f[n // 2:] + f[:n // 2]
    a = [mpmath.fsum(f[j] * mpmath.cos(2 * mpmath.pi * i * j / n) for j in range(n)) / n for i in range(n)]
    return length, a[1:n_terms + 1][::-1]  # a_N ... a_1: Horner order


def main():
    n_terms = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    length, a = coefficients(n_terms)
    print(f"// N = {n_terms}, L = sqrt(N / sqrt(2)) = {float(length)!r} = {float(length).hex()}")
    for i, c in enumerate(a):
        print(f"  FT_BB4D_HORNER({float(c).hex()});  // a_{n_terms - i} = {mpmath.nstr(c, 20)}")


if __name__ == "__main__":
    main()
