// The element contract. An element header declares its parameters once, as an X-macro
// list, and writes one per-particle function in plain C++ that NVRTC also accepts:
//
//   #define FT_DRIFT_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)  (continued:)
//     REQUIRED(double, length, "m", "length of the drift")
//   FT_ELEMENT_STRUCT(Drift, FT_DRIFT_FIELDS)
//   FT_FUNCTION void Drift_track(const Drift& e, ft::ParticleView& p) { ... }
//   FT_REGISTER_ELEMENT(Drift, FT_DRIFT_FIELDS, FT_THICK, FT_NO_PREPARE, "Expanded drift (xtrack Drift)")
//
// The field kinds:
//   REQUIRED(type, name, unit, doc)             must be given in the lattice file
//   PARAM(type, name, default, unit, doc)       optional, with a default
//   ARRAY(type, name, count, default, unit, doc) fixed-size array, entries default to `default`
//   DERIVED(type, name, unit, doc)              computed by NAME_prepare(), never read from input
// From that one list come the POD struct (host and device) and, on the host only, the field
// table (name, offset, type, count, default, unit) built with offsetof.
//
// FT_REGISTER_ELEMENT(NAME, FIELDS, THICKNESS, PREPARE, DOC):
//   THICKNESS is FT_THIN or FT_THICK (a thick element advances s by its `length` field);
//   PREPARE is FT_NO_PREPARE or FT_WITH_PREPARE. The latter names a host-only
//     void NAME_prepare(NAME& e, const ft_reference& reference)
//   that fills the DERIVED fields once, before tracking, so both backends read identical numbers.
//   Write it inside `#ifndef FT_DEVICE_COMPILE`.
//
// Collective elements (they need the whole bunch; see plugin_abi.h) register with
//   FT_REGISTER_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)
// where JSON_FIELDS(JSON) lists host-only fields, JSON(name, required, unit, doc) with required
// 0 or 1, that are not in the struct (strings, lists of sources). The header then defines
//   FT_FUNCTION void NAME_kick(const NAME& e, double field, ft::ParticleView& p)
// (field: the solved field at the particle's zeta) and, host-only,
//   void NAME_create_model(const NAME& e, const char* json_definition, const char* base_directory,
//                          const ft_reference& reference, ft_collective_model& model)
// which throws std::exception with a message naming the field on bad input.
#pragma once
#include "fusetrack/device/collective.h"
#include "fusetrack/device/math.h"
#include "fusetrack/device/particle.h"
#include "fusetrack/device/qualifiers.h"

#define FT_MEMBER_REQUIRED_(type, name, unit, doc) type name;
#define FT_MEMBER_PARAM_(type, name, def, unit, doc) type name;
#define FT_MEMBER_ARRAY_(type, name, count, def, unit, doc) type name[count];
#define FT_MEMBER_DERIVED_(type, name, unit, doc) type name;

/// Declares the POD parameter struct NAME from its field list.
#define FT_ELEMENT_STRUCT(NAME, FIELDS) \
  struct NAME {                         \
    FIELDS(FT_MEMBER_REQUIRED_, FT_MEMBER_PARAM_, FT_MEMBER_ARRAY_, FT_MEMBER_DERIVED_) \
  };

#if defined(FT_DEVICE_COMPILE)

// On the device an element is its struct and its function; registration is host-only.
#define FT_REGISTER_ELEMENT(NAME, FIELDS, THICKNESS, PREPARE, DOC)
#define FT_REGISTER_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)

#else  // host

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

#include "fusetrack/plugin_abi.h"

namespace ft {
namespace element_sdk {

template <class T>
constexpr uint32_t field_type_code();
template <>
constexpr uint32_t field_type_code<double>() { return FT_FIELD_DOUBLE; }
template <>
constexpr uint32_t field_type_code<int32_t>() { return FT_FIELD_INT32; }

inline const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

inline int32_t find_length_field(const ft_field_desc* fields, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i)
    if (std::strcmp(fields[i].name, "length") == 0 && fields[i].count == 1 &&
        fields[i].type == FT_FIELD_DOUBLE)
      return static_cast<int32_t>(i);
  return -1;
}

inline void write_error(ft_error* error, const char* what) {
  if (error) std::snprintf(error->message, sizeof(error->message), "%s", what);
}

/// The CPU loop over one block of particles for one element: each alive particle is loaded into
/// a ParticleView, given to `f`, checked against the element limits and stored back; losses
/// record the turn and the element index. The framework owns this loop: element code sees one
/// particle. Exceptions become the plugin's error message.
template <class F>
int for_each_alive(ft_particle_block* b, ft_error* error, F&& f) {
  try {
    GlobalLimits limits{};
    limits.x = b->limit_x;
    limits.y = b->limit_y;
    // Distinct arrays: restrict lets the compiler drop the store-back of untouched coordinates.
    double* __restrict__ x = b->x;
    double* __restrict__ px = b->px;
    double* __restrict__ y = b->y;
    double* __restrict__ py = b->py;
    double* __restrict__ zeta = b->zeta;
    double* __restrict__ delta = b->delta;
    double* __restrict__ ptau = b->ptau;
    double* __restrict__ rpp = b->rpp;
    double* __restrict__ rvv = b->rvv;
    int32_t* __restrict__ state = b->state;
    const int64_t count = b->count;
    const double beta0 = b->beta0;
    for (int64_t i = 0; i < count; ++i) {
      if (state[i] <= 0) continue;
      ParticleView p{x[i], px[i], y[i], py[i], zeta[i], delta[i], ptau[i], rpp[i], rvv[i], beta0, state[i]};
      f(p);
      apply_element_limits(p, limits);
      x[i] = p.x;
      px[i] = p.px;
      y[i] = p.y;
      py[i] = p.py;
      zeta[i] = p.zeta;
      delta[i] = p.delta;
      ptau[i] = p.ptau;
      rpp[i] = p.rpp;
      rvv[i] = p.rvv;
      if (p.state <= 0) {
        state[i] = p.state;
        b->lost_turn[i] = b->turn;
        b->lost_element[i] = b->element_index;
      }
    }
    return 0;
  } catch (const std::exception& ex) {
    write_error(error, ex.what());
  } catch (...) {
    write_error(error, "unknown C++ exception");
  }
  return 1;
}

template <class E, void (*Track)(const E&, ParticleView&)>
int track_block(const void* params, ft_particle_block* b, ft_error* error) {
  const E& e = *static_cast<const E*>(params);
  return for_each_alive(b, error, [&e](ParticleView& p) { Track(e, p); });
}

/// The slice grid both backends bin with (inv_dz computed here, once, on the host).
inline SliceGrid make_slice_grid(const ft_profile_grid& g) {
  return SliceGrid{g.n_slices, g.linear, g.zeta_min, g.zeta_max,
                   static_cast<double>(g.n_slices) / (g.zeta_max - g.zeta_min)};
}

/// The CPU kick of a collective element over one block: the field at each alive particle's zeta,
/// then the element's kick (then the element limits, as for every element).
template <class E, void (*Kick)(const E&, double, ParticleView&)>
int kick_block(const void* params, const ft_slice_field* field, ft_particle_block* b, ft_error* error) {
  const E& e = *static_cast<const E*>(params);
  const SliceGrid grid = make_slice_grid(field->grid);
  return for_each_alive(b, error, [&](ParticleView& p) { Kick(e, slice_field_at(field->values, grid, p.zeta), p); });
}

template <class E, void (*Create)(const E&, const char*, const char*, const ft_reference&, ft_collective_model&)>
int create_model(const void* params, const char* json_definition, const char* base_directory,
                 const ft_reference* reference, ft_collective_model* model, ft_error* error) {
  try {
    Create(*static_cast<const E*>(params), json_definition, base_directory, *reference, *model);
    return 0;
  } catch (const std::exception& ex) {
    write_error(error, ex.what());
  } catch (...) {
    write_error(error, "unknown C++ exception");
  }
  return 1;
}

template <class E, void (*Prepare)(E&, const ft_reference&)>
int prepare(void* params, const ft_reference* reference, ft_error* error) {
  try {
    Prepare(*static_cast<E*>(params), *reference);
    return 0;
  } catch (const std::exception& ex) {
    write_error(error, ex.what());
  } catch (...) {
    write_error(error, "unknown C++ exception");
  }
  return 1;
}

/// Defined once per plugin by the SDK (plugin_entry.cpp); collects this plugin's types.
bool add_type(const ft_element_type_desc& desc);

}  // namespace element_sdk
}  // namespace ft

#define FT_FIELD_REQUIRED_(type, name, unit, doc) \
  {#name, unit, doc, static_cast<uint32_t>(offsetof(Self, name)), ::ft::element_sdk::field_type_code<type>(), 1u, FT_FIELD_INPUT, 0.0, 0},
#define FT_FIELD_PARAM_(type, name, def, unit, doc) \
  {#name, unit, doc, static_cast<uint32_t>(offsetof(Self, name)), ::ft::element_sdk::field_type_code<type>(), 1u, FT_FIELD_INPUT, static_cast<double>(def), 1},
#define FT_FIELD_ARRAY_(type, name, count, def, unit, doc) \
  {#name, unit, doc, static_cast<uint32_t>(offsetof(Self, name)), ::ft::element_sdk::field_type_code<type>(), static_cast<uint32_t>(count), FT_FIELD_INPUT, static_cast<double>(def), 1},
#define FT_FIELD_DERIVED_(type, name, unit, doc) \
  {#name, unit, doc, static_cast<uint32_t>(offsetof(Self, name)), ::ft::element_sdk::field_type_code<type>(), 1u, FT_FIELD_DERIVED, 0.0, 1},

#define FT_FIELD_JSON_(name, required, unit, doc) \
  {#name, unit, doc, 0u, FT_FIELD_JSON, 0u, FT_FIELD_INPUT, 0.0, (required) ? 0 : 1},

#define FT_ELEMENT_DESCRIPTOR_(NAME, FIELDS, THICKNESS, PREPARE, DOC)                                        \
  inline const ft_element_type_desc& ft_element_descriptor_##NAME() {                                 \
    using Self = NAME;                                                                                \
    static const ft_field_desc fields[] = {                                                           \
        FIELDS(FT_FIELD_REQUIRED_, FT_FIELD_PARAM_, FT_FIELD_ARRAY_, FT_FIELD_DERIVED_)};             \
    static const ft_element_type_desc desc = {                                                        \
        #NAME, DOC, #NAME "_track", ::ft::element_sdk::base_name(__FILE__),                           \
        static_cast<uint32_t>(sizeof(NAME)), static_cast<uint32_t>(alignof(NAME)), fields,           \
        static_cast<uint32_t>(sizeof(fields) / sizeof(fields[0])), static_cast<uint32_t>(THICKNESS),  \
        ::ft::element_sdk::find_length_field(fields, sizeof(fields) / sizeof(fields[0])), PREPARE,    \
        &::ft::element_sdk::track_block<NAME, &NAME##_track>, nullptr};                               \
    return desc;                                                                                      \
  }

#define FT_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                                  \
  inline const ft_element_type_desc& ft_element_descriptor_##NAME() {                                 \
    using Self = NAME;                                                                                \
    static const ft_field_desc fields[] = {                                                           \
        FIELDS(FT_FIELD_REQUIRED_, FT_FIELD_PARAM_, FT_FIELD_ARRAY_, FT_FIELD_DERIVED_)               \
        JSON_FIELDS(FT_FIELD_JSON_)};                                                                 \
    static const ft_collective_desc collective = {                                                    \
        #NAME "_kick", &::ft::element_sdk::create_model<NAME, &NAME##_create_model>,                  \
        &::ft::element_sdk::kick_block<NAME, &NAME##_kick>};                                          \
    static const ft_element_type_desc desc = {                                                        \
        #NAME, DOC, #NAME "_kick", ::ft::element_sdk::base_name(__FILE__),                            \
        static_cast<uint32_t>(sizeof(NAME)), static_cast<uint32_t>(alignof(NAME)), fields,           \
        static_cast<uint32_t>(sizeof(fields) / sizeof(fields[0])), static_cast<uint32_t>(FT_THIN),    \
        -1, PREPARE, nullptr, &collective};                                                           \
    return desc;                                                                                      \
  }

#if defined(FT_BUILDING_PLUGIN)
// Inside a plugin, including the header registers the type (once per shared library).
#define FT_ELEMENT_REGISTRAR_(NAME) \
  inline const bool ft_element_registered_##NAME = ::ft::element_sdk::add_type(ft_element_descriptor_##NAME());
#else
#define FT_ELEMENT_REGISTRAR_(NAME)
#endif

#define FT_PREPARE_FN_FT_NO_PREPARE(NAME) nullptr
#define FT_PREPARE_FN_FT_WITH_PREPARE(NAME) (&::ft::element_sdk::prepare<NAME, &NAME##_prepare>)

#define FT_REGISTER_ELEMENT(NAME, FIELDS, THICKNESS, PREPARE, DOC)                            \
  FT_ELEMENT_DESCRIPTOR_(NAME, FIELDS, THICKNESS, FT_PREPARE_FN_##PREPARE(NAME), DOC)          \
  FT_ELEMENT_REGISTRAR_(NAME)

#define FT_REGISTER_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                        \
  FT_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, FT_PREPARE_FN_##PREPARE(NAME), DOC)      \
  FT_ELEMENT_REGISTRAR_(NAME)

#endif  // host
