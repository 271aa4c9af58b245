"""Offline (nothing measured): how many calibration networks suffice, and does the fit's own
leave-one-out estimate say when enough have been measured? (issue 17)

For each data set (a table with its recorded calibration networks, and validation networks
measured in the same run, disjoint from them), 20 random orders of the calibration networks are
taken; for each order, its first N networks (N = 20, 30, 40, 50, 60, 80 where available) are
calibrated exactly as ``nagkit profile --calibrate N`` fits them
(:func:`nagkit.latency.calibration.calibrate_measured` with the ``auto`` plan) and scored on the
validation networks. Prefixes of one order are what an adaptive count would have measured by
then, so the stop rules below are simulated on the same fits:

- ``fixed N``: always N;
- ``stop at held-out >= tau``: measure in steps (30, 40, 50, 60, 80), stop at the first step
  whose leave-one-out share within ±5% is >= tau, else the largest.

Reported per rule: the validation share within ±5% (mean, worst, share of orders reaching 95%)
and the networks it measured (mean). The data sets are the reference Intel Xeon VM's shipped
tables (``bench_cpu.py``: 100 calibration + 100 validation networks) and the AMD EPYC VM's CLI-path
tables (``bench_cli_path.py``: 80 + 100), whose table files are kept next to their results.

    python benchmarks/latency/count_rescore.py     # -> results/count_rescore.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RES = ROOT / "benchmarks" / "latency" / "results"
TABLES = ROOT / "nagkit" / "resources" / "latency_tables"

# name -> (table file, results file whose validation networks score it, where the validation rows are)
DATASETS = {
    "xeon-litert": (TABLES / "cpu-litert-1t-ofa-mbv3-w1.0.json", RES / "cpu-litert-1t-ofa-mbv3-w1.0.json"),
    "xeon-onnxruntime": (TABLES / "cpu-onnxruntime-1t-ofa-mbv3-w1.0.json", RES / "cpu-onnxruntime-1t-ofa-mbv3-w1.0.json"),
    "epyc-litert-spread-second-run": (
        RES / "tables" / "cli-path-litert-ofa-mbv3-w1.0-r224-amd-epyc-spread-second-run-2026-11-27.table.json",
        RES / "cli-path-litert-ofa-mbv3-w1.0-r224-amd-epyc-spread-second-run-2026-11-27.json"),
    "epyc-onnxruntime-spread": (
        RES / "tables" / "cli-path-onnxruntime-ofa-mbv3-w1.0-r224-amd-epyc-spread-2026-11-27.table.json",
        RES / "cli-path-onnxruntime-ofa-mbv3-w1.0-r224-amd-epyc-spread-2026-11-27.json"),
}
COUNTS = (20, 30, 40, 50, 60, 80)
STEPS = (30, 40, 50, 60, 80)
TAUS = (0.95, 0.97, 1.0)
ORDERS = 20


def validation_rows(path: Path) -> tuple[list[str], np.ndarray]:
    """The validation networks a benchmark result recorded: (arch strings, measured ms)."""
    d = json.loads(path.read_text())
    rows = d["phases"]["validate"]["archs"]
    return [r["arch"] for r in rows], np.array([r["measured_ms"] for r in rows], dtype=np.float64)


def main() -> int:
    from nagkit.io import atomic_write_json
    from nagkit.latency.calibration import calibrate_measured, plan_calibration
    from nagkit.latency.table import LatencyTable, utc_now
    from nagkit.latency.validate import fidelity

    out = {"what": __doc__.split("\n\n")[0], "when": utc_now(), "orders": ORDERS, "datasets": {}}
    for name, (tpath, vpath) in DATASETS.items():
        if not tpath.exists():
            print(f"{name}: {tpath} missing, skipped", file=sys.stderr)
            continue
        table = LatencyTable.load(tpath)
        space = table.space()
        raw_table = replace(table, calibration=None, _cache={})
        fa = table.calibration.details["fit_archs"]
        fm = np.asarray(table.calibration.details["fit_measured_ms"], dtype=np.float64)
        va, vm = validation_rows(vpath)
        varchs = [space.parse_arch(a) for a in va]
        res = [r for r in table.resolutions if r in space.resolutions]
        counts = [n for n in COUNTS if n <= len(fa)]
        fits: dict[int, list[dict]] = {n: [] for n in counts}
        for rep in range(ORDERS):
            order = np.random.default_rng(rep).permutation(len(fa))
            for n in counts:
                idx = order[:n]
                plan = plan_calibration(raw_table, space, n, resolutions=res)
                r = calibrate_measured(raw_table, space, [fa[i] for i in idx], fm[idx], plan=plan)
                val = fidelity(r.apply(raw_table).predict_many(space, varchs), vm)
                ho = r.record["held_out"]
                fits[n].append({"scheme": r.record["scheme"], "adopted": r.adopted,
                                "loo_within_5pct": ho["calibrated_within_5pct"] if r.adopted else ho["raw_within_5pct"],
                                "validate_within_5pct": val["within_5pct"], "validate_mape": val["mape"]})
        rules = {}
        for n in counts:
            v = np.array([f["validate_within_5pct"] for f in fits[n]])
            rules[f"fixed {n}"] = _summary(v, np.full(ORDERS, n))
        steps = [s for s in STEPS if s in counts]
        for tau in TAUS:
            v, used = [], []
            for rep in range(ORDERS):
                for s in steps:
                    if fits[s][rep]["loo_within_5pct"] >= tau or s == steps[-1]:
                        v.append(fits[s][rep]["validate_within_5pct"])
                        used.append(s)
                        break
            rules[f"stop at held-out >= {tau:.0%}"] = _summary(np.array(v), np.array(used))
        out["datasets"][name] = {"table": str(tpath.relative_to(ROOT)), "validation": str(vpath.relative_to(ROOT)),
                                 "calibration_pool": len(fa), "validation_networks": len(va), "rules": rules,
                                 "fits": {str(n): f for n, f in fits.items()}}
        print(f"{name} (pool {len(fa)}, validation {len(va)}):", file=sys.stderr)
        for k, s in rules.items():
            print(f"  {k:26s} validate ±5%: mean {s['validate_within_5pct_mean']:.1%}, worst "
                  f"{s['validate_within_5pct_worst']:.0%}, >=95% in {s['orders_reaching_95pct']:.0%} of orders; "
                  f"networks {s['networks_mean']:.0f}", file=sys.stderr)
    atomic_write_json(RES / "count_rescore.json", out)
    return 0


def _summary(v: np.ndarray, used: np.ndarray) -> dict:
    return {"validate_within_5pct_mean": round(float(v.mean()), 4), "validate_within_5pct_worst": float(v.min()),
            "orders_reaching_95pct": round(float(np.mean(v >= 0.95)), 4), "networks_mean": round(float(used.mean()), 1)}


if __name__ == "__main__":
    raise SystemExit(main())
