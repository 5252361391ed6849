// The Poisson solver on the GPU (fusetrack/cuda_poisson.h): the reproducible mode gives the CPU's
// bits, cuFFT agrees with FFTW to rounding; solve times of the grids (skipped without a GPU).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "fusetrack/cuda_poisson.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_gpu_poisson.
namespace test_gpu_poisson {

using namespace ft;

namespace {

PoissonGrid make_grid(PoissonModel model, int nx, int ny, int nz) {
  PoissonGrid g;
  g.dims = model == PoissonModel::Open2D ? 2 : 3;
  g.nodes = {nx, ny, g.dims == 3 ? nz : 1};
  g.min = {-4e-3, -2e-3, -0.2};
  g.max = {4e-3, 2e-3, 0.2};
  return g;
}

std::vector<double> random_density(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1e-6);
  std::vector<double> rho(n);
  for (double& v : rho) v = u(rng);
  return rho;
}

const char* model_name(PoissonModel m) {
  return m == PoissonModel::Open2D ? "2D" : (m == PoissonModel::Open2p5D ? "2.5D" : "3D");
}

}  // namespace

TEST_CASE("GPU Poisson solver: reproducible mode bitwise equal to the CPU, cuFFT equal to FFTW to rounding" *
          doctest::test_suite("quick")) {
  // The 37 x 20 (x 11) grids take several lines per block in the last axis' pass, the last block
  // partly filled; the 2D 24 x 1000 grid transforms 2048-point y lines, one per block in 64 KiB of
  // shared memory (above the default 48 KiB).
  struct Case {
    PoissonModel model;
    int nx, ny, nz;
  };
  for (const Case& grid_case : {Case{PoissonModel::Open2D, 37, 20, 1}, Case{PoissonModel::Open2p5D, 37, 20, 11},
                                Case{PoissonModel::Open3D, 37, 20, 11}, Case{PoissonModel::Open2D, 24, 1000, 1}}) {
    const PoissonModel model = grid_case.model;
    const PoissonGrid g = make_grid(model, grid_case.nx, grid_case.ny, grid_case.nz);
    const std::vector<double> rho = random_density(g.size(), 3);
    for (const PoissonFft fft : {PoissonFft::Reproducible, PoissonFft::Fast}) {
      GpuPoissonSolver gpu(g, model, fft);
      PoissonSolver cpu(g, model, fft);
      const size_t n = g.size();
      std::vector<double> c[3] = {std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
      std::vector<double> d[3] = {std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
      cpu.solve(rho.data(), c[0].data(), c[1].data(), c[2].data());
      gpu.solve(rho.data(), d[0].data(), d[1].data(), d[2].data());
      const int comps = model == PoissonModel::Open3D ? 3 : 2;
      CAPTURE(model_name(model));
      CAPTURE(grid_case.ny);
      CAPTURE(static_cast<int>(fft));
      if (fft == PoissonFft::Reproducible) {
        for (int k = 0; k < comps; ++k) CHECK(c[k] == d[k]);
      } else {
        double diff = 0.0, scale = 0.0;
        for (int k = 0; k < comps; ++k)
          for (size_t i = 0; i < n; ++i) {
            diff = std::max(diff, std::fabs(c[k][i] - d[k][i]));
            scale = std::max(scale, std::fabs(c[k][i]));
          }
        MESSAGE(fmt::format("{}: max |E_cuFFT - E_FFTW| / max |E| = {:.3g}", model_name(model), diff / scale));
        CHECK(diff / scale < 1e-12);
      }
    }
  }
}

// A benchmark, not part of the suite (reported as skipped):
//   build-gpu/bin/test_gpu -tc="GPU Poisson solve time*" --no-skip   (bench/space_charge/frozen_rings_and_poisson.sh)
TEST_CASE("GPU Poisson solve time: 2.5D 256x256x64 and 3D 128x128x64, cuFFT vs reproducible" *
          doctest::test_suite("benchmark") * doctest::skip()) {
  for (const PoissonModel model : {PoissonModel::Open2p5D, PoissonModel::Open3D}) {
    const PoissonGrid g = model == PoissonModel::Open3D ? make_grid(model, 128, 128, 64) : make_grid(model, 256, 256, 64);
    const std::vector<double> rho = random_density(g.size(), 4);
    for (const PoissonFft fft : {PoissonFft::Fast, PoissonFft::Reproducible}) {
      GpuPoissonSolver gpu(g, model, fft);
      std::vector<double> e[3] = {std::vector<double>(g.size()), std::vector<double>(g.size()), std::vector<double>(g.size())};
      double seconds = 0.0, best = 1e30;
      for (int r = 0; r < 4; ++r) {
        gpu.solve(rho.data(), e[0].data(), e[1].data(), e[2].data(), &seconds);
        if (r > 0) best = std::min(best, seconds);
      }
      MESSAGE(fmt::format("{} {}x{}x{} {}: GPU solve {:.3f} ms (best of 3, transfers excluded)", model_name(model),
                          g.nodes[0], g.nodes[1], g.nodes[2], fft == PoissonFft::Fast ? "cuFFT" : "reproducible",
                          best * 1e3));
      CHECK(best > 0.0);
    }
  }
}

}  // namespace test_gpu_poisson
