"""Time latency prediction for a paper-scale dataset: 16,000 archs of ofa-mbv3-w1.2 against the
committed note10 table, vectorised (``LatencyTable.predict_many``) vs one arch at a time
(``LatencyTable.predict``, the baseline), side by side in one process.

    python benchmarks/latency/bench_predict_many.py [--archs 16000] [--baseline-archs 2000] [--repeats 3]

Writes ``benchmarks/latency/results/predict_many_note10.json`` with machine info and the load
average. The claim it checks (it used to be a wall-clock assertion in tests/latency/test_ofa.py):
predicting 16,000 archs takes well under 1 s on the 2-core reference machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", type=int, default=16000)
    ap.add_argument("--baseline-archs", type=int, default=2000, help="archs timed one by one (scaled up)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "latency" / "results" / "predict_many_note10.json"))
    a = ap.parse_args(argv)

    import numpy as np

    from nagkit import __version__
    from nagkit.devices.cpu import host_info
    from nagkit.io import atomic_write_json
    from nagkit.latency.table import LatencyTable
    from nagkit.space import get_space, sample_many

    space = get_space("ofa-mbv3-w1.2")
    table = LatencyTable.load(ROOT / "nagkit" / "resources" / "latency_tables" / "note10.json")
    archs = sample_many(space, a.archs, seed=1)
    base = archs[: a.baseline_archs]
    load0 = os.getloadavg()
    table.predict_many(space, archs[:10])  # warm the per-resolution slot arrays
    many_s = best_of(a.repeats, lambda: table.predict_many(space, archs))
    one_s = best_of(a.repeats, lambda: [table.predict(space, x) for x in base]) * a.archs / len(base)
    pred = table.predict_many(space, base)
    agree = float(np.max(np.abs(pred - np.array([table.predict(space, x) for x in base]))))
    result = {
        "benchmark": "latency/bench_predict_many.py", "space": space.name, "table": "latency_tables/note10.json",
        "archs": a.archs, "repeats": a.repeats,
        "predict_many_s": round(many_s, 4),
        "predict_one_by_one_s": round(one_s, 3), "one_by_one_timed_archs": len(base),
        "speedup": round(one_s / many_s, 1),
        "max_abs_difference_ms": agree,
        "claim": "16,000 archs predicted in well under 1 s", "meets_claim": many_s < 1.0,
        "machine": {"cpu": host_info(None).get("cpu_model"), "logical_cores": os.cpu_count(),
                    "python": platform.python_version(), "nagkit": __version__,
                    "load_avg_before": [round(x, 2) for x in load0],
                    "load_avg_after": [round(x, 2) for x in os.getloadavg()]},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write_json(a.out, result)
    print(json.dumps({k: result[k] for k in ("predict_many_s", "predict_one_by_one_s", "speedup", "meets_claim")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
