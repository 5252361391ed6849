// Fuzz target: validation of plugin descriptors (ft::check_plugin_descriptor), without loading any
// code: the bytes build a descriptor (names, header table, types, field tables with offsets, counts,
// types, flags and defaults, function pointers set or not). A descriptor the check accepts is then
// turned into element types as the registry does, and every field's default is written into the
// parameter struct (AddressSanitizer checks that each field lies inside it).
#include <fuzzer/FuzzedDataProvider.h>

#include <deque>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace {

int dummy_track(const void*, ft_particle_block*, ft_error*) { return 0; }
int dummy_prepare(void*, const ft_reference*, ft_error*) { return 0; }
int dummy_create(const void*, const char*, const char*, const ft_reference*, ft_collective_model*, ft_error*) {
  return 0;
}
int dummy_kick(const void*, const ft_slice_field*, ft_particle_block*, ft_error*) { return 0; }
int dummy_create_grid(const void*, const char*, const char*, const ft_reference*, ft_grid_model*, ft_error*) {
  return 0;
}
int dummy_grid_kick(const void*, const ft_grid_field*, ft_particle_block*, ft_error*) { return 0; }
int dummy_create_moments(const void*, const char*, const char*, const ft_reference*, ft_moments_model*, ft_error*) {
  return 0;
}
int dummy_moments_kick(const void*, const ft_slice_kicks*, ft_particle_block*, ft_error*) { return 0; }

/// Strings for names: mostly from a small set (so that duplicates and valid identifiers occur),
/// sometimes arbitrary, sometimes absent (NULL).
const char* pick_name(FuzzedDataProvider& in, std::deque<std::string>& storage) {
  static const char* const kNames[] = {"Drift", "Quad", "length", "k1", "x", "Drift_track", "q.h", "a.h", "", "1x",
                                       "Quad_track", "Quad_kick", "k"};
  const unsigned choice = in.ConsumeIntegralInRange<unsigned>(0, 15);
  if (choice < 13) return kNames[choice];
  if (choice == 13) return nullptr;
  storage.push_back(in.ConsumeRandomLengthString(16));
  return storage.back().c_str();
}

uint32_t small_or_any(FuzzedDataProvider& in, uint32_t small_max) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, small_max) : in.ConsumeIntegral<uint32_t>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::deque<std::string> strings;
  ft_plugin_desc desc{};
  desc.abi_version = in.ConsumeIntegralInRange<uint32_t>(0, 7) == 0 ? in.ConsumeIntegral<uint32_t>()
                                                                     : FT_PLUGIN_ABI_VERSION;
  desc.plugin_name = pick_name(in, strings);
  std::vector<ft_source_file> headers(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (auto& h : headers) {
    h.include_name = pick_name(in, strings);
    h.text = in.ConsumeBool() ? "struct X {};" : nullptr;
  }
  desc.headers = headers.empty() && in.ConsumeBool() ? nullptr : headers.data();
  desc.header_count = static_cast<uint32_t>(headers.size());
  std::vector<ft_element_type_desc> types(in.ConsumeIntegralInRange<size_t>(0, 3));
  std::deque<std::vector<ft_field_desc>> field_tables;
  std::deque<ft_collective_desc> collectives;
  for (auto& t : types) {
    t.name = pick_name(in, strings);
    t.doc = in.ConsumeBool() ? "doc" : nullptr;
    t.track_function = pick_name(in, strings);
    t.header = pick_name(in, strings);
    t.param_size = small_or_any(in, 64);
    t.param_align = small_or_any(in, 16);
    t.flags = small_or_any(in, 2);
    t.length_field = in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-2, 4) : in.ConsumeIntegral<int32_t>();
    t.prepare = in.ConsumeBool() ? dummy_prepare : nullptr;
    t.track_block = in.ConsumeBool() ? dummy_track : nullptr;
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
      ft_collective_desc c{};
      c.kick_function = pick_name(in, strings);
      c.create = in.ConsumeBool() ? dummy_create : nullptr;
      c.kick_block = in.ConsumeBool() ? dummy_kick : nullptr;
      c.kind = small_or_any(in, 3);  // profile, grid, slice moments, unknown
      c.create_grid = in.ConsumeBool() ? dummy_create_grid : nullptr;
      c.grid_kick_block = in.ConsumeBool() ? dummy_grid_kick : nullptr;
      c.create_moments = in.ConsumeBool() ? dummy_create_moments : nullptr;
      c.moments_kick_block = in.ConsumeBool() ? dummy_moments_kick : nullptr;
      collectives.push_back(c);
      t.collective = &collectives.back();
    }
    field_tables.emplace_back(in.ConsumeIntegralInRange<size_t>(0, 5));
    for (auto& f : field_tables.back()) {
      f.name = pick_name(in, strings);
      f.unit = in.ConsumeBool() ? "m" : nullptr;
      f.doc = nullptr;
      f.offset = in.ConsumeBool() ? 8 * in.ConsumeIntegralInRange<uint32_t>(0, 8) : in.ConsumeIntegral<uint32_t>();
      f.type = small_or_any(in, 3);
      f.count = small_or_any(in, 6);
      f.flags = small_or_any(in, 2);
      f.default_value = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(-3, 3) : in.ConsumeFloatingPoint<double>();
      f.has_default = in.ConsumeBool();
    }
    t.fields = field_tables.back().empty() && in.ConsumeBool() ? nullptr : field_tables.back().data();
    t.field_count = static_cast<uint32_t>(field_tables.back().size());
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) t.field_count = in.ConsumeIntegral<uint32_t>() | 64u;  // a lie
    if (t.field_count > field_tables.back().size()) t.fields = nullptr;  // never read past the table here
  }
  desc.types = types.empty() && in.ConsumeBool() ? nullptr : types.data();
  desc.type_count = static_cast<uint32_t>(types.size());

  if (!ft::check_plugin_descriptor(desc).empty()) return 0;
  for (const auto& t : types) {
    const ft::ElementType type = ft::element_type_from_descriptor(t);
    std::vector<unsigned char> params = type.default_params();
    if (params.size() != t.param_size) __builtin_trap();
  }
  return 0;
}
