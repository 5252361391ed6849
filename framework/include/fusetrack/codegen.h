// Generates the CUDA source of one fused kernel per lattice: every element of the sequence,
// every turn, one thread per particle with its coordinates in registers. The element code is
// the plugins' own header text; the generator only writes the loop and the dispatch.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "fusetrack/device/collective.h"
#include "fusetrack/lattice.h"
#include "fusetrack/tracker.h"

namespace ft {

enum class Dispatch {
  Auto,    // Baked for short sequences, Switch otherwise (see choose_dispatch)
  Switch,  // a switch over the element types, parameters read from a packed read-only buffer
  Baked,   // straight-line calls with the parameters baked in as constants (recompiles on change)
  Staged   // the switch, with each block staging the steps and parameters of the next chunk of
           // elements into shared memory in one batch of parallel loads (throughput-bound, long lattices)
};

/// "auto", "switch", "baked", "staged".
const char* dispatch_name(Dispatch dispatch);
/// The dispatch named `name` (as dispatch_name spells it); false if there is none.
bool parse_dispatch(const std::string& name, Dispatch& out);


/// Elements per chunk staged into shared memory by the staged dispatch.
constexpr int kStagedChunk = 32;

struct KernelSource {
  std::string name;  // name of the generated translation unit, e.g. "fusetrack_fused.cu"
  std::string text;  // the generated source
  /// Every header NVRTC needs, by include name: the framework's device headers and the element
  /// headers of the plugins whose types the lattice uses.
  std::map<std::string, std::string> headers;
  /// For error messages: include name -> "plugin NAME (FILE): types A, B".
  std::map<std::string, std::string> header_origin;
  Dispatch dispatch = Dispatch::Switch;
  FmaMode fma = FmaMode::Off;
  /// Ask ptxas for its resource report (registers, stack, spills) in the compile log.
  bool report_resources = false;
  /// Registers per thread the fused kernel is capped at (its launch bounds); 0: ptxas chooses. A cap
  /// lets a rarely executed heavy element body spill instead of lowering the occupancy of every element.
  int max_registers = 0;
  /// Element types in the order of their switch case ids.
  std::vector<const ElementType*> types;
  /// Types used with a transformation (misalignment), in the order of their case ids, which
  /// follow those of `types`; and for each, the most 8-byte words of a transformed parameter
  /// block (the transformation's block, then the element's parameters).
  std::vector<const ElementType*> transformed_types;
  std::vector<uint32_t> transformed_words;
  /// For each transformed type: the operations (entry in bits 0-23, exit in bits 24-47) that every one of
  /// its blocks holds in every variant, e.g. a shift then a roll for misaligned thin multipoles; its case
  /// then runs them as straight-line code with the values at fixed offsets. kMixedTransforms: the blocks
  /// differ, and the case reads each block's header (fusetrack/device/transform.h, transform_entry).
  std::vector<uint64_t> transformed_operations;
  /// Generated for lattice variants: each particle reads its variant's parameter table.
  bool variants = false;
  /// Switch kernel motifs (recurring runs of elements compiled as one case, fusetrack/motifs.h): per
  /// sequence position 0 or (motif id << 8 | length) where an occurrence starts; kernel_tables appends
  /// it to the steps. Empty without motifs (other forms, FUSETRACK_MOTIFS=0, nothing recurs).
  std::vector<uint32_t> motif_at;  // count_motifs (fusetrack/motifs.h) sums it up
  /// The source also defines kFewParticlesKernelName (with motifs): the same tracking, bit for bit, for
  /// few particles per multiprocessor, where each particle's chain of dependent operations sets the time.
  /// A motif occurrence runs without a branch per element and is replayed element by element for a
  /// particle lost inside it.
  bool few_particles_form = false;
  /// Particles each thread of the switch kernels tracks (generate_fused_kernel): 1, or 2 (thread t takes
  /// particles 2t and 2t + 1 through the same elements, the same bits as 1). The other forms track 1.
  int particles_per_thread = 1;
};

/// KernelSource::transformed_operations of a type whose blocks hold different operations.
constexpr uint64_t kMixedTransforms = ~uint64_t(0);

/// The kernel entry point every generated source defines.
constexpr const char* kFusedKernelName = "fusetrack_track";
/// The entry point for few particles that a source with KernelSource::few_particles_form also defines
/// (the same arguments).
constexpr const char* kFewParticlesKernelName = "fusetrack_track_few";

/// Switch for long sequences, Baked for sequences of at most this many elements.
constexpr size_t kBakedMaxElements = 2000;
/// ... and at most this many 8-byte parameter words baked in over the whole sequence: a proxy for
/// the generated code's size (thick magnets with integrators and edges carry many fields; such a
/// ring of 1481 elements took minutes in NVRTC baked, 9 s as a switch).
constexpr size_t kBakedMaxParameterWords = 20000;
/// ... and at most this many elements of FT_LARGE_CODE types (160 frozen space-charge elements in the
/// PS Booster: 105 s of NVRTC baked, 0.4 s as a switch kernel, on a 2-core host).
constexpr size_t kBakedMaxLargeCodeElements = 16;
/// The parameter words a baked kernel of this lattice would carry (sum over the sequence).
size_t baked_parameter_words(const Lattice& lattice);
/// Whether the baked form is chosen automatically: short sequences of moderate code size.
bool bakeable(const Lattice& lattice);
Dispatch choose_dispatch(const Lattice& lattice, Dispatch requested);

/// Particles per thread when neither the caller nor FUSETRACK_PARTICLES_PER_THREAD chooses.
constexpr int kDefaultParticlesPerThread = 1;
/// The particles per thread of the switch kernels: `requested` when it is 1 or 2, else (0) the environment
/// setting FUSETRACK_PARTICLES_PER_THREAD (1 or 2), else kDefaultParticlesPerThread. Throws Error for any
/// other value.
int particles_per_thread_setting(int requested);

/// max_registers > 0 caps ptxas's registers per thread (through __launch_bounds__'s minimum blocks
/// per multiprocessor, since NVRTC ignores --maxrregcount for kernels with launch bounds).
/// `variants` (Backend::set_variants; more than one): the switch form, each particle reading the
/// parameter table of its variant (kernel_tables with the same variants); a definition transformed
/// in any variant takes the transformed case in all (an empty transformation in the others).
/// `particles_per_thread` 2: the switch kernels (both entry points) take two particles per thread, whose
/// elements run in the same steps, each element's step and parameter offset read once for both; each
/// particle's arithmetic, loss turn and loss element are those of one per thread. Baked and staged sources
/// stay at one (KernelSource::particles_per_thread says which was made).
KernelSource generate_fused_kernel(const Lattice& lattice, FmaMode fma, Dispatch dispatch, int max_registers = 0,
                                   const std::vector<const Lattice*>& variants = {}, int particles_per_thread = 1);

/// A lattice with collective elements (TurnProgram): one kernel per segment,
/// segment_kernel_name(k), each running one turn of its segment (the kick of the collective
/// element before it, its elements, the deposit for the collective element after it), plus the
/// wrap kernel (kWrapKernelName), and the solver kernels (fusetrack_line_density, fusetrack_convolve, fusetrack_fft_stage, ...).
/// `grids`: the slice grid of each collective element, in sequence order (ignored for grid elements).
/// Grid collective elements (space charge): when the lattice has one, every segment kernel takes the
/// grid arguments after `profile_in_shared` (kick_ex, kick_ey, kick_ez, kick_grid, grid_acc,
/// grid_outside_slot, deposit_spec, extent, extent_acc, grid_mode: 1 deposit on deposit_spec, 2 the
/// adapted extent's moment pass) and the source has fusetrack_grid_extent and fusetrack_grid_deposit.
KernelSource generate_collective_kernels(const Lattice& lattice, FmaMode fma, Dispatch dispatch,
                                         const std::vector<SliceGrid>& grids);
std::string segment_kernel_name(size_t segment);

/// The particle coordinates (masks of enum ft_coordinate) one collective kernel moves: it loads those
/// its elements, its kick and its deposit read or write (every coordinate for a type that does not
/// declare them, FT_ELEMENT_COORDINATES; for an element under a transformation; the end-of-turn
/// checks add what the turn writes) and stores those written. On the first turn of a run the
/// kernels also load the rest (full_load = 1): after that turn's checks, a coordinate that no kernel
/// writes cannot fail a later check, so the later turns need not load it.
///
/// rpp and rvv are never loaded or stored when the lattice's energy coordinates are derived
/// (collective_energy_is_derived): a kernel that reads them loads delta and ptau and recomputes them
/// (ft::particle_with_derived_energy, the formula every writer ends with), so the GPU arrays of rpp
/// and rvv are stale during a run and the backend recomputes them after each download.
struct KernelTraffic {
  uint32_t loaded = 0;
  uint32_t stored = 0;
  bool derived_energy = false;  // rpp and rvv recomputed from delta and ptau at the load
  /// Bytes per particle: 8 per coordinate loaded or stored, 4 for the state (written on a loss only).
  double bytes() const;
};

/// What the kernels of one turn of a collective lattice move per particle, after the first turn.
struct CollectiveTurnTraffic {
  std::vector<KernelTraffic> segments;  // segment_kernel_name(k)
  KernelTraffic wrap;                   // kWrapKernelName: segment K, end of turn, segment 0
  uint32_t read = 0, written = 0;       // by the turn's elements, kicks and deposits (physics only)
  /// Bytes per particle-turn when the turn runs the wrap kernel and segments 1..K-1.
  double bytes_per_turn() const;
  /// The same with every coordinate loaded and stored (the kernels before the coordinate masks, and
  /// the first turn's loads).
  double bytes_per_turn_all() const;
  /// What the physics needs: the six coordinates the turn reads (loaded once) and writes (stored
  /// once), ptau, rpp and rvv being functions of delta, and the state read.
  double bytes_per_turn_needed() const;
};
CollectiveTurnTraffic collective_turn_traffic(const Lattice& lattice);

/// Whether the collective kernels of `lattice` recompute rpp and rvv instead of moving them: when every
/// element type declares the coordinates it touches (FT_ELEMENT_COORDINATES; a built-in type writes the
/// energy only through ParticleView::update_delta and add_to_energy). A type that declares nothing may
/// write rpp or rvv any way it likes, so they are then moved as every other coordinate.
/// FUSETRACK_FULL_LOADS=1 (the benchmark's baseline: the kernels before the coordinate masks) turns it off.
/// ptau is never derived: add_to_energy adds to the stored ptau, and recomputing ptau from delta,
/// sqrt(delta^2 beta0^2 + 2 delta beta0^2 + 1) - 1, loses digits to cancellation at small delta.
bool collective_energy_is_derived(const Lattice& lattice);

/// Slice-moment deposits whose table does not fit in shared memory (bunch trains: n_bunches x n_slices
/// slices): each block takes a contiguous chunk of the particles (which lie in one or two bunches when
/// the particles are stored bunch after bunch) and sums, in shared memory, the slices of a window of
/// this many slices centred on its first particle's slice; the particles outside the window add to the
/// table in global memory directly. Integer sums: the table is the same whatever the window catches.
/// (600 slices x kSliceCentroidAccumulators x 8 bytes: 24 KiB, 8 blocks per SM.)
constexpr int kMomentWindowSlices = 600;

/// The kernel that runs the last segment of a turn and the first of the next in one pass (the
/// end-of-turn checks in between; losses in the second part count for the next turn).
constexpr const char* kWrapKernelName = "fusetrack_segment_wrap";
/// The kernel that writes rpp and rvv from delta and ptau for every particle (set_derived_energy,
/// with the segments' numerics), run before a download when the segments do not store them.
constexpr const char* kDeriveEnergyKernelName = "fusetrack_derive_energy";

/// One step of the switch kernel's sequence table, packed in 32 bits so that long lattices'
/// tables stay cache-resident: the type's case id in the top 8 bits, the parameter block's
/// offset in the packed buffer, in units of 8 bytes, in the low 24 bits (up to 128 MiB).
struct KernelStep {
  uint32_t packed;
  static KernelStep make(uint32_t type_id, uint32_t byte_offset) { return {(type_id << 24) | (byte_offset >> 3)}; }
  uint32_t type_id() const { return packed >> 24; }
  uint32_t param_offset() const { return (packed & 0xffffffu) << 3; }
};

/// The switch kernel's inputs: one step per sequence entry and the parameter buffer, with
/// identical parameter blocks of one type stored once (real lattices repeat a few magnet
/// settings thousands of times; fewer distinct bytes stay in the L1 cache).
struct KernelTables {
  std::vector<KernelStep> steps;
  std::vector<uint64_t> params;  // 8-byte aligned parameter blocks, one table per variant
  size_t variant_stride_bytes = 0;  // variant v's table starts v * variant_stride_bytes into params
};
/// With `variants`, the parameters of every variant at the same offsets (one table each); a block
/// is stored once when it is identical in every variant.
KernelTables kernel_tables(const Lattice& lattice, const KernelSource& source,
                           const std::vector<const Lattice*>& variants = {});

/// Writes the source and all its headers into `directory` (FUSETRACK_DUMP_SOURCE).
void dump_kernel_source(const KernelSource& source, const std::string& directory);

/// The framework's device headers, embedded at build time (include name -> text).
std::map<std::string, std::string> framework_device_headers();

}  // namespace ft
