// Lattice variants (fusetrack/variants.h): variants files (set, add, match, per-instance names,
// scans), lattice files as variants, the refusals, one CPU run of all variants against each variant
// alone (bitwise), the DA study's statistics, and the switch kernel's per-variant tables.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "fusetrack/codegen.h"
#include "fusetrack/compare.h"
#include "fusetrack/da.h"
#include "fusetrack/device/transform.h"
#include "fusetrack/error.h"
#include "fusetrack/nvrtc_compiler.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "fusetrack/variants.h"
#include "support/lattice_builders.h"
#include "support/process.h"
#include "support/variant_study.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_variants.
namespace test_variants {

using namespace ft;
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& ex) {
    return ex.what();
  }
  return "";
}

/// The variants of `variants` (JSON text) applied to the sextupole ring; the error message or "".
std::string variants_error(const std::string& variants) {
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");
  return error_of([&] { variants_from_json(base, json::parse(variants), "bad_variants.json"); });
}

void check_bitwise(const Particles& a, const Particles& b) {
  REQUIRE(a.size() == b.size());
  const ParticleComparison cmp = compare_particles(a, b);
  CHECK(cmp.identical());
  CHECK(a.state == b.state);
  CHECK(a.lost_turn == b.lost_turn);
  CHECK(a.lost_element == b.lost_element);
}

}  // namespace

TEST_CASE("Variants file: set, add, whole-name patterns, per-instance names and scans give the field values asked for") {
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  REQUIRE(v.size() == 3);
  CHECK(v.names == std::vector<std::string>{"nominal", "errors", "sextupoles"});
  const int qd = base.find_definition("qd"), sf = base.find_definition("sf_half");
  // The nominal variant keeps the base's values; every variant has the instances of its errors as
  // definitions of their own (qd[3] is the third qd of the sequence).
  for (const Lattice& l : v.lattices) {
    REQUIRE(l.sequence().size() == base.sequence().size());
    const int own = l.find_definition("qd[3]");
    REQUIRE(own >= 0);
    size_t seen = 0, at = 0;
    for (size_t e = 0; e < base.sequence().size(); ++e)
      if (base.sequence()[e].definition == static_cast<uint32_t>(qd) && ++seen == 3) at = e;
    CHECK(l.sequence()[at].definition == static_cast<uint32_t>(own));
  }
  CHECK(v.lattices[0].field(static_cast<uint32_t>(v.lattices[0].find_definition("qd[3]")), "knl", 1) == -0.18);
  CHECK(v.lattices[1].field(static_cast<uint32_t>(v.lattices[1].find_definition("qd[3]")), "knl", 1) == -0.18 + 0.004);
  CHECK(v.lattices[1].field(static_cast<uint32_t>(qd), "knl", 1) == -0.18);  // the other qd untouched
  const ElementTransformInput* t = v.lattices[1].transform(static_cast<uint32_t>(v.lattices[1].find_definition("sd[5]")));
  REQUIRE(t != nullptr);
  CHECK(t->shift_x == 1e-3);
  CHECK(t->rot_s_rad == 0.02);
  CHECK(v.lattices[0].transform(static_cast<uint32_t>(v.lattices[0].find_definition("sd[5]"))) == nullptr);
  CHECK(v.lattices[2].field(static_cast<uint32_t>(sf), "knl", 2) == 2.0 + 0.7);

  // Many instances of one definition (qd[1] ... qd[16], named in any order): each its own.
  json many = json::parse(R"({"fusetrack_variants": 1, "variants": [{"name": "all_qd", "elements": []}]})");
  for (int k = 16; k >= 1; --k)
    many["variants"][0]["elements"].push_back({{"name", fmt::format("qd[{}]", k)}, {"set", {{"shift_y", 1e-6 * k}}}});
  const Lattice each = variants_from_json(base, many, "many.json").lattices[0];
  int seen_qd = 0;
  for (size_t e = 0; e < base.sequence().size(); ++e) {
    if (base.sequence()[e].definition != static_cast<uint32_t>(qd)) continue;
    ++seen_qd;
    const ElementDefinition& def = each.definitions()[each.sequence()[e].definition];
    CHECK(def.name == fmt::format("qd[{}]", seen_qd));
    REQUIRE(each.transform(each.sequence()[e].definition) != nullptr);
    CHECK(each.transform(each.sequence()[e].definition)->shift_y == 1e-6 * seen_qd);
  }
  CHECK(seen_qd == 16);

  // Scans: every variant for every combination of the knob values, named after them.
  const LatticeVariants s = variants_from_json(base, json::parse(R"({"fusetrack_variants": 1,
      "variants": [{"name": "a"}, {"name": "b", "elements": [{"name": "sd", "set": {"knl": [0, 0, -3.0]}}]}],
      "scans": [{"name": "sf_half", "field": "knl", "index": 2, "from": 1.0, "to": 3.0, "steps": 3},
                {"match": "q.*", "field": "shift_y", "values": [0.0, 1e-4], "mode": "add"}]})"),
                                               "scan.json");
  REQUIRE(s.size() == 12);
  CHECK(s.names[0] == "a/knl[2]=1/shift_y=0");
  // The first scan varies fastest: variant b is 6..11, its fifth combination knl[2] = 2, shift_y = 1e-4.
  CHECK(s.names[10] == "b/knl[2]=2/shift_y=0.0001");
  CHECK(s.lattices[10].field(static_cast<uint32_t>(sf), "knl", 2) == 2.0);
  CHECK(s.lattices[10].field(static_cast<uint32_t>(base.find_definition("sd")), "knl", 2) == -3.0);
  REQUIRE(s.lattices[10].transform(static_cast<uint32_t>(qd)) != nullptr);
  CHECK(s.lattices[10].transform(static_cast<uint32_t>(qd))->shift_y == 1e-4);
  CHECK(s.lattices[2].transform(static_cast<uint32_t>(qd)) == nullptr);
}

TEST_CASE("Variants file: bad input names the file, the variant, the element and the field") {
  std::string e = variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s1",
      "elements": [{"name": "qx", "add": {"knl": [0, 1]}}]}]})");
  CHECK(e.find("bad_variants.json (variant 's1')") != std::string::npos);
  CHECK(e.find("'qx'") != std::string::npos);
  CHECK(e.find("no element of that name") != std::string::npos);

  e = variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s2",
      "elements": [{"name": "qd", "set": {"k1": 0.1}}]}]})");
  CHECK(e.find("(variant 's2')") != std::string::npos);
  CHECK(e.find("element 'qd' (Multipole), field 'k1'") != std::string::npos);
  CHECK(e.find("has no field 'k1'") != std::string::npos);

  e = variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s3",
      "elements": [{"match": "zz.*", "set": {"shift_x": 0.1}}]}]})");
  CHECK(e.find("matches no element") != std::string::npos);
  CHECK(e.find("(variant 's3')") != std::string::npos);

  CHECK(variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s4",
      "elements": [{"match": "q(", "set": {"shift_x": 0.1}}]}]})")
            .find("not a valid regular expression") != std::string::npos);
  CHECK(variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s5",
      "elements": [{"name": "qd", "set": {"knl": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]}}]}]})")
            .find("field 'knl'") != std::string::npos);
  CHECK(variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s6",
      "elements": [{"name": "qd", "set": {"knl": 0.1}}]}]})")
            .find("give a list") != std::string::npos);
  CHECK(variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s7",
      "elements": [{"name": "qd", "set": {"shift_x": "far"}}]}]})")
            .find("field 'shift_x': a transformation value must be a number, not a string") != std::string::npos);
  CHECK(variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s8",
      "elements": [{"name": "qd", "scale": {"knl": [0, 2]}}]}]})")
            .find("unknown key \"scale\"") != std::string::npos);
  CHECK(variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "x"}, {"name": "x"}]})")
            .find("given to two variants") != std::string::npos);
  CHECK(variants_error(R"({"fusetrack_variants": 1, "scans": [{"name": "qd", "field": "knl", "from": 0, "to": 1}]})")
            .find("scans[0]") != std::string::npos);
  // A change that the element refuses when it is prepared: the element's own check, with the variant.
  e = variants_error(R"({"fusetrack_variants": 1, "variants": [{"name": "s9",
      "elements": [{"name": "d", "set": {"length": -1.0}}]}]})");
  INFO(e);
  CHECK((e.empty() || e.find("(variant 's9')") != std::string::npos));
}

TEST_CASE("Variants from lattice files: the same sequence is required, the first difference is named") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ft_variant_files_{}", ::getpid());
  fs::create_directories(dir);
  json doc = ft::test::parse_bundled("sextupole_rf_ring.json");
  doc["elements"]["qd"]["knl"] = {0.0, -0.19};
  std::ofstream(dir / "stronger_qd.json") << doc.dump(2);
  json other = ft::test::parse_bundled("sextupole_rf_ring.json");
  other["lines"]["cell"] = {"qf_half", "ds", "sf_half", "d", "qd", "ds", "d", "sd", "sf_half", "ds", "qf_half"};
  std::ofstream(dir / "reordered.json") << other.dump(2);
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");

  const LatticeVariants v = load_variants(base, {(dir / "stronger_qd.json").string()}, ft::test::builtin_registry());
  REQUIRE(v.size() == 1);
  CHECK(v.names[0] == "stronger_qd");
  CHECK(v.lattices[0].field(static_cast<uint32_t>(base.find_definition("qd")), "knl", 1) == -0.19);

  const std::string e = error_of([&] {
    load_variants(base, {(dir / "stronger_qd.json").string(), (dir / "reordered.json").string()},
                  ft::test::builtin_registry());
  });
  CHECK(e.find("reordered.json") != std::string::npos);
  CHECK(e.find("element #6 'd' (Drift)") != std::string::npos);
  CHECK(e.find("element #6 is 'sd' (Multipole) in the base") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("Variants on the CPU: one run of all variants equals each variant alone, bit for bit, in any particle order") {
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  const Lattice& base = v.lattices[0];
  // 3 x 90 particles of a grid up to the aperture, the variants interleaved at random.
  const Particles grid = make_grid(base.reference().beta0(), -0.03, 0.03, 10, -0.02, 0.02, 9, 1e-3);
  Particles all(0, grid.beta0);
  std::vector<size_t> source;
  std::mt19937 rng(7);
  for (size_t k = 0; k < 3 * grid.size(); ++k) source.push_back(k);
  std::shuffle(source.begin(), source.end(), rng);
  all.resize(source.size());
  all.variant.resize(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    all.store(i, grid.view(source[i] % grid.size()));
    all.variant[i] = static_cast<int32_t>(source[i] / grid.size());
  }
  TrackOptions o;
  o.turns = 400;
  for (int threads : {1, 2}) {
    o.threads = threads;
    Particles together = all;
    auto cpu = make_cpu_backend(base);
    cpu->set_variants(v.pointers());
    cpu->track(together, o);
    CHECK(together.alive_count() < together.size());
    CHECK(together.alive_count() > 0);
    for (size_t k = 0; k < v.size(); ++k) {
      Particles alone = grid, from_run(0, grid.beta0);
      make_cpu_backend(v.lattices[k])->track(alone, o);
      from_run.resize(grid.size());
      for (size_t i = 0; i < source.size(); ++i) {
        if (static_cast<size_t>(all.variant[i]) != k) continue;
        const size_t j = source[i] % grid.size();
        from_run.store(j, together.view(i));
        from_run.lost_turn[j] = together.lost_turn[i];
        from_run.lost_element[j] = together.lost_element[i];
      }
      check_bitwise(alone, from_run);
    }
  }
  // The variants differ in their results (the errors matter), and the particles' indices are checked.
  Particles bad = all;
  bad.variant[5] = 3;
  auto cpu = make_cpu_backend(base);
  cpu->set_variants(v.pointers());
  CHECK(error_of([&] { cpu->track(bad, o); }).find("is in lattice variant 3, but the backend has 3") != std::string::npos);
}

TEST_CASE("DA study: every variant's scan, losses and DA equal its scan alone, and the statistics are those of the variants") {
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  const DaConfig c = ft::test::variant_study_config(500);
  DaScan study = make_da_study(v.pointers(), v.names, c);
  auto cpu = make_cpu_backend(v.lattices[0]);
  cpu->set_variants(v.pointers());
  DaRunOptions ro;
  ro.checkpoint_every = 200;  // survivors compacted between chunks, across variants
  REQUIRE(run_da_scan(study, *cpu, ro));
  std::vector<DaSummary> per_variant;
  std::vector<double> da_min;
  for (size_t k = 0; k < v.size(); ++k) {
    DaScan alone = make_da_scan(v.lattices[k], c);
    REQUIRE(run_da_scan(alone, *make_cpu_backend(v.lattices[k]), ro));
    const DaScan from_study = da_variant_scan(study, k);
    check_bitwise(alone.initial, from_study.initial);
    check_bitwise(alone.particles, from_study.particles);
    CHECK(std::memcmp(alone.closed_orbit, from_study.closed_orbit, sizeof(alone.closed_orbit)) == 0);
    const DaSummary a = summarize_da(alone), b = summarize_da(from_study);
    REQUIRE(a.per_angle.size() == b.per_angle.size());
    for (size_t r = 0; r < a.per_angle.size(); ++r) CHECK(a.per_angle[r].da_last_stable == b.per_angle[r].da_last_stable);
    da_min.push_back(a.da_min);
    per_variant.push_back(a);
  }
  // The misaligned variant has another closed orbit than the nominal one.
  CHECK(study.variants[1].closed_orbit[0] != study.variants[0].closed_orbit[0]);
  const DaStudySummary s = summarize_da_study(study);
  REQUIRE(s.rows.size() == per_variant[0].per_angle.size());
  for (size_t r = 0; r < s.rows.size(); ++r) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (const DaSummary& d : per_variant) {
      lo = std::min(lo, d.per_angle[r].da_last_stable);
      hi = std::max(hi, d.per_angle[r].da_last_stable);
      sum += d.per_angle[r].da_last_stable;
    }
    const double mean = sum / 3.0;
    double sq = 0;
    for (const DaSummary& d : per_variant) sq += (d.per_angle[r].da_last_stable - mean) * (d.per_angle[r].da_last_stable - mean);
    CHECK(s.rows[r].min == lo);
    CHECK(s.rows[r].max == hi);
    CHECK(s.rows[r].mean == doctest::Approx(mean).epsilon(1e-14));
    CHECK(s.rows[r].std == doctest::Approx(std::sqrt(sq / 3.0)).epsilon(1e-12));
    CHECK(s.rows[r].per_variant[s.rows[r].worst_variant] == lo);
  }
  CHECK(s.da_min == *std::min_element(da_min.begin(), da_min.end()));
  // Errors change the DA somewhere: the study is not three copies of one scan.
  bool differs = false;
  for (const DaStudyRow& r : s.rows) differs |= r.min != r.max;
  CHECK(differs);
}

TEST_CASE("Variants in the switch kernel: one step table, each variant's parameters at the same offsets, empty transformations where a variant has none") {
  const LatticeVariants v = ft::test::sextupole_ring_variants();
  const Lattice& base = v.lattices[0];
  const KernelSource src = generate_fused_kernel(base, FmaMode::Off, Dispatch::Auto, 0, v.pointers());
  CHECK(src.dispatch == Dispatch::Switch);
  CHECK(src.variants);
  CHECK(src.transformed_types.size() == 1);  // sd[5] (a Multipole) is misaligned in one variant
  const KernelTables t = kernel_tables(base, src, v.pointers());
  REQUIRE(t.variant_stride_bytes > 0);
  CHECK(t.params.size() * 8 == 3 * t.variant_stride_bytes);
  const int sd5 = base.find_definition("sd[5]");
  REQUIRE(sd5 >= 0);
  for (size_t k = 0; k < v.size(); ++k) {
    const auto* table = reinterpret_cast<const unsigned char*>(t.params.data()) + k * t.variant_stride_bytes;
    for (size_t e = 0; e < base.sequence().size(); ++e) {
      const uint32_t d = base.sequence()[e].definition;
      const ElementType* type = base.definitions()[d].type;
      const unsigned char* block = table + t.steps[e].param_offset();
      if (t.steps[e].type_id() >= src.types.size()) {  // the transformed case: [transformation][parameters]
        CHECK(d == static_cast<uint32_t>(sd5));
        const uint64_t header = transform_header(block);
        const std::vector<uint64_t>* own = v.lattices[k].transform_block(d);
        CHECK((header & 0xffffffffffffull) == (own ? ((*own)[0] & 0xffffffffffffull) : 0ull));
        block += 8 * (header >> 48);
      }
      if (type->param_size > 0) CHECK(std::memcmp(block, v.lattices[k].params(d), type->param_size) == 0);
    }
  }
  // The one kernel compiles with NVRTC (no GPU needed).
  KernelCompiler compiler("off");
  CHECK(compiler.compile(src, 90).cubin.size() > 100);
  CHECK(src.text.find("variant_stride") != std::string::npos);
  // Forms that share the parameters across a block cannot run variants.
  CHECK(error_of([&] { generate_fused_kernel(base, FmaMode::Off, Dispatch::Staged, 0, v.pointers()); })
            .find("switch dispatch") != std::string::npos);
}

TEST_CASE("fusetrack da --variants: a study from the command line writes per-variant and study results") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ft_da_study_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "variants.json") << ft::test::sextupole_ring_variants_doc().dump(2);
  const std::string cmd = fmt::format(
      "{} da {} --variants {} -n 200 --angles 4 --amplitudes 8 --amplitude-range 0.004 0.04 --device cpu --no-plots "
      "-o {} 2>&1",
      ft::test::fusetrack_binary(), ft::test::source_path("lattices/sextupole_rf_ring.json"),
      (dir / "variants.json").string(), (dir / "out").string());
  const auto [rc, out] = ft::test::run_command(cmd);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("3 lattice variants") != std::string::npos);
  CHECK(out.find("across the 3 variants") != std::string::npos);
  const json summary = parse_json_file((dir / "out" / "summary.json").string());
  CHECK(summary.at("variants").size() == 3);
  CHECK(summary.at("per_angle").size() == 4);
  CHECK(summary.at("per_angle")[0].at("per_variant").size() == 3);
  CHECK(fs::exists(dir / "out" / "variants.csv"));
  CHECK(fs::exists(dir / "out" / "variants" / "001_errors" / "summary.json"));
  // A variants file naming a missing element: the error names the file, the variant and the element.
  std::ofstream(dir / "bad.json") << R"({"fusetrack_variants": 1, "variants": [{"name": "seed_4", "elements": [{"name": "qz", "add": {"knl": [0, 1]}}]}]})";
  const auto [rc2, out2] = ft::test::run_command(fmt::format(
      "{} da {} --variants {} -n 10 --device cpu --no-plots -o {} 2>&1", ft::test::fusetrack_binary(),
      ft::test::source_path("lattices/sextupole_rf_ring.json"), (dir / "bad.json").string(), (dir / "out2").string()));
  CHECK(rc2 != 0);
  CHECK(out2.find("bad.json (variant 'seed_4'): element 'qz'") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fusetrack track --variants: every variant's particles equal the lattice file tracked alone, bit for bit") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ft_track_variants_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  json doc = ft::test::parse_bundled("sextupole_rf_ring.json");
  doc["elements"]["sd"]["knl"] = {0.0, 0.0, -9.0};
  doc["elements"]["qd"]["shift_y"] = 2e-3;
  std::ofstream(dir / "changed.json") << doc.dump(2);
  const std::string ring = ft::test::source_path("lattices/sextupole_rf_ring.json");
  const std::string common = "--grid -0.038 0.038 6 -0.03 0.03 5 -n 300 --device cpu";
  auto run = [&](const std::string& args) {
    const auto [rc, out] = ft::test::run_command(fmt::format("{} track {} 2>&1", ft::test::fusetrack_binary(), args));
    INFO(out);
    REQUIRE(rc == 0);
    return out;
  };
  const std::string out = run(fmt::format("{} --variants {} {} {} -o {}", ring, ring, (dir / "changed.json").string(),
                                          common, (dir / "both.npz").string()));
  CHECK(out.find("variants    2 in one run, 30 particles each") != std::string::npos);
  run(fmt::format("{} {} -o {}", ring, common, (dir / "base.npz").string()));
  run(fmt::format("{} {} -o {}", (dir / "changed.json").string(), common, (dir / "changed.npz").string()));
  const double beta0 = ft::test::bundled_lattice("sextupole_rf_ring.json").reference().beta0();
  const Particles both = read_particle_set((dir / "both.npz").string(), beta0);
  CHECK(both.variant.size() == both.size());
  size_t k = 0;
  for (const char* alone_file : {"base.npz", "changed.npz"}) {
    const Particles alone = read_particle_set((dir / alone_file).string(), beta0);
    check_bitwise(alone, slice_particles(both, k * alone.size(), (k + 1) * alone.size()));
    ++k;
  }
  CHECK(both.alive_count() < both.size());
  fs::remove_all(dir);
}

TEST_CASE("DA study: a variant without a closed orbit stops the study with the variant's name") {
  const Lattice base = ft::test::bundled_lattice("sextupole_rf_ring.json");
  const LatticeVariants v = variants_from_json(base, json::parse(R"({"fusetrack_variants": 1, "variants": [
      {"name": "fine"}, {"name": "broken", "elements": [{"name": "qd", "set": {"shift_x": 0.3}}]}]})"),
                                               "seeds.json");
  const std::string e = error_of([&] { make_da_study(v.pointers(), v.names, ft::test::variant_study_config(10)); });
  INFO(e);
  CHECK(e.find("DA study, variant 'broken'") != std::string::npos);
  CHECK(e.find("fine") == std::string::npos);
}

}  // namespace test_variants
