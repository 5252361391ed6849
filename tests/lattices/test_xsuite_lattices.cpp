// The real Xsuite lattices of ../shared/lattices/xsuite (CERN PS Booster at injection, CLIC damping
// ring): import, element counts, circumference, 10 turns of tracking, and element-by-element
// checks of the converted elements against Xsuite's formulas, written out here from xtrack's C
// sources (xsuite/xtrack @ 858ffc69: track_drift.h, track_magnet_kick.h, track_rf.h,
// local_particle_custom_api.h, track_dipole_edge_linear.h, track_srotation.h, track_xyshift.h),
// with the parameters read from the Xsuite file itself.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/tracker.h"
#include "fusetrack/xsuite_import.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_lattices.
namespace test_xsuite_lattices {

using json = nlohmann::ordered_json;
using ft::test::builtin_registry;

namespace {

constexpr double kClight = 299792458.0;            // xtrack C_LIGHT
constexpr double kPi = 3.141592653589793;          // xtrack PI
constexpr double kDeg2Rad = 0.017453292519943295;  // xtrack DEG2RAD

/// The path of a shared lattice; the test is reported skipped (exit 77) when it is absent.
std::string shared_lattice(const std::string& name) { return ft::test::require_shared("lattices/xsuite/" + name); }

struct Loaded {
  json xsuite;  // the Xsuite file as read
  json converted;
  std::vector<std::string> warnings;
  ft::Lattice lattice;
};

Loaded load(const std::string& path) {
  Loaded l;
  l.xsuite = ft::parse_json_file(path);
  ft::XsuiteImportOptions options;
  options.warnings = &l.warnings;
  l.converted = ft::xsuite_to_fusetrack(l.xsuite, path, options);
  l.lattice = ft::lattice_from_json(l.converted, path, builtin_registry());
  return l;
}

const json& xs_element(const Loaded& l, const std::string& name) { return l.xsuite.at("elements").at(name); }

double xs_field(const json& element, const char* field) {
  return element.contains(field) ? element.at(field).get<double>() : 0.0;
}

double xs_reference(const Loaded& l, const char* field) {
  const json& v = l.xsuite.at("particle_ref").at(field);
  return v.is_array() ? v[0].get<double>() : v.get<double>();
}

/// Xsuite's line length: the sum of the lengths of its thick elements (Drift, Cavity here).
double xs_line_length(const Loaded& l) {
  double s = 0.0;
  for (const auto& n : l.xsuite.at("element_names")) {
    const json& e = xs_element(l, n.get<std::string>());
    const std::string cls = e.at("__class__").get<std::string>();
    if (cls == "Drift" || cls == "Cavity") s += xs_field(e, "length");
  }
  return s;
}

size_t sequence_index(const ft::Lattice& lattice, const std::string& name) {
  for (size_t i = 0; i < lattice.sequence().size(); ++i)
    if (lattice.element(i).name == name) return i;
  FAIL("no sequence entry named " << name);
  return 0;
}

/// Tracks one particle through sequence entries [begin, end) of the lattice.
ft::ParticleView track_range(const ft::Lattice& lattice, size_t begin, size_t end, const ft::ParticleView& p) {
  ft::Particles parts(1, p.beta0);
  parts.store(0, p);
  parts.lost_turn[0] = -1;
  parts.lost_element[0] = -1;
  ft::TrackOptions options;
  options.turns = 1;
  options.element_begin = begin;
  options.element_end = end;
  ft::make_cpu_backend(lattice)->track(parts, options);
  return parts.view(0);
}

/// Particles with rvv != 1 (beta0 < 1 and delta != 0), both signs of every coordinate.
std::vector<ft::ParticleView> test_particles(const ft::Lattice& lattice, double zeta_scale) {
  const double beta0 = lattice.reference().beta0();
  ft::Particles parts(4, beta0);
  parts.set(0, 1.0e-3, 2.0e-4, -5.0e-4, 1.0e-4, 0.3 * zeta_scale, 1.0e-3);
  parts.set(1, -2.0e-3, -3.0e-4, 1.5e-3, -2.0e-4, -0.7 * zeta_scale, -2.0e-3);
  parts.set(2, 4.0e-3, -1.0e-3, 2.0e-3, 5.0e-4, 0.05 * zeta_scale, 5.0e-4);
  parts.set(3, -3.0e-4, 6.0e-4, -2.5e-3, -4.0e-4, zeta_scale, 3.0e-3);
  std::vector<ft::ParticleView> out;
  for (size_t i = 0; i < parts.size(); ++i) out.push_back(parts.view(i));
  return out;
}

// ---- Xsuite's formulas ---------------------------------------------------------------------------

/// xtrack Drift_single_particle_expanded (track_drift.h).
void xs_drift_expanded(ft::ParticleView& p, double length) {
  const double rpp = p.rpp;
  const double rv0v = 1. / p.rvv;
  const double xp = p.px * rpp;
  const double yp = p.py * rpp;
  const double dzeta = 1 - rv0v * (1. + (xp * xp + yp * yp) / 2.);
  p.x += xp * length;
  p.y += yp * length;
  p.zeta += length * dzeta;
}

/// xtrack thin Multipole: kick_simple_single_coordinates (Horner, chi = 1, factor = 1, weight 1)
/// then the curvature terms of track_magnet_kick_single_particle with h = 0, kick_rot_frame = 1.
void xs_thin_multipole(ft::ParticleView& p, const json& e) {
  std::vector<double> knl = e.value("knl", std::vector<double>{});
  std::vector<double> ksl = e.value("ksl", std::vector<double>{});
  const long long order = std::max<long long>(
      {e.value("order", 0LL), static_cast<long long>(knl.size()) - 1, static_cast<long long>(ksl.size()) - 1, 0LL});
  knl.resize(static_cast<size_t>(order + 1), 0.0);
  ksl.resize(static_cast<size_t>(order + 1), 0.0);
  double factorial = 1.0;
  for (long long n = 2; n <= order; ++n) factorial *= static_cast<double>(n);
  const double hxl = xs_field(e, "hxl");
  const double length = xs_field(e, "length");
  const double chi = 1.0;
  const double x = p.x;
  const double y = p.y;

  long long index = order;
  double inv_factorial = 1.0 / factorial;
  double dpx_mul = chi * knl[index] * 1.0 * inv_factorial;
  double dpy_mul = chi * ksl[index] * 1.0 * inv_factorial;
  while (index > 0) {
    const double zre = dpx_mul * x - dpy_mul * y;
    const double zim = dpx_mul * y + dpy_mul * x;
    inv_factorial *= static_cast<double>(index);
    index -= 1;
    dpx_mul = chi * knl[index] * 1.0 * inv_factorial + zre;
    dpy_mul = chi * ksl[index] * 1.0 * inv_factorial + zim;
  }
  p.px += 1.0 * -dpx_mul;
  p.py += 1.0 * dpy_mul;

  double dpx = 0, dpy = 0, dzeta = 0;
  const double hl = 0.0 * length * 1.0 + hxl * 1.0;
  dpx += hl * (1. + p.delta);
  const double rv0v = 1. / p.rvv;
  dzeta += -rv0v * hl * x;
  double htot = 0.0;
  if (length != 0) htot += hxl / length;
  const double k0l_mult = knl[0];
  dpx += -chi * (0.0 * length + k0l_mult) * 1.0 * htot * x;
  const double k1l_mult = order >= 1 ? knl[1] : 0.0;
  dpx += htot * chi * (0.0 * length + k1l_mult) * 1.0 * (-x * x + 0.5 * y * y);
  dpy += htot * chi * (0.0 * length + k1l_mult) * 1.0 * x * y;
  p.px += dpx;
  p.py += dpy;
  p.zeta += dzeta;
}

/// xtrack track_rf_kick_single_particle (Cavity, absolute_time = 0) with
/// LocalParticle_add_to_energy(part, energy_kick, pz_only = 1) and LocalParticle_update_ptau.
void xs_cavity_kick(ft::ParticleView& p, const json& e, double q0, double p0c, double line_length) {
  const double voltage = xs_field(e, "voltage");
  double frequency = xs_field(e, "frequency");
  const double harmonic = xs_field(e, "harmonic");
  const double lag = xs_field(e, "lag");
  const double phase = xs_field(e, "phase");
  const double beta0 = p.beta0;
  if (harmonic != 0) {
    const double t_rev0 = line_length / (beta0 * kClight);
    frequency += (harmonic / t_rev0);
  }
  const double q = std::fabs(q0) * 1.0;  // |q0| * charge_ratio
  const double tau = p.zeta / beta0;
  const double energy_kick =
      q * voltage * std::sin(0.0 + kDeg2Rad * lag + phase - (2.0 * kPi) / kClight * frequency * tau);
  const double ptau = p.ptau + energy_kick / p0c / 1.0;
  const double irpp = std::sqrt(ptau * ptau + 2 * ptau / beta0 + 1);
  p.delta = irpp - 1;
  p.rvv = irpp / (1 + beta0 * ptau);
  p.ptau = ptau;
  p.rpp = 1. / irpp;
}

/// xtrack DipoleEdge linear model (compute_dipole_edge_linear_coefficients,
/// DipoleEdgeLinear_single_particle), chi = 1.
void xs_dipole_edge(ft::ParticleView& p, const json& e) {
  const double k = xs_field(e, "k"), e1 = xs_field(e, "e1"), e1_fd = xs_field(e, "e1_fd");
  const double hgap = xs_field(e, "hgap"), fint = xs_field(e, "fint");
  const double corr = 2.0 * k * hgap * fint;
  const double r21 = k * std::tan(e1);
  const double e1_v = e1 + e1_fd;
  const double sin_e1_v = std::sin(e1_v);
  const double temp = corr / std::cos(e1_v) * (1.0 + sin_e1_v * sin_e1_v);
  const double r43 = -k * std::tan(e1_v - temp);
  const double x = p.x, y = p.y;
  p.px += 1.0 * r21 * x;
  p.py += 1.0 * r43 * y;
}

void check_same(const ft::ParticleView& got, const ft::ParticleView& want) {
  CHECK(got.x == want.x);
  CHECK(got.px == want.px);
  CHECK(got.y == want.y);
  CHECK(got.py == want.py);
  CHECK(got.zeta == want.zeta);
  CHECK(got.delta == want.delta);
  CHECK(got.ptau == want.ptau);
  CHECK(got.rpp == want.rpp);
  CHECK(got.rvv == want.rvv);
  CHECK(got.state > 0);
}

/// |a - b| <= rel max(|a|, |b|) + abs.
bool close(double a, double b, double rel, double abs_tol) {
  return std::fabs(a - b) <= rel * std::fmax(std::fabs(a), std::fabs(b)) + abs_tol;
}

/// The cavity as fusetrack tracks it against Xsuite's formula. fusetrack's add_to_energy forms
/// ptau beta0 + dE/E0 and 1 + delta, rather than ptau + dE/p0c and irpp, so the two agree to
/// rounding rather than bit for bit.
void check_close(const ft::ParticleView& got, const ft::ParticleView& want) {
  CHECK(close(got.x, want.x, 1e-15, 1e-19));
  CHECK(close(got.px, want.px, 1e-15, 1e-19));
  CHECK(close(got.y, want.y, 1e-15, 1e-19));
  CHECK(close(got.py, want.py, 1e-15, 1e-19));
  CHECK(close(got.zeta, want.zeta, 1e-14, 1e-17));
  CHECK(close(got.delta, want.delta, 1e-12, 1e-17));
  CHECK(close(got.ptau, want.ptau, 1e-12, 1e-17));
  CHECK(close(got.rpp, want.rpp, 0.0, 1e-15));
  CHECK(close(got.rvv, want.rvv, 0.0, 1e-15));
  CHECK(got.state > 0);
}

void check_counts(const Loaded& l, size_t xsuite_elements, size_t extra_half_drifts) {
  const json& names = l.xsuite.at("element_names");
  CHECK(names.size() == xsuite_elements);
  CHECK(l.lattice.sequence().size() == xsuite_elements + extra_half_drifts);
  // Per class in the Xsuite file = per type in fusetrack (plus the cavity half drifts).
  std::map<std::string, size_t> xs, ft_count;
  for (const auto& n : names) ++xs[xs_element(l, n.get<std::string>()).at("__class__").get<std::string>()];
  for (const auto& entry : l.lattice.sequence()) ++ft_count[l.lattice.definitions()[entry.definition].type->name];
  xs["Drift"] += extra_half_drifts;
  CHECK(xs == ft_count);
  // Without the half drifts the sequence is element_names, in order.
  std::vector<std::string> seq;
  for (const auto& entry : l.lattice.sequence()) {
    const std::string& n = l.lattice.definitions()[entry.definition].name;
    if (n.find("/half_drift") == std::string::npos) seq.push_back(n);
  }
  CHECK(seq == names.get<std::vector<std::string>>());
}

void check_tracks_10_turns(const ft::Lattice& lattice) {
  const double beta0 = lattice.reference().beta0();
  ft::Particles particles(6, beta0);
  for (size_t i = 0; i < particles.size(); ++i) {
    const double a = 1e-5 * static_cast<double>(i + 1);
    particles.set(i, a, 0.0, -0.5 * a, 0.0, 0.0, i % 2 ? 1e-5 : -1e-5);
  }
  ft::TrackOptions options;
  options.turns = 10;
  ft::make_cpu_backend(lattice)->track(particles, options);
  CHECK(particles.alive_count() == particles.size());
  for (size_t i = 0; i < particles.size(); ++i) {
    CAPTURE(i);
    CHECK(particles.state[i] > 0);
    CHECK(particles.lost_turn[i] == -1);
    CHECK(std::fabs(particles.x[i]) < 5e-3);
    CHECK(std::fabs(particles.y[i]) < 5e-3);
    CHECK(std::isfinite(particles.zeta[i]));
  }
}

}  // namespace

TEST_CASE("PS Booster (Xsuite): import, counts, circumference, 10 turns") {
  const std::string path = shared_lattice("psb_injection.json");
  const Loaded l = load(path);
  // 604 Xsuite elements; the thick cavity br.c02 (length 1 um) is drift(L/2), kick, drift(L/2).
  check_counts(l, 604, 2);
  CHECK(l.lattice.definitions().size() == 604 + 1);
  REQUIRE(l.warnings.size() == 1);
  CHECK(l.warnings[0].find("thick Xsuite Cavity") != std::string::npos);
  CHECK(std::fabs(l.lattice.circumference() - 157.08) < 1e-3);
  // Xsuite's own line length (t_sim = line length / (beta0 c) in particle_ref), cavity included.
  const double xs_length = xs_reference(l, "t_sim") * xs_reference(l, "beta0") * kClight;
  CHECK(close(l.lattice.circumference(), xs_length, 1e-12, 0.0));
  CHECK(close(l.lattice.circumference(), xs_line_length(l), 1e-14, 0.0));
  CHECK(l.lattice.reference().mass0 == xs_reference(l, "mass0"));
  CHECK(l.lattice.reference().p0c == xs_reference(l, "p0c"));
  CHECK(l.lattice.reference().q0 == 1.0);
  CHECK(close(l.lattice.reference().beta0(), xs_reference(l, "beta0"), 1e-15, 0.0));
  CHECK(l.lattice.limits().x == 1.0);
  check_tracks_10_turns(l.lattice);
}

TEST_CASE("CLIC damping ring (Xsuite): import, counts, circumference, 10 turns") {
  const std::string path = shared_lattice("clic_damping_ring.json");
  const Loaded l = load(path);
  check_counts(l, 36954, 0);
  CHECK(l.warnings.empty());
  CHECK(std::fabs(l.lattice.circumference() - 427.5) < 1e-3);
  const double xs_length = xs_reference(l, "t_sim") * xs_reference(l, "beta0") * kClight;
  CHECK(close(l.lattice.circumference(), xs_length, 1e-12, 0.0));
  CHECK(l.lattice.reference().q0 == -1.0);
  CHECK(l.lattice.reference().mass0 == 510998.95);
  // The sextupoles are Multipoles of Xsuite order 2, kept as order 2.
  size_t order2 = 0;
  for (uint32_t d = 0; d < l.lattice.definitions().size(); ++d)
    if (l.lattice.definitions()[d].type->name == "Multipole" && l.lattice.field(d, "order") == 2) ++order2;
  CHECK(order2 == 1504);
  check_tracks_10_turns(l.lattice);
}

TEST_CASE("PS Booster elements against Xsuite's formulas (drift with rvv, bend with hxl, quadrupole, edge, cavity)") {
  const std::string path = shared_lattice("psb_injection.json");
  const Loaded l = load(path);
  const ft::Lattice& lat = l.lattice;
  REQUIRE(lat.reference().beta0() < 0.6);  // rvv far from 1: the drift's 1/rvv term matters
  const double q0 = xs_reference(l, "q0"), p0c = xs_reference(l, "p0c"), line_length = xs_line_length(l);
  for (const ft::ParticleView& p0 : test_particles(lat, 5.0)) {
    CAPTURE(p0.x);
    CAPTURE(p0.delta);
    REQUIRE(p0.rvv != 1.0);
    {  // Drift
      INFO("drift_0");
      const size_t i = sequence_index(lat, "drift_0");
      ft::ParticleView want = p0;
      xs_drift_expanded(want, xs_field(xs_element(l, "drift_0"), "length"));
      check_same(track_range(lat, i, i + 1, p0), want);
    }
    for (const char* name : {"br.bhz11", "br.qfo11", "br.qde1"}) {  // bend with hxl; quadrupoles (order 1)
      INFO(name);
      const size_t i = sequence_index(lat, name);
      ft::ParticleView want = p0;
      xs_thin_multipole(want, xs_element(l, name));
      check_same(track_range(lat, i, i + 1, p0), want);
      CHECK(want.px != p0.px);
    }
    {  // DipoleEdge
      INFO("br.bhz11_den");
      const size_t i = sequence_index(lat, "br.bhz11_den");
      ft::ParticleView want = p0;
      xs_dipole_edge(want, xs_element(l, "br.bhz11_den"));
      check_same(track_range(lat, i, i + 1, p0), want);
      CHECK(want.py != p0.py);
    }
    {  // Cavity br.c02: length 1 um, harmonic 1, drift(L/2) kick drift(L/2)
      INFO("br.c02");
      const json& e = xs_element(l, "br.c02");
      const size_t i = sequence_index(lat, "br.c02");
      REQUIRE(lat.element(i - 1).name == "br.c02/half_drift");
      REQUIRE(lat.element(i + 1).name == "br.c02/half_drift");
      ft::ParticleView want = p0;
      xs_drift_expanded(want, 0.5 * xs_field(e, "length"));
      xs_cavity_kick(want, e, q0, p0c, line_length);
      xs_drift_expanded(want, 0.5 * xs_field(e, "length"));
      const ft::ParticleView got = track_range(lat, i - 1, i + 2, p0);
      check_close(got, want);
      // The energy changes by the kick, which is not negligible against the rounding.
      CHECK(std::fabs(want.ptau - p0.ptau) * p0c > 1.0);
      CHECK(close((got.ptau - p0.ptau) * p0c, (want.ptau - p0.ptau) * p0c, 1e-9, 1e-6));
    }
  }
}

TEST_CASE("CLIC elements against Xsuite's formulas: electron cavity (q0 = -1, phase = pi), sextupole, edge") {
  const std::string path = shared_lattice("clic_damping_ring.json");
  const Loaded l = load(path);
  const ft::Lattice& lat = l.lattice;
  const double q0 = xs_reference(l, "q0"), p0c = xs_reference(l, "p0c"), line_length = xs_line_length(l);
  REQUIRE(q0 == -1.0);
  const json& rf = xs_element(l, "rf");
  REQUIRE(xs_field(rf, "phase") == kPi);
  REQUIRE(xs_field(rf, "voltage") == 4.5e6);
  const size_t i_rf = sequence_index(lat, "rf");
  // Names of one sextupole (order 2), one DipoleEdge and one Drift, found in the Xsuite file.
  std::string sext, edge, drift;
  for (const auto& [name, e] : l.xsuite.at("elements").items()) {
    const std::string cls = e.at("__class__").get<std::string>();
    if (sext.empty() && cls == "Multipole" && e.value("order", 0) == 2) sext = name;
    if (edge.empty() && cls == "DipoleEdge" && xs_field(e, "e1") != 0.0) edge = name;
    if (drift.empty() && cls == "Drift" && xs_field(e, "length") > 0.1) drift = name;
  }
  REQUIRE(!sext.empty());
  REQUIRE(!edge.empty());
  REQUIRE(!drift.empty());
  for (const ft::ParticleView& p0 : test_particles(lat, 0.01)) {
    CAPTURE(p0.x);
    CAPTURE(p0.zeta);
    {
      INFO("rf");
      ft::ParticleView want = p0;
      xs_cavity_kick(want, rf, q0, p0c, line_length);
      const ft::ParticleView got = track_range(lat, i_rf, i_rf + 1, p0);
      check_close(got, want);
      // |q0| V sin(pi - 2 pi f zeta / (beta0 c)): an electron ahead of the reference (zeta > 0)
      // gains energy, one behind loses it (the stable slope above transition).
      const double gain_ev = (got.ptau - p0.ptau) * p0c;
      CHECK((gain_ev > 0.0) == (p0.zeta > 0.0));
      const double f = xs_field(rf, "harmonic") * (p0.beta0 * kClight) / line_length;
      CHECK(close(gain_ev, 4.5e6 * std::sin(2.0 * kPi * f * p0.zeta / (p0.beta0 * kClight)), 1e-9, 1e-3));
    }
    for (const std::string& name : {sext, edge, drift}) {
      INFO(name);
      const json& e = xs_element(l, name);
      const size_t i = sequence_index(lat, name);
      ft::ParticleView want = p0;
      const std::string cls = e.at("__class__").get<std::string>();
      if (cls == "Multipole") xs_thin_multipole(want, e);
      if (cls == "DipoleEdge") xs_dipole_edge(want, e);
      if (cls == "Drift") xs_drift_expanded(want, xs_field(e, "length"));
      check_same(track_range(lat, i, i + 1, p0), want);
      CHECK((want.px != p0.px || want.x != p0.x));
    }
  }
}

TEST_CASE("SRotation and XYShift from an Xsuite line against Xsuite's formulas") {
  // Not in the shared lattices: a hand-written line (angle in degrees as xtrack's SRotation).
  const json doc = json::parse(R"({"__class__": "Line",
    "elements": {"rot": {"__class__": "SRotation", "angle": 17.5, "cos_z": 0.9537169507482269},
                 "rot_old": {"__class__": "SRotation", "cos_z": 0.6, "sin_z": -0.8},
                 "shift": {"__class__": "XYShift", "dx": 1.5e-3, "dy": -0.7e-3}},
    "element_names": ["rot", "shift", "rot_old"],
    "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": [1e9]}})");
  const ft::Lattice lat =
      ft::lattice_from_json(ft::xsuite_to_fusetrack(doc, "rot.json", {}), "rot.json", builtin_registry());
  // xtrack SRotation_single_particle with cos_z, sin_z from the angle (s_rotation.py: angle / 180 * pi).
  auto xs_srotation = [](ft::ParticleView& p, double cos_z, double sin_z) {
    const double x = p.x, y = p.y, px = p.px, py = p.py;
    p.x = cos_z * x + sin_z * y;
    p.y = -sin_z * x + cos_z * y;
    p.px = cos_z * px + sin_z * py;
    p.py = -sin_z * px + cos_z * py;
  };
  for (const ft::ParticleView& p0 : test_particles(lat, 1.0)) {
    CAPTURE(p0.x);
    {
      const double anglerad = 17.5 / 180 * kPi;
      ft::ParticleView want = p0;
      xs_srotation(want, std::cos(anglerad), std::sin(anglerad));
      check_same(track_range(lat, 0, 1, p0), want);
      CHECK(want.x != p0.x);
    }
    {
      ft::ParticleView want = p0;
      want.x += -1.5e-3;  // XYShift_single_particle: x -= dx, y -= dy
      want.y += 0.7e-3;
      check_same(track_range(lat, 1, 2, p0), want);
    }
    {  // an older dict with cos_z, sin_z only: xtrack tracks with them as given; fusetrack with
       // cos and sin of the angle atan2(sin_z, cos_z), equal to rounding
      ft::ParticleView want = p0;
      xs_srotation(want, 0.6, -0.8);
      const ft::ParticleView got = track_range(lat, 2, 3, p0);
      CHECK(close(got.x, want.x, 0.0, 1e-18));
      CHECK(close(got.y, want.y, 0.0, 1e-18));
      CHECK(close(got.px, want.px, 0.0, 1e-18));
      CHECK(close(got.py, want.py, 0.0, 1e-18));
    }
  }
  CHECK(lat.field(2, "angle") == doctest::Approx(-53.13010235415599).epsilon(1e-14));
}

}  // namespace test_xsuite_lattices
