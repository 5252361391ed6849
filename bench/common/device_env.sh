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
  bash bench/common/refresh_sources.sh || true  # 1: sources changed, all touched
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; return 1; }
  cmake --build build-gpu -j"$(nproc)" ${1:+--target "$@"} >"$OUT/build.log" 2>&1 \
    || { grep -E -A5 "error" "$OUT/build.log" | head -60; return 1; }
}

# The usual start of a one-GPU script: the device's name into $OUT/device.txt, the build of fusetrack, test_gpu
# and the built-in plugin (timed), and BIN.
device_start() {
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
  local t=$SECONDS
  build_gpu fusetrack test_gpu builtin || return 1
  echo "== build ok ($((SECONDS - t)) s)"
  BIN=build-gpu/bin/fusetrack
}
