"""int8 at the same budgets: the int8 workspace's bundle vs the fp32 workspace's bundle quantized afterwards.

    python benchmarks/int8/bench_int8.py [--budgets 1.5,3,6] [--seeds 0,1] [--passes 3] [--phases build,time]

For each budget B (int8 milliseconds on the reference CPU) and generator seed:

- **int8 workspace**: `nagkit build --budget B --export tflite-int8` on `fmnist`, which generates
  with its int8 twin `fmnist-int8` (a generator trained on the int8 table);
- **fp32 quantized after**: `nagkit build --budget B --export tflite-int8 --quantize-after` on
  `fmnist`: the arch the fp32 generator picks for B on the fp32 table, then quantized the same way.

Both are real builds (BN recalibrated, PT2E int8 on 256 training images, accuracy of the int8
file through LiteRT on the 10,000 test images, fp32 accuracy of the same subnet). Then every
model is timed on this CPU (LiteRT, 1 thread, nagkit's CPU device), interleaved in ``--passes``
passes (median of pass medians): both int8 bundles, and an fp32 export of each arch, so int8 and
fp32 latencies stand side by side in one run. Costs: each build's wall time and phases; the
generators use no accuracy query; the one-off costs (profiling the int8 table, training the
int8 generator) are read from the shipped table's and generator's provenance.

Writes benchmarks/int8/results/int8_vs_quantized_after.json (machine info, load averages, rows).
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


def machine() -> dict:
    from nagkit.latency.profiler import versions

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return {"cpu_model": cpu, "logical_cores": os.cpu_count(), "platform": platform.platform(),
            "host": platform.node(), "versions": versions()}


def kernels(arch: str) -> dict:
    """How many blocks use each kernel size and expand ratio."""
    from collections import Counter

    from nagkit.space.presets import get_space

    blocks = [b for st in get_space("fmnist-mbv3-w0.5").parse_arch(arch).stages for b in st]
    return dict(sorted((Counter(f"k{k}" for k, _ in blocks) + Counter(f"e{e}" for _, e in blocks)).items()))


def one_build(budget: float, seed: int, quantize_after: bool, where: Path) -> dict:
    from nagkit.app.build import BuildOptions, build

    t = time.perf_counter()
    r = build(budget, workspace="fmnist", options=BuildOptions(formats="tflite-int8", out=where, seed=seed,
                                                               quantize_after=quantize_after))
    wall = time.perf_counter() - t
    m = json.loads((where / "manifest.json").read_text())
    return {"arch": r.arch, "workspace": r.workspace, "table": r.table, "predicted_ms_own_table": r.predicted_ms,
            "int8": r.int8, "accuracy_manifest": m["accuracy"], "wall_s": round(wall, 1),
            "phases_s": {k: round(v, 2) for k, v in r.timings_s.items()}, "notes": m.get("notes", []),
            "model": str(where / "model.tflite"), "kernels": kernels(r.arch)}


def fp32_model(arch: str, d: Path) -> str:
    """The arch exported fp32 (seeded random weights: latency does not depend on them)."""
    from nagkit.latency.validate import NetworkCache
    from nagkit.space.presets import get_space

    sp = get_space("fmnist-mbv3-w0.5")
    return str(NetworkCache("tflite", d).get(sp, sp.parse_arch(arch)))


def time_all(models: dict[str, tuple[str, tuple]], passes: int) -> dict[str, dict]:
    """Every model timed once per pass, the passes interleaved; median of the pass medians."""
    import numpy as np

    from nagkit.devices.registry import get_device

    per: dict[str, list[float]] = {k: [] for k in models}
    with get_device("cpu-litert-1t") as dev:
        for _ in range(passes):
            for k, (path, shape) in models.items():
                per[k].append(dev.measure(path, shape).median_ms)
    return {k: {"median_ms": float(np.median(v)), "pass_medians_ms": v} for k, v in per.items()}


def build_phase(a, sp, t32, t8) -> list[dict]:
    """Both builds of every (budget, seed), each bundle kept under ``--work`` (resumable: a row
    already in ``builds.json`` is not built again)."""
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    done_file = work / "builds.json"
    rows = json.loads(done_file.read_text()) if done_file.exists() else []
    have = {(r["budget_ms"], r["seed"]) for r in rows}
    for b in [float(x) for x in a.budgets.split(",")]:
        for seed in [int(x) for x in a.seeds.split(",")]:
            if (b, seed) in have:
                continue
            row = {"budget_ms": b, "seed": seed}
            for name, qa in (("int8_workspace", False), ("fp32_quantized_after", True)):
                print(f"budget {b} seed {seed}: {name} ...", file=sys.stderr, flush=True)
                where = work / f"{b}-{seed}-{name}"
                if where.exists():
                    import shutil

                    shutil.rmtree(where)
                    Path(str(where) + ".zip").unlink(missing_ok=True)
                rec = one_build(b, seed, qa, where)
                arch = sp.parse_arch(rec["arch"])
                rec["predicted_int8_ms"] = t8.predict(sp, arch)
                rec["predicted_fp32_ms"] = t32.predict(sp, arch)
                rec["fp32_model"] = fp32_model(rec["arch"], work / "fp32")
                row[name] = rec
            rows.append(row)
            done_file.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", default="1.5,3,6")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--phases", default="build,time", help="build (the bundles, kept in --work), time (and write)")
    ap.add_argument("--work", default="/tmp/nagkit-bench-int8")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "int8" / "results" / "int8_vs_quantized_after.json"))
    a = ap.parse_args()
    from nagkit.app.workspace import load_workspace

    t_all = time.perf_counter()
    load0 = os.getloadavg()
    fm, fm8 = load_workspace("fmnist"), load_workspace("fmnist-int8")
    t32, t8 = fm.latency_table, fm8.latency_table
    sp = fm.space
    phases = a.phases.split(",")
    if "build" in phases:
        build_phase(a, sp, t32, t8)
    if "time" not in phases:
        return 0
    rows = json.loads((Path(a.work) / "builds.json").read_text())
    paths = {}
    for i, row in enumerate(rows):
        for name in ("int8_workspace", "fp32_quantized_after"):
            r = sp.parse_arch(row[name]["arch"]).r
            paths[f"{i}/{name}/int8"] = (row[name]["model"], (1, sp.in_channels, r, r))
            paths[f"{i}/{name}/fp32"] = (row[name]["fp32_model"], (1, sp.in_channels, r, r))
    print(f"timing {len(paths)} models in {a.passes} interleaved passes ...", file=sys.stderr, flush=True)
    load_t = os.getloadavg()
    timed = time_all(paths, a.passes)
    for i, row in enumerate(rows):
        for name in ("int8_workspace", "fp32_quantized_after"):
            rec = row[name]
            rec["measured_int8_ms"] = timed[f"{i}/{name}/int8"]
            rec["measured_fp32_ms"] = timed[f"{i}/{name}/fp32"]
            rec["meets_budget_int8"] = rec["measured_int8_ms"]["median_ms"] <= row["budget_ms"]
            rec["int8_over_fp32"] = rec["measured_int8_ms"]["median_ms"] / rec["measured_fp32_ms"]["median_ms"]
            for k in ("model", "fp32_model"):
                rec.pop(k)
        w, q = row["int8_workspace"], row["fp32_quantized_after"]
        row["int8_workspace_more_accurate"] = w["int8"]["int8_accuracy"] > q["int8"]["int8_accuracy"]
        row["accuracy_gain_points"] = 100 * (w["int8"]["int8_accuracy"] - q["int8"]["int8_accuracy"])
    t8p = t8.provenance
    out_dir = Path(a.out).parent  # fmnist-int8-profile.json / -train.json: what `nagkit profile`/`train` printed
    gen = json.loads(fm8.artifact_path("generator").with_suffix(".json").read_text())
    res = {
        "benchmark": "int8 workspace vs fp32 workspace quantized afterwards, same int8 budgets (issue 14)",
        "machine": machine(), "load_avg_at_start": load0, "load_avg_before_timing": load_t,
        "load_avg_end": os.getloadavg(),
        "tables": {"fp32": fm.latency_table_spec, "int8": fm8.latency_table_spec,
                   "int8_calibration": t8.calibration.to_dict() if t8.calibration else None},
        "one_off_costs": {
            "int8_table_profile_and_calibration_s": t8p.get("elapsed_s"),
            "int8_generator_training_s": json.loads((out_dir / "fmnist-int8-train.json").read_text())["seconds"],
            "int8_generator_accuracy_queries": gen.get("provenance", {}).get("accuracy_queries"),
            "accuracy_queries": "none new: fmnist-int8's dataset is fmnist's 1,000 archs and supernet accuracies, "
                                "relabelled with the int8 table's latency; generation uses none"},
        "passes": a.passes, "rows": rows, "timing_wall_s": round(time.perf_counter() - t_all, 1),
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    for row in rows:
        w, q = row["int8_workspace"], row["fp32_quantized_after"]
        print(f"B={row['budget_ms']:g} seed {row['seed']}: int8-ws {w['int8']['int8_accuracy']:.4f} "
              f"{w['measured_int8_ms']['median_ms']:.3f} ms | quantized-after {q['int8']['int8_accuracy']:.4f} "
              f"{q['measured_int8_ms']['median_ms']:.3f} ms")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
