// Motifs of the switch kernel (fusetrack/motifs.h): the planner on key sequences built here, and the
// plan of a bundled lattice checked against its own switch table.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>

#include "fusetrack/codegen.h"
#include "fusetrack/motifs.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_motifs.
namespace test_motifs {

using namespace ft;

namespace {

/// Checks that `plan` is a valid cover of `keys`: occurrences do not overlap, every occurrence holds
/// its motif's keys, no kNoMotifKey inside one; returns the dispatches per turn it implies.
size_t check_cover(const std::vector<uint32_t>& keys, const MotifPlan& plan) {
  REQUIRE(plan.motif_at.size() == keys.size());
  size_t dispatches = 0, covered = 0;
  for (size_t i = 0; i < keys.size();) {
    const uint32_t m = plan.motif_at[i];
    if (m == 0) {
      ++dispatches;
      ++i;
      continue;
    }
    const uint32_t id = m >> 8, length = m & 0xffu;
    REQUIRE(id >= 1);
    REQUIRE(id <= plan.motifs.size());
    const std::vector<uint32_t>& motif = plan.motifs[id - 1];
    REQUIRE(length == motif.size());
    REQUIRE(i + length <= keys.size());
    for (uint32_t j = 0; j < length; ++j) {
      CHECK(keys[i + j] == motif[j]);
      CHECK(keys[i + j] != kNoMotifKey);
      if (j > 0) CHECK(plan.motif_at[i + j] == 0);  // no occurrence starts inside another
    }
    ++dispatches;
    covered += length;
    i += length;
  }
  const MotifCounts counts = count_motifs(plan.motif_at);
  CHECK(counts.covered == covered);
  CHECK(counts.dispatches == dispatches);
  CHECK(counts.motifs == plan.motifs.size());
  return dispatches;
}

}  // namespace

TEST_CASE("motif planner: a periodic sequence is covered by its longest recurring run") {
  // 60 cells of (drift, quad, drift, sext) = keys (0, 1, 0, 2), with a marker (3) every 15 cells.
  std::vector<uint32_t> keys;
  for (int cell = 0; cell < 60; ++cell) {
    if (cell % 15 == 0) keys.push_back(3);
    for (uint32_t k : {0u, 1u, 0u, 2u}) keys.push_back(k);
  }
  const std::vector<bool> worth_alone(4, false);
  const MotifPlan plan = plan_motifs(keys, worth_alone);
  REQUIRE(!plan.motifs.empty());
  // The best run saves the most dispatches: two cells (8 keys, the longest allowed) recur 28 times
  // (7 pairs in each stretch of 15 cells; count x 7 = 196 against 60 x 3 = 180 for one cell).
  CHECK(plan.motifs[0].size() == 8);
  const size_t dispatches = check_cover(keys, plan);
  CHECK(dispatches < keys.size() / 5);  // 244 elements in far fewer dispatches
  // Deterministic.
  const MotifPlan again = plan_motifs(keys, worth_alone);
  CHECK(again.motifs == plan.motifs);
  CHECK(again.motif_at == plan.motif_at);
}

TEST_CASE("motif planner: limits, elements that never join, single elements worth a case") {
  std::vector<uint32_t> keys;
  for (int cell = 0; cell < 40; ++cell)
    for (uint32_t k : {0u, 1u, kNoMotifKey, 2u}) keys.push_back(k);
  MotifLimits limits;
  limits.max_length = 2;
  std::vector<bool> worth_alone{false, false, true};
  const MotifPlan plan = plan_motifs(keys, worth_alone, limits);
  check_cover(keys, plan);
  REQUIRE(plan.motifs.size() == 2);
  CHECK(plan.motifs[0] == std::vector<uint32_t>{0, 1});  // 40 occurrences; (2, 0) has 39
  CHECK(plan.motifs[1] == std::vector<uint32_t>{2});     // fixes an integer field: a case of its own
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == kNoMotifKey) CHECK(plan.motif_at[i] == 0);
  // Too few occurrences: no motif, and no table.
  const std::vector<uint32_t> short_keys{0, 1, 0, 1, 0, 1};
  const MotifPlan none = plan_motifs(short_keys, std::vector<bool>(2, false));
  CHECK(none.motifs.empty());
  CHECK(none.motif_at.empty());
}

TEST_CASE("switch kernel motifs of the 12k-element collider agree with its switch table") {
  const Lattice lattice = ft::test::bundled_lattice("thin_collider_12k.json");
  const KernelSource src = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  const MotifCounts counts = count_motifs(src.motif_at);
  REQUIRE(counts.motifs > 0);
  REQUIRE(src.motif_at.size() == lattice.sequence().size());
  CHECK(counts.dispatches < lattice.sequence().size() / 4);
  CHECK(src.text.find("switch (mot >> 8)") != std::string::npos);
  CHECK(src.text.find("ft_s.kick_order = ") != std::string::npos);  // the multipoles' order fixed
  const KernelTables tables = kernel_tables(lattice, src);
  REQUIRE(tables.steps.size() == 2 * lattice.sequence().size());
  // Every occurrence of a motif covers elements of the same switch cases and integer fields, and the
  // table after the steps is the plan.
  std::map<uint32_t, std::vector<uint32_t>> cases_of_motif;
  size_t covered = 0;
  for (size_t e = 0; e < lattice.sequence().size(); ++e) {
    CHECK(tables.steps[lattice.sequence().size() + e].packed == src.motif_at[e]);
    const uint32_t m = src.motif_at[e];
    if (m == 0) continue;
    std::vector<uint32_t> cases;
    for (uint32_t j = 0; j < (m & 0xffu); ++j) cases.push_back(tables.steps[e + j].type_id());
    const auto [it, first] = cases_of_motif.emplace(m >> 8, cases);
    if (!first) CHECK(it->second == cases);
    covered += m & 0xffu;
  }
  CHECK(covered == counts.covered);
  CHECK(cases_of_motif.size() == counts.motifs);

  // Two entry points: the checked form, and the form for few particles, whose occurrences test the x/y
  // limits only after elements that may move x or y (not after the thin multipoles) and replay.
  CHECK(src.few_particles_form);
  CHECK(src.text.find(std::string("void __launch_bounds__(128) ") + kFusedKernelName + "(") != std::string::npos);
  CHECK(src.text.find(std::string("void __launch_bounds__(128) ") + kFewParticlesKernelName + "(") != std::string::npos);
  CHECK(src.text.find("if (ft_replay) { p = ft_start; mot = 0u; continue; }") != std::string::npos);
  CHECK(src.text.find("Multipole_track(ft_s, p); } ft_inside") == std::string::npos);
  // A register cap applies to both.
  const KernelSource capped = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch, 64);
  CHECK(capped.text.find("__launch_bounds__(128)") == std::string::npos);

  // FUSETRACK_MOTIFS=0: the plain switch (the benchmarks' baseline).
  setenv("FUSETRACK_MOTIFS", "0", 1);
  const KernelSource plain = generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Switch);
  unsetenv("FUSETRACK_MOTIFS");
  CHECK(plain.motif_at.empty());
  CHECK_FALSE(plain.few_particles_form);
  CHECK(plain.text.find(kFewParticlesKernelName) == std::string::npos);
  CHECK(plain.text.find("switch (mot >> 8)") == std::string::npos);
  CHECK(kernel_tables(lattice, plain).steps.size() == lattice.sequence().size());
  // Other forms have none.
  CHECK(generate_fused_kernel(lattice, FmaMode::Off, Dispatch::Staged).motif_at.empty());
}

}  // namespace test_motifs
