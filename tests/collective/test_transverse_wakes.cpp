// The transverse wake library (fusetrack/transverse_wakes.h) against independent results: resonator
// wakes against the numerical inverse Fourier transform of their impedances; the resistive wall's
// slice kernels against the numerical Fourier integral of the impedance; PyHEADTAIL and Xsuite tables
// (units, columns, bad tables); the sum of sources; the slice convolution against a sum over
// particles; the multi-turn, multi-bunch memory against one long convolution of the history.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "fusetrack/error.h"
#include "fusetrack/transverse_wakes.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_transverse_wakes.
namespace test_transverse_wakes {

using namespace ft::wakes;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Gauss-Legendre, 10 points on [a, b].
template <class F>
auto gl10(F f, double a, double b) -> decltype(f(a)) {
  static const double x[5] = {0.1488743389816312, 0.4333953941292472, 0.6794095682990244, 0.8650633666889845,
                              0.9739065285171717};
  static const double w[5] = {0.2955242247147529, 0.2692667193099963, 0.2190863625159820, 0.1494513471688061,
                              0.0666713443086881};
  const double m = 0.5 * (a + b), h = 0.5 * (b - a);
  decltype(f(a)) sum = f(m) * 0.0;
  for (int i = 0; i < 5; ++i) sum += w[i] * (f(m - h * x[i]) + f(m + h * x[i]));
  return sum * h;
}

// W(t) = integral F(f) e^{2 pi i f t} df = 2 Re integral_0^inf F(f) e^{2 pi i f t} df, with F = Z
// (longitudinal) or F = -i Z (transverse), integrated on panels up to f_max.
double inverse_fourier(const WakeSource& s, Component c, double t, double f_max, int panels) {
  const double h = f_max / panels;
  auto g = [&](double f) {
    const Complex z = s.impedance(c, f);
    const Complex big_f = is_transverse(c) ? Complex(0.0, -1.0) * z : z;
    return (big_f * std::exp(Complex(0.0, 2.0 * kPi * f * t))).real();
  };
  double sum = 0.0;
  for (int k = 0; k < panels; ++k) sum += gl10(g, k * h, (k + 1) * h);
  return 2.0 * sum;
}

// The longitudinal resonator's tail beyond f_max: Z ~ -i R f_r / (Q f), whose part of W is
// 2 (R f_r / Q) integral_{f_max}^inf sin(2 pi f t) / f df = 2 (R f_r / Q) (pi/2 - Si(x)), x = 2 pi f_max t,
// with pi/2 - Si(x) = cos x / x + sin x / x^2 - 2 cos x / x^3 + O(x^-4).
double resonator_long_tail(double r, double f_r, double q, double t, double f_max) {
  const double x = 2.0 * kPi * f_max * t;
  return 2.0 * r * f_r / q * (std::cos(x) / x + std::sin(x) / (x * x) - 2.0 * std::cos(x) / (x * x * x));
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(FT_BUILD_DIR) + "/test_transverse_wakes_" + name;
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("transverse wakes: resonator wakes equal the inverse Fourier transform of their impedances") {
  const double f_r = 1e9;
  for (double q : {0.8, 5.0}) {
    const Resonator res(2e6, f_r, q, ComponentFactors{{1.0, 1.0, 1.0, -0.5, 0.5}});
    double worst_perp = 0.0, worst_long = 0.0, peak_perp = 0.0, peak_long = 0.0;
    for (double t : {0.05e-9, 0.13e-9, 0.4e-9, 1.1e-9, 2.7e-9}) {
      const double w_perp = res.wake(Component::dipolar_x, t);
      const double n_perp = inverse_fourier(res, Component::dipolar_x, t, 400 * f_r, 40000);
      const double w_long = res.wake(Component::longitudinal, t);
      const double n_long = inverse_fourier(res, Component::longitudinal, t, 400 * f_r, 40000) +
                            resonator_long_tail(2e6, f_r, q, t, 400 * f_r);
      worst_perp = std::max(worst_perp, std::fabs(w_perp - n_perp));
      worst_long = std::max(worst_long, std::fabs(w_long - n_long));
      peak_perp = std::max(peak_perp, std::fabs(w_perp));
      peak_long = std::max(peak_long, std::fabs(w_long));
      // the quadrupolar components carry their factors
      CHECK(res.wake(Component::quadrupolar_x, t) == doctest::Approx(-0.5 * w_perp).epsilon(1e-14));
    }
    MESSAGE("Q = " << q << ": max |W - IFT(Z)| / max|W|: dipolar " << worst_perp / peak_perp << ", longitudinal "
                   << worst_long / peak_long);
    CHECK(worst_perp < 1e-4 * peak_perp);
    CHECK(worst_long < 1e-4 * peak_long);
    // sign convention: W_dip > 0 just behind the source, Re Z_perp(f_r) = R_perp
    CHECK(res.wake(Component::dipolar_x, 1e-12) > 0.0);
    CHECK(res.impedance(Component::dipolar_x, f_r).real() == doctest::Approx(2e6).epsilon(1e-12));
    CHECK(std::fabs(res.impedance(Component::dipolar_x, f_r).imag()) < 1e-6);
    CHECK(res.impedance(Component::longitudinal, f_r).real() == doctest::Approx(2e6).epsilon(1e-12));
    // transverse Z(-f) = -conj Z(f)
    const Complex zp = res.impedance(Component::dipolar_y, 0.37e9), zm = res.impedance(Component::dipolar_y, -0.37e9);
    CHECK(std::abs(zm + std::conj(zp)) < 1e-9 * std::abs(zp));
    // the jump of the longitudinal wake at 0: the half value
    CHECK(res.wake(Component::longitudinal, 0.0) == doctest::Approx(0.5 * res.wake(Component::longitudinal, 1e-30)));
  }
}

TEST_CASE("transverse wakes: resistive-wall kernels against the numerical Fourier integral of the impedance") {
  // Copper-like pipe: b = 2 cm, L = 100 m, sigma = 5.9e7 S/m. The slice kernel K(t) = integral (1 - |u|)
  // W(t + u dt) du is W convolved with the triangle of half-width dt, so its Fourier integral is
  // F(f) sinc^2(pi f dt) with F = -i Z_perp (transverse) or Z_long (longitudinal).
  const ResistiveWall rw(0.02, 100.0, 5.9e7, ComponentFactors{{1.0, 1.0, 1.0, 0.0, 0.0}});
  for (double f : {1e6, 2.3e7}) {
    const double dt = 0.05 / f;
    const double t_end = 200.0 / f;
    for (Component c : {Component::dipolar_x, Component::longitudinal}) {
      auto integrand = [&](double t) { return rw.kernel(c, t, dt) * std::exp(Complex(0.0, -2.0 * kPi * f * t)); };
      Complex sum(0.0, 0.0);
      // fine panels around the kinks at -dt, 0, dt, then panels of dt / 4
      for (int side = -1; side <= 1; ++side)
        for (int k = 0; k < 400; ++k) {
          const double a = side * dt + (k - 200) * dt / 400.0;
          sum += gl10(integrand, a, a + dt / 400.0);
        }
      for (double a = 1.5 * dt; a < t_end - 1e-3 * dt; a += dt / 4) sum += gl10(integrand, a, a + dt / 4);
      // the tail beyond t_end, by parts: integral_T^inf g e^{-i w t} = e^{-i w T} (g / (i w) + g' / (i w)^2 + ...)
      const double w = 2.0 * kPi * f, gt = rw.wake(c, t_end);
      const double dg = (c == Component::longitudinal ? -1.5 : -0.5) * gt / t_end;
      const Complex iw(0.0, w);
      sum += std::exp(Complex(0.0, -w * t_end)) * (gt / iw + dg / (iw * iw));
      const double sinc = std::sin(kPi * f * dt) / (kPi * f * dt);
      const Complex z = rw.impedance(c, f);
      const Complex expected = (c == Component::longitudinal ? z : Complex(0.0, -1.0) * z) * sinc * sinc;
      MESSAGE(std::string(component_name(c)) << " f = " << f << " Hz: numerical " << sum << ", from Z " << expected);
      CHECK(std::abs(sum - expected) < 2e-4 * std::abs(expected));
    }
  }
  // the thick-wall relation Z_perp = 2 c Z_long / (b^2 omega) and the values of one formula by hand
  const double f = 1e6, c = 299792458.0, mu0 = 1.25663706212e-6;
  const double delta = std::sqrt(2.0 / (mu0 * 5.9e7 * 2.0 * kPi * f));
  const Complex z_perp = rw.impedance(Component::dipolar_y, f);
  CHECK(z_perp.real() == doctest::Approx(c * 100.0 / (kPi * std::pow(0.02, 3) * 2.0 * kPi * f * 5.9e7 * delta)));
  CHECK(z_perp.imag() == doctest::Approx(z_perp.real()));
  CHECK(rw.impedance(Component::dipolar_y, -f).real() == doctest::Approx(-z_perp.real()));
  // the kernel sums to Z(0) = 0 longitudinally (telescoping second differences)
  double sum = 0.0;
  for (int k = -1; k < 100000; ++k) sum += rw.kernel(Component::longitudinal, k * 1e-9, 1e-9);
  CHECK(std::fabs(sum) < 1e-2 * rw.kernel(Component::longitudinal, 0.0, 1e-9));
  // bad input: the pipe radius
  CHECK(contains(error_of([] { ResistiveWall(0.0, 1.0, 1e7); }), "radius must be > 0"));
  CHECK(contains(error_of([] { ResistiveWall(0.01, 1.0, -1.0); }), "conductivity"));
}

TEST_CASE("transverse wakes: PyHEADTAIL and Xsuite tables, units and columns") {
  // PyHEADTAIL: time [ns], dipole_x, dipole_y, quadrupole_x [V/pC/mm], longitudinal [V/pC], a cross term
  const std::string ht = write_file("ht.dat",
                                    "# HEADTAIL table\n"
                                    "0.0  1.0  2.0  -0.5  3.0  9.0\n"
                                    "0.5  0.8  1.5  -0.4  2.0  9.0\n"
                                    "\n"
                                    "1.5  0.2  0.5  -0.1  1.0  9.0\n");
  const WakeTable t = read_pyheadtail_table(
      ht, {"time", "dipole_x", "dipolar_y", "quadrupole_x", "longitudinal", "dipole_xy"});
  REQUIRE(t.time().size() == 3);
  CHECK(t.time()[2] == doctest::Approx(1.5e-9));
  CHECK(t.column(Component::dipolar_x)[1] == doctest::Approx(0.8e15));
  CHECK(t.column(Component::longitudinal)[0] == doctest::Approx(3.0e12));
  CHECK(!t.has(Component::quadrupolar_y));
  CHECK(t.ignored_columns == std::vector<std::string>{"dipole_xy"});
  // linear between rows, half value at the first time, zero beyond the table
  CHECK(t.wake(Component::dipolar_x, 1.0e-9) == doctest::Approx(0.5e15));
  CHECK(t.wake(Component::dipolar_x, 0.0) == doctest::Approx(0.5e15));
  CHECK(t.wake(Component::dipolar_x, 2e-9) == 0.0);
  // Z of the table: the exact Fourier integral of the linear pieces, against quadrature
  const double f = 3.1e8;
  auto integrand = [&](double tt) {
    return t.wake(Component::dipolar_y, tt) * std::exp(Complex(0.0, -2.0 * kPi * f * tt));
  };
  Complex num(0.0, 0.0);
  for (int k = 0; k < 150; ++k) num += gl10(integrand, k * 1e-11, (k + 1) * 1e-11);
  CHECK(std::abs(Complex(0.0, 1.0) * num - t.impedance(Component::dipolar_y, f)) < 1e-8 * std::abs(num));

  // Xsuite: a pandas CSV (index column, header of names), SI units
  const std::string xs = write_file("xs.csv",
                                    ",time,dipolar_x,quadrupolar_y,longitudinal\n"
                                    "0,0.0,1e15,2e14,3e12\n"
                                    "1,1e-9,5e14,1e14,1e12\n");
  const WakeTable x = read_xsuite_table(xs);
  CHECK(x.time()[1] == 1e-9);
  CHECK(x.column(Component::quadrupolar_y)[0] == 2e14);
  CHECK(x.wake(Component::dipolar_x, 0.5e-9) == doctest::Approx(7.5e14));
  CHECK(!x.has(Component::dipolar_y));
}

TEST_CASE("transverse wakes: bad tables give errors naming the file, line and column") {
  const std::vector<std::string> cols{"time", "dipole_x", "dipole_y"};
  const std::string dec = write_file("dec.dat", "0 1 1\n1 1 1\n0.5 1 1\n");
  std::string e = error_of([&] { read_pyheadtail_table(dec, cols); });
  CHECK(contains(e, dec));
  CHECK(contains(e, "line 3, column 1 ('time')"));
  CHECK(contains(e, "does not increase"));

  const std::string missing = write_file("missing.dat", "0 1 1\n1 1\n");
  e = error_of([&] { read_pyheadtail_table(missing, cols); });
  CHECK(contains(e, missing));
  CHECK(contains(e, "line 2: 2 values, expected 3"));

  const std::string nan = write_file("nan.dat", "0 1 1\n1 abc 1\n");
  e = error_of([&] { read_pyheadtail_table(nan, cols); });
  CHECK(contains(e, "line 2, column 2 ('dipole_x'): 'abc' is not a finite number"));

  const std::string neg = write_file("neg.dat", "-1 1 1\n1 1 1\n");
  CHECK(contains(error_of([&] { read_pyheadtail_table(neg, cols); }), "negative"));

  e = error_of([&] { read_pyheadtail_table(dec, {"time", "dipole_x", "dipole_z"}); });
  CHECK(contains(e, "unknown column name 'dipole_z' (column 3)"));
  CHECK(contains(e, "valid names"));

  CHECK(contains(error_of([&] { read_pyheadtail_table(dec, {"time", "dipole_x", "dipolar_x"}); }),
                 "columns 2 ('dipole_x') and 3 ('dipolar_x') are the same component"));

  const std::string no_time = write_file("no_time.csv", "dipolar_x,dipolar_y\n1,2\n3,4\n");
  CHECK(contains(error_of([&] { read_xsuite_table(no_time); }), "no 'time' column"));

  const std::string one_row = write_file("one_row.csv", "time,dipolar_x\n0,1\n");
  CHECK(contains(error_of([&] { read_xsuite_table(one_row); }), "at least 2"));

  CHECK(contains(error_of([&] { read_xsuite_table(std::string(FT_BUILD_DIR) + "/no_such_table.csv"); }),
                 "cannot open"));
}

TEST_CASE("transverse wakes: several sources summed") {
  auto res = std::make_shared<Resonator>(1e6, 1e9, 1.0);
  auto rw = std::make_shared<ResistiveWall>(0.03, 50.0, 1e7, ComponentFactors::flat_chamber());
  auto tab = std::make_shared<WakeTable>(
      std::vector<double>{0.0, 1e-9, 3e-9},
      std::array<std::vector<double>, kComponents>{{{}, {1e14, 2e14, 0.0}, {}, {}, {3e13, 1e13, 0.0}}});
  const WakeSum sum({res, rw, tab});
  for (Component c : {Component::dipolar_x, Component::dipolar_y, Component::quadrupolar_x, Component::quadrupolar_y}) {
    for (double t : {0.3e-9, 2e-9, 7e-9}) {
      CHECK(sum.wake(c, t) == doctest::Approx(res->wake(c, t) + rw->wake(c, t) + tab->wake(c, t)));
      CHECK(sum.kernel(c, t, 1e-10) ==
            doctest::Approx(res->kernel(c, t, 1e-10) + rw->kernel(c, t, 1e-10) + tab->kernel(c, t, 1e-10)));
    }
    const Complex z = sum.impedance(c, 2e8);
    const Complex parts = res->impedance(c, 2e8) + rw->impedance(c, 2e8) + tab->impedance(c, 2e8);
    CHECK(std::abs(z - parts) <= 1e-12 * std::abs(parts));
  }
  // Yokoya factors of the flat chamber
  CHECK(rw->wake(Component::dipolar_y, 1e-9) == doctest::Approx(2.0 * rw->wake(Component::dipolar_x, 1e-9)));
  CHECK(rw->wake(Component::quadrupolar_x, 1e-9) == doctest::Approx(-rw->wake(Component::dipolar_x, 1e-9)));
  CHECK(sum.has(Component::quadrupolar_y));
  CHECK(!sum.has(Component::longitudinal));
}

TEST_CASE("transverse wakes: the slice convolution equals the sum over particles") {
  // Particles in n slices of dt; each particle sits at its slice's centre time (nearest deposit).
  const int n = 40;
  const double dt = 2e-11, qe = 1.602176634e-19, n_real_per_macro = 1e8;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<int> slice;
  std::vector<double> px_x, px_y;
  for (int p = 0; p < 4000; ++p) {
    const double t = 0.4e-9 + 0.12e-9 * gauss(rng);
    const int i = static_cast<int>(std::floor(t / dt));
    if (i < 0 || i >= n) continue;
    slice.push_back(i);
    px_x.push_back(1e-3 * gauss(rng) + 2e-4 * std::sin(i * 0.3));
    px_y.push_back(1e-3 * gauss(rng));
  }
  SliceMoments m;
  m.charge.assign(n, 0.0);
  m.x.assign(n, 0.0);
  m.y.assign(n, 0.0);
  const double q = qe * n_real_per_macro;
  for (size_t p = 0; p < slice.size(); ++p) {
    m.charge[slice[p]] += q;
    m.x[slice[p]] += q * px_x[p];
    m.y[slice[p]] += q * px_y[p];
  }
  for (int i = 0; i < n; ++i)
    if (m.charge[i] > 0) {
      m.x[i] /= m.charge[i];
      m.y[i] /= m.charge[i];
    }
  const Resonator res(5e6, 2e9, 3.0, ComponentFactors{{1.0, 1.0, 1.0, -0.3, 0.3}});
  const SliceKicks k = convolve(sample_wake(res, dt, n), m);
  double worst = 0.0, scale = 0.0;
  for (int i = 0; i < n; ++i) {
    double dx = 0, dy = 0, gx = 0, gy = 0, v = 0;
    for (size_t p = 0; p < slice.size(); ++p) {
      const double delay = (i - slice[p]) * dt;
      dx += q * px_x[p] * res.wake(Component::dipolar_x, delay);
      dy += q * px_y[p] * res.wake(Component::dipolar_y, delay);
      gx += q * res.wake(Component::quadrupolar_x, delay);
      gy += q * res.wake(Component::quadrupolar_y, delay);
      v -= q * res.wake(Component::longitudinal, delay);
    }
    worst = std::max({worst, std::fabs(k.dipolar_x[i] - dx), std::fabs(k.dipolar_y[i] - dy)});
    scale = std::max({scale, std::fabs(dx), std::fabs(dy)});
    CHECK(k.quadrupolar_x[i] == doctest::Approx(gx).epsilon(1e-11));
    CHECK(k.quadrupolar_y[i] == doctest::Approx(gy).epsilon(1e-11));
    CHECK(k.longitudinal[i] == doctest::Approx(v).epsilon(1e-11));
  }
  CHECK(worst < 1e-11 * scale);
  // the same through add_slice_kicks (kernel at delays (i - j) dt computed on the fly): bitwise equal
  SliceKicks k2;
  add_slice_kicks(res, dt, m, 0.0, k2);
  CHECK(k2.dipolar_x == k.dipolar_x);
  CHECK(k2.longitudinal == k.longitudinal);
  // the head feels only its own slice (half value of a jump: 0 for the continuous transverse wake)
  CHECK(k.dipolar_x[0] == 0.0);
}

TEST_CASE("transverse wakes: multi-turn multi-bunch memory equals one long convolution of the history") {
  // T0 = M dt; two bunches of n slices at offsets 0 and B dt; a resonator whose wake lasts several turns.
  const int n = 16, M = 100, B = 40;
  const double dt = 1e-9, t0 = M * dt;
  auto res = std::make_shared<Resonator>(1e6, 0.0731e9, 30.0);  // 1/alpha = 131 ns: ~ 1.3 turns
  // and the sum of that resonator with a resistive wall (singular kernel, power-law memory)
  auto with_wall = std::make_shared<WakeSum>(std::vector<std::shared_ptr<const WakeSource>>{
      res, std::make_shared<ResistiveWall>(0.02, 100.0, 1.4e6, ComponentFactors::round_chamber(true))});
  const int turns = 5;
  for (int memory : {3, 10, -10}) {
    const std::shared_ptr<const WakeSource> source = memory > 0 ? std::shared_ptr<const WakeSource>(res) : with_wall;
    memory = std::abs(memory);
    WakeMemory mem(source, dt, n, t0, memory, {0.0, B * dt});
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    // history on the long grid: turn k, bunch b occupies slices k M + b B .. + n
    const int long_n = turns * M;
    SliceMoments longm;
    longm.charge.assign(long_n, 0.0);
    longm.x.assign(long_n, 0.0);
    longm.y.assign(long_n, 0.0);
    std::vector<SliceMoments> current;
    for (int k = 0; k < turns; ++k) {
      current.assign(2, SliceMoments{});
      for (int b = 0; b < 2; ++b) {
        current[b].charge.resize(n);
        current[b].x.resize(n);
        current[b].y.resize(n);
        for (int i = 0; i < n; ++i) {
          current[b].charge[i] = 1e-9 * u(rng);
          current[b].x[i] = 1e-3 * (u(rng) - 0.5);
          current[b].y[i] = 1e-3 * (u(rng) - 0.5);
          // the turns the memory no longer holds are absent from the reference too
          if (turns - 1 - k <= memory) {
            const int g = k * M + b * B + i;
            longm.charge[g] = current[b].charge[i];
            longm.x[g] = current[b].x[i];
            longm.y[g] = current[b].y[i];
          }
        }
      }
      if (k + 1 < turns) mem.end_turn(current);
    }
    CHECK(mem.stored_turns() == std::min(memory, turns - 1));
    const SliceKicks ref = convolve(sample_wake(*source, dt, long_n), longm);
    double worst = 0.0, scale = 0.0;
    for (int b = 0; b < 2; ++b) {
      const SliceKicks k = mem.kicks(current, b);
      for (int i = 0; i < n; ++i) {
        const int g = (turns - 1) * M + b * B + i;
        worst = std::max({worst, std::fabs(k.dipolar_x[i] - ref.dipolar_x[g]), std::fabs(k.dipolar_y[i] - ref.dipolar_y[g]),
                          std::fabs(k.longitudinal[i] - ref.longitudinal[g]) * 1e-3});
        scale = std::max({scale, std::fabs(ref.dipolar_x[g]), std::fabs(ref.dipolar_y[g])});
      }
    }
    MESSAGE("memory " << memory << " turns" << std::string(source == res ? "" : " (resonator and resistive wall)")
                      << ": max deviation / max kick " << worst / scale);
    CHECK(worst < 1e-10 * scale);
  }
  // a memory of 3 turns on 5 drops the oldest turn: the memory matters (the resonator still rings)
  const double ring = res->wake(Component::dipolar_x, 4 * t0 + 3e-9);
  CHECK(std::fabs(ring) > 1e-3 * res->wake(Component::dipolar_x, 3e-9));
  CHECK(contains(error_of([&] { WakeMemory(res, dt, n, t0, 2, {0.0, 5 * dt}); }), "overlaps"));
}

TEST_CASE("transverse wakes: the stored turns summed ahead (prepare) give the FFT kicks bit for bit") {
  // A GPU backend sums the stored turns while its kernels run (WakeMemory::prepare); the kicks must be the bits
  // of kicks() summing them itself. Every component, three bunches, 7 stored turns over 10; 200 and 5 slices.
  for (int n : {200, 5}) {
    const int M = 4 * n + 50;
    const double dt = 1e-9, t0 = M * dt;
    auto res = std::make_shared<Resonator>(1e6, 0.0731e9, 30.0, ComponentFactors::flat_chamber(true));
    auto wall = std::make_shared<ResistiveWall>(0.02, 100.0, 1.4e6, ComponentFactors::round_chamber(true));
    auto source = std::make_shared<WakeSum>(std::vector<std::shared_ptr<const WakeSource>>{res, wall});
    const std::vector<double> offsets{0.0, (n + 3) * dt, (2 * n + 9) * dt};
    WakeMemory plain(source, dt, n, t0, 7, offsets, Convolution::Fft), ahead(source, dt, n, t0, 7, offsets, Convolution::Fft);
    std::mt19937_64 rng(static_cast<unsigned>(n) + 17);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    size_t compared = 0;
    for (int turn = 0; turn < 10; ++turn) {
      std::vector<SliceMoments> current(3);
      for (SliceMoments& m : current)
        for (int i = 0; i < n; ++i) {
          m.charge.push_back(1e-9 * u(rng));
          m.x.push_back(1e-3 * (u(rng) - 0.5));
          m.y.push_back(1e-3 * (u(rng) - 0.5));
        }
      for (int b = 0; b < 3; ++b) {
        ahead.prepare(b);
        ahead.prepare(b);  // a second call keeps what the first computed
        const SliceKicks p = plain.kicks(current, b), a = ahead.kicks(current, b);
        const std::vector<double>* vp[kComponents] = {&p.longitudinal, &p.dipolar_x, &p.dipolar_y, &p.quadrupolar_x,
                                                      &p.quadrupolar_y};
        const std::vector<double>* va[kComponents] = {&a.longitudinal, &a.dipolar_x, &a.dipolar_y, &a.quadrupolar_x,
                                                      &a.quadrupolar_y};
        for (int c = 0; c < kComponents; ++c) {
          REQUIRE(vp[c]->size() == va[c]->size());
          CHECK(std::memcmp(vp[c]->data(), va[c]->data(), vp[c]->size() * sizeof(double)) == 0);
          compared += vp[c]->size();
        }
      }
      ahead.prepare(0);  // discarded by end_turn: the next turn's kicks see the new stored turn
      plain.end_turn(current);
      ahead.end_turn(current);
    }
    CHECK(compared > 0);
    CHECK(ahead.stored_turns() == 7);
  }
}

TEST_CASE("transverse wakes: the FFT convolution equals the direct sum to rounding, over turns and bunches") {
  // Every component (a flat-chamber resonator with its longitudinal wake, a resistive wall's singular
  // kernel, a table with a jump at t = 0), two bunches, a memory of 6 turns over 9; slice counts whose
  // padded sizes are a power of two, a 2^a 3^b 5^c 7^d size and a single slice.
  for (int n : {1, 37, 64, 200}) {
    const int M = 4 * n + 50;
    const double dt = 1e-9, t0 = M * dt;
    auto res = std::make_shared<Resonator>(1e6, 0.0731e9, 30.0, ComponentFactors::flat_chamber(true));
    auto wall = std::make_shared<ResistiveWall>(0.02, 100.0, 1.4e6, ComponentFactors::round_chamber(true));
    std::array<std::vector<double>, kComponents> columns;
    for (auto& col : columns) col = {2e13, 1e13, 0.0};
    auto table = std::make_shared<WakeTable>(std::vector<double>{0.0, 7e-9, 20e-9}, columns);
    auto source = std::make_shared<WakeSum>(std::vector<std::shared_ptr<const WakeSource>>{res, wall, table});
    const std::vector<double> offsets{0.0, (n + 3) * dt};
    WakeMemory direct(source, dt, n, t0, 6, offsets, Convolution::Direct);
    WakeMemory fft(source, dt, n, t0, 6, offsets, Convolution::Fft);
    CHECK(fft.convolution() == Convolution::Fft);
    std::mt19937_64 rng(static_cast<unsigned>(n));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::array<double, kComponents> worst{}, scale{};
    for (int turn = 0; turn < 9; ++turn) {
      std::vector<SliceMoments> current(2);
      for (SliceMoments& m : current)
        for (int i = 0; i < n; ++i) {
          m.charge.push_back(1e-9 * u(rng));
          m.x.push_back(1e-3 * (u(rng) - 0.5));
          m.y.push_back(1e-3 * (u(rng) - 0.5));
        }
      for (int b = 0; b < 2; ++b) {
        const SliceKicks a = direct.kicks(current, b), f = fft.kicks(current, b);
        const std::vector<double>* va[kComponents] = {&a.longitudinal, &a.dipolar_x, &a.dipolar_y, &a.quadrupolar_x,
                                                      &a.quadrupolar_y};
        const std::vector<double>* vf[kComponents] = {&f.longitudinal, &f.dipolar_x, &f.dipolar_y, &f.quadrupolar_x,
                                                      &f.quadrupolar_y};
        for (int c = 0; c < kComponents; ++c)
          for (int i = 0; i < n; ++i) {
            worst[c] = std::max(worst[c], std::fabs((*va[c])[i] - (*vf[c])[i]));
            scale[c] = std::max(scale[c], std::fabs((*va[c])[i]));
          }
      }
      direct.end_turn(current);
      fft.end_turn(current);
    }
    CHECK(fft.stored_turns() == 6);
    // a stored bunch of the wrong size is refused (the transform would read past it)
    std::vector<SliceMoments> wrong(2);
    wrong[0].charge.assign(static_cast<size_t>(n) + 1, 1e-9);
    wrong[1].charge.assign(static_cast<size_t>(n), 1e-9);
    CHECK(contains(error_of([&] { fft.end_turn(wrong); }), "a stored bunch has " + std::to_string(n + 1) + " slices"));
    CHECK(contains(error_of([&] { fft.end_turn({wrong[1]}); }), "1 bunches stored, 2 declared"));
    double ratio = 0.0;
    for (int c = 0; c < kComponents; ++c) ratio = std::max(ratio, worst[c] / scale[c]);
    MESSAGE(n << " slices: FFT against direct, max deviation / max kick " << ratio);
    for (int c = 0; c < kComponents; ++c) {
      INFO(n << " slices, " << component_name(Component(c)) << ": max deviation " << worst[c] << ", max kick "
             << scale[c]);
      CHECK(scale[c] > 0.0);
      CHECK(worst[c] <= 1e-13 * scale[c]);
    }
  }
}

TEST_CASE("transverse wakes: the resonator mode memory equals the stored-turns memory") {
  // Three bunches, 8 turns; the stored-turns memory keeps 400 turns (the wake has decayed by e^-300 by then).
  const int n = 12, M = 100, turns = 8;
  const double dt = 1e-9, t0 = M * dt;
  const std::vector<double> offsets{0.0, 30 * dt, 55 * dt};
  for (double q : {30.0, 0.3}) {
    auto res = std::make_shared<Resonator>(1e6, q > 1 ? 0.0731e9 : 0.002e9, q,
                                           ComponentFactors{{1.0, 1.0, 0.7, -0.4, 0.4}});
    WakeMemory stored(res, dt, n, t0, 400, offsets);
    ResonatorModeMemory modes(*res, dt, n, t0, offsets);
    const SampledWake own = sample_wake(*res, dt, n);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    double worst = 0.0, scale = 0.0;
    for (int k = 0; k < turns; ++k) {
      std::vector<SliceMoments> current(offsets.size());
      for (auto& b : current) {
        for (int i = 0; i < n; ++i) {
          b.charge.push_back(1e-9 * u(rng));
          b.x.push_back(1e-3 * (u(rng) - 0.3));
          b.y.push_back(1e-3 * (u(rng) - 0.6));
        }
      }
      for (int b = 0; b < static_cast<int>(offsets.size()); ++b) {
        const SliceKicks ref = stored.kicks(current, b);
        SliceKicks got = modes.track_bunch(b, current[b]);
        const SliceKicks self = convolve(own, current[b]);
        for (int i = 0; i < n; ++i) {
          const double g[5] = {got.longitudinal[i] + self.longitudinal[i], got.dipolar_x[i] + self.dipolar_x[i],
                               got.dipolar_y[i] + self.dipolar_y[i], got.quadrupolar_x[i] + self.quadrupolar_x[i],
                               got.quadrupolar_y[i] + self.quadrupolar_y[i]};
          const double r[5] = {ref.longitudinal[i], ref.dipolar_x[i], ref.dipolar_y[i], ref.quadrupolar_x[i],
                               ref.quadrupolar_y[i]};
          for (int c = 0; c < 5; ++c) {
            worst = std::max(worst, std::fabs(g[c] - r[c]) / (std::fabs(r[c]) + 1e-300));
            scale = std::max(scale, std::fabs(r[c]));
          }
        }
      }
      stored.end_turn(current);
      modes.end_turn();
    }
    MESSAGE("Q = " << q << ": max relative deviation of the mode memory " << worst);
    CHECK(worst < 1e-9);
  }
  CHECK(contains(error_of([] { ResonatorModeMemory(Resonator(1e6, 1e9, 0.5), 1e-9, 10, 1e-6); }),
                 "critically damped"));
  ResonatorModeMemory m(Resonator(1e6, 1e9, 2.0), 1e-10, 10, 1e-6, {0.0, 2e-9});
  SliceMoments b;
  b.charge.assign(10, 1e-9);
  CHECK(contains(error_of([&] { m.track_bunch(1, b); }), "bunch 0 expected"));
  CHECK(contains(error_of([&] { m.end_turn(); }), "after 0 of 2 bunches"));
}

}  // namespace test_transverse_wakes
