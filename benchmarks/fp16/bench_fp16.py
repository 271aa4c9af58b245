"""tflite-fp16 against fp32, the same arch (issue 14, decisions 27).

    python benchmarks/fp16/bench_fp16.py [--budgets 1.5,3,6] [--seeds 0,1] [--passes 3]

For every (budget, generator seed) on the shipped ``fmnist`` workspace, two builds of the same
generated arch, as a user runs them:

- ``fp32``: ``nagkit build --budget B --export tflite`` (the baseline);
- ``fp16``: ``nagkit build --budget B --export tflite-fp16 --quantize-after`` (fmnist has an fp32
  table and no fp16 twin, so the fp32 table's pick is converted with float16 weights).

Each build measures its own file's accuracy on the 10,000 Fashion-MNIST test images through
LiteRT (the manifest's figure). Then both files are timed on this CPU with nagkit's CPU LiteRT
device (XNNPACK, 1 thread) in ``--passes`` interleaved passes (best pass median, nagkit's rule).
No accuracy query of the search: the same generator picks the arch for both. Writes
``results/fp16_vs_fp32.json`` with the machine, load averages and every build's phases.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "int8"))


def one_build(budget: float, seed: int, fp16: bool, where: Path) -> dict:
    from nagkit.app.build import BuildOptions, build

    if where.exists():
        shutil.rmtree(where)
        Path(str(where) + ".zip").unlink(missing_ok=True)
    t = time.perf_counter()
    r = build(budget, workspace="fmnist", options=BuildOptions(formats="tflite-fp16" if fp16 else "tflite", out=where,
                                                               seed=seed, quantize_after=fp16))
    wall = time.perf_counter() - t
    m = json.loads((where / "manifest.json").read_text())
    f = m["files"]["model.tflite"]
    return {"arch": r.arch, "workspace": r.workspace, "predicted_ms": r.predicted_ms, "accuracy": m["accuracy"],
            "size_bytes": f["size_bytes"], "parity": f["parity"], "quantization": m.get("quantization"),
            "wall_s": round(wall, 1), "phases_s": {k: round(v, 2) for k, v in r.timings_s.items()},
            "model": str(where / "model.tflite")}


def time_pairs(models: dict[str, Path], passes: int) -> dict[str, dict]:
    """Every file timed once per pass, the passes interleaved; the best pass median."""
    from nagkit.devices.registry import get_device

    per: dict[str, list[float]] = {k: [] for k in models}
    with get_device("cpu-litert-1t") as dev:
        for _ in range(passes):
            for k, path in models.items():
                per[k].append(dev.measure(path, None).median_ms)
    return {k: {"best_ms": min(v), "pass_medians_ms": v} for k, v in per.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", default="1.5,3,6")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--work", default="/tmp/nagkit-bench-fp16")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "fp16" / "results" / "fp16_vs_fp32.json"))
    a = ap.parse_args()
    from bench_int8 import machine

    from nagkit.latency.table import utc_now

    t_all, load0 = time.perf_counter(), os.getloadavg()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for b in [float(x) for x in a.budgets.split(",")]:
        for seed in [int(x) for x in a.seeds.split(",")]:
            row: dict = {"budget_ms": b, "seed": seed}
            for name, fp16 in (("fp32", False), ("fp16", True)):
                print(f"budget {b:g} seed {seed}: {name} build ...", file=sys.stderr, flush=True)
                row[name] = one_build(b, seed, fp16, work / f"{b:g}-{seed}-{name}")
            if row["fp32"]["arch"] != row["fp16"]["arch"]:
                raise SystemExit(f"the two builds picked different archs at {b} ms seed {seed}: "
                                 f"{row['fp32']['arch']} vs {row['fp16']['arch']}")
            rows.append(row)
    load_built = os.getloadavg()
    t_time = time.perf_counter()
    models = {f"{r['budget_ms']:g}-{r['seed']}-{k}": Path(r[k]["model"]) for r in rows for k in ("fp32", "fp16")}
    timed = time_pairs(models, a.passes)
    for r in rows:
        for k in ("fp32", "fp16"):
            r[k]["latency"] = timed[f"{r['budget_ms']:g}-{r['seed']}-{k}"]
        r["fp16_over_fp32_latency"] = r["fp16"]["latency"]["best_ms"] / r["fp32"]["latency"]["best_ms"]
        r["fp16_over_fp32_size"] = r["fp16"]["size_bytes"] / r["fp32"]["size_bytes"]
        r["accuracy_change_points"] = 100 * (r["fp16"]["accuracy"]["value"] - r["fp32"]["accuracy"]["value"])
        r["fp16_logits_vs_fp32"] = (r["fp16"]["quantization"] or {}).get("parity", {}).get("fp32")
    out = {
        "benchmark": "fp16/bench_fp16.py", "argv": sys.argv[1:], "when": utc_now(), "machine": machine(),
        "load_average": {"start": load0, "after_builds": load_built, "end": os.getloadavg()},
        "timing": {"device": "cpu-litert-1t (nagkit's CPU LiteRT device, XNNPACK, 1 thread)", "passes": a.passes,
                   "statistic": "best pass median", "seconds": round(time.perf_counter() - t_time, 1)},
        "wall_s": round(time.perf_counter() - t_all, 1), "rows": rows,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    for r in rows:
        print(f"{r['budget_ms']:>4g} ms seed {r['seed']}  {r['fp32']['arch'][:40]:<40} "
              f"fp32 {r['fp32']['latency']['best_ms']:.3f} ms {100 * r['fp32']['accuracy']['value']:.2f}%  "
              f"fp16 {r['fp16']['latency']['best_ms']:.3f} ms {100 * r['fp16']['accuracy']['value']:.2f}%  "
              f"latency x{r['fp16_over_fp32_latency']:.3f} size x{r['fp16_over_fp32_size']:.3f} "
              f"acc {r['accuracy_change_points']:+.2f} pt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
