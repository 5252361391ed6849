// Error seeds (fusetrack/lattice_errors.h): reproducible draws keyed by seed and element name, their
// statistics (rms and truncation), MAD-X's EFCOMP scaling of relative errors on hand-computed cases,
// the EALIGN -> transformation mapping, the import of a hand-written MAD-X ESAVE table, the written
// file read back by the variants reader, and every kind of bad input named by file, entry, element and
// field.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusetrack/device/random.h"
#include "fusetrack/lattice_errors.h"
#include "fusetrack/tracker.h"
#include "fusetrack/variants.h"
#include "support/paths.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_lattice_errors.
namespace test_lattice_errors {

using ft::test::builtin_registry;
using ft::test::error_message;
using json = nlohmann::ordered_json;

namespace {

/// A lattice of the given definitions (name, {"type": ..., fields}), each used once, in order.
ft::Lattice make_lattice(const std::vector<std::pair<std::string, json>>& definitions) {
  ft::Lattice lattice(ft::ReferenceParticle{938272088.16, 1.0, 2e9});
  for (const auto& [name, spec] : definitions) {
    json fields = spec;
    const std::string type = fields.at("type").get<std::string>();
    fields.erase("type");
    const uint32_t d = lattice.define(name, builtin_registry().get(type, ft::InputLocation("test")), fields,
                                      ft::InputLocation("test"));
    lattice.append(d);
  }
  lattice.prepare();
  return lattice;
}

/// `count` thin quadrupoles Q000, Q001, ... (K1L = 0.1) with drifts between them.
ft::Lattice quadrupole_ring(int count, bool reversed = false) {
  std::vector<std::pair<std::string, json>> defs;
  for (int i = 0; i < count; ++i) {
    const int k = reversed ? count - 1 - i : i;
    char name[16];
    std::snprintf(name, sizeof(name), "Q%03d", k);
    defs.push_back({name, json{{"type", "Multipole"}, {"knl", {0.0, 0.1}}}});
    defs.push_back({std::string("D") + name, json{{"type", "Drift"}, {"length", 1.0}}});
  }
  return make_lattice(defs);
}

ft::ErrorTable table_from(const json& doc, const std::string& file = "table.json") {
  return ft::error_table_from_json(doc, file);
}

json table_doc(const json& entries, double cut = 3.0) {
  return json{{"fusetrack_error_table", 1}, {"cut", cut}, {"entries", entries}};
}

json generate_doc(const ft::Lattice& lattice, const json& table, int64_t seeds, uint64_t first_seed = 1,
                  double cut = 0.0) {
  ft::ErrorSeedsOptions options;
  options.seeds = seeds;
  options.first_seed = first_seed;
  options.cut = cut;
  return ft::variants_document("ring.json", ft::generate_error_variants(lattice, table_from(table), options));
}

/// The change of element `name` in variant `v` of a variants document (null when absent).
json element_change(const json& doc, size_t v, const std::string& name) {
  for (const json& e : doc.at("variants").at(v).at("elements"))
    if (e.at("name") == name) return e;
  return json();
}

/// Moments of a standard normal truncated at |g| <= c (phi, Phi: its density and distribution):
/// Z = 2 Phi(c) - 1, m2 = 1 - 2 c phi(c) / Z, m4 = 3 - (2 c^3 + 6 c) phi(c) / Z.
void truncated_moments(double c, double& m2, double& m4) {
  const double phi = std::exp(-0.5 * c * c) / std::sqrt(2.0 * M_PI);
  const double z = std::erf(c / std::sqrt(2.0));
  m2 = 1.0 - 2.0 * c * phi / z;
  m4 = 3.0 - (2.0 * c * c * c + 6.0 * c) * phi / z;
}

}  // namespace

TEST_CASE("error seeds: the same seed writes the same file, other seeds other values") {
  const ft::Lattice lattice = quadrupole_ring(20);
  const json table = table_doc(json::array({json{{"match", "Q[0-9]+"},
                                                 {"order", 1},
                                                 {"radius", 0.02},
                                                 {"random", {{"dknr", {0, 0, 1e-3}}, {"dx", 1e-4}, {"dpsi", 2e-4}}}}}));
  const json first = generate_doc(lattice, table, 3);
  const json again = generate_doc(lattice, table, 3);
  CHECK(first.dump() == again.dump());  // byte for byte
  REQUIRE(first.at("variants").size() == 3);
  CHECK(first.at("variants")[0].at("name") == "seed_1");
  CHECK(first.at("variants")[2].at("name") == "seed_3");
  CHECK(first.at("fusetrack_variants") == 1);
  CHECK(first.at("lattice") == "ring.json");

  // Different seeds, and different elements of one seed, draw different values.
  const json q5_seed1 = element_change(first, 0, "Q005");
  const json q5_seed2 = element_change(first, 1, "Q005");
  const json q6_seed1 = element_change(first, 0, "Q006");
  CHECK(q5_seed1.at("add").at("knl")[2] != q5_seed2.at("add").at("knl")[2]);
  CHECK(q5_seed1.at("add").at("shift_x") != q5_seed2.at("add").at("shift_x"));
  CHECK(q5_seed1.at("add").at("knl")[2] != q6_seed1.at("add").at("knl")[2]);
  CHECK(element_change(first, 0, "DQ005").is_null());  // drifts are not selected

  // A seed's values do not depend on the other seeds generated, nor on the order of the elements.
  const json seed2_alone = generate_doc(lattice, table, 1, 2);
  CHECK(seed2_alone.at("variants")[0].at("name") == "seed_2");
  CHECK(element_change(seed2_alone, 0, "Q005") == q5_seed2);
  const json reversed = generate_doc(quadrupole_ring(20, true), table, 3);
  for (const char* name : {"Q000", "Q005", "Q019"})
    for (size_t v = 0; v < 3; ++v) CHECK(element_change(reversed, v, name) == element_change(first, v, name));
}

TEST_CASE("error seeds: rms over elements x seeds and truncation at the cut") {
  // 400 elements x 50 seeds = 20000 draws per component. The mean square of N draws of a normal
  // truncated at c (sigma 1) has mean m2 and standard deviation sqrt((m4 - m2^2) / N); the mean has
  // standard deviation sqrt(m2 / N). Bounds of 5 standard deviations: a correct generator fails
  // them with probability below 1e-6 (the draws are fixed by the seeds, so the test is deterministic).
  const int elements = 400, seeds = 50;
  const double cut = 2.0, rms_b2 = 1e-3, rms_dx = 1e-4, radius = 0.02, k1l = 0.1;
  const ft::Lattice lattice = quadrupole_ring(elements);
  const json table = table_doc(json::array({json{{"match", "Q.*"},
                                                 {"type", "Multipole"},
                                                 {"order", 1},
                                                 {"radius", radius},
                                                 {"random", {{"dknr", {0, 0, rms_b2}}, {"dx", rms_dx}}}}}),
                               cut);
  ft::ErrorSeedsOptions options;
  options.seeds = seeds;
  const ft::GeneratedVariants generated = ft::generate_error_variants(lattice, table_from(table), options);
  const json doc = ft::variants_document("ring.json", generated);

  // Back from the file: b2 = Delta(K2 L) / (K1 L R^-1 2! / 1!), dx = shift_x.
  std::vector<double> b2, dx;
  for (size_t v = 0; v < static_cast<size_t>(seeds); ++v)
    for (const json& e : doc.at("variants")[v].at("elements")) {
      b2.push_back(e.at("add").at("knl")[2].get<double>() / (k1l / radius * 2.0) / rms_b2);
      dx.push_back(e.at("add").at("shift_x").get<double>() / rms_dx);
    }
  REQUIRE(b2.size() == static_cast<size_t>(elements * seeds));
  double m2, m4;
  truncated_moments(cut, m2, m4);
  const double n = static_cast<double>(b2.size());
  for (const std::vector<double>* values : {&b2, &dx}) {
    double sum = 0, sum_squares = 0, largest = 0;
    for (const double g : *values) {
      sum += g;
      sum_squares += g * g;
      largest = std::max(largest, std::fabs(g));
    }
    CHECK(std::fabs(sum / n) < 5.0 * std::sqrt(m2 / n));
    CHECK(std::fabs(sum_squares / n - m2) < 5.0 * std::sqrt((m4 - m2 * m2) / n));
    CHECK(largest <= cut * (1.0 + 1e-12));  // never beyond the cut (rounding of the stored product aside)
    CHECK(largest > 0.9 * cut);             // and the tails are there
  }
  // The summary reports the same numbers.
  REQUIRE(generated.summary.size() == 1);
  const ft::ErrorEntrySummary& s = generated.summary[0];
  CHECK(s.elements.size() == static_cast<size_t>(elements));
  REQUIRE(s.components.size() == 2);
  CHECK(s.components[0].component == "dknr[2]");
  CHECK(s.components[1].component == "dx");
  CHECK(s.components[0].count == static_cast<uint64_t>(elements * seeds));
  CHECK(s.components[0].expected_rms == doctest::Approx(rms_b2 * std::sqrt(m2)).epsilon(1e-12));
  CHECK(s.components[0].max_abs_over_rms <= cut);
  CHECK(std::fabs(s.components[1].achieved_rms / rms_dx - std::sqrt(m2)) < 0.03);

  // The generator itself: 10^5 draws at a cut of 0.5 sigma, none beyond it.
  double largest = 0;
  for (uint64_t i = 0; i < 100000; ++i) largest = std::max(largest, std::fabs(ft::truncated_gaussian(7, i, 3u, 0.5)));
  CHECK(largest <= 0.5);
  CHECK(largest > 0.49);
}

TEST_CASE("error seeds: MAD-X EFCOMP scaling of relative errors, hand-computed") {
  // Delta(K_j L) = DKNR(j) K_ref L R^(n - j) j! / n! (MAD-X user guide, EFCOMP).
  const ft::Lattice lattice = make_lattice({
      {"QM", json{{"type", "Multipole"}, {"knl", {0.0, 0.5}}}},
      {"QT", json{{"type", "ThickMultipole"}, {"length", 0.25}, {"kn", {0.0, 2.0}}}},
      {"BEND", json{{"type", "Bend"}, {"length", 1.0}, {"angle", 0.1}}},
      {"SKEWQ", json{{"type", "Multipole"}, {"ksl", {0.0, 0.3}}, {"order", 1}}},
      {"D", json{{"type", "Drift"}, {"length", 1.0}}},
  });
  const json table = table_doc(json::array({
      // K1L = 0.5 at R = 0.02: knl[0] += 2e-3 * 0.5 * 0.02 / 1 = 2e-5, knl[2] += 1e-3 * 0.5 / 0.02 * 2 = 0.05,
      // ksl[2] += 4e-3 * 0.5 / 0.02 * 2 = 0.2.
      json{{"name", "QM"},
           {"order", 1},
           {"radius", 0.02},
           {"systematic", {{"dknr", {2e-3, 0, 1e-3}}, {"dksr", {0, 0, 4e-3}}}}},
      // Thick: K1L = 2 * 0.25 = 0.5, the same 0.05 in K2L, i.e. kn[2] += 0.05 / 0.25 = 0.2.
      json{{"name", "QT"}, {"order", 1}, {"radius", 0.02}, {"systematic", {{"dknr", {0, 0, 1e-3}}}}},
      // Bend: K0L = angle (k0 = h), R = 0.01: knl[1] += 1e-4 * 0.1 / 0.01 * 1! / 0! = 1e-3; absolute dks adds.
      json{{"name", "BEND"}, {"order", 0}, {"radius", 0.01}, {"systematic", {{"dknr", {0, 1e-4}}, {"dks", {3e-6}}}}},
      // Negative radius: the skew strength J1L = 0.3 is the reference: knl[2] += 1e-3 * 0.3 / 0.02 * 2 = 0.03;
      // its explicit order 1 is raised to 2.
      json{{"name", "SKEWQ"}, {"order", 1}, {"radius", -0.02}, {"systematic", {{"dknr", {0, 0, 1e-3}}}}},
  }));
  const json doc = generate_doc(lattice, table, 1);
  const json qm = element_change(doc, 0, "QM").at("add");
  CHECK(qm.at("knl").size() == 3);
  CHECK(qm.at("knl")[0].get<double>() == doctest::Approx(2e-5).epsilon(1e-14));
  CHECK(qm.at("knl")[1].get<double>() == 0.0);
  CHECK(qm.at("knl")[2].get<double>() == doctest::Approx(0.05).epsilon(1e-14));
  CHECK(qm.at("ksl")[2].get<double>() == doctest::Approx(0.2).epsilon(1e-14));
  const json qt = element_change(doc, 0, "QT").at("add");
  CHECK(qt.contains("kn"));
  CHECK(!qt.contains("knl"));
  CHECK(qt.at("kn")[2].get<double>() == doctest::Approx(0.2).epsilon(1e-14));
  const json bend = element_change(doc, 0, "BEND").at("add");
  CHECK(bend.at("knl")[1].get<double>() == doctest::Approx(1e-3).epsilon(1e-14));
  CHECK(bend.at("ksl")[0].get<double>() == 3e-6);
  const json skew = element_change(doc, 0, "SKEWQ");
  CHECK(skew.at("add").at("knl")[2].get<double>() == doctest::Approx(0.03).epsilon(1e-14));
  CHECK(skew.at("set").at("order") == 2.0);
  CHECK(element_change(doc, 0, "D").is_null());
}

TEST_CASE("error seeds: EALIGN misalignments add to the transformation fields") {
  ft::Lattice lattice = make_lattice({
      {"Q1", json{{"type", "Multipole"}, {"knl", {0.0, 0.1}}, {"shift_x", 1e-3}}},
      {"Q2", json{{"type", "Multipole"}, {"knl", {0.0, -0.1}}}},
      {"D", json{{"type", "Drift"}, {"length", 1.0}}},
  });
  const json table = table_doc(json::array({
      json{{"match", "Q[12]"},
           {"systematic",
            {{"dx", 1e-4}, {"dy", -2e-4}, {"ds", 3e-4}, {"dphi", 4e-5}, {"dtheta", -5e-5}, {"dpsi", 6e-5}}}},
      json{{"match", "Q[12]"}, {"uncertainty", {{"dy", 1e-5}}}},
  }));
  const json doc = generate_doc(lattice, table, 2);
  for (size_t v = 0; v < 2; ++v) {
    const json q1 = element_change(doc, v, "Q1").at("add");
    const json q2 = element_change(doc, v, "Q2").at("add");
    CHECK(q1.at("shift_x") == 1e-4);  // added to the lattice's 1e-3 by the reader, not replacing it
    CHECK(q1.at("shift_s") == 3e-4);
    CHECK(q1.at("rot_x_rad") == 4e-5);           // DPHI
    CHECK(q1.at("rot_y_rad") == -5e-5);          // DTHETA
    CHECK(q1.at("rot_s_rad_no_frame") == 6e-5);  // DPSI: a roll of the magnet, the reference frame kept
    CHECK(!q1.contains("rot_s_rad"));
    CHECK(!q1.contains("knl"));
    // The uncertainty part is one draw per seed shared by the entry's elements.
    CHECK(q1.at("shift_y") == q2.at("shift_y"));
    CHECK(q1.at("shift_y").get<double>() != -2e-4);
  }
  CHECK(element_change(doc, 0, "Q1").at("add").at("shift_y") != element_change(doc, 1, "Q1").at("add").at("shift_y"));

  // The file, read by the variants reader, gives the base plus the errors.
  const ft::LatticeVariants variants = ft::variants_from_json(lattice, doc, "variants.json");
  REQUIRE(variants.size() == 2);
  const ft::ElementTransformInput* t =
      variants.lattices[0].transform(static_cast<uint32_t>(lattice.find_definition("Q1")));
  REQUIRE(t != nullptr);
  CHECK(t->shift_x == doctest::Approx(1e-3 + 1e-4).epsilon(1e-15));
  CHECK(t->rot_s_rad_no_frame == 6e-5);
}

TEST_CASE("error seeds: DPSI as rot_s_rad_no_frame rolls a bend's field, rot_s_rad would tilt its plane") {
  // Why DPSI goes to rot_s_rad_no_frame: the reference particle through a rolled sector bend (angle
  // 0.1 rad, roll 1e-3 rad) gets a vertical kick of about angle x roll, as MAD-X's DPSI of an SBEND
  // gives; with rot_s_rad the bend bends in the tilted plane along with its reference frame, and the
  // reference particle stays on it.
  auto exit_py = [](const char* roll_field) {
    const ft::Lattice bend = make_lattice({{"B", json{{"type", "Bend"},
                                                      {"length", 1.0},
                                                      {"angle", 0.1},
                                                      {"edge_entry_active", 0},
                                                      {"edge_exit_active", 0},
                                                      {roll_field, 1e-3}}}});
    ft::Particles p(1, bend.reference().beta0());
    p.set(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    ft::TrackOptions options;
    options.turns = 1;
    ft::make_cpu_backend(bend)->track(p, options);
    return p.py[0];
  };
  CHECK(std::fabs(exit_py("rot_s_rad_no_frame")) == doctest::Approx(1e-4).epsilon(0.05));
  CHECK(std::fabs(exit_py("rot_s_rad")) < 1e-12);
}

TEST_CASE("error seeds: the variants file of a bundled lattice loads in the variants reader") {
  const ft::Lattice lattice =
      ft::load_lattice(ft::test::source_path("lattices/mba_light_source.json"), builtin_registry());
  const json table = table_doc(json::array({
      json{{"match", "q.*"},
           {"type", "ThickMultipole"},
           {"order", 1},
           {"radius", 0.01},
           {"random", {{"dknr", {0, 0, 5e-4, 2e-4}}, {"dksr", {0, 0, 5e-4}}, {"dx", 5e-5}, {"dy", 5e-5}}}},
      json{{"name", "bd"}, {"order", 0}, {"radius", 0.01}, {"random", {{"dknr", {0, 1e-4}}, {"dpsi", 1e-4}}}},
  }));
  const json doc = generate_doc(lattice, table, 4);
  const ft::LatticeVariants variants = ft::variants_from_json(lattice, doc, "variants.json");
  REQUIRE(variants.size() == 4);
  CHECK(variants.names[3] == "seed_4");
  const uint32_t qf = static_cast<uint32_t>(lattice.find_definition("qf"));
  const double added = element_change(doc, 2, "qf").at("add").at("kn")[2].get<double>();
  CHECK(variants.lattices[2].field(qf, "kn", 2) == lattice.field(qf, "kn", 2) + added);
  CHECK(variants.lattices[2].field(qf, "kn", 1) == lattice.field(qf, "kn", 1));
}

TEST_CASE("error seeds: shared definitions split into one per use draw independent errors") {
  ft::Lattice lattice(ft::ReferenceParticle{938272088.16, 1.0, 2e9});
  const uint32_t qf = lattice.define("QF", builtin_registry().get("Multipole", ft::InputLocation("test")),
                                     json{{"knl", {0.0, 0.1}}}, ft::InputLocation("test"));
  const uint32_t qd = lattice.define("QD", builtin_registry().get("Multipole", ft::InputLocation("test")),
                                     json{{"knl", {0.0, -0.1}}}, ft::InputLocation("test"));
  const uint32_t d = lattice.define("D", builtin_registry().get("Drift", ft::InputLocation("test")),
                                    json{{"length", 1.0}}, ft::InputLocation("test"));
  for (int cell = 0; cell < 3; ++cell) {
    lattice.append(qf);
    lattice.append(d);
    lattice.append(qd);
    lattice.append(d);
  }
  lattice.prepare();
  const ft::ErrorTable table = table_from(table_doc(
      json::array({json{{"name", "QF"}, {"random", {{"dx", 1e-4}}}},
                   json{{"match", "Q[D]"}, {"order", 1}, {"radius", 0.01}, {"random", {{"dknr", {0, 0, 1e-3}}}}}})));
  // Without splitting, one definition stands for three magnets: a warning says so.
  ft::ErrorSeedsOptions options;
  options.seeds = 2;
  const ft::GeneratedVariants shared = ft::generate_error_variants(lattice, table, options);
  REQUIRE(shared.warnings.size() == 2);
  CHECK(shared.warnings[0].find("QF x3") != std::string::npos);

  const json split = ft::split_shared_definitions(lattice, ft::error_table_definitions(lattice, table), "ring.json",
                                                  &options.original_names);
  CHECK(split.at("sequence")[0] == "QF_1");
  CHECK(split.at("sequence")[2] == "QD_1");
  CHECK(split.at("sequence")[9] == "D");  // the drift is not selected: still shared
  CHECK(split.at("sequence")[10] == "QD_3");
  CHECK(options.original_names.at("QF_2") == "QF");
  const ft::Lattice split_lattice = ft::lattice_from_json(split, "split.json", builtin_registry());
  CHECK(split_lattice.definitions().size() == 7);
  const ft::GeneratedVariants independent = ft::generate_error_variants(split_lattice, table, options);
  CHECK(independent.warnings.empty());
  const json doc = ft::variants_document("split.json", independent);
  // "name": "QF" selects its three copies, "match" the copies of QD; each draws its own value.
  const double q1 = element_change(doc, 0, "QF_1").at("add").at("shift_x").get<double>();
  const double q2 = element_change(doc, 0, "QF_2").at("add").at("shift_x").get<double>();
  CHECK(q1 != q2);
  CHECK(element_change(doc, 0, "QD_3").at("add").at("knl")[2] != element_change(doc, 0, "QD_1").at("add").at("knl")[2]);
  CHECK(ft::variants_from_json(split_lattice, doc, "variants.json").size() == 2);
  // A copy name that is taken already is refused.
  ft::Lattice taken = lattice;
  taken.define("QF_2", builtin_registry().get("Marker", ft::InputLocation("test")), json::object(),
               ft::InputLocation("test"));
  const std::string msg = error_message(
      [&] { ft::split_shared_definitions(taken, ft::error_table_definitions(taken, table), "ring.json"); });
  CHECK(msg.find("ring.json: element 'QF'") != std::string::npos);
  CHECK(msg.find("'QF_2' is taken") != std::string::npos);
}

TEST_CASE("error seeds: a MAD-X ESAVE table becomes one variant") {
  const ft::Lattice lattice = make_lattice({
      {"qf.1", json{{"type", "Multipole"}, {"knl", {0.0, 0.1}}}},
      {"QD.1", json{{"type", "ThickMultipole"}, {"length", 0.5}, {"kn", {0.0, -1.0}}}},
      {"b.1", json{{"type", "Bend"}, {"length", 1.0}, {"angle", 0.05}}},
      {"drift_0", json{{"type", "Drift"}, {"length", 1.0}}},
      {"mq.2", json{{"type", "Multipole"}, {"knl", {0.0, 0.1}}}},
  });
  const std::string fixture = ft::test::source_path("tests/input/fixtures/errors/madx_esave.tfs");
  const ft::GeneratedVariants imported = ft::import_madx_error_tables(lattice, {fixture});
  const json doc = ft::variants_document("ring.json", imported);
  REQUIRE(doc.at("variants").size() == 1);
  CHECK(doc.at("variants")[0].at("name") == "madx_esave");
  CHECK(doc.at("variants")[0].at("elements").size() == 3);  // zero rows (DRIFT_0, MQ.2's monitor error) skipped
  // "QF.1": matched ignoring case.
  const json qf = element_change(doc, 0, "qf.1").at("add");
  CHECK(qf.at("knl") == json({0.0, 0.0, 1e-4}));
  CHECK(qf.at("shift_x") == 1e-4);
  // "QD.1:1": matched without the occurrence suffix; K1SL is integrated, ks per length (L = 0.5).
  const json qd = element_change(doc, 0, "QD.1").at("add");
  CHECK(qd.at("ks")[1].get<double>() == doctest::Approx(4e-5).epsilon(1e-15));
  CHECK(!qd.contains("kn"));
  CHECK(qd.at("shift_y") == -2e-4);
  CHECK(qd.at("rot_s_rad_no_frame") == 1e-4);
  const json b = element_change(doc, 0, "b.1").at("add");
  CHECK(b.at("knl") == json({1e-5}));
  CHECK(b.at("shift_s") == 1e-3);
  CHECK(b.at("rot_x_rad") == 5e-5);
  CHECK(b.at("rot_y_rad") == -7e-5);
  // The monitor read error is reported, not imported.
  REQUIRE(imported.warnings.size() == 1);
  CHECK(imported.warnings[0].find("MREX") != std::string::npos);
  // It loads.
  CHECK(ft::variants_from_json(lattice, doc, "variants.json").size() == 1);

  // A row with errors for an element the lattice lacks, and one for a type with no multipole slots.
  const std::string text =
      "@ NAME %05s \"EFIELD\"\n* NAME K0L K0SL K1L K1SL DX\n$ %s %le %le %le %le %le\n"
      " \"QF.1\" 0 0 0 0 1e-4\n \"MQX.9\" 0 0 1e-5 0 0\n";
  const std::string missing = ft::test::write_temp_file("missing.tfs", text);
  std::string msg = error_message([&] { ft::import_madx_error_tables(lattice, {missing}); });
  CHECK(msg.find(missing) != std::string::npos);
  CHECK(msg.find("'MQX.9'") != std::string::npos);
  CHECK(msg.find("line 5") != std::string::npos);
  const ft::Lattice quad = make_lattice({{"MQX.9", json{{"type", "Quadrupole"}, {"length", 1.0}, {"k1", 0.01}}}});
  const std::string wrong_type =
      ft::test::write_temp_file("quadrupole.tfs", text.substr(0, text.find(" \"QF.1\"")) + " \"MQX.9\" 0 0 1e-5 0 0\n");
  msg = error_message([&] { ft::import_madx_error_tables(quad, {wrong_type}); });
  CHECK(msg.find(wrong_type) != std::string::npos);
  CHECK(msg.find("'MQX.9' (Quadrupole)") != std::string::npos);
  CHECK(msg.find("K1L") != std::string::npos);
  CHECK(msg.find("ThickMultipole") != std::string::npos);  // what to do
  const std::string ragged = ft::test::write_temp_file("ragged.tfs", "* NAME K0L\n$ %s %le\n \"QF.1\" 1 2\n");
  msg = error_message([&] { ft::import_madx_error_tables(lattice, {ragged}); });
  CHECK(msg.find("line 3: 3 values for 2 columns") != std::string::npos);
  const std::string not_number = ft::test::write_temp_file("nan.tfs", "* NAME K0L\n$ %s %le\n \"QF.1\" x1\n");
  msg = error_message([&] { ft::import_madx_error_tables(lattice, {not_number}); });
  CHECK(msg.find("field 'K0L'") != std::string::npos);
  CHECK(msg.find("'x1' is not a finite number") != std::string::npos);
}

TEST_CASE("error seeds: bad tables and options name the file, the entry, the element and the field") {
  const ft::Lattice lattice = make_lattice({
      {"QF1", json{{"type", "Multipole"}, {"knl", {0.0, 0.1}}}},
      {"QUAD", json{{"type", "Quadrupole"}, {"length", 0.5}, {"k1", 0.2}}},
      {"QZERO", json{{"type", "Multipole"}, {"knl", {0.0, 0.0, 1.0}}}},
      {"D", json{{"type", "Drift"}, {"length", 1.0}}},
  });
  const std::string file = "errors.json";
  auto table_error = [&](const json& doc) { return error_message([&] { table_from(doc, file); }); };
  auto generate_error = [&](const json& doc, int64_t seeds = 2, double cut = 0.0) {
    return error_message([&] {
      ft::ErrorSeedsOptions options;
      options.seeds = seeds;
      options.cut = cut;
      ft::generate_error_variants(lattice, table_from(doc, file), options);
    });
  };
  const json good = json{{"match", "QF.*"}, {"random", {{"dx", 1e-4}}}};

  // A pattern that matches nothing.
  std::string msg = generate_error(table_doc(json::array({json{{"match", "MQ.*"}, {"random", {{"dx", 1e-4}}}}})));
  CHECK(msg.find("errors.json") != std::string::npos);
  CHECK(msg.find("entries[0] (match 'MQ.*').match") != std::string::npos);
  CHECK(msg.find("matches no element") != std::string::npos);
  // A name that is not in the lattice; a type the lattice does not use.
  msg = generate_error(table_doc(json::array({good, json{{"name", "QF2"}, {"random", {{"dx", 1e-4}}}}})));
  CHECK(msg.find("entries[1] (name 'QF2').name") != std::string::npos);
  msg = generate_error(
      table_doc(json::array({json{{"match", "Q.*"}, {"type", "Sextupole"}, {"random", {{"dx", 1e-4}}}}})));
  CHECK(msg.find("field 'entries[0] (match 'Q.*').type'") != std::string::npos);
  CHECK(msg.find("Multipole") != std::string::npos);  // the types it has
  // Unknown component, unknown entry key, unknown top-level key.
  msg = table_error(table_doc(json::array({good, json{{"match", "QF.*"}, {"random", {{"dxx", 1e-4}}}}})));
  CHECK(msg.find("errors.json") != std::string::npos);
  CHECK(msg.find("entries[1] (match 'QF.*').random.dxx") != std::string::npos);
  CHECK(msg.find("dknr") != std::string::npos);
  msg = table_error(table_doc(json::array({json{{"match", "QF.*"}, {"rms", 1}}})));
  CHECK(msg.find("field 'entries[0].rms'") != std::string::npos);
  msg = table_error(json{{"fusetrack_error_table", 1}, {"entrys", json::array()}});
  CHECK(msg.find("field 'entrys'") != std::string::npos);
  // Seeds <= 0.
  for (const int64_t seeds : {int64_t{0}, int64_t{-3}}) {
    msg = generate_error(table_doc(json::array({good})), seeds);
    CHECK(msg.find("errors.json") != std::string::npos);
    CHECK(msg.find("--seeds") != std::string::npos);
    CHECK(msg.find("must be positive") != std::string::npos);
  }
  // Negative rms (random, uncertainty), negative or tiny cut (table, entry, option).
  msg = table_error(
      table_doc(json::array({json{{"match", "QF.*"}, {"random", {{"dknr", {0, 0, -1e-4}}}}, {"radius", 0.01}}})));
  CHECK(msg.find("entries[0] (match 'QF.*').random.dknr[2]") != std::string::npos);
  CHECK(msg.find("must not be negative") != std::string::npos);
  msg = table_error(table_doc(json::array({json{{"match", "QF.*"}, {"uncertainty", {{"dy", -1e-4}}}}})));
  CHECK(msg.find("entries[0] (match 'QF.*').uncertainty.dy") != std::string::npos);
  CHECK(table_error(table_doc(json::array({good}), -1.0)).find("field 'cut'") != std::string::npos);
  msg = table_error(table_doc(json::array({json{{"match", "QF.*"}, {"cut", -2}, {"random", {{"dx", 1e-4}}}}})));
  CHECK(msg.find("entries[0] (match 'QF.*').cut") != std::string::npos);
  CHECK(msg.find("at least 0.1 sigma") != std::string::npos);
  CHECK(generate_error(table_doc(json::array({good})), 2, -1.0).find("--cut") != std::string::npos);
  // A systematic value may be negative.
  CHECK(table_error(table_doc(json::array({json{{"match", "QF.*"}, {"systematic", {{"dx", -1e-4}}}}}))).empty());
  // Field errors on a type with no multipole coefficients: file, entry, element, type and advice.
  msg = generate_error(table_doc(
      json::array({json{{"match", "Q.*"}, {"order", 1}, {"radius", 0.01}, {"random", {{"dknr", {0, 0, 1e-4}}}}}})));
  CHECK(msg.find("errors.json: element 'QUAD' (Quadrupole)") != std::string::npos);
  CHECK(msg.find("entries[0] (match 'Q.*').random.dknr") != std::string::npos);
  CHECK(msg.find("restrict the entry with \"type\"") != std::string::npos);
  // ... while misalignments of the same elements are fine.
  CHECK(generate_error(table_doc(json::array({json{{"match", "Q.*"}, {"random", {{"dx", 1e-4}}}}}))).empty());
  // Relative errors: no radius; a main field that is zero; an order beyond the element's.
  msg = table_error(table_doc(json::array({json{{"match", "QF.*"}, {"random", {{"dknr", {0, 0, 1e-4}}}}}})));
  CHECK(msg.find("entries[0] (match 'QF.*').radius") != std::string::npos);
  msg = generate_error(table_doc(
      json::array({json{{"name", "QZERO"}, {"order", 1}, {"radius", 0.01}, {"random", {{"dknr", {0, 0, 0, 1e-4}}}}}})));
  CHECK(msg.find("element 'QZERO' (Multipole)") != std::string::npos);
  CHECK(msg.find("entries[0] (name 'QZERO').order") != std::string::npos);
  CHECK(msg.find("zero in this element") != std::string::npos);
  msg = generate_error(
      table_doc(json::array({json{{"name", "QF1"}, {"random", {{"dkn", {0, 0, 0, 0, 0, 0, 0, 1e-6}}}}}})));
  CHECK(msg.find("element 'QF1' (Multipole)") != std::string::npos);
  CHECK(msg.find("order 7") != std::string::npos);
  // A bad regular expression, both "name" and "match", an entry without errors.
  msg = table_error(table_doc(json::array({json{{"match", "Q[F"}, {"random", {{"dx", 1e-4}}}}})));
  CHECK(msg.find("entries[0] (match 'Q[F').match") != std::string::npos);
  msg = table_error(table_doc(json::array({json{{"match", "Q.*"}, {"name", "QF1"}, {"random", {{"dx", 1e-4}}}}})));
  CHECK(msg.find("entries[0]") != std::string::npos);
  CHECK(msg.find("exactly one of") != std::string::npos);
  msg = table_error(table_doc(json::array({json{{"name", "QF1"}, {"random", {{"dx", 0.0}}}}})));
  CHECK(msg.find("no error") != std::string::npos);
  // A file that is not a table, read from disk: named with its path.
  const std::string path = ft::test::write_temp_file("not_a_table.json", R"({"fusetrack_variants": 1})");
  msg = error_message([&] { ft::read_error_table(path); });
  CHECK(msg.find(path) != std::string::npos);
  CHECK(msg.find("fusetrack_error_table") != std::string::npos);
}

}  // namespace test_lattice_errors
