// Compiled into every element plugin by fusetrack_add_element_plugin(): collects the types the
// plugin's headers register and exports the one versioned C entry point the core looks for.
#include <vector>

#include "fusetrack/plugin_abi.h"

#ifndef FT_PLUGIN_NAME
#error "FT_PLUGIN_NAME must be defined by fusetrack_add_element_plugin()"
#endif
#ifndef FT_PLUGIN_STAMPED_ABI_VERSION
#define FT_PLUGIN_STAMPED_ABI_VERSION FT_PLUGIN_ABI_VERSION
#endif

extern "C" const ft_source_file ft_plugin_headers[];
extern "C" const uint32_t ft_plugin_headers_count;

namespace ft {
namespace element_sdk {

static std::vector<ft_element_type_desc>& registered_types() {
  static std::vector<ft_element_type_desc> types;
  return types;
}

bool add_type(const ft_element_type_desc& desc) {
  registered_types().push_back(desc);
  return true;
}

}  // namespace element_sdk
}  // namespace ft

extern "C" __attribute__((visibility("default"))) const ft_plugin_desc* fusetrack_plugin_entry(
    uint32_t host_abi_version) {
  (void)host_abi_version;  // the core compares versions; the plugin reports its own
  static ft_plugin_desc desc;
  const auto& types = ft::element_sdk::registered_types();
  desc.abi_version = FT_PLUGIN_STAMPED_ABI_VERSION;
  desc.plugin_name = FT_PLUGIN_NAME;
  desc.plugin_version = "1";
  desc.types = types.data();
  desc.type_count = static_cast<uint32_t>(types.size());
  desc.headers = ft_plugin_headers;
  desc.header_count = ft_plugin_headers_count;
  return &desc;
}
