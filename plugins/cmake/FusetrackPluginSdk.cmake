# The fusetrack element-plugin SDK. Used in-tree (built-in plugin) and from an installed
# fusetrack through find_package(fusetrack).
#
#   fusetrack_add_element_plugin(NAME
#       HEADERS <element headers...>      # each header declares and registers element types
#       [SOURCES <extra host sources...>]
#       [ABI_VERSION <n>])               # only for testing the core's refusal of other ABIs
#
# builds the MODULE library fusetrack_plugin_<NAME>.so which
#   - compiles every header on the host with the core's floating-point flags (-ffp-contract=off),
#   - embeds the header texts for NVRTC (the same text is compiled for the GPU),
#   - exports the versioned C entry point fusetrack_plugin_entry stamped with the ABI version.
# All headers of one plugin must sit in one directory; their file names are their include names.

set(FUSETRACK_SDK_DIR ${CMAKE_CURRENT_LIST_DIR} CACHE INTERNAL "")
# Installed, this file sits next to FusetrackEmbed.cmake; in-tree the top level has included it already.
if(NOT COMMAND fusetrack_embed_sources AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/FusetrackEmbed.cmake)
  include(${CMAKE_CURRENT_LIST_DIR}/FusetrackEmbed.cmake)
endif()

function(fusetrack_add_element_plugin NAME)
  cmake_parse_arguments(ARG "" "ABI_VERSION" "HEADERS;SOURCES" ${ARGN})
  if(NOT TARGET fusetrack::sdk OR NOT FUSETRACK_SDK_ENTRY_SOURCE OR NOT COMMAND fusetrack_embed_sources)
    message(FATAL_ERROR "fusetrack_add_element_plugin(${NAME}): the fusetrack SDK is not set up; "
                        "call find_package(fusetrack) first")
  endif()
  if(NOT ARG_HEADERS)
    message(FATAL_ERROR "fusetrack_add_element_plugin(${NAME}): HEADERS is required")
  endif()
  set(abs_headers "")
  set(header_dir "")
  foreach(h IN LISTS ARG_HEADERS)
    get_filename_component(ah ${h} ABSOLUTE)
    get_filename_component(dir ${ah} DIRECTORY)
    if(header_dir STREQUAL "")
      set(header_dir ${dir})
    elseif(NOT header_dir STREQUAL dir)
      message(FATAL_ERROR "fusetrack_add_element_plugin(${NAME}): all HEADERS must be in one directory (${header_dir} vs ${dir})")
    endif()
    list(APPEND abs_headers ${ah})
  endforeach()

  set(gen ${CMAKE_CURRENT_BINARY_DIR}/fusetrack_plugin_${NAME})
  set(types_cpp "// Generated: registers the element types of plugin ${NAME}.\n")
  foreach(ah IN LISTS abs_headers)
    string(APPEND types_cpp "#include \"${ah}\"\n")
  endforeach()
  file(CONFIGURE OUTPUT ${gen}/types.cpp CONTENT "${types_cpp}")
  fusetrack_embed_sources(OUTPUT ${gen}/headers.cpp SYMBOL ft_plugin_headers BASE_DIR ${header_dir}
                          FILES ${abs_headers})

  add_library(${NAME} MODULE ${gen}/types.cpp ${gen}/headers.cpp ${FUSETRACK_SDK_ENTRY_SOURCE} ${ARG_SOURCES})
  target_link_libraries(${NAME} PRIVATE fusetrack::sdk)
  target_include_directories(${NAME} PRIVATE ${header_dir})
  target_compile_definitions(${NAME} PRIVATE FT_BUILDING_PLUGIN FT_PLUGIN_NAME="${NAME}")
  if(DEFINED ARG_ABI_VERSION)
    target_compile_definitions(${NAME} PRIVATE FT_PLUGIN_STAMPED_ABI_VERSION=${ARG_ABI_VERSION})
  endif()
  set_target_properties(${NAME} PROPERTIES PREFIX "" OUTPUT_NAME "fusetrack_plugin_${NAME}"
                                           CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
