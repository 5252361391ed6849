#!/usr/bin/env bash
# fusetrack vs trackcpp per core on the bundled thick light-source ring.
#
# usage: bench/cpu/against_trackcpp.sh [TRACKCPP_DIR] [options]
#   TRACKCPP_DIR        trackcpp's sources (a checkout of github.com/lnls-fac/trackcpp; default
#                       .peers/trackcpp, git-ignored: trackcpp is never committed here)
#   --fusetrack BIN     fusetrack binary (default build/bin/fusetrack; env FUSETRACK)
#   --lattice FILE      fusetrack lattice (default lattices/mba_light_source.json)
#   --turns N           turns of the benchmark (default 1000)
#   --angles N --amplitudes N --amplitude-range A B
#                       the polar DA grid, as `fusetrack da` makes it (default 16 x 31, 0.0002..0.004 m:
#                       0 to about the DA, 5.5 mm in x, ~2 mm in y, so most particles survive)
#   --threads N         the all-cores run (default: nproc); 0 skips it
#   --no-single         skip the 1-thread timing (e.g. to split a long benchmark over two calls with
#                       the same --work: the scaling is then taken from the earlier 1-thread result)
#   --repeats N         rounds of timed runs; the best of each code counts (default 3)
#   --check-turns N     turns of the coordinate comparison (default 10; 0 skips it)
#   --work DIR          build and output folder (default .peers/bench_trackcpp)
#   --jobs N            parallel compiles for trackcpp (default 2)
#   --check-only        build, export and compare; no timings
#   --rebuild           rebuild the trackcpp driver even if up to date
#   --trackcpp-cflags "FLAGS"
#                       flags added to trackcpp's own (e.g. "-march=native", as fusetrack's default build
#                       has: FUSETRACK_NATIVE_ARCH); its own Makefile has none
#   --driver BIN        use this trackcpp driver binary (one built by this script elsewhere, e.g. on
#                       another machine with another compiler) instead of building one
#   env BENCH_TRACKCPP_GSL_STUB=1: build with the GSL stub even where GSL is installed
#
# What it does:
#  1. builds trackcpp's library sources (src/*.cpp of its Makefile's LIBSOURCES) with g++ and the
#     flags of trackcpp's own Makefile (-m64 -O3 -std=c++11 -fPIC -pthread -DVERSION=...), and a
#     small driver (written below) linked against them. GSL (which trackcpp uses only in linalg.cpp:
#     matrix inversion for closed orbits and optics, never in ring_pass) comes from gsl-config if
#     installed (linked statically when libgsl.a exists, so the binary needs no libgsl at run time),
#     else a stub written into the build folder (declarations, each function aborting if ever
#     called). So only g++ (env CXX) and python3 (standard library) are needed;
#  2. writes the lattice as a trackcpp flat file (validation/export_trackcpp.py);
#  3. makes the initial conditions with `fusetrack da ... --turns 1` (its da.npz: x0..delta0, the
#     closed orbit included) and gives the same numbers to trackcpp;
#  4. compares coordinates after --check-turns turns: fusetrack on the JSON, fusetrack on the flat
#     file (round trip through fusetrack's trackcpp import), trackcpp on the flat file; and both
#     codes with the cavity off (delta stays 0: no model difference left but rounding);
#  5. times the tracking alone (not the loading): fusetrack `da --device cpu --threads 1` (its
#     "(X s)" is run_da_scan's wall time) and trackcpp's driver on 1 thread (track_ringpass, one
#     particle at a time, as trackcpp's dynap does); then both with --threads N (trackcpp: N threads
#     taking particles from a shared counter). --repeats rounds, each one fusetrack run then one
#     trackcpp run (both see the same load); the best of each counts. particle-turns = turns
#     completed by each particle (a lost particle counts the turns before its loss), each code its own.
#  Results: WORK/result_1thread.txt, WORK/result_Nthreads.txt (with a suffix for --trackcpp-cflags
#  or --driver).
# Coordinates: trackcpp (rx, px, ry, py, de, dl) = fusetrack (x, px, y, py, delta, -zeta).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TC=""
FT=${FUSETRACK:-$ROOT/build/bin/fusetrack}
LATTICE=$ROOT/lattices/mba_light_source.json
TURNS=1000
ANGLES=16
AMPLITUDES=31
AMIN=0.0002
AMAX=0.004
NTHREADS=$(nproc)
REPEATS=3
CHECK_TURNS=10
WORK=$ROOT/.peers/bench_trackcpp
JOBS=2
REBUILD=0
CHECK_ONLY=0
DRIVER_GIVEN=""
EXTRA_CFLAGS=""
SINGLE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --fusetrack) FT=$2; shift 2 ;;
    --lattice) LATTICE=$2; shift 2 ;;
    --turns) TURNS=$2; shift 2 ;;
    --angles) ANGLES=$2; shift 2 ;;
    --amplitudes) AMPLITUDES=$2; shift 2 ;;
    --amplitude-range) AMIN=$2; AMAX=$3; shift 3 ;;
    --threads) NTHREADS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --check-turns) CHECK_TURNS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --rebuild) REBUILD=1; shift ;;
    --check-only) CHECK_ONLY=1; shift ;;
    --no-single) SINGLE=0; shift ;;
    --driver) DRIVER_GIVEN=$2; shift 2 ;;
    --trackcpp-cflags) EXTRA_CFLAGS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "against_trackcpp: unknown option $1" >&2; exit 2 ;;
    *) TC=$1; shift ;;
  esac
done
TC=${TC:-$ROOT/.peers/trackcpp}
TC=$(cd "$TC" && pwd) || { echo "against_trackcpp: no trackcpp sources at $TC" >&2; exit 2; }
[ -f "$TC/include/trackcpp/tracking.h" ] || { echo "against_trackcpp: $TC is not a trackcpp checkout" >&2; exit 2; }
[ -x "$FT" ] || { echo "against_trackcpp: no fusetrack binary at $FT (build it, or --fusetrack BIN)" >&2; exit 2; }
PY=$(command -v python3) || { echo "against_trackcpp: python3 is needed" >&2; exit 2; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

TC_VERSION=$(cat "$TC/VERSION" 2>/dev/null || echo unknown)
TC_COMMIT=$(git -C "$TC" rev-parse HEAD 2>/dev/null || echo "unknown (not a git checkout)")
CXX=${CXX:-g++}
# trackcpp's Makefile: MACHINE = -m64, OPT_FLAG = -O3 -std=c++11 -fPIC, DFLAGS = -DVERSION=..., -pthread
CFLAGS=(-m64 -O3 -std=c++11 -fPIC "-DVERSION=$TC_VERSION" -pthread)
# shellcheck disable=SC2206
[ -n "$EXTRA_CFLAGS" ] && CFLAGS+=($EXTRA_CFLAGS)
LIBSOURCES=(lattice elements passmethods tracking trackcpp flat_file optics diffusion_matrix dynap output
            kicktable multithreads accelerator naff linalg auxiliary)

# ---------------------------------------------------------------------------------------------
# 1. the trackcpp driver
# one build folder per compiler and GSL choice (a folder carried to another machine is not reused
# by a different compiler)
if [ -z "${BENCH_TRACKCPP_GSL_STUB:-}" ] && command -v gsl-config >/dev/null 2>&1; then GSL_TAG=gsl; else GSL_TAG=gslstub; fi
BUILD=$WORK/build-$(basename "$CXX")$("$CXX" -dumpfullversion 2>/dev/null || "$CXX" -dumpversion)-$GSL_TAG
[ -n "$EXTRA_CFLAGS" ] && BUILD=$BUILD-$(echo "$EXTRA_CFLAGS" | tr -c 'A-Za-z0-9=.\n-' _ | tr -d '\n')
mkdir -p "$BUILD/obj"
cat > "$BUILD/tc_driver.cpp" <<'CPP'
// trackcpp driver for fusetrack's benchmark (written by bench/cpu/against_trackcpp.sh).
// usage: tc_driver LATTICE.txt ICS.csv TURNS THREADS OUT.csv [REPEATS]
//   ICS.csv: a header line, then x,px,y,py,zeta,delta per particle (fusetrack's coordinates);
//   trackcpp (rx, px, ry, py, de, dl) = fusetrack (x, px, y, py, delta, -zeta).
//   OUT.csv: id,x,px,y,py,zeta,delta,state,lost_turn,lost_element in fusetrack's coordinates
//   (state 1 alive, -3 lost: trackcpp without vchamber loses a particle only when x or y is not
//   finite; lost_turn -1 when alive, else the 0-based turn of the loss).
// Every particle is tracked alone with track_ringpass for all turns (trackcpp's dynap does the
// same, one task per particle); THREADS threads take particles from a shared counter. Prints the
// tracking time alone (best of REPEATS) and the particle-turns (turns completed, summed).
#include <trackcpp/accelerator.h>
#include <trackcpp/flat_file.h>
#include <trackcpp/tracking.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

struct Result {
  Pos<double> pos;
  bool lost = false;
  unsigned int lost_turn = 0;
  unsigned int lost_element = 0;
};

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s LATTICE.txt ICS.csv TURNS THREADS OUT.csv [REPEATS]\n", argv[0]);
    return 2;
  }
  std::string lattice_file = argv[1];
  const std::string ics_file = argv[2];
  const unsigned int turns = static_cast<unsigned int>(std::atoi(argv[3]));
  unsigned int threads = static_cast<unsigned int>(std::atoi(argv[4]));
  const std::string out_file = argv[5];
  const int repeats = argc > 6 ? std::atoi(argv[6]) : 1;
  if (threads == 0) threads = std::thread::hardware_concurrency();

  Accelerator acc;
  if (read_flat_file(lattice_file, acc, true) != Status::success || acc.lattice.empty()) {
    std::fprintf(stderr, "cannot read the trackcpp flat file %s\n", lattice_file.c_str());
    return 1;
  }
  std::printf("trackcpp lattice %s: %zu elements, %.10g m, energy %.10g eV, cavity_on %d, radiation_on %d, "
              "vchamber_on %d\n",
              lattice_file.c_str(), acc.lattice.size(), acc.get_length(), acc.energy, int(acc.cavity_on),
              acc.radiation_on, int(acc.vchamber_on));

  std::vector<Pos<double>> ics;
  {
    std::ifstream in(ics_file);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", ics_file.c_str());
      return 1;
    }
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      for (char& c : line)
        if (c == ',') c = ' ';
      std::istringstream ss(line);
      double x, px, y, py, zeta, delta;
      if (!(ss >> x >> px >> y >> py >> zeta >> delta)) {
        std::fprintf(stderr, "%s: bad line '%s'\n", ics_file.c_str(), line.c_str());
        return 1;
      }
      Pos<double> p;
      p.rx = x; p.px = px; p.ry = y; p.py = py; p.de = delta; p.dl = -zeta;
      ics.push_back(p);
    }
  }
  const size_t n = ics.size();
  std::vector<Result> res(n);
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    std::atomic<size_t> next{0};
    auto work = [&]() {
      std::vector<Pos<double>> pos;
      for (size_t i = next++; i < n; i = next++) {
        Result& o = res[i];
        o.pos = ics[i];
        unsigned int element_offset = 0;
        Plane::type lost_plane = Plane::no_plane;
        unsigned int lost_turn = 0;
        pos.clear();
        const Status::type st = track_ringpass(acc, o.pos, turns, false, element_offset, pos, lost_plane, lost_turn);
        o.lost = st != Status::success;
        o.lost_turn = lost_turn;
        o.lost_element = element_offset;
      }
    };
    const auto t0 = std::chrono::steady_clock::now();
    if (threads == 1) {
      work();
    } else {
      std::vector<std::thread> pool;
      for (unsigned int t = 0; t < threads; ++t) pool.emplace_back(work);
      for (auto& t : pool) t.join();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("trackcpp run %d: %.4f s\n", r + 1, s);
    if (s < best) best = s;
  }
  double particle_turns = 0;
  size_t lost = 0;
  for (const Result& o : res) {
    particle_turns += o.lost ? o.lost_turn : turns;
    lost += o.lost;
  }
  FILE* f = std::fopen(out_file.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", out_file.c_str());
    return 1;
  }
  std::fprintf(f, "id,x,px,y,py,zeta,delta,state,lost_turn,lost_element\n");
  for (size_t i = 0; i < n; ++i) {
    const Result& o = res[i];
    std::fprintf(f, "%zu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%d,%d,%d\n", i, o.pos.rx, o.pos.px, o.pos.ry, o.pos.py,
                 -o.pos.dl, o.pos.de, o.lost ? -3 : 1, o.lost ? int(o.lost_turn) : -1,
                 o.lost ? int(o.lost_element) : -1);
  }
  std::fclose(f);
  std::printf("particles %zu, turns %u, threads %u, lost %zu\n", n, turns, threads, lost);
  std::printf("tracking_seconds %.6f\n", best);
  std::printf("particle_turns %.0f\n", particle_turns);
  return 0;
}
CPP

# GSL: the system's (static if possible), else a stub (declarations; every call aborts).
GSL_INC=()
GSL_LIBS=()
GSL_KIND=""
if [ "$GSL_TAG" = gsl ]; then
  GSL_PREFIX=$(gsl-config --prefix)
  read -r -a GSL_INC <<<"$(gsl-config --cflags)"
  GSL_A=""
  for d in $(gsl-config --libs | tr ' ' '\n' | sed -n 's/^-L//p') "$GSL_PREFIX/lib" /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    if [ -f "$d/libgsl.a" ] && [ -f "$d/libgslcblas.a" ]; then GSL_A=$d; break; fi
  done
  if [ -n "$GSL_A" ]; then
    GSL_LIBS=("$GSL_A/libgsl.a" "$GSL_A/libgslcblas.a" -lm)
    GSL_KIND="system GSL $(gsl-config --version), linked statically ($GSL_A)"
  else
    read -r -a GSL_LIBS <<<"$(gsl-config --libs)"
    GSL_KIND="system GSL $(gsl-config --version), shared"
  fi
else
  STUB=$BUILD/gsl-stub/gsl
  mkdir -p "$STUB"
  cat > "$STUB/gsl_matrix.h" <<'H'
// Stub of the GSL calls trackcpp's linalg.cpp makes (matrix inversion for closed orbits and optics).
// Written by fusetrack's bench/cpu/against_trackcpp.sh where GSL is not installed: ring_pass never calls
// them, and each one aborts if it is ever called.
#pragma once
#include <cstddef>
#include <cstdio>
#include <cstdlib>
struct gsl_matrix { size_t size1, size2; };
struct gsl_vector { size_t size; };
struct gsl_permutation { size_t size; };
[[noreturn]] inline void gsl_stub_abort(const char* f) {
  std::fprintf(stderr, "trackcpp built without GSL (against_trackcpp.sh stub): %s is not available\n", f);
  std::abort();
}
inline gsl_matrix* gsl_matrix_alloc(size_t, size_t) { gsl_stub_abort("gsl_matrix_alloc"); }
inline void gsl_matrix_free(gsl_matrix*) { gsl_stub_abort("gsl_matrix_free"); }
inline void gsl_matrix_set(gsl_matrix*, size_t, size_t, double) { gsl_stub_abort("gsl_matrix_set"); }
inline double gsl_matrix_get(const gsl_matrix*, size_t, size_t) { gsl_stub_abort("gsl_matrix_get"); }
inline int gsl_matrix_add(gsl_matrix*, const gsl_matrix*) { gsl_stub_abort("gsl_matrix_add"); }
inline gsl_vector* gsl_vector_alloc(size_t) { gsl_stub_abort("gsl_vector_alloc"); }
inline void gsl_vector_free(gsl_vector*) { gsl_stub_abort("gsl_vector_free"); }
inline void gsl_vector_set(gsl_vector*, size_t, double) { gsl_stub_abort("gsl_vector_set"); }
inline double gsl_vector_get(const gsl_vector*, size_t) { gsl_stub_abort("gsl_vector_get"); }
H
  cat > "$STUB/gsl_permutation.h" <<'H'
#pragma once
#include "gsl_matrix.h"
inline gsl_permutation* gsl_permutation_alloc(size_t) { gsl_stub_abort("gsl_permutation_alloc"); }
inline void gsl_permutation_free(gsl_permutation*) { gsl_stub_abort("gsl_permutation_free"); }
H
  cat > "$STUB/gsl_linalg.h" <<'H'
#pragma once
#include "gsl_permutation.h"
inline int gsl_linalg_LU_decomp(gsl_matrix*, gsl_permutation*, int*) { gsl_stub_abort("gsl_linalg_LU_decomp"); }
inline int gsl_linalg_LU_invert(const gsl_matrix*, const gsl_permutation*, gsl_matrix*) { gsl_stub_abort("gsl_linalg_LU_invert"); }
inline int gsl_linalg_LU_solve(const gsl_matrix*, const gsl_permutation*, const gsl_vector*, gsl_vector*) { gsl_stub_abort("gsl_linalg_LU_solve"); }
H
  GSL_INC=(-I"$BUILD/gsl-stub")
  GSL_KIND="no GSL installed: stub headers ($BUILD/gsl-stub; linalg's matrix inversion aborts if called, tracking never calls it)"
fi

DRIVER=$BUILD/tc_driver
STAMP_TEXT="$($CXX --version | head -1) | ${CFLAGS[*]} | ${GSL_INC[*]} | ${GSL_LIBS[*]} | $TC_COMMIT | $TC_VERSION | $(cat "$TC"/src/*.cpp "$TC"/include/trackcpp/* "$BUILD/tc_driver.cpp" | cksum)"
if [ -n "$DRIVER_GIVEN" ]; then
  DRIVER=$(cd "$(dirname "$DRIVER_GIVEN")" && pwd)/$(basename "$DRIVER_GIVEN")
  [ -x "$DRIVER" ] || { echo "against_trackcpp: no driver at $DRIVER_GIVEN" >&2; exit 2; }
  GSL_KIND="given binary (built elsewhere; its build is not checked)"
elif [ "$REBUILD" = 1 ] || [ ! -x "$DRIVER" ] || [ "$(cat "$BUILD/stamp" 2>/dev/null)" != "$STAMP_TEXT" ]; then
  echo "== building trackcpp $TC_VERSION ($TC_COMMIT) with $CXX ${CFLAGS[*]} (-j$JOBS); $GSL_KIND"
  rm -f "$BUILD/stamp" "$DRIVER"
  export CXX TC BUILD
  printf '%s\n' "${LIBSOURCES[@]}" | xargs -P "$JOBS" -I{} sh -c \
    '"$CXX" -c "$@" -I"$TC/include" -I"$TC/src" "$TC/src/{}.cpp" -o "$BUILD/obj/{}.o" || exit 255' sh \
    "${CFLAGS[@]}" "${GSL_INC[@]}"
  rm -f "$BUILD/libtrackcpp.a"
  (cd "$BUILD/obj" && ar rcs "$BUILD/libtrackcpp.a" "${LIBSOURCES[@]/%/.o}")
  "$CXX" "${CFLAGS[@]}" -I"$TC/include" "${GSL_INC[@]}" "$BUILD/tc_driver.cpp" "$BUILD/libtrackcpp.a" \
    "${GSL_LIBS[@]}" -lpthread -o "$DRIVER"
  echo "$STAMP_TEXT" > "$BUILD/stamp"
fi
echo "trackcpp: $TC_VERSION, commit $TC_COMMIT, $DRIVER"
[ -n "$DRIVER_GIVEN" ] && echo "  $GSL_KIND" || echo "  built with: $CXX ${CFLAGS[*]}; $GSL_KIND"
echo "  needs at run time: $(ldd "$DRIVER" 2>/dev/null | awk '{print $1}' | grep -v -e vdso -e ld-linux | tr '\n' ' ')"

# ---------------------------------------------------------------------------------------------
# helpers (python3, standard library only)
cat > "$WORK/bench_helpers.py" <<'PY'
import ast, csv, math, struct, sys, zipfile

def load_npz(path):
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            b = z.read(name)
            if b[:6] != b"\x93NUMPY":
                continue
            if b[6] == 1:
                hl, off = struct.unpack("<H", b[8:10])[0], 10
            else:
                hl, off = struct.unpack("<I", b[8:12])[0], 12
            h = ast.literal_eval(b[off:off + hl].decode("latin1"))
            n = 1
            for s in h["shape"]:
                n *= s
            fmt = {"<f8": "d", "<i4": "i", "<i8": "q"}.get(h["descr"])
            if fmt is None or h.get("fortran_order"):
                continue
            out[name[:-4]] = list(struct.unpack("<%d%s" % (n, fmt), b[off + hl:off + hl + n * struct.calcsize(fmt)]))
    return out

def ics(npz, csv_out):
    d = load_npz(npz)
    with open(csv_out, "w") as f:
        f.write("x,px,y,py,zeta,delta\n")
        for row in zip(d["x0"], d["px0"], d["y0"], d["py0"], d["zeta0"], d["delta0"]):
            f.write(",".join(repr(v) for v in row) + "\n")
    print(len(d["x0"]))

def da_turns(npz, turns):
    """particle-turns completed in a fusetrack da run (alive: all turns; lost: lost_turn)."""
    d = load_npz(npz)
    turns = int(turns)
    print(sum(turns if s > 0 else lt for s, lt in zip(d["state"], d["lost_turn"])))

def read_csv(path):
    return list(csv.DictReader(open(path)))

def compare(a_path, b_path, label, ics_path):
    a, b = read_csv(a_path), read_csv(b_path)
    ic = read_csv(ics_path)
    assert len(a) == len(b) == len(ic), (len(a), len(b), len(ic))
    keys = ["x", "px", "y", "py", "zeta", "delta"]
    both = [i for i in range(len(a)) if int(a[i]["state"]) > 0 and int(b[i]["state"]) > 0]
    lost_a = sum(1 for r in a if int(r["state"]) <= 0)
    lost_b = sum(1 for r in b if int(r["state"]) <= 0)
    lt_diff = sum(1 for i in range(len(a)) if (int(a[i]["state"]) > 0) != (int(b[i]["state"]) > 0)
                  or (int(a[i]["state"]) <= 0 and int(a[i]["lost_turn"]) != int(b[i]["lost_turn"])))
    amp = [math.hypot(float(r["x"]), float(r["y"])) for r in ic]
    print(f"  {label}: {len(both)} alive in both, lost {lost_a} / {lost_b}, loss turn differs for {lt_diff}")
    # Near the DA boundary the motion is chaotic and any difference grows exponentially: the
    # differences are given per band of initial amplitude.
    for lim in (0.001, 0.002, 0.003, None):
        sel = both if lim is None else [i for i in both if amp[i] <= lim + 1e-12]
        if not sel:
            continue
        parts = []
        for k in keys:
            dmax = max(abs(float(a[i][k]) - float(b[i][k])) for i in sel)
            scale = max(abs(float(a[i][k])) for i in sel)
            parts.append(f"{k} {dmax:.1e}" + (f" ({dmax / scale:.0e})" if scale > 0 else ""))
        name = "all alive" if lim is None else f"amplitude <= {lim * 1e3:g} mm"
        print(f"    max |diff| (relative to max |coordinate|), {name} ({len(sel)}): " + ", ".join(parts))
    close = sum(1 for i in both if all(abs(float(a[i][k]) - float(b[i][k])) <= 1e-12 for k in ("x", "px", "y", "py")))
    print(f"    x, px, y, py within 1e-12 for {close} of {len(both)} alive in both")

def compare_da(npz, tc_csv, turns):
    """survival and final x, y after the timed runs: fusetrack da's da.npz vs trackcpp's csv."""
    d, b = load_npz(npz), read_csv(tc_csv)
    n = len(b)
    fa = [d["state"][i] > 0 for i in range(n)]
    ta = [int(b[i]["state"]) > 0 for i in range(n)]
    both = [i for i in range(n) if fa[i] and ta[i]]
    diff = [i for i in range(n) if fa[i] != ta[i]]
    lt = [abs(d["lost_turn"][i] - int(b[i]["lost_turn"])) for i in range(n) if not fa[i] and not ta[i]]
    msg = (f"  after {turns} turns: survivors fusetrack {sum(fa)}, trackcpp {sum(ta)}; survival differs for "
           f"{len(diff)} of {n}")
    if lt:
        msg += f"; loss turns of the {len(lt)} lost in both: equal for {sum(1 for v in lt if v == 0)}, max difference {max(lt)}"
    if both:
        dx = max(abs(d["x"][i] - float(b[i]["x"])) for i in both)
        dy = max(abs(d["y"][i] - float(b[i]["y"])) for i in both)
        msg += f"; max |dx| {dx:.2e} m, |dy| {dy:.2e} m over the survivors"
    print(msg)

if __name__ == "__main__":
    {"ics": ics, "da_turns": da_turns, "compare": compare, "compare_da": compare_da}[sys.argv[1]](*sys.argv[2:])
PY
H="$PY $WORK/bench_helpers.py"

# ---------------------------------------------------------------------------------------------
# 2. the flat file, 3. the initial conditions
RING=$WORK/ring_trackcpp.txt
"$PY" "$ROOT/validation/export_trackcpp.py" "$LATTICE" -o "$RING"
"$FT" import "$RING" -o "$WORK/ring_roundtrip.json" >/dev/null 2>"$WORK/import_warnings.txt" || {
  cat "$WORK/import_warnings.txt"; echo "against_trackcpp: fusetrack could not import $RING" >&2; exit 1; }
GRID=(--angles "$ANGLES" --amplitudes "$AMPLITUDES" --amplitude-range "$AMIN" "$AMAX")
"$FT" da "$LATTICE" "${GRID[@]}" --turns 1 --device cpu --threads 1 --no-plots -o "$WORK/da_ics" >/dev/null 2>&1
NPART=$($H ics "$WORK/da_ics/da.npz" "$WORK/ics.csv")
echo "initial conditions: $NPART ($ANGLES angles x $AMPLITUDES amplitudes, $AMIN..$AMAX m, from fusetrack da's da.npz)"

# ---------------------------------------------------------------------------------------------
# 4. agreement after CHECK_TURNS turns
if [ "$CHECK_TURNS" -gt 0 ]; then
  echo "== coordinates after $CHECK_TURNS turns (fusetrack CPU on the JSON = reference)"
  "$FT" track "$LATTICE" -p "$WORK/ics.csv" -n "$CHECK_TURNS" --device cpu -o "$WORK/check_ft_json.csv" >/dev/null
  "$FT" track "$WORK/ring_roundtrip.json" -p "$WORK/ics.csv" -n "$CHECK_TURNS" --device cpu \
    -o "$WORK/check_ft_flat.csv" >/dev/null
  "$DRIVER" "$RING" "$WORK/ics.csv" "$CHECK_TURNS" 1 "$WORK/check_tc.csv" 1 >/dev/null
  $H compare "$WORK/check_ft_json.csv" "$WORK/check_ft_flat.csv" "fusetrack JSON vs fusetrack round-tripped flat file" "$WORK/ics.csv"
  $H compare "$WORK/check_ft_json.csv" "$WORK/check_tc.csv" "fusetrack JSON vs trackcpp" "$WORK/ics.csv"
  # Without the cavity delta stays exactly 0 in both codes, which removes the model differences
  # that act through delta (trackcpp's edge kicks over 1 + de; time of flight with c): what is left
  # is rounding.
  "$PY" "$ROOT/validation/export_trackcpp.py" "$LATTICE" --cavity-off --quiet -o "$WORK/ring_trackcpp_nocavity.txt" 2>/dev/null
  "$FT" import "$WORK/ring_trackcpp_nocavity.txt" -o "$WORK/ring_nocavity.json" >/dev/null 2>&1
  "$FT" track "$WORK/ring_nocavity.json" -p "$WORK/ics.csv" -n "$CHECK_TURNS" --device cpu \
    -o "$WORK/check_ft_nocav.csv" >/dev/null
  "$DRIVER" "$WORK/ring_trackcpp_nocavity.txt" "$WORK/ics.csv" "$CHECK_TURNS" 1 "$WORK/check_tc_nocav.csv" 1 >/dev/null
  $H compare "$WORK/check_ft_nocav.csv" "$WORK/check_tc_nocav.csv" "cavity off: fusetrack vs trackcpp" "$WORK/ics.csv"
fi

# ---------------------------------------------------------------------------------------------
# 5. timings
[ "$CHECK_ONLY" = 1 ] && exit 0
ft_once() {  # threads -> seconds of one run (its da.npz in WORK/da_ft_tTHREADS)
  local s
  s=$("$FT" da "$LATTICE" "${GRID[@]}" --turns "$TURNS" --device cpu --threads "$1" --no-plots \
        -o "$WORK/da_ft_t$1" 2>"$WORK/da_ft_t$1.log" | sed -n 's/^survivors:.*(\([0-9.]*\) s)$/\1/p')
  [ -n "$s" ] || { echo "against_trackcpp: no time from fusetrack da (see $WORK/da_ft_t$1.log)" >&2; exit 1; }
  echo "$s"
}
tc_once() {  # threads -> seconds of one run (final coordinates in WORK/tc_tTHREADS.csv)
  local s
  s=$("$DRIVER" "$RING" "$WORK/ics.csv" "$TURNS" "$1" "$WORK/tc_t$1.csv" 1 | sed -n 's/^tracking_seconds //p')
  [ -n "$s" ] || { echo "against_trackcpp: no time from the trackcpp driver" >&2; exit 1; }
  echo "$s"
}
bench() {  # label threads: REPEATS rounds of (fusetrack, trackcpp), interleaved so that both see the
           # same load; the best run of each counts
  local label=$1 threads=$2 ft_best=inf tc_best=inf f t ft_pt tc_pt
  for r in $(seq "$REPEATS"); do
    f=$(ft_once "$threads"); t=$(tc_once "$threads")
    echo "  $label, round $r: fusetrack $f s, trackcpp $t s (ratio $("$PY" -c "print(f'{$t / $f:.3f}')"))"
    ft_best=$("$PY" -c "print(min($f, float('$ft_best')))"); tc_best=$("$PY" -c "print(min($t, float('$tc_best')))")
  done
  ft_pt=$($H da_turns "$WORK/da_ft_t$threads/da.npz" "$TURNS")
  tc_pt=$(sed 1d "$WORK/tc_t$threads.csv" | awk -F, -v n="$TURNS" '{s += ($8 > 0) ? n : $9} END {print s}')
  "$PY" - "$label" "$threads" "$ft_best" "$ft_pt" "$tc_best" "$tc_pt" <<'PY'
import sys
label, threads, fs, fpt, ts, tpt = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
print(f"{label} (best of the rounds):")
print(f"  trackcpp  {ts:9.3f} s  {tpt:10.0f} particle-turns  {tpt / ts:10.4g} particle-turns/s"
      f"  ({tpt / ts / threads:.4g} per thread)")
print(f"  fusetrack {fs:9.3f} s  {fpt:10.0f} particle-turns  {fpt / fs:10.4g} particle-turns/s"
      f"  ({fpt / fs / threads:.4g} per thread)")
print(f"  fusetrack / trackcpp: {(fpt / fs) / (tpt / ts):.3f}x in particle-turns/s ({ts / fs:.3f}x in time)")
PY
  echo "$ft_best $tc_best" > "$WORK/best_t$threads.txt"
}
# result files carry the trackcpp variant when it is not the default build
TAG=""
[ -n "$EXTRA_CFLAGS" ] && TAG=_$(echo "$EXTRA_CFLAGS" | tr -c 'A-Za-z0-9=.\n-' _ | tr -d '\n')
[ -n "$DRIVER_GIVEN" ] && TAG=_given_driver
echo "== timing: $NPART particles x $TURNS turns, tracking only, $REPEATS rounds (machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
if [ "$SINGLE" = 1 ]; then
  bench "1 thread" 1 | tee "$WORK/result_1thread$TAG.txt"
  $H compare_da "$WORK/da_ft_t1/da.npz" "$WORK/tc_t1.csv" "$TURNS" | tee -a "$WORK/result_1thread$TAG.txt"
  [ -z "$TAG" ] || cp "$WORK/best_t1.txt" "$WORK/best_t1$TAG.txt"
fi
if [ "$NTHREADS" -gt 1 ]; then
  bench "$NTHREADS threads" "$NTHREADS" | tee "$WORK/result_${NTHREADS}threads$TAG.txt"
  if [ -f "$WORK/best_t1$TAG.txt" ]; then
    read -r FT1 TC1 < "$WORK/best_t1$TAG.txt"; read -r FTN TCN < "$WORK/best_t$NTHREADS.txt"
    "$PY" -c "print(f'  scaling {int($NTHREADS)} threads / 1: fusetrack {$FT1 / $FTN:.2f}x, trackcpp {$TC1 / $TCN:.2f}x')" \
      | tee -a "$WORK/result_${NTHREADS}threads$TAG.txt"
  fi
fi
