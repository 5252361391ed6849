# Sourced by the device scripts (run from the repository root on the GPU machine): $OUT for logs and
# numbers, the carried libraries (.carry/deps) on the search paths, the kernel cache in build-gpu/,
# and build_gpu TARGET... (configure and build Release into build-gpu/; every target when none named).
OUT=${OUT:-/tmp/fusetrack-out}
mkdir -p "$OUT"
ROOT=$(pwd)
export CMAKE_PREFIX_PATH=$ROOT/.carry/deps/usr
export LD_LIBRARY_PATH=$ROOT/.carry/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export FUSETRACK_KERNEL_CACHE=$ROOT/build-gpu/kernel-cache

build_gpu() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; return 1; }
  cmake --build build-gpu -j"$(nproc)" ${1:+--target "$@"} >"$OUT/build.log" 2>&1 \
    || { grep -E -A5 "error" "$OUT/build.log" | head -60; return 1; }
}
