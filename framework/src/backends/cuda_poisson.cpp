// The Poisson solver on the GPU (fusetrack/cuda_poisson.h): the host solver's spectra and twiddles,
// cuFFT (Fast) or the CPU's line transforms as NVRTC kernels (Reproducible, the same bits).
#include "fusetrack/cuda_poisson.h"

#include <cufft.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/math_helpers.hpp"
#include "fusetrack/device/space_charge_grid.h"
#include "fusetrack/error.h"
#include "gpu_module.h"

namespace ft {

namespace {

// The kernels (NVRTC, with the framework's device headers).
const char* kPoissonKernels = "#include \"fusetrack/device/poisson_kernels.h\"\n";

void check_cufft(cufftResult rc, const char* what) {
  if (rc != CUFFT_SUCCESS) throw DeviceError(fmt::format("{} failed (cuFFT error {})", what, static_cast<int>(rc)));
}

}  // namespace

const char* gpu_poisson_kernel_source() { return kPoissonKernels; }

namespace {

/// The kernels as compiled. Benchmark knobs: FUSETRACK_POISSON_MIN_BLOCKS=N and FUSETRACK_POISSON_LINE_MIN_BLOCKS=N
/// replace the minimum resident blocks asked for the last-axis kernel and the other line kernels (the same
/// arithmetic, other register caps).
std::string poisson_kernels_as_compiled() {
  std::string defines;
  for (const auto& [variable, macro] :
       {std::pair<const char*, const char*>{"FUSETRACK_POISSON_MIN_BLOCKS", "FT_POISSON_CONVOLVE_MIN_BLOCKS"},
        std::pair<const char*, const char*>{"FUSETRACK_POISSON_LINE_MIN_BLOCKS", "FT_POISSON_LINE_MIN_BLOCKS"}}) {
    const char* value = std::getenv(variable);
    if (value && std::atoi(value) > 0) defines += fmt::format("#define {} {}\n", macro, std::atoi(value));
  }
  return defines + kPoissonKernels;
}

constexpr unsigned kThreads = 256;
constexpr int kMaxLine = 2048;  // 2 * 2048 doubles = 32 KiB of shared memory per block
// ft_poisson_convolve_last: adjacent lines per block, up to this many points in all (2 lines of the
// 512 points of a 256-node grid: a 32-byte sector of each row; 32 KiB of shared memory), at most
// kConvolveMaxColumns; one line of 2048 points takes 64 KiB (above the default 48 KiB: opted in).
constexpr int kConvolveLinePoints = 1024;
constexpr int kConvolveMaxColumns = 4;

}  // namespace

struct GpuPoissonSolver::Impl {
  PoissonSolver host;
  GpuModule gpu;
  int T = 2, layers = 1;
  int convolve_columns = 1;
  unsigned convolve_shared = 0;
  int n[3] = {1, 1, 1}, M[3] = {1, 1, 1}, H = 1;
  long long spectrum_size = 0, real_size = 0, layer_nodes = 0;
  CUdeviceptr green[3] = {0, 0, 0}, tw_fwd[3] = {0, 0, 0}, tw_inv[3] = {0, 0, 0};
  CUdeviceptr spec = 0, work = 0, real = 0, rho_buf = 0, out_buf[3] = {0, 0, 0};
  CUdeviceptr component_work[3] = {0, 0, 0};  // Reproducible: each field component's spectrum after the last axis
  cufftHandle r2c = 0, c2r = 0;

  Impl(const PoissonGrid& grid, PoissonModel model, PoissonFft fft, int device)
      : host(grid, model, fft),
        gpu(device, "fusetrack_poisson.cu", poisson_kernels_as_compiled().c_str(), FmaMode::Off) {
    T = model == PoissonModel::Open3D ? 3 : 2;
    layers = model == PoissonModel::Open2p5D ? grid.nodes[2] : 1;
    const std::array<int, 3> m = host.transform_lengths();
    for (int d = 0; d < T; ++d) {
      n[d] = grid.nodes[d];
      M[d] = m[d];
    }
    H = M[0] / 2 + 1;
    spectrum_size = static_cast<long long>(H) * M[1] * M[2];
    real_size = static_cast<long long>(M[0]) * M[1] * M[2];
    layer_nodes = static_cast<long long>(n[0]) * n[1] * n[2];
    for (int c = 0; c < T; ++c) green[c] = gpu.upload(host.green_spectrum(c));
    const size_t spectrum_bytes = static_cast<size_t>(2 * spectrum_size * layers) * sizeof(double);
    spec = gpu.zeros(spectrum_bytes);
    if (fft == PoissonFft::Reproducible) {
      for (int d = 0; d < T; ++d) {
        if (M[d] > kMaxLine)
          throw DeviceError(fmt::format("GPU Poisson solver: transform length {} along dimension {} exceeds {} (nodes "
                                        "up to {} per dimension in the reproducible mode)",
                                        M[d], d, kMaxLine, kMaxLine / 2));
        tw_fwd[d] = gpu.upload(host.twiddles(d, false));
        tw_inv[d] = gpu.upload(host.twiddles(d, true));
      }
      for (int c = 0; c < T; ++c) component_work[c] = gpu.zeros(spectrum_bytes);
      const int last = T - 1;
      convolve_columns = std::clamp(kConvolveLinePoints / M[last], 1, kConvolveMaxColumns);  // a power of two (M is)
      // A benchmark knob: lines per block, 1, 2 or 4, within 64 KiB of shared memory (columns x M <= 2048).
      if (const char* c = std::getenv("FUSETRACK_POISSON_COLUMNS"))
        if (const int v = std::atoi(c); (v == 1 || v == 2 || v == 4) && v * M[last] <= kMaxLine) convolve_columns = v;
      convolve_shared = static_cast<unsigned>(2 * convolve_columns * 2 * M[last] * sizeof(double));
      gpu.allow_shared_memory(gpu.function("ft_poisson_convolve_last"), convolve_shared);
    } else {
      real = gpu.zeros(static_cast<size_t>(real_size * layers) * sizeof(double));
      work = gpu.zeros(spectrum_bytes);
      if (T == 2) {
        int dims[2] = {M[1], M[0]};
        check_cufft(cufftPlanMany(&r2c, 2, dims, nullptr, 1, 0, nullptr, 1, 0, CUFFT_D2Z, layers), "cufftPlanMany(D2Z)");
        check_cufft(cufftPlanMany(&c2r, 2, dims, nullptr, 1, 0, nullptr, 1, 0, CUFFT_Z2D, layers), "cufftPlanMany(Z2D)");
      } else {
        check_cufft(cufftPlan3d(&r2c, M[2], M[1], M[0], CUFFT_D2Z), "cufftPlan3d(D2Z)");
        check_cufft(cufftPlan3d(&c2r, M[2], M[1], M[0], CUFFT_Z2D), "cufftPlan3d(Z2D)");
      }
    }
  }
  ~Impl() {
    if (r2c) cufftDestroy(r2c);
    if (c2r) cufftDestroy(c2r);
  }

  unsigned blocks_for(long long count) const {
    return static_cast<unsigned>((count + kThreads - 1) / kThreads);
  }

  /// Threads of a block transforming `count` lines of m points: one per eight points (a register group of
  /// poisson_block_stages_lines), 64 to 256.
  static unsigned line_threads(int m, int count) { return static_cast<unsigned>(std::clamp(m / 8 * count, 64, 256)); }

  PoissonLines lines_shape() const {
    PoissonLines p{};
    for (int d = 0; d < 3; ++d) {
      p.n[d] = d < T ? n[d] : 1;
      p.m[d] = M[d];
      p.log2m[d] = ceil_log2(M[d]);
    }
    p.h = H;
    return p;
  }

  /// Launches one block per line and layer with the line in shared memory.
  void launch_lines(const char* kernel, long long count, int m, void** args) {
    gpu.launch_async(gpu.function(kernel), static_cast<unsigned>(count * layers), line_threads(m, 1),
                      static_cast<unsigned>(2 * m * sizeof(double)), args);
  }

  /// y (axis 1) or zeta (axis 2) lines of `buffer`, every layer.
  void lines(PoissonLines p, int axis, CUdeviceptr buffer, int load, int store, CUdeviceptr tw) {
    long long count = axis == 1 ? static_cast<long long>(H) * p.n[2] : static_cast<long long>(H) * M[1];
    long long spec_layer = 2 * spectrum_size;
    void* args[] = {&p, &axis, &count, &buffer, &spec_layer, &load, &store, &tw};
    launch_lines("ft_poisson_line", count, M[axis], args);
  }

  void solve_reproducible(CUdeviceptr rho, CUdeviceptr* out, int out_stride) {
    PoissonLines p = lines_shape();
    long long pairs = poisson_row_pairs(p), spec_layer = 2 * spectrum_size, node_layer = layer_nodes;
    {
      CUdeviceptr s = spec, tw = tw_fwd[0];
      void* args[] = {&p, &pairs, &rho, &node_layer, &s, &spec_layer, &tw};
      launch_lines("ft_poisson_fwd_x", pairs, M[0], args);
    }
    if (T == 3) lines(p, 1, spec, p.n[1], M[1], tw_fwd[1]);
    {
      // The last axis: forward, product and inverse per component in one pass (y lines of the rows
      // that hold data in 2D and 2.5D; every zeta line in 3D).
      int axis = T - 1, columns = convolve_columns, components = T;
      long long count = axis == 1 ? static_cast<long long>(H) : static_cast<long long>(H) * M[1];
      CUdeviceptr s = spec, g0 = green[0], g1 = green[1], g2 = green[T - 1], w0 = component_work[0],
                  w1 = component_work[1], w2 = component_work[T - 1], twf = tw_fwd[axis], twi = tw_inv[axis];
      void* args[] = {&p, &axis, &count, &columns, &s, &spec_layer, &components, &g0, &g1, &g2, &w0, &w1, &w2, &twf, &twi};
      const long long groups = (count + columns - 1) / columns;
      gpu.launch_async(gpu.function("ft_poisson_convolve_last"), static_cast<unsigned>(groups * layers),
                        line_threads(M[axis], columns),
                        convolve_shared, args);
    }
    for (int c = 0; c < T; ++c) {
      const CUdeviceptr spectrum = component_work[c];
      if (T == 3) lines(p, 1, spectrum, M[1], p.n[1], tw_inv[1]);
      CUdeviceptr s = spectrum, o = out[c], tw = tw_inv[0];
      void* args[] = {&p, &pairs, &s, &spec_layer, &o, &node_layer, &tw, &out_stride};
      launch_lines("ft_poisson_inv_x", pairs, M[0], args);
    }
  }

  void solve_fast(CUdeviceptr rho, CUdeviceptr* out, int out_stride) {
    int n0 = n[0], n1 = n[1], n2 = T == 3 ? n[2] : 1, m0 = M[0], m1 = M[1], m2 = M[2];
    long long nl = layers;
    {
      CUdeviceptr r = real;
      void* args[] = {&rho, &r, &n0, &n1, &n2, &m0, &m1, &m2, &nl};
      gpu.launch_async(gpu.function("ft_poisson_pad"), blocks_for(real_size * nl), kThreads, 0, args);
    }
    check_cufft(cufftExecD2Z(r2c, reinterpret_cast<cufftDoubleReal*>(real), reinterpret_cast<cufftDoubleComplex*>(spec)),
                "cufftExecD2Z");
    for (int c = 0; c < T; ++c) {
      {
        CUdeviceptr x = spec, g = green[c], y = work;
        long long count = spectrum_size;
        void* args[] = {&x, &g, &y, &count, &nl};
        gpu.launch_async(gpu.function("ft_poisson_multiply"), blocks_for(count * nl), kThreads, 0, args);
      }
      check_cufft(cufftExecZ2D(c2r, reinterpret_cast<cufftDoubleComplex*>(work), reinterpret_cast<cufftDoubleReal*>(real)),
                  "cufftExecZ2D");
      CUdeviceptr r = real, o = out[c];
      void* args[] = {&r, &o, &n0, &n1, &n2, &m0, &m1, &m2, &nl, &out_stride};
      gpu.launch_async(gpu.function("ft_poisson_unpad"), blocks_for(layer_nodes * nl), kThreads, 0, args);
    }
  }
};

GpuPoissonSolver::GpuPoissonSolver(const PoissonGrid& grid, PoissonModel model, PoissonFft fft, int device)
    : m_impl(std::make_unique<Impl>(grid, model, fft, device)) {}

GpuPoissonSolver::~GpuPoissonSolver() = default;

const PoissonSolver& GpuPoissonSolver::host() const { return m_impl->host; }

void GpuPoissonSolver::use_spectra(const PoissonSolver& other) {
  Impl& im = *m_impl;
  // `other` in the other FFT mode (a host solve with FFTW while this one runs the line transforms,
  // preferred_fft): this mode's spectra for other's grid, from a host solver of this mode.
  std::unique_ptr<PoissonSolver> same_mode;
  if (other.model() == im.host.model() && other.fft() != im.host.fft())
    same_mode = std::make_unique<PoissonSolver>(other.grid(), other.model(), im.host.fft());
  const PoissonSolver& source = same_mode ? *same_mode : other;
  if (source.model() != im.host.model() || source.transform_lengths() != im.host.transform_lengths())
    throw Error("GPU Poisson solver: use_spectra() needs a solver of the same nodes and model");
  for (int c = 0; c < im.T; ++c) {
    const std::vector<double>& g = source.green_spectrum(c);
    im.gpu.copy_to_device(im.green[c], g.data(), g.size() * sizeof(double));
  }
}

PoissonFft GpuPoissonSolver::preferred_fft(const PoissonGrid& grid, PoissonModel model, PoissonFft requested) {
  if (requested == PoissonFft::Reproducible) return requested;
  if (const char* v = std::getenv("FUSETRACK_GPU_POISSON_FFT"); v && std::string(v) == "cufft") return requested;
  // cuFFT's doubled grid has 2 n points per dimension, the line transforms the next power of two of 2 n - 1: the
  // same lengths when n is a power of two. Then the line transforms (2.5D 256 x 256 x 64: 0.77 ms against cuFFT's
  // 0.97 ms; 3D 128 x 128 x 64: 0.75 against 0.88 ms on an H100, bench/HISTORY.md), within their 2048 points.
  const int transformed = model == PoissonModel::Open3D ? 3 : 2;
  for (int d = 0; d < transformed; ++d) {
    const int n = grid.nodes[static_cast<size_t>(d)];
    if (n < 2 || (n & (n - 1)) != 0 || 2 * n > kMaxLine) return requested;
  }
  return PoissonFft::Reproducible;
}

void GpuPoissonSolver::solve_device(uint64_t rho, uint64_t ex, uint64_t ey, uint64_t ez, double* seconds, int node_stride) {
  Impl& im = *m_impl;
  if (!rho || !ex || !ey || (im.T == 3 && !ez))
    throw Error("GPU Poisson solver: solve_device() needs rho, ex, ey (and ez for Open3D)");
  CUdeviceptr out[3] = {static_cast<CUdeviceptr>(ex), static_cast<CUdeviceptr>(ey), static_cast<CUdeviceptr>(ez)};
  const auto t0 = std::chrono::steady_clock::now();
  if (im.host.fft() == PoissonFft::Reproducible)
    im.solve_reproducible(static_cast<CUdeviceptr>(rho), out, node_stride);
  else
    im.solve_fast(static_cast<CUdeviceptr>(rho), out, node_stride);
  // The launches are ordered on the default stream and not waited for (what the caller launches or copies
  // next comes after them); the time waits for them.
  if (seconds) {
    im.gpu.synchronize();
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

void GpuPoissonSolver::solve(const double* rho, double* ex, double* ey, double* ez, double* seconds) {
  Impl& im = *m_impl;
  if (!rho || !ex || !ey || (im.T == 3 && !ez)) throw Error("GPU Poisson solver: solve() needs rho, ex, ey (and ez for Open3D)");
  const size_t nodes = static_cast<size_t>(im.layer_nodes * im.layers);
  if (!im.rho_buf) {
    im.rho_buf = im.gpu.zeros(nodes * sizeof(double));
    for (int c = 0; c < im.T; ++c) im.out_buf[c] = im.gpu.zeros(nodes * sizeof(double));
  }
  im.gpu.copy_to_device(im.rho_buf, rho, nodes * sizeof(double));
  solve_device(im.rho_buf, im.out_buf[0], im.out_buf[1], im.T == 3 ? im.out_buf[2] : 0, seconds);
  double* out[3] = {ex, ey, ez};
  for (int c = 0; c < im.T; ++c) im.gpu.copy_to_host(out[c], im.out_buf[c], nodes * sizeof(double));
}

}  // namespace ft
