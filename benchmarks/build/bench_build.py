"""Time `nagkit build` phase by phase on a workspace with weights (default: fmnist), on the CPU.

    python benchmarks/build/bench_build.py [--workspace fmnist] [--budgets 1.0,1.7,2.5]

Writes benchmarks/build/results/build_phases_<workspace>.json with machine info and the load
average, so noisy runs are visible. The acceptance target is <= 30 s per build, excluding
fine-tuning, with --export tflite,onnx --device cpu.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="fmnist")
    ap.add_argument("--budgets", default="1.0,1.7,2.5")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from nagkit import __version__
    from nagkit.app.build import BuildOptions, build

    rows = []
    load0 = os.getloadavg()
    for b in [float(x) for x in a.budgets.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            r = build(b, workspace=a.workspace,
                      options=BuildOptions(device_spec="cpu", formats="tflite,onnx", out=Path(d) / "bundle"))
            wall = time.perf_counter() - t
        rows.append({"budget_ms": b, "wall_s": round(wall, 2), "phases_s": {k: round(v, 3) for k, v in r.timings_s.items()},
                     "arch": r.arch, "predicted_ms": r.predicted_ms, "measured_median_ms": r.measured["median_ms"],
                     "within_budget": r.measured["median_ms"] <= b, "attempts": len(r.attempts)})
        print(json.dumps(rows[-1]), flush=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    res = {"benchmark": "nagkit build phases (--export tflite,onnx --device cpu)", "workspace": a.workspace,
           "machine": {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version(), "nagkit": __version__,
                       "load_avg_start": load0, "load_avg_end": os.getloadavg()},
           "target_s": 30, "rows": rows,
           "max_wall_s": max(r["wall_s"] for r in rows), "all_within_budget": all(r["within_budget"] for r in rows)}
    out = Path(a.out or ROOT / "benchmarks" / "build" / "results" / f"build_phases_{a.workspace}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
