# Sanitizer and fuzzing builds (see CMakePresets.json, preset "asan", and tests/fuzz/README.md).
#
#   FUSETRACK_SANITIZE=ON  every target (core, plugins, tests, the command line) is built with
#                          AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer;
#                          undefined behaviour aborts (-fno-sanitize-recover), so a test that hits
#                          it fails.
#   FUSETRACK_FUZZ=ON      (clang only) adds libFuzzer coverage instrumentation to everything and
#                          builds the fuzz targets of tests/fuzz/; implies FUSETRACK_SANITIZE.
#
# Presets (CMakePresets.json): "asan" builds the test suites with gcc and the sanitizers (gcc accepts
# the tests' lambdas that capture structured bindings, which clang 14 rejects in C++17 and C++20
# alike); "fuzz" builds the core and the fuzz targets with clang. The test preset "asan" leaves out
# the install test (a consumer of an instrumented libfusetrack needs -fsanitize to link), the NVRTC
# compile of every bundled lattice (closed-source compiler time, run by the release stage), and the
# expansion-limit tests of tests/input/test_lattice_scale.cpp (they cap RLIMIT_DATA at 1 GiB, which
# AddressSanitizer's shadow memory cannot live with: "Failed to mmap").
#
# Run-time options for the tests and fuzzers are in tools/sanitizer/ (suppressions for the
# closed-source CUDA libraries, documented there).
option(FUSETRACK_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(FUSETRACK_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only; implies FUSETRACK_SANITIZE)" OFF)

if(FUSETRACK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FUSETRACK_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ "
                        "-DCMAKE_C_COMPILER=clang, or use the preset: cmake --preset asan")
  endif()
  set(FUSETRACK_SANITIZE ON CACHE BOOL "" FORCE)
endif()

if(FUSETRACK_SANITIZE)
  set(FUSETRACK_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Calls through plugin function pointers (C entry points, dlopen) are checked by -fsanitize=function
    # against the caller's prototype, which is not what it is meant for: left out.
    list(APPEND FUSETRACK_SANITIZER_FLAGS -fno-sanitize=function -gline-tables-only)
  else()
    list(APPEND FUSETRACK_SANITIZER_FLAGS -g1)
  endif()
  add_compile_options(${FUSETRACK_SANITIZER_FLAGS})
  add_link_options(-fsanitize=address,undefined)
  # Debian's gcc links with --as-needed except under -fsanitize, and clang never does: without it the
  # CUDA driver stub named by the link interface of CUDA::cufft becomes a dependency, and nothing starts
  # on a machine without a driver (the driver is loaded at run time; without it fusetrack runs on the CPU).
  add_link_options(-Wl,--as-needed)
  if(FUSETRACK_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  message(STATUS "fusetrack: sanitizer build (ASan + UBSan), fuzz targets: ${FUSETRACK_FUZZ}")
endif()
