// Dynamic-aperture scans: the analytic DA of a linear ring with one circular aperture, bad
// arguments, and resume after a killed process (bitwise identical results).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "fusetrack/da.h"
#include "fusetrack/npy.h"
#include "support/lattice_builders.h"
#include "support/process.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_da.
namespace test_da {

using namespace ft;
namespace fs = std::filesystem;

namespace {

/// The FODO ring with a circular aperture of radius R at the first defocusing quadrupole.
Lattice fodo_with_aperture(double radius) {
  nlohmann::ordered_json doc = ft::test::parse_bundled("fodo_ring.json");
  doc["elements"]["aperture"] = {{"type", "LimitCircle"}, {"radius", radius}};
  doc["sequence"] = nlohmann::ordered_json::array(
      {"qf_half", "d", "qd", "aperture", "d", "qf_half", nlohmann::ordered_json{{"line", "cell"}, {"repeat", 15}}, "end"});
  return lattice_from_json(doc, "fodo_ring+aperture", ft::test::builtin_registry());
}

using ft::test::fusetrack_binary;

std::pair<int, std::string> run(const std::string& cmd) { return ft::test::run_command(cmd); }

/// Starts a command in the background; returns its pid.
pid_t spawn(const std::string& cmd) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

bool same_arrays(const NpzArchive& a, const NpzArchive& b, std::string& which) {
  for (const auto& [name, arr] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.data != arr.data || it->second.shape != arr.shape) {
      which = name;
      return false;
    }
  }
  return a.size() == b.size();
}

}  // namespace

TEST_CASE("DA of a linear ring with one circular aperture equals the aperture mapped through the optics") {
  // Thin-lens FODO: sin(mu/2) = L k1l / 2, beta at QF (start) and QD:
  // beta_max/min = L_cell (1 +- sin(mu/2)) / sin(mu), L_cell = 2 L.
  const double L = 5.0, k1l = 0.18, radius = 0.01;
  const double s_half = L * k1l / 2.0, mu = 2.0 * std::asin(s_half);
  const double beta_max = 2 * L * (1 + s_half) / std::sin(mu), beta_min = 2 * L * (1 - s_half) / std::sin(mu);
  // A particle launched at the symmetry point (alpha = 0) with px = 0 reaches x0 sqrt(beta_QD / beta_start).
  const double da_x = radius * std::sqrt(beta_max / beta_min);  // horizontal: beta_x(QF) = max, beta_x(QD) = min
  const double da_y = radius * std::sqrt(beta_min / beta_max);  // vertical: beta_y(QF) = min, beta_y(QD) = max

  const Lattice lattice = fodo_with_aperture(radius);
  DaConfig c;
  c.turns = 2000;
  c.angles = 2;
  c.angle_min = 0.0;
  c.angle_max = 90.0;
  c.amplitudes = 20;
  c.amplitude_min = 0.001;
  c.amplitude_max = 0.03;
  c.around_closed_orbit = false;
  c.refine_resolution = 1e-7;
  DaScan scan = make_da_scan(lattice, c);
  auto cpu = make_cpu_backend(lattice);
  DaRunOptions ro;
  REQUIRE(run_da_scan(scan, *cpu, ro));
  DaSummary s = summarize_da(scan);
  refine_da(lattice, scan, s, *cpu, ro);
  REQUIRE(s.per_angle.size() == 2);
  MESSAGE(fmt::format("DA_x {:.8g} (analytic {:.8g}), DA_y {:.8g} (analytic {:.8g})", s.per_angle[0].da_refined, da_x,
                      s.per_angle[1].da_refined, da_y));
  // The largest phase reached in 2000 turns is within ~(pi/2000)^2/2 of the peak: relative 2e-6.
  CHECK(std::fabs(s.per_angle[0].da_refined - da_x) / da_x < 2e-5);
  CHECK(std::fabs(s.per_angle[1].da_refined - da_y) / da_y < 2e-5);
  // The coarse grid brackets the refined value.
  CHECK(s.per_angle[0].da_last_stable <= s.per_angle[0].da_refined);
  CHECK(s.per_angle[0].da_first_loss > s.per_angle[0].da_refined);
  CHECK(s.refinement_particle_turns > 0);
  CHECK(s.fine_grid_particle_turns_estimate > s.refinement_particle_turns);
  // Losses happen on the aperture element (sequence index 3).
  for (size_t i = 0; i < scan.particles.size(); ++i)
    if (scan.particles.state[i] <= 0) CHECK(scan.particles.lost_element[i] == 3);
}

TEST_CASE("DA on a cartesian grid: the border per column follows the stable ellipse of a circular aperture") {
  // The same ring: with px = py = 0 at the start the peak excursions at the aperture are x0 sqrt(bx_QD / bx_QF) and
  // y0 sqrt(by_QD / by_QF); with independent (irrational) tunes both peaks meet, so the stable launch region is the
  // ellipse (x0 / da_x)^2 + (y0 / da_y)^2 < 1 and the border of column x is da_y sqrt(1 - (x / da_x)^2).
  const double L = 5.0, k1l = 0.18, radius = 0.01;
  const double s_half = L * k1l / 2.0, mu = 2.0 * std::asin(s_half);
  const double beta_max = 2 * L * (1 + s_half) / std::sin(mu), beta_min = 2 * L * (1 - s_half) / std::sin(mu);
  const double da_x = radius * std::sqrt(beta_max / beta_min), da_y = radius * std::sqrt(beta_min / beta_max);
  const Lattice lattice = fodo_with_aperture(radius);
  DaConfig c;
  c.grid = DaGrid::Cartesian;
  c.turns = 3000;
  c.nx = 5;
  c.x_min = -0.8 * da_x;
  c.x_max = 0.8 * da_x;
  c.ny = 49;
  c.y_min = -1.2 * da_y;
  c.y_max = 1.2 * da_y;
  c.around_closed_orbit = false;
  DaScan scan = make_da_scan(lattice, c);
  auto cpu = make_cpu_backend(lattice);
  DaRunOptions ro;
  REQUIRE(run_da_scan(scan, *cpu, ro));
  const DaSummary s = summarize_da(scan);
  REQUIRE(s.per_column.size() == 5);
  CHECK(s.per_angle.empty());
  const double step = (c.y_max - c.y_min) / (c.ny - 1);
  std::vector<double> borders;
  for (const DaColumnResult& r : s.per_column) {
    const double expected = da_y * std::sqrt(1.0 - (r.x / da_x) * (r.x / da_x));
    CAPTURE(r.x);
    CAPTURE(expected);
    CAPTURE(r.y_high);
    CAPTURE(r.y_low);
    // The last surviving grid point lies within one step inside the border (2% for the finite number of turns).
    CHECK(r.y_high <= expected * 1.001);
    CHECK(r.y_high >= expected - step - 0.02 * da_y);
    CHECK(r.y_low >= -expected * 1.001);
    CHECK(r.y_low <= -(expected - step - 0.02 * da_y));
    borders.push_back(std::min(std::fabs(r.y_high), std::fabs(r.y_low)));
  }
  CHECK(s.da_min == *std::min_element(borders.begin(), borders.end()));
  CHECK(s.da_max == *std::max_element(borders.begin(), borders.end()));
  CHECK(s.da_max > 0.0);
}

TEST_CASE("DA: bad arguments give clear errors") {
  auto message = [](const DaConfig& c) { return ft::test::error_message([&] { validate_da_config(c); }); };
  DaConfig c;
  c.turns = 0;
  CHECK(message(c).find("--turns") != std::string::npos);
  c = DaConfig{};
  c.angles = 0;
  CHECK(message(c).find("the grid is empty") != std::string::npos);
  c = DaConfig{};
  c.amplitude_min = -0.01;
  CHECK(message(c).find("must not be negative") != std::string::npos);
  c = DaConfig{};
  c.units = DaUnits::Sigma;
  c.emittance_nx = 0.0;
  c.emittance_ny = 1e-6;
  const std::string m = message(c);
  CHECK(m.find("--emittance-nx") != std::string::npos);
  CHECK(m.find("positive normalised emittance") != std::string::npos);
  c = DaConfig{};
  c.grid = DaGrid::Cartesian;
  c.nx = 0;
  CHECK(message(c).find("the grid is empty") != std::string::npos);

  // Through the command line: exit code 2 and the message.
  const auto [rc, out] = run(fusetrack_binary() + " da /nonexistent/ring.json --device cpu --no-plots -o " +
                             (fs::temp_directory_path() / "fusetrack_da_bad").string());
  CHECK(rc == 2);
  CHECK(out.find("/nonexistent/ring.json") != std::string::npos);
  CHECK(out.find("cannot open file") != std::string::npos);
  const auto [rc2, out2] = run(fusetrack_binary() + " da " + ft::test::source_path("lattices/fodo_ring.json") +
                               " --turns 0 --device cpu --no-plots");
  CHECK(rc2 == 2);
  CHECK(out2.find("--turns") != std::string::npos);
  // Options of the other grid are refused, naming them, instead of silently running the default polar grid.
  const std::string fodo = " da " + ft::test::source_path("lattices/fodo_ring.json") + " --device cpu --no-plots -o " +
                           (fs::temp_directory_path() / "fusetrack_da_bad").string();
  const auto [rc3, out3] = run(fusetrack_binary() + fodo + " --nx 5 --y-range -0.01 0.01");
  CHECK(rc3 == 2);
  CHECK(out3.find("--nx, --y-range") != std::string::npos);
  CHECK(out3.find("--grid cartesian") != std::string::npos);
  const auto [rc4, out4] = run(fusetrack_binary() + fodo + " --grid cartesian --angles 5");
  CHECK(rc4 == 2);
  CHECK(out4.find("--angles") != std::string::npos);
  CHECK(out4.find("--grid polar") != std::string::npos);
}

TEST_CASE("DA: a killed scan resumes to results identical to an uninterrupted run") {
  const std::string lattice = ft::test::source_path("lattices/sextupole_rf_ring.json");
  const auto base = ft::test::temp_dir("da_resume");
  const std::string args = fmt::format(
      " da {} --turns 6000 --angles 6 --amplitudes 12 --amplitude-range 0.002 0.035 --checkpoint-every 200 "
      "--device cpu --threads 1 --no-plots -o ",
      lattice);
  const std::string whole = (base / "whole").string(), killed = (base / "killed").string();
  REQUIRE(run(fusetrack_binary() + args + whole).first == 0);

  // Start the same scan, kill -9 it once it has written a checkpoint but before it ends.
  const pid_t pid = spawn(fusetrack_binary() + args + killed);
  const auto checkpoint = fs::path(killed) / "checkpoint.npz";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(checkpoint) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(checkpoint));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));  // it was killed mid-run, not finished
  CHECK_FALSE(fs::exists(fs::path(killed) / "da.npz"));
  const int64_t turns_at_kill = read_npz(checkpoint.string()).at("turns_done").to_int64().at(0);
  MESSAGE("killed at turn " << turns_at_kill);
  CHECK(turns_at_kill < 6000);

  const auto [rc, out] = run(fusetrack_binary() + args + killed + " --resume");
  REQUIRE(rc == 0);
  CHECK(out.find("resuming") != std::string::npos);
  std::string which;
  CHECK_MESSAGE(same_arrays(read_npz(whole + "/da.npz"), read_npz(killed + "/da.npz"), which), "differs: " << which);

  // A checkpoint from another configuration is refused.
  const auto [rc3, out3] = run(fusetrack_binary() + " da " + lattice +
                               " --turns 7000 --angles 6 --amplitudes 12 --amplitude-range 0.002 0.035 --device cpu "
                               "--no-plots --resume -o " + killed);
  CHECK(rc3 == 2);
  CHECK(out3.find("another lattice or scan configuration") != std::string::npos);
}

TEST_CASE("DA: --stop-after between checkpoints writes one where the scan stops, and --resume gives the whole run") {
  // The backend calls last 16, 32, 64, ... turns (survivors compacted between them): with checkpoints
  // every 1000 turns (the default), a stop after 100 turns comes at the end of a call, not at a checkpoint.
  const std::string lattice = ft::test::source_path("lattices/sextupole_rf_ring.json");
  const auto base = ft::test::temp_dir("da_stop_between");
  const std::string args = fmt::format(
      " da {} --turns 600 --angles 6 --amplitudes 12 --amplitude-range 0.002 0.035 --device cpu --threads 1 --no-plots -o ",
      lattice);
  const std::string whole = (base / "whole").string(), stopped = (base / "stopped").string();
  REQUIRE(run(fusetrack_binary() + args + whole).first == 0);
  const auto [rc, out] = run(fusetrack_binary() + args + stopped + " --stop-after 100");
  REQUIRE(rc == 0);
  CHECK_FALSE(fs::exists(fs::path(stopped) / "da.npz"));
  const int64_t turns = read_npz((fs::path(stopped) / "checkpoint.npz").string()).at("turns_done").to_int64().at(0);
  CHECK(turns >= 100);
  CHECK(turns < 600);
  CHECK(out.find(fmt::format("stopped after turn {}", turns)) != std::string::npos);
  const auto [rc2, out2] = run(fusetrack_binary() + args + stopped + " --resume");
  REQUIRE(rc2 == 0);
  CHECK(out2.find(fmt::format("at turn {}", turns)) != std::string::npos);
  std::string which;
  CHECK_MESSAGE(same_arrays(read_npz(whole + "/da.npz"), read_npz(stopped + "/da.npz"), which), "differs: " << which);
}

TEST_CASE("DA: Ctrl-C stops cleanly with the checkpoint written") {
  const std::string lattice = ft::test::source_path("lattices/sextupole_rf_ring.json");
  const auto dir = ft::test::temp_dir("da_sigint");
  const pid_t pid = spawn(fusetrack_binary() + " da " + lattice +
                          " --turns 200000 --angles 4 --amplitudes 8 --amplitude-range 0.001 0.01 --checkpoint-every 100 "
                          "--device cpu --threads 1 --no-plots -o " + dir.string());
  const auto checkpoint = dir / "checkpoint.npz";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(checkpoint) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(checkpoint));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const int64_t done = read_npz(checkpoint.string()).at("turns_done").to_int64().at(0);
  CHECK(done > 0);
  CHECK(done < 200000);
}

}  // namespace test_da
