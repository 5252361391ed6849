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
// FT_ELEMENT_COORDINATES(NAME, READ, WRITTEN), optional, before FT_REGISTER_*: the coordinates the
// function reads and writes (enum ft_coordinate in plugin_abi.h), e.g. for the drift
//   FT_ELEMENT_COORDINATES(Drift, FT_COORD_PX | FT_COORD_PY | FT_COORD_RPP | FT_COORD_RVV | FT_COORD_X | FT_COORD_Y
//                                 | FT_COORD_ZETA, FT_COORD_X | FT_COORD_Y | FT_COORD_ZETA)
// so that a collective turn's kernels move only those. Without it the element gets every coordinate.
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
//
// Grid collective elements (space charge: charge on a grid, Poisson solve; plugin_abi.h) register with
//   FT_REGISTER_GRID_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)
// and define
//   FT_FUNCTION void NAME_kick(const NAME& e, const double field[3], ft::ParticleView& p)
// (field: E_x, E_y, E_z [V/m] of the bunch at the particle, laboratory frame) and, host-only,
//   void NAME_create_grid(const NAME& e, const char* json_definition, const char* base_directory,
//                         const ft_reference& reference, ft_grid_model& model)
//
// Slice-moment collective elements (transverse wakes, feedback: slice centroids; plugin_abi.h) register with
//   FT_REGISTER_MOMENTS_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)
// and define
//   FT_FUNCTION void NAME_kick(const NAME& e, const ft::SliceKick& k, ft::ParticleView& p)
// (k: the wake kicks and centroids of the particle's slice, fusetrack/device/slice_moments.h) and, host-only,
//   void NAME_create_moments(const NAME& e, const char* json_definition, const char* base_directory,
//                            const ft_reference& reference, ft_moments_model& model)
#pragma once
#include "fusetrack/device/collective.h"
#include "fusetrack/device/slice_moments.h"
#include "fusetrack/device/space_charge_grid.h"
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
#define FT_REGISTER_GRID_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)
#define FT_REGISTER_MOMENTS_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)
#define FT_ELEMENT_COORDINATES(NAME, READ, WRITTEN)

#else  // host

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <type_traits>
#include <utility>

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

/// Inlined into the CPU loops whatever GCC's inlining budget (the lane loops below vectorize only
/// when the element code is inlined into them).
#define FT_LANES_INLINE inline __attribute__((always_inline))
/// For a host function that runs element code over lanes (ParticleLanes): everything it calls is
/// inlined into it, so that its lane loops hold no call and vectorize.
#define FT_LANES_FUNCTION inline __attribute__((flatten))

/// Most particles one element call works on at a time (the CPU backend's blocks are 64).
constexpr int64_t kLaneChunk = 64;
/// ParticleLanes::count is a multiple of this (the widest vector, 8 doubles): no scalar remainder.
constexpr int64_t kLaneMultiple = 8;
/// A block is tracked in place, lost particles computed and dropped, when at least this many
/// eighths of it are alive; below, the alive particles are copied out and back (9 arrays each
/// way). Elements of one operation (a drift: a few cycles per particle) are cheaper to compute
/// for every particle than to copy; thick magnets (tens of operations) are worth compacting.
constexpr int64_t kInPlaceEighthsOneStep = 3;
constexpr int64_t kInPlaceEighthsLanes = 7;

}  // namespace element_sdk

/// Host only: the particles one element call works on, as arrays, for element code that is run
/// over all of them one operation at a time (an element that defines NAME_track_lanes; see
/// track_block). rv0v[i] is 1 / rvv[i], as in ParticleView. count is a multiple of
/// element_sdk::kLaneMultiple. Every lane is computed; a lane is stored back only where `live` is
/// null or live[i] != 0 (the particles alive when the element began): the other lanes (lost
/// particles, or copies of an alive particle that pad the count) are computed and dropped.
struct ParticleLanes {
  double* x;
  double* px;
  double* y;
  double* py;
  double* zeta;
  double* delta;
  double* ptau;
  double* rpp;
  double* rvv;
  double* rv0v;
  // kAlive on entry; a lane loop writes the state of each particle an element loses (<= 0).
  // Elements are given alive particles only, as ParticleViews of state kAlive (the one alive
  // state fusetrack uses), and say a particle is lost by setting state <= 0. Not read by the
  // lane loops: they then carry no 32-bit integers and vectorize with as many doubles per
  // vector as the machine has.
  int64_t* state;
  const int64_t* live;  // null: store every lane
  double beta0;
  int64_t count;
};

namespace element_sdk {

/// a where the mask is all ones, b where it is zero (bit for bit).
FT_LANES_INLINE double select_bits(uint64_t mask, double a, double b) {
  uint64_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  const uint64_t r = (ua & mask) | (ub & ~mask);
  double d;
  std::memcpy(&d, &r, sizeof d);
  return d;
}

/// f(p), an exception kept in `failure` (the first one) instead of thrown: used inside `omp simd`
/// loops, where a `try` may not stand (clang) and an exception may not leave an iteration (GCC).
template <class F>
FT_LANES_INLINE void call_catching(F& f, ParticleView& p, std::exception_ptr& failure) {
  try {
    f(p);
  } catch (...) {
    if (!failure) failure = std::current_exception();
  }
}

template <bool kMasked, class F>
FT_LANES_INLINE void for_each_lane_impl(ParticleLanes& l, F& f) {
  double* __restrict__ x = l.x;
  double* __restrict__ px = l.px;
  double* __restrict__ y = l.y;
  double* __restrict__ py = l.py;
  double* __restrict__ zeta = l.zeta;
  double* __restrict__ delta = l.delta;
  double* __restrict__ ptau = l.ptau;
  double* __restrict__ rpp = l.rpp;
  double* __restrict__ rvv = l.rvv;
  double* __restrict__ rv0v = l.rv0v;
  int64_t* __restrict__ state = l.state;
  const int64_t* __restrict__ live = l.live;
  const double beta0 = l.beta0;
  const int64_t n = l.count;
  if (n % kLaneMultiple != 0) __builtin_unreachable();
  // An exception must not leave an `omp simd` iteration (GCC terminates the program): the element's
  // exception is caught in its iteration and thrown again after the loop. For element code that
  // cannot throw the handler is dead code and the loop vectorizes as before.
  std::exception_ptr failure;
#pragma omp simd simdlen(8)
  for (int64_t i = 0; i < n; ++i) {
    ParticleView p;
    p.x = x[i];
    p.px = px[i];
    p.y = y[i];
    p.py = py[i];
    p.zeta = zeta[i];
    p.delta = delta[i];
    p.ptau = ptau[i];
    p.rpp = rpp[i];
    p.rvv = rvv[i];
    p.beta0 = beta0;
    p.state = kAlive;  // see ParticleLanes::state
    p.rv0v = rv0v[i];
    call_catching(f, p, failure);
    if (kMasked) {
      // Bit selects, not a branch: every lane's arithmetic stays unconditional (a trapping
      // operation under a condition vectorizes only with AVX-512's masking).
      const uint64_t keep = static_cast<uint64_t>(0) - static_cast<uint64_t>(live[i] != 0);
      x[i] = select_bits(keep, p.x, x[i]);
      px[i] = select_bits(keep, p.px, px[i]);
      y[i] = select_bits(keep, p.y, y[i]);
      py[i] = select_bits(keep, p.py, py[i]);
      zeta[i] = select_bits(keep, p.zeta, zeta[i]);
      delta[i] = select_bits(keep, p.delta, delta[i]);
      ptau[i] = select_bits(keep, p.ptau, ptau[i]);
      rpp[i] = select_bits(keep, p.rpp, rpp[i]);
      rvv[i] = select_bits(keep, p.rvv, rvv[i]);
      rv0v[i] = select_bits(keep, p.rv0v, rv0v[i]);
    } else {
      x[i] = p.x;
      px[i] = p.px;
      y[i] = p.y;
      py[i] = p.py;
      zeta[i] = p.zeta;
      delta[i] = p.delta;
      ptau[i] = p.ptau;
      rpp[i] = p.rpp;
      rvv[i] = p.rvv;
      rv0v[i] = p.rv0v;
    }
    if (p.state <= 0) state[i] = p.state;  // nothing to store for elements that lose no particle
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace element_sdk

/// Runs the per-particle function f on every lane: each lane is loaded into a ParticleView, given
/// to f and stored back. The loop vectorizes across particles (omp simd) when f is branch-free
/// enough: every particle still sees exactly the operations of f, in its order (IEEE, no
/// contraction, no reassociation), so the results are those of one particle at a time, bit for bit.
template <class F>
FT_LANES_INLINE void for_each_lane(ParticleLanes& l, F&& f) {
  if (l.live)
    element_sdk::for_each_lane_impl<true>(l, f);
  else
    element_sdk::for_each_lane_impl<false>(l, f);
}

namespace element_sdk {

/// The CPU loop over one block of particles for one element. Up to kLaneChunk particles of the
/// block become the lanes of a ParticleLanes: the block's own arrays when at least
/// `in_place_eighths` / 8 of them are alive (the lost ones are computed and not stored), else a
/// compacted copy of the alive ones padded to a multiple of kLaneMultiple. `g(lanes)` tracks them,
/// the element limits are checked and the alive particles are stored back; losses record the
/// turn and the element index. Per particle this is exactly what one particle at a time does
/// (ParticleView's rv0v = 1 / rvv on entry, the element, apply_element_limits), so the results
/// are the same bit for bit. The framework owns this loop: element code sees one particle, or
/// lanes. Exceptions become the plugin's error message.
template <class G>
int for_each_lanes_chunk(ft_particle_block* b, ft_error* error, int64_t in_place_eighths, G&& g) {
  try {
    GlobalLimits limits{};
    limits.x = b->limit_x;
    limits.y = b->limit_y;
    const double beta0 = b->beta0;
    for (int64_t first = 0; first < b->count; first += kLaneChunk) {
      const int64_t n = b->count - first < kLaneChunk ? b->count - first : kLaneChunk;
      const int32_t* state = b->state + first;
      int64_t m = 0;
      for (int64_t i = 0; i < n; ++i) m += state[i] > 0;
      if (m == 0) continue;
      const bool in_place = n % kLaneMultiple == 0 && 8 * m >= in_place_eighths * n;
      const int64_t lanes = in_place ? n : (m + kLaneMultiple - 1) / kLaneMultiple * kLaneMultiple;
      double* const block_arrays[9] = {b->x + first,    b->px + first,  b->y + first,   b->py + first, b->zeta + first,
                                       b->delta + first, b->ptau + first, b->rpp + first, b->rvv + first};
      alignas(64) int32_t index[kLaneChunk];
      alignas(64) double buffer[9][kLaneChunk];
      alignas(64) double rv0v[kLaneChunk];
      alignas(64) int64_t lane_state[kLaneChunk];
      alignas(64) int64_t live[kLaneChunk];
      ParticleLanes l;
      l.live = nullptr;
      double** const lane_arrays[9] = {&l.x, &l.px, &l.y, &l.py, &l.zeta, &l.delta, &l.ptau, &l.rpp, &l.rvv};
      if (in_place) {
        for (int k = 0; k < 9; ++k) *lane_arrays[k] = block_arrays[k];
        if (m < n) {
          for (int64_t i = 0; i < n; ++i) live[i] = state[i] > 0;
          l.live = live;
        }
      } else {
        // The alive particles, then copies of the first one up to a multiple of kLaneMultiple:
        // the padding lanes are computed with the others and never stored back.
        int64_t k = 0;
        for (int64_t i = 0; i < n; ++i) {
          index[k] = static_cast<int32_t>(i);
          k += state[i] > 0;
        }
        for (int64_t i = m; i < lanes; ++i) index[i] = index[0];
        for (int a = 0; a < 9; ++a) {
          const double* __restrict__ from = block_arrays[a];
          double* __restrict__ to = buffer[a];
          for (int64_t i = 0; i < lanes; ++i) to[i] = from[index[i]];
          *lane_arrays[a] = buffer[a];
        }
      }
      for (int64_t i = 0; i < lanes; ++i) lane_state[i] = kAlive;
      {
        const double* __restrict__ rvv = l.rvv;
        double* __restrict__ inv = rv0v;
#pragma omp simd simdlen(8)
        for (int64_t i = 0; i < lanes; ++i) inv[i] = 1.0 / rvv[i];
      }
      l.rv0v = rv0v;
      l.state = lane_state;
      l.beta0 = beta0;
      l.count = lanes;
      g(l);
      // The element limits; a loss counts for the particles alive when the element began.
      int32_t any_lost = 0;
      {
        const double* __restrict__ x = l.x;
        const double* __restrict__ y = l.y;
        int64_t* __restrict__ s = lane_state;
        const int32_t* __restrict__ entry = state;
#pragma omp simd simdlen(8) reduction(| : any_lost)
        for (int64_t i = 0; i < lanes; ++i) {
          ParticleView p;
          p.x = x[i];
          p.y = y[i];
          p.state = static_cast<int>(s[i]);
          apply_element_limits(p, limits);
          s[i] = p.state;
          const bool was_alive = in_place ? entry[i] > 0 : i < m;
          any_lost |= was_alive & (p.state <= 0);
        }
      }
      if (!in_place) {
        for (int a = 0; a < 9; ++a) {
          const double* __restrict__ from = buffer[a];
          double* __restrict__ to = block_arrays[a];
          for (int64_t i = 0; i < m; ++i) to[index[i]] = from[i];
        }
      }
      if (any_lost) {
        if (in_place)
          for (int64_t i = 0; i < n; ++i) index[i] = static_cast<int32_t>(i);
        for (int64_t i = 0; i < (in_place ? n : m); ++i) {
          const int64_t j = first + index[i];
          if (lane_state[i] <= 0 && b->state[j] > 0) {
            b->state[j] = static_cast<int32_t>(lane_state[i]);
            b->lost_turn[j] = b->turn;
            b->lost_element[j] = b->element_index;
          }
        }
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

/// The CPU loop over one block for a per-particle function f(ParticleView&): for_each_lanes_chunk
/// with f run lane by lane (a loop that vectorizes across particles where f allows).
template <class F>
int for_each_alive(ft_particle_block* b, ft_error* error, F&& f) {
  return for_each_lanes_chunk(b, error, kInPlaceEighthsOneStep, [&f](ParticleLanes& l) { for_each_lane(l, f); });
}

/// Whether element E has a host-only `void E_track_lanes(const E&, ft::ParticleLanes&)` (found
/// through Caller, which each registration defines): it runs the element one operation at a time
/// over all lanes (thick magnets: each drift and kick of the integrator as one vectorized loop
/// over the particles) instead of one particle at a time.
template <class Caller, class E, class = void>
struct has_lanes_track : std::false_type {};
template <class Caller, class E>
struct has_lanes_track<Caller, E,
                       std::void_t<decltype(Caller::track(std::declval<const E&>(), std::declval<ParticleLanes&>()))>>
    : std::true_type {};

template <class E, void (*Track)(const E&, ParticleView&), class Caller = void>
int track_block(const void* params, ft_particle_block* b, ft_error* error) {
  const E& e = *static_cast<const E*>(params);
  if constexpr (!std::is_void_v<Caller> && has_lanes_track<Caller, E>::value)
    return for_each_lanes_chunk(b, error, kInPlaceEighthsLanes, [&e](ParticleLanes& l) { Caller::track(e, l); });
  else
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

/// The grid of a solved field as the deposit used it (fusetrack/device/reduction.h).
inline ChargeGridSpec charge_grid_spec(const ft_grid_field& f) {
  ChargeGridSpec g;
  g.dims = f.dims;
  for (int d = 0; d < 3; ++d) {
    g.n[d] = f.n[d];
    g.min[d] = f.min[d];
    g.inv_d[d] = f.inv_d[d];
  }
  g.weight_bits = f.weight_bits;
  return g;
}

/// The CPU kick of a grid collective element over one block: the field at each alive particle
/// (cloud-in-cell from the nodes, charge_grid_field_at), then the element's kick for the particles
/// inside the grid (those outside were counted at the deposit), then the element limits.
template <class E, void (*Kick)(const E&, const double*, ParticleView&)>
int grid_kick_block(const void* params, const ft_grid_field* field, ft_particle_block* b, ft_error* error) {
  const E& e = *static_cast<const E*>(params);
  const ChargeGridSpec grid = charge_grid_spec(*field);
  return for_each_alive(b, error, [&](ParticleView& p) {
    const double pos[3] = {p.x, p.y, p.zeta};
    double f[3];
    if (charge_grid_field_at(grid, field->ex, field->ey, field->ez, pos, f)) Kick(e, f, p);
  });
}

/// The CPU kick of a slice-moment collective element over one block: the kick of each alive particle's
/// slice (nearest, as the deposit), then the element's kick (particles outside the cuts get none), then
/// the element limits.
template <class E, void (*Kick)(const E&, const SliceKick&, ParticleView&)>
int moments_kick_block(const void* params, const ft_slice_kicks* kicks, ft_particle_block* b, ft_error* error) {
  const E& e = *static_cast<const E*>(params);
  const SliceGrid grid = make_slice_grid(kicks->grid);
  return for_each_alive(b, error, [&](ParticleView& p) {
    const int k = slice_of_zeta(grid, p.zeta);
    if (k >= 0) Kick(e, slice_kick_at(kicks->values, k), p);
  });
}

template <class E, void (*Create)(const E&, const char*, const char*, const ft_reference&, ft_moments_model&)>
int create_moments(const void* params, const char* json_definition, const char* base_directory,
                   const ft_reference* reference, ft_moments_model* model, ft_error* error) {
  try {
    Create(*static_cast<const E*>(params), json_definition, base_directory, *reference, *model);
    return 0;
  } catch (const std::exception& ex) {
    write_error(error, ex.what());
  } catch (...) {
    write_error(error, "unknown C++ exception");
  }
  // A model half built before the error (its state allocated, a table then refused) is released here.
  if (model->state && model->destroy) model->destroy(model->state);
  model->state = nullptr;
  model->destroy = nullptr;
  return 1;
}

template <class E, void (*Create)(const E&, const char*, const char*, const ft_reference&, ft_grid_model&)>
int create_grid(const void* params, const char* json_definition, const char* base_directory,
                const ft_reference* reference, ft_grid_model* model, ft_error* error) {
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

/// The coordinates (enum ft_coordinate) element type E reads and writes; FT_ELEMENT_COORDINATES
/// declares them. Undeclared: 0, 0 (the framework then loads and stores every coordinate).
template <class E>
struct coordinate_use {
  static constexpr uint32_t read = 0u, written = 0u;
};

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
  struct ft_element_lanes_##NAME {                                                                    \
    template <class L>                                                                                \
    static auto track(const NAME& e, L& l) -> decltype(NAME##_track_lanes(e, l)) {                    \
      return NAME##_track_lanes(e, l);                                                                \
    }                                                                                                 \
  };                                                                                                  \
  inline const ft_element_type_desc& ft_element_descriptor_##NAME() {                                 \
    using Self = NAME;                                                                                \
    static const ft_field_desc fields[] = {                                                           \
        FIELDS(FT_FIELD_REQUIRED_, FT_FIELD_PARAM_, FT_FIELD_ARRAY_, FT_FIELD_DERIVED_)};             \
    static const ft_element_type_desc desc = {                                                        \
        #NAME, DOC, #NAME "_track", ::ft::element_sdk::base_name(__FILE__),                           \
        static_cast<uint32_t>(sizeof(NAME)), static_cast<uint32_t>(alignof(NAME)), fields,           \
        static_cast<uint32_t>(sizeof(fields) / sizeof(fields[0])), static_cast<uint32_t>(THICKNESS),  \
        ::ft::element_sdk::find_length_field(fields, sizeof(fields) / sizeof(fields[0])), PREPARE,    \
        &::ft::element_sdk::track_block<NAME, &NAME##_track, ft_element_lanes_##NAME>, nullptr,                                \
        ::ft::element_sdk::coordinate_use<NAME>::read, ::ft::element_sdk::coordinate_use<NAME>::written};                     \
    return desc;                                                                                      \
  }

// The descriptor of a collective type (thin, its kick NAME_kick); the variadic arguments initialise its
// ft_collective_desc (one of the three kinds below).
#define FT_COLLECTIVE_DESCRIPTOR_WITH_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC, ...)                                  \
  inline const ft_element_type_desc& ft_element_descriptor_##NAME() {                                                 \
    using Self = NAME;                                                                                                \
    static const ft_field_desc fields[] = {                                                                           \
        FIELDS(FT_FIELD_REQUIRED_, FT_FIELD_PARAM_, FT_FIELD_ARRAY_, FT_FIELD_DERIVED_) JSON_FIELDS(FT_FIELD_JSON_)}; \
    static const ft_collective_desc collective = {__VA_ARGS__};                                                       \
    static const ft_element_type_desc desc = {#NAME,                                                                  \
                                              DOC,                                                                    \
                                              #NAME "_kick",                                                          \
                                              ::ft::element_sdk::base_name(__FILE__),                                 \
                                              static_cast<uint32_t>(sizeof(NAME)),                                    \
                                              static_cast<uint32_t>(alignof(NAME)),                                   \
                                              fields,                                                                 \
                                              static_cast<uint32_t>(sizeof(fields) / sizeof(fields[0])),              \
                                              static_cast<uint32_t>(FT_THIN),                                         \
                                              -1,                                                                     \
                                              PREPARE,                                                                \
                                              nullptr,                                                                \
                                              &collective,                                                            \
                                              ::ft::element_sdk::coordinate_use<NAME>::read,                          \
                                              ::ft::element_sdk::coordinate_use<NAME>::written};                      \
    return desc;                                                                                                      \
  }

#define FT_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                                           \
  FT_COLLECTIVE_DESCRIPTOR_WITH_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC, #NAME "_kick",                             \
                                 &::ft::element_sdk::create_model<NAME, &NAME##_create_model>,                       \
                                 &::ft::element_sdk::kick_block<NAME, &NAME##_kick>, FT_COLLECTIVE_PROFILE, nullptr, \
                                 nullptr, nullptr, nullptr)

#define FT_GRID_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                                  \
  FT_COLLECTIVE_DESCRIPTOR_WITH_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC, #NAME "_kick", nullptr, nullptr,       \
                                 FT_COLLECTIVE_GRID, &::ft::element_sdk::create_grid<NAME, &NAME##_create_grid>, \
                                 &::ft::element_sdk::grid_kick_block<NAME, &NAME##_kick>, nullptr, nullptr)

#define FT_MOMENTS_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                         \
  FT_COLLECTIVE_DESCRIPTOR_WITH_(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC, #NAME "_kick", nullptr, nullptr, \
                                 FT_COLLECTIVE_MOMENTS, nullptr, nullptr,                                  \
                                 &::ft::element_sdk::create_moments<NAME, &NAME##_create_moments>,         \
                                 &::ft::element_sdk::moments_kick_block<NAME, &NAME##_kick>)

#if defined(FT_BUILDING_PLUGIN)
// Inside a plugin, including the header registers the type (once per shared library).
#define FT_ELEMENT_REGISTRAR_(NAME) \
  inline const bool ft_element_registered_##NAME = ::ft::element_sdk::add_type(ft_element_descriptor_##NAME());
#else
#define FT_ELEMENT_REGISTRAR_(NAME)
#endif

// FT_ELEMENT_COORDINATES(NAME, READ, WRITTEN), before FT_REGISTER_*: the coordinates NAME_track (or
// NAME_kick) reads and writes, as ft_coordinate masks. A wrong declaration gives wrong results on the
// GPU: tests/test_coordinate_use.cpp checks every built-in type's against tracking.
#define FT_ELEMENT_COORDINATES(NAME, READ, WRITTEN)                                  \
  template <>                                                                       \
  struct ft::element_sdk::coordinate_use<NAME> {                                    \
    static constexpr uint32_t read = static_cast<uint32_t>(READ) | FT_COORD_DECLARED; \
    static constexpr uint32_t written = static_cast<uint32_t>(WRITTEN);             \
  };

#define FT_PREPARE_FN_FT_NO_PREPARE(NAME) nullptr
#define FT_PREPARE_FN_FT_WITH_PREPARE(NAME) (&::ft::element_sdk::prepare<NAME, &NAME##_prepare>)

#define FT_REGISTER_ELEMENT(NAME, FIELDS, THICKNESS, PREPARE, DOC)                            \
  FT_ELEMENT_DESCRIPTOR_(NAME, FIELDS, THICKNESS, FT_PREPARE_FN_##PREPARE(NAME), DOC)          \
  FT_ELEMENT_REGISTRAR_(NAME)

#define FT_REGISTER_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                        \
  FT_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, FT_PREPARE_FN_##PREPARE(NAME), DOC)      \
  FT_ELEMENT_REGISTRAR_(NAME)

#define FT_REGISTER_GRID_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                  \
  FT_GRID_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, FT_PREPARE_FN_##PREPARE(NAME), DOC)  \
  FT_ELEMENT_REGISTRAR_(NAME)

#define FT_REGISTER_MOMENTS_COLLECTIVE_ELEMENT(NAME, FIELDS, JSON_FIELDS, PREPARE, DOC)                 \
  FT_MOMENTS_COLLECTIVE_DESCRIPTOR_(NAME, FIELDS, JSON_FIELDS, FT_PREPARE_FN_##PREPARE(NAME), DOC) \
  FT_ELEMENT_REGISTRAR_(NAME)

#endif  // host
