#include "fusetrack/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cctype>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace ft {

namespace fs = std::filesystem;

Plugin::Plugin(std::string file, std::unique_ptr<boost::dll::shared_library> library, const ft_plugin_desc* desc)
    : m_file(std::move(file)), m_name(desc->plugin_name ? desc->plugin_name : ""), m_library(std::move(library)),
      m_desc(desc) {
  for (uint32_t i = 0; i < desc->header_count; ++i)
    m_headers[desc->headers[i].include_name] = desc->headers[i].text;
}

Plugin::~Plugin() = default;

const std::string* Plugin::header(const std::string& include_name) const {
  auto it = m_headers.find(include_name);
  return it == m_headers.end() ? nullptr : &it->second;
}

const FieldInfo* ElementType::find_field(const std::string& field_name) const {
  for (const auto& f : fields)
    if (f.name == field_name) return &f;
  return nullptr;
}

std::vector<unsigned char> ElementType::default_params() const {
  std::vector<unsigned char> bytes(param_size, 0);
  for (const auto& f : fields) {
    if (f.host_only()) continue;  // JSON fields live on the host; their offset and count mean nothing
    for (uint32_t k = 0; k < f.count; ++k) {
      unsigned char* at = bytes.data() + f.offset + k * f.element_size();
      if (f.type == FT_FIELD_INT32) {
        const int32_t v = static_cast<int32_t>(f.default_value);
        std::copy_n(reinterpret_cast<const unsigned char*>(&v), 4, at);
      } else {
        const double v = f.default_value;
        std::copy_n(reinterpret_cast<const unsigned char*>(&v), 8, at);
      }
    }
  }
  return bytes;
}

ElementRegistry::ElementRegistry() = default;
ElementRegistry::~ElementRegistry() = default;

std::string ElementRegistry::core_library_directory() {
  return boost::dll::this_line_location().parent_path().string();
}

namespace {

bool is_identifier(const char* s) {
  if (!s || !*s || !(std::isalpha(static_cast<unsigned char>(*s)) || *s == '_')) return false;
  for (; *s; ++s)
    if (!(std::isalnum(static_cast<unsigned char>(*s)) || *s == '_')) return false;
  return true;
}

bool looks_like_shared_library(const std::string& path, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be opened";
    return false;
  }
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  if (in.gcount() != 4 || magic[0] != 0x7f || magic[1] != 'E' || magic[2] != 'L' || magic[3] != 'F') {
    why = "is not a shared library (no ELF header)";
    return false;
  }
  return true;
}

/// Checks one type descriptor against the rules of the ABI; returns the problem or "".
/// `header_names`: the include names the plugin embeds.
std::string check_type(const ft_element_type_desc& t, const std::set<std::string>& header_names) {
  if (!is_identifier(t.name)) return fmt::format("element type name '{}' is not a C identifier", t.name ? t.name : "");
  if (!is_identifier(t.track_function))
    return fmt::format("element type '{}': track function name is not a C identifier", t.name);
  if (t.collective) {
    if (!is_identifier(t.collective->kick_function))
      return fmt::format("collective element type '{}': kick function name is not a C identifier", t.name);
    if (t.collective->kind == FT_COLLECTIVE_PROFILE) {
      if (!t.collective->create || !t.collective->kick_block)
        return fmt::format("collective element type '{}' lacks its create or CPU kick function", t.name);
    } else if (t.collective->kind == FT_COLLECTIVE_GRID) {
      if (!t.collective->create_grid || !t.collective->grid_kick_block)
        return fmt::format("grid collective element type '{}' lacks its create_grid or CPU grid kick function", t.name);
    } else if (t.collective->kind == FT_COLLECTIVE_MOMENTS) {
      if (!t.collective->create_moments || !t.collective->moments_kick_block)
        return fmt::format(
            "slice-moment collective element type '{}' lacks its create_moments or CPU moments kick function", t.name);
    } else {
      return fmt::format("collective element type '{}' has unknown kind {}", t.name, t.collective->kind);
    }
    if (t.flags & FT_THICK) return fmt::format("collective element type '{}' must be thin", t.name);
  } else if (!t.track_block) {
    return fmt::format("element type '{}' has no CPU track function", t.name);
  }
  if (t.flags & ~static_cast<uint32_t>(FT_THICK | FT_LARGE_CODE))
    return fmt::format("element type '{}' has unknown flags {:#x}", t.name, t.flags);
  if ((t.coordinates_read & ~static_cast<uint32_t>(FT_COORD_ALL | FT_COORD_DECLARED)) != 0 ||
      (t.coordinates_written & ~static_cast<uint32_t>(FT_COORD_ALL)) != 0)
    return fmt::format("element type '{}' declares unknown coordinates (read {:#x}, written {:#x})", t.name,
                       t.coordinates_read, t.coordinates_written);
  if (!(t.coordinates_read & FT_COORD_DECLARED) && t.coordinates_written != 0)
    return fmt::format("element type '{}' declares written coordinates without FT_COORD_DECLARED", t.name);
  // Writing delta goes through update_delta or add_to_energy, which write the whole energy group.
  if ((t.coordinates_written & FT_COORD_DELTA) && (t.coordinates_written & FT_COORD_ENERGY) != FT_COORD_ENERGY)
    return fmt::format("element type '{}' writes delta but not all of delta, ptau, rpp, rvv", t.name);
  if (t.param_size == 0) return fmt::format("element type '{}' has parameter size 0", t.name);
  if (t.param_align == 0 || (t.param_align & (t.param_align - 1)) != 0 || t.param_align > 8)
    return fmt::format("element type '{}' has parameter alignment {} (must be 1, 2, 4 or 8)", t.name, t.param_align);
  if (t.param_size % t.param_align != 0)
    return fmt::format("element type '{}': parameter size {} is not a multiple of its alignment {}", t.name,
                       t.param_size, t.param_align);
  if (!t.header || !header_names.count(t.header))
    return fmt::format("element type '{}': its header '{}' is not embedded in the plugin", t.name,
                       t.header ? t.header : "");
  if (t.field_count > 0 && !t.fields)
    return fmt::format("element type '{}' declares {} fields but no field table", t.name, t.field_count);
  // The field table must describe the struct: every field inside it, no overlaps, and the
  // fields must account for the struct size up to alignment padding. Sizes in 64 bits: a lying
  // offset or count must not wrap around.
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  std::set<std::string> names;
  uint64_t end_of_fields = 0;
  for (uint32_t i = 0; i < t.field_count; ++i) {
    const ft_field_desc& f = t.fields[i];
    if (!is_identifier(f.name)) return fmt::format("element type '{}': field #{} has an invalid name", t.name, i);
    if (!names.insert(f.name).second)
      return fmt::format("element type '{}': field '{}' is declared twice", t.name, f.name);
    if (f.flags & ~static_cast<uint32_t>(FT_FIELD_DERIVED))
      return fmt::format("element type '{}': field '{}' has unknown flags {:#x}", t.name, f.name, f.flags);
    if (f.type == FT_FIELD_JSON) {
      if (!t.collective)
        return fmt::format("element type '{}': field '{}' is host-only JSON, which only collective elements have",
                           t.name, f.name);
      continue;  // not in the struct
    }
    if (f.type != FT_FIELD_DOUBLE && f.type != FT_FIELD_INT32)
      return fmt::format("element type '{}': field '{}' has unknown type code {}", t.name, f.name, f.type);
    const uint64_t element_size = f.type == FT_FIELD_INT32 ? 4u : 8u;
    const uint64_t size = element_size * f.count;
    if (f.count == 0 || uint64_t{f.offset} + size > t.param_size)
      return fmt::format(
          "element type '{}': field table does not match the struct size: field '{}' spans bytes [{}, {}) "
          "but the struct has {} bytes",
          t.name, f.name, f.offset, uint64_t{f.offset} + size, t.param_size);
    if (f.offset % element_size != 0 && element_size <= t.param_align)
      return fmt::format("element type '{}': field '{}' at byte {} is not aligned to its size {}", t.name, f.name,
                         f.offset, element_size);
    if (f.type == FT_FIELD_INT32 &&  // (required fields too: their default fills the struct before input)
        !(f.default_value >= -2147483648.0 && f.default_value <= 2147483647.0 &&
          f.default_value == std::trunc(f.default_value)))
      return fmt::format("element type '{}': int32 field '{}' has default {} (not an int32)", t.name, f.name,
                         f.default_value);
    spans.emplace_back(f.offset, f.offset + size);
    end_of_fields = std::max(end_of_fields, f.offset + size);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second)
      return fmt::format("element type '{}': field table does not match the struct: fields overlap at byte {}",
                         t.name, spans[i].first);
  const uint64_t padded = (end_of_fields + t.param_align - 1) / t.param_align * t.param_align;
  if (padded != t.param_size)
    return fmt::format(
        "element type '{}': field table does not match the struct size: the fields cover {} bytes but the "
        "struct has {}",
        t.name, padded, t.param_size);
  if ((t.flags & FT_THICK) && t.length_field < 0)
    return fmt::format("element type '{}' is thick but has no 'length' field", t.name);
  if (t.length_field >= 0) {
    const bool valid = static_cast<uint32_t>(t.length_field) < t.field_count &&
                       std::strcmp(t.fields[t.length_field].name, "length") == 0 &&
                       t.fields[t.length_field].type == FT_FIELD_DOUBLE && t.fields[t.length_field].count == 1;
    if (!valid)
      return fmt::format("element type '{}': length field index {} is not a scalar double field named 'length'",
                         t.name, t.length_field);
  } else if (t.length_field != -1) {
    return fmt::format("element type '{}': length field index {} (must be -1 or a field index)", t.name,
                       t.length_field);
  }
  return "";
}

}  // namespace

std::string check_plugin_descriptor(const ft_plugin_desc& desc) {
  if (desc.abi_version != FT_PLUGIN_ABI_VERSION)
    return fmt::format("plugin ABI version {} does not match this fusetrack's ABI version {}; "
                       "rebuild the plugin against this fusetrack",
                       desc.abi_version, FT_PLUGIN_ABI_VERSION);
  if (desc.header_count > 0 && !desc.headers)
    return fmt::format("descriptor declares {} headers but no header table", desc.header_count);
  if (desc.type_count > 0 && !desc.types)
    return fmt::format("descriptor declares {} element types but no type table", desc.type_count);
  std::set<std::string> header_names;
  for (uint32_t i = 0; i < desc.header_count; ++i) {
    const ft_source_file& h = desc.headers[i];
    if (!h.include_name || !*h.include_name || !h.text)
      return fmt::format("embedded header #{} lacks its name or its text", i);
    if (!header_names.insert(h.include_name).second)
      return fmt::format("embedded header '{}' is given twice", h.include_name);
  }
  std::set<std::string> type_names;
  for (uint32_t i = 0; i < desc.type_count; ++i) {
    const std::string problem = check_type(desc.types[i], header_names);
    if (!problem.empty()) return problem;
    if (!type_names.insert(desc.types[i].name).second)
      return fmt::format("element type '{}' is defined twice", desc.types[i].name);
  }
  return "";
}

ElementType element_type_from_descriptor(const ft_element_type_desc& t) {
  ElementType type;
  type.name = t.name;
  type.doc = t.doc ? t.doc : "";
  type.track_function = t.track_function;
  type.header = t.header;
  type.param_size = t.param_size;
  type.param_align = t.param_align;
  type.thick = (t.flags & FT_THICK) != 0;
  type.large_code = (t.flags & FT_LARGE_CODE) != 0;
  type.length_field = t.length_field;
  type.prepare = t.prepare;
  type.track_block = t.track_block;
  type.collective = t.collective;
  type.coordinates_declared = (t.coordinates_read & FT_COORD_DECLARED) != 0;
  if (type.coordinates_declared) {
    type.coordinates_read = t.coordinates_read & FT_COORD_ALL;
    type.coordinates_written = t.coordinates_written & FT_COORD_ALL;
  }
  for (uint32_t k = 0; k < t.field_count; ++k) {
    const ft_field_desc& f = t.fields[k];
    FieldInfo info;
    info.name = f.name;
    info.unit = f.unit ? f.unit : "";
    info.doc = f.doc ? f.doc : "";
    info.offset = f.offset;
    info.type = f.type;
    info.count = f.count;
    info.derived = (f.flags & FT_FIELD_DERIVED) != 0;
    info.required = !f.has_default && !info.derived;
    info.default_value = f.default_value;
    type.fields.push_back(info);
  }
  return type;
}

const Plugin& ElementRegistry::load_plugin(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::path(path), ec);
  const std::string file = ec ? path : canonical.string();
  for (const auto& p : m_plugins)
    if (p->file() == file) return *p;

  if (!fs::exists(file)) throw PluginError(file, "plugin file does not exist");
  std::string why;
  if (!looks_like_shared_library(file, why)) throw PluginError(file, why);

  auto library = std::make_unique<boost::dll::shared_library>();
  boost::dll::fs::error_code load_error;
  library->load(file, boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now, load_error);
  if (load_error) throw PluginError(file, "cannot be loaded as a shared library: " + load_error.message());
  if (!library->has(FT_PLUGIN_ENTRY_NAME))
    throw PluginError(file, fmt::format("is not a fusetrack plugin: it does not export the entry point '{}'",
                                        FT_PLUGIN_ENTRY_NAME));
  auto entry = library->get<const ft_plugin_desc*(uint32_t)>(FT_PLUGIN_ENTRY_NAME);
  const ft_plugin_desc* desc = entry(FT_PLUGIN_ABI_VERSION);
  if (!desc) throw PluginError(file, "entry point returned no descriptor");
  if (const std::string problem = check_plugin_descriptor(*desc); !problem.empty()) throw PluginError(file, problem);

  auto plugin = std::make_shared<Plugin>(file, std::move(library), desc);
  std::vector<std::shared_ptr<ElementType>> new_types;
  for (uint32_t i = 0; i < desc->type_count; ++i) {
    const ft_element_type_desc& t = desc->types[i];
    if (auto existing = m_types.find(t.name); existing != m_types.end())
      throw PluginError(file, fmt::format("element type '{}' is already defined by plugin {}", t.name,
                                          existing->second->plugin->file()));
    auto type = std::make_shared<ElementType>(element_type_from_descriptor(t));
    type->plugin = plugin;
    new_types.push_back(type);
  }
  // Header names must not clash with another plugin's header of different text: NVRTC sees
  // one flat set of include names.
  for (const auto& [name, text] : plugin->headers())
    for (const auto& other : m_plugins)
      if (const std::string* t = other->header(name); t && *t != text)
        throw PluginError(file, fmt::format("header '{}' clashes with a different header of the same name in plugin {}",
                                            name, other->file()));

  m_plugins.push_back(plugin);
  for (auto& t : new_types) {
    m_type_order.push_back(t->name);
    m_types[t->name] = std::move(t);
  }
  return *plugin;
}

void ElementRegistry::load_default_plugins() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FUSETRACK_PLUGIN_PATH")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      size_t colon = s.find(':', start);
      if (colon == std::string::npos) colon = s.size();
      if (colon > start) dirs.push_back(s.substr(start, colon - start));
      start = colon + 1;
    }
  }
  dirs.push_back(core_library_directory());
  for (const auto& dir : dirs) {
    m_searched.push_back(dir);
    std::error_code ec;
    if (fs::is_regular_file(dir, ec)) {  // a plugin file named directly
      try {
        load_plugin(dir);
      } catch (const Error& e) {
        m_warnings.push_back(e.what());
      }
      continue;
    }
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string fname = entry.path().filename().string();
      if (fname.rfind("fusetrack_plugin_", 0) == 0 && entry.path().extension() == ".so")
        files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      try {
        load_plugin(f);
      } catch (const Error& e) {
        m_warnings.push_back(e.what());
      }
    }
  }
}

const ElementType* ElementRegistry::find(const std::string& type_name) const {
  auto it = m_types.find(type_name);
  return it == m_types.end() ? nullptr : it->second.get();
}

const ElementType& ElementRegistry::get(const std::string& type_name, const InputLocation& where) const {
  if (const ElementType* t = find(type_name)) return *t;
  std::string known;
  for (const auto& n : m_type_order) known += (known.empty() ? "" : ", ") + n;
  std::string dirs;
  for (const auto& d : m_searched) dirs += (dirs.empty() ? "" : ", ") + d;
  throw InputError(where, fmt::format("unknown element type '{}'; registered types: {}; plugins searched in: {}",
                                      type_name, known.empty() ? "(none)" : known, dirs.empty() ? "(none)" : dirs));
}

std::vector<const ElementType*> ElementRegistry::types() const {
  std::vector<const ElementType*> out;
  for (const auto& n : m_type_order) out.push_back(m_types.at(n).get());
  return out;
}

}  // namespace ft
