# CTest plugins/out_of_tree_no_rebuild: element plugins need no rebuild of fusetrack.
#
#   cmake -DBUILD_DIR=<fusetrack build> -DSOURCE_DIR=<fusetrack source> -DWORK_DIR=<scratch>
#         -DCXX_COMPILER=<c++> -DGENERATOR=<generator> -DPLUGINS=tutorial,beambeam4d,taylor_map
#         -P out_of_tree_no_rebuild.cmake
#
# 1. installs fusetrack from the build tree into WORK_DIR/prefix and records the SHA-256 of the
#    installed binary, core library and built-in plugin (and of the build tree's binary and library);
# 2. copies each plugins/<name> project to WORK_DIR/src/<name> and configures and builds it out of
#    tree with CMAKE_PREFIX_PATH=WORK_DIR/prefix only (checks: fusetrack_DIR is the prefix's, no
#    compile command names the source tree's framework/ or cmake/);
# 3. tracks each example lattice on the CPU with the installed binary and --plugin <built .so>:
#    the results must equal those of the same plugin built in-tree (bit for bit), and the tutorial's
#    KickX must equal the built-in Multipole with knl[0] = -kick; a C++ program linked to
#    fusetrack::core (tests/plugins/core_consumer) must give the command line's result;
# 4. checks that every checksum is unchanged.
cmake_minimum_required(VERSION 3.24)
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR CXX_COMPILER GENERATOR PLUGINS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "out_of_tree_no_rebuild.cmake: -D${v}=... is required")
  endif()
endforeach()
string(REPLACE "," ";" PLUGINS "${PLUGINS}")
string(TIMESTAMP t_start "%s")

function(run_checked what)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t0}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit code ${rc}):\n  ${ARGN}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  message(STATUS "${what}: ok (${dt} s)")
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

function(checksums out_var)
  set(result "")
  foreach(f IN LISTS ARGN)
    get_filename_component(real ${f} REALPATH)
    if(NOT EXISTS ${real})
      message(FATAL_ERROR "missing file ${f}")
    endif()
    file(SHA256 ${real} sum)
    list(APPEND result "${real}=${sum}")
  endforeach()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

function(require_same_file a b what)
  file(SHA256 ${a} sa)
  file(SHA256 ${b} sb)
  if(NOT sa STREQUAL sb)
    file(READ ${a} ta LIMIT 600)
    file(READ ${b} tb LIMIT 600)
    message(FATAL_ERROR "${what}: ${a} and ${b} differ\n--- ${a}\n${ta}\n--- ${b}\n${tb}")
  endif()
  message(STATUS "${what}: identical")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

# 1. Install and checksum.
set(build_files ${BUILD_DIR}/bin/fusetrack ${BUILD_DIR}/lib/libfusetrack.so ${BUILD_DIR}/lib/fusetrack_plugin_builtin.so)
checksums(build_before ${build_files})
run_checked("install to ${prefix}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(installed_files ${prefix}/bin/fusetrack ${prefix}/lib/libfusetrack.so ${prefix}/lib/fusetrack_plugin_builtin.so)
checksums(installed_before ${installed_files})
foreach(f lib/cmake/fusetrack/fusetrackConfig.cmake lib/cmake/fusetrack/fusetrackConfigVersion.cmake
          lib/cmake/fusetrack/fusetrackTargets.cmake lib/cmake/fusetrack/FusetrackPluginSdk.cmake
          lib/cmake/fusetrack/FusetrackEmbed.cmake lib/cmake/fusetrack/embed_sources.cmake
          share/fusetrack/sdk/plugin_entry.cpp include/fusetrack/plugin_abi.h include/fusetrack/registry.h
          include/fusetrack/device/element.h include/fusetrack/device/particle.h include/fusetrack/device/math.h
          include/fusetrack/device/qualifiers.h include/fusetrack/device/portable_math.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the installation lacks ${f}")
  endif()
endforeach()

# The installed binary must use the installed core library (RPATH $ORIGIN/../lib), whose directory
# is where the built-in plugin is found.
run_checked("installed fusetrack info" ${prefix}/bin/fusetrack info --no-fields)
if(NOT run_output MATCHES "core library: ([^\n]*)\n")
  message(FATAL_ERROR "fusetrack info printed no core library:\n${run_output}")
endif()
get_filename_component(core_dir "${CMAKE_MATCH_1}" REALPATH)
get_filename_component(prefix_lib ${prefix}/lib REALPATH)
if(NOT core_dir STREQUAL prefix_lib)
  message(FATAL_ERROR "the installed fusetrack uses the core library in ${core_dir}, not ${prefix_lib}")
endif()
if(NOT run_output MATCHES "builtin \\(ABI [0-9]+\\): ${prefix_lib}/fusetrack_plugin_builtin.so")
  message(FATAL_ERROR "the installed fusetrack did not load the installed built-in plugin:\n${run_output}")
endif()

# 2. Configure and build each example plugin out of tree.
file(WRITE ${WORK_DIR}/one_particle.csv "x,px,y,py,zeta,delta\n1e-3,0,-5e-4,0,0,0\n")
foreach(name IN LISTS PLUGINS)
  set(src ${WORK_DIR}/src/${name})
  file(COPY ${SOURCE_DIR}/plugins/${name}/ DESTINATION ${src} PATTERN build EXCLUDE)
  run_checked("${name}: configure against ${prefix}"
              ${CMAKE_COMMAND} -S ${src} -B ${src}/build -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
              -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
              -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
  file(STRINGS ${src}/build/CMakeCache.txt found_dir REGEX "^fusetrack_DIR:")
  if(NOT found_dir STREQUAL "fusetrack_DIR:PATH=${prefix}/lib/cmake/fusetrack")
    message(FATAL_ERROR "${name}: found fusetrack at '${found_dir}', not in ${prefix}")
  endif()
  run_checked("${name}: build" ${CMAKE_COMMAND} --build ${src}/build -j 2)
  file(READ ${src}/build/compile_commands.json commands)
  foreach(forbidden "${SOURCE_DIR}/framework" "${SOURCE_DIR}/cmake" "${BUILD_DIR}/framework")
    string(FIND "${commands}" "${forbidden}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${name}: the out-of-tree build uses ${forbidden}:\n${commands}")
    endif()
  endforeach()
  if(NOT commands MATCHES "-ffp-contract=off" OR NOT commands MATCHES "-fno-fast-math")
    message(FATAL_ERROR "${name}: the plugin is not compiled with the core's floating-point flags:\n${commands}")
  endif()
  set(so ${src}/build/fusetrack_plugin_${name}.so)
  if(NOT EXISTS ${so})
    message(FATAL_ERROR "${name}: ${so} was not built")
  endif()

  # 3. Track with the installed binary: out-of-tree plugin == in-tree plugin, bit for bit.
  set(in_tree_dir ${BUILD_DIR}/tests/plugins/examples/${name})
  foreach(particles grid one)
    if(particles STREQUAL "one")
      set(particle_args -p ${WORK_DIR}/one_particle.csv)
    else()
      set(particle_args --grid -2e-3 2e-3 7 -1e-3 1.5e-3 5)
    endif()
    run_checked("${name}: track (${particles}) with the out-of-tree plugin"
                ${prefix}/bin/fusetrack track ${src}/lattice.json --plugin ${so} --device cpu -n 50 ${particle_args}
                -o ${WORK_DIR}/${name}_${particles}_out_of_tree.csv)
    if(NOT run_output MATCHES "backend     cpu")
      message(FATAL_ERROR "${name}: not tracked on the CPU:\n${run_output}")
    endif()
    run_checked("${name}: track (${particles}) with the in-tree plugin"
                ${prefix}/bin/fusetrack track ${in_tree_dir}/lattice.json
                --plugin ${in_tree_dir}/build/fusetrack_plugin_${name}.so --device cpu -n 50 ${particle_args}
                -o ${WORK_DIR}/${name}_${particles}_in_tree.csv)
    require_same_file(${WORK_DIR}/${name}_${particles}_out_of_tree.csv ${WORK_DIR}/${name}_${particles}_in_tree.csv
                      "${name}: out-of-tree vs in-tree plugin (${particles})")
  endforeach()

  if(name STREQUAL "tutorial")
    # KickX(kick) == Multipole(knl[0] = -kick), and a zero kick changes the result.
    file(READ ${src}/lattice.json lattice)
    string(REGEX MATCH "\"type\": \"KickX\", \"kick\": ([^}]*)}" kick_match "${lattice}")
    if(NOT kick_match)
      message(FATAL_ERROR "tutorial: no KickX definition found in lattice.json")
    endif()
    string(STRIP "${CMAKE_MATCH_1}" kick)
    string(REPLACE "${kick_match}" "\"type\": \"Multipole\", \"knl\": [-${kick}]}" builtin_lattice "${lattice}")
    file(WRITE ${src}/lattice_builtin.json "${builtin_lattice}")
    string(REPLACE "${kick_match}" "\"type\": \"KickX\", \"kick\": 0.0}" zero_lattice "${lattice}")
    file(WRITE ${src}/lattice_zero.json "${zero_lattice}")
    run_checked("tutorial: the same ring with a built-in Multipole"
                ${prefix}/bin/fusetrack track ${src}/lattice_builtin.json --device cpu -n 50
                -p ${WORK_DIR}/one_particle.csv -o ${WORK_DIR}/tutorial_builtin.csv)
    require_same_file(${WORK_DIR}/tutorial_one_out_of_tree.csv ${WORK_DIR}/tutorial_builtin.csv
                      "tutorial: KickX vs Multipole knl[0] = -kick")
    run_checked("tutorial: the ring with kick = 0"
                ${prefix}/bin/fusetrack track ${src}/lattice_zero.json --plugin ${so} --device cpu -n 50
                -p ${WORK_DIR}/one_particle.csv -o ${WORK_DIR}/tutorial_zero.csv)
    file(SHA256 ${WORK_DIR}/tutorial_zero.csv s0)
    file(SHA256 ${WORK_DIR}/tutorial_one_out_of_tree.csv s1)
    if(s0 STREQUAL s1)
      message(FATAL_ERROR "tutorial: the KickX corrector has no effect")
    endif()
  endif()
endforeach()

# C++ users: a program linked to fusetrack::core from the package gives the command line's result.
set(consumer ${WORK_DIR}/src/core_consumer)
file(COPY ${SOURCE_DIR}/tests/plugins/core_consumer/ DESTINATION ${consumer})
run_checked("core_consumer: configure against ${prefix}"
            ${CMAKE_COMMAND} -S ${consumer} -B ${consumer}/build -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
            -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
run_checked("core_consumer: build" ${CMAKE_COMMAND} --build ${consumer}/build -j 2)
list(GET PLUGINS 0 first)
run_checked("core_consumer: track ${first}" ${consumer}/build/core_consumer ${WORK_DIR}/src/${first}/lattice.json
            ${WORK_DIR}/src/${first}/build/fusetrack_plugin_${first}.so)
set(consumer_output "${run_output}")
if(NOT consumer_output MATCHES "core library: ([^\n]*)\n([^\n]*)")
  message(FATAL_ERROR "core_consumer printed:\n${consumer_output}")
endif()
set(consumer_row "${CMAKE_MATCH_2}")
get_filename_component(consumer_core "${CMAKE_MATCH_1}" REALPATH)
if(NOT consumer_core STREQUAL prefix_lib)
  message(FATAL_ERROR "core_consumer uses the core library in ${consumer_core}, not ${prefix_lib}")
endif()
run_checked("${first}: 10 turns with the installed command"
            ${prefix}/bin/fusetrack track ${WORK_DIR}/src/${first}/lattice.json --device cpu -n 10
            -p ${WORK_DIR}/one_particle.csv -o ${WORK_DIR}/consumer_reference.csv)
file(STRINGS ${WORK_DIR}/consumer_reference.csv rows)
list(GET rows 1 cli_row)
if(NOT consumer_row STREQUAL cli_row)
  message(FATAL_ERROR "core_consumer and the command line differ:\n  ${consumer_row}\n  ${cli_row}")
endif()
message(STATUS "core_consumer (fusetrack::core) == fusetrack track: ${cli_row}")

# 4. Nothing of fusetrack was rebuilt or rewritten.
checksums(build_after ${build_files})
checksums(installed_after ${installed_files})
if(NOT build_before STREQUAL build_after OR NOT installed_before STREQUAL installed_after)
  message(FATAL_ERROR "fusetrack binaries changed:\nbefore: ${build_before};${installed_before}\n"
                      "after:  ${build_after};${installed_after}")
endif()
string(TIMESTAMP t_end "%s")
math(EXPR total "${t_end} - ${t_start}")
message(STATUS "unchanged: ${installed_after}")
message(STATUS "out-of-tree plugins built and used without rebuilding fusetrack (${total} s)")
