#!/bin/bash
# Latency-bound GPU regime (a lone DA scan of 10^4 particles): what the switch kernel's per-element
# dispatch costs against the baked form, on a 600-element piece of the CLIC damping ring.
#   OUT=/tmp/out bash bench/dispatch/switch_dispatch_latency.sh      (needs .carry/deps and .carry/xsuite)
# PIECE_BEGIN/PIECE_LEN pick the window; TURNS the turns per GPU measurement.
set -u
source bench/common/device_env.sh
source bench/common/study_inputs.sh
device_start || exit 1
CLIC=$ROOT/.carry/xsuite/clic_damping_ring.json
PIECE=build-gpu/clic_piece.json
clic_piece "$CLIC" "$PIECE" "${PIECE_BEGIN:-10000}" "${PIECE_LEN:-600}"
# fusetrack bench times every kernel form (auto, switch, staged, baked where allowed) in both fma modes.
echo "== piece, 10^4 particles, ${TURNS:-2000} turns" | tee -a "$OUT/probe.log"
$BIN bench "$PIECE" -N 64 -n 1 --thread-counts 1 --gpu-particles 1e4 ${EXTRA_COUNTS:-} --gpu-turns "${TURNS:-2000}" \
  --no-per-element 2>&1 | grep -E "fused|rror" | tee -a "$OUT/probe.log"
echo "== CLIC whole, 10^4 particles, 40 turns" | tee -a "$OUT/probe.log"
$BIN bench "$CLIC" -N 64 -n 1 --thread-counts 1 --gpu-particles 1e4 --gpu-turns 40 --no-per-element 2>&1 \
  | grep -E "fused|rror" | tee -a "$OUT/probe.log"
for d in ${SASS_DISPATCH:-switch}; do
  $BIN codegen "$CLIC" --dispatch $d --fma off -o build-gpu/cg_$d >/dev/null 2>&1
  cuobjdump -sass build-gpu/cg_$d/fusetrack_fused.cubin > "$OUT/clic_${d}.sass" 2>&1
done
$BIN codegen "$PIECE" --dispatch baked --fma off -o build-gpu/cg_piece >/dev/null 2>&1
cuobjdump -sass build-gpu/cg_piece/fusetrack_fused.cubin > "$OUT/piece_baked.sass" 2>&1
ls -la "$OUT"
