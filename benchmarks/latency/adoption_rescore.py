"""Offline check of the calibration rules (issues 12 and 17) on the shipped tables: nothing is measured.

For each shipped ``ofa-mbv3-w1.0`` table, the calibration is fitted again from the networks its
record lists (``fit_archs``/``fit_measured_ms``), with the rules ``nagkit lut calibrate`` applies
(:func:`nagkit.latency.calibration.refit_result`: enough networks per scheme, every prediction
positive, adopted only when its leave-one-out MAPE beats the raw block sum's). The outcome is
scored on the validation networks the benchmark recorded (``results/<name>.json``, disjoint from
the fit networks): the raw sum, the calibration the table shipped with, and the rule's result.

``counts``: how many networks the default needs. For N in 10..80, 10 random subsets of N of the
table's recorded calibration networks are calibrated with the same rules and scored on the same
validation networks (mean and worst fraction within ±5%). The measurements are the reference
machine's (bench_cpu.py protocol: quiet, nice -20, pinned), so this isolates the count from noise.

    python benchmarks/latency/adoption_rescore.py     # -> results/adoption_rescore.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NAMES = ("cpu-litert-1t-ofa-mbv3-w1.0", "cpu-onnxruntime-1t-ofa-mbv3-w1.0", "cuda-h200-ofa-mbv3-w1.0")


def main() -> int:
    from nagkit.io import atomic_write_json
    from dataclasses import replace

    from nagkit.latency.calibration import calibrate_measured, plan_calibration, refit_result
    from nagkit.latency.calibration_model import lowest_prediction
    from nagkit.latency.table import LatencyTable, utc_now
    from nagkit.latency.validate import fidelity

    out = {"what": __doc__.split("\n\n")[0], "when": utc_now(), "tables": {}}
    for name in NAMES:
        table = LatencyTable.load(ROOT / "nagkit" / "resources" / "latency_tables" / f"{name}.json")
        space = table.space()
        rows = json.loads((ROOT / "benchmarks" / "latency" / "results" / f"{name}.json").read_text())
        rows = rows["phases"]["validate"]["archs"]
        archs = [space.parse_arch(r["arch"]) for r in rows]
        meas = np.array([r["measured_ms"] for r in rows])
        result = refit_result(table, space)
        ruled = result.apply(table)

        def score(t, calibrated=True):
            return {k: round(v, 4) for k, v in fidelity(t.predict_many(space, archs, calibrated=calibrated),
                                                         meas).items()}

        out["tables"][name] = {
            "fit_networks": table.calibration.n_fit, "validation_networks": len(rows),
            "shipped_calibration": {"scheme": table.calibration.group_by or "global", **score(table)},
            "raw_sum": score(table, calibrated=False),
            "rule": {"adopted": result.adopted, "scheme": result.record["scheme"], "reason": result.record["reason"],
                     "held_out_on_fit_networks": result.record["held_out"],
                     "fitted_schemes": result.record["plan"]["fitted_schemes"],
                     "lowest_prediction_ms": lowest_prediction(ruled, space), **score(ruled)}}
        counts = {}
        raw_table = replace(table, calibration=None, _cache={})
        fa, fm = table.calibration.details["fit_archs"], np.asarray(table.calibration.details["fit_measured_ms"])
        for n in (10, 20, 30, 50, 80):
            if n >= len(fa):
                continue
            w5, schemes, adopted = [], [], 0
            for rep in range(10):
                idx = np.random.default_rng(rep).choice(len(fa), n, replace=False)
                plan = plan_calibration(raw_table, space, n, resolutions=[r for r in table.resolutions
                                                                          if r in space.resolutions])
                res_n = calibrate_measured(raw_table, space, [fa[i] for i in idx], fm[idx], plan=plan)
                adopted += res_n.adopted
                schemes.append(res_n.record["scheme"])
                w5.append(fidelity(res_n.apply(raw_table).predict_many(space, archs), meas)["within_5pct"])
            counts[n] = {"within_5pct_mean": round(float(np.mean(w5)), 4), "within_5pct_worst": float(np.min(w5)),
                         "adopted": f"{adopted}/10", "schemes": sorted(set(schemes))}
        out["tables"][name]["counts"] = counts
        r = out["tables"][name]
        print(f"{name}: raw MAPE {r['raw_sum']['mape']:.2f}% | shipped ({r['shipped_calibration']['scheme']}) "
              f"{r['shipped_calibration']['mape']:.2f}% | rule: {'adopted' if result.adopted else 'NOT adopted'} "
              f"{r['rule']['scheme']} -> {r['rule']['mape']:.2f}% ({r['rule']['within_5pct']:.0%} within ±5%)",
              file=sys.stderr)
        print("  counts: " + ", ".join(f"{n}: {c['within_5pct_mean']:.1%} (worst {c['within_5pct_worst']:.0%})"
                                       for n, c in counts.items()), file=sys.stderr)
    atomic_write_json(ROOT / "benchmarks" / "latency" / "results" / "adoption_rescore.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
