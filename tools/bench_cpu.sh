#!/usr/bin/env bash
# CPU throughput per core on a DA-like workload: the initial conditions of
# `fusetrack da` (16 angles x 31 amplitudes = 496 particles, around the closed orbit) tracked
# for 1000 turns with `fusetrack track --device cpu`, one and several threads. Prints the best of
# --repeat runs (shared machines are noisy) as particle-turns/s and element-passes/s, both
# counting only the passes particles really made (a lost particle stops at its loss), and the
# ratio to the first thread count.
#
#   tools/bench_cpu.sh [--lattice FILE] [--turns N] [--threads "1 16"] [--repeat R]
#                      [--angles A] [--amplitudes K] [--amplitude-range LO HI]
#                      [--build DIR] [--before DIR]
#
# --build DIR: the build to time (DIR/bin/fusetrack, its libraries and plugin in DIR/lib; default
#   build/). --before DIR: a second build laid out the same way (e.g. a copy of
#   build/bin and build/lib made before a change) timed in the same run, alternating with the
#   current one; the speed-up is printed per thread count and the final particles of the two
#   builds are compared bit for bit (they must be identical).
# Needs python3 (standard library only) to convert the initial conditions and count passes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lattice="$root/lattices/mba_light_source.json"
turns=1000
threads="1"
repeat=3
angles=16
amplitudes=31
amp_lo=0.0002
amp_hi=0.007
build="$root/build"
before=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lattice) lattice="$2"; shift 2 ;;
    --turns) turns="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --angles) angles="$2"; shift 2 ;;
    --amplitudes) amplitudes="$2"; shift 2 ;;
    --amplitude-range) amp_lo="$2"; amp_hi="$3"; shift 3 ;;
    --build) build="$2"; shift 2 ;;
    --before) before="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench_cpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

fusetrack=(env "LD_LIBRARY_PATH=$build/lib" "$build/bin/fusetrack")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The initial conditions of the DA scan (one turn is enough to write them).
"${fusetrack[@]}" da "$lattice" --turns 1 --angles "$angles" --amplitudes "$amplitudes" \
  --amplitude-range "$amp_lo" "$amp_hi" --device cpu --no-plots -o "$work/da" > "$work/da.log" 2>&1 ||
  { cat "$work/da.log" >&2; exit 1; }

python3 - "$work/da/da.npz" "$work/ics.csv" <<'EOF'
import ast, struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
def arr(name):
    raw = z.read(name + '.npy')
    hl = struct.unpack('<H', raw[8:10])[0]
    hdr = ast.literal_eval(raw[10:10 + hl].decode())
    data = raw[10 + hl:]
    n = len(data) // 8
    return struct.unpack('<%dd' % n, data)
cols = ['x', 'px', 'y', 'py', 'zeta', 'delta']
values = [arr(c + '0') for c in cols]
with open(sys.argv[2], 'w') as f:
    f.write(','.join(cols) + '\n')
    for row in zip(*values):
        f.write(','.join(repr(v) for v in row) + '\n')
EOF

# passes FILE.npz N_ELEMENTS TURNS: element passes made (lost particles stop at their loss).
passes() {
  python3 - "$@" <<'EOF'
import ast, struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1]); ne = int(sys.argv[2]); turns = int(sys.argv[3])
def arr(name):
    raw = z.read(name + '.npy')
    hl = struct.unpack('<H', raw[8:10])[0]
    hdr = ast.literal_eval(raw[10:10 + hl].decode())
    fmt = {'<i4': 'i', '<i8': 'q', '<f8': 'd'}[hdr['descr']]
    data = raw[10 + hl:]
    return struct.unpack('<%d%s' % (len(data) // struct.calcsize(fmt), fmt), data)
state, lt, le = arr('state'), arr('lost_turn'), arr('lost_element')
print(sum(turns * ne if s > 0 else t * ne + e + 1 for s, t, e in zip(state, lt, le)))
EOF
}

# run BUILD_DIR THREADS OUT: one timed run; prints seconds.
run() {
  local dir="$1" t="$2" out="$3"
  env "LD_LIBRARY_PATH=$dir/lib" "$dir/bin/fusetrack" track "$lattice" -p "$work/ics.csv" -n "$turns" --device cpu --threads "$t" -o "$out" \
    > "$work/run.log" 2>&1 || { cat "$work/run.log" >&2; exit 1; }
  grep -m1 '^time' "$work/run.log" | awk '{print $2}'
}

n_elements=$("${fusetrack[@]}" track "$lattice" -p "$work/ics.csv" -n 1 --device cpu -o "$work/probe.npz" 2>&1 |
  sed -n 's/^lattice .*(\([0-9]*\) elements.*/\1/p')
particles=$(($(wc -l < "$work/ics.csv") - 1))
echo "# bench_cpu: $lattice, $particles initial conditions (da: $angles angles x $amplitudes amplitudes," \
     "$amp_lo..$amp_hi m), $turns turns, $n_elements elements/turn; best of $repeat runs"
echo "# host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
printf '%-8s %-8s %10s %16s %16s %10s\n' build threads seconds particle-turns/s element-passes/s vs-1st
declare -A base
for t in $threads; do
  labels=(current)
  [[ -n "$before" ]] && labels=(before current)
  declare -A best=()
  for ((r = 0; r < repeat; ++r)); do
    for label in "${labels[@]}"; do
      if [[ "$label" == before ]]; then dir="$before"; else dir="$build"; fi
      s=$(run "$dir" "$t" "$work/$label.npz")
      if [[ -z "${best[$label]:-}" ]] || awk "BEGIN{exit !($s < ${best[$label]})}"; then best[$label]=$s; fi
    done
  done
  p=$(passes "$work/current.npz" "$n_elements" "$turns")
  for label in "${labels[@]}"; do
    s=${best[$label]}
    [[ -z "${base[$label]:-}" ]] && base[$label]=$s
    awk -v l="$label" -v t="$t" -v s="$s" -v p="$p" -v ne="$n_elements" -v b="${base[$label]}" \
      'BEGIN{printf "%-8s %-8s %10.3f %16.4g %16.4g %9.2fx\n", l, t, s, p / ne / s, p / s, b / s}'
  done
  if [[ -n "$before" ]]; then
    awk -v t="$t" -v a="${best[before]}" -v b="${best[current]}" \
      'BEGIN{printf "# %s threads: current build %.2fx the before build\n", t, a / b}'
    if python3 -c 'import sys, zipfile
a, b = (zipfile.ZipFile(f) for f in sys.argv[1:3])
sys.exit(0 if sorted(a.namelist()) == sorted(b.namelist()) and all(a.read(n) == b.read(n) for n in a.namelist()) else 1)' \
        "$work/before.npz" "$work/current.npz"; then
      echo "# $t threads: final particles of the two builds bitwise identical"
    else
      echo "# $t threads: FINAL PARTICLES DIFFER between the two builds" >&2
      exit 1
    fi
  fi
  unset best
done
