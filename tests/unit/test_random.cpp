// The counter-based random stream of matched bunches (fusetrack/device/random.h): Philox4x32-10
// against Random123's known-answer vectors, the sampling helpers against closed forms, and the
// header compiled by NVRTC (no GPU needed).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "fusetrack/codegen.h"
#include "fusetrack/cuda_backend.h"
#include "fusetrack/device/random.h"
#include "fusetrack/nvrtc_compiler.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_random.
namespace test_random {

using namespace ft;

TEST_CASE("Philox4x32-10 gives Random123's known answers") {
  // Random123 kat_vectors: counter (4 words), key (2 words) -> output (4 words).
  struct Kat {
    unsigned ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    ft_philox_block c{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}};
    const ft_philox_block r = ft_philox4x32_10(c, k.key[0], k.key[1]);
    for (int w = 0; w < 4; ++w) CHECK(r.v[w] == k.out[w]);
  }
  // A particle's draw is the block of counter (index low, index high, draw, 0) under the seed.
  const ft_philox_block direct = ft_philox4x32_10(ft_philox_block{{0x89abcdefu, 0x1u, 2u, 0u}}, 0x2au, 0x7u);
  const ft_philox_block by_index = ft_particle_random((7ull << 32) | 0x2aull, 0x189abcdefull, 2u);
  for (int w = 0; w < 4; ++w) CHECK(direct.v[w] == by_index.v[w]);
}

TEST_CASE("uniforms, normals and the piecewise-linear quantile against closed forms") {
  CHECK(ft_uniform53(0u, 0u) == 0.0);
  CHECK(ft_uniform53(0xffffffffu, 0xffffffffu) == 1.0 - 0x1.0p-53);
  CHECK(ft_uniform53(0x80000000u, 0u) == 0.5);
  // Box-Muller, cosine branch: u1 = 1 - e^-2 gives r = 2; u2 = 0 gives cos = 1, 0.5 gives -1.
  const double u1 = 1.0 - std::exp(-2.0);
  CHECK(ft_box_muller(u1, 0.0) == doctest::Approx(2.0).epsilon(1e-14));
  CHECK(ft_box_muller(u1, 0.5) == doctest::Approx(-2.0).epsilon(1e-14));
  // Moments of normals from the stream: mean 0 and variance 1 within 5 standard errors.
  const int n = 200000;
  double s1 = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n; ++i) {
    const ft_philox_block a = ft_particle_random(5, static_cast<unsigned long long>(i), 0u);
    const double g = ft_box_muller(ft_uniform53(a.v[0], a.v[1]), ft_uniform53(a.v[2], a.v[3]));
    s1 += g, s2 += g * g, s4 += g * g * g * g;
  }
  CHECK(std::fabs(s1 / n) < 5.0 / std::sqrt(n));
  CHECK(std::fabs(s2 / n - 1.0) < 5.0 * std::sqrt(2.0 / n));
  CHECK(std::fabs(s4 / n - 3.0) < 5.0 * std::sqrt(96.0 / n));  // Var(g^4) = 105 - 9
  // Density p(x) = x on [0, 2] (one segment): mass up to t is t^2 / 2, so the quantile of u is 2 sqrt(u).
  const double x[2] = {0.0, 2.0}, p[2] = {0.0, 2.0}, cum[2] = {0.0, 2.0};
  for (double u : {0.0, 0.01, 0.25, 0.5, 0.81, 0.999})
    CHECK(ft_piecewise_linear_quantile(x, p, cum, 2, u) == doctest::Approx(2.0 * std::sqrt(u)).epsilon(1e-14));
  // Density 1 - x on [0, 1], 0 on [1, 2], x - 2 on [2, 3] (mass 1/2 each side): F(x) = x - x^2 / 2
  // on [0, 1], flat at 1/2 over [1, 2], 1/2 + (x - 2)^2 / 2 on [2, 3]; the quantile
  // (inf{x: F(x) > u}) skips the gap.
  const double xs[4] = {0.0, 1.0, 2.0, 3.0}, ps[4] = {1.0, 0.0, 0.0, 1.0};
  const double cs[4] = {0.0, 0.5, 0.5, 1.0};  // trapezoids
  CHECK(ft_piecewise_linear_quantile(xs, ps, cs, 4, 0.25) == doctest::Approx(1.0 - std::sqrt(0.5)));
  CHECK(ft_piecewise_linear_quantile(xs, ps, cs, 4, 0.5) == 2.0);
  CHECK(ft_piecewise_linear_quantile(xs, ps, cs, 4, 0.875) == doctest::Approx(2.0 + std::sqrt(0.75)));
  const double ys[4] = {0.0, 10.0, 20.0, 30.0};
  CHECK(ft_interpolate(xs, ys, 4, 1.25) == doctest::Approx(12.5));
  CHECK(ft_interpolate(xs, ys, 4, -1.0) == 0.0);
  CHECK(ft_interpolate(xs, ys, 4, 9.0) == 30.0);
}

TEST_CASE("NVRTC compiles the random stream and the bunch sampler (one source for CPU and GPU)") {
  KernelSource src;
  src.name = "fusetrack_random_test.cu";
  src.headers = framework_device_headers();
  src.text = R"(#include "fusetrack/device/random.h"
extern "C" __global__ void fusetrack_sample_longitudinal(ft::ft_longitudinal_sampler s, unsigned long long seed,
                                                        unsigned long long first, int n, double* zeta, double* delta) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ft::ft_sample_longitudinal(s, seed, first + i, zeta + i, delta + i);
}
)";
  CompiledKernel k;
  CHECK_NOTHROW(k = KernelCompiler("off").compile(src, 90));
  CHECK(!k.cubin.empty());
}

TEST_CASE("NVRTC compiles the kernels that make matched bunches on the device (fma off)") {
  const KernelSource src = matched_bunch_sampler_source();
  CHECK(src.fma == FmaMode::Off);
  const std::string& kernels = src.headers.at("fusetrack/device/matched_bunch_kernels.h");  // the source includes it
  CHECK(src.text.find("fusetrack/device/matched_bunch_kernels.h") != std::string::npos);
  for (const char* entry : {"fusetrack_sample_matched", "fusetrack_longitudinal_sums", "fusetrack_count_alive"})
    CHECK(kernels.find(entry) != std::string::npos);
  CompiledKernel k;
  CHECK_NOTHROW(k = KernelCompiler("off").compile(src, 90));
  CHECK(!k.cubin.empty());
}

}  // namespace test_random
