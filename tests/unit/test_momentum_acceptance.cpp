// Local momentum acceptance and Touschek lifetime (fusetrack/momentum_acceptance.h): the acceptance of a
// linear ring whose only limit is longitudinal equals the RF bucket height of the standard formula; the
// Piwinski rate against the integral taken here in tau by Simpson's rule with the Bessel function from its
// integral representation and B1, B2 written as in the paper; the ring's lifetime as the mean of the two
// signs' rates; the choice of positions and every kind of bad input named.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/momentum_acceptance.h"
#include "fusetrack/optics.h"
#include "support/paths.h"
#include "support/process.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in its namespace.
namespace test_momentum_acceptance {

using ft::test::builtin_registry;
using ft::test::error_message;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.141592653589793;
constexpr double kElectronMass = 510998.95;  // [eV]

/// A 100 m electron ring at 3 GeV: a thin-quadrupole FODO cell (60 degrees: sin(mu/2) = L k1l / 2 with
/// L = 10 m, k1l = 0.1 1/m; no bends, no dispersion), an 80 m longitudinal arc of momentum compaction
/// alpha_arc (eta = alpha_arc 80 / 100 - 1/gamma^2) and a thin cavity at harmonic h, lag 180 (stationary
/// bucket above transition).
struct BucketRing {
  double p0c = 3e9, voltage = 2e6, harmonic = 400, alpha_arc = 0.0125, arc = 80.0, circumference = 100.0;
  /// Energy lost per turn [eV] just before the cavity (a 1 Hz cavity at lag -90 degrees: a constant
  /// kick -energy_loss within 1e-17 over the bucket), making the bucket a moving one.
  double energy_loss = 0.0;
};

json bucket_ring_json(const BucketRing& r) {
  json elements = {{"qf_half", {{"type", "Multipole"}, {"knl", {0.0, 0.05}}}},
                   {"d", {{"type", "Drift"}, {"length", 10.0}}},
                   {"qd", {{"type", "Multipole"}, {"knl", {0.0, -0.1}}}},
                   {"arc", {{"type", "LongitudinalDrift"}, {"length", r.arc}, {"momentum_compaction", r.alpha_arc}}},
                   {"rf", {{"type", "Cavity"}, {"voltage", r.voltage}, {"harmonic", r.harmonic}, {"lag", 180.0}}}};
  json sequence = {"qf_half", "d", "qd", "d", "qf_half", "arc", "rf"};
  if (r.energy_loss > 0) {
    elements["loss"] = {{"type", "Cavity"}, {"voltage", r.energy_loss}, {"frequency", 1.0}, {"lag", -90.0}};
    sequence = {"qf_half", "d", "qd", "d", "qf_half", "arc", "loss", "rf"};
  }
  return {{"fusetrack_lattice", 1},
          {"reference", {{"mass0", kElectronMass}, {"q0", -1}, {"p0c", r.p0c}}},
          {"elements", elements},
          {"sequence", sequence}};
}

ft::Lattice bucket_ring(const BucketRing& r) {
  return ft::lattice_from_json(bucket_ring_json(r), "bucket_ring", builtin_registry());
}

/// Bucket height
///   delta_max = sqrt(2 |q| V / (pi h |eta| beta^2 E) |cos phi_s - (pi/2 - phi_s) sin phi_s|),
/// sin phi_s = U0 / V (phi_s counted from the zero crossing, 0 for a stationary bucket; S.Y. Lee,
/// "Accelerator Physics", 4th ed., sec. 3.I: delta_max = 2 sqrt(eV / (2 pi beta^2 E h |eta|)) Y(phi_s)).
double bucket_height(const BucketRing& r) {
  const double energy = std::sqrt(r.p0c * r.p0c + kElectronMass * kElectronMass);
  const double gamma = energy / kElectronMass, beta = r.p0c / energy;
  const double eta = r.alpha_arc * r.arc / r.circumference - 1.0 / (gamma * gamma);
  const double phi_s = std::asin(r.energy_loss / r.voltage);
  const double y2 = std::fabs(std::cos(phi_s) - (kPi / 2 - phi_s) * std::sin(phi_s));
  return std::sqrt(2.0 * r.voltage / (kPi * r.harmonic * std::fabs(eta) * beta * beta * energy) * y2);
}

/// The ring with its only aperture: |zeta| at the end of each turn below half the RF wavelength (the
/// unstable fixed points of the stationary bucket); outside the separatrix zeta runs past it.
void set_bucket_limit(ft::Lattice& lattice, const BucketRing& r) {
  ft::GlobalLimits limits = lattice.limits();
  limits.turn_limit[4] = r.circumference / (2.0 * r.harmonic);
  lattice.set_limits(limits);
}

/// exp(-x) I0(x) from I0(x) = (1/pi) Int_0^pi exp(x cos t) dt (Abramowitz and Stegun 9.6.16), Simpson.
double scaled_i0(double x) {
  const int n = 300;
  double sum = 0.0;
  for (int k = 0; k <= n; ++k) {
    const double w = (k == 0 || k == n) ? 1.0 : (k % 2 ? 4.0 : 2.0);
    sum += w * std::exp(x * (std::cos(kPi * k / n) - 1.0));
  }
  return sum * (kPi / n) / 3.0 / kPi;
}

/// Piwinski's rate (DESY 98-179, eq. 42 with B1, B2, sigma_h of eqs. 34-38) at one point, the integral in
/// tau = tau_m e^u by Simpson's rule.
double piwinski_by_simpson(const ft::TouschekOptics& o, const ft::TouschekBeam& b, double p0c, double delta_m) {
  const double energy = std::sqrt(p0c * p0c + kElectronMass * kElectronMass);
  const double gamma = energy / kElectronMass, beta = p0c / energy;
  const double sp = b.sigma_delta;
  const double sxb2 = b.emittance_x * o.beta_x, syb2 = b.emittance_y * o.beta_y;
  const double dtx = o.alpha_x * o.dx + o.beta_x * o.dpx, dty = o.alpha_y * o.dy + o.beta_y * o.dpy;
  const double sx2 = sxb2 + sp * sp * o.dx * o.dx, sy2 = syb2 + sp * sp * o.dy * o.dy;
  const double sh =
      1.0 / std::sqrt(1.0 / (sp * sp) + (o.dx * o.dx + dtx * dtx) / sxb2 + (o.dy * o.dy + dty * dty) / syb2);
  const double b2g2 = beta * beta * gamma * gamma;
  const double b1 = o.beta_x * o.beta_x / (2 * b2g2 * sxb2) * (1 - sh * sh * dtx * dtx / sxb2) +
                    o.beta_y * o.beta_y / (2 * b2g2 * syb2) * (1 - sh * sh * dty * dty / syb2);
  const double b2 = std::sqrt(b1 * b1 - o.beta_x * o.beta_x * o.beta_y * o.beta_y * sh * sh *
                                            (sx2 * sy2 - sp * sp * sp * sp * o.dx * o.dx * o.dy * o.dy) /
                                            (b2g2 * b2g2 * sxb2 * sxb2 * syb2 * syb2 * sp * sp));
  const double tm = beta * beta * delta_m * delta_m;
  const double tau_end = 80.0 / (b1 - b2);
  const int n = 6000;
  const double u_end = std::log(tau_end / tm);
  double sum = 0.0;
  for (int k = 0; k <= n; ++k) {
    const double tau = tm * std::exp(u_end * k / n);
    const double f = (2 + 1 / tau) * (2 + 1 / tau) * (tau / tm / (1 + tau) - 1) + 1 - std::sqrt((1 + tau) * tm / tau) -
                     (4 + 1 / tau) / (2 * tau) * std::log(tau / tm / (1 + tau));
    const double g = f * std::exp(-(b1 - b2) * tau) * scaled_i0(b2 * tau) * std::sqrt(tau / (1 + tau)) * tau;
    sum += ((k == 0 || k == n) ? 1.0 : (k % 2 ? 4.0 : 2.0)) * g;
  }
  const double integral = sum * (u_end / n) / 3.0;
  const double re = 2.8179403262e-15, c = 299792458.0;
  return re * re * c * o.beta_x * o.beta_y * sh * b.bunch_population /
         (8 * std::sqrt(kPi) * beta * beta * gamma * gamma * gamma * gamma * sxb2 * syb2 * b.sigma_zeta * sp) *
         integral;
}

ft::TouschekBeam light_source_beam() {
  ft::TouschekBeam b;
  b.emittance_x = 1e-9;
  b.emittance_y = 1e-11;
  b.sigma_delta = 1e-3;
  b.sigma_zeta = 3e-3;
  b.bunch_population = 1e10;
  return b;
}

}  // namespace

TEST_CASE("momentum acceptance of a linear ring with a cavity: the RF bucket height at every element") {
  const BucketRing r;
  ft::Lattice lattice = bucket_ring(r);
  set_bucket_limit(lattice, r);
  auto backend = ft::make_cpu_backend(lattice);
  ft::MomentumAcceptanceConfig c;
  c.turns = 600;  // about 12 synchrotron periods (Qs ~ 0.02)
  c.delta_max = 0.03;
  c.precision = 1e-4;
  const std::vector<size_t> every = ft::select_acceptance_positions(lattice, {});
  REQUIRE(every.size() == 7);
  const ft::MomentumAcceptance lma = ft::compute_momentum_acceptance(lattice, *backend, every, c);
  const double height = bucket_height(r);
  CHECK(height == doctest::Approx(0.0103).epsilon(0.01));
  CHECK(lma.six_d);
  // Discrete-kick corrections to the separatrix are ~ (2 pi Qs)^2 / 16 ~ 1e-3 relative (1e-5).
  const double tolerance = c.precision + 2e-5;
  for (size_t k = 0; k < every.size(); ++k) {
    CAPTURE(lma.name[k]);
    CHECK(std::fabs(lma.positive[k] - height) < tolerance);
    CHECK(std::fabs(lma.negative[k] + height) < tolerance);
    CHECK(lma.positive_lost[k] - lma.positive[k] < c.precision);  // the final bracket
    CHECK(lma.positive_lost[k] > lma.positive[k]);
    CHECK(lma.negative_lost[k] < lma.negative[k]);
  }
  // One launch per start element for each partial turn (element 0 has no closing one), one for the full turns.
  CHECK(lma.launches == lma.rounds * (2 * 7 - 1 + 1));
  CHECK(lma.rounds == 4);  // coarse step 3e-3, then 7.5e-4, 1.9e-4, 4.7e-5
}

TEST_CASE("momentum acceptance of a moving bucket (energy loss per turn) with a momentum limit: its height") {
  BucketRing r;
  r.energy_loss = 1e6;  // phi_s = 30 degrees: the height falls to sqrt(0.342) of the stationary one
  ft::Lattice lattice = bucket_ring(r);
  // Outside the separatrix the energy loss carries a particle down in delta without end: the momentum
  // limit (end of each turn) catches it.
  ft::GlobalLimits limits = lattice.limits();
  limits.turn_limit[5] = 0.05;
  lattice.set_limits(limits);
  auto backend = ft::make_cpu_backend(lattice);
  ft::MomentumAcceptanceConfig c;
  c.turns = 600;
  c.delta_max = 0.02;
  c.precision = 1e-4;
  ft::AcceptancePositions at;
  at.names = {"qd", "arc", "rf"};
  const std::vector<size_t> positions = ft::select_acceptance_positions(lattice, at);
  const ft::MomentumAcceptance lma = ft::compute_momentum_acceptance(lattice, *backend, positions, c);
  const double height = bucket_height(r);
  CHECK(height == doctest::Approx(0.0103 * std::sqrt(0.3424)).epsilon(0.01));
  for (size_t k = 0; k < positions.size(); ++k) {
    CAPTURE(lma.name[k]);
    CHECK(std::fabs(lma.positive[k] - height) < c.precision + 3e-5);
    CHECK(std::fabs(lma.negative[k] + height) < c.precision + 3e-5);
  }
}

TEST_CASE("momentum acceptance: no loss up to delta_max gives delta_max, with no first loss") {
  const BucketRing r;
  ft::Lattice lattice = bucket_ring(r);
  set_bucket_limit(lattice, r);
  auto backend = ft::make_cpu_backend(lattice);
  ft::MomentumAcceptanceConfig c;
  c.turns = 300;
  c.delta_max = 0.008;  // inside the bucket: nothing is lost
  c.precision = 1e-3;
  const ft::MomentumAcceptance lma = ft::compute_momentum_acceptance(lattice, *backend, {2}, c);
  CHECK(lma.positive[0] == doctest::Approx(0.008));
  CHECK(lma.negative[0] == doctest::Approx(-0.008));
  CHECK(std::isnan(lma.positive_lost[0]));
  CHECK(lma.rounds == 1);
}

TEST_CASE("Touschek rate: Piwinski's integral against Simpson's rule in tau") {
  const ft::TouschekBeam beam = light_source_beam();
  const ft::ReferenceParticle ref{kElectronMass, -1.0, 3e9};
  ft::TouschekOptics with_dispersion{10.0, 0.5, 0.2, 0.01, 5.0, -0.3, 0.0, 0.0};
  ft::TouschekOptics without{12.0, -1.0, 0.0, 0.0, 3.0, 0.4, 0.0, 0.0};
  ft::TouschekOptics both_planes{8.0, 0.2, 0.15, -0.02, 6.0, 0.1, 0.01, 0.002};
  for (const ft::TouschekOptics& o : {with_dispersion, without, both_planes})
    for (double delta_m : {0.01, 0.03}) {
      const double expected = piwinski_by_simpson(o, beam, 3e9, delta_m);
      const double rate = ft::touschek_rate(o, beam, ref, delta_m);
      CAPTURE(delta_m);
      CHECK(rate > 0.0);
      CHECK(std::fabs(rate - expected) / expected < 1e-9);
    }
  // Twice the particles, twice the rate; a larger acceptance, a smaller rate.
  ft::TouschekBeam doubled = beam;
  doubled.bunch_population *= 2;
  CHECK(ft::touschek_rate(without, doubled, ref, 0.02) ==
        doctest::Approx(2 * ft::touschek_rate(without, beam, ref, 0.02)).epsilon(1e-12));
  CHECK(ft::touschek_rate(without, beam, ref, 0.04) < ft::touschek_rate(without, beam, ref, 0.02));
}

TEST_CASE("Touschek lifetime of a ring: the mean over s of the two signs' rates") {
  const BucketRing r;
  ft::Lattice lattice = bucket_ring(r);
  const ft::TwissTable twiss = ft::compute_twiss_table(lattice);
  const ft::TouschekBeam beam = light_source_beam();
  ft::MomentumAcceptance lma;
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    lma.element.push_back(e);
    lma.name.push_back(lattice.element(e).name);
    lma.s.push_back(lattice.sequence()[e].s);
    lma.positive.push_back(0.02);
    lma.negative.push_back(-0.01);
  }
  const ft::TouschekLifetime t = ft::touschek_lifetime(lattice, twiss, lma, beam);
  CHECK(t.span_length == doctest::Approx(100.0));
  CHECK(t.lifetime == doctest::Approx(2.0 / (t.rate_positive + t.rate_negative)).epsilon(1e-12));
  // The mean over s: each element of non-zero length weighted by its length, the rate at its entrance
  // and exit (the table's rows) averaged.
  const auto point = [&](size_t row, double delta_m) {
    const ft::TouschekOptics o{twiss.beta_x[row], twiss.alpha_x[row], twiss.dx[row], twiss.dpx[row],
                               twiss.beta_y[row], twiss.alpha_y[row], twiss.dy[row], twiss.dpy[row]};
    return ft::touschek_rate(o, beam, lattice.reference(), delta_m);
  };
  double mean_p = 0.0, mean_n = 0.0;
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    const double length = twiss.s[e + 1] - twiss.s[e];
    mean_p += length * (point(e, 0.02) + point(e + 1, 0.02)) / 2 / 100.0;
    mean_n += length * (point(e, 0.01) + point(e + 1, 0.01)) / 2 / 100.0;
  }
  CHECK(t.rate_positive == doctest::Approx(mean_p).epsilon(1e-12));
  CHECK(t.rate_negative == doctest::Approx(mean_n).epsilon(1e-12));
  CHECK(t.rate_negative > t.rate_positive);  // the smaller acceptance loses more
  // Symmetric acceptances give the lifetime of each sign.
  ft::MomentumAcceptance symmetric = lma;
  for (double& v : symmetric.negative) v = -0.02;
  const ft::TouschekLifetime ts = ft::touschek_lifetime(lattice, twiss, symmetric, beam);
  CHECK(ts.rate_positive == doctest::Approx(t.rate_positive).epsilon(1e-12));
  CHECK(ts.rate_negative == doctest::Approx(t.rate_positive).epsilon(1e-12));
}

TEST_CASE("momentum acceptance: positions by name, pattern and s range") {
  const BucketRing r;
  const ft::Lattice lattice = bucket_ring(r);
  ft::AcceptancePositions p;
  p.names = {"qd"};
  CHECK(ft::select_acceptance_positions(lattice, p) == std::vector<size_t>{2});
  p.names = {"q.*"};
  CHECK(ft::select_acceptance_positions(lattice, p) == std::vector<size_t>{0, 2, 4});
  p.names = {};
  p.has_s_range = true;
  p.s_min = 15.0;  // qf_half and arc at 20 m, rf at 100 m
  p.s_max = 100.0;
  CHECK(ft::select_acceptance_positions(lattice, p) == std::vector<size_t>{4, 5, 6});
}

TEST_CASE("momentum acceptance: bad input names the option") {
  const BucketRing r;
  const ft::Lattice lattice = bucket_ring(r);
  ft::AcceptancePositions p;
  p.names = {"nowhere"};
  p.names_label = "--at";
  const std::string none = error_message([&] { ft::select_acceptance_positions(lattice, p); });
  CHECK(none.find("--at") != std::string::npos);
  CHECK(none.find("'nowhere' names no element") != std::string::npos);
  p.names = {"q["};
  CHECK(error_message([&] { ft::select_acceptance_positions(lattice, p); }).find("regular expression") !=
        std::string::npos);
  p.names = {};
  p.has_s_range = true;
  p.s_min = 101.0;
  p.s_max = 200.0;
  p.s_range_label = "--s-range";
  CHECK(error_message([&] { ft::select_acceptance_positions(lattice, p); }).find("--s-range") != std::string::npos);

  const auto config_error = [](auto change) {
    ft::MomentumAcceptanceConfig c;
    change(c);
    return error_message([&] { ft::validate_momentum_acceptance_config(c); });
  };
  CHECK(config_error([](auto& c) { c.precision = 0.0; }).find("precision") != std::string::npos);
  CHECK(config_error([](auto& c) { c.precision = -1e-3; }).find("precision") != std::string::npos);
  CHECK(config_error([](auto& c) { c.precision = 0.1; }).find("larger than delta_max") != std::string::npos);
  CHECK(config_error([](auto& c) { c.precision = 1e-7; }).find("finer than") != std::string::npos);
  CHECK(config_error([](auto& c) { c.turns = 0; }).find("turns") != std::string::npos);
  CHECK(config_error([](auto& c) { c.delta_max = 1.5; }).find("delta_max") != std::string::npos);
  CHECK(config_error([](auto& c) { c.precision = 1e-4; }).empty());

  ft::TouschekBeam beam = light_source_beam();
  beam.sigma_zeta = 0.0;
  CHECK(error_message([&] { ft::validate_touschek_beam(beam); }).find("sigma_zeta") != std::string::npos);

  // A lattice without energy.
  ft::Lattice no_energy(ft::ReferenceParticle{kElectronMass, -1.0, 0.0});
  no_energy.append(no_energy.define("d", builtin_registry().get("Drift", ft::InputLocation("test")),
                                    json{{"length", 1.0}}, ft::InputLocation("test")));
  auto backend = ft::make_cpu_backend(no_energy);
  const std::string energy =
      error_message([&] { ft::compute_momentum_acceptance(no_energy, *backend, {0}, ft::MomentumAcceptanceConfig{}); });
  CHECK(energy.find("reference.p0c") != std::string::npos);
}

TEST_CASE("fusetrack momentum-acceptance: the table, the summary with the lifetime, bad options named") {
  const BucketRing r;
  const std::string ring = ft::test::write_temp_file("bucket_ring.json", bucket_ring_json(r).dump());
  const std::string out = (ft::test::temp_dir("momentum_acceptance_cli") / "lma").string();
  const std::string command =
      fmt::format("{} momentum-acceptance {} --device cpu --no-plots ", ft::test::fusetrack_binary(), ring);
  const auto run = ft::test::run_command(
      command + fmt::format("--at qd rf --limit 0 0 0 0 0.125 0 -n 300 --delta-max 0.03 --precision 5e-4 "
                            "--emittance-x 1e-9 --emittance-y 1e-11 --sigma-delta 1e-3 --sigma-zeta 3e-3 "
                            "--bunch-population 1e10 -o {}",
                            out));
  CAPTURE(run.second);
  REQUIRE(run.first == 0);
  CHECK(run.second.find("Touschek lifetime (Piwinski)") != std::string::npos);
  std::ifstream csv(out + "/momentum_acceptance.csv");
  std::string header, line;
  std::getline(csv, header);
  CHECK(header == "s,element,name,delta_positive,delta_negative,first_lost_positive,first_lost_negative");
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    const auto comma = [&](int n) {
      size_t at = 0;
      for (int k = 0; k < n; ++k) at = line.find(',', at) + 1;
      return at;
    };
    const double positive = std::stod(line.substr(comma(3)));
    CHECK(std::fabs(positive - bucket_height(r)) < 5e-4 + 2e-5);
  }
  CHECK(rows == 2);
  json summary;
  std::ifstream(out + "/summary.json") >> summary;
  CHECK(summary["touschek"]["lifetime_s"].get<double>() > 0.0);
  CHECK(summary["positions"] == 2);
  CHECK(std::ifstream(out + "/touschek_rate.csv").good());
  // A run without the bunch in the same directory leaves no Touschek table of the earlier run behind.
  const auto again = ft::test::run_command(
      command + fmt::format("--at qd --limit 0 0 0 0 0.125 0 -n 50 --delta-max 0.03 --precision 5e-3 -o {}", out));
  REQUIRE(again.first == 0);
  CHECK_FALSE(std::ifstream(out + "/touschek_rate.csv").good());

  const auto fails_naming = [&](const std::string& options, const std::string& named) {
    const auto bad = ft::test::run_command(command + options);
    CAPTURE(options);
    CAPTURE(bad.second);
    CHECK(bad.first == 2);
    CHECK(bad.second.find(named) != std::string::npos);
  };
  fails_naming("--at nowhere", "'--at'");
  fails_naming("--s-range 150 200", "'--s-range'");
  fails_naming("--precision 0", "'--precision'");
  fails_naming("--precision 1e-7", "finer than");
  fails_naming("--precision 0.2 --delta-max 0.1", "larger than delta_max");
  fails_naming("--delta-max 2", "'--delta-max'");
  fails_naming("--emittance-x 1e-9", "--sigma-zeta");
  fails_naming("--emittance-x 1e-9 --emittance-y 0 --sigma-delta 1e-3 --sigma-zeta 3e-3 --bunch-population 1",
               "'--emittance-y'");
}

}  // namespace test_momentum_acceptance
