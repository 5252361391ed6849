#!/usr/bin/env python3
"""Peer comparison of fusetrack's space charge with xfields.

Builds and runs two comparisons against a checkout of Xsuite's xfields, xobjects and xtrack sources:

1. frozen: xfields' own SpaceChargeBiGaussian per-particle C code (its track function, the
   BiGaussianFieldMap field and the q-Gaussian line density, compiled unchanged in a small C harness
   that provides the few data accessors xobjects would generate) against fusetrack's element
   (elements/space_charge_bigaussian.h, compiled in a small C++ harness) on random cases: round, flat
   (x > y and y > x) and near-round beams, particles from the core to 10 sigma, zeta along the bunch.
   Both Faddeeva variants of xfields are run: MIT (its serial CPU context) and CERNLIB (its OpenMP and
   GPU contexts). The worst cases are checked against an exact field in mpmath (if installed).
2. PIC Poisson solver: xfields' FFTSolver2p5D (Python, numpy: the xobjects CPU context without compiled
   kernels) with its central-difference field, and fusetrack's PoissonSolver (Open2D, Fast and
   Reproducible), on the same grid and charge (a Gaussian beam sampled at the nodes), each against the
   analytic Bassetti-Erskine field.

Nothing of the peer is copied here: the harnesses are generated into a work folder (default
.peers/xfields_space_charge, git-ignored) and include the peer's headers from the given paths.

Usage (python3 with numpy and scipy, a C and a C++ compiler, fusetrack built in --build):
    python3 validation/compare_xfields_space_charge.py --xfields PATH --xobjects PATH --xtrack PATH \
        [--build build] [--work .peers/xfields_space_charge] [--cases 6000] [--seed 23] [--skip-pic]
PATH: the root of each repository (the folder holding the xfields/, xobjects/, xtrack/ package).
"""
import argparse
import importlib.util
import math
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------------------------------
# Harness for the peer: the accessors that xobjects generates for SpaceChargeBiGaussian, its
# BiGaussianFieldMap and LongitudinalProfileQGaussian, and xtrack's LocalParticle, as plain structs;
# then the peer's own header with the track function.
XF_HARNESS = r"""
#define XO_CONTEXT_CPU 1
#include <stdio.h>
#include <stdint.h>
#include <math.h>
#include "xobjects/headers/common.h"

typedef struct { double mean_x, mean_y, sigma_x, sigma_y, min_sigma_diff; } FieldMapStub;
typedef FieldMapStub* BiGaussianFieldMapData;
#define GET(T, F) static inline double T##Data_get_##F(T##Data o) { return o->F; }
GET(BiGaussianFieldMap, mean_x) GET(BiGaussianFieldMap, mean_y) GET(BiGaussianFieldMap, sigma_x)
GET(BiGaussianFieldMap, sigma_y) GET(BiGaussianFieldMap, min_sigma_diff)

typedef struct { double number_of_particles, _q_tol, _z0, _sigma_z, _q_param, _cq_param, _beta_param,
                 _sqrt_beta_param, _support_min, _support_max; } ProfileStub;
typedef ProfileStub* LongitudinalProfileQGaussianData;
GET(LongitudinalProfileQGaussian, number_of_particles) GET(LongitudinalProfileQGaussian, _q_tol)
GET(LongitudinalProfileQGaussian, _z0) GET(LongitudinalProfileQGaussian, _q_param)
GET(LongitudinalProfileQGaussian, _cq_param) GET(LongitudinalProfileQGaussian, _beta_param)
GET(LongitudinalProfileQGaussian, _sqrt_beta_param) GET(LongitudinalProfileQGaussian, _support_min)
GET(LongitudinalProfileQGaussian, _support_max)

typedef struct { ProfileStub profile; FieldMapStub fieldmap; double length; int64_t z_kick; } ElementStub;
typedef ElementStub* SpaceChargeBiGaussianData;
static inline double SpaceChargeBiGaussianData_get_length(SpaceChargeBiGaussianData e) { return e->length; }
static inline BiGaussianFieldMapData SpaceChargeBiGaussianData_getp_fieldmap(SpaceChargeBiGaussianData e) { return &e->fieldmap; }
static inline LongitudinalProfileQGaussianData SpaceChargeBiGaussianData_getp_longitudinal_profile(SpaceChargeBiGaussianData e) { return &e->profile; }
static inline int64_t SpaceChargeBiGaussianData_get_z_kick_num_integ_per_sigma(SpaceChargeBiGaussianData e) { return e->z_kick; }

typedef struct {
  int64_t ipart, endpart, n;
  double *x, *px, *y, *py, *zeta, *delta;
  double q0, mass0, chi, beta0, gamma0;
} LocalParticle;
static inline int64_t LocalParticle_get__num_active_particles(LocalParticle* p) { return p->n; }
static inline int64_t LocalParticle_get_state(LocalParticle* p) { (void)p; return 1; }
#define PGET(F) static inline double LocalParticle_get_##F(LocalParticle* p) { return p->F[p->ipart]; }
PGET(x) PGET(y) PGET(zeta) PGET(delta) PGET(px) PGET(py)
#define RGET(F) static inline double LocalParticle_get_##F(LocalParticle* p) { return p->F; }
RGET(q0) RGET(mass0) RGET(chi) RGET(beta0) RGET(gamma0)
static inline void LocalParticle_add_to_px(LocalParticle* p, double v) { p->px[p->ipart] += v; }
static inline void LocalParticle_add_to_py(LocalParticle* p, double v) { p->py[p->ipart] += v; }
static inline void LocalParticle_update_delta(LocalParticle* p, double v) { p->delta[p->ipart] = v; }

#include "xfields/beam_elements/spacecharge_src/spacechargebigaussian.h"

static void kick(ElementStub* e, LocalParticle* lp, double x, double y, double zeta, double* dpx, double* dpy) {
  double px = 0, py = 0, delta = 0;
  lp->x = &x; lp->y = &y; lp->zeta = &zeta; lp->px = &px; lp->py = &py; lp->delta = &delta;
  lp->ipart = 0; lp->endpart = 1; lp->n = 1;
  SpaceChargeBiGaussian_track_local_particle(e, lp);
  *dpx = px; *dpy = py;
}

int main(void) {
  /* per line: beta0 gamma0 q0 mass0 N sigma_z z0 sigma_x sigma_y mean_x mean_y min_sigma_diff length x y zeta
     q_tol cq beta_param sqrt_beta_param support_min support_max */
  double v[22];
  printf("# EPSILON_0 %.17g QELEM %.17g\n", (double)EPSILON_0, (double)QELEM);
  for (;;) {
    for (int i = 0; i < 22; ++i) if (scanf("%lf", &v[i]) != 1) return 0;
    ElementStub e;
    e.profile.number_of_particles = v[4]; e.profile._sigma_z = v[5]; e.profile._z0 = v[6];
    e.profile._q_param = 1.0; e.profile._q_tol = v[16]; e.profile._cq_param = v[17];
    e.profile._beta_param = v[18]; e.profile._sqrt_beta_param = v[19];
    e.profile._support_min = v[20]; e.profile._support_max = v[21];
    e.fieldmap.sigma_x = v[7]; e.fieldmap.sigma_y = v[8]; e.fieldmap.mean_x = v[9]; e.fieldmap.mean_y = v[10];
    e.fieldmap.min_sigma_diff = v[11];
    e.length = v[12]; e.z_kick = 0;
    LocalParticle lp; lp.q0 = v[2]; lp.mass0 = v[3]; lp.chi = 1.0; lp.beta0 = v[0]; lp.gamma0 = v[1];
    double dpx, dpy, dpx0, dpy0, ex, ey;
    kick(&e, &lp, v[13], v[14], v[15], &dpx, &dpy);
    kick(&e, &lp, v[13], v[14], v[6], &dpx0, &dpy0);
    BiGaussianFieldMap_get_dphi_dx_dphi_dy(&e.fieldmap, v[13], v[14], &ex, &ey);
    const double kx = -ex * 2.0 * PI * EPSILON_0, ky = -ey * 2.0 * PI * EPSILON_0;  /* E of a unit line charge -> K */
    const double lam = LongitudinalProfileQGaussian_line_density_scalar(&e.profile, v[15]);
    const double lam0 = LongitudinalProfileQGaussian_line_density_scalar(&e.profile, v[6]);
    printf("%.17g %.17g %.17g %.17g %.17g %.17g %.17g\n", dpx, dpy, dpx0, dpy0, kx, ky, lam / lam0);
  }
}
"""

FT_HARNESS = r"""
// fusetrack side: SpaceChargeBiGaussian on the same input lines as the xfields harness.
#include <cmath>
#include <cstdio>
#include "space_charge_bigaussian.h"
int main() {
  double v[22];
  for (;;) {
    for (double& a : v) if (std::scanf("%lf", &a) != 1) return 0;
    SpaceChargeBiGaussian e{};
    e.length = v[12]; e.number_of_particles = v[4]; e.sigma_z = v[5]; e.z0 = v[6];
    e.sigma_x = v[7]; e.sigma_y = v[8]; e.mean_x = v[9]; e.mean_y = v[10]; e.min_sigma_diff = v[11];
    ft_reference r{};
    r.beta0 = v[0]; r.gamma0 = v[1]; r.q0 = v[2]; r.mass0 = v[3];
    r.energy0 = r.gamma0 * r.mass0; r.p0c = r.beta0 * r.energy0;
    SpaceChargeBiGaussian_prepare(e, r);
    auto kick = [&](double zeta, double& dpx, double& dpy) {
      ft::ParticleView p = ft::make_particle(v[13], 0.0, v[14], 0.0, zeta, 0.0, r.beta0);
      SpaceChargeBiGaussian_track(e, p);
      dpx = p.px, dpy = p.py;
    };
    double dpx, dpy, dpx0, dpy0, kx, ky;
    kick(v[15], dpx, dpy);
    kick(v[6], dpx0, dpy0);
    SpaceChargeBiGaussian_field(e, v[13] - e.mean_x, v[14] - e.mean_y, kx, ky);
    const double dz = v[15] - e.z0;
    const double profile = ft_exp(-(dz * dz) * e.half_inv_sz2);  // lambda(zeta) / lambda(z0) as the kick uses it
    std::printf("%.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %d\n", dpx, dpy, dpx0, dpy0, kx, ky, profile,
                e.kick_factor, e.mode);
  }
}
"""


def sh(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def load_module(name, path, package_dir=None):
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[package_dir] if package_dir else None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def build(args):
    os.makedirs(args.work, exist_ok=True)
    with open(os.path.join(args.work, "xf_sc.c"), "w") as f:
        f.write(XF_HARNESS)
    with open(os.path.join(args.work, "ft_sc.cpp"), "w") as f:
        f.write(FT_HARNESS)
    inc = ["-I", args.xfields, "-I", args.xobjects, "-I", args.xtrack]
    # Serial CPU context: Faddeeva MIT; OpenMP context (also the GPU's choice): Faddeeva CERNLIB.
    sh([args.cc, "-O2", "-std=gnu11", "-DXO_CONTEXT_CPU_SERIAL", *inc, os.path.join(args.work, "xf_sc.c"),
        "-o", os.path.join(args.work, "xf_sc_mit"), "-lm"])
    sh([args.cc, "-O2", "-std=gnu11", "-DXO_CONTEXT_CPU_OPENMP", "-fopenmp", *inc,
        os.path.join(args.work, "xf_sc.c"), "-o", os.path.join(args.work, "xf_sc_cernlib"), "-lm"])
    sh([args.cxx, "-O2", "-std=c++17", "-I", os.path.join(ROOT, "elements"), "-I",
        os.path.join(ROOT, "framework", "device"), "-I", os.path.join(ROOT, "framework", "include"),
        os.path.join(args.work, "ft_sc.cpp"), "-o", os.path.join(args.work, "ft_sc")])


def make_cases(args, qgauss):
    rng = random.Random(args.seed)
    species = [(938.27208816e6, 1.0), (193.6872729e9, 54.0), (0.51099895000e6, -1.0)]
    lines, meta = [], []
    kinds = ["round", "round_within_min_sigma_diff", "near_round", "near_round_large", "flat_x", "flat_y"]
    weights = [0.15, 0.05, 0.2, 0.04, 0.28, 0.28]
    for _ in range(args.cases):
        kind = rng.choices(kinds, weights)[0]
        mass0, q0 = rng.choice(species)
        beta0 = rng.choice([0.1, 0.3, 0.52, 0.875, 0.9995, rng.uniform(0.05, 0.99999)])
        gamma0 = 1.0 / math.sqrt(1.0 - beta0 * beta0)
        sa = 10 ** rng.uniform(-4.5, -1.7)
        if kind == "round":
            sb, rel = sa, 0.0
        elif kind == "round_within_min_sigma_diff":
            sb, rel = sa - rng.uniform(0, 0.9e-10), None
        elif kind == "near_round":
            rel = 10 ** rng.uniform(-7.5, -2.5)
            sb = sa * (1.0 - rel)
        elif kind == "near_round_large":  # |sx - sy| >= min_sigma_diff but < 1e-8 relative (sizes > 1 cm)
            sa = 10 ** rng.uniform(-1.9, -1.3)
            rel = 10 ** rng.uniform(math.log10(1.2e-10 / sa), -8.0)
            sb = sa * (1.0 - rel)
        else:
            sb = sa / (10 ** rng.uniform(0.01, 1.3))
        sx, sy = (sa, sb) if kind != "flat_y" else (sb, sa)
        if kind in ("near_round", "near_round_large", "round_within_min_sigma_diff") and rng.random() < 0.5:
            sx, sy = sy, sx
        n = 10 ** rng.uniform(9, 13)
        sigma_z = 10 ** rng.uniform(-1.3, 1.3)
        z0 = rng.choice([0.0, rng.uniform(-1, 1)])
        length = 10 ** rng.uniform(-1, 2)
        mean_x, mean_y = (0.0, 0.0) if rng.random() < 0.6 else (rng.gauss(0, sx), rng.gauss(0, sy))
        # amplitude in sigma: log-uniform from the core (1e-4) to 10 sigma, a few on an axis
        amp = 10 ** rng.uniform(-4, 1)
        th = rng.uniform(0, 2 * math.pi)
        u = rng.random()
        if u < 0.05:
            th = rng.choice([0, math.pi])
        elif u < 0.1:
            th = rng.choice([0.5 * math.pi, 1.5 * math.pi])
        ax, ay = amp * math.cos(th), amp * math.sin(th)
        if u < 0.1:
            ax, ay = (ax, 0.0) if u < 0.05 else (0.0, ay)
        x = mean_x + ax * sx
        y = mean_y + ay * sy
        zeta = z0 + rng.uniform(-4, 4) * sigma_z
        prof = qgauss.LongitudinalProfileQGaussian(number_of_particles=n, sigma_z=sigma_z, z0=z0)
        vals = [beta0, gamma0, q0, mass0, n, sigma_z, z0, sx, sy, mean_x, mean_y, 1e-10, length, x, y, zeta,
                prof._q_tol, prof._cq_param, prof._beta_param, prof._sqrt_beta_param, prof._support_min,
                prof._support_max]
        lines.append(" ".join(repr(float(v)) for v in vals))
        d = abs(sx - sy)
        r_ = d / max(sx, sy)
        if d == 0.0:
            kind = "round (sx = sy)"
        elif d < 1e-10:
            kind = "|sx-sy| < min_sigma_diff"
        elif r_ < 1e-6:
            kind = "near-round 1e-8..1e-6" if r_ > 1e-8 else "near-round < 1e-8"
        elif r_ < 3e-3:
            kind = "near-round 1e-6..3e-3"
        else:
            kind = "flat x>y" if sx > sy else "flat y>x"
        meta.append(dict(kind=kind, amp=amp, sx=sx, sy=sy, x=x - mean_x, y=y - mean_y, zeta_sig=(zeta - z0) / sigma_z,
                         rel=abs(sx - sy) / max(sx, sy)))
    return lines, meta


def exact_field(x, y, sx, sy):
    """K(x, y) of the unit Gaussian in mpmath (50 digits): Bassetti-Erskine or the round formula."""
    import mpmath as mp
    mp.mp.dps = 60
    x, y, sx, sy = mp.mpf(x), mp.mpf(y), mp.mpf(sx), mp.mpf(sy)
    if sx == sy:
        r2 = x * x + y * y
        if r2 == 0:
            return 0.0, 0.0
        f = (1 - mp.exp(-r2 / (2 * sx * sx))) / r2
        return float(x * f), float(y * f)
    swap = sy > sx
    if swap:
        x, y, sx, sy = y, x, sy, sx
    ax, ay = abs(x), abs(y)
    s = mp.sqrt(2 * (sx * sx - sy * sy))
    w = lambda z: mp.exp(-z * z) * mp.erfc(-1j * z)
    v = mp.sqrt(mp.pi) / s * (w((ax + 1j * ay) / s)
                              - mp.exp(-ax * ax / (2 * sx * sx) - ay * ay / (2 * sy * sy))
                              * w((ax * sy / sx + 1j * ay * sx / sy) / s))
    kx, ky = float(mp.im(v)), float(mp.re(v))
    kx = -kx if x < 0 else (0.0 if x == 0 else kx)
    ky = -ky if y < 0 else (0.0 if y == 0 else ky)
    return (ky, kx) if swap else (kx, ky)


def rel(a, b):
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def frozen(args):
    sys.path.insert(0, args.xobjects)
    qgauss = load_module("xf_qgaussian", os.path.join(args.xfields, "xfields", "longitudinal_profiles", "qgaussian.py"))
    lines, meta = make_cases(args, qgauss)
    inp = "\n".join(lines) + "\n"
    ft = [list(map(float, l.split())) for l in subprocess.run(
        [os.path.join(args.work, "ft_sc")], input=inp, capture_output=True, text=True, check=True).stdout.splitlines()]
    try:
        import mpmath  # noqa: F401
        have_mp = True
    except ImportError:
        have_mp = False
    print(f"\n== 1. Frozen SpaceChargeBiGaussian: {len(lines)} random cases (seed {args.seed}) ==")
    counts = {}
    for m in meta:
        counts[m["kind"]] = counts.get(m["kind"], 0) + 1
    print("cases:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    exact = exact_round = None
    if have_mp:
        # the exact field of the Gaussian with the case's sizes, and of the round beam of the mean size (the
        # model both codes apply below min_sigma_diff, and fusetrack also below 1e-8 relative)
        exact = [exact_field(m["x"], m["y"], m["sx"], m["sy"]) for m in meta]
        exact_round = [exact_field(m["x"], m["y"], 0.5 * (m["sx"] + m["sy"]), 0.5 * (m["sx"] + m["sy"])) for m in meta]
        model = max(math.hypot(a[0] - b[0], a[1] - b[1]) / math.hypot(*a) for a, b, m in zip(exact, exact_round, meta)
                    if m["sx"] != m["sy"] and abs(m["sx"] - m["sy"]) < 1e-10)
        print(f"round model below min_sigma_diff = 1e-10 m (both codes): at most {model:.2e} from the exact field "
              f"(not counted below: each code is checked against the exact field of the model it applies)")
    else:
        print("(mpmath not installed: no exact reference)")
    for variant in ("mit", "cernlib"):
        out = subprocess.run([os.path.join(args.work, "xf_sc_" + variant)], input=inp, capture_output=True, text=True,
                             check=True).stdout.splitlines()
        consts = out[0].split()
        eps0, qelem = float(consts[2]), float(consts[4])
        xf = [list(map(float, l.split())) for l in out[1:]]
        # physical constants: xfields' kick goes as QELEM / EPSILON_0, fusetrack's as e / eps0 (SI 2019 / CODATA 2018)
        const_ratio = (qelem / eps0) / (1.602176634e-19 / 8.8541878128e-12)
        print(f"\n-- xfields with Faddeeva {variant.upper()} (xfields' EPSILON_0 = {eps0:.13g}, QELEM = {qelem:.9g}: its "
              f"kicks are {const_ratio:.12f} x fusetrack's (e, eps0 of SI 2019 / CODATA 2018), {const_ratio - 1:+.3e}) --")
        worst = {}

        def upd(key, val, i):
            if val > worst.get(key, (-1.0, -1))[0]:
                worst[key] = (val, i)

        by_kind = {}
        by_amp = {}
        axis_noise = [0, 0.0]  # cases where one code gives an exact 0 (particle on an axis) and the other not
        for i, (a, b, m) in enumerate(zip(xf, ft, meta)):
            dpx_x, dpy_x, dpx0_x, dpy0_x, kx_x, ky_x, prof_x = a
            dpx_f, dpy_f, dpx0_f, dpy0_f, kx_f, ky_f, prof_f, kf, mode = b
            dp = math.hypot(dpx_f, dpy_f)
            upd("|dp - dp'| / |dp|", math.hypot(dpx_x - dpx_f, dpy_x - dpy_f) / dp, i)
            upd("|dp - dp'| / |dp|, constants aligned",
                math.hypot(dpx_x / const_ratio - dpx_f, dpy_x / const_ratio - dpy_f) / dp, i)
            for name, va, vb in (("dpx", dpx_x, dpx_f), ("dpy", dpy_x, dpy_f)):
                if (va == 0.0) != (vb == 0.0):
                    axis_noise[0] += 1
                    axis_noise[1] = max(axis_noise[1], max(abs(va), abs(vb)) / dp)
                    continue
                upd(name + ", constants aligned", rel(va / const_ratio, vb), i)
            kmag = math.hypot(kx_f, ky_f)
            dk = math.hypot(kx_x - kx_f, ky_x - ky_f) / kmag
            upd("field |K - K'| / |K|", dk, i)
            upd("profile lambda(zeta) / lambda(z0)", rel(prof_x, prof_f), i)
            if kx_x != 0.0 and kx_f != 0.0:
                upd("strength at z0 (dpx(z0) / Kx), const. aligned", rel(dpx0_x / kx_x / const_ratio, dpx0_f / kx_f), i)
            k = by_kind.setdefault(m["kind"], {"n": 0, "dk": (0.0, -1), "exf": (0.0, -1), "eft": (0.0, -1)})
            k["n"] += 1
            if dk > k["dk"][0]:
                k["dk"] = (dk, i)
            if exact is not None:
                xf_round = abs(m["sx"] - m["sy"]) < 1e-10
                ex, ey = exact_round[i] if xf_round else exact[i]
                exf = math.hypot(kx_x - ex, ky_x - ey) / math.hypot(ex, ey)
                ex, ey = exact_round[i] if mode == 0 else exact[i]
                eft = math.hypot(kx_f - ex, ky_f - ey) / math.hypot(ex, ey)
                if mode == 0 and not xf_round:
                    k["ft_round_xf_be"] = k.get("ft_round_xf_be", 0) + 1
                    a_, b_ = exact[i], exact_round[i]
                    k["model"] = max(k.get("model", 0.0), math.hypot(a_[0] - b_[0], a_[1] - b_[1]) / math.hypot(*a_))
                band = "core < 0.01 sigma" if m["amp"] < 0.01 else ("0.01 .. 1 sigma" if m["amp"] < 1 else "1 .. 10 sigma")
                b_ = by_amp.setdefault(band, [0, 0.0, 0.0, 0.0])
                b_[0] += 1
                b_[1] = max(b_[1], dk)
                b_[2] = max(b_[2], exf)
                b_[3] = max(b_[3], eft)
                if exf > k["exf"][0]:
                    k["exf"] = (exf, i)
                if eft > k["eft"][0]:
                    k["eft"] = (eft, i)

        def where(i):
            m = meta[i]
            return (f"{m['kind']}, sx={m['sx']:.4g} sy={m['sy']:.4g} (|sx-sy|/max {m['rel']:.2g}), amp {m['amp']:.3g} sigma, "
                    f"(x,y)-mean=({m['x']:.3g},{m['y']:.3g}), (zeta-z0)/sigma_z={m['zeta_sig']:.2f}")

        print(f"{'quantity':48s} {'max rel diff':>12s}  where")
        for key, (val, i) in worst.items():
            print(f"{key:48s} {val:12.3e}  {where(i)}")
        print(f"particle on an axis, one code exactly 0 and the other not: {axis_noise[0]} components, at most "
              f"{axis_noise[1]:.1e} of |dp|")
        if exact is not None:
            print("field by beam kind: max |K_xf - K_ft| / |K|, and each code's max error |K - K_exact| / |K_exact| (mpmath):")
            print(f"   {'kind':28s} {'cases':>5s} {'xf - ft':>9s} {'xfields err':>11s} {'fusetrack err':>13s}   "
                  f"(xfields worst at / fusetrack worst at)")
            for kind, k in sorted(by_kind.items()):
                mx, mf = meta[k["exf"][1]], meta[k["eft"][1]]
                print(f"   {kind:28s} {k['n']:5d} {k['dk'][0]:9.2e} {k['exf'][0]:11.2e} {k['eft'][0]:13.2e}   "
                      f"(amp {mx['amp']:.2g}, size diff {mx['rel']:.1g} / amp {mf['amp']:.2g}, size diff {mf['rel']:.1g})"
                      + (f"; {k['ft_round_xf_be']} cases round in fusetrack (< 1e-8 rel.), B-E in xfields; "
                         f"fusetrack's round model is at most {k['model']:.1e} from the exact field there"
                         if k.get("ft_round_xf_be") else ""))
            print("field by particle amplitude (all beams):")
            for band, (n_, d_, a_, b_) in sorted(by_amp.items()):
                print(f"   {band:28s} {n_:5d} {d_:9.2e} {a_:11.2e} {b_:13.2e}")


def gaussian_rho(X, Y, sx, sy):
    import numpy as np
    return np.exp(-X * X / (2 * sx * sx) - Y * Y / (2 * sy * sy)) / (2 * np.pi * sx * sy)


def pic(args):
    import numpy as np
    from scipy.special import wofz
    sys.path.insert(0, args.xobjects)
    import xobjects as xo
    solvers = load_module("xf_solvers", os.path.join(args.xfields, "xfields", "solvers", "__init__.py"),
                          os.path.join(args.xfields, "xfields", "solvers"))
    ctx = xo.ContextCpu()
    eps0 = 8.8541878128e-12
    print("\n== 2. PIC Poisson solver (2D open boundary) against the Bassetti-Erskine field ==")
    print("charge: a Gaussian beam of unit line charge [C/m] sampled at the nodes (rho = profile [1/m^2]);")
    print("xfields: FFTSolver2p5D (nz = 1; its FFTSolver2D is an empty stub) -> phi, E = -central differences")
    print("  of phi (its TriLinearInterpolatedFieldMap.update_phi; edge nodes skipped); fusetrack: PoissonSolver")
    print("  Open2D -> E at the nodes. Error: max |E - E_BE| / max |E_BE| over the nodes within 3 sigma and over")
    print("  all interior nodes; the grid spans +-L sigma with n nodes per side.")
    ft_bin = os.path.join(args.work, "ft_poisson")
    with open(os.path.join(args.work, "ft_poisson.cpp"), "w") as f:
        f.write(FT_POISSON)
    sh([args.cxx, "-O2", "-std=c++17", "-I", os.path.join(ROOT, "framework", "include"),
        os.path.join(args.work, "ft_poisson.cpp"), "-o", ft_bin, "-L", os.path.join(args.build, "lib"),
        "-Wl,-rpath," + os.path.abspath(os.path.join(args.build, "lib")), "-lfusetrack"])

    def be_field(X, Y, sx, sy):
        if sx == sy:
            r2 = X * X + Y * Y
            with np.errstate(invalid="ignore", divide="ignore"):
                f = np.where(r2 > 0, -np.expm1(-r2 / (2 * sx * sx)) / r2, 1 / (2 * sx * sx))
            return X * f / (2 * np.pi * eps0), Y * f / (2 * np.pi * eps0)
        swap = sy > sx
        if swap:
            X, Y, sx, sy = Y, X, sy, sx
        ax, ay = np.abs(X), np.abs(Y)
        s = np.sqrt(2 * (sx * sx - sy * sy))
        v = np.sqrt(np.pi) / s * (wofz((ax + 1j * ay) / s) - np.exp(-ax * ax / (2 * sx * sx) - ay * ay / (2 * sy * sy))
                                  * wofz((ax * sy / sx + 1j * ay * sx / sy) / s))
        kx, ky = np.sign(X) * v.imag, np.sign(Y) * v.real
        if swap:
            kx, ky = ky, kx
        return kx / (2 * np.pi * eps0), ky / (2 * np.pi * eps0)

    print(f"{'beam':10s} {'n':>4s} {'L':>3s} | {'xfields <3sig':>13s} {'all':>9s} | {'ft Fast <3sig':>13s} {'all':>9s} | "
          f"{'ft Repro <3sig':>14s} {'all':>9s} | {'xf - ft Fast':>12s}")
    for (sx, sy, label) in ((1e-3, 1e-3, "round"), (2e-3, 1e-3, "flat 2:1"), (1e-3, 3e-3, "tall 1:3")):
        for half in (6.0,):
            for n in (32, 64, 128, 256):
                xs = np.linspace(-half * sx, half * sx, n)
                ys = np.linspace(-half * sy, half * sy, n)
                dx, dy = xs[1] - xs[0], ys[1] - ys[0]
                X, Y = np.meshgrid(xs, ys, indexing="ij")
                rho = gaussian_rho(X, Y, sx, sy)
                # xfields
                solver = solvers.FFTSolver2p5D(dx=dx, dy=dy, dz=1.0, nx=n, ny=n, nz=1, context=ctx)
                phi = np.array(solver.solve(rho[:, :, None]))[:, :, 0]
                ex_x = np.zeros_like(phi)
                ey_x = np.zeros_like(phi)
                ex_x[1:-1, :] = -(phi[2:, :] - phi[:-2, :]) / (2 * dx)
                ey_x[:, 1:-1] = -(phi[:, 2:] - phi[:, :-2]) / (2 * dy)
                # fusetrack (node index iy * nx + ix)
                inp = f"{n} {n} {xs[0]!r} {xs[-1]!r} {ys[0]!r} {ys[-1]!r}\n" + " ".join(
                    repr(float(v)) for v in rho.T.ravel()) + "\n"
                res = {}
                for mode in ("fast", "reproducible"):
                    out = subprocess.run([ft_bin, mode], input=inp, capture_output=True, text=True, check=True).stdout
                    arr = np.array(out.split(), dtype=float).reshape(2, n, n)  # [component][iy][ix]
                    res[mode] = (arr[0].T, arr[1].T)
                ex_a, ey_a = be_field(X, Y, sx, sy)
                emax = np.max(np.hypot(ex_a, ey_a))
                inner = (slice(1, -1), slice(1, -1))
                core = (X / sx) ** 2 + (Y / sy) ** 2 < 9.0

                def err(ex, ey, mask):
                    e = np.hypot(ex - ex_a, ey - ey_a)[inner][mask[inner]]
                    return e.max() / emax

                allm = np.ones_like(core)
                xe = (err(ex_x, ey_x, core), err(ex_x, ey_x, allm))
                fe = (err(*res["fast"], core), err(*res["fast"], allm))
                re_ = (err(*res["reproducible"], core), err(*res["reproducible"], allm))
                dxf = np.max(np.hypot(ex_x - res["fast"][0], ey_x - res["fast"][1])[inner]) / emax
                print(f"{label:10s} {n:4d} {half:3.0f} | {xe[0]:13.3e} {xe[1]:9.3e} | {fe[0]:13.3e} {fe[1]:9.3e} | "
                      f"{re_[0]:14.3e} {re_[1]:9.3e} | {dxf:12.3e}")


FT_POISSON = r"""
// fusetrack side of the PIC comparison: PoissonSolver Open2D on a grid and density read from stdin.
#include <cstdio>
#include <cstring>
#include <vector>
#include "fusetrack/poisson.h"
int main(int argc, char** argv) {
  int nx, ny;
  double x0, x1, y0, y1;
  if (std::scanf("%d %d %lf %lf %lf %lf", &nx, &ny, &x0, &x1, &y0, &y1) != 6) return 1;
  std::vector<double> rho(static_cast<size_t>(nx) * ny), ex(rho.size()), ey(rho.size());
  for (double& r : rho) if (std::scanf("%lf", &r) != 1) return 1;
  ft::PoissonGrid g;
  g.dims = 2;
  g.nodes = {nx, ny, 1};
  g.min = {x0, y0, 0.0};
  g.max = {x1, y1, 0.0};
  const bool repro = argc > 1 && std::strcmp(argv[1], "reproducible") == 0;
  ft::PoissonSolver s(g, ft::PoissonModel::Open2D, repro ? ft::PoissonFft::Reproducible : ft::PoissonFft::Fast);
  s.solve(rho.data(), ex.data(), ey.data(), nullptr);
  for (double v : ex) std::printf("%.17g\n", v);
  for (double v : ey) std::printf("%.17g\n", v);
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--xfields", required=True, help="root of an xfields checkout (holds xfields/)")
    ap.add_argument("--xobjects", required=True, help="root of an xobjects checkout (holds xobjects/)")
    ap.add_argument("--xtrack", required=True, help="root of an xtrack checkout (holds xtrack/headers/)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="fusetrack build folder (lib/libfusetrack.so)")
    ap.add_argument("--work", default=os.path.join(ROOT, ".peers", "xfields_space_charge"),
                    help="folder for the generated harnesses and binaries (keep it git-ignored)")
    ap.add_argument("--cases", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--skip-pic", action="store_true")
    args = ap.parse_args()
    for a in ("xfields", "xobjects", "xtrack", "work", "build"):
        setattr(args, a, os.path.abspath(getattr(args, a)))
    build(args)
    frozen(args)
    if not args.skip_pic:
        pic(args)


if __name__ == "__main__":
    main()
