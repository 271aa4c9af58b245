"""Offline check of the calibration rules (issues 12 and 17) on the shipped tables: nothing is measured.

For each shipped ``ofa-mbv3-w1.0`` table, the calibration is fitted again from the networks its
record lists (``fit_archs``/``fit_measured_ms``), with the rules ``nagkit lut calibrate`` applies
(:func:`nagkit.latency.calibration.refit_result`: enough networks per scheme, every prediction
positive, adopted only when its leave-one-out MAPE beats the raw block sum's). The outcome is
scored on the validation networks the benchmark recorded (``results/<name>.json``, disjoint from
the fit networks): the raw sum, the calibration the table shipped with, and the rule's result.

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
    from nagkit.latency.calibration import refit_result
    from nagkit.latency.table import LatencyTable, utc_now
    from nagkit.latency.validate import fidelity

    out = {"what": __doc__.split("\n\n")[0], "when": utc_now(), "tables": {}}
    for name in NAMES:
        table = LatencyTable.load(ROOT / "latency_tables" / f"{name}.json")
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
                     "lowest_prediction_ms": ruled.lowest_prediction(space), **score(ruled)}}
        r = out["tables"][name]
        print(f"{name}: raw MAPE {r['raw_sum']['mape']:.2f}% | shipped ({r['shipped_calibration']['scheme']}) "
              f"{r['shipped_calibration']['mape']:.2f}% | rule: {'adopted' if result.adopted else 'NOT adopted'} "
              f"{r['rule']['scheme']} -> {r['rule']['mape']:.2f}% ({r['rule']['within_5pct']:.0%} within ±5%)",
              file=sys.stderr)
    atomic_write_json(ROOT / "benchmarks" / "latency" / "results" / "adoption_rescore.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
