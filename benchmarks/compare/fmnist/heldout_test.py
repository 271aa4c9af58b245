"""Held-out check of the fmnist comparison: the returned arch of every (method, budget) in
``compare.json`` evaluated on the Fashion-MNIST *test* split (10,000 images, never used by any
search), with the same supernet, BN recalibration (2,000 seeded training images) and
preprocessing (with ``--seeds N``, every seed's arch; a baseline's test accuracy is their mean) as the validation accuracy the searches saw.

Why: every method picks its arch by the validation accuracy, and a method that queries more
archs per budget (evolution, random: 210) reports the maximum of more noisy measurements of
the same 5,000 images than NAG (10), an upward selection bias. The test split has none.

    PYTHONPATH=. python3 benchmarks/compare/fmnist/heldout_test.py --data-dir .fmnist --device cuda \\
        --out benchmarks/compare/fmnist/heldout_test.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path


def main() -> int:
    import torch

    from nagkit.data.supernet_acc import SupernetEvaluator
    from nagkit.space import Arch, get_space

    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", default=str(here / "compare.json"))
    ap.add_argument("--ckpt", default="nagkit/resources/workspaces/fmnist/supernet/supernet.pt")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cmp = json.loads(Path(a.compare).read_text())
    space = get_space(cmp["space"])
    rows = cmp["rows"]
    # every seed's arch of a baseline run with --seeds N (older reports: the best seed's only)
    per_row = [[x for x in r.get("arch_seeds") or [r["arch"]] if x] for r in rows]
    uniq = sorted({x for xs in per_row for x in xs})
    archs = [Arch.from_string(x) for x in uniq]
    opts = {"device": a.device, "split": "test", "calib_images": cmp["accuracy_source"]["calib_images"]}
    if a.data_dir:
        opts["data_dir"] = a.data_dir
    t = time.perf_counter()
    ev = SupernetEvaluator(a.ckpt, space, opts)
    test_of = dict(zip(uniq, (float(x) for x in ev(archs))))
    out_rows = []
    for r, xs in zip(rows, per_row):
        tests = [test_of[x] for x in xs]
        out_rows.append({"method": r["method"], "budget_ms": r["budget_ms"], "arch": r["arch"],
                         "latency_ms": r["latency_ms"], "val_accuracy": r["accuracy"],
                         "test_accuracy": round(float(sum(tests) / len(tests)), 5),
                         "test_accuracy_seeds": [round(t, 5) for t in tests], "arch_seeds": xs})
    by = {(r["method"], r["budget_ms"]): r for r in out_rows}
    per_budget = []
    for b in cmp["budgets_ms"]:
        n, e = by.get(("nag", b)), by.get(("evolution", b))
        if n and e:
            per_budget.append({"budget_ms": b, "nag_test": n["test_accuracy"], "evolution_test": e["test_accuracy"],
                               "nag_minus_evolution_test_points": round(100 * (n["test_accuracy"] - e["test_accuracy"]), 2),
                               "nag_minus_evolution_val_points": round(100 * (n["val_accuracy"] - e["val_accuracy"]), 2)})
    res = {"benchmark": "fmnist compare, returned archs on the held-out test split",
           "machine": {"device": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else platform.processor(),
                       "torch": torch.__version__, "python": platform.python_version()},
           "compare": str(Path(a.compare).name), "test_images": 10000, "seconds": round(time.perf_counter() - t, 2),
           "rows": out_rows, "nag_vs_evolution": per_budget,
           "nag_ge_evolution_on_test_every_budget": all(p["nag_minus_evolution_test_points"] >= 0 for p in per_budget)}
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    for p in per_budget:
        print(json.dumps(p))
    print("NAG >= evolution on test at every budget:", res["nag_ge_evolution_on_test_every_budget"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
