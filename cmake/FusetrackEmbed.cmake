# fusetrack_embed_sources(OUTPUT <file.cpp> SYMBOL <c_identifier> BASE_DIR <dir> FILES <f1> ...)
# Generates a C++ source defining
#   extern "C" const ft_source_file SYMBOL[];  extern "C" const uint32_t SYMBOL_count;
# holding each file's text under its include name (its path relative to BASE_DIR). The text is
# baked in at build time, so NVRTC never depends on files found at run time.
set(FUSETRACK_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_sources.cmake CACHE INTERNAL "")

function(fusetrack_embed_sources)
  cmake_parse_arguments(ARG "" "OUTPUT;SYMBOL;BASE_DIR" "FILES" ${ARGN})
  set(abs_files "")
  foreach(f IN LISTS ARG_FILES)
    get_filename_component(af ${f} ABSOLUTE BASE_DIR ${ARG_BASE_DIR})
    list(APPEND abs_files ${af})
  endforeach()
  string(REPLACE ";" "|" files_arg "${abs_files}")
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DSYMBOL=${ARG_SYMBOL} -DBASE_DIR=${ARG_BASE_DIR}
            "-DFILES=${files_arg}" -P ${FUSETRACK_EMBED_SCRIPT}
    DEPENDS ${abs_files} ${FUSETRACK_EMBED_SCRIPT}
    COMMENT "Embedding ${ARG_SYMBOL} sources for NVRTC"
    VERBATIM)
endfunction()
