// Particle files: the strict reader (unknown or missing coordinate arrays are errors naming the file
// and the array, in .npz and .csv alike) and shard sets (one file per rank and an index) that read
// back as the set one process writes.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fusetrack/error.h"
#include "fusetrack/npy.h"
#include "fusetrack/parallel.h"
#include "fusetrack/particle_files.h"
#include "support/paths.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_particle_files.
namespace test_particle_files {

using namespace ft;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string bytes_of(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

NpyArray column(std::vector<double> v) { return NpyArray::from(v); }

/// Rank `rank` of `size` in one process: the counts all-reduce returns the whole vector (each
/// rank's share of `total`), and the ranks are called one after another (rank 0, which writes the
/// index, last).
class SimulatedRank : public Communicator {
 public:
  SimulatedRank(int rank, int size, size_t total) : m_rank(rank), m_size(size), m_total(total) {}
  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  void allreduce_sum(uint64_t* data, size_t count) override {
    REQUIRE(count == static_cast<size_t>(m_size));
    for (int r = 0; r < m_size; ++r) data[r] = share_of(m_total, r, m_size).size();
  }

 private:
  int m_rank, m_size;
  size_t m_total;
};

/// A set with every array set to something particle-specific (lost particles included).
Particles sample_set(size_t n) {
  Particles p(n, 0.9);
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(i) + 0.25;
    p.set(i, 1e-3 * u, -2e-5 * u, 3e-4 * u, 4e-6 * u, 0.01 * u, 1e-4 * u);
    if (i % 3 == 1) {
      p.state[i] = 0;
      p.lost_turn[i] = static_cast<int32_t>(10 + i);
      p.lost_element[i] = static_cast<int64_t>(100 + i);
    }
    p.id[i] = static_cast<int64_t>(1000 + i);
  }
  return p;
}

void write_as_ranks(const std::string& path, const Particles& all, int ranks) {
  for (int r = ranks - 1; r >= 0; --r) {
    SimulatedRank comm(r, ranks, all.size());
    const Share s = share_of(all.size(), r, ranks);
    write_particle_shards(path, slice_particles(all, s.begin, s.end), comm);
  }
}

}  // namespace

TEST_CASE("particle files: an unknown or missing coordinate array is an error in .npz and .csv") {
  const auto dir = ft::test::temp_dir("particle_files_strict");
  const std::string xp = (dir / "xp.npz").string();
  write_npz(xp, {{"x", column({1e-3})},
                 {"xp", column({2e-5})},
                 {"y", column({0})},
                 {"py", column({0})},
                 {"zeta", column({0})},
                 {"dp", column({1e-3})}});
  std::string msg = ft::test::error_message([&] { read_particles(xp, 0.9); });
  CHECK(contains(msg, xp));
  CHECK(contains(msg, "'dp'"));  // the first unknown one in the archive's (sorted) order
  CHECK(contains(msg, "unknown array"));

  const std::string missing = (dir / "missing.npz").string();
  write_npz(missing, {{"x", column({1e-3})},
                      {"px", column({0})},
                      {"y", column({0})},
                      {"py", column({0})},
                      {"zeta", column({0})}});
  msg = ft::test::error_message([&] { read_particles(missing, 0.9); });
  CHECK(contains(msg, missing));
  CHECK(contains(msg, "'delta'"));
  CHECK(contains(msg, "is missing"));

  const auto csv_error = [&](const std::string& name, const std::string& text) {
    const std::string path = (dir / name).string();
    write_text(path, text);
    return ft::test::error_message([&] { read_particles(path, 0.9); });
  };
  msg = csv_error("xp.csv", "x,xp,y,py,zeta,dp\n1e-3,2e-5,0,0,0,1e-3\n");
  CHECK(contains(msg, "xp.csv"));
  CHECK(contains(msg, "'xp'"));
  CHECK(contains(msg, "unknown column"));
  msg = csv_error("missing.csv", "x,px,y,py,zeta\n1e-3,0,0,0,0\n");
  CHECK(contains(msg, "missing.csv"));
  CHECK(contains(msg, "'delta'"));
  CHECK(contains(msg, "is missing"));
  CHECK(contains(csv_error("twice.csv", "x,px,y,py,zeta,delta,x\n1,0,0,0,0,0,1\n"), "appears twice"));
}

TEST_CASE("particle files: what write_particles writes reads back (its extra arrays accepted and ignored)") {
  const auto dir = ft::test::temp_dir("particle_files_roundtrip");
  const Particles p = sample_set(7);
  for (const char* name : {"p.npz", "p.csv"}) {
    const std::string path = (dir / name).string();
    write_particles(path, p);
    const Particles q = read_particles(path, 0.9);
    REQUIRE(q.size() == p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      CHECK(q.x[i] == p.x[i]);
      CHECK(q.px[i] == p.px[i]);
      CHECK(q.delta[i] == p.delta[i]);
      CHECK(q.state[i] > 0);  // the input starts every particle alive, numbered from 0
      CHECK(q.id[i] == static_cast<int64_t>(i));
    }
  }
}

TEST_CASE("shard sets: written rank by rank, read back as the set one process writes") {
  const auto dir = ft::test::temp_dir("particle_shards");
  const Particles all = sample_set(10);
  const std::string single = (dir / "single.npz").string();
  write_particles(single, all);
  for (int ranks : {2, 3, 4}) {
    CAPTURE(ranks);
    const std::string set = (dir / ("set" + std::to_string(ranks) + ".npz")).string();
    write_as_ranks(set, all, ranks);
    CHECK(is_particle_shard_index(set));
    CHECK(!is_particle_shard_index(single));
    for (int r = 0; r < ranks; ++r) CHECK(std::filesystem::exists(particle_shard_path(set, r)));
    // Every array back, in order; written as one file it is the single process's file byte for byte.
    const Particles merged = read_particle_set(set, 0.9);
    CHECK(merged.id == all.id);
    CHECK(merged.state == all.state);
    CHECK(merged.lost_element == all.lost_element);
    const std::string rewritten = (dir / ("merged" + std::to_string(ranks) + ".npz")).string();
    write_particles(rewritten, merged);
    CHECK(bytes_of(rewritten) == bytes_of(single));
    // As initial particles: the coordinates, numbered 0..n-1 as one set.
    const Particles initial = read_particles(set, 0.9);
    REQUIRE(initial.size() == all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      CHECK(initial.zeta[i] == all.zeta[i]);
      CHECK(initial.id[i] == static_cast<int64_t>(i));
    }
  }
  // A later run with fewer ranks into the same name leaves no stale shard behind.
  const std::string set = (dir / "set4.npz").string();
  write_as_ranks(set, all, 2);
  CHECK(!std::filesystem::exists(particle_shard_path(set, 2)));
  CHECK(!std::filesystem::exists(particle_shard_path(set, 3)));
  CHECK(read_particle_set(set, 0.9).id == all.id);
  // CSV sets: an index listing the shard files.
  const std::string csv = (dir / "set.csv").string();
  write_as_ranks(csv, all, 3);
  CHECK(is_particle_shard_index(csv));
  const Particles from_csv = read_particles(csv, 0.9);
  REQUIRE(from_csv.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) CHECK(from_csv.px[i] == all.px[i]);
}

TEST_CASE("shard sets: a missing shard or a count that disagrees with the index names the file") {
  const auto dir = ft::test::temp_dir("particle_shards_bad");
  const Particles all = sample_set(9);
  const std::string set = (dir / "set.npz").string();
  write_as_ranks(set, all, 3);
  const std::string shard1 = particle_shard_path(set, 1);
  std::filesystem::rename(shard1, shard1 + ".away");
  std::string msg = ft::test::error_message([&] { read_particles(set, 0.9); });
  CHECK(contains(msg, "shard 1 of 3 is missing"));
  CHECK(contains(msg, shard1));
  // Shard 1 replaced by a file of another size.
  write_particles(shard1, sample_set(5));
  msg = ft::test::error_message([&] { read_particle_set(set, 0.9); });
  CHECK(contains(msg, shard1));
  CHECK(contains(msg, "holds 5 particles, the index"));
}

}  // namespace test_particle_files
