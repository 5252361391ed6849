// Bunch monitors and the progress bar (fusetrack/monitor.h).
#include "fusetrack/monitor.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "fusetrack/device/collective.h"
#include "fusetrack/error.h"
#include "fusetrack/memory_budget.h"
#include "core/math_helpers.hpp"

namespace ft {

namespace {
constexpr double kSpeedOfLight = 299792458.0;  // [m/s]
}  // namespace

BunchMoments bunch_moments(const Particles& p, double p0c) {
  // Fixed order: index order, one thread, two passes.
  BunchMoments m;
  const size_t n = p.size();
  double sz = 0.0, sd = 0.0, st = 0.0, sx = 0.0, spx = 0.0, sy = 0.0, spy = 0.0;
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p.state[i] <= 0) continue;
    ++count;
    sz += p.zeta[i];
    sd += p.delta[i];
    st += p.ptau[i];
    sx += p.x[i];
    spx += p.px[i];
    sy += p.y[i];
    spy += p.py[i];
  }
  m.alive = count;
  if (count == 0) return m;
  const double inv = 1.0 / static_cast<double>(count);
  m.mean_zeta = sz * inv;
  m.mean_delta = sd * inv;
  const double mean_ptau = st * inv;
  m.mean_x = sx * inv;
  m.mean_y = sy * inv;
  const double mean_px = spx * inv, mean_py = spy * inv;
  double zz = 0.0, dd = 0.0, zd = 0.0, tt = 0.0, zt = 0.0;
  // Transverse second moments: (x, px, y, py) with each other's plane and with delta.
  double xx = 0.0, xpx = 0.0, pxpx = 0.0, xd = 0.0, pxd = 0.0;
  double yy = 0.0, ypy = 0.0, pypy = 0.0, yd = 0.0, pyd = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (p.state[i] <= 0) continue;
    const double a = p.zeta[i] - m.mean_zeta, b = p.delta[i] - m.mean_delta, c = p.ptau[i] - mean_ptau;
    zz += a * a;
    dd += b * b;
    zd += a * b;
    tt += c * c;
    zt += a * c;
    const double u = p.x[i] - m.mean_x, pu = p.px[i] - mean_px, v = p.y[i] - m.mean_y, pv = p.py[i] - mean_py;
    xx += u * u;
    xpx += u * pu;
    pxpx += pu * pu;
    xd += u * b;
    pxd += pu * b;
    yy += v * v;
    ypy += v * pv;
    pypy += pv * pv;
    yd += v * b;
    pyd += pv * b;
  }
  zz *= inv;
  dd *= inv;
  zd *= inv;
  tt *= inv;
  zt *= inv;
  m.rms_zeta = std::sqrt(zz);
  m.rms_delta = std::sqrt(dd);
  m.cov_zeta_delta = zd;
  m.emittance = std::sqrt(std::max(zz * dd - zd * zd, 0.0));
  // t = -zeta / (beta0 c), E - E0 = ptau p0c: det cov(t, E) = det cov(zeta, ptau) (p0c / (beta0 c))^2.
  const double det_zt = std::max(zz * tt - zt * zt, 0.0);
  m.emittance_evs = 4.0 * kPi * std::sqrt(det_zt) * p0c / (p.beta0 * kSpeedOfLight);
  // Betatron emittances: the dispersive part (regression on delta) removed first.
  auto betatron_emittance = [&](double uu, double upu, double pupu, double ud, double pud) {
    uu *= inv;
    upu *= inv;
    pupu *= inv;
    ud *= inv;
    pud *= inv;
    if (dd > 0.0) {
      uu -= ud * ud / dd;
      upu -= ud * pud / dd;
      pupu -= pud * pud / dd;
    }
    return std::sqrt(std::max(uu * pupu - upu * upu, 0.0));
  };
  m.rms_x = std::sqrt(xx * inv);
  m.rms_y = std::sqrt(yy * inv);
  m.emittance_x = betatron_emittance(xx, xpx, pxpx, xd, pxd);
  m.emittance_y = betatron_emittance(yy, ypy, pypy, yd, pyd);
  const double beta_gamma0 = p.beta0 / std::sqrt((1.0 - p.beta0) * (1.0 + p.beta0));
  m.emittance_nx = m.emittance_x * beta_gamma0;
  m.emittance_ny = m.emittance_y * beta_gamma0;
  return m;
}

bool ProgressBar::wanted(const std::string& mode) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  return isatty(STDERR_FILENO) != 0;
}

ProgressBar::ProgressBar(int64_t total, bool enabled) : m_total(total), m_enabled(enabled && total > 0) {
  m_start = m_last = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done) {
  if (!m_enabled) return;
  const auto now = std::chrono::steady_clock::now();
  if (m_drawn && done < m_total && now - m_last < std::chrono::milliseconds(200)) return;
  m_last = now;
  const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(m_total));
  const double elapsed = std::chrono::duration<double>(now - m_start).count();
  const int width = 30;
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>';
  bar.resize(static_cast<size_t>(width), ' ');
  std::string eta = "--";
  if (done > 0 && frac < 1.0) {
    const double left = elapsed * (1.0 - frac) / frac;
    eta = left >= 3600 ? fmt::format("{}h{:02d}m", static_cast<int>(left / 3600), static_cast<int>(left / 60) % 60)
          : left >= 60 ? fmt::format("{}m{:02d}s", static_cast<int>(left / 60), static_cast<int>(left) % 60)
                       : fmt::format("{:.0f}s", left);
  } else if (frac >= 1.0) {
    eta = "0s";
  }
  std::fprintf(stderr, "\r[%s] %3.0f%%  turn %lld/%lld  elapsed %.0fs  ETA %s   ", bar.c_str(), 100.0 * frac,
               static_cast<long long>(done), static_cast<long long>(m_total), elapsed, eta.c_str());
  std::fflush(stderr);
  m_drawn = true;
}

void ProgressBar::finish() {
  if (m_enabled && m_drawn) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  m_drawn = false;
  m_enabled = false;
}

BunchMonitor::BunchMonitor(const Lattice& lattice, const MonitorOptions& options)
    : m_beta0(lattice.reference().beta0()),
      m_p0c(lattice.reference().p0c),
      m_options(options),
      m_progress(options.total_turns, ProgressBar::wanted(options.progress)) {
  if (m_options.every < 1) throw Error(fmt::format("monitor: 'every' must be at least 1, got {}", m_options.every));
  if (m_options.profile_every < 0 || (m_options.profile_every > 0 && m_options.profile_every % m_options.every != 0))
    throw Error(fmt::format("monitor: the profile period ({} turns) must be a multiple of the moment period ({})",
                            m_options.profile_every, m_options.every));
  // The records stay in memory until the file is written (and are copied once into its arrays):
  // turns x records that cannot fit are refused before tracking, not when memory runs out.
  const uint64_t records = static_cast<uint64_t>(std::max<int64_t>(m_options.total_turns, 0) / m_options.every) + 1;
  require_host_memory(saturating_product({records, 2 * (sizeof(BunchMoments) + sizeof(int64_t))}),
                      fmt::format("a bunch monitor of {} records ({} turns, one record every {})", records,
                                  m_options.total_turns, m_options.every));
}

void BunchMonitor::attach(TrackOptions& options, const Backend& backend) {
  auto chained = options.callback;
  const int64_t chained_every = options.callback_every;
  if (chained && chained_every > 0 && chained_every % m_options.every != 0)
    throw Error(fmt::format("monitor: an existing callback every {} turns is not a multiple of the monitor period {}",
                            chained_every, m_options.every));
  const int64_t first = options.first_turn;
  const int64_t turns = options.turns;
  options.callback_every = m_options.every;
  options.callback = [this, chained, chained_every, first, turns, &backend](int64_t done, const Particles& p) {
    record(first + done, p, &backend);
    if (chained && chained_every > 0 && (done % chained_every == 0 || done == turns)) return chained(done, p);
    return true;
  };
}

void BunchMonitor::record(int64_t turn, const Particles& particles, const Backend* backend) {
  m_turns.push_back(turn);
  m_moments.push_back(bunch_moments(particles, m_p0c));
  if (backend && m_options.profile_every > 0 && turn % m_options.profile_every == 0) {
    std::vector<CollectiveSnapshot> snaps = backend->collective_snapshots();
    if (!snaps.empty()) {
      m_profile_turns.push_back(turn);
      m_profiles.push_back(std::move(snaps));
    }
  }
  m_progress.update(turn);
}

void BunchMonitor::finish() { m_progress.finish(); }

std::vector<std::pair<std::string, NpyArray>> BunchMonitor::arrays() const {
  std::vector<std::pair<std::string, NpyArray>> a;
  const size_t n = m_moments.size();
  std::vector<int64_t> alive(n);
  std::vector<double> mz(n), rz(n), md(n), rd(n), czd(n), em(n), ev(n);
  std::vector<double> mx(n), my(n), rx(n), ry(n), ex(n), ey(n), enx(n), eny(n);
  for (size_t i = 0; i < n; ++i) {
    const BunchMoments& m = m_moments[i];
    alive[i] = m.alive;
    mz[i] = m.mean_zeta;
    rz[i] = m.rms_zeta;
    md[i] = m.mean_delta;
    rd[i] = m.rms_delta;
    czd[i] = m.cov_zeta_delta;
    em[i] = m.emittance;
    ev[i] = m.emittance_evs;
    mx[i] = m.mean_x;
    my[i] = m.mean_y;
    rx[i] = m.rms_x;
    ry[i] = m.rms_y;
    ex[i] = m.emittance_x;
    ey[i] = m.emittance_y;
    enx[i] = m.emittance_nx;
    eny[i] = m.emittance_ny;
  }
  a.emplace_back("turn", NpyArray::from(m_turns));
  a.emplace_back("alive", NpyArray::from(alive));
  a.emplace_back("mean_zeta", NpyArray::from(mz));
  a.emplace_back("rms_zeta", NpyArray::from(rz));
  a.emplace_back("mean_delta", NpyArray::from(md));
  a.emplace_back("rms_delta", NpyArray::from(rd));
  a.emplace_back("cov_zeta_delta", NpyArray::from(czd));
  a.emplace_back("emittance", NpyArray::from(em));
  a.emplace_back("emittance_evs", NpyArray::from(ev));
  a.emplace_back("mean_x", NpyArray::from(mx));
  a.emplace_back("mean_y", NpyArray::from(my));
  a.emplace_back("rms_x", NpyArray::from(rx));
  a.emplace_back("rms_y", NpyArray::from(ry));
  a.emplace_back("emittance_x", NpyArray::from(ex));
  a.emplace_back("emittance_y", NpyArray::from(ey));
  a.emplace_back("emittance_nx", NpyArray::from(enx));
  a.emplace_back("emittance_ny", NpyArray::from(eny));
  a.emplace_back("beta0", NpyArray::from(std::vector<double>{m_beta0}));
  a.emplace_back("p0c", NpyArray::from(std::vector<double>{m_p0c}));
  if (!m_profiles.empty()) {
    a.emplace_back("profile_turn", NpyArray::from(m_profile_turns));
    a.emplace_back("profile_unit", NpyArray::from(std::vector<int64_t>{static_cast<int64_t>(kProfileUnit)}));
    const size_t n_elements = m_profiles.front().size();
    const size_t n_snap = m_profiles.size();
    for (size_t k = 0; k < n_elements; ++k) {
      const CollectiveSnapshot& first = m_profiles.front()[k];
      const size_t ns = static_cast<size_t>(first.grid.n_slices);
      std::vector<double> centres(ns), field(n_snap * ns);
      std::vector<int64_t> counts(n_snap * ns);
      const double dz = (first.grid.zeta_max - first.grid.zeta_min) / static_cast<double>(ns);
      for (size_t s = 0; s < ns; ++s) centres[s] = first.grid.zeta_min + (static_cast<double>(s) + 0.5) * dz;
      for (size_t t = 0; t < n_snap; ++t) {
        const CollectiveSnapshot& snap = m_profiles[t][k];
        for (size_t s = 0; s < ns; ++s) {
          counts[t * ns + s] = s < snap.counts.size() ? static_cast<int64_t>(snap.counts[s]) : 0;
          field[t * ns + s] = s < snap.field.size() ? snap.field[s] : 0.0;
        }
      }
      const std::string prefix = fmt::format("profile_{}_", k);
      a.emplace_back(prefix + "sequence_index",
                     NpyArray::from(std::vector<int64_t>{static_cast<int64_t>(first.sequence_index)}));
      a.emplace_back(prefix + "zeta", NpyArray::from(centres));
      a.emplace_back(prefix + "counts", NpyArray::from(counts, {n_snap, ns}));
      a.emplace_back(prefix + "field", NpyArray::from(field, {n_snap, ns}));
    }
  }
  return a;
}

void BunchMonitor::write(const std::string& path) const { write_npz(path, arrays()); }

}  // namespace ft
