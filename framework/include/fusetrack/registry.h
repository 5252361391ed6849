// Element types come from plugins. The registry loads plugin shared libraries (Boost.DLL),
// checks their versioned C descriptors and offers the types by name. The core knows no
// element type by name: everything it does with an element goes through ElementType.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusetrack/error.h"
#include "fusetrack/plugin_abi.h"

namespace boost {
namespace dll {
class shared_library;
}
}  // namespace boost

namespace ft {

struct FieldInfo {
  std::string name;
  std::string unit;
  std::string doc;
  uint32_t offset = 0;  // bytes into the parameter struct
  uint32_t type = FT_FIELD_DOUBLE;
  uint32_t count = 1;
  bool derived = false;   // filled by prepare(), never read from input
  bool required = false;  // must be given in the lattice file
  double default_value = 0.0;

  size_t element_size() const { return type == FT_FIELD_INT32 ? 4 : type == FT_FIELD_JSON ? 0 : 8; }
  const char* type_name() const {
    return type == FT_FIELD_INT32 ? "int32" : type == FT_FIELD_JSON ? "JSON" : "double";
  }
  bool host_only() const { return type == FT_FIELD_JSON; }  // not in the parameter struct
};

/// A loaded plugin library. It stays loaded while any ElementType from it is alive.
class Plugin {
 public:
  Plugin(std::string file, std::unique_ptr<boost::dll::shared_library> library, const ft_plugin_desc* desc);
  ~Plugin();
  const std::string& file() const { return m_file; }
  const std::string& name() const { return m_name; }
  uint32_t abi_version() const { return m_desc->abi_version; }
  /// Header text for NVRTC by include name, or nullptr.
  const std::string* header(const std::string& include_name) const;
  const std::map<std::string, std::string>& headers() const { return m_headers; }

 private:
  std::string m_file;
  std::string m_name;
  std::unique_ptr<boost::dll::shared_library> m_library;
  const ft_plugin_desc* m_desc;
  std::map<std::string, std::string> m_headers;
};

struct ElementType {
  std::string name;            // also the C++ struct name in the device source
  std::string doc;
  std::string track_function;  // NAME_track
  std::string header;          // include name in the plugin's header set
  uint32_t param_size = 0;
  uint32_t param_align = 8;
  bool thick = false;
  bool large_code = false;  // FT_LARGE_CODE: kept out of baked kernels beyond a few elements
  int length_field = -1;
  std::vector<FieldInfo> fields;
  ft_prepare_fn prepare = nullptr;
  ft_track_block_fn track_block = nullptr;           // single-particle elements
  const ft_collective_desc* collective = nullptr;    // collective elements (need the whole bunch)
  // The coordinates (enum ft_coordinate) the element reads and writes; FT_COORD_ALL for a type
  // that does not declare them (FT_ELEMENT_COORDINATES).
  uint32_t coordinates_read = FT_COORD_ALL;
  uint32_t coordinates_written = FT_COORD_ALL;
  bool coordinates_declared = false;
  std::shared_ptr<const Plugin> plugin;

  bool is_collective() const { return collective != nullptr; }
  /// A collective element of the profile kind (a zeta profile and a linear response: CollectiveSolver).
  bool is_profile_collective() const { return collective != nullptr && collective->kind == FT_COLLECTIVE_PROFILE; }
  /// A collective element of the grid kind (charge on a grid, Poisson solve: GridCollectiveSolver).
  bool is_grid_collective() const { return collective != nullptr && collective->kind == FT_COLLECTIVE_GRID; }
  /// A collective element of the slice-moment kind (slice centroids, wakes and feedback: MomentsCollectiveSolver).
  bool is_moments_collective() const { return collective != nullptr && collective->kind == FT_COLLECTIVE_MOMENTS; }

  const FieldInfo* find_field(const std::string& field_name) const;
  /// Parameter bytes with every field at its default (required fields zero).
  std::vector<unsigned char> default_params() const;
};

/// Checks a plugin descriptor against the rules of the ABI without running any of its code: the ABI
/// version, header names and texts, type and function names, each field table against its struct
/// (inside it, no overlaps, no overflow, defaults representable), the length field of a thick type,
/// and type names given twice. Returns the first problem, or "" for a valid descriptor.
/// ElementRegistry::load_plugin refuses a plugin whose descriptor has a problem.
std::string check_plugin_descriptor(const ft_plugin_desc& desc);

/// The element type a valid type descriptor describes (fields, sizes, functions; no plugin set).
ElementType element_type_from_descriptor(const ft_element_type_desc& t);

class ElementRegistry {
 public:
  ElementRegistry();
  ~ElementRegistry();
  ElementRegistry(const ElementRegistry&) = delete;
  ElementRegistry& operator=(const ElementRegistry&) = delete;

  /// Loads one plugin file and registers its types. Throws PluginError naming the file and the
  /// reason; on error nothing from that file is registered and earlier plugins stay usable.
  /// Loading the same file twice is a no-op.
  const Plugin& load_plugin(const std::string& path);

  /// Loads every fusetrack_plugin_*.so found in $FUSETRACK_PLUGIN_PATH (':'-separated) and
  /// then in the directory that holds the core library. Files that fail are skipped; the
  /// reasons are kept in load_warnings().
  void load_default_plugins();

  const ElementType* find(const std::string& type_name) const;
  /// Like find(), but throws InputError at `where` listing the registered types and the
  /// directories searched for plugins.
  const ElementType& get(const std::string& type_name, const InputLocation& where) const;

  std::vector<const ElementType*> types() const;
  const std::vector<std::shared_ptr<const Plugin>>& plugins() const { return m_plugins; }
  const std::vector<std::string>& searched_directories() const { return m_searched; }
  const std::vector<std::string>& load_warnings() const { return m_warnings; }

  /// The directory holding the fusetrack core library.
  static std::string core_library_directory();

 private:
  std::vector<std::shared_ptr<const Plugin>> m_plugins;
  std::map<std::string, std::shared_ptr<const ElementType>> m_types;
  std::vector<std::string> m_type_order;
  std::vector<std::string> m_searched;
  std::vector<std::string> m_warnings;
};

}  // namespace ft
