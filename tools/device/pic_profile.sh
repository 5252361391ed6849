#!/bin/bash
# On the GPU machine: where the time of one PIC element goes, kernel by kernel (Nsight Compute; needs a
# machine where ncu reads the counters: nvidia-h100-x1, Firecracker).
#   OUT=/tmp/out bash tools/device/pic_profile.sh    (needs .carry/deps)
# The PIC benchmark (2.5D, 10^7 macroparticles, 256 x 256 x 64) in the cases of PROFILE_CASES ("config:fma", config
# 0: random order, 3: ordered by tile on the host; see the benchmark); for each, the kernels of its last timed turns
# profiled (durations, DRAM bytes, L2 atomic sectors, shared-memory atomics, throughput and stall summary) into
# $OUT/profile_<case>.csv and .txt. The benchmark's own lines (without ncu) first.
set -u
source tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
t0=$SECONDS
build_gpu test_gpu builtin || exit 1
echo "== build $((SECONDS - t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"
cd build-gpu
for c in ${PROFILE_CASES:-0:off 3:off}; do
  cfg=${c%%:*} fma=${c##*:}
  FUSETRACK_SC_BENCH_CONFIG=$cfg FUSETRACK_SC_BENCH_FMA=$fma ./bin/test_gpu \
    -tc="space charge PIC on the GPU: benchmark*" --no-skip 2>&1 | grep -E "per element|ns per|HBM|order" | tee -a "$OUT/bench.log"
  [ -n "$NCU" ] || continue
  # Skip the warm-up turn and most of the timed ones: the last LAUNCHES launches of the run.
  timeout 240 env FUSETRACK_SC_BENCH_CONFIG=$cfg FUSETRACK_SC_BENCH_FMA=$fma $NCU --clock-control none \
    --launch-skip ${LAUNCH_SKIP:-15} --launch-count ${LAUNCHES:-45} \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    -f -o "prof_${cfg}_${fma}" ./bin/test_gpu -tc="space charge PIC on the GPU: benchmark*" --no-skip > "prof_${cfg}_${fma}.log" 2>&1
  tail -2 "prof_${cfg}_${fma}.log"
  $NCU -i "prof_${cfg}_${fma}.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
    > "$OUT/profile_${cfg}_${fma}.csv" 2>&1
  $NCU -i "prof_${cfg}_${fma}.ncu-rep" --page details > "$OUT/profile_${cfg}_${fma}.txt" 2>&1
  python3 - "$OUT/profile_${cfg}_${fma}.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = [i for i, r in enumerate(rows) if r and r[0] == "ID"]
if not h: print(open(sys.argv[1]).read()[:2000]); sys.exit()
head, units, data = rows[h[0]], rows[h[0] + 1], rows[h[0] + 2:]
col = {n: head.index(n) for n in head}
scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6,
         "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "Tbyte": 1e6}
def g(r, n):  # times in us, bytes in MB (ncu picks a unit per column: the row under the names)
    try: return float(r[col[n]].replace(",", "")) * scale.get(units[col[n]], 1.0)
    except Exception: return float("nan")
for r in data:
    if len(r) < len(head): continue
    print(f"{r[col['Kernel Name']][:38]:38s} {g(r, 'gpu__time_duration.sum'):9.1f} us  dram r/w {g(r,'dram__bytes_read.sum'):8.1f}/{g(r,'dram__bytes_write.sum'):8.1f} MB"
          f"  L2 atom {g(r,'lts__t_sectors_op_atom.sum')/1e6:6.1f}M red {g(r,'lts__t_sectors_op_red.sum')/1e6:6.1f}M  sh-atom {g(r,'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum')/1e6:6.1f}M"
          f" bankc {g(r,'l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum')/1e6:6.1f}M inst {g(r,'smsp__inst_executed.sum')/1e6:7.1f}M"
          f" sm% {g(r,'sm__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f} mem% {g(r,'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}"
          f" occ {g(r,'sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f} regs {r[col['launch__registers_per_thread']]} grid {r[col['launch__grid_size']]} blk {r[col['launch__block_size']]}")
PY
done
echo "== total $((SECONDS - t0)) s"
