// Open-boundary (free-space) Poisson solver of particle-in-cell space charge: charge density on a
// regular grid of nodes -> electric field at the nodes, by Hockney's method (convolution with the
// Green's function on the doubled grid, done with real FFTs) and the integrated Green's function.
//
// Field kernels. The field is convolved directly with integrated field kernels, not differenced
// from the potential: the density is taken constant over the cell around each node (the
// cloud-in-cell deposit's node charge over the cell volume), and the kernel of E_x at offset
// (i, j[, k]) cells is the exact integral of the point-charge field x / (2 pi eps0 r^2) (2D) or
// x / (4 pi eps0 r^3) (3D) over that cell, evaluated as corner differences of closed-form
// primitives. So no differencing error adds to the O(h^2) error of the cell representation, the
// fields at the edge nodes are as accurate as inside (no one-sided differences), and cells of any
// aspect ratio are exact. The price is one inverse transform per field component instead of one
// for the potential.
//
// Transforms (PoissonFft):
//   Fast          FFTW (r2c / c2r) on the doubled grid 2n per dimension.
//   Reproducible  fusetrack's radix-2 FFT (fft_butterfly of fusetrack/device/collective.h, twiddle
//                 tables computed once on the host) applied row by row and column by column on the
//                 doubled grid padded to powers of two, with the pair-packing steps of
//                 fusetrack/device/space_charge_grid.h, each 1D transform independent and summed in a
//                 fixed order: bitwise the same for any thread count, and the same steps written for
//                 the GPU (fma off) give the same bits.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace ft {

/// A regular grid of nodes: node k of dimension d at min[d] + k * spacing(d), spacing = (max-min)/(nodes-1).
struct PoissonGrid {
  int dims = 2;                      // 2 or 3 (x, y[, zeta])
  std::array<int, 3> nodes{};        // >= 2 each used dimension
  std::array<double, 3> min{}, max{};  // [m] first and last node
  double spacing(int d) const;       // [m]
  /// Nodes in all used dimensions (nx * ny [* nz]).
  size_t size() const;
};

/// Fast: FFTW (and cuFFT on the GPU, or the line transforms where faster: GpuPoissonSolver::preferred_fft);
/// Reproducible: one FFT source, bitwise the same on CPU and GPU (fma off).
enum class PoissonFft { Fast, Reproducible };

/// 2D; 2.5D = an independent 2D solve per zeta layer of a 3D grid; 3D.
enum class PoissonModel { Open2D, Open2p5D, Open3D };

class PoissonSolver {
 public:
  /// Throws ft::Error with a clear message on bad grids (dimension count not matching the model,
  /// fewer than 2 nodes, non-finite or empty extents, grids too large to address).
  PoissonSolver(const PoissonGrid& grid, PoissonModel model, PoissonFft fft);
  ~PoissonSolver();
  PoissonSolver(const PoissonSolver&) = delete;
  PoissonSolver& operator=(const PoissonSolver&) = delete;

  /// rho: charge density at the nodes, node index (iz*ny+iy)*nx+ix. Open3D: [C/m^3]. Open2D and
  /// Open2p5D: the transverse charge density [C/m^2] per metre of beam, i.e. [C/m^3], of a beam
  /// uniform along the third axis (a zeta layer's line density lambda(zeta) [C/m] times its
  /// normalised transverse profile [1/m^2]; with cloud-in-cell node charges q_node [C/m]:
  /// rho = q_node / (dx dy)), so the field is that of an infinitely long beam with this cross-section.
  /// Open3D is electrostatic in the grid's frame: for a relativistic bunch the caller uses the
  /// beam frame (zeta stretched by gamma) and transforms the field back.
  /// ex, ey, ez: the electric field at the nodes [V/m] (ez only for Open3D; may be null otherwise).
  /// Open boundaries (free space), Hockney's doubled grid with the integrated Green's function.
  /// Not thread-safe on one solver (it keeps its work buffers between solves); threads inside (OpenMP).
  void solve(const double* rho, double* ex, double* ey, double* ez);
  const PoissonGrid& grid() const;
  /// OpenMP threads of solve() (0: the OpenMP default). The Reproducible mode gives the same bits
  /// for any count.
  void set_threads(int threads);
  /// The OpenMP threads of solve().
  int threads() const;
  PoissonModel model() const { return m_model; }
  PoissonFft fft() const { return m_fft; }

  /// The transform lengths per dimension (x, y[, zeta]; 1 for unused or unpadded dimensions):
  /// the doubled grid, padded to powers of two in the Reproducible mode.
  std::array<int, 3> transform_lengths() const;

  /// The real-space kernel of field component `component` (0: E_x, 1: E_y, 2: E_z) at the node offset
  /// (i, j, k) in cells [V/m per C/m^3]: E_c(node) = sum over nodes' of kernel(node - node') rho(node').
  /// For tests and for GPU implementations that build their own spectra.
  double kernel(int component, int i, int j, int k) const;

  /// For GPU implementations of the same algorithm: the imaginary parts of the field kernels'
  /// spectra (the real parts vanish by symmetry) on the half x axis, H = M0/2 + 1 values per line,
  /// index (kz * M1 + ky) * H + kx, the normalisation 1 / (M0 M1 M2) included.
  const std::vector<double>& green_spectrum(int component) const;
  /// Reproducible mode: the twiddle table of dimension `dim` (cos, -sin(2 pi k / M) forward;
  /// cos, +sin inverse; k < M/2), as fft_butterfly reads it.
  const std::vector<double>& twiddles(int dim, bool inverse) const;

  struct Impl;  // the transforms (poisson.cpp)

 private:
  PoissonGrid m_grid;
  PoissonModel m_model;
  PoissonFft m_fft;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ft
