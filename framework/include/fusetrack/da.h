// Dynamic-aperture scans: a grid of initial conditions (polar or cartesian, in metres or beam
// sigma, at one or several momentum offsets, around the closed orbit), tracked for up to 10^6
// turns with checkpoints, then reduced to the DA per angle, DA against turn number and loss maps.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"
#include "fusetrack/tracker.h"

namespace ft {

class Communicator;  // fusetrack/parallel.h

enum class DaGrid { Polar, Cartesian };
enum class DaUnits { Metres, Sigma };

struct DaConfig {
  int64_t turns = 1000;
  DaGrid grid = DaGrid::Polar;
  // Polar grid: angles in [angle_min, angle_max] [deg] from the x axis, amplitudes r in
  // [amplitude_min, amplitude_max], x = r cos(angle), y = r sin(angle).
  int angles = 19;
  double angle_min = 0.0, angle_max = 90.0;
  int amplitudes = 30;
  double amplitude_min = 0.0, amplitude_max = 0.02;
  // Cartesian grid: nx x ny points.
  int nx = 30, ny = 30;
  double x_min = 0.0, x_max = 0.02, y_min = 0.0, y_max = 0.02;
  DaUnits units = DaUnits::Metres;
  double emittance_nx = 0.0, emittance_ny = 0.0;  // normalised emittances [m] for sigma units
  // Offsets added to every particle (in addition to the closed orbit).
  double px0 = 0.0, py0 = 0.0, zeta0 = 0.0;
  std::vector<double> deltas = {0.0};  // momentum offsets, one scan each
  bool around_closed_orbit = true;
  double turn_limits[6] = {0, 0, 0, 0, 0, 0};  // C_k limits |x|, |px|, |y|, |py|, |zeta|, |delta| (0: none)
  // Adaptive refinement: bisect each ray between the last surviving and first lost amplitude
  // down to this resolution (same units as the amplitudes); 0: off. Polar grids only.
  double refine_resolution = 0.0;
};

/// Checks a configuration; throws InputError naming the option for anything invalid.
void validate_da_config(const DaConfig& config);

/// Per-particle scan coordinates and the resulting losses.
struct DaScan {
  DaConfig config;
  std::vector<double> amplitude, angle;     // polar grid coordinates (amplitude units), or NaN
  std::vector<double> grid_x, grid_y;       // x, y in amplitude units (metres or sigma)
  std::vector<int32_t> delta_index;
  Particles initial;                        // physical initial coordinates
  Particles particles;                      // current / final state
  int64_t turns_done = 0;
  double sigma_x = 0.0, sigma_y = 0.0;      // [m] per unit amplitude (1 for metres)
  double closed_orbit[6] = {0, 0, 0, 0, 0, 0};
  /// A study of lattice variants (make_da_study): each variant's frame, and each particle's variant
  /// (Particles::variant of the batches tracked). Empty: one lattice.
  struct VariantFrame {
    std::string name;
    double sigma_x = 0.0, sigma_y = 0.0;
    double closed_orbit[6] = {0, 0, 0, 0, 0, 0};
  };
  std::vector<VariantFrame> variants;
  std::vector<int32_t> variant;  // per particle
};

/// Builds the initial conditions (needs the optics at the start for sigma units and the closed
/// orbit; computed here with the CPU backend).
DaScan make_da_scan(const Lattice& lattice, const DaConfig& config);

/// A DA study: the scan of `config` on every lattice (variants of one lattice: the same sequence,
/// e.g. error seeds), each exactly as make_da_scan builds it alone (its own closed orbit and beam
/// sizes), joined in order: variant v's particles follow variant v-1's, each carrying its index.
/// With `ranks` (a collective call: every rank of it calls), each rank computes the closed orbit
/// and optics of its contiguous share of the variants (share_of) and the ranks exchange them
/// exactly, so that every rank returns the same study, bit for bit, as one process would. A
/// variant that fails (no closed orbit) throws Error naming it on every rank (the first in order).
DaScan make_da_study(const std::vector<const Lattice*>& lattices, const std::vector<std::string>& names,
                     const DaConfig& config, Communicator* ranks = nullptr);

/// Variant v of a study as the scan of that variant alone (its particles, frame and grid).
DaScan da_variant_scan(const DaScan& study, size_t v);

struct DaProgress {
  int64_t turns_done = 0, turns_total = 0;
  size_t alive = 0, total = 0;
  double seconds = 0.0;
  double surviving_particle_turns = 0.0;  // sum over chunks of alive particles x turns (all ranks')
  double backend_seconds = 0.0;           // this process's time in Backend::track (MPI: the balance of the shares)
  double exchange_seconds = 0.0;          // MPI: this rank's time in the exchanges, waits for other ranks included
};

struct DaRunOptions {
  int64_t checkpoint_every = 0;     // turns between checkpoints (0: 1000), and one where the scan stops
  std::string checkpoint_file;      // .npz; "" for none
  std::string fingerprint;          // da_fingerprint(lattice file, config), stored in checkpoints
  std::function<void(const DaProgress&)> on_progress;
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT) to stop after the current chunk
  FmaMode fma = FmaMode::Off;
  int threads = 0;
  /// MPI ranks that share the scan (null: this process tracks it alone). Every rank holds the whole
  /// scan; before each chunk the survivors, in the scan's order, are split into contiguous shares
  /// sized by the ranks' backend times, and after it the ranks exchange what the next chunk needs.
  /// Contiguous shares keep each rank's particles in few variants of a study (their parameter tables in
  /// the GPU's L2); the split never changes a bit of the result. Rank 0 alone writes the checkpoint,
  /// which is that of one process.
  Communicator* ranks = nullptr;
};

/// Tracks the scan's alive particles in chunks (survivors compacted before each chunk so the
/// device stays busy), writing a checkpoint after each chunk. Returns false when stopped early.
bool run_da_scan(DaScan& scan, Backend& backend, const DaRunOptions& options, DaProgress* progress_out = nullptr);

/// Writes / reads a checkpoint; `fingerprint` ties it to the lattice file and configuration.
void write_da_checkpoint(const DaScan& scan, const std::string& file, const std::string& fingerprint);
void read_da_checkpoint(DaScan& scan, const std::string& file, const std::string& fingerprint);
/// MPI ranks: the checkpoint read on rank 0 alone (the output directory may be rank 0's), its state
/// then sent to every rank. A failure on rank 0 throws on every rank (rank 0: its own error).
void read_da_checkpoint_on_root(DaScan& scan, const std::string& file, const std::string& fingerprint,
                                Communicator& ranks);
std::string da_fingerprint(const std::string& lattice_file, const DaConfig& config);
/// The fingerprint of share `index` of `count` of a scan (per-rank and per-part checkpoints).
std::string da_share_fingerprint(const std::string& fingerprint, int index, int count);

struct DaAngleResult {
  double delta = 0.0;
  double angle = 0.0;             // [deg]
  double da_first_loss = 0.0;     // smallest amplitude lost before the last turn (NaN: none lost)
  double da_last_stable = 0.0;    // largest amplitude below it that survived (0 if none)
  double da_refined = 0.0;        // after bisection (NaN when refinement is off)
};

/// Cartesian grids: the border of the stable region along one x column. Starting from the point
/// of the column nearest y = 0, the largest y reached upwards and the smallest reached downwards
/// before the first point lost before the last turn (the start itself when the neighbour is
/// lost; NaN both when the start is lost).
struct DaColumnResult {
  double delta = 0.0;
  double x = 0.0;       // column [amplitude units]
  double y_high = 0.0;  // border above the start
  double y_low = 0.0;   // border below the start
};

struct DaSummary {
  std::vector<DaAngleResult> per_angle;
  std::vector<DaColumnResult> per_column;  // cartesian grids
  std::vector<int64_t> turn_checkpoints;          // turns at which the DA is evaluated
  std::vector<std::vector<double>> da_vs_turns;   // [delta][checkpoint]: min over angles of the DA for that many turns
  // Polar: over angles, of da_last_stable (or refined). Cartesian: over the columns whose start
  // survives, of the vertical border min(|y_high|, |y_low|) (one side when the grid has one).
  double da_min = 0.0, da_mean = 0.0, da_max = 0.0;
  int64_t refinement_particle_turns = 0;
  int64_t fine_grid_particle_turns_estimate = 0;
};

/// DA per angle and against turns (polar grids) or the border per column (cartesian), min/mean/max.
DaSummary summarize_da(const DaScan& scan);

/// A study's DA across its variants, per momentum offset and angle (polar grids) or x column
/// (cartesian): the DA of each variant (last stable, or refined), and over the variants their
/// minimum, mean, standard deviation and maximum, with the variant that has the minimum.
struct DaStudyRow {
  double delta = 0.0;
  double angle = 0.0;             // [deg] (polar) or the column's x (cartesian)
  std::vector<double> per_variant;
  double min = 0.0, mean = 0.0, std = 0.0, max = 0.0;
  size_t worst_variant = 0;
};

struct DaStudySummary {
  std::vector<std::string> names;        // the variants
  std::vector<DaSummary> per_variant;    // each variant's own summary
  std::vector<DaStudyRow> rows;
  // Over the variants, of each variant's da_min (the smallest DA over its angles).
  double da_min = 0.0, da_mean = 0.0, da_std = 0.0, da_max = 0.0;
  size_t worst_variant = 0;
};

/// The per-variant summaries (taken from `per_variant`, one per variant) joined into the study's statistics.
DaStudySummary summarize_da_study(const DaScan& study, std::vector<DaSummary> per_variant);
/// The same with each variant's summary computed here (summarize_da of da_variant_scan).
DaStudySummary summarize_da_study(const DaScan& study);

/// Writes the study: summary.json (every variant's DA per angle, and across variants min, mean,
/// std, max per angle), summary.csv (one row per angle: the statistics, then one column per
/// variant), variants.csv (per variant: name, DA min/mean/max, survivors) and da.npz (all
/// particles with their variant), and each variant's own results in variants/<index>_<name>/.
void write_da_study_results(const DaScan& study, const DaStudySummary& summary, const std::string& directory,
                            const std::string& lattice_file);

/// Adaptive refinement: bisection along each ray, tracking the midpoints for the full number of
/// turns with `backend`; fills da_refined and the particle-turn accounting in `summary`.
void refine_da(const Lattice& lattice, DaScan& scan, DaSummary& summary, Backend& backend, const DaRunOptions& options);

/// The scan's particles [begin, end) with their grid coordinates (a rank's or a part's share).
DaScan slice_da_scan(const DaScan& scan, size_t begin, size_t end);

/// The configuration as JSON and back (job-array part files).
std::string da_config_to_json(const DaConfig& config);
DaConfig da_config_from_json(const std::string& text, const std::string& file);

/// A job-array part: `scan` is part `index` of `count` of a scan of `total` particles. Writes
/// DIR/part_<index>_of_<count>.json (configuration, lattice file, fingerprint) and .npz (the
/// part's grid coordinates, initial and final particles).
void write_da_part(const DaScan& scan, int index, int count, size_t total, const std::string& directory,
                   const std::string& lattice_file, const std::string& fingerprint);

/// Joins the parts (their .json files, or directories holding them) into the whole scan, as one
/// run would have left it. Refuses parts of different scans (lattice file, grid, options), a
/// repeated part, an unfinished part, and names each missing part. Sets `lattice_file` to the
/// lattice file the parts were run on.
DaScan merge_da_parts(const std::vector<std::string>& parts, std::string& lattice_file);

/// Writes summary.json, summary.csv and da.npz into `directory`.
void write_da_results(const DaScan& scan, const DaSummary& summary, const std::string& directory,
                      const std::string& lattice_file);

}  // namespace ft
