// Wake functions and impedances for transverse (and longitudinal) collective effects: the physics
// library of the transverse instabilities (head-tail, coupled-bunch). The wake elements of the turn
// (TransverseWake, TransverseDamper: fusetrack/slice_wakes.h) are built on it.
//
// Conventions (the same as Xsuite's xwakes and the HEADTAIL/PyHEADTAIL wake tables):
// - t >= 0 is the delay of the witness behind the source [s]; every wake is causal, W(t < 0) = 0.
// - W_long [V/C]: the existing longitudinal convention (impedance_model.hpp): the witness gains the
//   energy q0 V with V = -sum_sources Q_src W_long(t) (Q_src the source charge [C]);
//   Z_long(f) = integral W_long(t) e^{-2 pi i f t} dt [Ohm].
// - W_dip [V/C/m]: a source displaced by x_src deflects the witness by
//       Delta px = q0 Q_src W_dip(t) x_src / (beta0 p0c)   (p0c [eV], Q_src [C], px = p_x / p0),
//   so W_dip > 0 pushes the witness towards the source's side; a resonator's and the resistive
//   wall's dipolar wakes are > 0 just behind the source (the sign of the tables of HEADTAIL,
//   PyHEADTAIL and Xsuite; Chao's book uses the opposite sign, W_1 < 0 just behind the source, with the
//   witness at z = -c t).
// - W_quad [V/C/m]: Delta px = q0 Q_src W_quad(t) x_witness / (beta0 p0c) (detuning by the
//   witness's own offset).
// - Z_perp(f) = i integral W_perp(t) e^{-2 pi i f t} dt [Ohm/m]: Re Z_perp(f) > 0 for f > 0 and
//   odd in f, Im Z_perp even (a resonator: Z_perp(f_r) = R_perp).
// - Components: longitudinal, dipolar_x, dipolar_y, quadrupolar_x, quadrupolar_y. An analytic source
//   carries one factor per component (Yokoya factors: a round chamber 0, 1, 1, 0, 0 with the
//   longitudinal one off or on; a flat chamber between two plates dipolar pi^2/24, pi^2/12,
//   quadrupolar -pi^2/24, +pi^2/24; K. Yokoya, Part. Accel. 41 (1993) 221).
#pragma once
#include <array>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ft::wakes {

using Complex = std::complex<double>;

enum class Component : int { longitudinal = 0, dipolar_x = 1, dipolar_y = 2, quadrupolar_x = 3, quadrupolar_y = 4 };
constexpr int kComponents = 5;
/// The bunch moment each component convolves: 0 the charge Q (longitudinal, quadrupolar), 1 Q x, 2 Q y.
inline constexpr int kComponentMoment[kComponents] = {0, 1, 2, 0, 0};
/// "longitudinal", "dipolar_x", ...
const char* component_name(Component c);
inline bool is_transverse(Component c) { return c != Component::longitudinal; }

/// Factor of each component (index = int(Component)).
struct ComponentFactors {
  std::array<double, kComponents> value{0.0, 1.0, 1.0, 0.0, 0.0};
  double operator[](Component c) const { return value[static_cast<int>(c)]; }
  static ComponentFactors round_chamber(bool longitudinal = false);  // 0|1, 1, 1, 0, 0
  static ComponentFactors flat_chamber(bool longitudinal = false);   // 0|1, pi^2/24, pi^2/12, -pi^2/24, pi^2/24
};

/// One wake source: W(t) and Z(f) per component.
class WakeSource {
 public:
  virtual ~WakeSource() = default;
  /// W(t) [V/C or V/C/m] for t > 0; 0 for t < 0; at t == 0 the half value of a jump (the beam-loading
  /// theorem's self-field), the limit from t > 0 for a continuous wake (infinite for the resistive wall).
  virtual double wake(Component c, double t) const = 0;
  /// Z(f) [Ohm or Ohm/m] for any real f (Z(-f) = conj Z(f) longitudinally, -conj Z(f) transversely).
  virtual Complex impedance(Component c, double f) const = 0;
  /// The kernel of a sliced convolution at the delay t with slices of width dt: by default the point
  /// sample wake(c, t) (half value at t = 0). Singular wakes (resistive wall) return the wake averaged
  /// with the linear-interpolation (hat) kernel, integral_{-1}^{1} (1 - |u|) W(t + u dt) du.
  virtual double kernel(Component c, double t, double dt) const { return (void)dt, wake(c, t); }
  /// Whether the component is non-zero.
  virtual bool has(Component c) const = 0;
};

/// Resonator (xwakes ComponentResonator): longitudinal Z = R / (1 + i Q (f/f_r - f_r/f)),
/// W = 2 alpha R e^{-alpha t} [cos(wb t) - (alpha/wb) sin(wb t)], W(0) = alpha R (half of the jump);
/// transverse Z_perp = (f_r / f) R_perp / (1 + i Q (f/f_r - f_r/f)),
/// W_perp = (omega_r^2 R_perp / (Q wb)) e^{-alpha t} sin(wb t) (continuous, W_perp(0) = 0), alpha = omega_r / 2Q,
/// wb = sqrt(omega_r^2 - alpha^2) (Q < 1/2: sinh, Q = 1/2: the limit). Chao 1993, ch. 2 (resonator model), in the
/// conjugate convention. `r`: R [Ohm] for the longitudinal component, R_perp [Ohm/m] for the transverse
/// ones, times each component's factor (as xwakes' WakeResonator(r=..., kind={...})).
class Resonator : public WakeSource {
 public:
  Resonator(double r, double f_r, double q, ComponentFactors factors = {});
  double wake(Component c, double t) const override;
  Complex impedance(Component c, double f) const override;
  bool has(Component c) const override { return m_factors[c] != 0.0; }
  double alpha() const { return m_alpha; }
  /// W(t > 0) = sum Re(c e^{s t}) over the returned modes (c [V/C or V/C/m], s [1/s]): one complex mode for
  /// Q > 1/2, two real ones for Q < 1/2, none at critical damping (Q = 1/2) or for an absent component.
  std::vector<std::pair<Complex, Complex>> modes(Component c) const;

 private:
  double m_r, m_f_r, m_q;
  ComponentFactors m_factors;
  double m_alpha, m_omega2;  // [1/s], omega_r^2 - alpha^2 [1/s^2]
};

/// Resistive wall of a round pipe, the classic thick-wall formula (wall thicker than the skin depth,
/// skin depth << wall thickness << b, and c t >> the characteristic distance s0 = (2 b^2 / (Z0 sigma))^(1/3)
/// of the short-range wake; Chao 1993, ch. 2 (the resistive wall, there in Gaussian units), here in SI as
/// xwakes ComponentClassicThickWall, whose formulas these equal:
///   Z_long(f) = (1 + i sgn f) L / (2 pi b sigma delta),  delta = sqrt(2 / (mu0 sigma |omega|)),
///   Z_perp(f) = (c / (pi b^3 omega)) (1 + i sgn f) L / (sigma delta)         (= 2 c Z_long / (b^2 omega)),
///   W_perp(t) = (L / (pi b^3)) sqrt(c Z0 / (pi sigma)) / sqrt(t)            [V/C/m],
///   W_long(t) = -(L / (4 pi b)) sqrt(Z0 / (pi sigma c)) / t^(3/2)           [V/C], t > 0,
/// b [m] the pipe radius, L [m] the length, sigma [S/m] the conductivity, Z0 = mu0 c. The factors scale
/// each component (flat chamber: ComponentFactors::flat_chamber()); the longitudinal one is off unless its
/// factor is set. Both wakes are singular at t = 0: kernel() returns the hat-kernel average, in closed form
/// (W_long as the second derivative, in the sense of distributions, of 4 A sqrt(t) -- its integral is Z(0) = 0).
class ResistiveWall : public WakeSource {
 public:
  ResistiveWall(double radius, double length, double conductivity, ComponentFactors factors = {});
  double wake(Component c, double t) const override;
  Complex impedance(Component c, double f) const override;
  double kernel(Component c, double t, double dt) const override;
  bool has(Component c) const override { return m_factors[c] != 0.0; }

 private:
  double m_b, m_length, m_sigma;
  ComponentFactors m_factors;
  double m_a_perp, m_a_long;  // W_perp = a_perp / sqrt(t), W_long = -a_long / t^1.5
};

/// A tabulated wake: W linear between the rows, 0 for t < t_0 and beyond the last row; at t = t_0
/// (usually 0) the half value W(t_0) / 2 (a jump from 0, as the longitudinal WakeTable). Components the
/// table lacks are 0. Z(f) is the exact Fourier integral of the piecewise-linear W.
class WakeTable : public WakeSource {
 public:
  /// `time` [s] strictly increasing, >= 0; `columns[c]` empty or of the same length, SI units.
  WakeTable(std::vector<double> time, std::array<std::vector<double>, kComponents> columns, std::string origin = "");
  double wake(Component c, double t) const override;
  Complex impedance(Component c, double f) const override;
  bool has(Component c) const override { return !m_columns[static_cast<int>(c)].empty(); }
  const std::vector<double>& time() const { return m_time; }
  const std::vector<double>& column(Component c) const { return m_columns[static_cast<int>(c)]; }
  /// Column names of the file that were read but are not modelled (constant_x, dipolar_xy, ...).
  std::vector<std::string> ignored_columns;
  const std::string& origin() const { return m_origin; }

 private:
  std::vector<double> m_time;
  std::array<std::vector<double>, kComponents> m_columns;
  std::string m_origin;
};

/// PyHEADTAIL / HEADTAIL table (PyHEADTAIL WakeTable(wake_file, wake_file_columns), xwakes
/// read_headtail_file): whitespace-separated numbers, no header, one column per name in `columns`:
/// "time" [ns] (required), "longitudinal" [V/pC], "dipole_x"/"dipolar_x", "dipole_y", "quadrupole_x"/
/// "quadrupolar_x", "quadrupole_y" [V/pC/mm]; converted to s, V/C (x 1e12) and V/C/m (x 1e15). The names
/// constant_x/y, dipole_xy/yx, quadrupole_xy/yx are read and listed in ignored_columns. '#' comments and
/// blank lines are skipped. Errors (ft::InputError) name the file, the line and the column: a non-number,
/// a row with another number of values, a time that does not increase, a negative time, fewer than 2 rows.
WakeTable read_pyheadtail_table(const std::string& path, const std::vector<std::string>& columns);

/// Xsuite table (xwakes WakeFromTable(table): a pandas table with a "time" column [s] and component
/// columns [V/C, V/C/m] named longitudinal, dipolar_x, dipolar_y, quadrupolar_x, quadrupolar_y
/// (or dipole_x ..., constant_x, dipolar_xy ... read and ignored)): on disk as written by
/// DataFrame.to_csv(path) -- a header line of column names, comma- (or whitespace-) separated SI
/// numbers; an unnamed first column (the pandas index) is skipped. Same checks as above; a missing
/// "time" column or an unknown name is an error that lists the valid names.
WakeTable read_xsuite_table(const std::string& path);

/// Several sources summed (each component, wake, kernel and impedance).
class WakeSum : public WakeSource {
 public:
  explicit WakeSum(std::vector<std::shared_ptr<const WakeSource>> sources) : m_sources(std::move(sources)) {}
  double wake(Component c, double t) const override;
  Complex impedance(Component c, double f) const override;
  double kernel(Component c, double t, double dt) const override;
  bool has(Component c) const override;
  const std::vector<std::shared_ptr<const WakeSource>>& sources() const { return m_sources; }

 private:
  std::vector<std::shared_ptr<const WakeSource>> m_sources;
};

/// The kernel of `source` on the grid t_k = k dt, k = 0 .. n-1 (k = 0: the half value of a jump, or the
/// hat average for singular wakes).
struct SampledWake {
  double dt = 0.0;                                  // [s]
  std::array<std::vector<double>, kComponents> k;  // [V/C, V/C/m], empty for an absent component
};
SampledWake sample_wake(const WakeSource& source, double dt, int n);

/// Slice moments of one bunch on a grid of n slices of width dt [s]: slice i is centred at the delay
/// t_i = time_offset + i dt (index increasing from the head to the tail, t = -zeta / (beta0 c) + const).
struct SliceMoments {
  double time_offset = 0.0;   // [s] delay of slice 0 (the bunch's position in the train, plus turns)
  std::vector<double> charge;  // [C] per slice (q0 e times the real particles in it)
  std::vector<double> x, y;    // [m] centroids per slice (0 where the slice is empty)
};

/// What the sources' wakes give every slice of a witness bunch: the longitudinal voltage
/// V_i = -sum_j Q_j W_long(t_i - t_j) [V] (energy change q0 V), the dipolar "voltages"
/// D_i = sum_j Q_j x_j W_dip(t_i - t_j) [V] (Delta px = q0 D_i / (beta0 p0c)), and the quadrupolar
/// gradients G_i = sum_j Q_j W_quad(t_i - t_j) [V/m] (Delta px = q0 G_i x / (beta0 p0c)).
struct SliceKicks {
  std::vector<double> longitudinal, dipolar_x, dipolar_y, quadrupolar_x, quadrupolar_y;
  void resize(int n);
};

/// Adds the kicks of `source` (a bunch's slice moments) on `witness` slices, the kernel taken at the
/// delays (witness.time_offset - source.time_offset) + (i - j) dt, summed in a fixed order (source slices
/// j increasing for each witness slice i): reproducible. `kicks` is resized (zeroed) unless it already holds
/// n slices, then added to. The kernel values are computed on the host (libm), once per call.
void add_slice_kicks(const WakeSource& wake, double dt, const SliceMoments& source, double witness_time_offset,
                     SliceKicks& kicks);

/// Direct convolution of one bunch with itself on a sampled wake (the kernel at delays (i - j) dt >= 0).
SliceKicks convolve(const SampledWake& wake, const SliceMoments& bunch);

/// Linear convolutions through FFTW for n-point sources and (2n-1)-point kernels (delays -(n-1) .. n-1,
/// index m + n - 1), both zero-padded to N >= 2n - 1 points (the smallest 2^a 3^b 5^c 7^d), so that no term
/// wraps around: out_i = sum_j kernel[i - j + n - 1] w_j, i, j < n. Spectra can be summed before the inverse
/// transform (several sources, kernels and turns in one). Thread-safe after construction (new-array
/// execution of plans made once). FFTW_ESTIMATE plans: the same bits for the same input on one CPU type
/// (FFTW picks its SIMD code from the CPU at run time).
class FftConvolver {
 public:
  using Spectrum = std::vector<Complex>;
  explicit FftConvolver(int n);
  ~FftConvolver();
  FftConvolver(const FftConvolver&) = delete;
  FftConvolver& operator=(const FftConvolver&) = delete;
  int n() const { return m_n; }
  int size() const { return m_size; }
  int bins() const { return m_size / 2 + 1; }
  /// The spectrum of `count` <= size() values (zero-padded).
  Spectrum transform(const double* values, int count) const;
  /// sum += a * b, bin by bin.
  static void multiply_add(const Spectrum& a, const Spectrum& b, Spectrum& sum);
  /// out[i] = scale * (inverse transform of `spectrum`)[i + n - 1] / size(), i < n: the convolution's values
  /// (missing bins count as zero).
  void inverse(const Spectrum& spectrum, double scale, double* out) const;

 private:
  int m_n, m_size;
  void* m_forward;   // fftw_plan
  void* m_backward;  // fftw_plan
};

/// How WakeMemory sums a source bunch's wake on the witness slices.
///   Direct  the slice convolution, source slices in increasing order for each witness slice: the same
///           bits on every machine (the reproducible mode).
///   Fft     the same discrete convolution through FFTW (real transforms of N >= 2 n_slices - 1 points,
///           zero-padded, so nothing wraps around): every source's spectrum times the kernel's spectrum at
///           its delay, summed in the frequency domain over the stored turns, one inverse transform per
///           component. O(N log N + memory_turns N) per witness instead of O(memory_turns n^2). It equals
///           Direct to rounding (about 1e-15 of the largest kick), not bit for bit; the same input gives the
///           same bits on one CPU type (FFTW_ESTIMATE plans), so ranks on identical nodes agree.
enum class Convolution { Direct, Fft };

/// Multi-bunch, multi-turn wake memory (stored-turns version): keeps the slice moments of every bunch
/// for the last `memory_turns` turns and sums their wakes. Bunch b of the current turn sits at the
/// delay bunch_offsets[b] (bunch 0 leading, offsets increasing along the train); a bunch stored k turns
/// ago sits k T0 earlier, i.e. at a delay k T0 larger for the witness. The kernel for each distinct
/// delay offset is computed once and cached (point samples, or the hat average of singular wakes; in the
/// Fft mode its spectrum, and every stored bunch's moments as spectra).
class WakeMemory {
 public:
  /// n_slices of dt [s] per bunch, revolution period T0 [s], memory_turns >= 0 (0: this turn only).
  WakeMemory(std::shared_ptr<const WakeSource> source, double dt, int n_slices, double revolution_time,
             int memory_turns, std::vector<double> bunch_offsets = {0.0},
             Convolution convolution = Convolution::Direct);
  ~WakeMemory();
  WakeMemory(const WakeMemory&) = delete;
  WakeMemory& operator=(const WakeMemory&) = delete;
  /// Kicks on bunch `witness` of the current turn from the current turn's leading bunches (and itself)
  /// and from every bunch of the stored turns. `current[b]` are this turn's moments (time_offset ignored:
  /// bunch_offsets[b] is used). May be called from several threads at once (the kernel caches are locked).
  SliceKicks kicks(const std::vector<SliceMoments>& current, int witness) const;
  /// Fft mode: computes now the stored turns' part of the next kicks(current, witness), so that kicks() only
  /// adds the current turn, with the same operations in the same order (the same bits). A GPU backend calls it while its kernels run. end_turn() discards it; nothing in Direct mode.
  /// Not to be called while kicks() runs on other threads.
  void prepare(int witness);
  /// Stores this turn's moments (the oldest stored turn is dropped beyond memory_turns).
  void end_turn(std::vector<SliceMoments> current);
  int stored_turns() const;
  int n_slices() const { return m_n; }
  Convolution convolution() const { return m_fft ? Convolution::Fft : Convolution::Direct; }

 private:
  using Kernel = std::array<std::vector<double>, kComponents>;  // 2n-1 samples each, index m + n - 1
  struct Fft;  // the Fft mode's plans, kernel spectra and the stored bunches' spectra
  const Kernel& kernel_at(double offset) const;
  void add(const SliceMoments& src, double offset, SliceKicks& kicks) const;
  SliceKicks fft_kicks(const std::vector<SliceMoments>& current, int witness) const;
  /// Fft mode: the kernel spectra at a delay offset, cached (locked).
  const std::array<std::vector<Complex>, kComponents>& fft_kernel_spectra(double offset) const;
  std::shared_ptr<const WakeSource> m_source;
  double m_dt, m_t0;
  int m_n, m_memory;
  std::vector<double> m_offsets;
  std::vector<std::vector<SliceMoments>> m_history;  // [0]: the last turn (the Direct mode; Fft keeps spectra)
  mutable std::map<double, Kernel> m_cache;
  mutable std::mutex m_cache_mutex;  // the caches (kernels, the Fft mode's spectra) are filled lazily by kicks()
  std::unique_ptr<Fft> m_fft;
};

/// The multi-turn and multi-bunch memory of a resonator through its damped modes (the recursion of the
/// longitudinal impedance's ft_wake_mode): W(t) = sum Re(c e^{s t}), so the wake of everything that passed
/// before a time t_ref acts on later slices as Re(c e^{s (t_i - t_ref)} A) with one complex amplitude A per
/// mode and component, A advanced by e^{s Delta t} and increased by sum_j w_j e^{s (t_ref - t_j)} as bunches
/// pass: exact, with unlimited memory, O(n) per bunch. Every factor decays (t_i >= t_ref >= t_j), so nothing
/// overflows for broadband resonators. Bunches are given in train order each turn (track_bunch with b =
/// 0, 1, ...), then end_turn(); the kicks returned hold the wakes of all earlier turns and of the bunches ahead
/// in this turn, NOT the bunch's own wake on itself (add convolve(sample_wake(...), bunch) for that).
/// Throws for a resonator at critical damping (Q = 1/2: no modes; use WakeMemory).
class ResonatorModeMemory {
 public:
  ResonatorModeMemory(const Resonator& resonator, double dt, int n_slices, double revolution_time,
                      std::vector<double> bunch_offsets = {0.0});
  /// The memory's kicks on bunch b (its moments' time_offset is ignored: bunch_offsets[b] is used), then adds
  /// the bunch to the memory. b must follow the previous call's bunch (0 after end_turn()).
  SliceKicks track_bunch(int b, const SliceMoments& bunch);
  /// Moves the memory to bunch 0 of the next turn (t -> t - T0). Every bunch must have been tracked.
  void end_turn();

 private:
  struct Mode {
    int component;
    Complex c, s;
    Complex amplitude{0.0, 0.0};  // referenced to m_t_ref
  };
  std::vector<Mode> m_modes;
  double m_dt, m_t0;
  int m_n;
  std::vector<double> m_offsets;
  int m_next = 0;
  double m_t_ref;  // [s] the time (delay) to which the amplitudes are referenced, in this turn's frame
};

}  // namespace ft::wakes
