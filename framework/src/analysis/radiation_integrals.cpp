// Synchrotron radiation integrals from the optics along the ring (fusetrack/radiation_integrals.h
// has the formulas and sources).
#include "fusetrack/radiation_integrals.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "fusetrack/error.h"
#include "fusetrack/registry.h"

namespace ft {

namespace {

constexpr double kElectronRestEnergy = 510998.95;     // eV (CODATA 2018)
constexpr double kElectronRadius = 2.8179403262e-15;  // m
constexpr double kHbarC = 1.973269804e-7;             // eV m
constexpr double kSpeedOfLight = 299792458.0;         // m/s
constexpr int kSimpsonIntervals = 64;                 // even

bool has_field(const ElementType& type, const char* name) {
  for (const auto& f : type.fields)
    if (f.name == name) return true;
  return false;
}

/// The optics at one point: horizontal Twiss and dispersion.
struct PlaneOptics {
  double beta = 0.0, alpha = 0.0, d = 0.0, dp = 0.0;
  double curly_h() const {
    const double gamma = (1.0 + alpha * alpha) / beta;
    return gamma * d * d + 2.0 * alpha * d * dp + beta * dp * dp;
  }
};

/// A thin horizontal focusing kick px += r21 x (a pole face): D' += r21 D, alpha -= r21 beta.
PlaneOptics thin_focus(PlaneOptics o, double r21) {
  o.dp += r21 * o.d;
  o.alpha -= r21 * o.beta;
  return o;
}

/// The optics at s in a body of focusing K = h^2 + k1 and dispersion source h, from its entry o.
PlaneOptics body_optics(const PlaneOptics& o, double K, double h, double s) {
  double c, sn, cp, sp, disp, disp_p;  // C, S, C', S', the particular solution and its derivative
  if (K > 0.0) {
    const double r = std::sqrt(K);
    c = std::cos(r * s), sn = std::sin(r * s) / r, cp = -K * sn, sp = c;
    disp = h * (1.0 - c) / K, disp_p = h * sn;
  } else if (K < 0.0) {
    const double r = std::sqrt(-K);
    c = std::cosh(r * s), sn = std::sinh(r * s) / r, cp = -K * sn, sp = c;
    disp = h * (1.0 - c) / K, disp_p = h * sn;
  } else {
    c = 1.0, sn = s, cp = 0.0, sp = 1.0;
    disp = h * s * s / 2.0, disp_p = h * s;
  }
  const double gamma = (1.0 + o.alpha * o.alpha) / o.beta;
  PlaneOptics out;
  out.beta = c * c * o.beta - 2.0 * c * sn * o.alpha + sn * sn * gamma;
  out.alpha = -c * cp * o.beta + (c * sp + cp * sn) * o.alpha - sn * sp * gamma;
  out.d = c * o.d + sn * o.dp + disp;
  out.dp = cp * o.d + sp * o.dp + disp_p;
  return out;
}

struct Integrals {
  double i1 = 0.0, i2 = 0.0, i3 = 0.0, i4 = 0.0, i5 = 0.0;
};

/// A thick bend from the optics at its entry.
Integrals thick_bend(const PlaneOptics& entry, double length, double angle, double k1, double e1, double e2) {
  const double h = angle / length;
  const double K = h * h + k1;
  const PlaneOptics inside = thin_focus(entry, h * std::tan(e1));
  double sum_d = 0.0, sum_h = 0.0;
  PlaneOptics exit;
  for (int j = 0; j <= kSimpsonIntervals; ++j) {
    const double s = length * j / kSimpsonIntervals;
    const PlaneOptics o = body_optics(inside, K, h, s);
    const double w = (j == 0 || j == kSimpsonIntervals) ? 1.0 : (j % 2 == 1 ? 4.0 : 2.0);
    sum_d += w * o.d;
    sum_h += w * o.curly_h();
    if (j == kSimpsonIntervals) exit = o;
  }
  const double step = length / kSimpsonIntervals / 3.0;
  const double int_d = sum_d * step, int_h = sum_h * step;
  const double h_abs3 = std::fabs(h) * h * h;
  Integrals r;
  r.i1 = h * int_d;
  r.i2 = h * h * length;
  r.i3 = h_abs3 * length;
  r.i4 = h * (h * h + 2.0 * k1) * int_d - h * h * (entry.d * std::tan(e1) + exit.d * std::tan(e2));
  r.i5 = h_abs3 * int_h;
  return r;
}

/// A thin bend (hxl over `length`) at optics o.
Integrals thin_bend(const PlaneOptics& o, double length, double hxl, double k1l) {
  const double h = hxl / length;
  Integrals r;
  r.i1 = o.d * hxl;
  r.i2 = h * hxl;
  r.i3 = std::fabs(h) * h * hxl;
  r.i4 = o.d * hxl * (h * h + 2.0 * k1l / length);
  r.i5 = std::fabs(h) * h * h * length * o.curly_h();
  return r;
}

/// The one-turn matrix M (x, px, y, py, zeta, pzeta) in the frame of the betatron coordinates,
/// T^-1 M T with the symplectic T(d): x = x_b + d0 pzeta, px = px_b + d1 pzeta (y alike with d2, d3),
/// zeta = zeta_b - d1 x_b + d0 px_b - d3 y_b + d2 py_b, T^-1 = T(-d); d the periodic dispersion of M,
/// (1 - A) d = b with A its 4x4 transverse block and b its pzeta column (A. W. Chao, "Evaluation of beam
/// distribution parameters in an electron storage ring", J. Appl. Phys. 50 (1979) 595). Its (zeta,
/// pzeta) block then holds the whole slip (the path lengths of the dispersion orbit included), as the
/// synchrotron motion of a ring with its cavities at dispersive points has it.
Matrix6 without_dispersion(const Matrix6& m) {
  double a[4][5];
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) a[i][j] = (i == j ? 1.0 : 0.0) - m[i][j];
    a[i][4] = m[i][5];
  }
  for (int c = 0; c < 4; ++c) {  // Gaussian elimination with partial pivoting
    int pivot = c;
    for (int i = c + 1; i < 4; ++i)
      if (std::fabs(a[i][c]) > std::fabs(a[pivot][c])) pivot = i;
    for (int j = 0; j < 5; ++j) std::swap(a[c][j], a[pivot][j]);
    if (a[c][c] == 0.0) return m;  // a transverse integer resonance: leave the matrix as it is
    for (int i = 0; i < 4; ++i) {
      if (i == c) continue;
      const double f = a[i][c] / a[c][c];
      for (int j = c; j < 5; ++j) a[i][j] -= f * a[c][j];
    }
  }
  double d[4];
  for (int i = 0; i < 4; ++i) d[i] = a[i][4] / a[i][i];
  auto shear = [&](double sign) {
    Matrix6 t{};
    for (int i = 0; i < 6; ++i) t[i][i] = 1.0;
    for (int i = 0; i < 4; ++i) t[i][5] = sign * d[i];
    t[4][0] = -sign * d[1], t[4][1] = sign * d[0], t[4][2] = -sign * d[3], t[4][3] = sign * d[2];
    return t;
  };
  const Matrix6 t = shear(1.0), t_inv = shear(-1.0);
  Matrix6 mt{}, out{};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      for (int k = 0; k < 6; ++k) mt[i][j] += m[i][k] * t[k][j];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      for (int k = 0; k < 6; ++k) out[i][j] += t_inv[i][k] * mt[k][j];
  return out;
}

}  // namespace

size_t set_radiation(Lattice& lattice, RadiationMode mode) {
  size_t count = 0;
  for (uint32_t d = 0; d < lattice.definitions().size(); ++d) {
    if (!has_field(*lattice.definitions()[d].type, "radiation")) continue;
    lattice.set_field(d, "radiation", static_cast<double>(mode));
    ++count;
  }
  lattice.prepare();
  return count;
}

RadiationMode lattice_radiation(const Lattice& lattice) {
  int highest = 0;
  for (uint32_t d = 0; d < lattice.definitions().size(); ++d)
    if (has_field(*lattice.definitions()[d].type, "radiation"))
      highest = std::max(highest, static_cast<int>(lattice.field(d, "radiation")));
  return static_cast<RadiationMode>(highest);
}

RadiationIntegrals radiation_integrals(const Lattice& lattice, const TwissTable& twiss) {
  const size_t n = lattice.sequence().size();
  if (twiss.size() != n + 1)
    throw Error(fmt::format("radiation integrals: the Twiss table has {} rows, the lattice {} elements (expected {})",
                            twiss.size(), n, n + 1));
  RadiationIntegrals r;
  for (size_t e = 0; e < n; ++e) {
    const uint32_t d = lattice.sequence()[e].definition;
    const ElementType& type = *lattice.definitions()[d].type;
    if (!has_field(type, "length")) continue;
    const double length = lattice.field(d, "length");
    const PlaneOptics o{twiss.beta_x[e], twiss.alpha_x[e], twiss.dx[e], twiss.dpx[e]};
    Integrals add;
    if (has_field(type, "angle")) {
      const double angle = lattice.field(d, "angle");
      if (angle == 0.0 || length == 0.0) continue;
      const double k1 = has_field(type, "k1") ? lattice.field(d, "k1") : 0.0;
      auto edge = [&](const char* side) {
        const std::string active = fmt::format("edge_{}_active", side), face = fmt::format("edge_{}_angle", side);
        if (has_field(type, active.c_str()) && lattice.field(d, active) == 0.0) return 0.0;
        return has_field(type, face.c_str()) ? lattice.field(d, face) : 0.0;
      };
      add = thick_bend(o, length, angle, k1, edge("entry"), edge("exit"));
    } else if (has_field(type, "hxl")) {
      const double hxl = lattice.field(d, "hxl");
      if (hxl == 0.0) continue;
      if (length <= 0.0)
        throw Error(
            fmt::format("radiation integrals: element #{} '{}' ({}) bends by hxl = {} rad but has length = {} m: "
                        "its curvature hxl / length needs the length of the magnet it stands for",
                        e, lattice.definitions()[d].name, type.name, hxl, length));
      const double k1l = has_field(type, "knl") ? lattice.field(d, "knl", 1) : 0.0;
      add = thin_bend(o, length, hxl, k1l);
    } else {
      continue;
    }
    r.i1 += add.i1, r.i2 += add.i2, r.i3 += add.i3, r.i4 += add.i4, r.i5 += add.i5;
    ++r.bends;
  }

  const ReferenceParticle& ref = lattice.reference();
  r.energy0 = ref.energy0();
  r.gamma0 = ref.gamma0();
  r.beta0 = ref.beta0();
  r.circumference = lattice.circumference();
  r.revolution_period = r.circumference / (r.beta0 * kSpeedOfLight);
  r.momentum_compaction = r.i1 / r.circumference;
  const double radius = kElectronRadius * ref.q0 * ref.q0 * kElectronRestEnergy / ref.mass0;
  const double compton = kHbarC / ref.mass0;
  const double g = r.gamma0;
  r.energy_loss_per_turn = 2.0 / 3.0 * radius * g * g * g * r.energy0 * r.i2;
  if (r.i2 == 0.0) return r;  // no bends: no damping
  r.j_x = 1.0 - r.i4 / r.i2;
  r.j_y = 1.0;
  r.j_zeta = 2.0 + r.i4 / r.i2;
  const double turns = 2.0 * r.energy0 / r.energy_loss_per_turn;
  r.damping_turns_x = turns / r.j_x;
  r.damping_turns_y = turns / r.j_y;
  r.damping_turns_zeta = turns / r.j_zeta;
  r.damping_time_x = r.damping_turns_x * r.revolution_period;
  r.damping_time_y = r.damping_turns_y * r.revolution_period;
  r.damping_time_zeta = r.damping_turns_zeta * r.revolution_period;
  const double c_q = 55.0 / (32.0 * std::sqrt(3.0)) * compton;
  // A partition <= 0 is an anti-damped plane (e.g. gradient bends with I4 / I2 < -2): no equilibrium.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.emittance_x = r.j_x > 0.0 ? c_q * g * g * r.i5 / (r.j_x * r.i2) : nan;
  r.sigma_delta = r.j_zeta > 0.0 ? std::sqrt(c_q * g * g * r.i3 / (r.j_zeta * r.i2)) : nan;
  return r;
}

RadiationIntegrals radiation_integrals(const Lattice& lattice, const OpticsOptions& options) {
  Lattice plain = lattice;
  if (lattice_radiation(lattice) != RadiationMode::off) set_radiation(plain, RadiationMode::off);
  RadiationIntegrals r = radiation_integrals(plain, compute_twiss_table(plain, options));
  radiation_longitudinal_equilibrium(lattice, r, options);
  return r;
}

void radiation_longitudinal_equilibrium(const Lattice& lattice, RadiationIntegrals& r, const OpticsOptions& options) {
  r.longitudinal = false;
  const double charge = std::fabs(lattice.reference().q0);
  r.rf_voltage = 0.0;
  for (const auto& entry : lattice.sequence()) {
    const auto& def = lattice.definitions()[entry.definition];
    if (def.type->name == "Cavity") r.rf_voltage += charge * lattice.field(entry.definition, "voltage");
  }
  r.synchronous_phase = r.rf_voltage > r.energy_loss_per_turn ? std::asin(r.energy_loss_per_turn / r.rf_voltage)
                                                              : std::numeric_limits<double>::quiet_NaN();
  if (r.i2 == 0.0) {
    r.longitudinal_reason = "no bends: no radiation";
    return;
  }
  if (!(r.j_zeta > 0.0)) {
    r.longitudinal_reason =
        fmt::format("the synchrotron motion is anti-damped (J_zeta = 2 + I4 / I2 = {:.6g} <= 0)", r.j_zeta);
    return;
  }
  // The ring with the mean radiation: elements in the quantum mode keep the mean loss, and a ring
  // without radiation gets it everywhere.
  Lattice radiating = lattice;
  if (lattice_radiation(lattice) == RadiationMode::off) {
    set_radiation(radiating, RadiationMode::mean);
  } else {
    for (uint32_t d = 0; d < radiating.definitions().size(); ++d)
      if (has_field(*radiating.definitions()[d].type, "radiation") &&
          radiating.field(d, "radiation") == static_cast<double>(RadiationMode::quantum))
        radiating.set_field(d, "radiation", static_cast<double>(RadiationMode::mean));
    radiating.prepare();
  }
  std::string reason;
  OneTurnMap map;
  try {
    map = compute_one_turn_map(radiating, options, &reason);
  } catch (const Error& e) {
    r.longitudinal_reason = fmt::format("no closed orbit with the mean radiation: {}", e.what());
    return;
  }
  if (!map.six_d) {
    r.longitudinal_reason = reason;
    return;
  }
  // The (zeta, pzeta) block of the matrix in the frame without dispersion, without its damping
  // (M / sqrt(det M)).
  const Matrix6 m = without_dispersion(map.matrix);
  const double det = m[4][4] * m[5][5] - m[4][5] * m[5][4];
  const double scale = det > 0.0 ? 1.0 / std::sqrt(det) : 1.0;
  const PlaneTwiss ts = twiss_from_block(m[4][4] * scale, m[4][5] * scale, m[5][4] * scale, m[5][5] * scale);
  if (!ts.stable) {
    r.longitudinal_reason = "the synchrotron motion of the radiating ring is not stable";
    return;
  }
  r.longitudinal = true;
  r.longitudinal_reason = reason;
  r.closed_orbit = map.closed_orbit;
  r.synchrotron_tune = ts.tune > 0.5 ? 1.0 - ts.tune : ts.tune;
  r.beta_s = std::fabs(ts.beta);
  r.bunch_length = r.beta_s * r.sigma_delta / (r.beta0 * r.beta0);
}

nlohmann::ordered_json radiation_integrals_to_json(const RadiationIntegrals& r) {
  nlohmann::ordered_json j;
  j["integrals"] = {{"i1", r.i1}, {"i2", r.i2}, {"i3", r.i3}, {"i4", r.i4}, {"i5", r.i5}};
  j["bends"] = r.bends;
  j["energy0"] = r.energy0;
  j["circumference"] = r.circumference;
  j["revolution_period"] = r.revolution_period;
  j["energy_loss_per_turn"] = r.energy_loss_per_turn;
  j["damping_partitions"] = {{"x", r.j_x}, {"y", r.j_y}, {"zeta", r.j_zeta}};
  j["damping_times"] = {{"x", r.damping_time_x}, {"y", r.damping_time_y}, {"zeta", r.damping_time_zeta}};
  j["damping_turns"] = {{"x", r.damping_turns_x}, {"y", r.damping_turns_y}, {"zeta", r.damping_turns_zeta}};
  j["emittance_x"] = r.emittance_x;
  j["sigma_delta"] = r.sigma_delta;
  j["momentum_compaction"] = r.momentum_compaction;
  j["rf_voltage"] = r.rf_voltage;
  j["synchronous_phase_deg"] = std::isfinite(r.synchronous_phase)
                                   ? nlohmann::ordered_json(r.synchronous_phase * 57.29577951308232)
                                   : nlohmann::ordered_json(nullptr);
  j["longitudinal"] = r.longitudinal;
  j["longitudinal_reason"] = r.longitudinal_reason;
  if (r.longitudinal) {
    j["closed_orbit"] = {{"x", r.closed_orbit[0]},  {"px", r.closed_orbit[1]},   {"y", r.closed_orbit[2]},
                         {"py", r.closed_orbit[3]}, {"zeta", r.closed_orbit[4]}, {"delta", r.closed_orbit[5]}};
    j["synchrotron_tune"] = r.synchrotron_tune;
    j["beta_s"] = r.beta_s;
    j["bunch_length"] = r.bunch_length;
  }
  return j;
}

}  // namespace ft
