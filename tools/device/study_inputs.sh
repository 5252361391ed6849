# Sourced by the device scripts of the DA studies: the inputs of the benchmark studies, written
# into build-gpu/. clic_seeds and mba_seeds need BIN (the fusetrack binary).

# Errors of the CLIC ring: every thin multipole gets random sextupole components (absolute K2L, J2L) and
# 5 um / 20 urad misalignments (larger ones, uncorrected, leave some seeds without a closed orbit); a study
# table, not a measured error budget.
write_clic_error_table() {
  cat > build-gpu/clic_errors.json <<'JSON'
{"fusetrack_error_table": 1, "cut": 3.0,
 "entries": [{"match": ".*", "type": "Multipole",
              "random": {"dkn": [0, 0, 2e-2], "dks": [0, 0, 2e-2], "dx": 5e-6, "dy": 5e-6, "dpsi": 2e-5}}]}
JSON
}

# clic_seeds CLIC N: build-gpu/clic_seeds<N>.json (N = 1: clic_seed1.json), made once.
clic_seeds() {
  local out=build-gpu/clic_seeds$2.json
  [ "$2" = 1 ] && out=build-gpu/clic_seed1.json
  [ -f build-gpu/clic_errors.json ] || write_clic_error_table
  [ -f "$out" ] || $BIN errors "$1" --table build-gpu/clic_errors.json --seeds "$2" -o "$out" >/dev/null 2>&1 \
    || echo "errors failed: CLIC, $2 seeds"
}

# The bundled light-source ring with 60 seeds of multipole errors and 2 um horizontal quadrupole shifts
# (with vertical shifts or rolls, uncorrected, some seeds sit on the coupling resonance), each magnet its
# own errors (--split-lattice): build-gpu/mba_split.json and build-gpu/mba_seeds.json.
mba_seeds() {
  cat > build-gpu/mba_table.json <<'JSON'
{"fusetrack_error_table": 1, "cut": 3.0,
 "entries": [
  {"match": "q.*", "type": "ThickMultipole", "order": 1, "radius": 0.01, "random": {"dknr": [0, 0, 5e-4, 2e-4], "dx": 2e-6}},
  {"name": "bd", "order": 0, "radius": 0.01, "random": {"dknr": [2e-4, 1e-4]}},
  {"match": "s[fd]", "type": "ThickMultipole", "order": 2, "radius": 0.01, "random": {"dknr": [0, 0, 1e-3, 5e-4]}}]}
JSON
  $BIN errors lattices/mba_light_source.json --table build-gpu/mba_table.json --seeds 60 --split-lattice build-gpu/mba_split.json \
    -o build-gpu/mba_seeds.json >/dev/null 2>&1 || echo "errors failed: light-source ring"
}

# clic_piece CLIC OUT BEGIN LENGTH: the Xsuite line cut to elements BEGIN .. BEGIN + LENGTH - 1.
clic_piece() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b, n = int(sys.argv[3]), int(sys.argv[4])
d["element_names"] = d["element_names"][b:b + n]
d["elements"] = {k: d["elements"][k] for k in set(d["element_names"])}
json.dump(d, open(sys.argv[2], "w"))
PY
}
