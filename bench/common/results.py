#!/usr/bin/env python3
"""Machine-readable benchmark results: parse the output of a benchmark and append one JSON line to
bench/<topic>/results.jsonl (and to $OUT/results.jsonl when OUT is set, so that a run on a lent device
machine brings its line back).

    results.py record TOPIC --command "CMD" [--parse KIND:LOG ...] [--value NAME=NUMBER ...] [--note TEXT]
    results.py parse KIND LOG          print what KIND's parser finds in LOG, as JSON

Each line: {"date", "topic", "driver" (bench/<topic>/run.sh), "device", "gpus", "gpu_driver", "cpu", "cpu_cores",
"commit", "dirty", "sources_md5", "command", "numbers", "note"}. "numbers" holds one entry per --parse
(named after the log file, without its extension) and the --value pairs.

Parsers (KIND):
  bench     the tables of `fusetrack bench`: CPU threads, GPU kernel forms, collective (one dict per row)
  da        `fusetrack da`: particles, turns, backend, tracking seconds, survivors, DA min/mean/max
  track     `fusetrack track`: particles, turns, survivors, the "time" and "breakdown" seconds
  collide   `fusetrack collide`: device, total seconds, luminosity, the time split
  messages  doctest MESSAGE lines (the GPU benchmark cases): each line's text with its numbers and units
  cpu_throughput  bench/cpu/da_throughput_per_core.sh: per build and thread count, seconds and rates
  loading   bench/cpu/lattice_loading.py: per lattice, file size, load time and peak memory
  lines     every line as text (anything else)
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def _num(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_bench(text):
    rows = []
    cpu = re.compile(rf"^(\S+)\s+cpu\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})x$")
    gpu = re.compile(rf"^(\S+)\s+(fused .+? fma=(?:on|off)|per-element launches)\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+"
                     rf"({NUMBER})\s*(.*)$")
    coll = re.compile(rf"^(\S+)\s+(\d+|lattice)\s+(\d+)\s+(on|off)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})%\s+({NUMBER})%\s+"
                      rf"({NUMBER})\s+({NUMBER})%\s+({NUMBER})%(?:\s+({NUMBER}))?\s+({NUMBER})x$")
    for line in text.splitlines():
        line = line.rstrip()
        if m := cpu.match(line):
            rows.append({"table": "cpu", "lattice": m[1], "threads": int(m[2]), "seconds": _num(m[3]),
                         "element_passes_per_s": _num(m[4]), "particle_turns_per_s": _num(m[5]), "speedup": _num(m[6])})
        elif m := gpu.match(line):
            rows.append({"table": "gpu", "lattice": m[1], "mode": m[2], "particles": int(m[3]), "kernel_seconds": _num(m[4]),
                         "element_passes_per_s": _num(m[5]), "particle_turns_per_s": _num(m[6]), "ratio": m[7].strip()})
        elif m := coll.match(line):
            rows.append({"table": "collective", "lattice": m[1], "slices": m[2], "particles": int(m[3]), "fma": m[4],
                         "seconds_per_turn": _num(m[5]), "particle_turns_per_s": _num(m[6]), "segment_percent": _num(m[7]),
                         "solve_percent": _num(m[8]), "gb_per_s": _num(m[9]), "of_bandwidth_percent": _num(m[10]),
                         "needed_of_bandwidth_percent": _num(m[11]), "off_over_on": _num(m[12]) if m[12] else None,
                         "full_loads_over_masked": _num(m[13])})
        elif line.startswith("# device copy bandwidth"):
            rows.append({"table": "device", "copy_bandwidth_gb_per_s": _num(re.findall(NUMBER, line)[-1])})
    return rows


def _first(pattern, text, cast=_num):
    m = re.search(pattern, text, re.M)
    return cast(m[1]) if m else None


def parse_da(text):
    return {
        "particles": _first(r"^DA scan of \S+: (\d+) particles", text),
        "turns": _first(r"^DA scan of .*?, (\d+) turns", text),
        "backend": _first(r"backend (\S+)$", text, str),
        "tracking_seconds": _first(rf"^tracking: ({NUMBER}) s", text),
        "survivors": _first(r"^survivors: (\d+) of", text),
        "da_min_m": _first(rf"^DA min ({NUMBER})", text),
        "da_mean_m": _first(rf"^DA min {NUMBER}, mean ({NUMBER})", text),
        "da_max_m": _first(rf"max ({NUMBER}) \[m\]", text),
    }


def parse_track(text):
    return {
        "particles": _first(r"^particles\s+(\d+) tracked", text),
        "turns": _first(r"^particles\s+\d+ tracked for (\d+) turns", text),
        "survivors": _first(r"^particles\s+.*?: (\d+) survived", text),
        "time_seconds": _first(rf"^time\s+({NUMBER}) s", text),
        "whole_command_seconds": _first(rf"^breakdown\s+({NUMBER}) s in all", text),
        "kernels_seconds": _first(rf"kernels ({NUMBER}) s", text),
        "backend": _first(r"^backend\s+(\S+)", text, str),
    }


def parse_collide(text):
    return {
        "device": _first(r"time \(rank 0, (\w+)\)", text, str),
        "seconds": _first(rf"time \(rank 0, \w+\): ({NUMBER}) s", text),
        "gpu_kernel_seconds": _first(rf"GPU kernels ({NUMBER}) s", text),
        "departure_seconds": _first(rf"departure \(kick, linear-map turn\) ({NUMBER})", text),
        "arrival_seconds": _first(rf"arrival \(statistics, boost, deposit\) ({NUMBER})", text),
        "turns": _first(r": (\d+) turns, \d+ crossings", text),
        "luminosity_cm2_s": _first(rf"luminosity ({NUMBER}) /\(cm\^2 s\)", text),
    }


def parse_messages(text):
    out = []
    for line in text.splitlines():
        m = re.search(r"MESSAGE: (.*)$", line)
        if not m:
            continue
        body = m[1].strip()
        values = [{"value": _num(v), "unit": u} for v, u in re.findall(rf"({NUMBER}) ?(turns/s|ms/turn|ms|ns|s|GB/s|GB|%|x)\b", body)]
        out.append({"text": body, "values": values})
    return out


def parse_cpu_throughput(text):
    rows = []
    for m in re.finditer(rf"^(current|before)\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})x", text, re.M):
        rows.append({"build": m[1], "threads": int(m[2]), "seconds": _num(m[3]), "particle_turns_per_s": _num(m[4]),
                     "element_passes_per_s": _num(m[5]), "vs_first": _num(m[6])})
    return rows


def parse_loading(text):
    rows = []
    for m in re.finditer(rf"^\| ([^|]+) \| ({NUMBER}) MB \| ({NUMBER}) s \| ({NUMBER}) MiB \|$", text, re.M):
        rows.append({"lattice": m[1].strip(), "file_mb": _num(m[2]), "load_seconds": _num(m[3]), "max_rss_mib": _num(m[4])})
    return rows


PARSERS = {"cpu_throughput": parse_cpu_throughput, "loading": parse_loading, "bench": parse_bench, "da": parse_da, "track": parse_track, "collide": parse_collide,
           "messages": parse_messages, "lines": lambda text: text.splitlines()}


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment():
    gpus = [line.split(", ") for line in _run(["nvidia-smi", "--query-gpu=name,driver_version",
                                                "--format=csv,noheader"]).splitlines() if line]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    commit = _run(["git", "-C", ROOT, "rev-parse", "HEAD"]) or os.environ.get("FUSETRACK_COMMIT", "unknown")
    dirty = bool(_run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])) if commit != "unknown" else None
    md5 = hashlib.md5()
    for top in ("CMakeLists.txt", "cmake", "framework", "elements", "plugins", "cli", "tools", "tests"):
        path = os.path.join(ROOT, top)
        files = [path] if os.path.isfile(path) else sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
        for name in files:
            with open(name, "rb") as f:
                md5.update(os.path.relpath(name, ROOT).encode() + b"\0" + f.read())
    return {"device": gpus[0][0] if gpus else cpu, "gpus": len(gpus), "gpu_driver": gpus[0][1] if gpus else None,
            "cpu": cpu, "cpu_cores": os.cpu_count(), "commit": commit, "dirty": dirty, "sources_md5": md5.hexdigest()}


def record(args):
    numbers = {}
    for item in args.parse or []:
        kind, _, log = item.partition(":")
        with open(log, errors="replace") as f:
            numbers[os.path.splitext(os.path.basename(log))[0]] = PARSERS[kind](f.read())
    for item in args.value or []:
        name, _, value = item.partition("=")
        numbers[name] = _num(value)
    entry = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "topic": args.topic,
             "driver": f"bench/{args.topic}/run.sh", **environment(), "command": args.command, "numbers": numbers,
             "note": args.note}
    line = json.dumps(entry, sort_keys=False)
    targets = [os.path.join(ROOT, "bench", args.topic, "results.jsonl")]
    if os.environ.get("OUT"):
        targets.append(os.path.join(os.environ["OUT"], "results.jsonl"))
    for target in targets:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a") as f:
            f.write(line + "\n")
    print(f"result appended to {', '.join(targets)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    r.add_argument("topic")
    r.add_argument("--command", required=True, help="the command line that produced the numbers")
    r.add_argument("--parse", action="append", metavar="KIND:LOG")
    r.add_argument("--value", action="append", metavar="NAME=NUMBER")
    r.add_argument("--note", default="")
    p = sub.add_parser("parse")
    p.add_argument("kind", choices=sorted(PARSERS))
    p.add_argument("log")
    a = ap.parse_args()
    if a.what == "record":
        record(a)
    else:
        with open(a.log, errors="replace") as f:
            print(json.dumps(PARSERS[a.kind](f.read()), indent=1))


if __name__ == "__main__":
    sys.exit(main())
