"""Summarise a `time_suite.sh` run as JSON: wall and CPU per phase, the test count and outcome line,
the load average while it ran, the slowest tests by wall time (pytest's --durations) and by CPU
time, and the costliest files. `python benchmarks/suite/summarize.py OUT_DIR [--commit SHA]`."""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import platform
import re
import statistics
from pathlib import Path


def _phase(out: Path, n: int) -> dict:
    wall, user, sys_ = (float(x) for x in (out / f"time{n}").read_text().split()[-3:])
    text = (out / f"phase{n}.txt").read_text()
    summary = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed)", ln)][-1].strip("= ")
    durations = re.findall(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)$", text, re.M)
    return {"wall_s": wall, "cpu_s": round(user + sys_, 1), "outcome": summary,
            "slowest_wall": [{"s": float(s), "when": w, "test": t} for s, w, t in durations[:15]]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--commit", default=None)
    a = ap.parse_args()
    rows = [json.loads(ln) for f in glob.glob(str(a.out / "cpu" / "*.jsonl")) for ln in open(f)]
    cpu = collections.Counter()
    files = collections.Counter()
    for r in rows:
        c = r["self"] + r["children"]
        cpu[r["id"]] += c
        files[r["id"].split("::")[0]] += c
    loads = [float(ln.split()[1]) for ln in (a.out / "load.txt").read_text().splitlines()]
    p1, p2 = _phase(a.out, 1), _phase(a.out, 2)
    print(json.dumps({
        "commit": a.commit, "machine": {"cpu": _cpu_name(), "cores": os.cpu_count(), "kernel": platform.release()},
        "load_avg_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads),
                          "samples": len(loads)},
        "total_wall_s": round(p1["wall_s"] + p2["wall_s"], 1), "total_cpu_s": round(p1["cpu_s"] + p2["cpu_s"], 1),
        "tests_run": len(rows), "phase1": p1, "phase2": p2,
        "slowest_cpu": [{"cpu_s": round(v, 1), "test": k} for k, v in cpu.most_common(15)],
        "costliest_files_cpu": [{"cpu_s": round(v, 1), "file": k} for k, v in files.most_common(15)],
    }, indent=1))


def _cpu_name() -> str:
    for ln in Path("/proc/cpuinfo").read_text().splitlines():
        if ln.startswith("model name"):
            return ln.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    main()
