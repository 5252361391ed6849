// Lattice simplification for tracking (fusetrack/lattice_optimize.h, `fusetrack track --optimize`):
// markers removed, consecutive drifts and thin kicks merged (xtrack Line.optimize_for_tracking),
// nothing merged across anything else or touched with a transformation; the optimized lattice
// tracks like the original to rounding (a merged drift or kick rounds once where the parts rounded
// twice), losses at the same turn.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <limits>

#include "fusetrack/lattice_optimize.h"
#include "fusetrack/tracker.h"
#include "fusetrack/variants.h"
#include "support/lattice_builders.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_lattice_optimize.
namespace test_lattice_optimize {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

const ReferenceParticle kProton{938272088.16, 1.0, 2e9};

/// A lattice built element by element: each entry defines (on first use) and appends an element.
struct LatticeBuilder {
  Lattice lattice{kProton};

  LatticeBuilder& add(const std::string& name, const std::string& type, const json& fields = json::object(),
                      const ElementTransformInput* transform = nullptr) {
    int d = lattice.find_definition(name);
    if (d < 0) {
      d = static_cast<int>(lattice.define(name, test::builtin_registry().get(type, InputLocation("test")), fields,
                                          InputLocation("test")));
      if (transform) lattice.set_transform(static_cast<uint32_t>(d), *transform);
    }
    lattice.append(static_cast<uint32_t>(d));
    return *this;
  }
  Lattice prepared() {
    lattice.prepare();
    return lattice;
  }
};

std::string type_at(const Lattice& lattice, size_t i) { return lattice.element(i).type->name; }
std::string name_at(const Lattice& lattice, size_t i) { return lattice.element(i).name; }

size_t count_of_type(const Lattice& lattice, const std::string& type) {
  size_t n = 0;
  for (size_t i = 0; i < lattice.sequence().size(); ++i) n += type_at(lattice, i) == type;
  return n;
}

/// Checks that hold for any optimization: the counts add up, the index map is increasing and
/// names elements of the same type (or a run of them), no marker without a transformation is left,
/// and the circumference is unchanged to 1e-12 relative.
void check_invariants(const Lattice& original, const Lattice& optimized, const OptimizeReport& r) {
  CHECK(r.elements_before == original.sequence().size());
  CHECK(r.elements_after == optimized.sequence().size());
  CHECK(r.elements_before - r.markers_removed - r.inactive_removed - r.drifts_merged - r.thin_kicks_merged ==
        r.elements_after);
  REQUIRE(r.first_original_index.size() == r.elements_after);
  REQUIRE(r.last_original_index.size() == r.elements_after);
  for (size_t i = 0; i < r.elements_after; ++i) {
    CHECK(r.first_original_index[i] <= r.last_original_index[i]);
    if (i > 0) CHECK(r.last_original_index[i - 1] < r.first_original_index[i]);
    CHECK(type_at(original, r.first_original_index[i]) == type_at(optimized, i));
    CHECK(type_at(original, r.last_original_index[i]) == type_at(optimized, i));
    if (type_at(optimized, i) == "Marker") CHECK(optimized.element(i).transform >= 0);
  }
  CHECK(optimized.circumference() == doctest::Approx(original.circumference()).epsilon(1e-12));
  CHECK(optimized.reference().p0c == original.reference().p0c);
  CHECK(optimized.reference().mass0 == original.reference().mass0);
  CHECK(optimized.reference().q0 == original.reference().q0);
  CHECK(optimized.limits().x == original.limits().x);
  CHECK(optimized.limits().y == original.limits().y);
  CHECK(optimized.source_file() == original.source_file());
}

/// optimize_for_tracking with the invariants above checked.
Lattice optimized_and_checked(const Lattice& original, OptimizeReport& r) {
  Lattice optimized = optimize_for_tracking(original, &r);
  check_invariants(original, optimized, r);
  return optimized;
}

Particles track_cpu(const Lattice& lattice, Particles particles, int64_t turns) {
  TrackOptions options;
  options.turns = turns;
  make_cpu_backend(lattice)->track(particles, options);
  return particles;
}

/// Particles on a grid in x and y with a spread of px, py and delta (a few off momentum).
Particles test_particles(const Lattice& lattice, size_t n, double amplitude) {
  Particles p(n, lattice.reference().beta0());
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(i) / static_cast<double>(n);
    const double x = amplitude * (2.0 * u - 1.0);
    const double y = amplitude * std::sin(7.0 * u);
    p.set(i, x, 1e-2 * x * std::cos(3.0 * u), y, -2e-2 * y, 1e-3 * std::cos(5.0 * u), 1e-3 * std::sin(11.0 * u));
  }
  return p;
}

struct Difference {
  std::array<double, 6> absolute{};  // max |optimized - original| over particles alive in both
  std::array<double, 6> relative{};  // absolute / (max - min of the original's coordinate)
  size_t loss_mismatches = 0;        // particles whose state or lost_turn differ
  size_t element_mismatches = 0;     // lost alike, but not in (a part of) the same element
  size_t element_in_run = 0;         // lost alike, in another part of the same merged element
};

Difference compare(const Particles& original, const Particles& optimized, const OptimizeReport& r) {
  Difference d;
  std::array<double, 6> lo, hi;
  lo.fill(std::numeric_limits<double>::infinity());
  hi.fill(-std::numeric_limits<double>::infinity());
  Particles mapped_particles = optimized;
  map_lost_elements_to_original(mapped_particles, r);
  const std::vector<int64_t>& mapped = mapped_particles.lost_element;
  for (size_t i = 0; i < original.size(); ++i) {
    if (original.state[i] != optimized.state[i] || original.lost_turn[i] != optimized.lost_turn[i]) {
      ++d.loss_mismatches;
      continue;
    }
    if (original.state[i] <= 0) {
      // The global limit is checked at the exit of the merged element only: the original lattice
      // may have found the particle at the exit of another of its parts.
      const size_t k = static_cast<size_t>(optimized.lost_element[i]);
      const int64_t lost_at = original.lost_element[i];
      const bool in_run = lost_at >= static_cast<int64_t>(r.first_original_index[k]) &&
                          lost_at <= static_cast<int64_t>(r.last_original_index[k]);
      if (lost_at != mapped[i])
        ++(in_run && original.state[i] == kLostOnGlobalLimit ? d.element_in_run : d.element_mismatches);
      continue;
    }
    double a[6], b[6];
    original.coordinates(i, a);
    optimized.coordinates(i, b);
    for (int k = 0; k < 6; ++k) {
      d.absolute[k] = std::max(d.absolute[k], std::fabs(a[k] - b[k]));
      lo[k] = std::min(lo[k], a[k]);
      hi[k] = std::max(hi[k], a[k]);
    }
  }
  for (int k = 0; k < 6; ++k) d.relative[k] = hi[k] > lo[k] ? d.absolute[k] / (hi[k] - lo[k]) : d.absolute[k];
  return d;
}

double max_of(const std::array<double, 6>& a) { return *std::max_element(a.begin(), a.end()); }

std::string describe(const Difference& d) {
  return fmt::format("max |diff| x {:.3g} px {:.3g} y {:.3g} py {:.3g} zeta {:.3g} delta {:.3g}; relative max {:.3g}",
                     d.absolute[0], d.absolute[1], d.absolute[2], d.absolute[3], d.absolute[4], d.absolute[5],
                     max_of(d.relative));
}

}  // namespace

TEST_CASE("Optimization: markers removed, drifts and thin kicks merged in runs, nothing merged across others") {
  ElementTransformInput shifted;
  shifted.shift_x = 1e-3;
  LatticeBuilder b;
  b.add("M0", "Marker")
      .add("D1", "Drift", {{"length", 1.1}})
      .add("M1", "Marker")
      .add("D2", "Drift", {{"length", 0.3}})
      .add("E1", "DriftExact", {{"length", 0.5}})  // a different drift type: a new run
      .add("E2", "DriftExact", {{"length", 0.25}})
      .add("Q", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("S", "Multipole", {{"knl", {0.0, 0.0, 0.5}}, {"ksl", {0.0, 1e-3}}})
      .add("M2", "Marker")
      .add("O", "Multipole", {{"knl", {0.0, 0.2, 0.0, 1.0}}, {"order", 3}})
      .add("A", "LimitRect", {{"min_x", -0.01}, {"max_x", 0.01}, {"min_y", -0.01}, {"max_y", 0.01}})
      .add("D3", "Drift", {{"length", 0.7}})            // an aperture between drifts: no merge across it
      .add("D4", "Drift", {{"length", 0.2}}, &shifted)  // a transformation: kept as it is
      .add("D5", "Drift", {{"length", 0.4}})
      .add("D6", "Drift", {{"length", 0.6}})
      .add("end", "Marker");
  const Lattice original = b.prepared();
  OptimizeReport r;
  const Lattice optimized = optimized_and_checked(original, r);
  CHECK(r.summary() == "optimized: 16 -> 7 elements (markers removed 4, inactive kicks and zero-length drifts removed 0, drifts merged 3, thin kicks merged 2)");

  const std::vector<std::string> names = {"D1+D2", "E1+E2", "Q+S+O", "A", "D3", "D4", "D5+D6"};
  REQUIRE(optimized.sequence().size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) CHECK(name_at(optimized, i) == names[i]);
  CHECK(r.first_original_index == std::vector<size_t>{1, 4, 6, 10, 11, 12, 13});
  CHECK(r.last_original_index == std::vector<size_t>{3, 5, 9, 10, 11, 12, 14});
  CHECK(count_of_type(optimized, "Marker") == 0);

  // Drift lengths are the sums in sequence order, exactly; the s positions follow.
  auto field_at = [&](size_t i, const char* field, unsigned k = 0) {
    return optimized.field(optimized.sequence()[i].definition, field, k);
  };
  CHECK(field_at(0, "length") == 1.1 + 0.3);
  CHECK(field_at(1, "length") == 0.5 + 0.25);
  CHECK(field_at(6, "length") == 0.4 + 0.6);
  CHECK(optimized.sequence()[1].s == 1.1 + 0.3);
  CHECK(optimized.sequence()[3].s == 1.1 + 0.3 + 0.75);
  // The kick: summed strengths, the highest explicit order, no bending.
  CHECK(field_at(2, "knl", 1) == 0.1 + 0.2);
  CHECK(field_at(2, "knl", 2) == 0.5);
  CHECK(field_at(2, "knl", 3) == 1.0);
  CHECK(field_at(2, "ksl", 1) == 1e-3);
  CHECK(field_at(2, "hxl") == 0.0);
  CHECK(field_at(2, "order") == 3);
  // The transformation stays on its element.
  const ElementTransformInput* t = optimized.transform(optimized.sequence()[5].definition);
  REQUIRE(t != nullptr);
  CHECK(t->shift_x == 1e-3);
  CHECK(optimized.has_transforms());
}

// xtrack's remove_inactive_multipoles and remove_zero_length_drifts: a thin kick with every knl and ksl
// zero and no bending, and a drift of length 0, are removed (counted apart from the markers); a kick
// with bending is kept even when its knl are zero; removing them lets their neighbours merge.
TEST_CASE("Optimization: inactive thin kicks and zero-length drifts are removed, and their neighbours merge") {
  LatticeBuilder b;
  b.add("D1", "Drift", {{"length", 1.0}})
      .add("Z", "Multipole")                      // every knl and ksl zero, hxl 0: removed
      .add("D2", "Drift", {{"length", 0.5}})      // merges with D1 once Z is gone
      .add("Q", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("L0", "Drift", {{"length", 0.0}})      // zero length: removed
      .add("S", "Multipole", {{"knl", {0.0, 0.0, 0.5}}})  // merges with Q once L0 is gone
      .add("B", "Multipole", {{"hxl", 0.01}, {"length", 1.0}})  // bending, knl zero: kept
      .add("E", "DriftExact", {{"length", 0.0}})  // zero length: removed
      .add("D3", "Drift", {{"length", 1.5}})
      .add("A", "LimitRect", {{"min_x", -0.01}, {"max_x", 0.01}, {"min_y", -0.01}, {"max_y", 0.01}})
      .add("D4", "Drift", {{"length", 0.7}});
  const Lattice original = b.prepared();
  OptimizeReport r;
  const Lattice optimized = optimized_and_checked(original, r);
  CHECK(r.inactive_removed == 3);
  CHECK(r.summary() == "optimized: 11 -> 6 elements (markers removed 0, inactive kicks and zero-length drifts removed 3, "
                       "drifts merged 1, thin kicks merged 1)");
  const std::vector<std::string> names = {"D1+D2", "Q+S", "B", "D3", "A", "D4"};
  REQUIRE(optimized.sequence().size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) CHECK(name_at(optimized, i) == names[i]);
  CHECK(r.first_original_index == std::vector<size_t>{0, 3, 6, 8, 9, 10});
  CHECK(r.last_original_index == std::vector<size_t>{2, 5, 6, 8, 9, 10});

  // Removal alone (nothing merged): the particles are those of the original, the same bits up to the sign
  // of a zero, and the aperture loses the same particles at the same turn and element.
  LatticeBuilder c;
  c.add("Q", "Multipole", {{"knl", {0.0, 0.4}}})
      .add("D1", "Drift", {{"length", 2.0}})
      .add("Z", "Multipole", {{"knl", {0.0, 0.0, 0.0}}, {"ksl", {0.0, 0.0}}})
      .add("A", "LimitRect", {{"min_x", -0.002}, {"max_x", 0.002}, {"min_y", -0.002}, {"max_y", 0.002}})
      .add("L0", "Drift", {{"length", 0.0}})
      .add("S", "Multipole", {{"knl", {0.0, -0.4, 3.0}}})
      .add("D2", "Drift", {{"length", 2.0}});
  const Lattice ring = c.prepared();
  OptimizeReport rr;
  const Lattice removed = optimized_and_checked(ring, rr);
  CHECK(rr.summary() == "optimized: 7 -> 5 elements (markers removed 0, inactive kicks and zero-length drifts removed 2, "
                        "drifts merged 0, thin kicks merged 0)");
  const Particles start = test_particles(ring, 200, 3e-3);
  const Particles before = track_cpu(ring, start, 100), after = track_cpu(removed, start, 100);
  const Difference d = compare(before, after, rr);
  MESSAGE(fmt::format("{} of {} particles lost (aperture and global limit); {}", before.size() - before.alive_count(),
                      before.size(), describe(d)));
  CHECK(before.alive_count() < before.size());
  CHECK(before.alive_count() > 0);
  CHECK(d.loss_mismatches == 0);
  CHECK(d.element_mismatches == 0);
  CHECK(d.element_in_run == 0);
  CHECK(max_of(d.absolute) == 0.0);

  // Variants: a kick inactive in one variant but given a strength in another is kept in all.
  Lattice seed = ring;
  seed.set_field(static_cast<uint32_t>(seed.find_definition("Z")), "knl", 1e-3, 2);
  seed.prepare();
  OptimizeReport rv;
  const std::vector<Lattice> variants = optimize_variants_for_tracking({&ring, &seed}, &rv);
  CHECK(rv.summary() == "optimized: 7 -> 6 elements (markers removed 0, inactive kicks and zero-length drifts removed 1, "
                        "drifts merged 0, thin kicks merged 0)");
  for (const Lattice& variant : variants) CHECK(name_at(variant, 2) == "Z");
}

TEST_CASE("Optimization: kicks with bending or a transformation and transformed markers are never merged") {
  ElementTransformInput tilted;
  tilted.rot_s_rad = 0.1;
  LatticeBuilder b;
  b.add("K1", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("B1", "Multipole", {{"knl", {0.01}}, {"hxl", 0.01}, {"length", 1.0}})  // curvature terms
      .add("B2", "Multipole", {{"knl", {0.01}}, {"hxl", 0.01}, {"length", 1.0}})
      .add("K2", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("T", "Multipole", {{"knl", {0.0, 0.1}}}, &tilted)
      .add("K3", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("MT", "Marker", json::object(), &tilted)  // a marker with a transformation is kept
      .add("K4", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("D", "Drift", {{"length", 1.0}});
  const Lattice original = b.prepared();
  OptimizeReport r;
  const Lattice optimized = optimized_and_checked(original, r);
  CHECK(r.elements_after == 9);
  CHECK(r.markers_removed == 0);
  CHECK(r.thin_kicks_merged == 0);
  for (size_t i = 0; i < original.sequence().size(); ++i) CHECK(name_at(optimized, i) == name_at(original, i));
}

TEST_CASE("Optimization: a repeated run shares one merged definition, names stay unique, only markers keep one") {
  LatticeBuilder b;
  for (int cell = 0; cell < 3; ++cell)
    b.add("Q", "Multipole", {{"knl", {0.0, 0.1}}}).add("D", "Drift", {{"length", 1.0}}).add("D", "Drift");
  b.add("D+D", "Drift", {{"length", 2.0}});  // an existing name the merged one must not take
  b.add("Q", "Multipole");
  for (int k = 0; k < 6; ++k) b.add(fmt::format("d{}", k), "Drift", {{"length", 0.5}});
  const Lattice original = b.prepared();
  OptimizeReport r;
  const Lattice optimized = optimized_and_checked(original, r);
  // Q (D D) Q (D D) Q (D D D+D) Q (d0..d5)
  REQUIRE(r.elements_after == 8);
  CHECK(name_at(optimized, 1) == "D+D#2");
  CHECK(name_at(optimized, 3) == "D+D#2");
  CHECK(optimized.sequence()[1].definition == optimized.sequence()[3].definition);
  CHECK(name_at(optimized, 5) == "D+D+D+D");  // three parts: D, D and the element named "D+D"
  CHECK(name_at(optimized, 7) == "d0+d1+...+d5");
  CHECK(optimized.field(optimized.sequence()[7].definition, "length") == 3.0);

  LatticeBuilder markers;
  markers.add("A", "Marker").add("B", "Marker");
  const Lattice only_markers = markers.prepared();
  OptimizeReport rm;
  const Lattice kept = optimize_for_tracking(only_markers, &rm);
  CHECK(kept.sequence().size() == 1);
  CHECK(name_at(kept, 0) == "A");
  CHECK(rm.markers_removed == 1);
  CHECK(rm.summary() == "optimized: 2 -> 1 elements (markers removed 1, inactive kicks and zero-length drifts removed 0, drifts merged 0, thin kicks merged 0)");
}

// Two thin kicks without bending: (px - Re S1) - Re S2 against px - Re(S1 + S2) with S1 + S2 by
// Horner on the summed coefficients. The same map; bitwise the same only when the other kick adds
// exactly zero (an all-zero multipole, px + (-0.0) == px: it is removed as inactive, not merged, with
// the same result). Otherwise the merged kick rounds once
// where the parts round twice: measured here at most 2 ulp of |px| + the sum of the magnitudes of
// the Horner terms of both kicks (the size of what is summed).
TEST_CASE("Optimization: a merged thin kick is the sum of the two kicks, bitwise where it adds zero") {
  auto one_turn = [](const json& first, const json& second, const Particles& start, OptimizeReport* r) {
    LatticeBuilder b;
    b.add("K1", "Multipole", first).add("K2", "Multipole", second);
    const Lattice original = b.prepared();
    const Lattice optimized = optimize_for_tracking(original, r);
    return std::make_pair(track_cpu(original, start, 1), track_cpu(optimized, start, 1));
  };
  const Particles start = test_particles(Lattice(kProton), 2000, 3e-3);

  OptimizeReport r;
  const auto [zero_original, zero_optimized] =
      one_turn({{"knl", {1e-4, 0.3, 12.0}}, {"ksl", {0.0, 0.02, 1.5}}}, {{"knl", {0.0}}}, start, &r);
  CHECK(r.inactive_removed == 1);
  CHECK(r.thin_kicks_merged == 0);
  for (size_t i = 0; i < start.size(); ++i) {
    CHECK(zero_original.px[i] == zero_optimized.px[i]);
    CHECK(zero_original.py[i] == zero_optimized.py[i]);
  }

  const std::vector<double> knl1 = {1e-4, 0.3, 12.0, -40.0}, ksl1 = {0.0, 0.02, 1.5, 0.0};
  const std::vector<double> knl2 = {-3e-5, 0.17, -5.0, 0.0}, ksl2 = {2e-5, 0.0, 0.0, 300.0};
  const auto [original, optimized] =
      one_turn({{"knl", knl1}, {"ksl", ksl1}}, {{"knl", knl2}, {"ksl", ksl2}}, start, &r);
  CHECK(r.thin_kicks_merged == 1);
  double worst_ulps = 0.0;
  size_t bitwise = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    CHECK(optimized.x[i] == original.x[i]);  // a thin kick leaves x, y, zeta, delta alone
    CHECK(optimized.y[i] == original.y[i]);
    CHECK(optimized.zeta[i] == original.zeta[i]);
    // The size of what is summed: |px| and every term |knl_n + i ksl_n| r^n / n! of both kicks.
    const double r_xy = std::hypot(start.x[i], start.y[i]);
    double scale = std::fabs(start.px[i]), power = 1.0, factorial = 1.0;
    for (size_t n = 0; n < knl1.size(); ++n) {
      if (n > 0) power *= r_xy, factorial *= static_cast<double>(n);
      scale += (std::fabs(knl1[n]) + std::fabs(ksl1[n]) + std::fabs(knl2[n]) + std::fabs(ksl2[n])) * power / factorial;
    }
    const double ulp = std::nextafter(scale, 2 * scale + 1.0) - scale;
    worst_ulps = std::max(worst_ulps, std::fabs(optimized.px[i] - original.px[i]) / ulp);
    bitwise += optimized.px[i] == original.px[i] && optimized.py[i] == original.py[i];
  }
  MESSAGE(fmt::format("merged kick: {} of {} particles bitwise equal, worst px difference {:.1f} ulp", bitwise,
                      start.size(), worst_ulps));
  CHECK(worst_ulps <= 3.0);
}

TEST_CASE("Optimization: the bundled lattices keep their length and track as before") {
  for (const char* name :
       {"fodo_ring.json", "mba_light_source.json", "sextupole_rf_ring.json", "reference_sequence.json",
        "thin_collider_12k.json", "longitudinal_bench_ring.json", "ps_injection_longitudinal.json"}) {
    CAPTURE(name);
    const Lattice original = test::bundled_lattice(name);
    OptimizeReport r;
    const Lattice optimized = optimized_and_checked(original, r);
    CHECK(count_of_type(optimized, "Marker") == 0);
    CHECK(count_of_type(optimized, "Cavity") == count_of_type(original, "Cavity"));
    CHECK(count_of_type(optimized, "LongitudinalImpedance") == count_of_type(original, "LongitudinalImpedance"));
    if (original.has_collective()) continue;  // copied as they are; tracked by the collective suite
    const Particles start = test_particles(original, 64, 1e-3);
    const Difference d = compare(track_cpu(original, start, 20), track_cpu(optimized, start, 20), r);
    MESSAGE(fmt::format("{}: {}; {} -> {} elements", name, describe(d), r.elements_before, r.elements_after));
    CHECK(d.loss_mismatches == 0);
    CHECK(d.element_mismatches == 0);
    CHECK(max_of(d.relative) <= 5e-10);  // measured 4.7e-11 (thin_collider_12k zeta), 4.6e-11 (mba)
  }
}

// lattices/fodo_ring.json: 16 cells qf_half d qd d qf_half and a marker. The half quadrupoles of
// neighbouring cells merge (0.09 + 0.09 = 0.18 exactly), the end marker goes: 81 -> 65.
TEST_CASE("Optimization: the FODO ring, 100 turns, agrees with the original to 1e-12 of the spread") {
  const Lattice original = test::bundled_lattice("fodo_ring.json");
  OptimizeReport r;
  const Lattice optimized = optimized_and_checked(original, r);
  CHECK(r.summary() == "optimized: 81 -> 65 elements (markers removed 1, inactive kicks and zero-length drifts removed 0, drifts merged 0, thin kicks merged 15)");
  const Particles start = test_particles(original, 400, 2e-3);
  const Difference d = compare(track_cpu(original, start, 100), track_cpu(optimized, start, 100), r);
  MESSAGE("FODO ring, 400 particles x 100 turns: " << describe(d));
  CHECK(d.loss_mismatches == 0);
  CHECK(max_of(d.relative) <= 1e-12);
  CHECK(max_of(d.relative) > 0.0);  // rounding differs: merging is not bitwise
}

// A ring with an aperture and sextupoles that loses particles over many turns: cells of
// QF SF (D M D) QD SD (D D) with a rectangular aperture at the start. Losses at the same turn, and
// mapped back at the same element, except on the global limit (1 m) inside a merged drift: the
// optimized lattice checks it at the merged exit only and reports the first part, the original
// found the particle at the exit of the part where it first went beyond (measured: 24 of the
// 1000 particles, in another part of the same run).
TEST_CASE("Optimization: a ring with an aperture loses the same particles at the same turn and element or run") {
  LatticeBuilder b;
  b.add("AP", "LimitRect", {{"min_x", -0.02}, {"max_x", 0.02}, {"min_y", -0.01}, {"max_y", 0.01}});
  for (int cell = 0; cell < 8; ++cell) {
    b.add("QF", "Multipole", {{"knl", {0.0, 0.2}}})
        .add("SF", "Multipole", {{"knl", {0.0, 0.0, 6.0}}})
        .add("DA", "Drift", {{"length", 2.4}})
        .add("BPM", "Marker")
        .add("DB", "Drift", {{"length", 2.6}})
        .add("QD", "Multipole", {{"knl", {0.0, -0.2}}})
        .add("SD", "Multipole", {{"knl", {0.0, 0.0, -9.0}}})
        .add("DC", "Drift", {{"length", 1.7}})
        .add("DD", "Drift", {{"length", 3.3}});
  }
  const Lattice original = b.prepared();
  OptimizeReport r;
  const Lattice optimized = optimized_and_checked(original, r);
  CHECK(r.summary() == "optimized: 73 -> 33 elements (markers removed 8, inactive kicks and zero-length drifts removed 0, drifts merged 16, thin kicks merged 16)");
  const Particles start = test_particles(original, 1000, 1.8e-2);
  const Particles a = track_cpu(original, start, 300), c = track_cpu(optimized, start, 300);
  size_t lost = 0, lost_on_aperture = 0, lost_after_turn_0 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    lost += a.state[i] <= 0;
    lost_on_aperture += a.state[i] == kLostOnAperture;
    lost_after_turn_0 += a.lost_turn[i] > 0;
  }
  const Difference d = compare(a, c, r);
  MESSAGE(
      fmt::format("aperture ring, 1000 particles x 300 turns: {} lost ({} on the aperture, {} after turn 0); {} lost "
                  "on the global limit in another part of a merged drift; {}",
                  lost, lost_on_aperture, lost_after_turn_0, d.element_in_run, describe(d)));
  CHECK(lost > 50);
  CHECK(lost < 950);
  CHECK(lost_after_turn_0 > 100);
  CHECK(d.loss_mismatches == 0);
  CHECK(d.element_mismatches == 0);
  CHECK(max_of(d.relative) <= 1e-9);
}

// The Xsuite lines of ../shared (read in place): CLIC damping ring 36954 elements (1111 markers,
// 1100 pairs of drifts on either side of a marker, no inactive kick or zero-length drift) and PS
// Booster 604 (162 markers, 3 multipoles with knl, ksl and hxl all zero, 1 drift of length 0),
// counted from the Xsuite files; the PS Booster's thick cavity loads as drift(L/2), kick, drift(L/2)
// (606 entries), and once the markers and the 4 inactive elements are gone 150 drifts follow another
// drift (148 before the inactive elements were removed: the 3 kicks stood between drifts, the
// zero-length drift was merged).
TEST_CASE("Optimization: the Xsuite CLIC damping ring and PS Booster, counts and 10 turns") {
  struct Case {
    const char* file;
    const char* summary;
  };
  for (const Case& c :
       {Case{"lattices/xsuite/clic_damping_ring.json",
             "optimized: 36954 -> 34743 elements (markers removed 1111, inactive kicks and zero-length drifts removed 0, drifts merged 1100, thin kicks merged 0)"},
        Case{"lattices/xsuite/psb_injection.json",
             "optimized: 606 -> 290 elements (markers removed 162, inactive kicks and zero-length drifts removed 4, drifts merged 150, "
             "thin kicks merged 0)"}}) {
    CAPTURE(c.file);
    const Lattice original = load_lattice(test::require_shared(c.file), test::builtin_registry());
    OptimizeReport r;
    const Lattice optimized = optimized_and_checked(original, r);
    CHECK(r.summary() == c.summary);
    CHECK(count_of_type(optimized, "Marker") == 0);
    const Particles start = test_particles(original, 32, 1e-4);
    const Difference d = compare(track_cpu(original, start, 10), track_cpu(optimized, start, 10), r);
    MESSAGE(fmt::format("{}: {}", c.file, describe(d)));
    CHECK(d.loss_mismatches == 0);
    CHECK(max_of(d.relative) <= 1e-9);  // measured 8.3e-11 (CLIC zeta: 1.7e-13 m), 6.4e-12 (PSB)
  }
}

// Variants (fusetrack/variants.h) must keep one sequence: an element merged in one and misaligned in
// another is kept in all; each variant's merged elements hold its own values.
TEST_CASE("Optimization: variants are optimized alike and keep one sequence") {
  LatticeBuilder b;
  b.add("D1", "Drift", {{"length", 1.0}})
      .add("M", "Marker")
      .add("D2", "Drift", {{"length", 2.0}})
      .add("K1", "Multipole", {{"knl", {0.0, 0.1}}})
      .add("K2", "Multipole", {{"knl", {0.0, 0.0, 2.0}}})
      .add("D3", "Drift", {{"length", 1.5}})
      .add("D4", "Drift", {{"length", 2.5}})
      .add("K3", "Multipole", {{"knl", {0.0, -0.1}}});
  const Lattice base = b.prepared();
  Lattice seed = base;
  ElementTransformInput shifted;
  shifted.shift_x = 2e-4;
  seed.set_transform(static_cast<uint32_t>(seed.find_definition("D3")), shifted);
  seed.set_field(static_cast<uint32_t>(seed.find_definition("K2")), "knl", 2.5, 2);
  seed.prepare();

  OptimizeReport alone;
  CHECK(optimize_for_tracking(base, &alone).sequence().size() == 4);  // D1+D2, K1+K2, D3+D4, K3
  OptimizeReport r;
  const std::vector<Lattice> optimized = optimize_variants_for_tracking({&base, &seed}, &r);
  REQUIRE(optimized.size() == 2);
  CHECK(r.summary() == "optimized: 8 -> 5 elements (markers removed 1, inactive kicks and zero-length drifts removed 0, drifts merged 1, thin kicks merged 1)");
  CHECK_NOTHROW(check_same_sequence(optimized[0], optimized[1], "seed"));
  const std::vector<std::string> names = {"D1+D2", "K1+K2", "D3", "D4", "K3"};
  for (const Lattice& variant : optimized) {
    REQUIRE(variant.sequence().size() == names.size());
    for (size_t i = 0; i < names.size(); ++i) CHECK(name_at(variant, i) == names[i]);
  }
  CHECK(optimized[0].field(optimized[0].sequence()[1].definition, "knl", 2) == 2.0);
  CHECK(optimized[1].field(optimized[1].sequence()[1].definition, "knl", 2) == 2.5);
  CHECK(optimized[1].transform(optimized[1].sequence()[2].definition) != nullptr);
  CHECK(optimized[0].transform(optimized[0].sequence()[2].definition) == nullptr);
  const Particles start = test_particles(base, 100, 1e-3);
  const Difference d = compare(track_cpu(seed, start, 50), track_cpu(optimized[1], start, 50), r);
  CHECK(d.loss_mismatches == 0);
  CHECK(max_of(d.relative) <= 1e-12);

  LatticeBuilder other;
  other.add("D1", "Drift", {{"length", 1.0}});
  const Lattice different = other.prepared();
  CHECK(test::error_message([&] {
          optimize_variants_for_tracking({&base, &different});
        }).find("has another element sequence") != std::string::npos);
}

TEST_CASE("Optimization: fusetrack track --optimize prints the counts and writes particles") {
  const auto dir = test::temp_dir("optimize_cli");
  const std::string out = (dir / "out.npz").string();
  const auto [status, output] =
      test::run_command(fmt::format("{} track {} --optimize -n 5 --device cpu -o {}", test::fusetrack_binary(),
                                    test::source_path("lattices/fodo_ring.json"), out));
  CAPTURE(output);
  CHECK(status == 0);
  CHECK(output.find("optimized: 81 -> 65 elements (markers removed 1, inactive kicks and zero-length drifts removed 0, drifts merged 0, thin kicks merged 15)") !=
        std::string::npos);
  CHECK(std::filesystem::exists(out));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Optimization: fusetrack bench --optimize compares the two lattices in one run") {
  const auto [status, output] =
      test::run_command(fmt::format("{} bench {} --optimize -N 256 -n 20 --device cpu --thread-counts 1",
                                    test::fusetrack_binary(), test::source_path("lattices/fodo_ring.json")));
  CAPTURE(output);
  CHECK(status == 0);
  CHECK(output.find("optimized: 81 -> 65 elements") != std::string::npos);
  CHECK(output.find("speed ratio") != std::string::npos);
  CHECK(output.find("losses agree") != std::string::npos);
}

}  // namespace test_lattice_optimize
