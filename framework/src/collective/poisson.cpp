// The open-boundary Poisson solver (fusetrack/poisson.h): integrated field kernels on the doubled
// grid, convolved through FFTW (Fast) or fusetrack's radix-2 line transforms (Reproducible).
#include "fusetrack/poisson.h"

#include <fftw3.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>

#include <omp.h>

#include "../core/fftw_planner.hpp"
#include "fusetrack/device/space_charge_grid.h"
#include "fusetrack/error.h"
#include "core/math_helpers.hpp"

namespace ft {

namespace {

constexpr double kEpsilon0 = 8.8541878128e-12;  // [F/m], CODATA 2018


/// a * log(b), 0 when a == 0 (the limits of the primitives at the singular lines).
double x_log(double a, double b) { return a == 0.0 ? 0.0 : a * std::log(b); }

/// a * atan(b / c), 0 when a == 0 (then c == 0 too at the singular lines).
double x_atan(double a, double b, double c) { return a == 0.0 ? 0.0 : a * std::atan(b / c); }

/// log(c + r) for r = sqrt(a^2 + b^2 + c^2) without cancellation for c < 0.
double log_c_plus_r(double a2b2, double c, double r) { return c >= 0.0 ? std::log(c + r) : std::log(a2b2 / (r - c)); }

/// 2D: a primitive of x / (x^2 + y^2) in x and y (the linear term -y dropped: it cancels in the corner
/// differences of a cell): y log(x^2 + y^2) / 2 + x atan(y / x).
double field_primitive_2d(double x, double y) {
  const double r2 = x * x + y * y;
  if (r2 == 0.0) return 0.0;
  return 0.5 * x_log(y, r2) + x_atan(x, y, x);
}

/// 3D: a primitive of a / r^3 in a, b and c (r^2 = a^2 + b^2 + c^2): -P(a, b, c) with
/// P = b log(c + r) + c log(b + r) - a atan(b c / (a r)) the primitive of 1 / r in b and c.
double field_primitive_3d(double a, double b, double c) {
  const double r = std::sqrt(a * a + b * b + c * c);
  if (r == 0.0) return 0.0;
  double p = 0.0;
  if (b != 0.0) p += b * log_c_plus_r(a * a + b * b, c, r);
  if (c != 0.0) p += c * log_c_plus_r(a * a + c * c, b, r);
  if (a != 0.0) p -= a * std::atan(b * c / (a * r));
  return -p;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

int next_power_of_two(int n) {
  int m = 1;
  while (m < n) m <<= 1;
  return m;
}

}  // namespace

double PoissonGrid::spacing(int d) const { return (max[d] - min[d]) / (nodes[d] - 1); }

size_t PoissonGrid::size() const {
  size_t s = 1;
  for (int d = 0; d < dims; ++d) s *= static_cast<size_t>(nodes[d]);
  return s;
}

// The transforms. T transformed dimensions (2: Open2D and Open2p5D, 3: Open3D), `layers` independent
// solves (the zeta layers of Open2p5D, else 1). Spectra are kept on the half x axis: H = M0/2 + 1
// complex values per x line, index (kz * M1 + ky) * H + kx (FFTW's r2c layout).
struct PoissonSolver::Impl {
  int threads = 1;  // OpenMP threads of a solve
  int T = 2;
  int layers = 1;
  int n[3] = {1, 1, 1};  // nodes per transformed dimension
  int M[3] = {1, 1, 1};  // transform lengths
  int H = 1;
  size_t spectrum_size = 0;  // complex values
  size_t real_size = 0;      // M0 * M1 * M2
  size_t layer_nodes = 0;    // n0 * n1 * n2
  // The imaginary parts of the kernels' spectra (the kernels are odd in their own axis and even in
  // the others, so their spectra are purely imaginary), the 1/(M0 M1 M2) normalisation included.
  std::vector<double> green[3];
  // Reproducible: twiddle tables per dimension, forward (cos, -sin) and inverse (cos, +sin).
  std::vector<double> tw_fwd[3], tw_inv[3];
  // Fast: FFTW plans on the full doubled grid, executed on per-thread buffers (new-array execute).
  fftw_plan r2c = nullptr, c2r = nullptr;
  struct FftwBuffers;
  std::vector<std::unique_ptr<FftwBuffers>> fftw_buffers;  // per layer thread, kept between solves
  std::vector<std::vector<double>> rep_buffers;            // per layer thread: spectrum and product

  ~Impl() {
    fftw_buffers.clear();
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    if (r2c) fftw_destroy_plan(r2c);
    if (c2r) fftw_destroy_plan(c2r);
  }

  struct FftwBuffers {  // fftw_alloc'ed (the alignment of the plans' arrays)
    double* real = nullptr;
    fftw_complex* spectrum = nullptr;
    fftw_complex* product = nullptr;
    FftwBuffers(size_t real_size, size_t spectrum_size) {
      real = fftw_alloc_real(real_size);
      spectrum = fftw_alloc_complex(spectrum_size);
      product = fftw_alloc_complex(spectrum_size);
      if (!real || !spectrum || !product) {
        release();
        throw Error("Poisson solver: out of memory for the FFT buffers");
      }
    }
    ~FftwBuffers() { release(); }
    void release() {
      if (real) fftw_free(real);
      if (spectrum) fftw_free(spectrum);
      if (product) fftw_free(product);
    }
    FftwBuffers(const FftwBuffers&) = delete;
    FftwBuffers& operator=(const FftwBuffers&) = delete;
  };

  int planned_threads = 0;  // the threads of the FFTW plans (0: none made)

  /// The FFTW plans of the doubled grid. One layer (2D, 3D): plans on `plan_threads` threads where FFTW's
  /// OpenMP library is linked (FUSETRACK_HAVE_FFTW_OMP); several layers (2.5D): one thread each, the
  /// layers spread over the threads instead.
  void make_fftw_plans(int plan_threads) {
    FftwBuffers b(real_size, spectrum_size);
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    if (r2c) fftw_destroy_plan(r2c);
    if (c2r) fftw_destroy_plan(c2r);
    r2c = c2r = nullptr;
#if defined(FUSETRACK_HAVE_FFTW_OMP)
    static const bool threads_ready = fftw_init_threads() != 0;
    planned_threads = threads_ready && layers == 1 ? std::max(1, plan_threads) : 1;
    fftw_plan_with_nthreads(planned_threads);
#else
    (void)plan_threads;
    planned_threads = 1;
#endif
    if (T == 2) {
      r2c = fftw_plan_dft_r2c_2d(M[1], M[0], b.real, b.spectrum, FFTW_ESTIMATE);
      c2r = fftw_plan_dft_c2r_2d(M[1], M[0], b.product, b.real, FFTW_ESTIMATE);
    } else {
      r2c = fftw_plan_dft_r2c_3d(M[2], M[1], M[0], b.real, b.spectrum, FFTW_ESTIMATE);
      c2r = fftw_plan_dft_c2r_3d(M[2], M[1], M[0], b.product, b.real, FFTW_ESTIMATE);
    }
#if defined(FUSETRACK_HAVE_FFTW_OMP)
    fftw_plan_with_nthreads(1);  // the library's other plans stay on one thread
#endif
    if (!r2c || !c2r) throw Error("Poisson solver: FFTW could not plan the transforms of the doubled grid");
  }

  void make_twiddles() {
    for (int d = 0; d < T; ++d) {
      const int m = M[d];
      tw_fwd[d].assign(static_cast<size_t>(std::max(m, 2)), 0.0);
      tw_inv[d].assign(static_cast<size_t>(std::max(m, 2)), 0.0);
      for (int k = 0; k < m / 2; ++k) {
        const double phase = 2.0 * kPi * k / m;
        tw_fwd[d][2 * k] = std::cos(phase);
        tw_fwd[d][2 * k + 1] = -std::sin(phase);
        tw_inv[d][2 * k] = std::cos(phase);
        tw_inv[d][2 * k + 1] = std::sin(phase);
      }
    }
  }

  // ---- Reproducible transforms: the line steps of space_charge_grid.h, one thread per line ----

  /// The line shape of a real block with extents e[d] (the nodes, or M for a kernel).
  PoissonLines lines_of(const int e[3]) const {
    PoissonLines p{};
    for (int d = 0; d < 3; ++d) {
      p.n[d] = d < T ? e[d] : 1;
      p.m[d] = M[d];
      p.log2m[d] = ceil_log2(M[d]);
    }
    p.h = H;
    return p;
  }

  /// Columns per batch of the strided y and zeta lines on the CPU (a row of them spans whole cache lines).
  static constexpr int kBatch = 8;
  long y_chunks() const { return (H + kBatch - 1) / kBatch; }

  /// poisson_line (space_charge_grid.h) for `count` <= kBatch adjacent columns col + 2 c: per column
  /// the same arithmetic (the same butterflies in the same order, so the same bits as one line at a
  /// time and as the GPU), the strided loads and stores done a row of columns at a time.
  static void lines_batched(double* col, int count, long long stride, int m, int log2m, int load, int store,
                            const double* tw, double* z) {
    const size_t line = 2 * static_cast<size_t>(m);
    if (load < m) std::fill(z, z + line * static_cast<size_t>(count), 0.0);
    for (int j = 0; j < load; ++j) {
      const int at = poisson_bit_reverse(j, log2m);
      const double* row = col + 2 * j * stride;
      for (int c = 0; c < count; ++c) {
        z[line * c + 2 * at] = row[2 * c];
        z[line * c + 2 * at + 1] = row[2 * c + 1];
      }
    }
    for (int c = 0; c < count; ++c) poisson_block_stages(z + line * c, tw, m, 0, 1);
    for (int j = 0; j < store; ++j) {
      double* row = col + 2 * j * stride;
      for (int c = 0; c < count; ++c) {
        row[2 * c] = z[line * c + 2 * j];
        row[2 * c + 1] = z[line * c + 2 * j + 1];
      }
    }
  }

  /// Forward transform of a real block `in` with extents e[d] (layout (iz * e1 + iy) * e0 + ix,
  /// zero beyond the extents, e[d] <= M[d]) into the half spectrum `out` (spectrum_size complex).
  /// `parallel`: spread the lines over OpenMP threads (false inside a parallel loop over layers).
  void forward_reproducible(const double* in, const int e[3], double* out, bool parallel) const {
    const PoissonLines p = lines_of(e);
    const long pairs = static_cast<long>(poisson_row_pairs(p));
#pragma omp parallel if (parallel) num_threads(threads)
    {
      std::vector<double> z(2 * static_cast<size_t>(kBatch) * static_cast<size_t>(std::max({M[0], M[1], M[2]})));
#pragma omp for schedule(static)
      for (long q = 0; q < pairs; ++q) poisson_forward_x(p, q, in, out, tw_fwd[0].data(), z.data(), 0, 1);
      const long ychunks = static_cast<long>(y_chunks()) * p.n[2];
#pragma omp for schedule(static)
      for (long q = 0; q < ychunks; ++q) {
        const long iz = q / y_chunks(), kx = (q % y_chunks()) * kBatch;
        lines_batched(out + 2 * poisson_y_line(p, iz * H + kx), static_cast<int>(std::min<long>(kBatch, H - kx)), H, M[1],
                      p.log2m[1], p.n[1], M[1], tw_fwd[1].data(), z.data());
      }
      if (T == 3) {
        const long zlines = static_cast<long>(H) * M[1];
#pragma omp for schedule(static)
        for (long l = 0; l < zlines; l += kBatch)
          lines_batched(out + 2 * l, static_cast<int>(std::min<long>(kBatch, zlines - l)), static_cast<long long>(H) * M[1],
                        M[2], p.log2m[2], p.n[2], M[2], tw_fwd[2].data(), z.data());
      }
    }
  }

  /// Inverse of the half spectrum `spec` (destroyed), the real result on the first n[d] nodes of
  /// each dimension into `out` (layout (iz * n1 + iy) * n0 + ix), unnormalised.
  void inverse_reproducible(double* spec, double* out, bool parallel) const {
    const PoissonLines p = lines_of(n);
    const long pairs = static_cast<long>(poisson_row_pairs(p));
#pragma omp parallel if (parallel) num_threads(threads)
    {
      std::vector<double> z(2 * static_cast<size_t>(kBatch) * static_cast<size_t>(std::max({M[0], M[1], M[2]})));
      if (T == 3) {
        const long zlines = static_cast<long>(H) * M[1];
#pragma omp for schedule(static)
        for (long l = 0; l < zlines; l += kBatch)
          lines_batched(spec + 2 * l, static_cast<int>(std::min<long>(kBatch, zlines - l)), static_cast<long long>(H) * M[1],
                        M[2], p.log2m[2], M[2], p.n[2], tw_inv[2].data(), z.data());
      }
      const long ychunks = static_cast<long>(y_chunks()) * p.n[2];
#pragma omp for schedule(static)
      for (long q = 0; q < ychunks; ++q) {
        const long iz = q / y_chunks(), kx = (q % y_chunks()) * kBatch;
        lines_batched(spec + 2 * poisson_y_line(p, iz * H + kx), static_cast<int>(std::min<long>(kBatch, H - kx)), H, M[1],
                      p.log2m[1], M[1], p.n[1], tw_inv[1].data(), z.data());
      }
#pragma omp for schedule(static)
      for (long q = 0; q < pairs; ++q) poisson_inverse_x(p, q, spec, out, tw_inv[0].data(), z.data(), 0, 1);
    }
  }

  // ---- Kernels ----

  /// The real-space field kernel of component c at offset (i, j, k) cells (|offsets| < n), in V/m per
  /// C/m^3: the cell integral of the point-charge field, corner differences of the primitives.
  double kernel_at(const double h[3], int c, int i, int j, int k) const {
    const int off[3] = {i, j, k};
    if (T == 2) {
      // Component c along axis c; the other axis o.
      const int o = 1 - c;
      const double u0 = (off[c] - 0.5) * h[c], u1 = (off[c] + 0.5) * h[c];
      const double v0 = (off[o] - 0.5) * h[o], v1 = (off[o] + 0.5) * h[o];
      const double s = field_primitive_2d(u1, v1) - field_primitive_2d(u0, v1) - field_primitive_2d(u1, v0) +
                       field_primitive_2d(u0, v0);
      return s / (2.0 * kPi * kEpsilon0);
    }
    const int o1 = (c + 1) % 3, o2 = (c + 2) % 3;
    const double u[2] = {(off[c] - 0.5) * h[c], (off[c] + 0.5) * h[c]};
    const double v[2] = {(off[o1] - 0.5) * h[o1], (off[o1] + 0.5) * h[o1]};
    const double w[2] = {(off[o2] - 0.5) * h[o2], (off[o2] + 0.5) * h[o2]};
    double s = 0.0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        for (int d = 0; d < 2; ++d) {
          const double sign = ((a + b + d) % 2 == 1) ? 1.0 : -1.0;  // + at the upper corner (1,1,1)
          s += sign * field_primitive_3d(u[a], v[b], w[d]);
        }
    return s / (4.0 * kPi * kEpsilon0);
  }

  /// The kernel of component c on the periodic transform grid (offsets |o| < n, zero elsewhere), then
  /// its spectrum's imaginary part. The primitive is evaluated once per cell corner of the
  /// non-negative offsets; the other offsets are mirrored (the kernel is odd along its own axis, even
  /// along the others), so the kernel keeps its exact symmetry on the grid and its spectrum is
  /// purely imaginary.
  void make_green(const double h[3], int c, bool reproducible) {
    const int c0 = n[0] + 1, c1 = n[1] + 1, c2 = T == 3 ? n[2] + 1 : 1;
    std::vector<double> corner(static_cast<size_t>(c0) * c1 * c2);
#pragma omp parallel for schedule(static)
    for (long q = 0; q < static_cast<long>(corner.size()); ++q) {
      const int i = static_cast<int>(q % c0), j = static_cast<int>((q / c0) % c1), k = static_cast<int>(q / (static_cast<long>(c0) * c1));
      const double p[3] = {(i - 0.5) * h[0], (j - 0.5) * h[1], (k - 0.5) * h[2]};
      if (T == 2)
        corner[q] = c == 0 ? field_primitive_2d(p[0], p[1]) : field_primitive_2d(p[1], p[0]);
      else
        corner[q] = field_primitive_3d(p[c], p[(c + 1) % 3], p[(c + 2) % 3]);
    }
    const double scale = T == 2 ? 1.0 / (2.0 * kPi * kEpsilon0) : 1.0 / (4.0 * kPi * kEpsilon0);
    auto at = [&](int i, int j, int k) { return corner[(static_cast<size_t>(k) * c1 + j) * c0 + i]; };
    std::vector<double> kernel(real_size, 0.0);
    const int nz = T == 3 ? n[2] : 1;
#pragma omp parallel for schedule(static)
    for (int oz = 0; oz < nz; ++oz)
      for (int oy = 0; oy < n[1]; ++oy)
        for (int ox = 0; ox < n[0]; ++ox) {
          double s;
          if (T == 2) {
            s = at(ox + 1, oy + 1, 0) - at(ox, oy + 1, 0) - at(ox + 1, oy, 0) + at(ox, oy, 0);
          } else {
            s = 0.0;
            for (int a = 0; a < 2; ++a)
              for (int b = 0; b < 2; ++b)
                for (int d = 0; d < 2; ++d) {
                  const double v = at(ox + a, oy + b, oz + d);
                  s += ((a + b + d) % 2 == 1) ? v : -v;  // + at the upper corner (1, 1, 1)
                }
          }
          s *= scale;
          // The mirror images: index m - o for o > 0, the sign flipped along the component's axis.
          const int zs = (T == 3 && oz > 0) ? 2 : 1, ys = oy > 0 ? 2 : 1, xs = ox > 0 ? 2 : 1;
          for (int mz = 0; mz < zs; ++mz)
            for (int my = 0; my < ys; ++my)
              for (int mx = 0; mx < xs; ++mx) {
                const int mirrored[3] = {mx, my, mz};
                const int kx = mx ? M[0] - ox : ox, ky = my ? M[1] - oy : oy, kz = mz ? M[2] - oz : oz;
                const double v = mirrored[c] ? -s : s;
                kernel[(static_cast<size_t>(kz) * M[1] + ky) * M[0] + kx] = v;
              }
        }
    const double norm = 1.0 / static_cast<double>(real_size);  // a power of two when reproducible
    std::vector<double> spec(2 * spectrum_size);
    if (reproducible) {
      forward_reproducible(kernel.data(), M, spec.data(), true);
    } else {
      FftwBuffers b(real_size, spectrum_size);
      std::copy(kernel.begin(), kernel.end(), b.real);
      fftw_execute_dft_r2c(r2c, b.real, b.spectrum);
      for (size_t s = 0; s < spectrum_size; ++s) {
        spec[2 * s] = b.spectrum[s][0];
        spec[2 * s + 1] = b.spectrum[s][1];
      }
    }
    green[c].resize(spectrum_size);
    for (size_t s = 0; s < spectrum_size; ++s) green[c][s] = spec[2 * s + 1] * norm;
  }
};

PoissonSolver::PoissonSolver(const PoissonGrid& grid, PoissonModel model, PoissonFft fft)
    : m_grid(grid), m_model(model), m_fft(fft), m_impl(std::make_unique<Impl>()) {
  const char* model_name = model == PoissonModel::Open2D ? "Open2D" : (model == PoissonModel::Open2p5D ? "Open2p5D" : "Open3D");
  const int want_dims = model == PoissonModel::Open2D ? 2 : 3;
  if (grid.dims != want_dims)
    throw Error(fmt::format("Poisson solver ({}): the grid has {} dimensions, the model needs {} ({})", model_name,
                            grid.dims, want_dims, want_dims == 2 ? "x, y" : "x, y, zeta"));
  const char* axis[3] = {"x", "y", "zeta"};
  // Nodes beyond 2^20 per axis or 2^31 transform points would overflow the index arithmetic.
  constexpr int kMaxNodes = 1 << 20;
  for (int d = 0; d < grid.dims; ++d) {
    if (grid.nodes[d] < 2 || grid.nodes[d] > kMaxNodes)
      throw Error(fmt::format("Poisson solver ({}): {} nodes along {}; expected 2 to {}", model_name, grid.nodes[d],
                              axis[d], kMaxNodes));
    if (!std::isfinite(grid.min[d]) || !std::isfinite(grid.max[d]) || !(grid.max[d] > grid.min[d]))
      throw Error(fmt::format("Poisson solver ({}): the {} extent [{}, {}] m is not a finite interval with max > min",
                              model_name, axis[d], grid.min[d], grid.max[d]));
  }
  Impl& im = *m_impl;
  im.threads = omp_get_max_threads();
  im.T = model == PoissonModel::Open3D ? 3 : 2;
  im.layers = model == PoissonModel::Open2p5D ? grid.nodes[2] : 1;
  for (int d = 0; d < im.T; ++d) {
    im.n[d] = grid.nodes[d];
    im.M[d] = fft == PoissonFft::Reproducible ? next_power_of_two(2 * grid.nodes[d] - 1) : 2 * grid.nodes[d];
  }
  double points = 1.0;
  for (int d = 0; d < im.T; ++d) points *= im.M[d];
  if (points > static_cast<double>(std::numeric_limits<int>::max()))
    throw Error(fmt::format("Poisson solver ({}): the doubled grid has {:.3g} points, more than 2^31", model_name, points));
  im.H = im.M[0] / 2 + 1;
  im.real_size = static_cast<size_t>(im.M[0]) * im.M[1] * im.M[2];
  im.spectrum_size = static_cast<size_t>(im.H) * im.M[1] * im.M[2];
  im.layer_nodes = static_cast<size_t>(im.n[0]) * im.n[1] * im.n[2];
  const double h[3] = {grid.spacing(0), grid.spacing(1), grid.dims == 3 ? grid.spacing(2) : 1.0};
  const bool reproducible = fft == PoissonFft::Reproducible;
  if (reproducible) {
    for (int d = 0; d < im.T; ++d)
      if (!is_power_of_two(im.M[d])) throw Error("Poisson solver: internal error, transform length not a power of two");
    im.make_twiddles();
  } else {
    im.make_fftw_plans(im.threads);
  }
  for (int c = 0; c < im.T; ++c) im.make_green(h, c, reproducible);
}

PoissonSolver::~PoissonSolver() = default;

void PoissonSolver::set_threads(int threads) {
  m_impl->threads = threads > 0 ? threads : omp_get_max_threads();
}

int PoissonSolver::threads() const { return m_impl->threads; }

const PoissonGrid& PoissonSolver::grid() const { return m_grid; }

std::array<int, 3> PoissonSolver::transform_lengths() const {
  return {m_impl->M[0], m_impl->M[1], m_impl->M[2]};
}

double PoissonSolver::kernel(int component, int i, int j, int k) const {
  const Impl& im = *m_impl;
  if (component < 0 || component >= im.T) throw Error(fmt::format("Poisson solver: no field component {}", component));
  const double h[3] = {m_grid.spacing(0), m_grid.spacing(1), m_grid.dims == 3 ? m_grid.spacing(2) : 1.0};
  return im.kernel_at(h, component, i, j, im.T == 3 ? k : 0);
}

void PoissonSolver::solve(const double* rho, double* ex, double* ey, double* ez) {
  Impl& im = *m_impl;
  if (!rho || !ex || !ey || (im.T == 3 && !ez))
    throw Error("Poisson solver: solve() needs rho, ex, ey (and ez for Open3D)");
  double* out[3] = {ex, ey, ez};
  const bool many = im.layers > 1;
  const int nt = many ? std::max(1, std::min(im.threads, im.layers)) : 1;  // buffer sets (one per layer thread)
  const int e[3] = {im.n[0], im.n[1], im.n[2]};
  const long count = static_cast<long>(im.spectrum_size);
  if (m_fft == PoissonFft::Reproducible) {
    // Work buffers kept between solves (allocated here, outside the parallel regions).
    if (static_cast<int>(im.rep_buffers.size()) < nt) im.rep_buffers.resize(static_cast<size_t>(nt));
    for (int t = 0; t < nt; ++t) im.rep_buffers[static_cast<size_t>(t)].resize(4 * im.spectrum_size);
#pragma omp parallel if (many) num_threads(nt)
    {
      double* spec = im.rep_buffers[static_cast<size_t>(omp_get_thread_num())].data();
      double* work = spec + 2 * im.spectrum_size;
#pragma omp for schedule(static)
      for (int layer = 0; layer < im.layers; ++layer) {
        const size_t base = static_cast<size_t>(layer) * im.layer_nodes;
        im.forward_reproducible(rho + base, e, spec, !many);
        for (int c = 0; c < im.T; ++c) {
          const double* g = im.green[c].data();
#pragma omp parallel for schedule(static) if (!many) num_threads(im.threads)
          for (long s = 0; s < count; ++s)
            poisson_imaginary_multiply(spec[2 * s], spec[2 * s + 1], g[s], &work[2 * s], &work[2 * s + 1]);
          im.inverse_reproducible(work, out[c] + base, !many);
        }
      }
    }
    return;
  }
  // Fast: FFTW on the full doubled grid (new-array execution of the shared plans, thread-safe); one
  // layer's plans follow set_threads.
#if defined(FUSETRACK_HAVE_FFTW_OMP)
  if (!many && im.planned_threads != std::max(1, im.threads)) im.make_fftw_plans(im.threads);
#endif
  if (static_cast<int>(im.fftw_buffers.size()) < nt) im.fftw_buffers.resize(static_cast<size_t>(nt));
  for (int t = 0; t < nt; ++t)
    if (!im.fftw_buffers[static_cast<size_t>(t)])
      im.fftw_buffers[static_cast<size_t>(t)] = std::make_unique<Impl::FftwBuffers>(im.real_size, im.spectrum_size);
  const int n0 = im.n[0], n1 = im.n[1], n2 = im.T == 3 ? im.n[2] : 1;
  const int M0 = im.M[0], M1 = im.M[1];
  const int rows = n1 * n2;
#pragma omp parallel if (many) num_threads(nt)
  {
    Impl::FftwBuffers& b = *im.fftw_buffers[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
    for (int layer = 0; layer < im.layers; ++layer) {
      const size_t base = static_cast<size_t>(layer) * im.layer_nodes;
      std::fill(b.real, b.real + im.real_size, 0.0);
#pragma omp parallel for schedule(static) if (!many) num_threads(im.threads)
      for (int r = 0; r < rows; ++r) {
        const int iy = r % n1, iz = r / n1;
        const double* from = rho + base + static_cast<size_t>(r) * n0;
        std::copy(from, from + n0, b.real + (static_cast<size_t>(iz) * M1 + iy) * M0);
      }
      fftw_execute_dft_r2c(im.r2c, b.real, b.spectrum);
      for (int c = 0; c < im.T; ++c) {
        const double* g = im.green[c].data();
        fftw_complex* x = b.spectrum;
        fftw_complex* y = b.product;
#pragma omp parallel for schedule(static) if (!many) num_threads(im.threads)
        for (long q = 0; q < count; ++q) poisson_imaginary_multiply(x[q][0], x[q][1], g[q], &y[q][0], &y[q][1]);
        fftw_execute_dft_c2r(im.c2r, b.product, b.real);
        double* o = out[c] + base;
#pragma omp parallel for schedule(static) if (!many) num_threads(im.threads)
        for (int r = 0; r < rows; ++r) {
          const int iy = r % n1, iz = r / n1;
          const double* from = b.real + (static_cast<size_t>(iz) * M1 + iy) * M0;
          std::copy(from, from + n0, o + static_cast<size_t>(r) * n0);
        }
      }
    }
  }
}

const std::vector<double>& PoissonSolver::green_spectrum(int component) const {
  if (component < 0 || component >= m_impl->T)
    throw Error(fmt::format("Poisson solver: no field component {}", component));
  return m_impl->green[component];
}

const std::vector<double>& PoissonSolver::twiddles(int dim, bool inverse) const {
  if (m_fft != PoissonFft::Reproducible || dim < 0 || dim >= m_impl->T)
    throw Error(fmt::format("Poisson solver: no twiddle table for dimension {} (reproducible mode only)", dim));
  return inverse ? m_impl->tw_inv[dim] : m_impl->tw_fwd[dim];
}

}  // namespace ft
