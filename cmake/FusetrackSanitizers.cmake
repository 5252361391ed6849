# Sanitizer and fuzzing builds (see CMakePresets.json, preset "asan", and tests/fuzz/README.md).
#
#   FUSETRACK_SANITIZE=ON  every target (core, plugins, tests, the command line) is built with
#                          AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer;
#                          undefined behaviour aborts (-fno-sanitize-recover), so a test that hits
#                          it fails.
#   FUSETRACK_FUZZ=ON      (clang only) adds libFuzzer coverage instrumentation to everything and
#                          builds the fuzz targets of tests/fuzz/; implies FUSETRACK_SANITIZE.
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
    # As Debian's gcc does by default: CUDA::cufft's link interface names the driver library, which
    # must not become a dependency (the driver is loaded at run time; machines without it run on the CPU).
    add_link_options(-Wl,--as-needed)
    # gcc accepts lambdas that capture structured bindings in C++17 (doctest's CHECK and CAPTURE of
    # `auto [a, b]` do this in several tests); clang 14 accepts them from C++20 on. The sanitizer build
    # compiles as C++20 so that every test builds unchanged; the release build stays C++17.
    set(CMAKE_CXX_STANDARD 20)
  else()
    list(APPEND FUSETRACK_SANITIZER_FLAGS -g1)
  endif()
  add_compile_options(${FUSETRACK_SANITIZER_FLAGS})
  add_link_options(-fsanitize=address,undefined)
  if(FUSETRACK_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  message(STATUS "fusetrack: sanitizer build (ASan + UBSan), fuzz targets: ${FUSETRACK_FUZZ}")
endif()
