/* The C boundary between the fusetrack core and an element plugin.
 *
 * A plugin is a shared library that exports one C function, FT_PLUGIN_ENTRY_NAME.
 * The core calls it with its own ABI version; the plugin returns a descriptor of
 * plain structs, C strings and function pointers (no C++ types cross the boundary).
 * The core refuses a descriptor whose abi_version differs from FT_PLUGIN_ABI_VERSION.
 * Bump FT_PLUGIN_ABI_VERSION on any change to these structs or to ft::ParticleView. */
#ifndef FUSETRACK_PLUGIN_ABI_H
#define FUSETRACK_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#define FT_PLUGIN_ABI_VERSION 7u  /* 2: ParticleView carries rv0v = 1/rvv; 3: collective element types;
                                     4: grid (space-charge) collective elements;
                                     5: slice-moment (transverse wake, damper) collective elements;
                                        the coordinates each element type reads and writes;
                                     6: ft_moments_model: feedback delay, bunch trains;
                                     7: ft_moments_model: the wake convolution (direct or FFT) */
#define FT_PLUGIN_ENTRY_NAME "fusetrack_plugin_entry"

#ifdef __cplusplus
extern "C" {
#endif

enum ft_field_type {
  FT_FIELD_DOUBLE = 0,
  FT_FIELD_INT32 = 1,
  /* A host-only field of a collective element: any JSON value (string, list, object) that is not
   * part of the parameter struct (offset and count are 0). The element's create() reads it from
   * the definition's JSON text. */
  FT_FIELD_JSON = 2
};

enum ft_element_flags {
  FT_THIN = 0, /* the element does not advance s */
  FT_THICK = 1, /* the element advances s by its `length` field */
  /* Its function is long (e.g. a complex error function): the automatic kernel form does not
   * inline it into a baked kernel more than a few times (codegen.h kBakedMaxLargeCodeElements),
   * which would take minutes to compile. */
  FT_LARGE_CODE = 2
};

/* The particle coordinates an element type reads and writes (ft_element_type_desc). The kernels of
 * a collective turn load only the coordinates their elements read or write and store only those
 * written. Writing delta through ParticleView::update_delta or add_to_energy writes the whole
 * energy group (delta, ptau, rpp, rvv); reading p.rv0v reads rvv. */
enum ft_coordinate {
  FT_COORD_X = 1u << 0,
  FT_COORD_PX = 1u << 1,
  FT_COORD_Y = 1u << 2,
  FT_COORD_PY = 1u << 3,
  FT_COORD_ZETA = 1u << 4,
  FT_COORD_DELTA = 1u << 5,
  FT_COORD_PTAU = 1u << 6,
  FT_COORD_RPP = 1u << 7,
  FT_COORD_RVV = 1u << 8,
  FT_COORD_ENERGY = FT_COORD_DELTA | FT_COORD_PTAU | FT_COORD_RPP | FT_COORD_RVV,
  FT_COORD_TRANSVERSE = FT_COORD_X | FT_COORD_PX | FT_COORD_Y | FT_COORD_PY,
  FT_COORD_ALL = 0x1ffu,
  /* Set in coordinates_read by a type that declares its coordinates; without it the framework
   * assumes the type reads and writes every coordinate (plugins that do not declare). */
  FT_COORD_DECLARED = 1u << 30
};

enum ft_field_flags {
  FT_FIELD_INPUT = 0,   /* read from the lattice file */
  FT_FIELD_DERIVED = 1  /* computed by the element's prepare(); never read from input */
};

/* One field of an element's parameter struct, derived from the struct by offsetof. */
typedef struct ft_field_desc {
  const char* name;
  const char* unit;
  const char* doc;
  uint32_t offset;   /* bytes from the start of the struct */
  uint32_t type;     /* enum ft_field_type */
  uint32_t count;    /* 1 for a scalar, the array length otherwise */
  uint32_t flags;    /* enum ft_field_flags */
  double default_value; /* for every entry of an array */
  int32_t has_default;  /* 0: the field is required in the lattice file */
} ft_field_desc;

/* The reference particle, as prepare() sees it. */
typedef struct ft_reference {
  double mass0;  /* rest energy [eV] */
  double q0;     /* charge [elementary charges] */
  double p0c;    /* momentum times c [eV] */
  double beta0;
  double gamma0;
  double energy0; /* total energy [eV] */
  double circumference; /* sum of the lengths of the thick elements of the lattice [m] */
} ft_reference;

/* A block of particles in structure-of-arrays form, tracked through one element by the CPU
 * backend. The pointers address `count` consecutive particles. */
typedef struct ft_particle_block {
  double* x;
  double* px;
  double* y;
  double* py;
  double* zeta;
  double* delta;
  double* ptau;
  double* rpp;
  double* rvv;
  int32_t* state;
  int32_t* lost_turn;
  int64_t* lost_element;
  int64_t count;
  double beta0;
  int32_t turn;          /* current turn, recorded on loss */
  int64_t element_index; /* current element's index in the sequence, recorded on loss */
  double limit_x;        /* the global |x| limit [m] applied after the element */
  double limit_y;        /* the global |y| limit [m] */
} ft_particle_block;

/* Error reporting across the boundary: a plugin writes a message and returns non-zero. */
typedef struct ft_error {
  char message[512];
} ft_error;

typedef int (*ft_prepare_fn)(void* params, const ft_reference* reference, ft_error* error);
typedef int (*ft_track_block_fn)(const void* params, ft_particle_block* block, ft_error* error);

/* ---- Collective elements ----------------------------------------------------------------------
 * A collective element needs the whole bunch. The framework splits the turn at it:
 *   [fused segment] -> deposit -> reduce -> solve -> kick -> [fused segment] -> ...
 * Deposit, reduction and solve are the framework's (integer profile of zeta, exact and
 * order-independent; a convolution of the profile with the element's linear response). The
 * element supplies its response (wake and impedance samples, resonant modes for multi-turn
 * memory) from a host-side model, and one per-particle kick function
 *   NAME_kick(const NAME& e, double field, ft::ParticleView& p)
 * that receives the solved field interpolated at the particle's zeta. */

/* The line density of zeta: n_slices bins between fixed cuts. */
typedef struct ft_profile_grid {
  int32_t n_slices;  /* number of bins */
  int32_t linear;    /* 0: nearest bin, 1: linear (cloud-in-cell) with fixed-point integer weights */
  double zeta_min;   /* [m] lower cut */
  double zeta_max;   /* [m] upper cut */
} ft_profile_grid;

/* A damped oscillating part of a wake, W(t) = Re(c e^{s t}) for t > 0 (a resonator), kept from
 * turn to turn as multi-turn wake memory. Its single-turn part is also in wake()/impedance(). */
typedef struct ft_wake_mode {
  double s_re, s_im; /* s = -alpha + i omega [1/s] */
  double c_re, c_im; /* c [V/C] */
} ft_wake_mode;

enum ft_solve_method {
  FT_SOLVE_TIME_DOMAIN = 0,     /* direct convolution of the profile with wake samples */
  FT_SOLVE_FREQUENCY_DOMAIN = 1 /* FFT of the zero-padded profile times impedance samples */
};

/* What a collective element's host model gives the framework. The solved field on slice i is
 *   field_i = field_scale * sum_j W(t_i - t_j) lambda_j  (+ the modes' memory of earlier turns),
 * lambda_j the fraction of the bunch's macroparticles in slice j and t the arrival time
 * (t = -zeta / (beta0 c): a trailing particle has larger t). */
typedef struct ft_collective_model {
  void* state;                 /* the plugin's; passed back to the functions below */
  ft_profile_grid grid;
  int32_t method;              /* enum ft_solve_method */
  double frequency_resolution; /* [Hz] frequency domain: the largest FFT bin spacing allowed; 0: the
                                  smallest zero-padded FFT (2 n_slices rounded up to a power of 2) */
  double field_scale;          /* [C] e.g. -q e N_bunch for an induced voltage */
  int32_t mode_count;
  const ft_wake_mode* modes;   /* multi-turn memory; may be NULL when mode_count is 0 */
  /* out[k + n - 1] = W(k dt) [V/C] for k = -(n-1) .. n-1 (W(0): the half value of a jump). */
  int (*wake)(void* state, double dt, int32_t n, double* out, struct ft_error* error);
  /* out[2m], out[2m+1] = Re, Im Z(m df) [Ohm] for m = 0 .. n_freq-1, with
   * Z(f) = integral W(t) exp(-2 pi i f t) dt. */
  int (*impedance)(void* state, double df, int32_t n_freq, double* out, struct ft_error* error);
  void (*destroy)(void* state);
} ft_collective_model;

/* Builds the host model of one element definition. `json_definition` is the definition's JSON
 * text (host-only fields included), `base_directory` the lattice file's directory (for tables). */
typedef int (*ft_collective_create_fn)(const void* params, const char* json_definition, const char* base_directory,
                                       const ft_reference* reference, ft_collective_model* model,
                                       struct ft_error* error);

/* The solved field on the slice centres, as the kick reads it. */
typedef struct ft_slice_field {
  const double* values; /* n_slices values */
  ft_profile_grid grid;
} ft_slice_field;

/* CPU kick of a block: NAME_kick(params, field(zeta), p) for each alive particle. */
typedef int (*ft_kick_block_fn)(const void* params, const ft_slice_field* field, ft_particle_block* block,
                                struct ft_error* error);

/* ---- Grid collective elements (space charge, particle-in-cell) ---------------------------------
 * The second kind of collective element: the framework deposits the bunch's charge on a grid of
 * nodes in (x, y, zeta) with cloud-in-cell integer weights (exact, order-independent; summed over
 * threads, GPU blocks and MPI ranks), solves the Poisson equation with open boundaries, and
 * interpolates the electric field of the bunch in the laboratory frame back to each particle with
 * the same weights. The element supplies the grid (nodes, fixed or beam-adapted extent), the
 * bunch charge and one per-particle kick
 *   NAME_kick(const NAME& e, const double field[3], ft::ParticleView& p)
 * field = (E_x, E_y, E_z) [V/m] of the bunch at the particle, laboratory frame, electric field
 * only (the element accounts for the bunch's magnetic field). A particle outside the grid gets no
 * kick; it is counted and reported, never dropped in silence. */

enum ft_collective_kind {
  FT_COLLECTIVE_PROFILE = 0, /* a zeta profile and a linear response (ft_collective_model) */
  FT_COLLECTIVE_GRID = 1,    /* charge on a grid, Poisson solve (ft_grid_model) */
  FT_COLLECTIVE_MOMENTS = 2  /* slice moments, wakes and feedback (ft_moments_model) */
};

enum ft_grid_solver {
  FT_GRID_2P5D = 0, /* 3D deposit, a 2D open-boundary solve per zeta layer (long bunches); E_z = 0 */
  FT_GRID_3D = 1    /* 3D open-boundary solve in the bunch's rest frame, Lorentz-transformed back */
};

/* What a grid element's host model gives the framework. Node k of dimension d (0: x, 1: y,
 * 2: zeta) sits at min[d] + k (max[d] - min[d]) / (nodes[d] - 1). */
typedef struct ft_grid_model {
  int32_t solver;         /* enum ft_grid_solver */
  int32_t nodes[3];       /* nodes per dimension (x, y, zeta), each >= 2 */
  double min[3], max[3];  /* [m] first and last node of a fixed extent (adapt_sigmas[d] == 0) */
  /* > 0: dimension d's extent is chosen by the framework every turn from the bunch, mean +-
   * adapt_sigmas[d] rms (moments summed as fixed-point integers, so every thread and rank count
   * gives the same grid); 0: min[d], max[d] as given. */
  double adapt_sigmas[3];
  double bunch_charge;    /* [C] q0 e N_bunch: the charge spread over the macroparticles */
} ft_grid_model;

typedef int (*ft_grid_create_fn)(const void* params, const char* json_definition, const char* base_directory,
                                 const ft_reference* reference, ft_grid_model* model, struct ft_error* error);

/* The solved field at the grid nodes, as the kick reads it: node index (iz * n[1] + iy) * n[0] + ix,
 * the grid of the deposit (the fields of ft::ChargeGridSpec, fusetrack/device/reduction.h). */
typedef struct ft_grid_field {
  const double* ex; /* [V/m] */
  const double* ey; /* [V/m] */
  const double* ez; /* [V/m]; NULL: E_z = 0 (2.5D) */
  int32_t dims;
  int32_t n[3];
  double min[3];
  double inv_d[3];
  int32_t weight_bits;
} ft_grid_field;

/* CPU kick of a block: NAME_kick(params, E(particle), p) for each alive particle inside the grid. */
typedef int (*ft_grid_kick_block_fn)(const void* params, const ft_grid_field* field, ft_particle_block* block,
                                     struct ft_error* error);

/* ---- Slice-moment collective elements (transverse wakes, feedback) ----------------------------
 * The third kind: the framework bins the bunch in zeta (nearest slice between fixed cuts) and sums,
 * per slice, the macroparticle count and the fixed-point integer sums of x, px, y, py (exact,
 * order-independent; over threads, GPU blocks and MPI ranks: fusetrack/device/reduction.h,
 * slice_centroid_contributions). On the host it turns the slice charges and centroids into per-slice
 * kicks through the element's wake sources (built by the framework with the wake library,
 * fusetrack/transverse_wakes.h: a direct convolution in a fixed order, with the stored slice moments of
 * the last memory_turns turns), identical on every rank. Each particle in a slice then gets
 *   NAME_kick(const NAME& e, const ft::SliceKick& k, ft::ParticleView& p)
 * with k the slice's wake kicks and centroids (fusetrack/device/slice_moments.h). Particles outside the
 * cuts get no kick. */

enum ft_wake_source_type {
  FT_WAKE_RESONATOR = 0,       /* r_shunt, quality_factor, frequency */
  FT_WAKE_RESISTIVE_WALL = 1,  /* radius, length, conductivity (classic thick wall) */
  FT_WAKE_TABLE_PYHEADTAIL = 2,/* table_path, table_columns (PyHEADTAIL/HEADTAIL units: ns, V/pC, V/pC/mm) */
  FT_WAKE_TABLE_XSUITE = 3     /* table_path (pandas to_csv: a header of column names, SI units) */
};

/* How the framework sums the sources' wakes over the slices (ft::wakes::Convolution). */
enum ft_wake_convolution {
  FT_WAKE_CONVOLUTION_DIRECT = 0, /* the slice sum in a fixed order: the same bits on every machine (default) */
  FT_WAKE_CONVOLUTION_FFT = 1     /* FFTW, equal to the direct sum to rounding: for long memories and many slices */
};

/* One wake source of a slice-moment element (ft::wakes::Resonator, ResistiveWall, WakeTable). */
typedef struct ft_wake_source {
  int32_t type;        /* enum ft_wake_source_type */
  double factors[5];   /* analytic sources: factor of each component (longitudinal, dipolar_x, dipolar_y,
                          quadrupolar_x, quadrupolar_y; a round chamber 0, 1, 1, 0, 0) */
  double r_shunt;      /* resonator: R [Ohm] longitudinal, R_perp [Ohm/m] transverse */
  double quality_factor;
  double frequency;    /* resonator: f_r [Hz] */
  double radius;       /* resistive wall: pipe radius b [m] */
  double length;       /* resistive wall: length L [m] */
  double conductivity; /* resistive wall: sigma [S/m] */
  const char* table_path;    /* tables: the file (absolute, or relative to the lattice file's directory) */
  const char* table_columns; /* PyHEADTAIL tables: the column names, separated by spaces */
} ft_wake_source;

/* What a slice-moment element's host model gives the framework. */
typedef struct ft_moments_model {
  void* state;                 /* the plugin's (owns the strings of `sources`) */
  ft_profile_grid grid;        /* n_slices >= 1 between the cuts; linear must be 0 (nearest slice) */
  double ranges[4];            /* declared bounds |x| [m], |px|, |y| [m], |py| of the fixed-point sums; a
                                  particle outside them is left out of the moments, counted and reported */
  double bunch_charge;         /* [C] q0 e N_bunch, spread over the macroparticles */
  double feedback_bandwidth;   /* [Hz] > 0: the centroids the kick reads are low-pass filtered over the slices
                                  (a feedback system's bandwidth; MomentsCollectiveSolver); 0: each slice's own */
  int32_t components[5];       /* 1: the framework computes this component's kicks (order of factors) */
  int32_t memory_turns;        /* >= 0: the wakes of the slice moments of the last memory_turns turns too */
  int32_t source_count;
  const ft_wake_source* sources;  /* may be NULL when source_count is 0 (a feedback element) */
  void (*destroy)(void* state);   /* may be NULL */
  int32_t feedback_delay;         /* [turns] >= 0: the kick table's centroids are those of this many turns earlier */
  int32_t n_bunches;              /* a train of n_bunches >= 1 bunches (0 counts as 1), each cut like bunch 0 ... */
  double bunch_spacing;           /* [m] ... and bunch b at zeta - b bunch_spacing (MomentsCollectiveSolver) */
  int32_t convolution;            /* enum ft_wake_convolution: how the wakes are summed over the slices */
} ft_moments_model;

typedef int (*ft_moments_create_fn)(const void* params, const char* json_definition, const char* base_directory,
                                    const ft_reference* reference, ft_moments_model* model, struct ft_error* error);

/* The per-slice kicks, as the kick reads them: FT_SLICE_KICK_VALUES doubles per slice (zeta order),
 * the fields of ft::SliceKick (fusetrack/device/slice_moments.h). */
#define FT_SLICE_KICK_VALUES 10
typedef struct ft_slice_kicks {
  const double* values; /* n_slices * FT_SLICE_KICK_VALUES */
  ft_profile_grid grid;
} ft_slice_kicks;

/* CPU kick of a block: NAME_kick(params, kicks[slice of zeta], p) for each alive particle between the cuts. */
typedef int (*ft_moments_kick_block_fn)(const void* params, const ft_slice_kicks* kicks, ft_particle_block* block,
                                        struct ft_error* error);

typedef struct ft_collective_desc {
  const char* kick_function; /* NAME_kick */
  ft_collective_create_fn create;  /* profile kind; NULL for the others */
  ft_kick_block_fn kick_block;     /* profile kind; NULL for the others */
  uint32_t kind;                   /* enum ft_collective_kind */
  ft_grid_create_fn create_grid;           /* grid kind; NULL for the others */
  ft_grid_kick_block_fn grid_kick_block;   /* grid kind; NULL for the others */
  ft_moments_create_fn create_moments;            /* slice-moment kind; NULL for the others */
  ft_moments_kick_block_fn moments_kick_block;    /* slice-moment kind; NULL for the others */
} ft_collective_desc;

typedef struct ft_element_type_desc {
  const char* name;          /* e.g. "Drift"; also the C++ struct name */
  const char* doc;           /* one line, with the physics source */
  const char* track_function;/* e.g. "Drift_track", called as f(const Drift&, ft::ParticleView&) */
  const char* header;        /* include name of the header that defines it, in the plugin's header set */
  uint32_t param_size;       /* sizeof the struct */
  uint32_t param_align;      /* alignof the struct */
  const ft_field_desc* fields;
  uint32_t field_count;
  uint32_t flags;            /* enum ft_element_flags */
  int32_t length_field;      /* index of the field named `length` [m], or -1 */
  ft_prepare_fn prepare;     /* may be NULL */
  ft_track_block_fn track_block;          /* NULL for a collective element */
  const ft_collective_desc* collective;   /* NULL for a single-particle element */
  /* enum ft_coordinate masks: what the track (or kick) function reads and writes, with
   * FT_COORD_DECLARED in coordinates_read; both 0: not declared (every coordinate). */
  uint32_t coordinates_read;
  uint32_t coordinates_written;
} ft_element_type_desc;

/* A header embedded in a plugin for NVRTC: include name and full text. */
typedef struct ft_source_file {
  const char* include_name;
  const char* text;
} ft_source_file;

typedef struct ft_plugin_desc {
  uint32_t abi_version;
  const char* plugin_name;
  const char* plugin_version;
  const ft_element_type_desc* types;
  uint32_t type_count;
  const ft_source_file* headers;
  uint32_t header_count;
} ft_plugin_desc;

typedef const ft_plugin_desc* (*ft_plugin_entry_fn)(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* FUSETRACK_PLUGIN_ABI_H */
