#!/bin/bash
# On one GPU: rpp and rvv recomputed from delta and ptau in the collective
# kernels (never loaded or stored), 32-bit shared-memory atomics in the deposit, and the deposit
# kernels' occupancy. Build, the collective GPU tests (bitwise against the CPU), then the collective
# bench at 10^8 with the FFT size (frequency_resolution 5.6 MHz: 2048 points for 1000 slices),
# each row against the same-run full-load baseline (FUSETRACK_FULL_LOADS=1: the kernels before the
# coordinate masks), once with the old occupancy (FUSETRACK_BLOCKS_PER_SM=2); the PS example at 10^7.
# Usage (device): OUT=... bash tools/device/issue25_derived.sh
set -u
source tools/device/device_env.sh
build_gpu fusetrack test_gpu builtin || exit 1
BIN=build-gpu/bin/fusetrack
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
bench() {  # label, lattice, extra arguments
  local label=$1 lat=$2
  shift 2
  echo "== $label: $lat $*" | tee -a "$OUT/bench.log"
  timeout ${BENCH_TIMEOUT:-200} stdbuf -oL $BIN bench "$lat" --slices 1000 --gpu-turns 40 -N 20000 -n 5 "$@" 2>&1 \
    | grep -v "^LongitudinalImpedance" | tee -a "$OUT/bench.log"
}
small_fft=(--set impedance.frequency_resolution=5.6e6 --collective-particles 1e8)
stage=${STAGE:-all}
if [ "$stage" = occupancy ]; then
  # The segment kernels' register budget: FUSETRACK_COLLECTIVE_MIN_BLOCKS=N blocks of 256 threads per SM.
  # (Each bench at 10^8 samples the bunch on the host several times: minutes per lattice.)
  for mb in ${MIN_BLOCKS:-5 0}; do
    BENCH_TIMEOUT=$((570 - SECONDS)) FUSETRACK_COLLECTIVE_MIN_BLOCKS=$mb \
      bench "longitudinal-only, min blocks $mb" lattices/longitudinal_only_bench_ring.json "${small_fft[@]}"
  done
  exit 0
fi
bench "longitudinal-only" lattices/longitudinal_only_bench_ring.json "${small_fft[@]}"
FUSETRACK_BLOCKS_PER_SM=2 bench "longitudinal-only, 2 blocks per SM" lattices/longitudinal_only_bench_ring.json "${small_fft[@]}"
bench "6D bench ring" lattices/longitudinal_bench_ring.json "${small_fft[@]}"
bench "PS example" lattices/ps_injection_longitudinal.json --collective-particles 1e7
# The collective GPU tests with the time left (the call's limit is 600 s).
left=$((560 - SECONDS))
timeout $((left > 30 ? left : 30)) build-gpu/bin/test_gpu -tc="collective fma=off: a longitudinal*,collective fma=off: CPU*,collective fma=on*,bunch train on the GPU: 4*,transverse wake and damper on the GPU: fma off*,space charge PIC on the GPU: fma off*,frozen space charge with sizes*,collider on the GPU: every*,matched bunch made on the device and tracked*,collective fma=off at scale*" 2>&1 \
  | grep -E "MESSAGE|TEST CASE|test cases|assertions|ERROR|FAILED|skipped" | tee "$OUT/tests.log" | tail -40
