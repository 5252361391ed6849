// Two beams colliding (fusetrack/collider.h): bunches on ranks, slots in order, slice moments
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
  Particles particles;
  int64_t crossings = 0;
  std::vector<uint64_t> moments;  // this crossing's integers (+ out_of_range last)
  std::unique_ptr<GpuColliderBunch> gpu;  // the particles live on the GPU (then `particles` is stale)
  Particles check_copy;                   // the first crossing's CPU replica of a GPU bunch (check_gpu)
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

CollideResult run_collide(const ColliderSetup& setup_in, ElementRegistry& registry, const CollideOptions& o,
                          Communicator& comm) {
  ColliderSetup setup = setup_in;  // lattice rings fill in their reference particle below
  const auto t_start = Clock::now();
  if (o.turns < 1) {
    InputLocation at;
    at.field = "turns";
    throw InputError(at, fmt::format("must be at least 1, got {}", o.turns));
  }
  CollideResult result;
  result.root = comm.is_root();
  result.ranks = comm.size();
  const InteractionPoint& ip = setup.ip;

  // Beams: ring, optics at the IP, matched sizes, kick parameters, slicing.
  std::array<BeamRuntime, 2> beams;
  for (int j = 0; j < 2; ++j) {
    BeamRuntime& b = beams[static_cast<size_t>(j)];
    ColliderBeam& cb = setup.beams[static_cast<size_t>(j)];
    b.beam = &cb;
    b.index = j;
    b.frozen = setup.frozen_beam == j;
    if (cb.linear_map) {
      const LinearRingMap& m = *cb.linear_map;
      b.optics.beta_x = m.beta_x, b.optics.alpha_x = m.alpha_x, b.optics.gamma_x = (1 + m.alpha_x * m.alpha_x) / m.beta_x;
      b.optics.beta_y = m.beta_y, b.optics.alpha_y = m.alpha_y, b.optics.gamma_y = (1 + m.alpha_y * m.alpha_y) / m.beta_y;
      b.optics.qx = m.qx - std::floor(m.qx), b.optics.qy = m.qy - std::floor(m.qy);
      b.optics.circumference = m.circumference;
      b.ring = ring_map(m);
    } else {
      b.lattice = std::make_unique<Lattice>(load_lattice(cb.lattice_file, registry, LatticeFileOptions{}));
      if (b.lattice->has_collective()) {
        InputLocation at{setup.file};
        at.field = fmt::format("beams[{}].lattice", j);
        throw InputError(at, cb.lattice_file + " has collective elements; a collider ring has none yet");
      }
      const ReferenceParticle& r = b.lattice->reference();
      if (cb.reference.mass0 == 0.0) cb.reference = r;  // none given in the set-up
      if (r.mass0 != cb.reference.mass0 || r.q0 != cb.reference.q0 || r.p0c != cb.reference.p0c) {
        InputLocation at{setup.file};
        at.field = fmt::format("beams[{}].reference", j);
        throw InputError(at, fmt::format("differs from the reference particle of its lattice {}", cb.lattice_file));
      }
      b.optics = compute_linear_optics(*b.lattice);
      std::vector<std::string> notices;
      b.backend = make_backend(*b.lattice, o.backend, &notices);
      if (comm.is_root())
        for (const std::string& n : notices) fmt::print(stderr, "note: beam {}: {}\n", j + 1, n);
    }
    const double bg = cb.reference.beta0() * cb.reference.gamma0();
    const double ex = cb.bunches.emittance_nx / bg, ey = cb.bunches.emittance_ny / bg;
    b.sigma_x = std::sqrt(ex * b.optics.beta_x), b.sigma_y = std::sqrt(ey * b.optics.beta_y);
    b.sigma_px = std::sqrt(ex * b.optics.gamma_x), b.sigma_py = std::sqrt(ey * b.optics.gamma_y);
    b.params.phi = ip.phi;
    b.params.alpha = j == 0 ? ip.alpha : kPi - ip.alpha;
    b.params.longitudinal = ip.six_d ? 1 : 0;
    b.particles_per_macro = cb.bunches.intensity / static_cast<double>(cb.bunches.macroparticles);
  }
  for (int j = 0; j < 2; ++j) {
    BeamRuntime& b = beams[static_cast<size_t>(j)];
    const ColliderBeam& partner = setup.beams[static_cast<size_t>(1 - j)];
    try {
      bb6d_prepare_params(b.params, b.beam->reference.q0, b.beam->reference.p0c, b.beam->reference.beta0(),
                          partner.reference.q0, partner.reference.beta0());
    } catch (const std::invalid_argument& e) {
      InputLocation at{setup.file};
      at.field = fmt::format("beams[{}].reference", j);
      throw InputError(at, e.what());
    }
    // The slices and ranges in the boosted frame: x* = x + zeta tan(phi) cos(alpha), zeta* = zeta / cos(phi), ...
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
  for (int j = 0; j < 2; ++j) {
    const BeamRuntime& b = beams[static_cast<size_t>(j)];
    const BeamRuntime& p = beams[static_cast<size_t>(1 - j)];
    const double n = p.beam->bunches.intensity;
    result.xi[static_cast<size_t>(j)][0] =
        -b.params.kick_per_particle * n * b.optics.beta_x / (4 * kPi * p.sigma_x * (p.sigma_x + p.sigma_y));
    result.xi[static_cast<size_t>(j)][1] =
        -b.params.kick_per_particle * n * b.optics.beta_y / (4 * kPi * p.sigma_y * (p.sigma_x + p.sigma_y));
    result.tunes[static_cast<size_t>(j)] = {b.optics.qx, b.optics.qy};
  }
  if (beams[0].optics.circumference > 0)
    result.crossing_frequency = setup.beams[0].reference.beta0() * kSpeedOfLight / beams[0].optics.circumference *
                                setup.beams[0].bunches.count;

  // Bunches on ranks.
  const int n1 = setup.beams[0].bunches.count, n2 = setup.beams[1].bunches.count, total = n1 + n2;
  const auto owner = [&](int beam, int bunch) { return owner_of(beam == 0 ? bunch : n1 + bunch, total, comm.size(), o.placement); };
  // Bunches of linear-map rings live on this rank's GPU (its node-local rank's) when one is asked
  // for, or found with --device auto; lattice rings and frozen beams stay on the host (a lattice
  // ring's turn runs on the backend of o.backend).
  std::unique_ptr<GpuColliderContext> gpu_context;
  bool wants_gpu = false;
  for (int j = 0; j < 2; ++j)
    wants_gpu = wants_gpu || (setup.beams[static_cast<size_t>(j)].linear_map && setup.frozen_beam != j);
  if (o.backend.device != "cpu" && wants_gpu) {
    try {
      const std::vector<GpuInfo> gpus = list_gpus();
      if (gpus.empty()) throw DeviceError(gpu_unavailable_reason().empty() ? "no GPU found" : gpu_unavailable_reason());
      const size_t device = static_cast<size_t>(comm.local_rank()) % gpus.size();
      gpu_context = std::make_unique<GpuColliderContext>(static_cast<int>(device), o.fma);
      result.device = fmt::format("GPU {} ({})", device, gpus[device].name);
    } catch (const DeviceError& e) {
      if (o.backend.device == "gpu") throw;
      if (comm.is_root())
        fmt::print(stderr, "note: no usable GPU ({}); the collider's bunches are tracked on the CPU\n", e.what());
    }
  }
  std::array<std::vector<std::unique_ptr<Bunch>>, 2> bunches;
  for (int j = 0; j < 2; ++j) {
    const ColliderBeam& cb = setup.beams[static_cast<size_t>(j)];
    bunches[static_cast<size_t>(j)].resize(static_cast<size_t>(cb.bunches.count));
    for (int i = 0; i < cb.bunches.count; ++i) {
      if (owner(j, i) != comm.rank()) continue;
      auto bunch = std::make_unique<Bunch>();
      bunch->beam = j, bunch->index = i;
      const BeamRuntime& b = beams[static_cast<size_t>(j)];
      if (!cb.bunches.particles_file.empty()) {
        bunch->particles = read_particles(cb.bunches.particles_file, cb.reference.beta0());
        if (bunch->particles.size() != cb.bunches.macroparticles) {
          InputLocation at{setup.file};
          at.field = fmt::format("beams[{}].bunches.macroparticles", j);
          throw InputError(at, fmt::format("is {} but {} holds {} particles", cb.bunches.macroparticles,
                                           cb.bunches.particles_file, bunch->particles.size()));
        }
      } else {
        bunch->particles = make_gaussian(cb.reference, b.optics, cb.bunches.macroparticles, cb.bunches.emittance_nx,
                                         cb.bunches.emittance_ny, cb.bunches.sigma_zeta, cb.bunches.sigma_delta,
                                         cb.bunches.seed + 1000003ull * static_cast<uint64_t>(j) + static_cast<uint64_t>(i));
      }
      if (gpu_context && cb.linear_map && !b.frozen)
        bunch->gpu = std::make_unique<GpuColliderBunch>(*gpu_context, bunch->particles);
      bunches[static_cast<size_t>(j)][static_cast<size_t>(i)] = std::move(bunch);
    }
  }

  // Output: rank 0 streams the records of each block of slots (gathered by a sum: other rows are 0).
  const int64_t slots = o.turns * n1;
  result.slots = slots;
  if ((o.checkpoint_every > 0 || o.resume || o.stop_after > 0) && o.output_dir.empty()) {
    InputLocation at;
    at.field = "output";
    throw InputError(at, "checkpoints (checkpoint_every, resume, stop_after) need an output directory");
  }
  const std::filesystem::path checkpoint_dir = std::filesystem::path(o.output_dir) / "checkpoint";
  // Resuming: the slot of the last checkpoint (state.json), every bunch's particles from its file
  // (bunch files do not depend on the placement: any rank count resumes any other's run).
  int64_t first_slot = 0;
  if (o.resume) {
    const std::string state_file = (checkpoint_dir / "state.json").string();
    if (!std::filesystem::exists(state_file)) throw InputError(InputLocation{state_file}, "no checkpoint to resume from");
    const nlohmann::ordered_json state = parse_json_file(state_file);
    if (state.value("setup_fingerprint", std::string()) != setup_fingerprint(setup))
      throw InputError(InputLocation{state_file}, "the checkpoint belongs to another set-up; refusing to resume");
    first_slot = state.at("slot").get<int64_t>();
    if (first_slot > slots)
      throw InputError(InputLocation{state_file},
                       fmt::format("the checkpoint is at crossing {}, beyond this run's {}", first_slot, slots));
    for (int j = 0; j < 2; ++j)
      for (auto& bunch : bunches[static_cast<size_t>(j)]) {
        if (!bunch) continue;
        const std::string file = (checkpoint_dir / bunch_checkpoint_name(j, bunch->index, first_slot)).string();
        read_bunch_checkpoint(file, *bunch);
        if (bunch->gpu) bunch->gpu->upload(bunch->particles);
      }
    if (comm.is_root()) fmt::print(stderr, "collide: resuming from {} at crossing {}\n", state_file, first_slot);
  }
  std::ofstream csv;
  std::string csv_path;
  std::vector<CrossingRecord> replay;  // records of the resumed part, from bunches.csv
  if (result.root && !o.output_dir.empty()) {
    std::filesystem::create_directories(o.output_dir);
    csv_path = (std::filesystem::path(o.output_dir) / "bunches.csv").string();
    if (o.resume) replay = read_csv_records(csv_path, first_slot);
    csv.open(csv_path);
    if (!csv) throw Error("cannot write " + csv_path);
    csv << kCsvHeader;
    for (const CrossingRecord& r : replay) write_csv_row(csv, r);
  }
  // Records are gathered to rank 0 once per block of slots (one MPI_Allreduce); the gather drains the
  // pipeline of the gear-change walk, so a block spans at least 16 turns' worth of every bunch.
  const int64_t block = std::max<int64_t>(256, 16 * static_cast<int64_t>(n1 + n2));
  std::vector<double> records(static_cast<size_t>(block) * 2 * kRecordFields, 0.0);
  // Centroid series per (beam, bunch), x and y, and per-bunch luminosity sums (rank 0).
  std::array<std::vector<std::array<std::vector<double>, 2>>, 2> series;
  std::array<std::vector<double>, 2> lumi_sum;
  std::array<std::vector<BunchSummary>, 2> summaries;
  for (int j = 0; j < 2; ++j) {
    const size_t nb = static_cast<size_t>(setup.beams[static_cast<size_t>(j)].bunches.count);
    series[static_cast<size_t>(j)].resize(nb);
    lumi_sum[static_cast<size_t>(j)].assign(nb, 0.0);
    summaries[static_cast<size_t>(j)].resize(nb);
  }
  double lumi_total = 0.0;

  const int threads = o.threads;
  const auto deposit = [&](Bunch& bunch, const Particles& boosted) {
    const BeamRuntime& b = beams[static_cast<size_t>(bunch.beam)];
    SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.particles.size(), 1));
    reducer.deposit(boosted, threads);
    bunch.moments = reducer.accumulators();
    bunch.moments.push_back(reducer.out_of_range());
  };
  const auto moments_of = [&](int beam, const std::vector<uint64_t>& acc, uint64_t& out_of_range) {
    const BeamRuntime& b = beams[static_cast<size_t>(beam)];
    SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(b.beam->bunches.macroparticles, 1));
    std::vector<uint64_t> a(acc.begin(), acc.end() - 1);
    out_of_range = acc.back();
    reducer.add_accumulators(a, 0);
    return reducer.moments();
  };
  // Particles are counted in the fixed-point sizes of their own bunch: the partner's reducer is
  // rebuilt with the partner's sizes (max_particles = its macroparticles), so both owners read
  // the same integers with the same scales.

  const auto accumulate = [&](const CrossingRecord& r) {
    const size_t j = static_cast<size_t>(r.beam), b = static_cast<size_t>(r.bunch);
    auto& ser = series[j][b];
    ser[0].push_back(r.mean[0]);
    ser[1].push_back(r.mean[2]);
    lumi_sum[j][b] += r.luminosity;
    if (j == 0) lumi_total += r.luminosity;
    BunchSummary& bs = summaries[j][b];
    if (r.turn == 0) bs.initial_emittance_x = r.emittance_x, bs.initial_emittance_y = r.emittance_y;
    bs.final_emittance_x = r.emittance_x, bs.final_emittance_y = r.emittance_y, bs.final_alive = r.alive;
    if (o.keep_records) result.records.push_back(r);
  };
  for (const CrossingRecord& r : replay) accumulate(r);
  const int64_t checkpoint_slots = o.checkpoint_every * n1;
  const int64_t stop_slot = o.stop_after > 0 ? std::min(slots, o.stop_after * n1) : slots;
  int64_t previous_checkpoint = o.resume ? first_slot : -1;
  for (int64_t block_start = first_slot; block_start < stop_slot;) {
    int64_t block_end = std::min(stop_slot, block_start + block);
    if (checkpoint_slots > 0) block_end = std::min(block_end, (block_start / checkpoint_slots + 1) * checkpoint_slots);
    std::fill(records.begin(), records.end(), 0.0);
    for (int64_t slot = block_start; slot < block_end; ++slot) {
      const int pair[2] = {static_cast<int>(slot % n1), static_cast<int>(slot % n2)};
      const int owners[2] = {owner(0, pair[0]), owner(1, pair[1])};
      Bunch* mine[2] = {nullptr, nullptr};
      for (int j = 0; j < 2; ++j)
        if (owners[j] == comm.rank()) mine[j] = bunches[static_cast<size_t>(j)][static_cast<size_t>(pair[j])].get();
      if (!mine[0] && !mine[1]) continue;
      CrossingRecord rec[2];
      // 1. Arrival: statistics, boost, slice moments.
      for (int j = 0; j < 2; ++j) {
        if (!mine[j]) continue;
        Bunch& bunch = *mine[j];
        const BeamRuntime& b = beams[static_cast<size_t>(j)];
        const auto t0 = Clock::now();
        GpuColliderBunch* gpu = bunch.gpu.get();
        // One pass: the record sums of the arriving particles and their boost (a frozen bunch is never
        // boosted: its moments are taken once, from a boosted copy); then the slice moments.
        SliceMomentReducer reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.particles.size(), 1));
        std::vector<double> sums;
        if (gpu) {
          // First crossing with fma off: the GPU's steps are checked against the CPU's on a copy of
          // this bunch (arrival here, departure below); any difference ends the run (DeviceError).
          const bool check = o.check_gpu && o.fma == FmaMode::Off && bunch.crossings == 0;
          if (check) gpu->download(bunch.check_copy);
          std::vector<uint64_t> acc(reducer.accumulators().size(), 0);
          uint64_t rejected = 0;
          sums = gpu->arrive(b.params, reducer.grid(), reducer.scales(), acc, rejected);
          bunch.moments = acc;
          bunch.moments.push_back(rejected);
          if (check) {
            const std::vector<double> cpu_sums = cpu_arrival(b.params, true, bunch.check_copy, threads);
            SliceMomentReducer cpu_reducer(b.grid, b.ranges, std::max<uint64_t>(bunch.particles.size(), 1));
            cpu_reducer.deposit(bunch.check_copy, threads);
            std::vector<uint64_t> cpu_moments = cpu_reducer.accumulators();
            cpu_moments.push_back(cpu_reducer.out_of_range());
            if (std::memcmp(cpu_sums.data(), sums.data(), sums.size() * sizeof(double)) != 0 ||
                cpu_moments != bunch.moments)
              throw DeviceError(fmt::format("collide: the GPU's arrival step (record sums, boost, slice moments) "
                                            "differs from the CPU's for beam {} bunch {} (fma off); run with "
                                            "--device cpu",
                                            j + 1, bunch.index));
          }
        } else {
          sums = cpu_arrival(b.params, !b.frozen, bunch.particles, threads);
          if (!b.frozen) {
            deposit(bunch, bunch.particles);
          } else if (bunch.moments.empty()) {
            Particles boosted = bunch.particles;
            (void)cpu_arrival(b.params, true, boosted, threads);
            deposit(bunch, boosted);
          }
        }
        const BunchStats s = stats_from_sums(sums);
        CrossingRecord& r = rec[j];
        r.slot = slot, r.beam = j, r.bunch = bunch.index, r.partner = pair[1 - j], r.turn = bunch.crossings;
        r.alive = s.alive, r.mean = s.mean;
        r.sigma_x = std::sqrt(s.xx), r.sigma_y = std::sqrt(s.yy), r.sigma_zeta = std::sqrt(s.zz);
        r.sigma_delta = std::sqrt(s.dd);
        r.emittance_x = std::sqrt(std::max(0.0, s.xx * s.pxpx - s.xpx * s.xpx));
        r.emittance_y = std::sqrt(std::max(0.0, s.yy * s.pypy - s.ypy * s.ypy));
        result.deposit_seconds += seconds_since(t0);
      }
      // 2. Swap the integers with the partner's owner (a copy when both are here).
      std::vector<uint64_t> partner_moments[2];
      for (int j = 0; j < 2; ++j) {
        if (!mine[j]) continue;
        if (mine[1 - j]) {
          partner_moments[j] = mine[1 - j]->moments;
          continue;
        }
        const auto t0 = Clock::now();
        partner_moments[j].assign(mine[j]->moments.size(), 0);  // both beams have ip.slices slices
        comm.exchange(owners[1 - j], mine[j]->moments.data(), partner_moments[j].data(), partner_moments[j].size(),
                      static_cast<int>(slot % 32000));
        result.exchange_seconds += seconds_since(t0);
      }
      // 3. Kick with the partner's slices, in this beam's frame; inverse boost; one turn.
      for (int j = 0; j < 2; ++j) {
        if (!mine[j]) continue;
        Bunch& bunch = *mine[j];
        const BeamRuntime& b = beams[static_cast<size_t>(j)];
        const BeamRuntime& pb = beams[static_cast<size_t>(1 - j)];
        const auto t0 = Clock::now();
        uint64_t partner_out = 0, own_out = 0;
        const SliceMoments pm = moments_of(1 - j, partner_moments[j], partner_out);
        const SliceMoments om = moments_of(j, bunch.moments, own_out);
        double unused = static_cast<double>(partner_out), coupling = 0.0, own_unused = 0.0, own_coupling = 0.0;
        std::vector<Bb6dSlice> slices =
            usable_slices(pm, pb.particles_per_macro, setup.ip.min_slice_macroparticles, unused, coupling);
        for (Bb6dSlice& s : slices) s = slice_in_partner_frame(s);
        std::vector<Bb6dSlice> own =
            usable_slices(om, b.particles_per_macro, setup.ip.min_slice_macroparticles, own_unused, own_coupling);
        if (!ip.six_d) {  // 4D: the bunches meet at the IP (S = 0), in the kick and in the luminosity
          for (Bb6dSlice& s : slices) s.zeta = 0.0;
          for (Bb6dSlice& s : own) s.zeta = 0.0;
        }
        rec[j].luminosity = own.empty() || slices.empty() ? 0.0 : luminosity_per_crossing(own, slices);
        rec[j].coupling = coupling;
        rec[j].unused_charge = unused;
        Particles& p = bunch.particles;
        GpuColliderBunch* gpu = bunch.gpu.get();
        const int turn = static_cast<int>(bunch.crossings);
        // One pass: kick, inverse boost and, for a linear map, the turn; a lattice ring's turn follows.
        const ColliderRingMap* ring = b.beam->linear_map ? &b.ring : nullptr;
        if (gpu) {
          gpu->depart(b.params, slices, ring, turn);
          if (!bunch.check_copy.x.empty()) {  // the first crossing's check (see the arrival)
            cpu_departure(b.params, slices, ring, bunch.check_copy, turn, threads);
            Particles device;
            gpu->download(device);
            if (!same_particles(device, bunch.check_copy))
              throw DeviceError(fmt::format("collide: the GPU's departure step (kick, inverse boost, linear turn) "
                                            "differs from the CPU's for beam {} bunch {} (fma off); run with "
                                            "--device cpu",
                                            j + 1, bunch.index));
            bunch.check_copy = Particles();
            ++result.gpu_checks;
          }
        } else if (!b.frozen) {
          cpu_departure(b.params, slices, ring, p, turn, threads);
        }
        result.kick_seconds += seconds_since(t0);
        const auto t1 = Clock::now();
        if (!b.frozen && !ring) {
          TrackOptions to;
          to.turns = 1;
          to.first_turn = bunch.crossings;
          to.threads = threads;
          to.fma = o.fma;
          b.backend->track(p, to);
        }
        ++bunch.crossings;
        result.transport_seconds += seconds_since(t1);
        pack_record(rec[j], records.data() + (static_cast<size_t>(slot - block_start) * 2 + static_cast<size_t>(j)) *
                                                 kRecordFields);
      }
      if (o.progress_every > 0 && result.root && (slot + 1) % o.progress_every == 0)
        fmt::print(stderr, "collide: slot {} of {} ({:.1f} s)\n", slot + 1, slots, seconds_since(t_start));
    }
    if (comm.size() > 1) comm.allreduce_sum(records.data(), records.size());
    for (int64_t slot = block_start; result.root && slot < block_end; ++slot) {
      for (int j = 0; j < 2; ++j) {
        const double* f = records.data() + (static_cast<size_t>(slot - block_start) * 2 + static_cast<size_t>(j)) *
                                               kRecordFields;
        const CrossingRecord r = unpack_record(f);
        if (csv.is_open()) write_csv_row(csv, r);
        accumulate(r);
      }
    }
    // Checkpoint: every bunch's particles (its owner), then the slot (rank 0) once all are written.
    if ((checkpoint_slots > 0 && block_end % checkpoint_slots == 0) || block_end == stop_slot) {
      if (checkpoint_slots > 0 || block_end < slots) {
        std::filesystem::create_directories(checkpoint_dir);
        for (int j = 0; j < 2; ++j)
          for (auto& bunch : bunches[static_cast<size_t>(j)]) {
            if (!bunch) continue;
            if (bunch->gpu) bunch->gpu->download(bunch->particles);
            write_bunch_checkpoint((checkpoint_dir / bunch_checkpoint_name(j, bunch->index, block_end)).string(), *bunch);
            if (previous_checkpoint >= 0)
              std::filesystem::remove(checkpoint_dir / bunch_checkpoint_name(j, bunch->index, previous_checkpoint));
          }
        comm.barrier();
        if (result.root) {
          csv.flush();
          nlohmann::ordered_json state = {{"slot", block_end}, {"setup_fingerprint", setup_fingerprint(setup)}};
          write_file_atomically((checkpoint_dir / "state.json").string(), state.dump(2) + "\n");
        }
        previous_checkpoint = block_end;
      }
    }
    block_start = block_end;
  }
  result.stopped_at = stop_slot < slots ? stop_slot : -1;
  if (result.stopped_at >= 0) {
    if (comm.is_root())
      fmt::print(stderr, "collide: stopped after crossing {} of {} (turn {}); resume with --resume\n", stop_slot, slots,
                 stop_slot / n1);
    return result;
  }
  if (csv.is_open()) {
    csv.close();
    if (!csv) throw Error("writing " + csv_path + " failed");
    result.output_files.push_back(csv_path);
  }

  // Summaries, spectra and the coherent modes (rank 0).
  if (result.root) {
    for (int j = 0; j < 2; ++j)
      for (size_t i = 0; i < summaries[static_cast<size_t>(j)].size(); ++i) {
        BunchSummary& bs = summaries[static_cast<size_t>(j)][i];
        const auto& ser = series[static_cast<size_t>(j)][i];
        bs.beam = j, bs.bunch = static_cast<int>(i);
        bs.mean_luminosity = ser[0].empty() ? 0.0 : lumi_sum[static_cast<size_t>(j)][i] / static_cast<double>(ser[0].size());
        bs.peak_tune_x = peak_tune(ser[0]);
        bs.peak_tune_y = peak_tune(ser[1]);
        result.bunches.push_back(bs);
      }
    result.sigma_mode = {std::nan(""), std::nan("")};
    result.pi_mode = {std::nan(""), std::nan("")};
    if (n1 == 1 && n2 == 1 && setup.frozen_beam < 0) {  // weak-strong: no coherent modes
      for (int plane = 0; plane < 2; ++plane) {
        const auto& a = series[0][0][static_cast<size_t>(plane)];
        const auto& b = series[1][0][static_cast<size_t>(plane)];
        // Lab frame: beam 2's x is reversed (x_lab = -x), y is shared.
        const double sign = plane == 0 ? -1.0 : 1.0;
        std::vector<double> sum(a.size()), diff(a.size());
        for (size_t t = 0; t < a.size(); ++t) sum[t] = a[t] + sign * b[t], diff[t] = a[t] - sign * b[t];
        result.sigma_mode[static_cast<size_t>(plane)] = peak_tune(sum);
        result.pi_mode[static_cast<size_t>(plane)] = peak_tune(diff);
      }
    }
    if (result.crossing_frequency > 0)
      result.luminosity = result.crossing_frequency * lumi_total / static_cast<double>(slots);
    if (!o.output_dir.empty()) {
      // Spectra of the centroids, every bunch, both planes.
      size_t longest = 0;
      for (const auto& beam_series : series)
        for (const auto& s : beam_series) longest = std::max(longest, s[0].size());
      if (longest >= 16) {
        size_t m = 1;
        while (m < 2 * longest) m *= 2;
        std::vector<std::vector<double>> columns;
        std::string header = "tune";
        for (int j = 0; j < 2; ++j)
          for (size_t i = 0; i < series[static_cast<size_t>(j)].size(); ++i)
            for (int plane = 0; plane < 2; ++plane) {
              const auto& s = series[static_cast<size_t>(j)][i][static_cast<size_t>(plane)];
              columns.push_back(s.size() >= 16 ? amplitude_spectrum(s, m) : std::vector<double>(m + 1, 0.0));
              header += fmt::format(",b{}_{}_{}", j + 1, i, plane == 0 ? "x" : "y");
            }
        const std::string path = (std::filesystem::path(o.output_dir) / "spectra.csv").string();
        write_file_atomically(path, [&](std::ostream& out) {
          out << header << "\n";
          for (size_t k = 0; k <= m; ++k) {
            out << fmt::format("{:.10g}", static_cast<double>(k) / (2.0 * static_cast<double>(m)));
            for (const auto& c : columns) out << fmt::format(",{:.6e}", c[k]);
            out << "\n";
          }
        });
        result.output_files.push_back(path);
      }
    }
  }
  if (gpu_context) result.gpu_kernel_seconds = gpu_context->kernel_seconds;
  result.seconds = seconds_since(t_start);
  if (result.root && !o.output_dir.empty()) {
    const std::string path = (std::filesystem::path(o.output_dir) / "summary.json").string();
    write_file_atomically(path, collide_summary_json(setup, o, result).dump(2) + "\n");
    result.output_files.push_back(path);
  }
  return result;
}

}  // namespace ft
