// Tunes from turn-by-turn data (Hann window, FFTW3, NAFF refinement), tunes of small-amplitude
// particles tracked around the closed orbit, and tune footprints (see fusetrack/optics.h).
#include <fftw3.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <mutex>
#include <vector>

#include "analysis/optics/optics_internal.hpp"
#include "analysis/optics/ring_tracker.hpp"
#include "core/fftw_planner.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft {

double tune_from_tracking(const std::vector<double>& x, const std::vector<double>& px, double beta, double alpha) {
  const size_t n = std::min(x.size(), px.size());
  if (n < 16) throw Error(fmt::format("tune_from_tracking: needs at least 16 turns of data, got {}", n));
  if (!(beta > 0.0) || !std::isfinite(beta) || !std::isfinite(alpha))
    throw Error(fmt::format("tune_from_tracking: beta = {} must be > 0 and alpha = {} finite", beta, alpha));
  const double sb = std::sqrt(beta);
  // Windowed, normalized signal w_n z_n.
  std::vector<std::complex<double>> wz(n);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(px[i]))
      throw Error(fmt::format("tune_from_tracking: sample {} is not finite", i));
    const double xh = x[i] / sb, pxh = (alpha * x[i] + beta * px[i]) / sb;
    const double w = 1.0 - std::cos(2.0 * kPi * (static_cast<double>(i) + 0.5) / static_cast<double>(n));
    wz[i] = std::complex<double>(w * xh, -w * pxh);
  }
  // FFT peak (zero-padded to a power of two >= 4 n).
  size_t nfft = 1;
  while (nfft < 4 * n) nfft <<= 1;
  fftw_complex* buf = fftw_alloc_complex(nfft);
  if (!buf) throw Error("tune_from_tracking: out of memory for the FFT");
  fftw_plan plan;
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    plan = fftw_plan_dft_1d(static_cast<int>(nfft), buf, buf, FFTW_FORWARD, FFTW_ESTIMATE);
  }
  for (size_t i = 0; i < nfft; ++i) {
    buf[i][0] = i < n ? wz[i].real() : 0.0;
    buf[i][1] = i < n ? wz[i].imag() : 0.0;
  }
  fftw_execute(plan);
  size_t kmax = 0;
  double amax = -1.0;
  for (size_t k = 0; k < nfft; ++k) {
    const double a = buf[k][0] * buf[k][0] + buf[k][1] * buf[k][1];
    if (a > amax) {
      amax = a;
      kmax = k;
    }
  }
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    fftw_destroy_plan(plan);
  }
  fftw_free(buf);
  if (!(amax > 0.0)) throw Error("tune_from_tracking: the signal is zero");

  // Refinement (NAFF): maximise A(Q) = |S(Q)|^2, S(Q) = sum_n w_n z_n e^{-2 pi i Q n}, through
  // the root of A'(Q) = 2 Re(conj(S) S'), S' = sum_n (-2 pi i n) w_n z_n e^{-2 pi i Q n}. The
  // phase is taken about the middle of the record (n - (N-1)/2), which leaves |S| unchanged.
  const double centre = 0.5 * static_cast<double>(n - 1);
  auto derivative = [&](double qq) {
    std::complex<double> s(0.0, 0.0), ds(0.0, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(i) - centre;
      const double ph = -2.0 * kPi * qq * t;
      const std::complex<double> term = wz[i] * std::complex<double>(std::cos(ph), std::sin(ph));
      s += term;
      ds += std::complex<double>(0.0, -2.0 * kPi * t) * term;
    }
    return 2.0 * (std::conj(s) * ds).real();
  };
  const double q0 = static_cast<double>(kmax) / static_cast<double>(nfft);
  double lo = q0 - 1.0 / static_cast<double>(nfft), hi = q0 + 1.0 / static_cast<double>(nfft);
  double glo = derivative(lo), ghi = derivative(hi);
  if (!(glo > 0.0 && ghi < 0.0)) {
    // Not bracketed (a neighbouring line): widen once within the Hann main lobe (+-2 / n).
    lo = q0 - 1.0 / static_cast<double>(n);
    hi = q0 + 1.0 / static_cast<double>(n);
    glo = derivative(lo);
    ghi = derivative(hi);
  }
  double q = q0;
  if (glo > 0.0 && ghi < 0.0) {
    // Illinois regula falsi, safeguarded by bisection.
    int side = 0;
    for (int it = 0; it < 200 && hi - lo > 1e-16; ++it) {
      double m = (lo * ghi - hi * glo) / (ghi - glo);
      if (!(m > lo && m < hi)) m = 0.5 * (lo + hi);
      const double gm = derivative(m);
      if (gm == 0.0) {
        lo = hi = m;
        break;
      }
      if (gm > 0.0) {
        lo = m;
        glo = gm;
        if (side == -1) ghi *= 0.5;
        side = -1;
      } else {
        hi = m;
        ghi = gm;
        if (side == 1) glo *= 0.5;
        side = 1;
      }
    }
    q = 0.5 * (lo + hi);
  }
  q -= std::floor(q);
  if (q >= 1.0) q -= 1.0;
  return q;
}

TrackedTunes tunes_by_tracking(const Lattice& lattice, const LinearOptics& optics, int64_t turns,
                               const OpticsOptions& options) {
  using namespace optics_internal;
  if (turns < 16) {
    InputLocation at;
    at.field = "tracking turns";
    throw InputError(at, fmt::format("needs at least 16 turns, got {}", turns));
  }
  check_lattice(lattice);
  const RingTracker tracker(lattice, !optics.six_d, options.threads);
  const double beta0 = lattice.reference().beta0();
  const auto& co = optics.closed_orbit;
  const double a = options.tracking_amplitude;
  const size_t np = optics.six_d ? 3 : 2;
  Particles p(np, beta0);
  p.set(0, co[0] + a * std::sqrt(optics.beta_x), co[1], co[2], co[3], co[4], co[5]);
  p.set(1, co[0], co[1], co[2] + a * std::sqrt(optics.beta_y), co[3], co[4], co[5]);
  if (optics.six_d) p.set(2, co[0], co[1], co[2], co[3], co[4] + a * std::sqrt(optics.beta_s), co[5]);
  const double pz_co = pzeta_of_delta(co[5], beta0);
  std::vector<double> xs, pxs, ys, pys, zs, pzs;
  auto record = [&](const Particles& q) {
    xs.push_back(q.x[0] - co[0]);
    pxs.push_back(q.px[0] - co[1]);
    ys.push_back(q.y[1] - co[2]);
    pys.push_back(q.py[1] - co[3]);
    if (optics.six_d) {
      zs.push_back(q.zeta[2] - co[4]);
      pzs.push_back(pzeta_of_delta(q.delta[2], beta0) - pz_co);
    }
  };
  record(p);
  tracker.track(p, turns, 0, [&](int64_t, const Particles& q) { record(q); });
  for (size_t i = 0; i < np; ++i)
    if (p.state[i] <= 0)
      throw Error(fmt::format("optics: a small-amplitude particle for the tune from tracking was lost at turn {}",
                              p.lost_turn[i]));
  TrackedTunes t;
  t.turns = turns;
  t.qx = tune_from_tracking(xs, pxs, optics.beta_x, optics.alpha_x);
  t.qy = tune_from_tracking(ys, pys, optics.beta_y, optics.alpha_y);
  t.qs = kNaN;
  if (optics.six_d) {
    const double qs = tune_from_tracking(zs, pzs, optics.beta_s, optics.alpha_s);
    t.qs = std::min(qs, 1.0 - qs);
  }
  return t;
}

namespace {

// The rms beam sizes at the start from the normalized emittances (beam_sizes) or the geometric ones.
BeamSizes footprint_beam_sizes(const LinearOptics& optics, const FootprintOptions& options) {
  auto bad = [](const std::string& why) {
    InputLocation at;
    at.field = "emittances";
    throw InputError(at, why);
  };
  auto positive = [](double a, double b) { return a > 0.0 && b > 0.0 && std::isfinite(a) && std::isfinite(b); };
  const bool geometric = options.emittance_x != 0.0 || options.emittance_y != 0.0;
  const bool normalized = options.emittance_nx != 0.0 || options.emittance_ny != 0.0;
  if (geometric && normalized) bad("give either the normalized or the geometric emittances, not both");
  if (geometric) {
    if (!positive(options.emittance_x, options.emittance_y))
      bad(fmt::format("the geometric emittances must be positive, got {} and {}", options.emittance_x,
                      options.emittance_y));
    BeamSizes s;
    s.sigma_x = std::sqrt(optics.beta_x * options.emittance_x);
    s.sigma_px = std::sqrt(optics.gamma_x * options.emittance_x);
    s.sigma_y = std::sqrt(optics.beta_y * options.emittance_y);
    s.sigma_py = std::sqrt(optics.gamma_y * options.emittance_y);
    return s;
  }
  if (!positive(options.emittance_nx, options.emittance_ny))
    bad(fmt::format("the normalized emittances must be positive, got {} and {}", options.emittance_nx,
                    options.emittance_ny));
  const double bg = optics.beta0 * optics.gamma0;
  if (!(bg > 0.0) || !std::isfinite(bg))
    bad(
        fmt::format("normalized emittances need the reference energy (beta0 gamma0 = {}): set the lattice's "
                    "reference p0c or give geometric emittances",
                    bg));
  return beam_sizes(optics, options.emittance_nx, options.emittance_ny);
}

}  // namespace

Lattice without_beam_beam_lenses(const Lattice& lattice, size_t* lenses) {
  Lattice bare = lattice;
  std::vector<char> done(lattice.definitions().size(), 0);
  size_t count = 0;
  for (const SequenceEntry& entry : lattice.sequence()) {
    const std::string& type = lattice.definitions()[entry.definition].type->name;
    if (type != "BeamBeamBiGaussian2D" && type != "BeamBeamBiGaussian3D") continue;
    ++count;
    if (!done[entry.definition]) bare.set_field(entry.definition, "scale_strength", 0.0);
    done[entry.definition] = 1;
  }
  if (count > 0) bare.prepare();
  if (lenses) *lenses = count;
  return bare;
}

TuneFootprint tune_footprint(const Lattice& lattice, const LinearOptics& optics, Backend& backend,
                             const FootprintOptions& options) {
  using namespace optics_internal;
  auto bad = [](const char* field, const std::string& why) {
    InputLocation at;
    at.field = field;
    throw InputError(at, why);
  };
  if (options.turns < 16) bad("turns", fmt::format("a tune footprint needs at least 16 turns, got {}", options.turns));
  if (options.amplitudes < 1 || options.angles < 1)
    bad("amplitudes",
        fmt::format("needs at least one amplitude and one angle, got {} and {}", options.amplitudes, options.angles));
  if (!(options.max_sigma > 0.0) || !std::isfinite(options.max_sigma))
    bad("max_sigma", fmt::format("the largest amplitude must be positive, got {}", options.max_sigma));
  if (!(options.min_sigma > 0.0) || !(options.min_sigma < options.max_sigma))
    bad("min_sigma", fmt::format("the smallest amplitude must be in (0, max_sigma), got {}", options.min_sigma));
  const BeamSizes sizes = footprint_beam_sizes(optics, options);
  const auto& co = optics.closed_orbit;
  TuneFootprint fp;
  fp.turns = options.turns;
  fp.sigma_x = sizes.sigma_x;
  fp.sigma_y = sizes.sigma_y;
  const double pi_half = 2.0 * std::atan(1.0);
  for (int a = 1; a <= options.amplitudes; ++a)
    for (int t = 0; t < options.angles; ++t) {
      const double r = options.max_sigma * a / options.amplitudes;
      const double angle = options.angles > 1 ? pi_half * t / (options.angles - 1) : pi_half / 2.0;
      fp.amplitude_x.push_back(std::max(r * std::cos(angle), options.min_sigma));
      fp.amplitude_y.push_back(std::max(r * std::sin(angle), options.min_sigma));
    }
  const size_t n = fp.amplitude_x.size();
  Particles p(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const double x = fp.amplitude_x[i] * sizes.sigma_x, y = fp.amplitude_y[i] * sizes.sigma_y;
    // Off momentum: on the dispersive orbit co + D delta, so that delta adds no betatron amplitude.
    const double d = options.delta_offset;
    p.set(i, co[0] + optics.dx * d + x, co[1] + optics.dpx * d - optics.alpha_x * x / optics.beta_x,
          co[2] + optics.dy * d + y, co[3] + optics.dpy * d - optics.alpha_y * y / optics.beta_y,
          co[4] + options.zeta_offset, co[5] + d);
  }
  // Turn-by-turn deviations from the closed orbit, [particle][turn].
  std::vector<std::vector<double>> xs(n), pxs(n), ys(n), pys(n);
  auto record = [&](const Particles& q) {
    for (size_t i = 0; i < n; ++i) {
      if (q.state[i] <= 0) continue;
      xs[i].push_back(q.x[i] - co[0]);
      pxs[i].push_back(q.px[i] - co[1]);
      ys[i].push_back(q.y[i] - co[2]);
      pys[i].push_back(q.py[i] - co[3]);
    }
  };
  record(p);
  TrackOptions to;
  to.turns = options.turns;
  to.threads = options.threads;
  to.fma = options.fma;
  to.callback_every = 1;
  to.callback = [&](int64_t, const Particles& q) {
    record(q);
    return true;
  };
  backend.track(p, to);
  for (size_t i = 0; i < n; ++i) {
    const bool alive = p.state[i] > 0;
    fp.lost_turn.push_back(alive ? -1 : p.lost_turn[i]);
    fp.qx.push_back(alive ? tune_from_tracking(xs[i], pxs[i], optics.beta_x, optics.alpha_x) : kNaN);
    fp.qy.push_back(alive ? tune_from_tracking(ys[i], pys[i], optics.beta_y, optics.alpha_y) : kNaN);
  }
  return fp;
}

}  // namespace ft
