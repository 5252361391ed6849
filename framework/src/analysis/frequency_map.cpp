// Frequency map analysis of a DA grid: formulas and sources in fusetrack/frequency_map.h.
#include "fusetrack/frequency_map.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <complex>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/output_files.h"

namespace ft {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

using Complex = std::complex<double>;
constexpr double kNoTune = std::numeric_limits<double>::quiet_NaN();

/// Per particle, the reference orbit (x, px, y, py) its signal is taken around.
struct ReferenceOrbits {
  std::vector<double> x, px, y, py;
};

ReferenceOrbits reference_orbits(const DaScan& scan, const LinearOptics* optics) {
  const size_t n = scan.initial.size();
  const double* co = scan.closed_orbit;
  ReferenceOrbits r;
  r.x.assign(n, co[0]);
  r.px.assign(n, co[1]);
  r.y.assign(n, co[2]);
  r.py.assign(n, co[3]);
  if (!optics) return r;
  for (size_t i = 0; i < n; ++i) {
    const double delta0 = scan.initial.delta[i] - co[5];  // the scan's momentum offset
    r.x[i] += optics->dx * delta0;
    r.px[i] += optics->dpx * delta0;
    r.y[i] += optics->dy * delta0;
    r.py[i] += optics->dpy * delta0;
  }
  return r;
}

/// The turn-by-turn normalised signals of one window, [particle][sample], both planes.
class WindowSignals {
 public:
  WindowSignals(size_t particles, size_t samples, const FrequencyMap& map, ReferenceOrbits orbits)
      : m_samples(samples),
        m_map(map),
        m_orbits(std::move(orbits)),
        m_x(particles * samples),
        m_y(particles * samples) {}

  void record(size_t sample, const Particles& p) {
    const double sbx = std::sqrt(m_map.beta_x), sby = std::sqrt(m_map.beta_y);
    for (size_t i = 0; i < p.size(); ++i) {
      if (p.state[i] <= 0) continue;
      const double x = p.x[i] - m_orbits.x[i], px = p.px[i] - m_orbits.px[i];
      const double y = p.y[i] - m_orbits.y[i], py = p.py[i] - m_orbits.py[i];
      m_x[i * m_samples + sample] = Complex(x / sbx, -(m_map.alpha_x * x + m_map.beta_x * px) / sbx);
      m_y[i * m_samples + sample] = Complex(y / sby, -(m_map.alpha_y * y + m_map.beta_y * py) / sby);
    }
  }

  /// The tunes of the particles alive in `p` (NaN for the others, and for a plane whose signal is
  /// zero: a particle started on the closed orbit in that plane with no coupling into it).
  void tunes(const Particles& p, const FrequencyMapOptions& options, std::vector<double>& qx,
             std::vector<double>& qy) const {
    const long long n = static_cast<long long>(p.size());
    qx.assign(p.size(), kNoTune);
    qy.assign(p.size(), kNoTune);
    const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
    std::string failure;
#pragma omp parallel num_threads(threads)
    {
      Naff naff(m_samples, options.naff);  // one per thread: the FFT plan and buffers
#pragma omp for schedule(dynamic, 8)
      for (long long k = 0; k < n; ++k) {
        const size_t i = static_cast<size_t>(k);
        if (p.state[i] <= 0) continue;
        try {
          qx[i] = tune(naff, &m_x[i * m_samples]);
          qy[i] = tune(naff, &m_y[i * m_samples]);
        } catch (const std::exception& e) {
#pragma omp critical(frequency_map_failure)
          if (failure.empty()) failure = fmt::format("particle {}: {}", i, e.what());
        }
      }
    }
    if (!failure.empty()) throw Error("frequency map: " + failure);
  }

 private:
  double tune(Naff& naff, const Complex* z) const {
    for (size_t s = 0; s < m_samples; ++s)
      if (z[s] != Complex(0.0, 0.0)) return naff.frequency(z);
    return kNoTune;
  }

  size_t m_samples;
  const FrequencyMap& m_map;
  ReferenceOrbits m_orbits;
  std::vector<Complex> m_x, m_y;
};

double wrapped_difference(double a, double b) {
  const double d = b - a;
  return d - std::floor(d + 0.5);
}

}  // namespace

void validate_frequency_map_options(const FrequencyMapOptions& options) {
  auto bad = [](const char* field, const std::string& why) {
    InputLocation at;
    at.field = field;
    throw InputError(at, why);
  };
  if (options.turns_per_window < 16)
    bad("--turns-per-window", fmt::format("needs at least 16 turns per window, got {}", options.turns_per_window));
  if (options.naff.window_order < 0 || options.naff.window_order > 16)
    bad("--window-order", fmt::format("the Hann window order must be in 0 .. 16, got {}", options.naff.window_order));
  if (options.naff.frequencies < 1)
    bad("--frequencies", fmt::format("needs at least one frequency per plane, got {}", options.naff.frequencies));
  if (options.naff.joint_refinements < 0)
    bad("--joint-refinements", fmt::format("must be >= 0, got {}", options.naff.joint_refinements));
}

double diffusion_index(double qx1, double qy1, double qx2, double qy2) {
  // A plane without tunes (zero signal in both windows) leaves the other plane alone.
  const bool has_x = std::isfinite(qx1) && std::isfinite(qx2), has_y = std::isfinite(qy1) && std::isfinite(qy2);
  if (!has_x && !has_y) return kNoTune;
  const double dqx = has_x ? wrapped_difference(qx1, qx2) : 0.0, dqy = has_y ? wrapped_difference(qy1, qy2) : 0.0;
  return std::log10(std::hypot(dqx, dqy));
}

FrequencyMap frequency_map(DaScan& scan, const LinearOptics* optics, Backend& backend,
                           const FrequencyMapOptions& options) {
  validate_frequency_map_options(options);
  using Clock = std::chrono::steady_clock;
  const int64_t window = options.turns_per_window;
  const size_t n = scan.initial.size();
  FrequencyMap map;
  map.turns_per_window = window;
  if (optics) {
    if (!(optics->beta_x > 0.0) || !(optics->beta_y > 0.0))
      throw Error(fmt::format("frequency map: the optics have no positive beta functions (beta_x {}, beta_y {})",
                              optics->beta_x, optics->beta_y));
    map.normalised = true;
    map.beta_x = optics->beta_x;
    map.alpha_x = optics->alpha_x;
    map.beta_y = optics->beta_y;
    map.alpha_y = optics->alpha_y;
  }
  WindowSignals signals(n, static_cast<size_t>(window), map, reference_orbits(scan, optics));
  std::vector<double>* tunes[2][2] = {{&map.qx1, &map.qy1}, {&map.qx2, &map.qy2}};
  double naff_seconds = 0.0;
  auto analyse = [&](int w, const Particles& q) {
    const auto t0 = Clock::now();
    signals.tunes(q, options, *tunes[w][0], *tunes[w][1]);
    naff_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  scan.particles = scan.initial;
  signals.record(0, scan.particles);
  TrackOptions to;
  to.turns = 2 * window;
  to.threads = options.threads;
  to.fma = options.fma;
  to.callback_every = 1;
  to.callback = [&](int64_t done, const Particles& q) {
    if (done % window == 0) analyse(static_cast<int>(done / window) - 1, q);  // a window is complete
    if (done < 2 * window) signals.record(static_cast<size_t>(done % window), q);
    return true;
  };
  const auto t_start = Clock::now();
  backend.track(scan.particles, to);
  scan.turns_done = 2 * window;
  map.tracking_seconds = std::chrono::duration<double>(Clock::now() - t_start).count() - naff_seconds;
  map.naff_seconds = naff_seconds;
  // A window that ended after every particle was lost (tracking may stop early) has no tunes.
  for (auto* q : {&map.qx1, &map.qy1, &map.qx2, &map.qy2})
    if (q->size() != n) q->assign(n, kNoTune);
  map.diffusion.resize(n);
  map.lost_turn.resize(n);
  for (size_t i = 0; i < n; ++i) {
    map.diffusion[i] = diffusion_index(map.qx1[i], map.qy1[i], map.qx2[i], map.qy2[i]);
    map.lost_turn[i] = scan.particles.state[i] > 0 ? -1 : scan.particles.lost_turn[i];
  }
  return map;
}

void write_frequency_map(const DaScan& scan, const FrequencyMap& map, const std::string& directory,
                         const std::string& lattice_file, double optics_qx, double optics_qy) {
  fs::create_directories(directory);
  const size_t n = scan.initial.size();
  std::vector<double> delta(n), x0(n), y0(n);
  for (size_t i = 0; i < n; ++i) {
    delta[i] = scan.initial.delta[i];
    x0[i] = scan.initial.x[i];
    y0[i] = scan.initial.y[i];
  }
  const std::vector<std::pair<std::string, NpyArray>> members = {{"grid_x", NpyArray::from(scan.grid_x)},
                                                                 {"grid_y", NpyArray::from(scan.grid_y)},
                                                                 {"amplitude", NpyArray::from(scan.amplitude)},
                                                                 {"angle", NpyArray::from(scan.angle)},
                                                                 {"delta", NpyArray::from(delta)},
                                                                 {"x0", NpyArray::from(x0)},
                                                                 {"y0", NpyArray::from(y0)},
                                                                 {"qx1", NpyArray::from(map.qx1)},
                                                                 {"qy1", NpyArray::from(map.qy1)},
                                                                 {"qx2", NpyArray::from(map.qx2)},
                                                                 {"qy2", NpyArray::from(map.qy2)},
                                                                 {"diffusion", NpyArray::from(map.diffusion)},
                                                                 {"lost_turn", NpyArray::from(map.lost_turn)}};
  write_npz((fs::path(directory) / "fma.npz").string(), members);
  write_file_atomically((fs::path(directory) / "fma.csv").string(), [&](std::ostream& csv) {
    csv << "grid_x,grid_y,amplitude,angle,delta,x0,y0,qx1,qy1,qx2,qy2,diffusion,lost_turn\n";
    for (size_t i = 0; i < n; ++i)
      csv << fmt::format(
          "{:.10g},{:.10g},{:.10g},{:.10g},{:.10g},{:.12g},{:.12g},{:.15f},{:.15f},{:.15f},{:.15f},{:.6f},{}\n",
          scan.grid_x[i], scan.grid_y[i], scan.amplitude[i], scan.angle[i], delta[i], x0[i], y0[i], map.qx1[i],
          map.qy1[i], map.qx2[i], map.qy2[i], map.diffusion[i], map.lost_turn[i]);
  });
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  size_t survivors = 0;
  for (int64_t t : map.lost_turn) survivors += t < 0 ? 1 : 0;
  json j;
  j["lattice"] = lattice_file;
  j["turns_per_window"] = map.turns_per_window;
  j["turns"] = 2 * map.turns_per_window;
  j["grid"] = scan.config.grid == DaGrid::Polar ? "polar" : "cartesian";
  j["amplitude_unit"] = scan.config.units == DaUnits::Sigma ? "sigma" : "m";
  j["deltas"] = scan.config.deltas;
  j["particles"] = n;
  j["survivors"] = survivors;
  j["qx"] = number(optics_qx);
  j["qy"] = number(optics_qy);
  j["normalised"] = map.normalised;
  j["twiss"] = {{"beta_x", map.beta_x}, {"alpha_x", map.alpha_x}, {"beta_y", map.beta_y}, {"alpha_y", map.alpha_y}};
  j["definition"] =
      "qx1, qy1: NAFF tunes of turns 0..N-1; qx2, qy2: of turns N..2N-1; diffusion = log10 sqrt(dqx^2 + dqy^2) "
      "(differences modulo 1; a plane with no signal left out; null/NaN where a window was not survived)";
  j["tracking_seconds"] = map.tracking_seconds;
  j["naff_seconds"] = map.naff_seconds;
  write_file_atomically((fs::path(directory) / "summary.json").string(), j.dump(2) + "\n");
}

}  // namespace ft
