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

#define FT_PLUGIN_ABI_VERSION 2u  /* 2: ParticleView carries rv0v = 1/rvv */
#define FT_PLUGIN_ENTRY_NAME "fusetrack_plugin_entry"

#ifdef __cplusplus
extern "C" {
#endif

enum ft_field_type { FT_FIELD_DOUBLE = 0, FT_FIELD_INT32 = 1 };

enum ft_element_flags {
  FT_THIN = 0, /* the element does not advance s */
  FT_THICK = 1 /* the element advances s by its `length` field */
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
  ft_track_block_fn track_block;
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
