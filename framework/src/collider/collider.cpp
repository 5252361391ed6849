// Two beams colliding (fusetrack/collider.h): bunches on ranks, slots in waves, slice moments
// swapped as integers, the synchro-beam map of fusetrack/device/beambeam6d.h, one turn per crossing.
#include "fusetrack/collider.h"

#include <fftw3.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>

#include "../core/fftw_planner.hpp"
#include "fusetrack/beambeam.h"
#include "fusetrack/cuda_collider.h"
#include "fusetrack/cuda_device.h"
#include "fusetrack/device/collider_steps.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice_file.h"
#include "fusetrack/npy.h"
#include "fusetrack/optics.h"
#include "fusetrack/output_files.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/reduction.h"
#include "fusetrack/registry.h"
#include "fusetrack/session.h"
#include "core/math_helpers.hpp"

namespace ft {

namespace {

constexpr double kSpeedOfLight = 299792458.0;  // [m/s]
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- one beam: its ring, its optics at the IP, its kick parameters ----------------------------

struct BeamRuntime {
  const ColliderBeam* beam = nullptr;
  int index = 0;
  LinearOptics optics;               // Twiss at the IP (the map's, or the lattice's start)
  std::unique_ptr<Lattice> lattice;  // a lattice ring, else the linear map
  std::unique_ptr<Backend> backend;
  Bb6dParams params{};               // this beam's boost and the kick of one partner particle on it
  SliceGrid grid{};                  // slices in this beam's boosted frame
  std::array<double, 6> ranges{};    // fixed-point ranges of the moments (boosted frame)
  double particles_per_macro = 0.0;
  double sigma_x = 0.0, sigma_y = 0.0, sigma_px = 0.0, sigma_py = 0.0;  // matched, at the IP
  bool frozen = false;
  ColliderRingMap ring{};  // the linear map's device form
};

/// The linear one-turn map as the device steps take it (fusetrack/device/collider_steps.h).
ColliderRingMap ring_map(const LinearRingMap& m) {
  ColliderRingMap r{};
  r.qx = m.qx, r.qy = m.qy, r.chroma_x = m.chroma_x, r.chroma_y = m.chroma_y;
  r.beta_x = m.beta_x, r.alpha_x = m.alpha_x, r.gamma_x = (1 + m.alpha_x * m.alpha_x) / m.beta_x;
  r.beta_y = m.beta_y, r.alpha_y = m.alpha_y, r.gamma_y = (1 + m.alpha_y * m.alpha_y) / m.beta_y;
  ft_sincos(2 * kPi * m.qs, &r.sin_s, &r.cos_s);
  r.beta_s = m.beta_s;
  r.longitudinal = m.qs > 0 ? 1 : 0;
  return r;
}

/// Arrival at the IP on the CPU: the record sums per chunk (lanes as on the GPU, combined in the same
/// order) and, with `boost`, the boost of the alive particles in place.
std::vector<double> cpu_arrival(const Bb6dParams& params, bool boost, Particles& p, int threads) {
  std::vector<double> out(static_cast<size_t>(kColliderSums) * kColliderChunks);
  const long n = static_cast<long>(p.size());
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (int c = 0; c < kColliderChunks; ++c) {
    double lanes[kColliderLanes * kColliderSums];
    for (int lane = 0; lane < kColliderLanes; ++lane)
      collider_lane_arrival(params, boost ? 1 : 0, p.x.data(), p.px.data(), p.y.data(), p.py.data(), p.zeta.data(),
                            p.delta.data(), p.state.data(), n, c, lane, lanes + kColliderSums * lane);
    collider_combine_lanes(lanes, kColliderSums);
    std::copy(lanes, lanes + kColliderSums, out.data() + static_cast<size_t>(kColliderSums) * static_cast<size_t>(c));
  }
  return out;
}

/// Departure on the CPU: kick (n slices), inverse boost and, with `ring`, one turn of the linear map.
void cpu_departure(const Bb6dParams& params, const std::vector<Bb6dSlice>& slices, const ColliderRingMap* ring,
                   Particles& p, int turn, int threads) {
  const long n = static_cast<long>(p.size());
  const ColliderRingMap m = ring ? *ring : ColliderRingMap{};
  const Bb6dSlice* sl = slices.data();
  const int n_slices = static_cast<int>(slices.size());
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (long i = 0; i < n; ++i) {
    if (p.state[static_cast<size_t>(i)] <= 0) continue;
    collider_depart(params, sl, n_slices, ring ? 1 : 0, m, p.x.data(), p.px.data(), p.y.data(), p.py.data(),
                    p.zeta.data(), p.delta.data(), p.ptau.data(), p.rpp.data(), p.rvv.data(), p.state.data(),
                    p.lost_turn.data(), i, p.beta0, turn);
  }
}

/// Whole-bunch statistics of a record from the chunk sums (the same on CPU and GPU): chunks added in
/// order, central second moments as raw / N - mean^2.
struct BunchStats {
  double alive = 0.0;
  std::array<double, 6> mean{};
  double xx = 0, xpx = 0, pxpx = 0, yy = 0, ypy = 0, pypy = 0, zz = 0, dd = 0;
};

BunchStats stats_from_sums(const std::vector<double>& chunks) {
  std::array<double, kColliderSums> t{};
  for (int c = 0; c < kColliderChunks; ++c)
    for (size_t k = 0; k < static_cast<size_t>(kColliderSums); ++k)
      t[k] += chunks[static_cast<size_t>(kColliderSums) * static_cast<size_t>(c) + k];
  BunchStats s;
  s.alive = t[0];
  if (s.alive == 0) return s;
  for (size_t k = 0; k < 6; ++k) s.mean[k] = t[k + 1] / s.alive;
  const auto& m = s.mean;
  const auto central = [&](size_t k, size_t a, size_t b) { return std::max(0.0, t[k] / s.alive - m[a] * m[b]); };
  s.xx = central(7, 0, 0), s.pxpx = central(9, 1, 1), s.yy = central(10, 2, 2), s.pypy = central(12, 3, 3);
  s.zz = central(13, 4, 4), s.dd = central(14, 5, 5);
  s.xpx = t[8] / s.alive - m[0] * m[1], s.ypy = t[11] / s.alive - m[2] * m[3];
  return s;
}

/// The partner slices that give a field, head first (descending zeta), in the partner's frame, with
/// their x-y correlations; `unused`: the macroparticles left out; `coupling`: the largest |x-y
/// correlation coefficient| (x-y and px-py) among them.
std::vector<Bb6dSlice> usable_slices(const SliceMoments& m, double particles_per_macro, int min_macroparticles,
                                     double& unused, double& coupling) {
  std::vector<Bb6dSlice> out;
  for (size_t k = m.macroparticles.size(); k-- > 0;) {
    const double count = m.macroparticles[k];
    const auto& c = m.second_central[k];  // xx xpx xy xpy pxpx pxy pxpy yy ypy pypy
    bool finite = std::isfinite(count) && std::isfinite(c[0]) && std::isfinite(c[1]) && std::isfinite(c[4]) &&
                  std::isfinite(c[7]) && std::isfinite(c[8]) && std::isfinite(c[9]);
    for (double v : m.mean[k]) finite = finite && std::isfinite(v);
    for (size_t q = 0; q < c.size(); ++q) finite = finite && std::isfinite(c[q]);
    if (count < min_macroparticles || !finite || !(c[0] > 0) || !(c[7] > 0) || !(c[2] * c[2] < c[0] * c[7])) {
      unused += count;
      continue;
    }
    Bb6dSlice s{};
    s.n_particles = count * particles_per_macro;
    s.x = m.mean[k][0], s.px = m.mean[k][1], s.y = m.mean[k][2], s.py = m.mean[k][3];
    s.zeta = m.mean[k][4], s.delta = m.mean[k][5];
    s.sigma_11 = c[0], s.sigma_12 = c[1], s.sigma_13 = c[2], s.sigma_14 = c[3], s.sigma_22 = std::max(c[4], 0.0);
    s.sigma_23 = c[5], s.sigma_24 = c[6], s.sigma_33 = c[7], s.sigma_34 = c[8], s.sigma_44 = std::max(c[9], 0.0);
    coupling = std::max(coupling, std::fabs(c[2]) / std::sqrt(c[0] * c[7]));
    if (c[4] > 0 && c[9] > 0) coupling = std::max(coupling, std::fabs(c[6]) / std::sqrt(c[4] * c[9]));
    out.push_back(s);
  }
  return out;
}

// ---- bunches on ranks ---------------------------------------------------------------------------

struct Bunch {
  int beam = 0, index = 0;
  size_t count = 0;  // macroparticles
  /// The particles of a bunch kept on the host; a GPU bunch's stay empty except while a checkpoint is written.
  Particles particles;
  int64_t crossings = 0;
  std::vector<uint64_t> moments;          // this crossing's integers (+ out_of_range last)
  std::unique_ptr<GpuColliderBunch> gpu;  // the particles live on the GPU
  // The first crossing's check of a GPU bunch (check_gpu): a sample of its first particles, on the GPU and on
  // the CPU, from arrival to departure.
  std::unique_ptr<GpuColliderBunch> sample_gpu;
  Particles sample_cpu;
};

/// Every array of two particle sets bitwise equal.
bool same_particles(const Particles& a, const Particles& b) {
  const auto same = [](const auto& u, const auto& v) {
    return u.size() == v.size() && (u.empty() || std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])) == 0);
  };
  return same(a.x, b.x) && same(a.px, b.px) && same(a.y, b.y) && same(a.py, b.py) && same(a.zeta, b.zeta) &&
         same(a.delta, b.delta) && same(a.ptau, b.ptau) && same(a.rpp, b.rpp) && same(a.rvv, b.rvv) &&
         same(a.state, b.state) && same(a.lost_turn, b.lost_turn);
}

int owner_of(int global, int total, int ranks, BunchPlacement placement) {
  if (placement == BunchPlacement::round_robin) return global % ranks;
  return static_cast<int>(static_cast<int64_t>(global) * ranks / total);
}

constexpr int kRecordFields = 24;

void pack_record(const CrossingRecord& r, double* f) {
  const double v[kRecordFields] = {static_cast<double>(r.slot), static_cast<double>(r.beam), static_cast<double>(r.bunch),
                                   static_cast<double>(r.partner), static_cast<double>(r.turn), r.alive, r.luminosity,
                                   r.mean[0], r.mean[1], r.mean[2], r.mean[3], r.mean[4], r.mean[5], r.sigma_x,
                                   r.sigma_y, r.sigma_zeta, r.sigma_delta, r.emittance_x, r.emittance_y, r.coupling,
                                   r.unused_charge, 1.0, 0.0, 0.0};
  std::copy(v, v + kRecordFields, f);
}

CrossingRecord unpack_record(const double* f) {
  CrossingRecord r;
  r.slot = static_cast<int64_t>(f[0]), r.beam = static_cast<int>(f[1]), r.bunch = static_cast<int>(f[2]);
  r.partner = static_cast<int>(f[3]), r.turn = static_cast<int64_t>(f[4]), r.alive = f[5], r.luminosity = f[6];
  for (size_t k = 0; k < 6; ++k) r.mean[k] = f[7 + k];
  r.sigma_x = f[13], r.sigma_y = f[14], r.sigma_zeta = f[15], r.sigma_delta = f[16];
  r.emittance_x = f[17], r.emittance_y = f[18], r.coupling = f[19], r.unused_charge = f[20];
  return r;
}

const char* kCsvHeader =
    "slot,beam,bunch,partner,turn,alive,luminosity_per_crossing,x,px,y,py,zeta,delta,sigma_x,sigma_y,sigma_zeta,"
    "sigma_delta,emittance_x,emittance_y,max_xy_correlation,unused_partner_macroparticles\n";

void write_csv_row(std::ostream& out, const CrossingRecord& r) {
  out << fmt::format("{},{},{},{},{},{:.17g},{:.17g}", r.slot, r.beam + 1, r.bunch, r.partner, r.turn, r.alive,
                     r.luminosity);
  for (double v : r.mean) out << fmt::format(",{:.17g}", v);
  out << fmt::format(",{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.6g},{:.17g}\n", r.sigma_x, r.sigma_y,
                     r.sigma_zeta, r.sigma_delta, r.emittance_x, r.emittance_y, r.coupling, r.unused_charge);
}

/// A short fingerprint of what determines a run's particles: the set-up document as read.
std::string setup_fingerprint(const ColliderSetup& s) {
  std::string text;
  for (const ColliderBeam& b : s.beams) {
    text += fmt::format("{}|{:.17g}|{:.17g}|{:.17g}|{}|", b.name, b.reference.mass0, b.reference.q0, b.reference.p0c,
                        b.lattice_file);
    if (b.linear_map) {
      const LinearRingMap& m = *b.linear_map;
      text += fmt::format("{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}|", m.qx, m.qy,
                          m.beta_x, m.alpha_x, m.beta_y, m.alpha_y, m.qs, m.beta_s, m.chroma_x, m.chroma_y);
    }
    const ColliderBunches& u = b.bunches;
    text += fmt::format("{},{:.17g},{},{:.17g},{:.17g},{:.17g},{:.17g},{},{}|", u.count, u.intensity, u.macroparticles,
                        u.emittance_nx, u.emittance_ny, u.sigma_zeta, u.sigma_delta, u.seed, u.particles_file);
  }
  const InteractionPoint& ip = s.ip;
  text += fmt::format("{:.17g},{:.17g},{},{},{:.17g},{:.17g},{},{}", ip.phi, ip.alpha, ip.slices, ip.six_d,
                      ip.slice_range, ip.moment_range, ip.min_slice_macroparticles, s.frozen_beam);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::string bunch_checkpoint_name(int beam, int bunch, int64_t slot) {
  return fmt::format("beam{}_bunch{}_crossing{}.npz", beam + 1, bunch, slot);
}

void write_bunch_checkpoint(const std::string& file, const Bunch& bunch) {
  auto members = particle_arrays(bunch.particles);
  members.emplace_back("crossings", NpyArray::from(std::vector<int64_t>{bunch.crossings}));
  write_npz(file, members);
}

/// A bunch's particles exactly as written (every array, no recomputation) and its crossing count.
void read_bunch_checkpoint(const std::string& file, Bunch& bunch) {
  const InputLocation where{file};
  if (!std::filesystem::exists(file)) throw InputError(where, "the checkpoint of this bunch is missing");
  const NpzArchive a = read_npz(file);
  const auto get = [&](const char* key) -> const NpyArray& {
    const auto it = a.find(key);
    if (it == a.end()) throw InputError(where, fmt::format("checkpoint lacks '{}'", key));
    return it->second;
  };
  Particles& p = bunch.particles;
  const size_t n = p.size();
  const auto doubles = [&](const char* key, std::vector<double>& v) {
    v = get(key).to_doubles();
    if (v.size() != n) throw InputError(where, fmt::format("checkpoint array '{}' has {} entries, expected {}", key, v.size(), n));
  };
  doubles("x", p.x), doubles("px", p.px), doubles("y", p.y), doubles("py", p.py), doubles("zeta", p.zeta);
  doubles("delta", p.delta), doubles("ptau", p.ptau), doubles("rpp", p.rpp), doubles("rvv", p.rvv);
  const std::vector<int64_t> state = get("state").to_int64(), lost_turn = get("lost_turn").to_int64();
  const std::vector<int64_t> lost_element = get("lost_element").to_int64(), id = get("id").to_int64();
  if (state.size() != n || lost_turn.size() != n || lost_element.size() != n || id.size() != n)
    throw InputError(where, "checkpoint loss arrays have the wrong size");
  for (size_t i = 0; i < n; ++i) {
    p.state[i] = static_cast<int32_t>(state[i]), p.lost_turn[i] = static_cast<int32_t>(lost_turn[i]);
    p.lost_element[i] = lost_element[i], p.id[i] = id[i];
  }
  bunch.crossings = get("crossings").to_int64().at(0);
}

/// The records of bunches.csv before crossing `slot` (a resumed run rewrites the rest).
std::vector<CrossingRecord> read_csv_records(const std::string& file, int64_t slot) {
  std::ifstream in(file);
  if (!in) throw InputError(InputLocation{file}, "cannot read the records of the run to resume");
  std::string line;
  std::getline(in, line);
  std::vector<CrossingRecord> out;
  while (std::getline(in, line)) {
    std::vector<double> v;
    size_t start = 0;
    while (start <= line.size()) {
      const size_t comma = line.find(',', start);
      v.push_back(std::strtod(line.substr(start, comma - start).c_str(), nullptr));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (v.size() != 21) throw InputError(InputLocation{file}, fmt::format("a row has {} columns, expected 21", v.size()));
    if (static_cast<int64_t>(v[0]) >= slot) break;
    CrossingRecord r;
    r.slot = static_cast<int64_t>(v[0]), r.beam = static_cast<int>(v[1]) - 1, r.bunch = static_cast<int>(v[2]);
    r.partner = static_cast<int>(v[3]), r.turn = static_cast<int64_t>(v[4]), r.alive = v[5], r.luminosity = v[6];
    for (size_t k = 0; k < 6; ++k) r.mean[k] = v[7 + k];
    r.sigma_x = v[13], r.sigma_y = v[14], r.sigma_zeta = v[15], r.sigma_delta = v[16];
    r.emittance_x = v[17], r.emittance_y = v[18], r.coupling = v[19], r.unused_charge = v[20];
    out.push_back(r);
  }
  return out;
}

/// NaN as JSON null.
nlohmann::ordered_json number_or_null(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); }

}  // namespace

nlohmann::ordered_json collide_summary_json(const ColliderSetup& setup, const CollideOptions& o, const CollideResult& r) {
  nlohmann::ordered_json j;
  j["setup"] = setup.file;
  j["mode"] = setup.frozen_beam < 0 ? "strong-strong" : fmt::format("weak-strong (beam {} frozen)", setup.frozen_beam + 1);
  j["model"] = setup.ip.six_d ? "6d" : "4d";
  j["slices"] = setup.ip.slices;
  j["half_crossing_angle"] = setup.ip.phi;
  j["turns"] = o.turns;
  j["slots"] = r.slots;
  j["ranks"] = r.ranks;
  j["placement"] = o.placement == BunchPlacement::block ? "block" : "round-robin";
  for (int b = 0; b < 2; ++b) {
    nlohmann::ordered_json beam;
    beam["name"] = setup.beams[static_cast<size_t>(b)].name;
    beam["bunches"] = setup.beams[static_cast<size_t>(b)].bunches.count;
    beam["qx"] = r.tunes[static_cast<size_t>(b)][0];
    beam["qy"] = r.tunes[static_cast<size_t>(b)][1];
    beam["xi_x"] = r.xi[static_cast<size_t>(b)][0];
    beam["xi_y"] = r.xi[static_cast<size_t>(b)][1];
    j["beams"].push_back(beam);
  }
  j["coherent_modes"] = {{"sigma_x", number_or_null(r.sigma_mode[0])}, {"pi_x", number_or_null(r.pi_mode[0])},
                         {"sigma_y", number_or_null(r.sigma_mode[1])}, {"pi_y", number_or_null(r.pi_mode[1])}};
  j["crossing_frequency_hz"] = r.crossing_frequency;
  j["luminosity_m2_s"] = r.luminosity;
  j["luminosity_cm2_s"] = r.luminosity * 1e-4;
  for (const BunchSummary& b : r.bunches)
    j["bunch_summaries"].push_back({{"beam", b.beam + 1},
                                    {"bunch", b.bunch},
                                    {"mean_luminosity_per_crossing_m2", b.mean_luminosity},
                                    {"emittance_x", {b.initial_emittance_x, b.final_emittance_x}},
                                    {"emittance_y", {b.initial_emittance_y, b.final_emittance_y}},
                                    {"final_alive", b.final_alive},
                                    {"peak_tune_x", number_or_null(b.peak_tune_x)},
                                    {"peak_tune_y", number_or_null(b.peak_tune_y)}});
  j["device"] = r.device;
  j["gpu_checks"] = r.gpu_checks;
  j["seconds"] = {{"total", r.seconds},
                  {"gpu_kernels", r.gpu_kernel_seconds},
                  {"arrival", r.deposit_seconds},
                  {"exchange", r.exchange_seconds},
                  {"departure", r.kick_seconds},
                  {"lattice_turn", r.transport_seconds}};
  return j;
}

Bb6dSlice slice_in_partner_frame(const Bb6dSlice& s) {
  Bb6dSlice t = s;
  t.x = -s.x;
  t.py = -s.py;
  t.sigma_12 = -s.sigma_12;
  t.sigma_34 = -s.sigma_34;
  t.sigma_13 = -s.sigma_13;  // x y -> -x y
  t.sigma_14 = s.sigma_14;   // x py -> (-x)(-py)
  t.sigma_23 = s.sigma_23;   // px y
  t.sigma_24 = -s.sigma_24;  // px py -> px (-py)
  return t;
}

std::vector<double> amplitude_spectrum(const std::vector<double>& samples, size_t m) {
  const size_t n = samples.size();
  if (n == 0 || m < n) throw Error(fmt::format("amplitude_spectrum: need m >= {} samples, got m = {}", n, m));
  const size_t len = 2 * m;
  std::vector<double> in(len, 0.0);
  double mean = 0;
  for (double v : samples) mean += v;
  mean /= static_cast<double>(n);
  for (size_t i = 0; i < n; ++i)
    in[i] = (samples[i] - mean) * (1.0 - std::cos(2 * kPi * (static_cast<double>(i) + 0.5) / static_cast<double>(n)));
  std::vector<fftw_complex> out(m + 1);
  fftw_plan plan;
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    plan = fftw_plan_dft_r2c_1d(static_cast<int>(len), in.data(), out.data(), FFTW_ESTIMATE);
  }
  fftw_execute(plan);
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    fftw_destroy_plan(plan);
  }
  std::vector<double> amp(m + 1);
  for (size_t i = 0; i <= m; ++i) amp[i] = std::hypot(out[i][0], out[i][1]) / static_cast<double>(n);
  return amp;
}

double peak_tune(const std::vector<double>& samples) {
  if (samples.size() < 16) return std::nan("");
  size_t m = 1;
  while (m < 4 * samples.size()) m *= 2;
  const std::vector<double> a = amplitude_spectrum(samples, m);
  const size_t first = static_cast<size_t>(std::ceil(0.002 * 2.0 * static_cast<double>(m)));
  size_t best = first;
  for (size_t i = first; i < m; ++i)
    if (a[i] > a[best]) best = i;
  double shift = 0.0;
  if (best > 0 && best < m) {
    const double l = a[best - 1], c = a[best], r = a[best + 1], den = l - 2 * c + r;
    if (den < 0) shift = 0.5 * (l - r) / den;
  }
  return (static_cast<double>(best) + shift) / (2.0 * static_cast<double>(m));
}

namespace {

/// One crossing as this rank sees it: the slot's two bunches, their owners, this rank's of them, and what the
/// crossing carries from arrival to departure.
struct Crossing {
  int64_t slot = 0;
  std::array<int, 2> pair{};                // bunch of beam 1, bunch of beam 2
  std::array<int, 2> owners{};              // their ranks
  std::array<Bunch*, 2> mine{};             // this rank's bunches of the two (null: another rank's)
  std::array<std::vector<double>, 2> sums;  // arrival's record sums, per chunk
  std::array<CrossingRecord, 2> rec;
  std::array<std::vector<uint64_t>, 2> partner_moments;
};

/// One collider run on the ranks of a communicator (fusetrack/collider.h). The slots are walked in waves of
/// w = min(n1, n2) consecutive slots: w consecutive slots hold w different bunches of each beam, so their
/// crossings are independent. A wave is three passes over this rank's bunches: every arrival (the GPU's
/// queued without waits), the exchanges with the partners' owners in slot order, every departure. Each
/// bunch's own operations and their integers are those of a walk slot by slot, so the records and particles
/// are the same bits for any rank count, placement and wave. Every rank takes its exchanges in increasing
/// slot order, and one that waits at slot k waits for a partner whose earlier exchanges are done or only
/// need ranks at slots below k: the walk cannot deadlock.
class ColliderRun {
 public:
  ColliderRun(const ColliderSetup& setup, ElementRegistry& registry, const CollideOptions& options, Communicator& comm)
      : m_setup(setup), m_registry(registry), m_o(options), m_comm(comm), m_t_start(Clock::now()) {}

  CollideResult run() {
    if (m_o.turns < 1) {
      InputLocation at;
      at.field = "turns";
      throw InputError(at, fmt::format("must be at least 1, got {}", m_o.turns));
    }
    m_result.root = m_comm.is_root();
    m_result.ranks = m_comm.size();
    set_up_beams();
    if (m_o.wave_slots < 0 || m_o.wave_slots > std::min(m_n1, m_n2)) {
      InputLocation at;
      at.field = "wave_slots";
      throw InputError(at, fmt::format("must be 0 (min(n1, n2)) or at most {} (min(n1, n2)), got {}",
                                       std::min(m_n1, m_n2), m_o.wave_slots));
    }
    place_bunches();
    read_resume_state();
    make_bunches();
    open_records();
    walk();
    if (m_result.stopped_at >= 0) {
      if (m_comm.is_root())
        fmt::print(stderr, "collide: stopped after crossing {} of {} (turn {}); resume with --resume\n", m_stop_slot,
                   m_slots, m_stop_slot / m_n1);
      return std::move(m_result);
    }
    if (m_csv.is_open()) {
      m_csv.close();
      if (!m_csv) throw Error("writing " + m_csv_path + " failed");
      m_result.output_files.push_back(m_csv_path);
    }
    if (m_result.root) summarise();
    if (m_gpu_context) m_result.gpu_kernel_seconds = m_gpu_context->kernel_seconds();
    m_result.seconds = seconds_since(m_t_start);
    if (m_result.root && !m_o.output_dir.empty()) {
      const std::string path = (std::filesystem::path(m_o.output_dir) / "summary.json").string();
      write_file_atomically(path, collide_summary_json(m_setup, m_o, m_result).dump(2) + "\n");
      m_result.output_files.push_back(path);
    }
    return std::move(m_result);
  }

 private:
  // ---- set-up ----------------------------------------------------------------------------------

  /// Beams: ring, optics at the IP, matched sizes, kick parameters, slicing; the beam-beam parameters.
  void set_up_beams() {
    for (int j = 0; j < 2; ++j) set_up_ring(j);
    for (int j = 0; j < 2; ++j) set_up_kick(j);
    for (int j = 0; j < 2; ++j) {
      const BeamRuntime& b = m_beams[static_cast<size_t>(j)];
      const BeamRuntime& p = m_beams[static_cast<size_t>(1 - j)];
      const double n = p.beam->bunches.intensity;
      m_result.xi[static_cast<size_t>(j)][0] =
          -b.params.kick_per_particle * n * b.optics.beta_x / (4 * kPi * p.sigma_x * (p.sigma_x + p.sigma_y));
      m_result.xi[static_cast<size_t>(j)][1] =
          -b.params.kick_per_particle * n * b.optics.beta_y / (4 * kPi * p.sigma_y * (p.sigma_x + p.sigma_y));
      m_result.tunes[static_cast<size_t>(j)] = {b.optics.qx, b.optics.qy};
    }
    if (m_beams[0].optics.circumference > 0)
      m_result.crossing_frequency = m_setup.beams[0].reference.beta0() * kSpeedOfLight /
                                    m_beams[0].optics.circumference * m_setup.beams[0].bunches.count;
    m_n1 = m_setup.beams[0].bunches.count;
    m_n2 = m_setup.beams[1].bunches.count;
    m_slots = m_o.turns * m_n1;
    m_result.slots = m_slots;
  }

  /// Beam j's ring (linear map or lattice, whose reference particle fills in the set-up's), its optics at
  /// the IP and its matched sizes.
  void set_up_ring(int j) {
    BeamRuntime& b = m_beams[static_cast<size_t>(j)];
    ColliderBeam& cb = m_setup.beams[static_cast<size_t>(j)];
    b.beam = &cb;
    b.index = j;
    b.frozen = m_setup.frozen_beam == j;
    if (cb.linear_map) {
      const LinearRingMap& m = *cb.linear_map;
      b.optics.beta_x = m.beta_x, b.optics.alpha_x = m.alpha_x, b.optics.gamma_x = (1 + m.alpha_x * m.alpha_x) / m.beta_x;
      b.optics.beta_y = m.beta_y, b.optics.alpha_y = m.alpha_y, b.optics.gamma_y = (1 + m.alpha_y * m.alpha_y) / m.beta_y;
      b.optics.qx = m.qx - std::floor(m.qx), b.optics.qy = m.qy - std::floor(m.qy);
      b.optics.circumference = m.circumference;
      b.ring = ring_map(m);
    } else {
      b.lattice = std::make_unique<Lattice>(load_lattice(cb.lattice_file, m_registry, LatticeFileOptions{}));
      if (b.lattice->has_collective()) {
        InputLocation at{m_setup.file};
        at.field = fmt::format("beams[{}].lattice", j);
        throw InputError(at, cb.lattice_file + " has collective elements; a collider ring has none yet");
      }
      const ReferenceParticle& r = b.lattice->reference();
      if (cb.reference.mass0 == 0.0) cb.reference = r;  // none given in the set-up
      if (r.mass0 != cb.reference.mass0 || r.q0 != cb.reference.q0 || r.p0c != cb.reference.p0c) {
        InputLocation at{m_setup.file};
        at.field = fmt::format("beams[{}].reference", j);
        throw InputError(at, fmt::format("differs from the reference particle of its lattice {}", cb.lattice_file));
      }
      b.optics = compute_linear_optics(*b.lattice);
      std::vector<std::string> notices;
      b.backend = make_backend(*b.lattice, m_o.backend, &notices);
      if (m_comm.is_root())
        for (const std::string& n : notices) fmt::print(stderr, "note: beam {}: {}\n", j + 1, n);
    }
    const double bg = cb.reference.beta0() * cb.reference.gamma0();
    const double ex = cb.bunches.emittance_nx / bg, ey = cb.bunches.emittance_ny / bg;
    b.sigma_x = std::sqrt(ex * b.optics.beta_x), b.sigma_y = std::sqrt(ey * b.optics.beta_y);
    b.sigma_px = std::sqrt(ex * b.optics.gamma_x), b.sigma_py = std::sqrt(ey * b.optics.gamma_y);
    b.params.phi = m_setup.ip.phi;
    b.params.alpha = j == 0 ? m_setup.ip.alpha : kPi - m_setup.ip.alpha;
    b.params.longitudinal = m_setup.ip.six_d ? 1 : 0;
    b.particles_per_macro = cb.bunches.intensity / static_cast<double>(cb.bunches.macroparticles);
  }

  /// Beam j's kick of one partner particle, and its slices and fixed-point ranges in the boosted frame:
  /// x* = x + zeta tan(phi) cos(alpha), zeta* = zeta / cos(phi), ...
  void set_up_kick(int j) {
    BeamRuntime& b = m_beams[static_cast<size_t>(j)];
    const ColliderBeam& partner = m_setup.beams[static_cast<size_t>(1 - j)];
    const InteractionPoint& ip = m_setup.ip;
    try {
      bb6d_prepare_params(b.params, b.beam->reference.q0, b.beam->reference.p0c, b.beam->reference.beta0(),
                          partner.reference.q0, partner.reference.beta0());
    } catch (const std::invalid_argument& e) {
      InputLocation at{m_setup.file};
      at.field = fmt::format("beams[{}].reference", j);
      throw InputError(at, e.what());
    }
    const double k = ip.moment_range, t = std::fabs(b.params.tan_phi), sz = b.beam->bunches.sigma_zeta;
    const double sd = std::max(b.beam->bunches.sigma_delta, 1e-9);
    b.ranges = {k * (b.sigma_x + sz * t), k * b.sigma_px / b.params.cos_phi + k * sd * t,
                k * (b.sigma_y + sz * t), k * b.sigma_py / b.params.cos_phi + k * sd * t,
                k * (sz / b.params.cos_phi + (b.sigma_x + b.sigma_y) * t), k * (sd + (b.sigma_px + b.sigma_py) * t)};
    const double half = (ip.six_d ? ip.slice_range : ip.moment_range) * sz / b.params.cos_phi;
    b.grid.n_slices = ip.slices;
    b.grid.linear = 0;
    b.grid.zeta_min = -half;
    b.grid.zeta_max = half;
    b.grid.inv_dz = ip.slices / (2 * half);
  }

  int owner(int beam, int bunch) const {
    return owner_of(beam == 0 ? bunch : m_n1 + bunch, m_n1 + m_n2, m_comm.size(), m_o.placement);
  }

  /// A bunch kept on the GPU: a linear-map ring's, not frozen, with a GPU context on this rank.
  bool on_gpu(int beam) const {
    const BeamRuntime& b = m_beams[static_cast<size_t>(beam)];
    return m_gpu_context && b.beam->linear_map && !b.frozen;
  }

  /// Bunches on ranks; the GPU of this rank (its node-local rank's) when it holds bunches of linear-map rings
  /// and one is asked for, or found with --device auto (lattice rings and frozen beams stay on the host: a
  /// lattice ring's turn runs on the backend of o.backend). Rank 0 says how many ranks hold no bunch.
  void place_bunches() {
    const int total = m_n1 + m_n2;
    std::vector<char> holds(static_cast<size_t>(m_comm.size()), 0);
    bool wants_gpu = false;
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < m_setup.beams[static_cast<size_t>(j)].bunches.count; ++i) {
        holds[static_cast<size_t>(owner(j, i))] = 1;
        if (owner(j, i) == m_comm.rank())
          wants_gpu = wants_gpu || (m_setup.beams[static_cast<size_t>(j)].linear_map && m_setup.frozen_beam != j);
      }
    m_result.idle_ranks = static_cast<int>(std::count(holds.begin(), holds.end(), 0));
    if (m_comm.is_root() && m_result.idle_ranks > 0)
      fmt::print(stderr, "collide: {} ranks for {} bunches: {} {} no bunch\n", m_comm.size(), total,
                 m_result.idle_ranks, m_result.idle_ranks == 1 ? "rank holds" : "ranks hold");
    if (m_o.backend.device == "cpu" || !wants_gpu) return;
    try {
      const std::vector<GpuInfo> gpus = list_gpus();
      if (gpus.empty()) throw DeviceError(gpu_unavailable_reason().empty() ? "no GPU found" : gpu_unavailable_reason());
      const size_t device = static_cast<size_t>(m_comm.local_rank()) % gpus.size();
      m_gpu_context = std::make_unique<GpuColliderContext>(static_cast<int>(device), m_o.fma);
      m_result.device = fmt::format("GPU {} ({})", device, gpus[device].name);
    } catch (const DeviceError& e) {
      if (m_o.backend.device == "gpu") throw;
      if (m_comm.is_root())
        fmt::print(stderr, "note: no usable GPU ({}); the collider's bunches are tracked on the CPU\n", e.what());
    }
  }

  /// Resuming: the slot of the last checkpoint (state.json); the bunches' particles follow in make_bunches.
  void read_resume_state() {
    if ((m_o.checkpoint_every > 0 || m_o.resume || m_o.stop_after > 0) && m_o.output_dir.empty()) {
      InputLocation at;
      at.field = "output";
      throw InputError(at, "checkpoints (checkpoint_every, resume, stop_after) need an output directory");
    }
    m_checkpoint_dir = std::filesystem::path(m_o.output_dir) / "checkpoint";
    if (!m_o.resume) return;
    const std::string state_file = (m_checkpoint_dir / "state.json").string();
    if (!std::filesystem::exists(state_file)) throw InputError(InputLocation{state_file}, "no checkpoint to resume from");
    const nlohmann::ordered_json state = parse_json_file(state_file);
    if (state.value("setup_fingerprint", std::string()) != setup_fingerprint(m_setup))
      throw InputError(InputLocation{state_file}, "the checkpoint belongs to another set-up; refusing to resume");
    m_first_slot = state.at("slot").get<int64_t>();
    if (m_first_slot > m_slots)
      throw InputError(InputLocation{state_file},
                       fmt::format("the checkpoint is at crossing {}, beyond this run's {}", m_first_slot, m_slots));
    if (m_comm.is_root()) fmt::print(stderr, "collide: resuming from {} at crossing {}\n", state_file, m_first_slot);
  }

  /// This rank's bunches: from the checkpoint when resuming (bunch files do not depend on the placement: any
  /// rank count resumes any other's run), else from the particle file or the matched Gaussian, whose particle
  /// i of bunch b of beam j is drawn from (seed + 1000003 j + b, i) on the GPU or the host alike.
  void make_bunches() {
    for (int j = 0; j < 2; ++j) {
      const ColliderBeam& cb = m_setup.beams[static_cast<size_t>(j)];
      m_bunches[static_cast<size_t>(j)].resize(static_cast<size_t>(cb.bunches.count));
      for (int i = 0; i < cb.bunches.count; ++i)
        if (owner(j, i) == m_comm.rank()) m_bunches[static_cast<size_t>(j)][static_cast<size_t>(i)] = make_bunch(j, i);
    }
  }

  std::unique_ptr<Bunch> make_bunch(int j, int i) {
    const ColliderBeam& cb = m_setup.beams[static_cast<size_t>(j)];
    const BeamRuntime& b = m_beams[static_cast<size_t>(j)];
    auto bunch = std::make_unique<Bunch>();
    bunch->beam = j, bunch->index = i;
    bunch->count = cb.bunches.macroparticles;
    const double beta0 = cb.reference.beta0();
    if (m_o.resume) {
      bunch->particles = Particles(bunch->count, beta0);
      read_bunch_checkpoint((m_checkpoint_dir / bunch_checkpoint_name(j, i, m_first_slot)).string(), *bunch);
    } else if (!cb.bunches.particles_file.empty()) {
      bunch->particles = read_particles(cb.bunches.particles_file, beta0);
      if (bunch->particles.size() != cb.bunches.macroparticles) {
        InputLocation at{m_setup.file};
        at.field = fmt::format("beams[{}].bunches.macroparticles", j);
        throw InputError(at, fmt::format("is {} but {} holds {} particles", cb.bunches.macroparticles,
                                         cb.bunches.particles_file, bunch->particles.size()));
      }
    } else {
      const ft_gaussian_bunch g =
          gaussian_bunch(cb.reference, b.optics, cb.bunches.emittance_nx, cb.bunches.emittance_ny,
                         cb.bunches.sigma_zeta, cb.bunches.sigma_delta);
      const uint64_t seed = cb.bunches.seed + 1000003ull * static_cast<uint64_t>(j) + static_cast<uint64_t>(i);
      if (on_gpu(j)) {
        bunch->gpu = std::make_unique<GpuColliderBunch>(*m_gpu_context, g, seed, 0, bunch->count);
        return bunch;
      }
      bunch->particles = sample_gaussian_bunch(g, seed, 0, bunch->count, m_o.threads);
    }
    if (on_gpu(j)) {
      bunch->gpu = std::make_unique<GpuColliderBunch>(*m_gpu_context, bunch->particles);
      bunch->particles = Particles();
    }
    return bunch;
  }

  /// Rank 0's outputs: bunches.csv (the resumed part's records first) and the per-bunch series.
  void open_records() {
    std::vector<CrossingRecord> replay;  // records of the resumed part, from bunches.csv
    if (m_result.root && !m_o.output_dir.empty()) {
      std::filesystem::create_directories(m_o.output_dir);
      m_csv_path = (std::filesystem::path(m_o.output_dir) / "bunches.csv").string();
      if (m_o.resume) replay = read_csv_records(m_csv_path, m_first_slot);
      m_csv.open(m_csv_path);
      if (!m_csv) throw Error("cannot write " + m_csv_path);
      m_csv << kCsvHeader;
      for (const CrossingRecord& r : replay) write_csv_row(m_csv, r);
    }
    for (int j = 0; j < 2; ++j) {
      const size_t nb = static_cast<size_t>(m_setup.beams[static_cast<size_t>(j)].bunches.count);
      m_series[static_cast<size_t>(j)].resize(nb);
      m_lumi_sum[static_cast<size_t>(j)].assign(nb, 0.0);
      m_summaries[static_cast<size_t>(j)].resize(nb);
    }
    for (const CrossingRecord& r : replay) accumulate(r);
  }

  // ---- the walk ---------------------------------------------------------------------------------

  /// Blocks of slots, each ending with the records gathered to rank 0 (one MPI_Allreduce, where all ranks
  /// meet) and, at checkpoint turns and at a stop, a checkpoint. A block spans at least 16 turns' worth of
  /// every bunch, so that the meeting is rare.
  void walk() {
    const int64_t block = std::max<int64_t>(256, 16 * static_cast<int64_t>(m_n1 + m_n2));
    m_records.assign(static_cast<size_t>(block) * 2 * kRecordFields, 0.0);
    const int64_t checkpoint_slots = m_o.checkpoint_every * m_n1;
    m_stop_slot = m_o.stop_after > 0 ? std::min(m_slots, m_o.stop_after * m_n1) : m_slots;
    int64_t previous_checkpoint = m_o.resume ? m_first_slot : -1;
    for (int64_t block_start = m_first_slot; block_start < m_stop_slot;) {
      int64_t block_end = std::min(m_stop_slot, block_start + block);
      if (checkpoint_slots > 0)
        block_end = std::min(block_end, (block_start / checkpoint_slots + 1) * checkpoint_slots);
      walk_block(block_start, block_end);
      gather_records(block_start, block_end);
      const bool at_checkpoint =
          (checkpoint_slots > 0 && block_end % checkpoint_slots == 0) || block_end == m_stop_slot;
      if (at_checkpoint && (checkpoint_slots > 0 || block_end < m_slots)) {
        checkpoint(block_end, previous_checkpoint);
        previous_checkpoint = block_end;
      }
      block_start = block_end;
    }
    m_result.stopped_at = m_stop_slot < m_slots ? m_stop_slot : -1;
  }

  /// Slots [begin, end) in waves of min(n1, n2) slots (or wave_slots; the last one shorter at the block's end).
  void walk_block(int64_t begin, int64_t end) {
    std::fill(m_records.begin(), m_records.end(), 0.0);
    const int64_t wave = m_o.wave_slots > 0 ? m_o.wave_slots : std::min(m_n1, m_n2);
    for (int64_t first = begin; first < end; first += wave) {
      const int64_t last = std::min(end, first + wave);
      walk_wave(first, last, begin);
      if (m_o.progress_every > 0 && m_result.root)
        for (int64_t slot = first; slot < last; ++slot)
          if ((slot + 1) % m_o.progress_every == 0)
            fmt::print(stderr, "collide: slot {} of {} ({:.1f} s)\n", slot + 1, m_slots, seconds_since(m_t_start));
    }
  }

  /// One wave: the crossings of this rank's bunches, arrivals, exchanges in slot order, departures.
  void walk_wave(int64_t begin, int64_t end, int64_t block_start) {
    std::vector<Crossing> wave;
    for (int64_t slot = begin; slot < end; ++slot) {
      Crossing c;
      c.slot = slot;
      c.pair = {static_cast<int>(slot % m_n1), static_cast<int>(slot % m_n2)};
      c.owners = {owner(0, c.pair[0]), owner(1, c.pair[1])};
      for (int j = 0; j < 2; ++j)
        if (c.owners[static_cast<size_t>(j)] == m_comm.rank())
          c.mine[static_cast<size_t>(j)] =
              m_bunches[static_cast<size_t>(j)][static_cast<size_t>(c.pair[static_cast<size_t>(j)])].get();
      if (c.mine[0] || c.mine[1]) wave.push_back(std::move(c));
    }
    for (Crossing& c : wave)
      for (int j = 0; j < 2; ++j)
        if (c.mine[static_cast<size_t>(j)]) begin_arrival(c, j);
    for (Crossing& c : wave) {
      for (int j = 0; j < 2; ++j)
        if (c.mine[static_cast<size_t>(j)]) end_arrival(c, j);
      exchange(c);
    }
    for (Crossing& c : wave)
      for (int j = 0; j < 2; ++j)
        if (c.mine[static_cast<size_t>(j)]) depart(c, j, block_start);
  }

  /// The slice-moment integers of boosted particles into the bunch's moments (+ out_of_range last).
  void deposit(Bunch& bunch, const Particles& boosted) const {
    const BeamRuntime& b = m_beams[static_cast<size_t>(bunch.beam)];
    SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.count, 1));
    reducer.deposit(boosted, m_o.threads);
    bunch.moments = reducer.accumulators();
    bunch.moments.push_back(reducer.out_of_range());
  }

  /// Arrival of beam j's bunch, first half: in one pass the record sums of the arriving particles and their
  /// boost (a frozen bunch is never boosted: its moments are taken once, from a boosted copy), and the slice
  /// moments; a GPU bunch's kernels are queued (end_arrival takes their results).
  void begin_arrival(Crossing& c, int j) {
    Bunch& bunch = *c.mine[static_cast<size_t>(j)];
    const BeamRuntime& b = m_beams[static_cast<size_t>(j)];
    const auto t0 = Clock::now();
    if (bunch.gpu) {
      if (m_o.check_gpu && m_o.fma == FmaMode::Off && bunch.crossings == 0) check_arrival(bunch);
      SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.count, 1));
      bunch.gpu->launch_arrival(b.params, reducer.grid(), reducer.scales(), reducer.accumulators().size());
    } else {
      c.sums[static_cast<size_t>(j)] = cpu_arrival(b.params, !b.frozen, bunch.particles, m_o.threads);
      if (!b.frozen) {
        deposit(bunch, bunch.particles);
      } else if (bunch.moments.empty()) {
        Particles boosted = bunch.particles;
        (void)cpu_arrival(b.params, true, boosted, m_o.threads);
        deposit(bunch, boosted);
      }
    }
    m_result.deposit_seconds += seconds_since(t0);
  }

  /// Arrival, second half: a GPU bunch's results, then the record of the arriving bunch.
  void end_arrival(Crossing& c, int j) {
    Bunch& bunch = *c.mine[static_cast<size_t>(j)];
    const auto t0 = Clock::now();
    if (bunch.gpu) {
      const BeamRuntime& b = m_beams[static_cast<size_t>(j)];
      const SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.count, 1));
      std::vector<uint64_t> acc(reducer.accumulators().size(), 0);
      uint64_t rejected = 0;
      c.sums[static_cast<size_t>(j)] = bunch.gpu->finish_arrival(acc, rejected);
      bunch.moments = std::move(acc);
      bunch.moments.push_back(rejected);
    }
    const BunchStats s = stats_from_sums(c.sums[static_cast<size_t>(j)]);
    CrossingRecord& r = c.rec[static_cast<size_t>(j)];
    r.slot = c.slot, r.beam = j, r.bunch = bunch.index, r.partner = c.pair[static_cast<size_t>(1 - j)];
    r.turn = bunch.crossings;
    r.alive = s.alive, r.mean = s.mean;
    r.sigma_x = std::sqrt(s.xx), r.sigma_y = std::sqrt(s.yy), r.sigma_zeta = std::sqrt(s.zz);
    r.sigma_delta = std::sqrt(s.dd);
    r.emittance_x = std::sqrt(std::max(0.0, s.xx * s.pxpx - s.xpx * s.xpx));
    r.emittance_y = std::sqrt(std::max(0.0, s.yy * s.pypy - s.ypy * s.ypy));
    m_result.deposit_seconds += seconds_since(t0);
  }

  /// The first crossing of a GPU bunch with fma off, arrival: its first check_sample particles (all with 0)
  /// copied into a separate GPU bunch and to the host, arrived on both, the record sums and the slice-moment
  /// integers compared bit for bit; the departure follows in check_departure. The bunch itself is untouched.
  void check_arrival(Bunch& bunch) {
    const BeamRuntime& b = m_beams[static_cast<size_t>(bunch.beam)];
    const size_t n = m_o.check_sample > 0 ? std::min(m_o.check_sample, bunch.count) : bunch.count;
    bunch.gpu->download(bunch.sample_cpu, 0, n);
    bunch.sample_gpu = std::make_unique<GpuColliderBunch>(*m_gpu_context, bunch.sample_cpu);
    SliceMomentReducer gpu_reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.count, 1));
    std::vector<uint64_t> gpu_moments(gpu_reducer.accumulators().size(), 0);
    uint64_t rejected = 0;
    const std::vector<double> gpu_sums =
        bunch.sample_gpu->arrive(b.params, gpu_reducer.grid(), gpu_reducer.scales(), gpu_moments, rejected);
    gpu_moments.push_back(rejected);
    const std::vector<double> cpu_sums = cpu_arrival(b.params, true, bunch.sample_cpu, m_o.threads);
    SliceMomentReducer cpu_reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.count, 1));
    cpu_reducer.deposit(bunch.sample_cpu, m_o.threads);
    std::vector<uint64_t> cpu_moments = cpu_reducer.accumulators();
    cpu_moments.push_back(cpu_reducer.out_of_range());
    if (std::memcmp(cpu_sums.data(), gpu_sums.data(), gpu_sums.size() * sizeof(double)) != 0 ||
        cpu_moments != gpu_moments)
      throw DeviceError(
          fmt::format("collide: the GPU's arrival step (record sums, boost, slice moments) differs "
                      "from the CPU's on the first {} particles of beam {} bunch {} (fma off); run "
                      "with --device cpu",
                      n, bunch.beam + 1, bunch.index));
  }

  /// The check's departure: the sample kicked with the bunch's partner slices, boosted back and turned on the
  /// GPU and on the CPU, every particle array compared bit for bit.
  void check_departure(Bunch& bunch, const std::vector<Bb6dSlice>& slices, const ColliderRingMap* ring, int turn) {
    const BeamRuntime& b = m_beams[static_cast<size_t>(bunch.beam)];
    bunch.sample_gpu->depart(b.params, slices, ring, turn);
    cpu_departure(b.params, slices, ring, bunch.sample_cpu, turn, m_o.threads);
    Particles device;
    bunch.sample_gpu->download(device);
    if (!same_particles(device, bunch.sample_cpu))
      throw DeviceError(
          fmt::format("collide: the GPU's departure step (kick, inverse boost, linear turn) differs "
                      "from the CPU's on the first {} particles of beam {} bunch {} (fma off); run "
                      "with --device cpu",
                      device.size(), bunch.beam + 1, bunch.index));
    bunch.sample_gpu.reset();
    bunch.sample_cpu = Particles();
    ++m_result.gpu_checks;
  }

  /// The slice-moment integers swapped with the partner's owner (a copy when both are here).
  void exchange(Crossing& c) {
    for (int j = 0; j < 2; ++j) {
      Bunch* own = c.mine[static_cast<size_t>(j)];
      if (!own) continue;
      std::vector<uint64_t>& partner = c.partner_moments[static_cast<size_t>(j)];
      if (Bunch* other = c.mine[static_cast<size_t>(1 - j)]) {
        partner = other->moments;
        continue;
      }
      const auto t0 = Clock::now();
      partner.assign(own->moments.size(), 0);  // both beams have ip.slices slices
      m_comm.exchange(c.owners[static_cast<size_t>(1 - j)], own->moments.data(), partner.data(), partner.size(),
                      static_cast<int>(c.slot % 32000));
      m_result.exchange_seconds += seconds_since(t0);
    }
  }

  /// The slice moments of beam `beam`'s integers, scaled as its owner deposited them (max_particles = its
  /// macroparticles): both owners read the same integers with the same scales.
  SliceMoments moments_of(int beam, const std::vector<uint64_t>& acc, uint64_t& out_of_range) const {
    const BeamRuntime& b = m_beams[static_cast<size_t>(beam)];
    SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(b.beam->bunches.macroparticles, 1));
    std::vector<uint64_t> a(acc.begin(), acc.end() - 1);
    out_of_range = acc.back();
    reducer.add_accumulators(a, 0);
    return reducer.moments();
  }

  /// Departure of beam j's bunch: the kick of the partner's slices in this beam's frame, the inverse boost and,
  /// for a linear map, the turn in one pass (a lattice ring's turn follows); the record completed (luminosity,
  /// coupling, unused charge) into the block's rows.
  void depart(Crossing& c, int j, int64_t block_start) {
    Bunch& bunch = *c.mine[static_cast<size_t>(j)];
    const BeamRuntime& b = m_beams[static_cast<size_t>(j)];
    const BeamRuntime& pb = m_beams[static_cast<size_t>(1 - j)];
    const int min_macro = m_setup.ip.min_slice_macroparticles;
    const auto t0 = Clock::now();
    uint64_t partner_out = 0, own_out = 0;
    const SliceMoments pm = moments_of(1 - j, c.partner_moments[static_cast<size_t>(j)], partner_out);
    const SliceMoments om = moments_of(j, bunch.moments, own_out);
    double unused = static_cast<double>(partner_out), coupling = 0.0, own_unused = 0.0, own_coupling = 0.0;
    std::vector<Bb6dSlice> slices = usable_slices(pm, pb.particles_per_macro, min_macro, unused, coupling);
    for (Bb6dSlice& s : slices) s = slice_in_partner_frame(s);
    std::vector<Bb6dSlice> own = usable_slices(om, b.particles_per_macro, min_macro, own_unused, own_coupling);
    if (!m_setup.ip.six_d) {  // 4D: the bunches meet at the IP (S = 0), in the kick and in the luminosity
      for (Bb6dSlice& s : slices) s.zeta = 0.0;
      for (Bb6dSlice& s : own) s.zeta = 0.0;
    }
    CrossingRecord& rec = c.rec[static_cast<size_t>(j)];
    rec.luminosity = own.empty() || slices.empty() ? 0.0 : luminosity_per_crossing(own, slices);
    rec.coupling = coupling;
    rec.unused_charge = unused;
    const int turn = static_cast<int>(bunch.crossings);
    const ColliderRingMap* ring = b.beam->linear_map ? &b.ring : nullptr;
    if (bunch.gpu) {
      bunch.gpu->depart(b.params, slices, ring, turn);
      if (bunch.sample_gpu) check_departure(bunch, slices, ring, turn);
    } else if (!b.frozen) {
      cpu_departure(b.params, slices, ring, bunch.particles, turn, m_o.threads);
    }
    m_result.kick_seconds += seconds_since(t0);
    const auto t1 = Clock::now();
    if (!b.frozen && !ring) {
      TrackOptions to;
      to.turns = 1;
      to.first_turn = bunch.crossings;
      to.threads = m_o.threads;
      to.fma = m_o.fma;
      b.backend->track(bunch.particles, to);
    }
    ++bunch.crossings;
    m_result.transport_seconds += seconds_since(t1);
    pack_record(rec, m_records.data() +
                         (static_cast<size_t>(c.slot - block_start) * 2 + static_cast<size_t>(j)) * kRecordFields);
  }

  // ---- records, checkpoints, summary ------------------------------------------------------------

  /// The block's records to rank 0 (a sum: other ranks' rows are 0), into bunches.csv and the series.
  void gather_records(int64_t begin, int64_t end) {
    if (m_comm.size() > 1) m_comm.allreduce_sum(m_records.data(), m_records.size());
    for (int64_t slot = begin; m_result.root && slot < end; ++slot)
      for (int j = 0; j < 2; ++j) {
        const double* f =
            m_records.data() + (static_cast<size_t>(slot - begin) * 2 + static_cast<size_t>(j)) * kRecordFields;
        const CrossingRecord r = unpack_record(f);
        if (m_csv.is_open()) write_csv_row(m_csv, r);
        accumulate(r);
      }
  }

  void accumulate(const CrossingRecord& r) {
    const size_t j = static_cast<size_t>(r.beam), b = static_cast<size_t>(r.bunch);
    auto& ser = m_series[j][b];
    ser[0].push_back(r.mean[0]);
    ser[1].push_back(r.mean[2]);
    m_lumi_sum[j][b] += r.luminosity;
    if (j == 0) m_lumi_total += r.luminosity;
    BunchSummary& bs = m_summaries[j][b];
    if (r.turn == 0) bs.initial_emittance_x = r.emittance_x, bs.initial_emittance_y = r.emittance_y;
    bs.final_emittance_x = r.emittance_x, bs.final_emittance_y = r.emittance_y, bs.final_alive = r.alive;
    if (m_o.keep_records) m_result.records.push_back(r);
  }

  /// Every bunch's particles (its owner; a GPU bunch's copied to the host for the file and dropped again),
  /// then the slot (rank 0) once all are written; the previous checkpoint's files removed.
  void checkpoint(int64_t slot, int64_t previous) {
    std::filesystem::create_directories(m_checkpoint_dir);
    for (int j = 0; j < 2; ++j)
      for (auto& bunch : m_bunches[static_cast<size_t>(j)]) {
        if (!bunch) continue;
        if (bunch->gpu) bunch->gpu->download(bunch->particles);
        write_bunch_checkpoint((m_checkpoint_dir / bunch_checkpoint_name(j, bunch->index, slot)).string(), *bunch);
        if (bunch->gpu) bunch->particles = Particles();
        if (previous >= 0) std::filesystem::remove(m_checkpoint_dir / bunch_checkpoint_name(j, bunch->index, previous));
      }
    m_comm.barrier();
    if (m_result.root) {
      m_csv.flush();
      nlohmann::ordered_json state = {{"slot", slot}, {"setup_fingerprint", setup_fingerprint(m_setup)}};
      write_file_atomically((m_checkpoint_dir / "state.json").string(), state.dump(2) + "\n");
    }
  }

  /// Rank 0: per-bunch summaries, the coherent modes (one bunch per beam), the luminosity, the spectra.
  void summarise() {
    for (int j = 0; j < 2; ++j)
      for (size_t i = 0; i < m_summaries[static_cast<size_t>(j)].size(); ++i) {
        BunchSummary& bs = m_summaries[static_cast<size_t>(j)][i];
        const auto& ser = m_series[static_cast<size_t>(j)][i];
        bs.beam = j, bs.bunch = static_cast<int>(i);
        bs.mean_luminosity =
            ser[0].empty() ? 0.0 : m_lumi_sum[static_cast<size_t>(j)][i] / static_cast<double>(ser[0].size());
        bs.peak_tune_x = peak_tune(ser[0]);
        bs.peak_tune_y = peak_tune(ser[1]);
        m_result.bunches.push_back(bs);
      }
    m_result.sigma_mode = {std::nan(""), std::nan("")};
    m_result.pi_mode = {std::nan(""), std::nan("")};
    if (m_n1 == 1 && m_n2 == 1 && m_setup.frozen_beam < 0) {  // weak-strong: no coherent modes
      for (int plane = 0; plane < 2; ++plane) {
        const auto& a = m_series[0][0][static_cast<size_t>(plane)];
        const auto& b = m_series[1][0][static_cast<size_t>(plane)];
        // Lab frame: beam 2's x is reversed (x_lab = -x), y is shared.
        const double sign = plane == 0 ? -1.0 : 1.0;
        std::vector<double> sum(a.size()), diff(a.size());
        for (size_t t = 0; t < a.size(); ++t) sum[t] = a[t] + sign * b[t], diff[t] = a[t] - sign * b[t];
        m_result.sigma_mode[static_cast<size_t>(plane)] = peak_tune(sum);
        m_result.pi_mode[static_cast<size_t>(plane)] = peak_tune(diff);
      }
    }
    if (m_result.crossing_frequency > 0)
      m_result.luminosity = m_result.crossing_frequency * m_lumi_total / static_cast<double>(m_slots);
    if (!m_o.output_dir.empty()) write_spectra();
  }

  /// spectra.csv: the spectra of the centroids, every bunch, both planes (runs of 16 crossings or more).
  void write_spectra() {
    size_t longest = 0;
    for (const auto& beam_series : m_series)
      for (const auto& s : beam_series) longest = std::max(longest, s[0].size());
    if (longest < 16) return;
    size_t m = 1;
    while (m < 2 * longest) m *= 2;
    std::vector<std::vector<double>> columns;
    std::string header = "tune";
    for (int j = 0; j < 2; ++j)
      for (size_t i = 0; i < m_series[static_cast<size_t>(j)].size(); ++i)
        for (int plane = 0; plane < 2; ++plane) {
          const auto& s = m_series[static_cast<size_t>(j)][i][static_cast<size_t>(plane)];
          columns.push_back(s.size() >= 16 ? amplitude_spectrum(s, m) : std::vector<double>(m + 1, 0.0));
          header += fmt::format(",b{}_{}_{}", j + 1, i, plane == 0 ? "x" : "y");
        }
    const std::string path = (std::filesystem::path(m_o.output_dir) / "spectra.csv").string();
    write_file_atomically(path, [&](std::ostream& out) {
      out << header << "\n";
      for (size_t k = 0; k <= m; ++k) {
        out << fmt::format("{:.10g}", static_cast<double>(k) / (2.0 * static_cast<double>(m)));
        for (const auto& c : columns) out << fmt::format(",{:.6e}", c[k]);
        out << "\n";
      }
    });
    m_result.output_files.push_back(path);
  }

  ColliderSetup m_setup;  // lattice rings fill in their reference particle
  ElementRegistry& m_registry;
  const CollideOptions& m_o;
  Communicator& m_comm;
  const Clock::time_point m_t_start;
  CollideResult m_result;
  std::array<BeamRuntime, 2> m_beams;
  int m_n1 = 1, m_n2 = 1;
  int64_t m_slots = 0, m_first_slot = 0, m_stop_slot = 0;
  std::unique_ptr<GpuColliderContext> m_gpu_context;  // before the bunches: they go first
  std::array<std::vector<std::unique_ptr<Bunch>>, 2> m_bunches;
  std::filesystem::path m_checkpoint_dir;
  std::ofstream m_csv;
  std::string m_csv_path;
  std::vector<double> m_records;  // one block's rows, 2 per slot
  // Rank 0: centroid series per (beam, bunch), x and y, per-bunch luminosity sums and summaries.
  std::array<std::vector<std::array<std::vector<double>, 2>>, 2> m_series;
  std::array<std::vector<double>, 2> m_lumi_sum;
  std::array<std::vector<BunchSummary>, 2> m_summaries;
  double m_lumi_total = 0.0;
};

}  // namespace

CollideResult run_collide(const ColliderSetup& setup, ElementRegistry& registry, const CollideOptions& options,
                          Communicator& comm) {
  return ColliderRun(setup, registry, options, comm).run();
}

}  // namespace ft
