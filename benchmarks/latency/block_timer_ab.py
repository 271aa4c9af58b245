"""Diagnostic for issue 17 (nothing here is a nagkit feature): does nagkit's block timer read a
block differently from a plain interpreter, in the same minute?

For every block file of a ``bench_cli_path.py`` run (its profile's conversion cache), in
``--passes`` interleaved passes, three timings back to back per block:

* ``a_default``: nagkit's CPU device (``cpu-litert-1t``), its default loop (0.1 s warm-up, at
  least 0.2 s, until IQR/median < 5%, at most 5 s), a fresh interpreter each time: what
  ``nagkit profile`` does;
* ``b_open_fixed``: a plain LiteRT interpreter opened once and kept, 0.05 s warm-up, a fixed
  0.5-s window;
* ``c_fresh_fixed``: nagkit's CPU device with a fixed 0.5-s window (fresh interpreter).

Then each timing's blocks are summed per network (lowest pass; the table's rule; median) and
fitted (scale and offset) on the run's 80 calibration networks, scored on its 100 validation
networks, and the per-pass ratios a/b and c/b are given for 7x7 blocks and the others.

    python benchmarks/latency/block_timer_ab.py --run-dir .cache/bench_cli_path/cli-path-litert-ofa-mbv3-w1.0-r224 \\
        --bench results/cli-path-litert-ofa-mbv3-w1.0-r224-amd-epyc-2026-11-27.json --out results/block-timer-ab-<tag>.json

``--timed FILE`` analyses an earlier run's raw timings instead of timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

METHODS = ("a_default", "b_open_fixed", "c_fresh_fixed")


def time_blocks(files: dict[str, Path], passes: int) -> dict[str, dict[str, list[float]]]:
    from block_retime import fixed_window, open_plain

    from nagkit.devices.base import MeasureConfig
    from nagkit.devices.registry import get_device

    dev = get_device(str(ROOT / "nagkit" / "resources" / "device_profiles" / "cpu-litert-1t.yaml"))
    fixed = MeasureConfig(warmup_runs=3, warmup_s=0.1, min_runs=10, min_time_s=0.5, target_rel_iqr=0.0,
                          max_runs=100000, max_time_s=0.5)
    its = {k: open_plain(p) for k, p in files.items()}
    res = {k: {m: [] for m in METHODS} for k in files}
    try:
        for p in range(passes):
            t0 = time.perf_counter()
            for k, path in files.items():
                res[k]["a_default"].append(dev.measure(path).median_ms)
                res[k]["b_open_fixed"].append(fixed_window(its[k], 0.5))
                res[k]["c_fresh_fixed"].append(dev.measure(path, cfg=fixed).median_ms)
            print(f"pass {p + 1} of {passes}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    finally:
        dev.close()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--timed", default=None, help="analyse an earlier run's raw timings ({'per': ...}) instead")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    from bench_cpu import machine_info
    from block_retime import fit_global, score

    from nagkit.io import atomic_write_json
    from nagkit.latency.passes import pick
    from nagkit.latency.table import LatencyTable, utc_now

    run = Path(args.run_dir)
    table = LatencyTable.load(run / "table.json")
    space = table.space()
    caches = [d for d in (run / "cache").iterdir() if d.is_dir() and d.name.startswith("tflite-")]
    files = {k: caches[0] / f"{k}.tflite" for k in sorted(table.entries)}
    started = utc_now()
    if args.timed:
        earlier = json.loads(Path(args.timed).read_text())
        per = earlier["per"]
    else:
        per = time_blocks(files, args.passes)

    bench = json.loads(Path(args.bench).read_text())
    cal = table.to_dict()["calibration"]
    v = bench["phases"]["validate"]["archs"]
    sets = {"calibration_80": (cal["fit_archs"], np.array(cal["fit_measured_ms"])),
            "validation_100": ([a["arch"] for a in v], np.array([a["measured_ms"] for a in v]))}
    bd = {a: [k for k, _ in table.breakdown(space, space.parse_arch(a))] for archs, _ in sets.values() for a in archs}
    sums_of = {"lowest pass": min, "table's rule (passes.pick)": lambda m: m[pick(m)],
               "median of passes": lambda m: float(np.median(m))}
    results: dict = {}
    for m in METHODS:
        for agg, f in sums_of.items():
            st = {k: f(per[k][m]) for k in per}
            s = {n: np.array([sum(st[k] for k in bd[a]) for a in archs]) for n, (archs, _) in sets.items()}
            scale, offset = fit_global(s["calibration_80"], sets["calibration_80"][1])
            r = {"raw_sum_validation": score(s["validation_100"], sets["validation_100"][1]),
                 "global_fit_validation": score(scale * s["validation_100"] + offset, sets["validation_100"][1])}
            results[f"{m}, {agg}"] = r
            print(f"{m:14s} {agg:28s} fitted: {r['global_fit_validation']['within_5pct']:.0%} within ±5%, "
                  f"MAPE {r['global_fit_validation']['mape']:.2f}%", file=sys.stderr)
    ratios = {}
    for m in ("a_default", "c_fresh_fixed"):
        for lab, sel in (("k7", lambda k: "-k7-" in k), ("other", lambda k: "-k7-" not in k)):
            r = np.concatenate([np.array(per[k][m]) / np.array(per[k]["b_open_fixed"]) for k in per if sel(k)])
            ratios[f"{m} / b_open_fixed, {lab}"] = {"median": float(np.median(r)), "p10": float(np.percentile(r, 10)),
                                                    "p90": float(np.percentile(r, 90))}
    atomic_write_json(Path(args.out), {
        "benchmark": "latency/block_timer_ab.py", "machine": machine_info(), "run_dir": str(run),
        "timed_from": args.timed, "started": started, "methods": METHODS, "statistics": results,
        "per_pass_ratios": ratios, "per": per})
    print(f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
