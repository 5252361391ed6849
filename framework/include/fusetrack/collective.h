// Collective elements on the host: the turn split at them (TurnProgram) and the bunch-wide
// solver of each one (CollectiveSolver): the element's host model, its response tables, the
// multi-turn wake memory and the CPU solve. The GPU backend uploads the same tables and runs the
// same steps from the device header fusetrack/device/collective.h.
//
// Solve methods (docs/pages/theory/impedance.md):
//   time domain       direct convolution with wake samples, summed in a fixed order;
//   frequency domain  zero-padded FFT: fma off, fusetrack's radix-2 FFT (one source, identical on
//                     CPU and GPU); fma on, FFTW on the CPU and cuFFT on the GPU.
#pragma once
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/device/collective.h"
#include "fusetrack/error.h"
#include "fusetrack/lattice.h"
#include "fusetrack/tracker.h"

namespace ft {

/// One turn: single-particle segments between collective elements. Segment k runs the kick of
/// collective element k-1 (k > 0), the elements [begin, end), then the deposit of collective
/// element k (k < number of collective elements); the last segment ends the turn.
struct TurnProgram {
  struct Segment {
    size_t begin = 0, end = 0;  // sequence indices of its single-particle elements
  };
  std::vector<size_t> collective;  // sequence indices of the collective elements, in order
  std::vector<Segment> segments;   // collective.size() + 1

  static TurnProgram build(const Lattice& lattice);
};

/// Where errors of the collective element at `sequence_index` point: the lattice file, the element's
/// name, type and index (for both kinds: CollectiveSolver and GridCollectiveSolver).
InputLocation collective_element_location(const Lattice& lattice, size_t sequence_index);

/// The bunch-wide solver of one collective element of the sequence.
class CollectiveSolver {
 public:
  /// Builds the element's host model (its create(); errors name the file, element and field)
  /// and the response tables. `macroparticles`: the number the bunch intensity is spread over.
  CollectiveSolver(const Lattice& lattice, size_t sequence_index, FmaMode fma, size_t macroparticles);
  ~CollectiveSolver();
  CollectiveSolver(const CollectiveSolver&) = delete;
  CollectiveSolver& operator=(const CollectiveSolver&) = delete;

  size_t sequence_index() const { return m_sequence_index; }
  const std::string& element_name() const { return m_name; }
  const ft_profile_grid& grid() const { return m_model.grid; }
  SliceGrid slice_grid() const;
  int n_slices() const { return m_model.grid.n_slices; }
  int method() const { return m_model.method; }
  FmaMode fma() const { return m_fma; }
  double dt() const { return m_dt; }  // slice width in time [s]
  double field_scale() const { return m_model.field_scale; }
  double inv_total() const { return m_inv_total; }  // lambda = count * inv_total
  const void* params() const { return m_params; }
  const ft_collective_desc& desc() const { return *m_desc; }

  // Response tables (also uploaded by the GPU backend).
  /// Time domain: W(k dt) for k = -(n-1) .. n-1 [V/C].
  const std::vector<double>& wake_kernel() const { return m_wake_kernel; }
  /// Frequency domain: FFT length N (a power of two >= 2 n_slices).
  int fft_length() const { return m_fft_length; }
  int fft_log2() const { return m_fft_log2; }
  /// Full spectrum Z(m df) / (N dt), m = 0..N-1 (conjugate-symmetric), interleaved re/im.
  const std::vector<double>& spectrum() const { return m_spectrum; }
  /// cos, -sin(2 pi k / N) for k < N/2, interleaved.
  const std::vector<double>& twiddles() const { return m_twiddles; }
  // Multi-turn memory of the element's resonant modes.
  int mode_count() const { return static_cast<int>(m_modes.size()); }
  /// Per mode m: exp(-s tau_r) (deposit side) and c exp(s tau_r) (field side), r in time order,
  /// interleaved complex, n_slices values each; and exp(s T0) per turn.
  const std::vector<double>& mode_deposit_table() const { return m_mode_deposit; }
  const std::vector<double>& mode_field_table() const { return m_mode_field; }
  const std::vector<double>& mode_turn_factor() const { return m_mode_turn; }
  /// Per mode: rho = e^{sT} / (1 - e^{sT}) for the FFT window T of the frequency method (the wraps
  /// of this turn's wake around the window, removed from the field), 0 for the time method.
  const std::vector<double>& mode_wrap_factor() const { return m_mode_wrap; }
  /// Memory amplitudes (interleaved complex per mode), updated by solve().
  std::vector<double>& mode_memory() { return m_memory; }

  /// One solve on the CPU: integer profile (zeta order) -> field on the slice centres (zeta
  /// order) [V]; updates the multi-turn memory.
  void solve(const uint64_t* counts, double* field);

  /// The line density (time order) of a profile: lambda_r = counts[n-1-r] * inv_total.
  void line_density(const uint64_t* counts, double* lambda_time_order) const;

 private:
  void solve_memory(const double* lambda, double* field_time_order);

  size_t m_sequence_index;
  std::string m_name;
  const void* m_params;
  const ft_collective_desc* m_desc;
  ft_collective_model m_model{};
  FmaMode m_fma;
  double m_dt = 0.0;
  double m_inv_total = 0.0;
  std::vector<double> m_wake_kernel;
  int m_fft_length = 0, m_fft_log2 = 0;
  std::vector<double> m_spectrum, m_twiddles;
  std::vector<ft_wake_mode> m_modes;
  std::vector<double> m_mode_deposit, m_mode_field, m_mode_turn, m_mode_wrap, m_memory;
  // Work buffers of the CPU solve.
  std::vector<double> m_lambda, m_work, m_conv;
  struct Fftw;
  std::unique_ptr<Fftw> m_fftw;  // fma on, frequency domain
};

}  // namespace ft
