// The TaylorMap example plugin (plugins/taylor_map): linear maps against the same matrices built
// from built-in elements, a second-order map against values computed here by hand, the old-coordinate
// rule, delta bookkeeping, pass-through outputs, validation, and the bundled example lattice.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../../plugins/taylor_map/taylor_map.h"
#include "fusetrack/codegen.h"
#include "plugins/plugin_test_support.h"
#include "support/element_testing.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_taylor_map.
namespace test_taylor_map {

using namespace ft;
using ft::plugin_test::example_plugin;
using json = nlohmann::ordered_json;

namespace {

constexpr double kPi = 3.14159265358979323846;
enum Coordinate { X = 0, PX = 1, Y = 2, PY = 3, ZETA = 4, DELTA = 5 };

/// A term table, written the way a user writes the lattice file.
struct Terms {
  json output = json::array(), exponents = json::array(), coefficients = json::array();
  Terms& add(int out, std::array<int, 6> e, double c) {
    output.push_back(out);
    for (int v : e) exponents.push_back(v);
    coefficients.push_back(c);
    return *this;
  }
  json fields() const { return {{"output", output}, {"exponents", exponents}, {"coefficients", coefficients}}; }
  /// The element struct, as the lattice loader would fill it, prepared.
  TaylorMap element() const {
    TaylorMap e = ft_test::with_defaults<TaylorMap>(ft_element_descriptor_TaylorMap());
    for (size_t t = 0; t < output.size(); ++t) {
      e.output[t] = output[t].get<int>();
      e.coefficients[t] = coefficients[t].get<double>();
      for (int j = 0; j < 6; ++j) e.exponents[6 * t + j] = exponents[6 * t + j].get<int>();
    }
    TaylorMap_prepare(e, ft_test::reference_proton(0.9));
    return e;
  }
};

struct Setup {
  std::unique_ptr<ElementRegistry> registry = ft::plugin_test::registry_with({example_plugin("taylor_map")});
  const InputLocation at{"test"};
  const ElementType& type(const std::string& name) { return registry->get(name, at); }
};

Particles particles_at(const std::vector<std::array<double, 6>>& coords, double beta0) {
  Particles p(coords.size(), beta0);
  for (size_t i = 0; i < coords.size(); ++i)
    p.set(i, coords[i][0], coords[i][1], coords[i][2], coords[i][3], coords[i][4], coords[i][5]);
  return p;
}

const std::vector<std::array<double, 6>> kOnMomentum = {
    {1e-3, 2e-4, -5e-4, 1e-4, 1e-2, 0.0}, {-2e-3, -3e-4, 1.5e-3, -2e-4, -3e-2, 0.0},
    {3e-3, 1e-3, 2e-3, -1e-3, 0.0, 0.0},  {0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
    {-4e-4, 7e-4, 9e-4, 3e-4, 0.2, 0.0}};

}  // namespace

TEST_CASE("a linear map equals drift - thin quadrupole - drift from built-in elements (6D, delta = 0)") {
  // Hand-computed map of D(L) Q(k1l) D(L) at delta = 0 (rpp = rvv = 1): per plane [[1, L], [0, 1]]
  // [[1, 0], [-k, 1]] [[1, L], [0, 1]] with k = +k1l in x and -k1l in y; the expanded drift adds
  // -L (px^2 + py^2) / 2 to zeta before and after the kick, px1 = -k1l x + (1 - k1l L) px,
  // py1 = k1l y + (1 + k1l L) py: zeta is a quadratic polynomial, exactly representable.
  const double L = 2.5, k = 0.07;
  Terms t;
  for (int plane = 0; plane < 2; ++plane) {
    const int q = 2 * plane, p = q + 1;
    const double kk = plane == 0 ? k : -k;
    std::array<int, 6> eq{}, ep{};
    eq[q] = 1;
    ep[p] = 1;
    t.add(q, eq, 1 - kk * L).add(q, ep, 2 * L - kk * L * L);
    t.add(p, eq, -kk).add(p, ep, 1 - kk * L);
  }
  t.add(ZETA, {0, 0, 0, 0, 1, 0}, 1.0);
  const double a = 1 - k * L, b = 1 + k * L;  // px1 = -k x + a px,  py1 = k y + b py
  t.add(ZETA, {2, 0, 0, 0, 0, 0}, -L / 2 * k * k).add(ZETA, {1, 1, 0, 0, 0, 0}, L * k * a);
  t.add(ZETA, {0, 2, 0, 0, 0, 0}, -L / 2 * (1 + a * a));
  t.add(ZETA, {0, 0, 2, 0, 0, 0}, -L / 2 * k * k).add(ZETA, {0, 0, 1, 1, 0, 0}, -L * k * b);
  t.add(ZETA, {0, 0, 0, 2, 0, 0}, -L / 2 * (1 + b * b));

  Setup s;
  for (double p0c : {2e9, 450e9}) {
    Lattice builtin(ReferenceParticle{938272088.16, 1.0, p0c});
    builtin.append(builtin.define("d", s.type("Drift"), {{"length", L}}, s.at));
    builtin.append(builtin.define("q", s.type("Multipole"), {{"knl", {0.0, k}}}, s.at));
    builtin.append("d");
    builtin.prepare();
    Lattice mapped(ReferenceParticle{938272088.16, 1.0, p0c});
    json f = t.fields();
    f["length"] = 2 * L;
    mapped.append(mapped.define("map", s.type("TaylorMap"), f, s.at));
    mapped.prepare();
    CHECK(mapped.circumference() == builtin.circumference());

    Particles a1 = particles_at(kOnMomentum, builtin.reference().beta0()), a2 = a1;
    ft::plugin_test::track_cpu(builtin, a1, 3);
    ft::plugin_test::track_cpu(mapped, a2, 3);
    for (size_t i = 0; i < a1.size(); ++i) {
      CAPTURE(i);
      CAPTURE(p0c);
      CHECK(ft_test::close(a2.x[i], a1.x[i], 1e-14, 1e-19));
      CHECK(ft_test::close(a2.px[i], a1.px[i], 1e-14, 1e-19));
      CHECK(ft_test::close(a2.y[i], a1.y[i], 1e-14, 1e-19));
      CHECK(ft_test::close(a2.py[i], a1.py[i], 1e-14, 1e-19));
      // The drift computes zeta as L (1 - (1 + (x'^2 + y'^2) / 2)): ~1e-16 L absolute rounding per pass.
      CHECK(ft_test::close(a2.zeta[i], a1.zeta[i], 1e-12, 1e-14));
      CHECK(a2.delta[i] == 0.0);  // no delta terms: passes through
      CHECK(a2.ptau[i] == a1.ptau[i]);
    }
  }
}

TEST_CASE("a linear 4D map equals the thick built-in Quadrupole, zeta and delta pass through") {
  const double L = 0.8, k1 = 0.9;
  const double w = std::sqrt(k1);
  // On momentum: x plane [[cos wL, sin wL / w], [-w sin wL, cos wL]], y plane with cosh / sinh.
  const double c = std::cos(w * L), sn = std::sin(w * L), ch = std::cosh(w * L), sh = std::sinh(w * L);
  Terms t;
  t.add(X, {1, 0, 0, 0, 0, 0}, c).add(X, {0, 1, 0, 0, 0, 0}, sn / w);
  t.add(PX, {1, 0, 0, 0, 0, 0}, -w * sn).add(PX, {0, 1, 0, 0, 0, 0}, c);
  t.add(Y, {0, 0, 1, 0, 0, 0}, ch).add(Y, {0, 0, 0, 1, 0, 0}, sh / w);
  t.add(PY, {0, 0, 1, 0, 0, 0}, w * sh).add(PY, {0, 0, 0, 1, 0, 0}, ch);
  Setup s;
  Lattice builtin(ReferenceParticle{938272088.16, 1.0, 2e9});
  builtin.append(builtin.define("q", s.type("Quadrupole"), {{"length", L}, {"k1", k1}}, s.at));
  builtin.prepare();
  Lattice mapped(ReferenceParticle{938272088.16, 1.0, 2e9});
  mapped.append(mapped.define("map", s.type("TaylorMap"), t.fields(), s.at));
  mapped.prepare();
  const Particles initial = particles_at(kOnMomentum, builtin.reference().beta0());
  Particles a1 = initial, a2 = initial;
  ft::plugin_test::track_cpu(builtin, a1);
  ft::plugin_test::track_cpu(mapped, a2);
  for (size_t i = 0; i < a1.size(); ++i) {
    CAPTURE(i);
    CHECK(ft_test::close(a2.x[i], a1.x[i], 2e-15, 1e-19));
    CHECK(ft_test::close(a2.px[i], a1.px[i], 2e-15, 1e-19));
    CHECK(ft_test::close(a2.y[i], a1.y[i], 2e-15, 1e-19));
    CHECK(ft_test::close(a2.py[i], a1.py[i], 2e-15, 1e-19));
    CHECK(a2.zeta[i] == initial.zeta[i]);
    CHECK(a2.delta[i] == initial.delta[i]);
    CHECK(a2.ptau[i] == initial.ptau[i]);
    CHECK(a2.rpp[i] == initial.rpp[i]);
    CHECK(a2.rvv[i] == initial.rvv[i]);
  }
}

TEST_CASE("a second-order map against hand-computed values, delta set through update_delta") {
  Terms t;
  t.add(X, {1, 0, 0, 0, 0, 0}, 0.9).add(X, {0, 1, 0, 0, 0, 0}, 2.0).add(X, {2, 0, 0, 0, 0, 0}, 0.5);
  t.add(X, {1, 0, 0, 0, 0, 1}, -3.0);
  t.add(PX, {0, 1, 0, 0, 0, 0}, 1.0).add(PX, {1, 0, 1, 0, 0, 0}, -0.2).add(PX, {0, 0, 0, 2, 0, 0}, 4.0);
  t.add(Y, {0, 0, 1, 0, 0, 0}, 1.0).add(Y, {0, 1, 0, 0, 1, 0}, 0.1);
  t.add(ZETA, {0, 0, 0, 0, 1, 0}, 1.0).add(ZETA, {0, 0, 0, 0, 0, 2}, 0.3).add(ZETA, {0, 0, 0, 0, 0, 0}, 1e-6);
  t.add(DELTA, {0, 0, 0, 0, 0, 1}, 1.0).add(DELTA, {1, 0, 0, 0, 0, 0}, 0.01).add(DELTA, {0, 0, 1, 1, 0, 0}, -5.0);
  const TaylorMap e = t.element();
  CHECK(e.term_count == 15);
  CHECK(e.computed_outputs == (1 | 2 | 4 | 16 | 32));  // py has no terms

  for (const ft_test::Case& c : ft_test::cases()) {
    const double x = c.x, px = c.px, y = c.y, py = c.py, zeta = c.zeta, delta = c.delta;
    ft::ParticleView p = ft_test::particle(c);
    TaylorMap_track(e, p);
    const double new_delta = delta + 0.01 * x - 5.0 * y * py;
    CHECK(ft_test::close(p.x, 0.9 * x + 2.0 * px + 0.5 * x * x - 3.0 * x * delta, 2e-16, 1e-22));
    CHECK(ft_test::close(p.px, px - 0.2 * x * y + 4.0 * py * py, 2e-16, 1e-22));
    CHECK(ft_test::close(p.y, y + 0.1 * px * zeta, 2e-16, 1e-22));
    CHECK(p.py == c.py);  // no terms: unchanged
    CHECK(ft_test::close(p.zeta, zeta + 0.3 * delta * delta + 1e-6, 2e-16, 1e-22));
    CHECK(ft_test::close(p.delta, new_delta, 2e-16, 1e-22));
    // ptau, rpp and rvv follow the new delta (formulas of tests/support/element_testing.h). update_delta
    // (xtrack's formula, sqrt(...) - 1) carries an absolute rounding of ~1e-16 / beta0 in ptau.
    const double ptau = ft_test::ptau_from_delta(p.delta, c.beta0);
    CHECK(ft_test::close(p.ptau, ptau, 1e-14, 1e-15));
    CHECK(std::fabs(p.ptau - ft_test::ptau_from_delta(c.delta, c.beta0)) > 1e-6);  // it did change
    CHECK(ft_test::close(p.rpp, 1.0 / (1.0 + p.delta), 1e-15));
    CHECK(ft_test::close(p.rvv, ft_test::rvv_from(p.delta, ptau, c.beta0), 1e-15));
  }
}

TEST_CASE("every output is computed from the coordinates as they enter (old coordinates)") {
  // x' = px, px' = -x, y' = y + px, py' = x: a sequential update would use the new x or px.
  Terms t;
  t.add(X, {0, 1, 0, 0, 0, 0}, 1.0).add(PX, {1, 0, 0, 0, 0, 0}, -1.0);
  t.add(Y, {0, 0, 1, 0, 0, 0}, 1.0).add(Y, {0, 1, 0, 0, 0, 0}, 1.0).add(PY, {1, 0, 0, 0, 0, 0}, 1.0);
  const TaylorMap e = t.element();
  ft::ParticleView p = ft_test::particle(3e-3, -2e-4, 1e-3, 5e-4, 0.1, 2e-4, 0.8);
  TaylorMap_track(e, p);
  CHECK(p.x == -2e-4);
  CHECK(p.px == -3e-3);
  CHECK(p.y == 1e-3 + -2e-4);
  CHECK(p.py == 3e-3);
  CHECK(p.zeta == 0.1);
  CHECK(p.delta == 2e-4);

  // Unused slots in the middle of the table are skipped; term_count ends at the last used term.
  Terms gap;
  gap.add(X, {1, 0, 0, 0, 0, 0}, 2.0).add(-1, {0, 0, 0, 0, 0, 0}, 0.0).add(X, {0, 0, 0, 0, 0, 0}, 1e-3);
  const TaylorMap g = gap.element();
  CHECK(g.term_count == 3);
  ft::ParticleView q = ft_test::particle(1e-3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.8);
  TaylorMap_track(g, q);
  CHECK(q.x == 2.0 * 1e-3 + 1e-3);
}

TEST_CASE("bad tables are rejected with the element's name, the field and the reason") {
  Setup s;
  auto error_of = [&](const json& fields) {
    return ft::test::error_message([&] {
      Lattice lattice(ReferenceParticle{938272088.16, 1.0, 2e9});
      lattice.append(lattice.define("bad_map", s.type("TaylorMap"), fields, s.at));
      lattice.prepare();
    });
  };
  Terms out_of_range;
  out_of_range.add(6, {1, 0, 0, 0, 0, 0}, 1.0);
  std::string m = error_of(out_of_range.fields());
  CAPTURE(m);
  CHECK(m.find("bad_map") != std::string::npos);
  CHECK(m.find("output[0] = 6; expected 0..5") != std::string::npos);

  Terms big_exponent;
  big_exponent.add(X, {1, 0, 0, 0, 0, 0}, 1.0).add(X, {0, 16, 0, 0, 0, 0}, 1.0);
  m = error_of(big_exponent.fields());
  CHECK(m.find("exponents[7] = 16 (term 1); expected 0..15") != std::string::npos);

  Terms negative_exponent;
  negative_exponent.add(X, {0, 0, -1, 0, 0, 0}, 1.0);
  CHECK(error_of(negative_exponent.fields()).find("exponents[2] = -1") != std::string::npos);

  Terms orphan;  // a coefficient for an unused slot: a layout mistake
  orphan.add(X, {1, 0, 0, 0, 0, 0}, 1.0);
  json f = orphan.fields();
  f["coefficients"].push_back(0.5);
  CHECK(error_of(f).find("coefficients[1] = 0.5 but output[1] = -1") != std::string::npos);

  json too_many = Terms().fields();
  too_many["output"] = json::array();
  for (int i = 0; i <= FT_TAYLOR_MAP_MAX_TERMS; ++i) too_many["output"].push_back(0);
  CHECK(error_of(too_many).find("at most 64 are supported") != std::string::npos);
}

TEST_CASE("the bundled example: rotation and a thin sextupole composed to second order") {
  // plugins/taylor_map/lattice.json, written by tools/make_example_map.py from these numbers.
  const double qx = 0.31, qy = 0.32, betx = 10.0, bety = 8.0, k2l = 0.5, slip = -0.05;
  auto registry = ft::plugin_test::registry_with();
  const Lattice lattice = load_lattice(ft::plugin_test::example_lattice("taylor_map"), *registry);
  REQUIRE(registry->find("TaylorMap") != nullptr);  // loaded through the lattice's "plugins" entry
  CHECK(lattice.circumference() == 100.0);
  const std::vector<std::array<double, 6>> coords = {
      {1e-3, 2e-5, -5e-4, 1e-5, 1e-2, 1e-4}, {-2e-3, -3e-5, 1.5e-3, -2e-5, -3e-2, -2e-4}, {0, 0, 0, 0, 0, 0}};
  Particles p = particles_at(coords, lattice.reference().beta0());
  ft::plugin_test::track_cpu(lattice, p);
  for (size_t i = 0; i < coords.size(); ++i) {
    const auto& c = coords[i];
    // Rotate, then kick (computed in this order, not from the table).
    const double mx = 2 * kPi * qx, my = 2 * kPi * qy;
    const double x1 = std::cos(mx) * c[X] + betx * std::sin(mx) * c[PX];
    const double px1 = -std::sin(mx) / betx * c[X] + std::cos(mx) * c[PX];
    const double y1 = std::cos(my) * c[Y] + bety * std::sin(my) * c[PY];
    const double py1 = -std::sin(my) / bety * c[Y] + std::cos(my) * c[PY];
    CAPTURE(i);
    CHECK(ft_test::close(p.x[i], x1, 1e-14, 1e-19));
    CHECK(ft_test::close(p.px[i], px1 - k2l / 2 * (x1 * x1 - y1 * y1), 1e-13, 1e-19));
    CHECK(ft_test::close(p.y[i], y1, 1e-14, 1e-19));
    CHECK(ft_test::close(p.py[i], py1 + k2l * x1 * y1, 1e-13, 1e-19));
    CHECK(ft_test::close(p.zeta[i], c[ZETA] + slip * c[DELTA], 1e-15, 1e-19));
    CHECK(p.delta[i] == c[DELTA]);
  }
}

TEST_CASE("a collective lattice with a plugin type that does not declare its coordinates moves rpp and rvv") {
  // TaylorMap declares nothing (FT_ELEMENT_COORDINATES): it may write rpp or rvv its own way, so the
  // collective kernels load and store them instead of recomputing them from delta and ptau.
  std::ifstream in(ft::plugin_test::example_lattice("taylor_map"));
  json lattice_json = json::parse(in);
  lattice_json["elements"]["impedance"] = {
      {"type", "LongitudinalImpedance"},
      {"n_slices", 64},
      {"zeta_min", -1.0},
      {"zeta_max", 1.0},
      {"intensity", 1e10},
      {"method", "time"},
      {"sources", json::array({{{"type", "Resonator"}, {"r_shunt", 1e3}, {"frequency", 1e9}, {"q", 1.0}}})}};
  lattice_json["sequence"].push_back("impedance");
  const std::string path = std::string(FT_EXAMPLES_BUILD_DIR) + "/taylor_map/lattice_with_impedance.json";
  std::ofstream(path) << lattice_json.dump(2);
  auto registry = ft::plugin_test::registry_with();
  const Lattice lattice = load_lattice(path, *registry);
  CHECK_FALSE(collective_energy_is_derived(lattice));
  const CollectiveTurnTraffic t = collective_turn_traffic(lattice);
  CHECK(t.wrap.loaded == FT_COORD_ALL);
  CHECK(t.wrap.stored == FT_COORD_ALL);
  CHECK_FALSE(t.wrap.derived_energy);
}

}  // namespace test_taylor_map
