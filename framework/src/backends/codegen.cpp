#include "fusetrack/codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "fusetrack/collective.h"
#include "fusetrack/device/reduction.h"
#include "fusetrack/device/transform.h"
#include "fusetrack/error.h"
#include "fusetrack/motifs.h"
#include "fusetrack/transform.h"

extern "C" const ft_source_file ft_core_device_headers[];
extern "C" const uint32_t ft_core_device_headers_count;

namespace ft {

std::map<std::string, std::string> framework_device_headers() {
  std::map<std::string, std::string> out;
  for (uint32_t i = 0; i < ft_core_device_headers_count; ++i)
    out[ft_core_device_headers[i].include_name] = ft_core_device_headers[i].text;
  return out;
}

const char* dispatch_name(Dispatch dispatch) {
  switch (dispatch) {
    case Dispatch::Auto:
      return "auto";
    case Dispatch::Switch:
      return "switch";
    case Dispatch::Baked:
      return "baked";
    case Dispatch::Staged:
      return "staged";
  }
  return "?";
}

bool parse_dispatch(const std::string& name, Dispatch& out) {
  for (Dispatch d : {Dispatch::Auto, Dispatch::Switch, Dispatch::Baked, Dispatch::Staged})
    if (name == dispatch_name(d)) {
      out = d;
      return true;
    }
  return false;
}

Dispatch choose_dispatch(const Lattice& lattice, Dispatch requested) {
  if (requested != Dispatch::Auto) return requested;
  return bakeable(lattice) ? Dispatch::Baked : Dispatch::Switch;
}

size_t baked_parameter_words(const Lattice& lattice) {
  size_t words = 0;
  for (const auto& entry : lattice.sequence())
    words += (lattice.definitions()[entry.definition].type->param_size + 7) / 8;
  return words;
}

bool bakeable(const Lattice& lattice) {
  size_t large = 0;
  for (const auto& entry : lattice.sequence()) large += lattice.definitions()[entry.definition].type->large_code;
  return lattice.sequence().size() <= kBakedMaxElements && baked_parameter_words(lattice) <= kBakedMaxParameterWords &&
         large <= kBakedMaxLargeCodeElements;
}

namespace {

/// Exact decimal-free spelling of a double for the generated source (hex float literal).
std::string double_literal(double v) {
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  return fmt::format("{:a}", v);
}

/// Aggregate initialiser of an element's struct from its packed parameter bytes, in field order.
std::string struct_initializer(const ElementType& type, const unsigned char* params) {
  std::vector<const FieldInfo*> fields;
  for (const auto& f : type.fields)
    if (!f.host_only()) fields.push_back(&f);  // host-only JSON fields are not in the struct
  std::sort(fields.begin(), fields.end(), [](const FieldInfo* a, const FieldInfo* b) { return a->offset < b->offset; });
  std::string s = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldInfo& f = *fields[i];
    if (i) s += ", ";
    if (f.count > 1) s += "{";
    for (uint32_t k = 0; k < f.count; ++k) {
      if (k) s += ", ";
      const unsigned char* at = params + f.offset + k * f.element_size();
      if (f.type == FT_FIELD_INT32) {
        int32_t v;
        std::memcpy(&v, at, 4);
        s += fmt::format("{}", v);
      } else {
        double v;
        std::memcpy(&v, at, 8);
        s += double_literal(v);
      }
    }
    if (f.count > 1) s += "}";
  }
  return s + "}";
}

const char* kParticleArrays = R"(
struct FtParticleArrays {
  double* x; double* px; double* y; double* py; double* zeta; double* delta;
  double* ptau; double* rpp; double* rvv;
  int* state; int* lost_turn; long long* lost_element;
};
)";

// The start of a fused kernel; kernel_function puts in its name for FT_KERNEL_NAME.
const char* kKernelPrologue = R"(
// One thread per particle. The particle stays in registers for every element of every turn;
// a lost particle stops and records its turn and element.
extern "C" __global__ void __launch_bounds__(128) FT_KERNEL_NAME(
    FtParticleArrays P, const unsigned int* __restrict__ steps, const unsigned char* __restrict__ params,
    int n_particles, double beta0, int element_begin, int element_end, int n_elements,
    int first_turn, int n_turns, ft::GlobalLimits limits, const int* __restrict__ variant,
    unsigned long long variant_stride) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_particles) return;
  if (P.state[i] <= 0) return;
  // Lattice variants: the particle reads its variant's copy of the parameter table.
  if (variant) params += variant[i] * variant_stride;
  ft::ParticleView p{P.x[i], P.px[i], P.y[i], P.py[i], P.zeta[i], P.delta[i],
                     P.ptau[i], P.rpp[i], P.rvv[i], beta0, P.state[i]};
  int turn = first_turn;
  int lost_at = -1;
  for (int t = 0; t < n_turns; ++t) {
    turn = first_turn + t;
)";

const char* kKernelEpilogue = R"(
    if (element_end == n_elements) {
      ft::apply_turn_limits(p, limits);
      if (p.state <= 0) { lost_at = n_elements - 1; goto done; }
    }
  }
done:
  P.x[i] = p.x; P.px[i] = p.px; P.y[i] = p.y; P.py[i] = p.py; P.zeta[i] = p.zeta; P.delta[i] = p.delta;
  P.ptau[i] = p.ptau; P.rpp[i] = p.rpp; P.rvv[i] = p.rvv; P.state[i] = p.state;
  if (p.state <= 0) { P.lost_turn[i] = turn; P.lost_element[i] = lost_at; }
}
)";

/// A fused kernel named `name` whose turn loop runs `turn_body` (the elements of one turn).
std::string kernel_function(const char* name, const std::string& turn_body) {
  std::string prologue = kKernelPrologue;
  prologue.replace(prologue.find("FT_KERNEL_NAME"), std::strlen("FT_KERNEL_NAME"), name);
  return prologue + turn_body + kKernelEpilogue;
}

}  // namespace

namespace {

/// The most words of `definition`'s transformation block over the lattices; 0 when none has one.
uint32_t transform_words_over_variants(const std::vector<const Lattice*>& lattices, uint32_t definition) {
  uint32_t words = 0;
  for (const Lattice* l : lattices)
    if (const std::vector<uint64_t>* block = l->transform_block(definition))
      words = std::max(words, static_cast<uint32_t>(block->size()));
  return words;
}

/// The types used with a transformation (their own switch cases, after the plain ones).
void add_transformed_types(const Lattice& lattice, KernelSource& src, const std::vector<const Lattice*>& variants) {
  // With variants, a definition takes the transformed case when any variant transforms it (the
  // others then carry an empty transformation: no operations, the same arithmetic as untransformed).
  std::vector<const Lattice*> lattices = variants;
  if (lattices.empty()) lattices.push_back(&lattice);
  bool any = false;
  for (const Lattice* l : lattices) any |= l->has_transforms();
  if (!any) return;
  std::vector<bool> seen(lattice.definitions().size(), false);
  for (const auto& entry : lattice.sequence()) {
    if (seen[entry.definition]) continue;
    seen[entry.definition] = true;
    const ElementDefinition& def = lattice.definitions()[entry.definition];
    if (def.type->is_collective()) continue;
    const uint32_t block_words = transform_words_over_variants(lattices, entry.definition);
    if (block_words == 0) continue;
    const uint32_t words = block_words + (def.type->param_size + 7) / 8;
    // The operations when every variant transforms the definition with the same ones (and block size).
    uint64_t operations = kMixedTransforms;
    for (size_t v = 0; v < lattices.size(); ++v) {
      const std::vector<uint64_t>* block = lattices[v]->transform_block(entry.definition);
      const uint64_t ops = block && block->size() == block_words ? (*block)[0] & 0xffffffffffffull : kMixedTransforms;
      operations = v == 0 || ops == operations ? ops : kMixedTransforms;
    }
    auto it = std::find(src.transformed_types.begin(), src.transformed_types.end(), def.type);
    if (it == src.transformed_types.end()) {
      src.transformed_types.push_back(def.type);
      src.transformed_words.push_back(words);
      src.transformed_operations.push_back(operations);
    } else {
      const size_t j = static_cast<size_t>(it - src.transformed_types.begin());
      if (src.transformed_words[j] != words || src.transformed_operations[j] != operations)
        src.transformed_operations[j] = kMixedTransforms;
      src.transformed_words[j] = std::max(src.transformed_words[j], words);
    }
  }
  if (src.types.size() + src.transformed_types.size() > 255)
    throw Error("a fused kernel supports at most 255 element types per lattice (transformed types count twice)");
}

/// The track call of one element in a baked kernel: with a transformation, its block as constants
/// and the call between transform_entry and transform_exit (as the switch cases do).
std::string baked_track_call(const Lattice& lattice, uint32_t definition) {
  const ElementDefinition& def = lattice.definitions()[definition];
  const std::vector<uint64_t>* block = lattice.transform_block(definition);
  if (!block) return fmt::format("{}(el, p);", def.type->track_function);
  std::string words;
  for (uint64_t w : *block) words += fmt::format("{}0x{:x}ull", words.empty() ? "" : ", ", w);
  return fmt::format(
      "const unsigned long long tr[] = {{{}}}; ft::transform_entry(reinterpret_cast<const unsigned char*>(tr), p); "
      "{}(el, p); ft::transform_exit(reinterpret_cast<const unsigned char*>(tr), p);",
      words, def.type->track_function);
}

/// The parts every generated source shares: headers, includes and layout checks.
std::string source_preamble(const Lattice& lattice, KernelSource& src, FmaMode fma,
                            const std::vector<const Lattice*>& variants = {}) {
  src.fma = fma;
  src.types = lattice.types_used();
  if (src.types.size() > 255) throw Error("a fused kernel supports at most 255 element types per lattice");
  src.headers = framework_device_headers();
  for (const ElementType* t : src.types) {
    const std::string* text = t->plugin->header(t->header);
    if (!text)
      throw Error(
          fmt::format("element type {}: header {} missing from plugin {}", t->name, t->header, t->plugin->file()));
    src.headers[t->header] = *text;
    for (const auto& [name, body] : t->plugin->headers()) src.headers[name] = body;  // the header's own includes
    std::string& origin = src.header_origin[t->header];
    if (origin.empty())
      origin = fmt::format("plugin {} ({}): types {}", t->plugin->name(), t->plugin->file(), t->name);
    else
      origin += ", " + t->name;
  }

  std::string s;
  s += "// Generated by fusetrack: one fused tracking kernel for one lattice.\n";
  s += fmt::format("// lattice: {} ({} elements, {} definitions)\n", lattice.source_file(), lattice.sequence().size(),
                   lattice.definitions().size());
  s += fmt::format("// dispatch: {}, fma: {}\n", dispatch_name(src.dispatch),
                   fma == FmaMode::On ? "on (CUDA math, contraction)" : "off (portable math, no contraction)");
  if (fma == FmaMode::On) s += "#define FT_DEVICE_FAST_MATH 1\n";
  s += "#include \"fusetrack/device/element.h\"\n";
  for (const ElementType* t : src.types) s += fmt::format("#include \"{}\"\n", t->header);
  add_transformed_types(lattice, src, variants);
  if (!src.transformed_types.empty()) s += "#include \"fusetrack/device/transform.h\"\n";
  s += "\n// The device structs must have the layout the host plugins gave the packed parameters.\n";
  for (const ElementType* t : src.types)
    s += fmt::format(
        "static_assert(sizeof({0}) == {1} && alignof({0}) == {2}, \"{0}: device layout differs from the host plugin's "
        "({1} bytes)\");\n",
        t->name, t->param_size, t->param_align);
  return s;
}

/// A transformation's operations `ops` as calls with constant operations and value offsets (from `first`)
/// on the ParticleView named `particle`.
std::string fixed_transform_calls(uint64_t ops, int first, const char* particle) {
  std::string s;
  for (; ops != 0; ops >>= 4) {
    const unsigned operation = static_cast<unsigned>(ops & 15u);
    s += fmt::format(" ft::transform_operation({}, ft_v + {}, {});", operation, first, particle);
    first += transform_value_count(operation);
  }
  return s;
}

/// The statement that tracks one element of switch case `case_id` with its parameter block at `prm` (an
/// expression). `fixed`: assignments of integer fields (`ft_s.order = 2;`) to a copy of the parameters,
/// which the compiler then sees as constants (motifs); "" for none. `particle`: the ParticleView it moves.
std::string element_call(const KernelSource& src, size_t case_id, const std::string& prm, const std::string& fixed,
                         const char* particle = "p") {
  auto call = [&fixed, particle](const ElementType* t, const std::string& at) {
    if (fixed.empty())
      return fmt::format("{}(*reinterpret_cast<const {}*>({}), {});", t->track_function, t->name, at, particle);
    return fmt::format("{{ {} ft_s = *reinterpret_cast<const {}*>({});{} {}(ft_s, {}); }}", t->name, t->name, at, fixed,
                       t->track_function, particle);
  };
  if (case_id < src.types.size()) return call(src.types[case_id], prm);
  // Transformed elements: [transformation block][element parameters] (fusetrack/device/transform.h).
  const size_t j = case_id - src.types.size();
  const ElementType* t = src.transformed_types[j];
  const uint64_t operations = src.transformed_operations[j];
  if (operations == kMixedTransforms)
    return fmt::format(
        "{{ const unsigned char* own = ft::transform_entry({0}, {2}); {1} ft::transform_exit({0}, {2}); }}", prm,
        call(t, "own"), particle);
  const int entry_values = transform_values_of(operations & 0xffffffull);
  const int exit_values = transform_values_of((operations >> 24) & 0xffffffull);
  return fmt::format("{{ const double* ft_v = reinterpret_cast<const double*>({}) + 1;{} {}{} }}", prm,
                     fixed_transform_calls(operations & 0xffffffull, 0, particle),
                     call(t, fmt::format("{} + {}", prm, 8 * (1 + entry_values + exit_values))),
                     fixed_transform_calls((operations >> 24) & 0xffffffull, entry_values, particle));
}

/// The switch case of `definition`: its type's, or its transformed type's when a variant transforms it.
uint32_t switch_case_id(const KernelSource& source, const std::vector<const Lattice*>& lattices, const Lattice& lattice,
                        uint32_t definition) {
  const ElementDefinition& def = lattice.definitions()[definition];
  if (!def.type->is_collective() && transform_words_over_variants(lattices, definition) > 0)
    return static_cast<uint32_t>(
        source.types.size() + (std::find(source.transformed_types.begin(), source.transformed_types.end(), def.type) -
                               source.transformed_types.begin()));
  return static_cast<uint32_t>(std::find(source.types.begin(), source.types.end(), def.type) - source.types.begin());
}

/// The switch over element types of the switch kernel (collective types have no track function).
std::string switch_cases(const KernelSource& src, const char* indent) {
  std::string s;
  for (size_t k = 0; k < src.types.size() + src.transformed_types.size(); ++k) {
    if (k < src.types.size() && src.types[k]->is_collective()) continue;
    s += fmt::format("{}case {}: {} break;\n", indent, k, element_call(src, k, "prm", ""));
  }
  return s;
}

/// One element of the switch kernel's loop: the switch on its step `cur`, then the limits.
std::string single_element_dispatch(const KernelSource& src, const std::string& indent) {
  std::string s = indent + "switch (cur >> 24) {\n";
  s += switch_cases(src, (indent + "  ").c_str());
  s += indent + "  default: break;\n" + indent + "}\n";
  s += indent + "ft::apply_element_limits(p, limits);\n";
  s += indent + "if (p.state <= 0) { lost_at = e; goto done; }\n";
  return s;
}

/// The motif keys (motifs.h) of a lattice: per sequence position the switch case and the integer
/// fields that hold the same value in every variant, interned.
struct MotifKeys {
  std::vector<uint32_t> at;        // per sequence position (kNoMotifKey for collective elements)
  std::vector<uint32_t> case_id;   // per key
  std::vector<std::string> fixed;  // per key: assignments of its fixed integer fields (element_call)
  std::vector<bool> worth_alone;   // per key: it fixes an integer field
};

/// The largest parameter struct whose integer fields a motif fixes (a thin multipole with its radiation
/// switch: 168 bytes).
constexpr uint32_t kMotifMaxCopiedBytes = 176;

MotifKeys motif_keys(const Lattice& lattice, const KernelSource& src, const std::vector<const Lattice*>& lattices) {
  MotifKeys k;
  std::map<std::pair<uint32_t, std::string>, uint32_t> ids;
  std::vector<uint32_t> of_definition(lattice.definitions().size(), UINT32_MAX);
  for (const auto& entry : lattice.sequence()) {
    uint32_t& id = of_definition[entry.definition];
    if (id == UINT32_MAX) {
      const ElementDefinition& def = lattice.definitions()[entry.definition];
      if (def.type->is_collective()) {
        id = kNoMotifKey;
      } else {
        // Fixing a field takes a copy of the parameters; a large copy (a thick magnet's hundreds of bytes,
        // indexed in loops) would live in local memory, so those are read in place.
        std::string fixed;
        for (const FieldInfo& f : def.type->fields) {
          if (f.type != FT_FIELD_INT32 || f.count != 1 || def.type->param_size > kMotifMaxCopiedBytes) continue;
          int32_t value = 0;
          bool same = true;
          for (size_t v = 0; v < lattices.size(); ++v) {
            int32_t x;
            std::memcpy(&x, lattices[v]->params(entry.definition) + f.offset, sizeof x);
            same &= v == 0 || x == value;
            value = x;
          }
          if (same) fixed += fmt::format(" ft_s.{} = {};", f.name, value);
        }
        const uint32_t case_id = switch_case_id(src, lattices, lattice, entry.definition);
        const auto [it, inserted] =
            ids.emplace(std::make_pair(case_id, fixed), static_cast<uint32_t>(k.case_id.size()));
        if (inserted) {
          k.case_id.push_back(case_id);
          k.worth_alone.push_back(!fixed.empty());
          k.fixed.push_back(std::move(fixed));
        }
        id = it->second;
      }
    }
    k.at.push_back(id);
  }
  return k;
}

/// Whether switch case `case_id` may change x or y (a transformed case may: its shifts and rotations).
bool writes_x_or_y(const KernelSource& src, uint32_t case_id) {
  return case_id >= src.types.size() || (src.types[case_id]->coordinates_written & (FT_COORD_X | FT_COORD_Y)) != 0;
}

/// The motif cases: element j of an occurrence starting at e reads its block through steps[e + j].
/// `checked` (the kernel for many particles): the limits are checked after every element with a branch
/// out, as in the single-element cases. Otherwise (the kernel for few particles, latency-bound) an
/// occurrence runs to its end without a branch, so that its elements' loads and arithmetic overlap: the
/// x/y limits are tested after every element that may move x or y (ft_inside), and a particle outside
/// them or marked lost anywhere in it gets back the coordinates it had at the occurrence's start
/// (ft_start) and runs the occurrence again one element at a time: the same arithmetic up to the loss,
/// so the same coordinates, state and loss element as the checked form.
std::string motif_cases(const KernelSource& src, const MotifKeys& keys, const MotifPlan& plan, const char* indent,
                        bool checked) {
  std::string s;
  for (size_t m = 0; m < plan.motifs.size(); ++m) {
    const std::vector<uint32_t>& motif = plan.motifs[m];
    s += fmt::format("{}case {}: {{\n", indent, m + 1);
    for (size_t j = 1; j < motif.size(); ++j)
      s +=
          fmt::format("{}  const unsigned char* ft_p{} = params + ((steps[e + {}] & 0xffffffu) << 3);\n", indent, j, j);
    for (size_t j = 0; j < motif.size(); ++j) {
      const uint32_t case_id = keys.case_id[motif[j]];
      const std::string call = element_call(src, case_id, j ? fmt::format("ft_p{}", j) : "prm", keys.fixed[motif[j]]);
      if (checked)
        s += fmt::format(
            "{}  {} ft::apply_element_limits(p, limits); if (p.state <= 0) {{ lost_at = e + {}; goto done; }}\n",
            indent, call, j);
      else if (writes_x_or_y(src, case_id))
        s += fmt::format("{}  {} ft_inside &= ft::inside_element_limits(p, limits);\n", indent, call);
      else  // x and y as after the last test: its result stands
        s += fmt::format("{}  {}\n", indent, call);
    }
    // An element may also mark the particle lost itself (an aperture).
    if (!checked) s += fmt::format("{}  ft_replay = !ft_inside | (p.state <= 0);\n", indent);
    s += fmt::format("{}}} break;\n", indent);
  }
  return s;
}

/// Whether the switch kernel gets motifs: on unless FUSETRACK_MOTIFS=0 (the benchmarks' baseline).
bool motifs_enabled() {
  const char* v = std::getenv("FUSETRACK_MOTIFS");
  return !(v && std::string(v) == "0");
}

}  // namespace

namespace {

/// The staged switch kernel: all threads of a block walk the same elements, so the block loads
/// the steps and parameter blocks of the next kStagedChunk elements into shared memory together
/// (many independent loads in flight instead of one dependent load per element), then every
/// thread runs them from there. Lost particles keep helping with the loads; a block stops when
/// all its particles are lost. The arithmetic is the switch kernel's: results are identical.
std::string staged_kernel(const KernelSource& src) {
  // A type whose parameter block exceeds kMaxStagedWords (a sliced beam-beam lens: kilobytes) is read from
  // global memory where it runs, so the block's static shared memory stays within the launch limit; its word
  // count is written as 0 (nothing staged) and the kernel points its function at the global block.
  constexpr uint32_t kMaxStagedWords = 64;
  uint32_t slot_words = 1;
  std::vector<uint32_t> all_words;
  for (const auto* type : src.types) all_words.push_back((type->param_size + 7) / 8);
  for (uint32_t w : src.transformed_words) all_words.push_back(w);
  std::string words = "{";
  for (size_t k = 0; k < all_words.size(); ++k) {
    const uint32_t w = all_words[k] <= kMaxStagedWords ? all_words[k] : 0;
    slot_words = std::max(slot_words, w);
    words += fmt::format("{}{}", k ? ", " : "", w);
  }
  words += "}";
  std::string s = R"(
struct FtParticleArrays {
  double* x; double* px; double* y; double* py; double* zeta; double* delta;
  double* ptau; double* rpp; double* rvv;
  int* state; int* lost_turn; long long* lost_element;
};
)";
  s += fmt::format("constexpr int kChunk = {};\nconstexpr int kSlotWords = {};\n", kStagedChunk, slot_words);
  s += fmt::format("__device__ __constant__ unsigned char kParamWords[{}] = {};\n",
                   std::max<size_t>(src.types.size() + src.transformed_types.size(), 1),
                   src.types.empty() ? std::string("{0}") : words);
  s += R"(
extern "C" __global__ void __launch_bounds__(128) fusetrack_track(
    FtParticleArrays P, const unsigned int* __restrict__ steps, const unsigned char* __restrict__ params,
    int n_particles, double beta0, int element_begin, int element_end, int n_elements,
    int first_turn, int n_turns, ft::GlobalLimits limits, const int* __restrict__ variant,
    unsigned long long variant_stride) {
  // Staged parameters are shared by the block: no lattice variants (the switch form runs those).
  (void)variant;
  (void)variant_stride;
  __shared__ unsigned int s_step[kChunk];
  __shared__ unsigned long long s_param[kChunk * kSlotWords];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool has_particle = i < n_particles && P.state[i] > 0;
  bool active = has_particle;
  ft::ParticleView p{};
  if (has_particle)
    p = ft::ParticleView{P.x[i], P.px[i], P.y[i], P.py[i], P.zeta[i], P.delta[i],
                         P.ptau[i], P.rpp[i], P.rvv[i], beta0, P.state[i]};
  int turn = first_turn, lost_at = -1, lost_turn = first_turn;
  if (!__syncthreads_or(active)) return;
  for (int t = 0; t < n_turns; ++t) {
    turn = first_turn + t;
    for (int chunk = element_begin; chunk < element_end; chunk += kChunk) {
      const int count = element_end - chunk < kChunk ? element_end - chunk : kChunk;
      // Stage: thread k loads word k % kSlotWords of element k / kSlotWords (when the type has it).
      for (int k = threadIdx.x; k < count * kSlotWords; k += blockDim.x) {
        const int el = k / kSlotWords, w = k - el * kSlotWords;
        const unsigned int step = steps[chunk + el];
        if (w == 0) s_step[el] = step;
        if (w < kParamWords[step >> 24])
          s_param[k] = reinterpret_cast<const unsigned long long*>(params + ((step & 0xffffffu) << 3))[w];
      }
      __syncthreads();
      if (active) {
        for (int el = 0; el < count; ++el) {
          const unsigned int cur = s_step[el];
          const unsigned char* prm = kParamWords[cur >> 24] == 0
                                         ? params + ((cur & 0xffffffu) << 3)
                                         : reinterpret_cast<const unsigned char*>(s_param + el * kSlotWords);
          switch (cur >> 24) {
)";
  s += switch_cases(src, "            ");
  s += R"(            default: break;
          }
          ft::apply_element_limits(p, limits);
          if (p.state <= 0) {
            lost_at = chunk + el;
            lost_turn = turn;
            active = false;
            break;
          }
        }
      }
      if (!__syncthreads_or(active)) goto done;
    }
    if (active && element_end == n_elements) {
      ft::apply_turn_limits(p, limits);
      if (p.state <= 0) { lost_at = n_elements - 1; lost_turn = turn; active = false; }
    }
    if (!__syncthreads_or(active)) goto done;
  }
done:
  if (!has_particle) return;
  P.x[i] = p.x; P.px[i] = p.px; P.y[i] = p.y; P.py[i] = p.py; P.zeta[i] = p.zeta; P.delta[i] = p.delta;
  P.ptau[i] = p.ptau; P.rpp[i] = p.rpp; P.rvv[i] = p.rvv; P.state[i] = p.state;
  if (p.state <= 0) { P.lost_turn[i] = lost_turn; P.lost_element[i] = lost_at; }
}
)";
  return s;
}

}  // namespace

namespace {

// Two particles per thread (KernelSource::particles_per_thread = 2): the switch kernels with each element's
// function called for particle a, then for particle b, in the same step.

/// Loading and storing one particle of the arrays (its loss turn and element when it is lost).
const char* kPairHelpers = R"(
__device__ __forceinline__ ft::ParticleView ft_load_particle(const FtParticleArrays& P, int i, double beta0) {
  return ft::ParticleView{P.x[i], P.px[i], P.y[i], P.py[i], P.zeta[i], P.delta[i],
                          P.ptau[i], P.rpp[i], P.rvv[i], beta0, P.state[i]};
}
__device__ __forceinline__ void ft_store_particle(const FtParticleArrays& P, int i, const ft::ParticleView& p,
                                                  int turn, int lost_at) {
  P.x[i] = p.x; P.px[i] = p.px; P.y[i] = p.y; P.py[i] = p.py; P.zeta[i] = p.zeta; P.delta[i] = p.delta;
  P.ptau[i] = p.ptau; P.rpp[i] = p.rpp; P.rvv[i] = p.rvv; P.state[i] = p.state;
  if (p.state <= 0) { P.lost_turn[i] = turn; P.lost_element[i] = lost_at; }
}
)";

/// The start of a pair kernel named `name`, up to the turn loop's first statement. With `variants` each
/// particle reads its own variant's table (params_a, params_b); without, both read the one table.
std::string pair_kernel_prologue(const char* name, bool variants) {
  std::string s = R"(
// Two particles per thread, a and b, through the same elements: each element's step and parameter offset are
// read once and its function runs for a, then for b (two independent chains of operations in one thread).
// A lost particle is stored at once and the other takes its place: the thread then tracks that one particle
// in both places, with the same bits in both. Each particle's arithmetic is that of one particle per thread.
extern "C" __global__ void __launch_bounds__(128) )";
  s += name;
  s += R"((
    FtParticleArrays P, const unsigned int* __restrict__ steps, const unsigned char* __restrict__ params,
    int n_particles, double beta0, int element_begin, int element_end, int n_elements,
    int first_turn, int n_turns, ft::GlobalLimits limits, const int* __restrict__ variant,
    unsigned long long variant_stride) {
  const int pair = blockIdx.x * blockDim.x + threadIdx.x;
  int ia = 2 * pair, ib = 2 * pair + 1;
  if (ia >= n_particles) return;
  // No partner (an odd count) or a lost one: the thread's one particle in both places.
  if (ib >= n_particles || P.state[ib] <= 0) ib = ia;
  if (P.state[ia] <= 0) {
    if (ib == ia) return;
    ia = ib;
  }
)";
  if (variants)
    s += R"(  // Lattice variants: each particle reads its variant's copy of the parameter table.
  const unsigned char* params_a = variant ? params + variant[ia] * variant_stride : params;
  const unsigned char* params_b = variant ? params + variant[ib] * variant_stride : params;
)";
  else
    s += R"(  // One parameter table for both (without variants every particle's variant index is 0).
  if (variant) params += variant[ia] * variant_stride;
  const unsigned char* const params_a = params;
  const unsigned char* const params_b = params;
)";
  s += R"(  ft::ParticleView pa = ft_load_particle(P, ia, beta0), pb = ft_load_particle(P, ib, beta0);
  int turn = first_turn;
  int lost_at = -1;
  for (int t = 0; t < n_turns; ++t) {
    turn = first_turn + t;
)";
  return s;
}

/// The end of a pair kernel's turn loop: the turn-end checks, then (ft_lost) what follows a loss at element
/// lost_at: the lost particle stored, the other in its place, and the turn resumed after lost_at (`reload`
/// reads the steps there and jumps to ft_resume). A particle that passed the turn-end check passes it again.
std::string pair_kernel_epilogue(bool variants, const std::string& reload) {
  std::string s = R"(
    if (element_end == n_elements) {
      ft::apply_turn_limits(pa, limits);
      ft::apply_turn_limits(pb, limits);
      if ((pa.state <= 0) | (pb.state <= 0)) { lost_at = n_elements - 1; goto ft_lost; }
    }
    continue;
  ft_lost:
    if (pa.state <= 0) ft_store_particle(P, ia, pa, turn, lost_at);
    if ((pb.state <= 0) & (ib != ia)) ft_store_particle(P, ib, pb, turn, lost_at);
    if ((pa.state <= 0) & (pb.state <= 0)) return;
)";
  s += fmt::format("    if (pa.state <= 0) {{ pa = pb; ia = ib;{} }} else {{ pb = pa; ib = ia;{} }}\n",
                   variants ? " params_a = params_b;" : "", variants ? " params_b = params_a;" : "");
  s += "    e = lost_at + 1;\n" + reload + "    goto ft_resume;\n";
  s += R"(  }
  ft_store_particle(P, ia, pa, turn, lost_at);
  if (ib != ia) ft_store_particle(P, ib, pb, turn, lost_at);
}
)";
  return s;
}

/// Switch case `case_id` for both particles: a with its block at `prm_a`, then b at `prm_b`.
std::string pair_element_call(const KernelSource& src, size_t case_id, const std::string& prm_a,
                              const std::string& prm_b, const std::string& fixed) {
  return element_call(src, case_id, prm_a, fixed, "pa") + " " + element_call(src, case_id, prm_b, fixed, "pb");
}

/// After an element of the checked path: the limits for both, and a branch to ft_lost when either is lost.
std::string pair_loss_check(const std::string& element) {
  return fmt::format(
      "ft::apply_element_limits(pa, limits); ft::apply_element_limits(pb, limits); "
      "if ((pa.state <= 0) | (pb.state <= 0)) {{ lost_at = {}; goto ft_lost; }}",
      element);
}

/// One element of a pair kernel's loop: the switch on its step `cur` for both particles, then the limits.
std::string pair_single_element_dispatch(const KernelSource& src, const std::string& indent) {
  std::string s = indent + "switch (cur >> 24) {\n";
  for (size_t k = 0; k < src.types.size() + src.transformed_types.size(); ++k) {
    if (k < src.types.size() && src.types[k]->is_collective()) continue;
    s += fmt::format("{}  case {}: {} break;\n", indent, k, pair_element_call(src, k, "prm_a", "prm_b", ""));
  }
  s += indent + "  default: break;\n" + indent + "}\n";
  s += indent + pair_loss_check("e") + "\n";
  return s;
}

/// The motif cases of a pair kernel (motif_cases for two particles): element j's parameter offset read once
/// (ft_o<j>); `checked` a branch after every element, else the occurrence runs without one and both particles
/// replay it when either leaves the x/y limits or is lost inside it.
std::string pair_motif_cases(const KernelSource& src, const MotifKeys& keys, const MotifPlan& plan, const char* indent,
                             bool checked) {
  std::string s;
  for (size_t m = 0; m < plan.motifs.size(); ++m) {
    const std::vector<uint32_t>& motif = plan.motifs[m];
    s += fmt::format("{}case {}: {{\n", indent, m + 1);
    for (size_t j = 1; j < motif.size(); ++j)
      s += fmt::format("{}  const unsigned int ft_o{} = (steps[e + {}] & 0xffffffu) << 3;\n", indent, j, j);
    for (size_t j = 0; j < motif.size(); ++j) {
      const uint32_t case_id = keys.case_id[motif[j]];
      const std::string prm_a = j ? fmt::format("params_a + ft_o{}", j) : "prm_a";
      const std::string prm_b = j ? fmt::format("params_b + ft_o{}", j) : "prm_b";
      const std::string call = pair_element_call(src, case_id, prm_a, prm_b, keys.fixed[motif[j]]);
      if (checked)
        s += fmt::format("{}  {} {}\n", indent, call, pair_loss_check(fmt::format("e + {}", j)));
      else if (writes_x_or_y(src, case_id))
        s += fmt::format(
            "{}  {} ft_inside &= ft::inside_element_limits(pa, limits) & ft::inside_element_limits(pb, "
            "limits);\n",
            indent, call);
      else
        s += fmt::format("{}  {}\n", indent, call);
    }
    if (!checked) s += fmt::format("{}  ft_replay = !ft_inside | (pa.state <= 0) | (pb.state <= 0);\n", indent);
    s += fmt::format("{}}} break;\n", indent);
  }
  return s;
}

/// The switch kernel's entry points with two particles per thread: with motifs the checked form
/// (kFusedKernelName) and the form for few particles (kFewParticlesKernelName), else the plain switch.
std::string pair_switch_kernels(const KernelSource& src, const MotifKeys& keys, const MotifPlan& plan) {
  std::string s = kPairHelpers;
  const std::string prm =
      "      const unsigned char* prm_a = params_a + ((cur & 0xffffffu) << 3);\n"
      "      const unsigned char* prm_b = params_b + ((cur & 0xffffffu) << 3);\n";
  if (plan.motifs.empty()) {
    std::string t = "    int e = element_begin;\n";
    t += "    unsigned int cur = e < element_end ? steps[e] : 0u;\n";
    t += "    unsigned int nxt = e + 1 < element_end ? steps[e + 1] : 0u;\n";
    t += "  ft_resume:\n";
    t += "    for (; e < element_end; ++e) {\n";
    t += "      const unsigned int after = e + 2 < element_end ? steps[e + 2] : 0u;\n";
    t += prm;
    t += pair_single_element_dispatch(src, "      ");
    t += "      cur = nxt;\n      nxt = after;\n";
    t += "    }\n";
    const std::string reload =
        "    cur = e < element_end ? steps[e] : 0u;\n"
        "    nxt = e + 1 < element_end ? steps[e + 1] : 0u;\n";
    return s + pair_kernel_prologue(kFusedKernelName, src.variants) + t + pair_kernel_epilogue(src.variants, reload);
  }
  auto turn_body = [&](bool checked) {
    std::string t = "    int e = element_begin;\n";
    t += "    unsigned int cur = e < element_end ? steps[e] : 0u;\n";
    t += "    unsigned int mot = e < element_end ? steps[n_elements + e] : 0u;\n";
    t += "  ft_resume:\n";
    t += "    while (e < element_end) {\n";
    t += "      const int len = mot != 0u && e + (int)(mot & 0xffu) <= element_end ? (int)(mot & 0xffu) : 0;\n";
    t += "      const int next = e + (len ? len : 1);\n";
    t += "      const unsigned int cur_next = next < element_end ? steps[next] : 0u;\n";
    t += "      const unsigned int mot_next = next < element_end ? steps[n_elements + next] : 0u;\n";
    t += prm;
    t += "      if (len) {\n";
    if (!checked)
      t += "        const ft::ParticleView ft_start_a = pa, ft_start_b = pb;\n"
           "        bool ft_inside = true, ft_replay = false;\n";
    t += "        switch (mot >> 8) {\n";
    t += pair_motif_cases(src, keys, plan, "          ", checked);
    t += "          default: break;\n        }\n";
    if (!checked) t += "        if (ft_replay) { pa = ft_start_a; pb = ft_start_b; mot = 0u; continue; }\n";
    t += "      } else {\n";
    t += pair_single_element_dispatch(src, "        ");
    t += "      }\n";
    t += "      cur = cur_next;\n      mot = mot_next;\n      e = next;\n";
    t += "    }\n";
    return t;
  };
  const std::string reload =
      "    cur = e < element_end ? steps[e] : 0u;\n"
      "    mot = e < element_end ? steps[n_elements + e] : 0u;\n";
  s += pair_kernel_prologue(kFusedKernelName, src.variants) + turn_body(true) +
       pair_kernel_epilogue(src.variants, reload);
  s += pair_kernel_prologue(kFewParticlesKernelName, src.variants) + turn_body(false) +
       pair_kernel_epilogue(src.variants, reload);
  return s;
}

}  // namespace

namespace {

/// The fused kernel's launch bounds: 128 threads per block, and with a register cap the minimum
/// number of resident blocks per multiprocessor that forces it (65536 registers per SM on sm_60..sm_90).
std::string launch_bounds(int max_registers) {
  if (max_registers <= 0) return "__launch_bounds__(128)";
  return fmt::format("__launch_bounds__(128, {})", std::max(1, 65536 / (128 * max_registers)));
}

void apply_register_cap(KernelSource& src, int max_registers) {
  src.max_registers = max_registers;
  if (max_registers <= 0) return;
  const std::string plain = launch_bounds(0), capped = launch_bounds(max_registers);
  for (size_t at = src.text.find(plain); at != std::string::npos; at = src.text.find(plain, at + capped.size()))
    src.text.replace(at, plain.size(), capped);
}

KernelSource uncapped_fused_kernel(const Lattice& lattice, FmaMode fma, Dispatch requested,
                                   const std::vector<const Lattice*>& variants, int particles_per_thread) {
  KernelSource src;
  src.name = "fusetrack_fused.cu";
  src.dispatch = choose_dispatch(lattice, requested);
  if (variants.size() > 1 && src.dispatch != Dispatch::Switch) {
    if (requested != Dispatch::Auto)
      throw Error(
          fmt::format("lattice variants run with the switch dispatch (each particle reads its variant's "
                      "parameters); {} was asked for",
                      dispatch_name(requested)));
    src.dispatch = Dispatch::Switch;
  }
  src.variants = variants.size() > 1;
  std::string s = source_preamble(lattice, src, fma, variants);
  if (src.dispatch == Dispatch::Staged) {
    src.text = s + staged_kernel(src);
    return src;
  }
  s += kParticleArrays;
  std::string b;  // the loop body over one turn's elements

  MotifPlan plan;
  MotifKeys keys;
  if (src.dispatch == Dispatch::Switch && motifs_enabled()) {
    std::vector<const Lattice*> lattices = variants;
    if (lattices.empty()) lattices.push_back(&lattice);
    keys = motif_keys(lattice, src, lattices);
    plan = plan_motifs(keys.at, keys.worth_alone);
    src.motif_at = plan.motif_at;
  }
  if (src.dispatch == Dispatch::Switch && particles_per_thread == 2) {
    src.particles_per_thread = 2;
    src.few_particles_form = !plan.motifs.empty();
    src.text = s + pair_switch_kernels(src, keys, plan);
    return src;
  }
  if (src.dispatch == Dispatch::Switch && !plan.motifs.empty()) {
    // Motifs (motifs.h): steps[n_elements + e] is (motif id << 8 | length) where an occurrence starts,
    // else 0. An occurrence that runs past element_end (a segment boundary) falls back to single elements.
    // The next dispatch's steps are loaded while the current one computes.
    auto turn_body = [&](bool checked) {
      std::string t = "    int e = element_begin;\n";
      t += "    unsigned int cur = e < element_end ? steps[e] : 0u;\n";
      t += "    unsigned int mot = e < element_end ? steps[n_elements + e] : 0u;\n";
      t += "    while (e < element_end) {\n";
      t += "      const int len = mot != 0u && e + (int)(mot & 0xffu) <= element_end ? (int)(mot & 0xffu) : 0;\n";
      t += "      const int next = e + (len ? len : 1);\n";
      t += "      const unsigned int cur_next = next < element_end ? steps[next] : 0u;\n";
      t += "      const unsigned int mot_next = next < element_end ? steps[n_elements + next] : 0u;\n";
      t += "      const unsigned char* prm = params + ((cur & 0xffffffu) << 3);\n";
      t += "      if (len) {\n";
      if (!checked)
        t += "        const ft::ParticleView ft_start = p;\n        bool ft_inside = true, ft_replay = false;\n";
      t += "        switch (mot >> 8) {\n";
      t += motif_cases(src, keys, plan, "          ", checked);
      t += "          default: break;\n        }\n";
      // A particle lost inside the occurrence: its start again, then its elements one at a time (len 0).
      if (!checked) t += "        if (ft_replay) { p = ft_start; mot = 0u; continue; }\n";
      t += "      } else {\n";
      t += single_element_dispatch(src, "        ");
      t += "      }\n";
      t += "      cur = cur_next;\n      mot = mot_next;\n      e = next;\n";
      t += "    }\n";
      return t;
    };
    // Two entry points: the checked form for many particles, the replayed occurrences for few.
    s += kernel_function(kFusedKernelName, turn_body(true));
    s += kernel_function(kFewParticlesKernelName, turn_body(false));
    src.few_particles_form = true;
  } else if (src.dispatch == Dispatch::Switch) {
    // Each step is (type id << 24 | parameter offset / 8). With few particles in flight the
    // kernel is latency-bound and the table of a long lattice lives in L2: the step two ahead is
    // loaded while the current element computes.
    b += "    unsigned int cur = steps[element_begin];\n";
    b += "    unsigned int nxt = element_begin + 1 < element_end ? steps[element_begin + 1] : 0u;\n";
    b += "    for (int e = element_begin; e < element_end; ++e) {\n";
    b += "      const unsigned int after = e + 2 < element_end ? steps[e + 2] : 0u;\n";
    b += "      const unsigned char* prm = params + ((cur & 0xffffffu) << 3);\n";
    b += single_element_dispatch(src, "      ");
    b += "      cur = nxt;\n      nxt = after;\n";
    b += "    }\n";
  } else {
    b += "    // Baked: each element's parameters are constants; element_begin/element_end must span the sequence.\n";
    for (size_t e = 0; e < lattice.sequence().size(); ++e) {
      const auto& entry = lattice.sequence()[e];
      const ElementDefinition& def = lattice.definitions()[entry.definition];
      if (def.type->is_collective()) {  // single-particle tracking of a collective lattice skips it
        b += fmt::format("    // #{} {} ({}): collective, skipped\n", e, def.name, def.type->name);
        continue;
      }
      b += fmt::format(
          "    {{ const {} el{}; {} ft::apply_element_limits(p, limits); if (p.state <= 0) {{ lost_at = {}; goto done; "
          "}} }}  // #{} {}\n",
          def.type->name, struct_initializer(*def.type, lattice.params(entry.definition)),
          baked_track_call(lattice, entry.definition), e, e, def.name);
    }
  }
  if (!src.few_particles_form) s += kernel_function(kFusedKernelName, b);
  src.text = std::move(s);
  return src;
}

}  // namespace

int particles_per_thread_setting(int requested) {
  if (requested == 1 || requested == 2) return requested;
  if (requested != 0) throw Error(fmt::format("particles per thread: 1 or 2, not {}", requested));
  const char* v = std::getenv("FUSETRACK_PARTICLES_PER_THREAD");
  if (!v || !*v) return kDefaultParticlesPerThread;
  const std::string value(v);
  if (value != "1" && value != "2")
    throw Error(fmt::format("FUSETRACK_PARTICLES_PER_THREAD={}: the particles per thread are 1 or 2", value));
  return value == "2" ? 2 : 1;
}

KernelSource generate_fused_kernel(const Lattice& lattice, FmaMode fma, Dispatch requested, int max_registers,
                                   const std::vector<const Lattice*>& variants, int particles_per_thread) {
  if (particles_per_thread != 1 && particles_per_thread != 2)
    throw Error(fmt::format("particles per thread: 1 or 2, not {}", particles_per_thread));
  KernelSource src = uncapped_fused_kernel(lattice, fma, requested, variants, particles_per_thread);
  apply_register_cap(src, max_registers);
  return src;
}

namespace {

// Grid collective elements: the extra arguments of the segment kernels.
const char* kGridSegmentParameters = R"(,
    const double* __restrict__ kick_ex, const double* __restrict__ kick_ey, const double* __restrict__ kick_ez,
    long long kick_stride, ft::ChargeGridSpec kick_grid, unsigned long long* __restrict__ grid_acc, long long grid_outside_slot,
    ft::ChargeGridSpec deposit_spec, ft::ExtentScales extent, unsigned long long* __restrict__ extent_acc,
    int grid_mode, int grid_window)";

/// The extra argument of the segment kernels of a lattice with slice-moment elements: the fixed-point
/// scales of the deposit (SliceCentroidReducer's, so that the GPU sums the CPU's integers).
const char* kMomentSegmentParameters = R"(,
    ft::SliceMomentScales deposit_scales)";

std::string grid_literal(const SliceGrid& g) {
  return fmt::format("ft::SliceGrid{{{}, {}, {}, {}, {}}}", g.n_slices, g.linear, double_literal(g.zeta_min),
                     double_literal(g.zeta_max), double_literal(g.inv_dz));
}

}  // namespace

std::string segment_kernel_name(size_t segment) { return fmt::format("fusetrack_segment_{}", segment); }

namespace {

struct CoordinateUse {
  uint32_t read = 0, written = 0;
};

/// What element `e` of the sequence reads and writes in a kernel: its type's declaration; every
/// coordinate under a transformation (shifts and rotations move x, px, y, py and zeta).
CoordinateUse element_coordinate_use(const Lattice& lattice, size_t e) {
  const ElementType& type = *lattice.element(e).type;
  if (lattice.transform_block(lattice.sequence()[e].definition)) return {FT_COORD_ALL, FT_COORD_ALL};
  return {type.coordinates_read, type.coordinates_written};
}

/// What the framework itself reads for a collective element's deposit and kick: the slice of zeta,
/// the grid cell of (x, y, zeta), the slice and the transverse centroids.
uint32_t collective_framework_reads(const ElementType& type) {
  if (type.is_profile_collective()) return FT_COORD_ZETA;
  if (type.is_grid_collective()) return FT_COORD_X | FT_COORD_Y | FT_COORD_ZETA;
  if (type.is_moments_collective()) return FT_COORD_TRANSVERSE | FT_COORD_ZETA;
  return FT_COORD_ALL;
}

/// One kernel of a collective turn: the kick of collective element `kick` (-1: none), the elements
/// of `segments`, the end-of-turn checks (`turn_end`: they read what the turn writes) and the
/// deposit for `deposit` (-1: none).
KernelTraffic kernel_traffic(const Lattice& lattice, const TurnProgram& program, int kick,
                             const std::vector<size_t>& segments, bool turn_end, int deposit, bool derived_energy) {
  CoordinateUse use;
  auto add = [&](const CoordinateUse& u) {
    use.read |= u.read;
    use.written |= u.written;
  };
  if (kick >= 0) {
    const size_t e = program.collective[static_cast<size_t>(kick)];
    add(element_coordinate_use(lattice, e));
    use.read |= collective_framework_reads(*lattice.element(e).type);
  }
  for (size_t k : segments)
    for (size_t e = program.segments[k].begin; e < program.segments[k].end; ++e)
      add(element_coordinate_use(lattice, e));
  if (deposit >= 0)
    use.read |= collective_framework_reads(*lattice.element(program.collective[static_cast<size_t>(deposit)]).type);
  if (turn_end) {
    // A coordinate written anywhere in the turn is checked (finite, turn limits) at its end.
    for (const TurnProgram::Segment& seg : program.segments)
      for (size_t e = seg.begin; e < seg.end; ++e) use.read |= element_coordinate_use(lattice, e).written;
    for (size_t e : program.collective) use.read |= element_coordinate_use(lattice, e).written;
  }
  // A possibly written coordinate is loaded too: a lost particle, or a conditional write, keeps it.
  KernelTraffic traffic{use.read | use.written, use.written, false};
  if (derived_energy) {
    constexpr uint32_t derived = FT_COORD_RPP | FT_COORD_RVV;
    if (traffic.loaded & derived) traffic.loaded |= FT_COORD_DELTA | FT_COORD_PTAU;
    traffic.derived_energy = (traffic.loaded & derived) != 0;
    traffic.loaded &= ~derived;
    traffic.stored &= ~derived;
  }
  return traffic;
}

int coordinate_count(uint32_t mask) { return __builtin_popcount(mask & FT_COORD_ALL); }

constexpr const char* kCoordinateNames[9] = {"x", "px", "y", "py", "zeta", "delta", "ptau", "rpp", "rvv"};

/// How a segment kernel's particle loop reads the next particle ahead of tracking this one (the
/// kernels wait on memory latency at their occupancy, Nsight Compute: 42% of the stalls). `l1`: a
/// prefetch of the next particle's words into L1 (no registers); `registers`: the next particle's
/// state and coordinates loaded into registers one iteration ahead (more registers: fewer resident
/// blocks for 6D kernels, 8-11% slower there, 3-4% faster for three coordinates); `none`: each
/// particle's words loaded when it starts; `auto` (the default): registers for a kernel that loads at
/// most three coordinates every turn, else l1 (10^8 particles on the longitudinal-only ring, one H200:
/// 3.5% faster than l1 with fma off). The GPU tests of the collective kernels pass bitwise against the
/// CPU in l1, auto and registers. FUSETRACK_PREFETCH=l1|auto|registers|none chooses (a benchmark knob;
/// the results are the same bits in every mode).
enum class Prefetch { None, L1, Registers, Auto };
Prefetch segment_prefetch() {
  const char* v = std::getenv("FUSETRACK_PREFETCH");
  const std::string m(v ? v : "auto");
  return m == "none"        ? Prefetch::None
         : m == "registers" ? Prefetch::Registers
         : m == "l1"        ? Prefetch::L1
                            : Prefetch::Auto;
}

/// The ParticleView of particle i with the coordinates the kernel loads (ft_<name> and ft_state from
/// particle_loop); the others only when full_load is set (the first turn), else neutral values (0; 1 for
/// rpp and rvv) that pass every check. With derived energy, rpp and rvv are recomputed from delta and
/// ptau, or 1 when nothing reads them.
std::string particle_load(const KernelTraffic& traffic, bool derived_energy) {
  std::string args;
  const int last = derived_energy ? 7 : 9;
  for (int c = 0; c < last; ++c) {
    const std::string array = fmt::format("P.{}[i]", kCoordinateNames[c]);
    args += (traffic.loaded >> c) & 1u ? fmt::format("ft_{}", kCoordinateNames[c])
                                       : fmt::format("(ft_full ? {} : {})", array, c >= 7 ? "1.0" : "0.0");
    args += ", ";
  }
  if (traffic.derived_energy)
    return "    ft::ParticleView p = ft::particle_with_derived_energy(" + args + "beta0, ft_state);\n";
  if (derived_energy) args += "1.0, 1.0, ";  // rpp and rvv: nothing in this kernel reads them
  return "    ft::ParticleView p{" + args + "beta0, ft_state};\n";
}

/// The limits a segment kernel checks: after the first turn (ft_full), a coordinate the kernel neither
/// loads nor writes is 0, and 0 passes every check (apply_element_limits with check_xy, apply_turn_limits
/// with a mask), so the double-precision tests of such coordinates are skipped. The turn-end check is
/// written twice with constant masks: a mask in a variable made the longitudinal-only wrap kernel spill.
std::string element_limit_flag(const KernelTraffic& traffic) {
  const bool xy = (traffic.loaded & (FT_COORD_X | FT_COORD_Y)) != 0;
  return fmt::format("    const bool ft_check_xy = {};  // x or y may be non-zero\n    (void)ft_check_xy;\n",
                     xy ? "true" : "ft_full");
}
std::string turn_limit_check(const KernelTraffic& traffic) {
  constexpr uint32_t six = FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_DELTA;
  const uint32_t checked = traffic.loaded & six;
  if (checked == six) return "    ft::apply_turn_limits(p, limits);\n";
  return fmt::format(
      "    if (ft_full) ft::apply_turn_limits(p, limits);\n"
      "    else ft::apply_turn_limits(p, limits, 0x{:x}u);  // the coordinates loaded\n",
      checked);
}

/// The particle loop of a segment kernel over [ft_begin, ft_end) in steps of ft_stride, up to the
/// state check, with ft_state and ft_<name> for the coordinates loaded every turn (segment_prefetch).
/// With registers, a dead particle's coordinates are read too (a few bytes where losses are rare, as
/// in collective runs).
std::string particle_loop(const KernelTraffic& traffic, Prefetch prefetch) {
  if (prefetch == Prefetch::Auto) prefetch = coordinate_count(traffic.loaded) <= 3 ? Prefetch::Registers : Prefetch::L1;
  std::string declare = "  int ft_next_state = 0;\n", first, next, take, hint;
  for (int c = 0; c < 9; ++c) {
    if (!((traffic.loaded >> c) & 1u)) continue;
    const char* name = kCoordinateNames[c];
    declare += fmt::format("  double ft_next_{} = 0.0;\n", name);
    first += fmt::format(" ft_next_{0} = P.{0}[ft_begin];", name);
    next += fmt::format(" ft_next_{0} = P.{0}[ft_j];", name);
    take +=
        fmt::format("    const double ft_{0} = {1};\n", name,
                    prefetch == Prefetch::Registers ? fmt::format("ft_next_{}", name) : fmt::format("P.{}[i]", name));
    hint += fmt::format(" ft::prefetch_l1(P.{}, ft_j);", name);
  }
  const std::string loop =
      "  for (long long ft_i = ft_begin; ft_i < ft_end; ft_i += ft_stride) {\n"
      "    const int i = static_cast<int>(ft_i);\n";
  if (prefetch == Prefetch::Registers)
    return declare + "  if (ft_begin < ft_end) { ft_next_state = P.state[ft_begin];" + first + " }\n" + loop +
           "    const int ft_state = ft_next_state;\n" + take +
           "    if (ft_i + ft_stride < ft_end) {\n      const long long ft_j = ft_i + ft_stride;\n" +
           "      ft_next_state = P.state[ft_j];" + next + "\n    }\n    if (ft_state <= 0) continue;\n";
  std::string s = loop + "    const int ft_state = P.state[i];\n";
  if (prefetch == Prefetch::L1)
    s += "    if (ft_i + ft_stride < ft_end) {  // the next particle's words on their way to L1\n"
         "      const long long ft_j = ft_i + ft_stride;\n      ft::prefetch_l1(P.state, ft_j);" +
         hint + "\n    }\n";
  return s + "    if (ft_state <= 0) continue;\n" + take;
}

std::string particle_store(uint32_t stored) {
  std::string s;
  for (int c = 0; c < 9; ++c)
    if ((stored >> c) & 1u) s += fmt::format(" P.{0}[i] = p.{0};", kCoordinateNames[c]);
  return s.empty() ? "" : "   " + s + "\n";
}

}  // namespace

double KernelTraffic::bytes() const { return 8.0 * (coordinate_count(loaded) + coordinate_count(stored)) + 4.0; }

double CollectiveTurnTraffic::bytes_per_turn() const {
  double b = wrap.bytes();
  for (size_t k = 1; k + 1 < segments.size(); ++k) b += segments[k].bytes();
  return b;
}

double CollectiveTurnTraffic::bytes_per_turn_all() const {
  return (segments.size() > 0 ? static_cast<double>(segments.size() - 1) : 1.0) * (8.0 * 18 + 8.0);
}

double CollectiveTurnTraffic::bytes_per_turn_needed() const {
  constexpr uint32_t six = FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_DELTA;
  // ptau, rpp and rvv follow from delta: reading one of them reads delta.
  const uint32_t r = (read & six) | ((read & FT_COORD_ENERGY) ? static_cast<uint32_t>(FT_COORD_DELTA) : 0u);
  const uint32_t w = (written & six) | ((written & FT_COORD_ENERGY) ? static_cast<uint32_t>(FT_COORD_DELTA) : 0u);
  return 8.0 * (coordinate_count(r | w) + coordinate_count(w)) + 4.0;
}

bool collective_energy_is_derived(const Lattice& lattice) {
  if (std::getenv("FUSETRACK_FULL_LOADS") != nullptr) return false;
  for (size_t e = 0; e < lattice.sequence().size(); ++e)
    if (!lattice.element(e).type->coordinates_declared) return false;
  return true;
}

CollectiveTurnTraffic collective_turn_traffic(const Lattice& lattice) {
  const TurnProgram program = TurnProgram::build(lattice);
  const bool derived = collective_energy_is_derived(lattice);
  CollectiveTurnTraffic t;
  const size_t K = program.collective.size();
  for (size_t k = 0; k < program.segments.size(); ++k)
    t.segments.push_back(kernel_traffic(lattice, program, k > 0 ? static_cast<int>(k) - 1 : -1, {k}, k == K,
                                        k < K ? static_cast<int>(k) : -1, derived));
  if (K > 0) t.wrap = kernel_traffic(lattice, program, static_cast<int>(K) - 1, {K, 0}, true, 0, derived);
  for (size_t k = 0; k < program.segments.size(); ++k) {
    // The physics: elements and kicks as declared, plus the deposits' reads.
    for (size_t e = program.segments[k].begin; e < program.segments[k].end; ++e) {
      const CoordinateUse u = element_coordinate_use(lattice, e);
      t.read |= u.read;
      t.written |= u.written;
    }
  }
  for (size_t e : program.collective) {
    const CoordinateUse u = element_coordinate_use(lattice, e);
    t.read |= u.read | collective_framework_reads(*lattice.element(e).type);
    t.written |= u.written;
  }
  return t;
}

namespace {

/// Blocks of 256 threads; FUSETRACK_COLLECTIVE_MIN_BLOCKS=N asks the compiler to fit N of them on a
/// multiprocessor (fewer registers per thread, spills allowed): a benchmark knob for the occupancy.
std::string segment_launch_bounds() {
  const char* min_blocks = std::getenv("FUSETRACK_COLLECTIVE_MIN_BLOCKS");
  return min_blocks && std::atoi(min_blocks) > 0 ? fmt::format("__launch_bounds__(256, {})", std::atoi(min_blocks))
                                                 : std::string("__launch_bounds__(256)");
}

/// The source of a collective lattice's kernels (generate_collective_kernels), written in steps: the
/// preamble and the kernels every such source holds, one kernel per segment, the wrap kernel.
class CollectiveKernelWriter {
 public:
  CollectiveKernelWriter(const Lattice& lattice, Dispatch requested, const std::vector<SliceGrid>& grids);

  /// The preamble, the particle arrays, the solvers' kernels, the derivation of rpp and rvv, and the
  /// grid kernels and reduction steps where the lattice has such elements.
  void write_shared_kernels(FmaMode fma);
  size_t segment_count() const { return m_program.segments.size(); }
  /// Segment k: the kick of collective element k - 1, the segment's elements, the deposit for element k
  /// (the last segment: the end of the turn instead).
  void write_segment_kernel(size_t k);
  /// The last segment of one turn and the first of the next in one pass over the particles.
  void write_wrap_kernel();
  KernelSource finish();

 private:
  /// A part of a kernel: the elements of a segment, the end-of-turn checks, or the "next turn" marker
  /// before the head segment of the following turn (whose losses count for turn + 1).
  struct Part {
    enum Kind { Elements, TurnEnd, NextTurn } kind;
    size_t segment = 0;
  };
  /// One kernel from its parts, with the kick of collective element `kick` before them and the deposit
  /// for `deposit` after them (-1: none).
  void write_kernel(const std::string& name, const std::string& comment, int kick, const std::vector<Part>& parts,
                    int deposit);
  void write_kernel_head(const std::string& name, const std::string& comment);
  /// The block's shared state of the deposit (its windows, the block-local sums zeroed).
  void write_deposit_setup(int deposit);
  /// The particles of a thread: ft_begin, ft_end, ft_stride.
  void write_particle_range(int deposit);
  void write_kick(int kick);
  void write_parts(const std::vector<Part>& parts, const KernelTraffic& traffic);
  /// The particle's contribution to the deposit, inside the particle loop.
  void write_deposit(int deposit);
  /// After the particle loop: the block's sums into the global ones.
  void write_deposit_flush(int deposit);

  bool is_grid(int c) const {
    return c >= 0 && m_lattice.element(m_program.collective[static_cast<size_t>(c)]).type->is_grid_collective();
  }
  bool is_moments(int c) const {
    return c >= 0 && m_lattice.element(m_program.collective[static_cast<size_t>(c)]).type->is_moments_collective();
  }

  const Lattice& m_lattice;
  const std::vector<SliceGrid>& m_grids;
  const TurnProgram m_program;
  const bool m_derived_energy;
  const Prefetch m_prefetch;
  const std::string m_launch_bounds;
  bool m_has_grid = false, m_has_moments = false;
  KernelSource m_src;
  std::string m_text;
};

CollectiveKernelWriter::CollectiveKernelWriter(const Lattice& lattice, Dispatch requested,
                                               const std::vector<SliceGrid>& grids)
    : m_lattice(lattice),
      m_grids(grids),
      m_program(TurnProgram::build(lattice)),
      m_derived_energy(collective_energy_is_derived(lattice)),
      m_prefetch(segment_prefetch()),
      m_launch_bounds(segment_launch_bounds()) {
  m_src.name = "fusetrack_collective.cu";
  m_src.dispatch = choose_dispatch(lattice, requested);
  if (m_src.dispatch == Dispatch::Staged) m_src.dispatch = Dispatch::Switch;  // segments use the plain switch
  if (grids.size() != m_program.collective.size())
    throw Error("collective codegen: one slice grid per collective element is needed");
  for (size_t c = 0; c < m_program.collective.size(); ++c) {
    m_has_grid |= is_grid(static_cast<int>(c));
    m_has_moments |= is_moments(static_cast<int>(c));
  }
}

void CollectiveKernelWriter::write_shared_kernels(FmaMode fma) {
  m_text = source_preamble(m_lattice, m_src, fma);
  m_text += "#include \"fusetrack/device/particle_arrays.h\"\n";
  m_text += "#include \"fusetrack/device/profile_solver_kernels.h\"\n";
  m_text += fmt::format(R"(
// rpp and rvv of every particle from its delta and ptau, before a download (the segments do not
// store them when they are derived: collective_energy_is_derived).
extern "C" __global__ void {}(FtParticleArrays P, int n_particles, double beta0) {{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_particles; i += gridDim.x * blockDim.x) {{
    const ft::ParticleView p = ft::particle_with_derived_energy(0.0, 0.0, 0.0, 0.0, 0.0, P.delta[i], P.ptau[i], beta0, 1);
    P.rpp[i] = p.rpp;
    P.rvv[i] = p.rvv;
  }}
}}
)",
                        kDeriveEnergyKernelName);
  // Grid collective elements (space charge): the segment kernels take the grid arguments (the
  // grids change every turn when adapted to the bunch); the solve on one rank's GPU, the moment pass and
  // the deposit of adapted grids, and the particles' order by grid tile run kernels of their own.
  if (m_has_grid) {
    m_text += "#include \"fusetrack/device/space_charge.h\"\n";
    m_text += "#include \"fusetrack/device/grid_solver_kernels.h\"\n";
    m_text += "#include \"fusetrack/device/tile_sort_kernels.h\"\n";
  }
  // Slice-moment collective elements (transverse wakes, feedback): the segment before one deposits,
  // per slice, the integer weight and the fixed-point sums of x, px, y, py (slice_centroid_contributions,
  // kSliceCentroidAccumulators per slice, then the particles outside the declared ranges) into `profile`,
  // block-local in shared memory when it fits; the segment after it kicks each particle with its slice's
  // ft::SliceKick from `kick_field` (FT_SLICE_KICK_VALUES doubles per slice, solved on the host).
  if (m_has_moments) m_text += "#include \"fusetrack/device/reduction.h\"\n";
}

void CollectiveKernelWriter::write_segment_kernel(size_t k) {
  const size_t K = m_program.collective.size();
  const TurnProgram::Segment& seg = m_program.segments[k];
  const int kick = k > 0 ? static_cast<int>(k) - 1 : -1, deposit = k < K ? static_cast<int>(k) : -1;
  std::vector<Part> parts{{Part::Elements, k}};
  if (k == K) parts.push_back({Part::TurnEnd, 0});
  write_kernel(segment_kernel_name(k),
               fmt::format("Segment {}: {}elements [{}, {}){}{}. Grid-stride loop over the particles, one turn.", k,
                           kick >= 0 ? fmt::format("kick of #{}, ", m_program.collective[k - 1]) : "", seg.begin,
                           seg.end, deposit >= 0 ? fmt::format(", deposit for #{}", m_program.collective[k]) : "",
                           k == K ? ", end of turn" : ""),
               kick, parts, deposit);
}

void CollectiveKernelWriter::write_wrap_kernel() {
  const size_t K = m_program.collective.size();
  write_kernel(
      kWrapKernelName,
      fmt::format("Wrap: kick of #{}, elements [{}, {}), end of turn, next turn's elements [{}, {}), deposit for #{}.",
                  m_program.collective[K - 1], m_program.segments[K].begin, m_program.segments[K].end,
                  m_program.segments[0].begin, m_program.segments[0].end, m_program.collective[0]),
      static_cast<int>(K) - 1, {{Part::Elements, K}, {Part::TurnEnd, 0}, {Part::NextTurn, 0}, {Part::Elements, 0}}, 0);
}

KernelSource CollectiveKernelWriter::finish() {
  m_src.text = std::move(m_text);
  return std::move(m_src);
}

void CollectiveKernelWriter::write_kernel(const std::string& name, const std::string& comment, int kick,
                                          const std::vector<Part>& parts, int deposit) {
  const size_t start = m_text.size();
  std::vector<size_t> kernel_segments;
  bool turn_end = false;
  for (const Part& part : parts) {
    if (part.kind == Part::Elements) kernel_segments.push_back(part.segment);
    turn_end |= part.kind == Part::TurnEnd;
  }
  const KernelTraffic traffic =
      kernel_traffic(m_lattice, m_program, kick, kernel_segments, turn_end, deposit, m_derived_energy);
  write_kernel_head(name, comment);
  write_deposit_setup(deposit);
  write_particle_range(deposit);
  m_text += particle_loop(traffic, m_prefetch);
  m_text += particle_load(traffic, m_derived_energy);
  m_text += element_limit_flag(traffic);
  m_text +=
      "    long long lost_at = -1;\n"
      "    int lost_turn = turn;\n";
  write_kick(kick);
  write_parts(parts, traffic);
  if (m_text.find("goto segment_done", start) == std::string::npos)
    m_text += "    goto segment_done;  // (a segment without elements)\n";
  m_text += "  segment_done:\n" + particle_store(traffic.stored) +
            "    if (p.state <= 0) { P.state[i] = p.state; P.lost_turn[i] = lost_turn; P.lost_element[i] = lost_at; "
            "continue; }\n";
  write_deposit(deposit);
  m_text += "  }\n";
  write_deposit_flush(deposit);
  m_text += "}\n";
}

void CollectiveKernelWriter::write_kernel_head(const std::string& name, const std::string& comment) {
  m_text += fmt::format(
      R"(
// {1}
extern "C" __global__ void {3} {0}(
    FtParticleArrays P, const unsigned int* __restrict__ steps, const unsigned char* __restrict__ params,
    int n_particles, double beta0, int turn, int n_elements, ft::GlobalLimits limits,
    const double* __restrict__ kick_field, unsigned long long* __restrict__ profile, int profile_in_shared,
    int full_load{2}) {{
  const bool ft_full = full_load != 0;  // the first turn: every coordinate (collective_turn_traffic)
  extern __shared__ unsigned long long ft_block_profile[];
)",
      name, comment,
      std::string(m_has_grid ? kGridSegmentParameters : "") + (m_has_moments ? kMomentSegmentParameters : ""),
      m_launch_bounds);
}

void CollectiveKernelWriter::write_deposit_setup(int deposit) {
  const bool grid_deposit = is_grid(deposit);
  if (grid_deposit)  // grid_window > 0 (particles sorted by tile, codegen.h): the block's deposit window
    m_text +=
        "  __shared__ long long ft_window_base_shared;\n"
        "  long long ft_window_base = 0;\n"
        "  const long long ft_window_layer = deposit_spec.dims == 3 ? static_cast<long long>(deposit_spec.n[0]) * "
        "deposit_spec.n[1] : 0;\n"
        "  if (grid_mode == 1 && grid_window > 0) {\n"
        "    for (int w = threadIdx.x; w < 2 * grid_window; w += blockDim.x) ft_block_profile[w] = 0ull;\n"
        "    if (threadIdx.x == 0) {  // one row before the cell of the chunk's first particle\n"
        "      const long long first = static_cast<long long>(blockIdx.x) * ft::deposit_chunk(n_particles);\n"
        "      long long cell = -1;\n"
        "      if (first < n_particles && P.state[first] > 0) {\n"
        "        const double ft_at[3] = {P.x[first], P.y[first], P.zeta[first]};\n"
        "        cell = ft::charge_grid_cell(deposit_spec, ft_at);\n"
        "      }\n"
        "      ft_window_base_shared = cell > deposit_spec.n[0] ? cell - deposit_spec.n[0] : 0;\n"
        "    }\n"
        "    __syncthreads();\n"
        "    ft_window_base = ft_window_base_shared;\n"
        "  }\n";
  if (grid_deposit)
    m_text +=
        "  __shared__ unsigned long long ft_block_extent[ft::kExtentAccumulators + 1];\n"
        "  if (grid_mode == 2) {\n"
        "    for (int a = threadIdx.x; a <= ft::kExtentAccumulators; a += blockDim.x) ft_block_extent[a] = 0ull;\n"
        "    __syncthreads();\n  }\n"
        "  unsigned long long ft_extent_sum[ft::kExtentAccumulators + 1] = {0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, "
        "0ull};\n"
        "  unsigned int ft_outside = 0;  // the thread's particles outside the grid\n";
  const bool moments_deposit = is_moments(deposit);
  if (moments_deposit) {
    const SliceGrid& g = m_grids[static_cast<size_t>(deposit)];
    m_text += fmt::format("  const ft::SliceGrid deposit_grid = {};\n", grid_literal(g));
    m_text +=
        fmt::format("  const int ft_deposit_words = {};  // {} slices x ft::kSliceCentroidAccumulators, out of range\n",
                    g.n_slices * kSliceCentroidAccumulators + 1, g.n_slices);
    // profile_in_shared 1: the whole table in shared memory; 2: a window of the table (a bunch train),
    // the block's particles a contiguous chunk (kMomentWindowSlices in codegen.h).
    m_text += fmt::format("  const int ft_window_slices = {};\n", std::min(g.n_slices, kMomentWindowSlices));
    m_text +=
        "  const int ft_window_words = ft_window_slices * ft::kSliceCentroidAccumulators;  // then the out-of-range "
        "count\n"
        "  __shared__ int ft_window_first_shared;\n"
        "  int ft_window_first = 0;\n"
        "  if (profile_in_shared == 1) {\n"
        "    for (int b = threadIdx.x; b < ft_deposit_words; b += blockDim.x) ft_block_profile[b] = 0ull;\n"
        "    __syncthreads();\n"
        "  } else if (profile_in_shared == 2) {\n"
        "    for (int b = threadIdx.x; b <= ft_window_words; b += blockDim.x) ft_block_profile[b] = 0ull;\n"
        "    if (threadIdx.x == 0) {\n"
        "      const long long first = static_cast<long long>(blockIdx.x) * ft::deposit_chunk(n_particles);\n"
        "      ft_window_first_shared = ft::deposit_window_first(deposit_grid, first < n_particles ? P.zeta[first] : "
        "0.0,\n"
        "                                                        ft_window_slices);\n"
        "    }\n"
        "    __syncthreads();\n"
        "    ft_window_first = ft_window_first_shared;\n"
        "  }\n";
  } else if (deposit >= 0 && !grid_deposit) {
    m_text +=
        fmt::format("  const ft::SliceGrid deposit_grid = {};\n", grid_literal(m_grids[static_cast<size_t>(deposit)]));
    m_text +=
        "  if (profile_in_shared) {\n"
        "    for (int b = threadIdx.x; b < deposit_grid.n_slices; b += blockDim.x) ft_block_profile[b] = 0ull;\n"
        "    __syncthreads();\n  }\n";
  }
}

void CollectiveKernelWriter::write_particle_range(int deposit) {
  const bool grid_deposit = is_grid(deposit);
  const bool moments_deposit = is_moments(deposit);
  if (moments_deposit)  // a windowed deposit: each block a contiguous chunk of the particles
    m_text +=
        "  long long ft_begin = blockIdx.x * (long long)blockDim.x + threadIdx.x, ft_end = n_particles,\n"
        "            ft_stride = (long long)gridDim.x * blockDim.x;\n"
        "  if (profile_in_shared == 2) {\n"
        "    const long long chunk = ft::deposit_chunk(n_particles);\n"
        "    ft_begin = blockIdx.x * chunk + threadIdx.x;\n"
        "    ft_end = min(static_cast<long long>(n_particles), (blockIdx.x + 1ll) * chunk);\n"
        "    ft_stride = blockDim.x;\n"
        "  }\n";
  else if (grid_deposit)  // a windowed grid deposit: each block a contiguous chunk of the particles
    m_text +=
        "  long long ft_begin = blockIdx.x * (long long)blockDim.x + threadIdx.x, ft_end = n_particles,\n"
        "            ft_stride = (long long)gridDim.x * blockDim.x;\n"
        "  if (grid_mode == 1 && grid_window > 0) {\n"
        "    const long long chunk = ft::deposit_chunk(n_particles);\n"
        "    ft_begin = blockIdx.x * chunk + threadIdx.x;\n"
        "    ft_end = min(static_cast<long long>(n_particles), (blockIdx.x + 1ll) * chunk);\n"
        "    ft_stride = blockDim.x;\n"
        "  }\n";
  else
    m_text +=
        "  const long long ft_begin = blockIdx.x * (long long)blockDim.x + threadIdx.x, ft_end = n_particles,\n"
        "                  ft_stride = (long long)gridDim.x * blockDim.x;\n";
}

void CollectiveKernelWriter::write_kick(int kick) {
  if (kick < 0) return;
  // Every kick block opens with the element's struct and closes with the loss check naming the element.
  const size_t e = m_program.collective[static_cast<size_t>(kick)];
  const ElementDefinition& def = m_lattice.element(e);
  const std::string& kick_function = def.type->collective->kick_function;
  const std::string open =
      fmt::format("    {{ const {} el{};", def.type->name,
                  struct_initializer(*def.type, m_lattice.params(m_lattice.sequence()[e].definition)));
  const auto close = [&](const char* kind) {
    return fmt::format("      if (p.state <= 0) {{ lost_at = {}; goto segment_done; }} }}  // #{} {}{}\n", e, e,
                       def.name, kind);
  };
  if (is_grid(kick)) {
    // The field of the bunch at the particle from the grid nodes (the deposit's weights), then the
    // element's kick, for the particles inside the grid (those outside were counted at the deposit).
    m_text +=
        open +
        fmt::format(
            " const double ft_pos[3] = {{p.x, p.y, p.zeta}}; double ft_field[3];\n"
            "      if (ft::charge_grid_field_at(kick_grid, kick_ex, kick_ey, kick_ez, ft_pos, ft_field, kick_stride)) "
            "{}(el, ft_field, p);\n"
            "      ft::apply_element_limits(p, limits, ft_check_xy);\n",
            kick_function) +
        close(" (grid)");
  } else if (is_moments(kick)) {
    // The kick of the particle's slice (nearest, as the deposit); none outside the cuts.
    m_text += open +
              fmt::format(
                  " const ft::SliceGrid kick_grid = {};\n"
                  "      const int ft_slice = ft::slice_of_zeta(kick_grid, p.zeta);\n"
                  "      if (ft_slice >= 0) {}(el, ft::slice_kick_at(kick_field, ft_slice), p);\n"
                  "      ft::apply_element_limits(p, limits, ft_check_xy);\n",
                  grid_literal(m_grids[static_cast<size_t>(kick)]), kick_function) +
              close(" (slice moments)");
  } else {
    m_text +=
        open +
        fmt::format(
            " const ft::SliceGrid kick_grid = {};\n"
            "      {}(el, ft::slice_field_at(kick_field, kick_grid, p.zeta), p); ft::apply_element_limits(p, limits, "
            "ft_check_xy);\n",
            grid_literal(m_grids[static_cast<size_t>(kick)]), kick_function) +
        close("");
  }
}

void CollectiveKernelWriter::write_parts(const std::vector<Part>& parts, const KernelTraffic& traffic) {
  for (const Part& part : parts) {
    if (part.kind == Part::TurnEnd) {
      m_text += turn_limit_check(traffic) + "    if (p.state <= 0) { lost_at = n_elements - 1; goto segment_done; }\n";
      continue;
    }
    if (part.kind == Part::NextTurn) {
      m_text += "    lost_turn = turn + 1;  // the head of the next turn\n";
      continue;
    }
    const TurnProgram::Segment& seg = m_program.segments[part.segment];
    if (m_src.dispatch == Dispatch::Switch) {
      if (seg.end > seg.begin) {
        m_text += fmt::format("    for (int e = {}; e < {}; ++e) {{\n", seg.begin, seg.end);
        m_text +=
            "      const unsigned int cur = steps[e];\n"
            "      const unsigned char* prm = params + ((cur & 0xffffffu) << 3);\n"
            "      switch (cur >> 24) {\n";
        m_text += switch_cases(m_src, "        ");
        m_text +=
            "        default: break;\n      }\n"
            "      ft::apply_element_limits(p, limits, ft_check_xy);\n"
            "      if (p.state <= 0) { lost_at = e; goto segment_done; }\n    }\n";
      }
    } else {
      for (size_t e = seg.begin; e < seg.end; ++e) {
        const ElementDefinition& def = m_lattice.element(e);
        m_text += fmt::format(
            "    {{ const {} el{}; {} ft::apply_element_limits(p, limits, ft_check_xy); if (p.state <= 0) {{ lost_at = "
            "{}; goto segment_done; }} }}  // #{} {}\n",
            def.type->name, struct_initializer(*def.type, m_lattice.params(m_lattice.sequence()[e].definition)),
            baked_track_call(m_lattice, m_lattice.sequence()[e].definition), e, e, def.name);
      }
    }
  }
}

void CollectiveKernelWriter::write_deposit(int deposit) {
  const bool grid_deposit = is_grid(deposit);
  const bool moments_deposit = is_moments(deposit);
  if (grid_deposit)
    m_text +=
        "    {\n      const double ft_pos[3] = {p.x, p.y, p.zeta};\n"
        "      if (grid_mode == 1) {  // cloud-in-cell integer charge; the last slot counts the particles outside\n"
        "        long long ft_nodes[8];\n        unsigned long long ft_w[8];\n"
        "        const int m = ft::charge_deposit(deposit_spec, ft_pos, ft_nodes, ft_w);\n"
        "        if (m == 0) ++ft_outside;  // summed per warp at the end (one atomic, not one per particle)\n"
        "        FT_UNROLL\n"
        "        for (int q = 0; q < 8; ++q) {  // the block's window in shared memory first (grid_window > 0)\n"
        "          if (q >= m) continue;  // (a fixed trip count keeps ft_nodes and ft_w in registers)\n"
        "          const long long w0 = ft_nodes[q] - ft_window_base, w1 = w0 - ft_window_layer;\n"
        "          if (grid_window > 0 && w0 >= 0 && w0 < grid_window)\n"
        "            ft::shared_add_u64(ft_block_profile, static_cast<int>(w0), ft_w[q]);\n"
        "          else if (grid_window > 0 && ft_window_layer > 0 && w1 >= 0 && w1 < grid_window)\n"
        "            ft::shared_add_u64(ft_block_profile, grid_window + static_cast<int>(w1), ft_w[q]);\n"
        "          else\n"
        "            atomicAdd(&grid_acc[ft_nodes[q]], ft_w[q]);\n"
        "        }\n"
        "      } else if (grid_mode == 2) {  // moments of the adapted extent, summed in the thread first\n"
        "        long long ft_out[ft::kExtentAccumulators];\n"
        "        if (ft::extent_contributions(extent, ft_pos, ft_out)) {\n"
        "          for (int a = 0; a < ft::kExtentAccumulators; ++a) ft_extent_sum[a] += static_cast<unsigned long "
        "long>(ft_out[a]);\n"
        "        } else {\n          ft_extent_sum[ft::kExtentAccumulators] += 1ull;\n        }\n"
        "      }\n    }\n";
  if (moments_deposit)
    m_text +=
        "    {\n      const double ft_c[6] = {p.x, p.px, p.y, p.py, p.zeta, 0.0};\n"
        "      int ft_bin = 0;\n      long long ft_out[ft::kSliceCentroidAccumulators];\n"
        "      const int m = ft::slice_centroid_contributions(deposit_grid, deposit_scales, ft_c, &ft_bin, ft_out);\n"
        "      const int ft_word0 = m < 0 ? ft_deposit_words - 1 : ft_bin * ft::kSliceCentroidAccumulators;\n"
        "      // The word in shared memory (-1: none): the table's, or the window's when the slice is inside it.\n"
        "      const int ft_local = profile_in_shared == 1 ? ft_word0\n"
        "                           : profile_in_shared == 2\n"
        "                               ? (m < 0 ? ft_window_words\n"
        "                                  : (ft_bin >= ft_window_first && ft_bin < ft_window_first + "
        "ft_window_slices)\n"
        "                                      ? (ft_bin - ft_window_first) * ft::kSliceCentroidAccumulators : -1)\n"
        "                               : -1;\n"
        "      for (int a = 0; a < (m < 0 ? 1 : (m > 0 ? ft::kSliceCentroidAccumulators : 0)); ++a) {\n"
        "        const unsigned long long ft_v = m < 0 ? 1ull : static_cast<unsigned long long>(ft_out[a]);\n"
        "        if (ft_local >= 0) ft::shared_add_u64(ft_block_profile, ft_local + a, ft_v);\n"
        "        else atomicAdd(&profile[ft_word0 + a], ft_v);\n"
        "      }\n"
        "    }\n";
  else if (deposit >= 0 && !grid_deposit)
    m_text +=
        "    int bins[2];\n    unsigned long long weights[2];\n"
        "    const int m = ft::profile_deposit(deposit_grid, p.zeta, bins, weights);\n"
        "    for (int q = 0; q < m; ++q) {\n"
        "      if (profile_in_shared) ft::shared_add_u64(ft_block_profile, bins[q], weights[q]);\n"
        "      else atomicAdd(&profile[bins[q]], weights[q]);\n"
        "    }\n";
}

void CollectiveKernelWriter::write_deposit_flush(int deposit) {
  const bool grid_deposit = is_grid(deposit);
  const bool moments_deposit = is_moments(deposit);
  if (grid_deposit)
    m_text +=
        "  if (grid_mode == 1 && grid_window > 0) {  // the window's integer sums into the grid\n"
        "    __syncthreads();\n"
        "    for (int w = threadIdx.x; w < 2 * grid_window; w += blockDim.x)\n"
        "      if (ft_block_profile[w])\n"
        "        atomicAdd(&grid_acc[ft_window_base + (w < grid_window ? w : ft_window_layer + (w - grid_window))],\n"
        "                  ft_block_profile[w]);\n"
        "  }\n";
  if (grid_deposit)  // every thread of the block gets here (the window's flush has a barrier)
    m_text +=
        "  if (grid_mode == 1) ft::warp_count_add(ft_outside, &grid_acc[grid_outside_slot]);  // outside the grid\n";
  if (grid_deposit)
    m_text +=
        "  if (grid_mode == 2) {  // integer sums: thread, block (shared), then global\n"
        "    for (int a = 0; a <= ft::kExtentAccumulators; ++a) if (ft_extent_sum[a]) atomicAdd(&ft_block_extent[a], "
        "ft_extent_sum[a]);\n"
        "    __syncthreads();\n"
        "    for (int a = threadIdx.x; a <= ft::kExtentAccumulators; a += blockDim.x)\n"
        "      if (ft_block_extent[a]) atomicAdd(&extent_acc[a], ft_block_extent[a]);\n  }\n";
  if (moments_deposit)
    m_text +=
        "  if (profile_in_shared == 1) {  // integer sums: block (shared), then global\n    __syncthreads();\n"
        "    for (int b = threadIdx.x; b < ft_deposit_words; b += blockDim.x)\n"
        "      if (ft_block_profile[b]) atomicAdd(&profile[b], ft_block_profile[b]);\n"
        "  } else if (profile_in_shared == 2) {  // the window's slices, then its out-of-range count\n"
        "    __syncthreads();\n"
        "    const int ft_offset = ft_window_first * ft::kSliceCentroidAccumulators;\n"
        "    for (int b = threadIdx.x; b < ft_window_words; b += blockDim.x)\n"
        "      if (ft_block_profile[b]) atomicAdd(&profile[ft_offset + b], ft_block_profile[b]);\n"
        "    if (threadIdx.x == 0 && ft_block_profile[ft_window_words])\n"
        "      atomicAdd(&profile[ft_deposit_words - 1], ft_block_profile[ft_window_words]);\n"
        "  }\n";
  else if (deposit >= 0 && !grid_deposit)
    m_text +=
        "  if (profile_in_shared) {\n    __syncthreads();\n"
        "    for (int b = threadIdx.x; b < deposit_grid.n_slices; b += blockDim.x)\n"
        "      if (ft_block_profile[b]) atomicAdd(&profile[b], ft_block_profile[b]);\n  }\n";
}

}  // namespace

KernelSource generate_collective_kernels(const Lattice& lattice, FmaMode fma, Dispatch requested,
                                         const std::vector<SliceGrid>& grids) {
  CollectiveKernelWriter writer(lattice, requested, grids);
  writer.write_shared_kernels(fma);
  for (size_t k = 0; k < writer.segment_count(); ++k) writer.write_segment_kernel(k);
  writer.write_wrap_kernel();
  return writer.finish();
}

namespace {

/// A definition's parameter block as the switch kernel reads it in one lattice: the element's
/// parameters, after its transformation block when the kernel runs it transformed (`words` > 0:
/// the block padded to `words` words, or an empty transformation when this lattice has none).
std::string switch_block(const Lattice& lattice, uint32_t definition, uint32_t words) {
  const ElementDefinition& def = lattice.definitions()[definition];
  const std::string own(reinterpret_cast<const char*>(lattice.params(definition)), def.type->param_size);
  if (words == 0) return own;
  std::vector<uint64_t> block(words, 0);
  const std::vector<uint64_t>* transform = lattice.transform_block(definition);
  if (transform) std::copy(transform->begin(), transform->end(), block.begin());
  // Header: operations in bits 0-47 (none for an empty transformation), the block's words above.
  block[0] = (block[0] & 0xffffffffffffull) | (static_cast<uint64_t>(words) << 48);
  return std::string(reinterpret_cast<const char*>(block.data()), 8 * block.size()) + own;
}

}  // namespace

KernelTables kernel_tables(const Lattice& lattice, const KernelSource& source,
                           const std::vector<const Lattice*>& variants) {
  std::vector<const Lattice*> lattices = variants;
  if (lattices.empty()) lattices.push_back(&lattice);
  KernelTables t;
  t.steps.reserve(lattice.sequence().size());
  // (type, transformed, the blocks of every variant) -> offset: identical blocks stored once.
  std::map<std::tuple<const ElementType*, bool, std::string>, uint32_t> stored;
  std::vector<uint32_t> offset_of_definition(lattice.definitions().size(), UINT32_MAX);
  std::vector<std::string> blocks(lattices.size());  // per variant, in the order stored
  size_t words_stored = 0;
  for (const auto& entry : lattice.sequence()) {
    const ElementDefinition& def = lattice.definitions()[entry.definition];
    uint32_t& offset = offset_of_definition[entry.definition];
    const uint32_t transform_words =
        def.type->is_collective() ? 0 : transform_words_over_variants(lattices, entry.definition);
    if (offset == UINT32_MAX) {
      std::string key_bytes;
      std::vector<std::string> per_variant;
      for (const Lattice* l : lattices) {
        per_variant.push_back(switch_block(*l, entry.definition, transform_words));
        key_bytes += per_variant.back();
      }
      auto key = std::make_tuple(def.type, transform_words > 0, std::move(key_bytes));
      auto it = stored.find(key);
      if (it == stored.end()) {
        const uint32_t at = static_cast<uint32_t>(words_stored * sizeof(uint64_t));
        const size_t words = (per_variant[0].size() + 7) / 8;
        for (size_t v = 0; v < lattices.size(); ++v) {
          per_variant[v].resize(8 * words, '\0');
          blocks[v] += per_variant[v];
        }
        words_stored += words;
        it = stored.emplace(std::move(key), at).first;
      }
      offset = it->second;
      if (offset >= (1u << 27)) throw Error("switch kernel: more than 128 MiB of distinct element parameters");
    }
    t.steps.push_back(KernelStep::make(switch_case_id(source, lattices, lattice, entry.definition), offset));
  }
  // The motif table after the steps (KernelSource::motif_at): the kernel reads steps[n_elements + e].
  for (uint32_t m : source.motif_at) t.steps.push_back(KernelStep{m});
  if (words_stored == 0) {
    words_stored = 1;
    for (std::string& b : blocks) b.assign(8, '\0');
  }
  // Variant v's table starts v * stride bytes into the buffer, with the offsets of the steps.
  t.variant_stride_bytes = words_stored * sizeof(uint64_t);
  t.params.assign(words_stored * lattices.size(), 0);
  for (size_t v = 0; v < lattices.size(); ++v)
    std::memcpy(reinterpret_cast<char*>(t.params.data()) + v * t.variant_stride_bytes, blocks[v].data(),
                blocks[v].size());
  return t;
}

void dump_kernel_source(const KernelSource& source, const std::string& directory) {
  namespace fs = std::filesystem;
  fs::create_directories(directory);
  std::ofstream(fs::path(directory) / source.name) << source.text;
  for (const auto& [name, text] : source.headers) {
    const fs::path p = fs::path(directory) / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
}

}  // namespace ft
