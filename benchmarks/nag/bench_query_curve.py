"""The query-cost curve (issue 33): NAG trained with Q accuracy queries in all, against OFA's
EvolutionFinder given Q queries *per budget* and Q queries *in all* (Q / budgets per budget).

    .venv/bin/python benchmarks/nag/bench_query_curve.py --workspace ofa-note10 [--jobs 2]
    .venv/bin/python benchmarks/nag/bench_query_curve.py --workspace ofa-cpu-w1.0 [--jobs 2]

For each Q in --queries (default 2,500, 5,000, 10,000, 50,000) and each of 3 seeds:
- NAG: the dataset (a tenth of Q, as the default rule) and the training with ``total_queries =
  Q`` (bench_nag.train_seed, every query counted), then zero-query generation at each budget;
- evolution at equal queries per budget: OFA's EvolutionFinder exactly (population 100, parents
  25, 50 mutations + 50 crossovers) with Q/100 - 1 generations, i.e. Q queries, at each budget;
- evolution at equal total queries: the same with floor(Q / budgets / 100) - 1 generations per
  budget, i.e. at most Q queries for all the budgets together.
Every run's chosen arch is scored by the workspace's accuracy source. The JSON records the
machine, and ``plots/<the JSON's name>.png`` beside the JSON (``plots/query_curve-<workspace>.png`` by default) draws mean accuracy over the budgets against Q.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from bench_nag import DEFAULT_BUDGETS, generation_rows, machine, run_resumable, train_seed  # noqa: E402

from nagkit.io import atomic_write_json  # noqa: E402

_SHARED: dict = {}


def evolution(ws, b: float, seed: int, generations: int) -> dict:
    from nagkit.search.base import SearchProblem, Steps, run_search
    from nagkit.search.factory import make_method

    src = ws.open_accuracy_source()
    res = run_search(make_method("evolution", SearchProblem(ws.space, ws.latency_table, src, b), seed=seed,
                                 generations=generations), Steps(generations + 1))
    return {"budget_ms": b, "seed": seed, "generations": generations, "queries": res.queries,
            "accuracy_pct": 100 * res.accuracy, "seconds": res.seconds}


def _job(job: tuple) -> tuple:
    ws, budgets = _SHARED["ws"], _SHARED["budgets"]
    if job[0] == "nag":
        _, q, seed = job
        tr, info = train_seed(ws, seed, q)
        info["generation"] = generation_rows(ws, tr, budgets)
        return job, info
    _, q, kind, b, seed, gens = job
    return job, evolution(ws, b, seed, gens)


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--queries", default="2500,5000,10000,50000")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from nagkit.app.workspace import load_workspace

    ws = load_workspace(args.workspace)
    budgets = DEFAULT_BUDGETS[ws.name]
    qs = [int(q) for q in args.queries.split(",")]
    jobs = []
    for q in qs:
        jobs += [("nag", q, s) for s in range(args.seeds)]
        per_budget = max(0, q // 100 - 1)
        total = max(0, q // len(budgets) // 100 - 1)
        jobs += [("evo", q, "per_budget", b, s, per_budget) for b in budgets for s in range(args.seeds)]
        jobs += [("evo", q, "equal_total", b, s, total) for b in budgets for s in range(args.seeds)]
    jobs.sort(key=lambda j: (j[0] != "nag", -j[1]))  # the longest first
    _SHARED.update(ws=ws, budgets=budgets)
    info = machine()  # its load_avg_start: before the jobs
    t0 = time.time()
    path = Path(args.out or HERE / f"query_curve-{ws.name}.json")
    # every finished job is appended here, so an interrupted run resumes with the rest
    partial = path.with_name(path.name + ".partial.jsonl")
    results = run_resumable(jobs, _job, partial, args.jobs, _one_thread)
    out: dict = {"benchmark": "nag-query-cost-curve", "machine": info, "workspace": ws.name, "budgets_ms": budgets,
                 "queries": qs, "seeds": args.seeds, "jobs": args.jobs, "curve": []}
    for q in qs:
        nag = [results[("nag", q, s)] for s in range(args.seeds)]
        nag_acc = np.array([[r["accuracy_pct"] for r in t["generation"]] for t in nag])  # [seeds, budgets]
        row = {"queries": q, "nag": {"per_budget_mean_pct": nag_acc.mean(0).tolist(), "mean_pct": float(nag_acc.mean()),
                                     "training_queries": [t["accuracy_queries"]["total"] for t in nag],
                                     "training_seconds": [t["training_seconds"] for t in nag]}}
        for kind in ("per_budget", "equal_total"):
            runs = [[results[j] for j in results if j[0] == "evo" and j[1] == q and j[2] == kind and j[3] == b]
                    for b in budgets]
            acc = np.array([[r["accuracy_pct"] for r in rs] for rs in runs])  # [budgets, seeds]
            row[f"evolution_{kind}"] = {"per_budget_mean_pct": acc.mean(1).tolist(), "mean_pct": float(acc.mean()),
                                        "queries_per_budget": runs[0][0]["queries"],
                                        "queries_all_budgets": runs[0][0]["queries"] * len(budgets)}
            row[f"nag_minus_evolution_{kind}"] = (nag_acc.mean(0) - acc.mean(1)).tolist()
            row[f"nag_ahead_of_evolution_{kind}"] = bool(nag_acc.mean() > acc.mean())
        out["curve"].append(row)
    out["machine"]["load_avg_end"] = os.getloadavg()
    out["seconds"] = time.time() - t0
    atomic_write_json(path, out)
    partial.unlink()
    plot(out, path.parent / "plots" / f"{path.stem}.png")  # beside the JSON: --out elsewhere plots there too
    print(json.dumps([{k: v for k, v in r.items() if "ahead" in k or k == "queries"} for r in out["curve"]], indent=1))
    return 0


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = [r["queries"] for r in out["curve"]]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(qs, [r["nag"]["mean_pct"] for r in out["curve"]], "o-", label="NAG v3: Q queries in all, then any budget")
    ax.plot(qs, [r["evolution_per_budget"]["mean_pct"] for r in out["curve"]], "s--",
            label="OFA evolution: Q queries per budget")
    ax.plot(qs, [r["evolution_equal_total"]["mean_pct"] for r in out["curve"]], "^:",
            label=f"OFA evolution: Q queries in all ({len(out['budgets_ms'])} budgets)")
    ax.set_xscale("log")
    ax.set_xticks(qs, [f"{q:,}" for q in qs])
    ax.minorticks_off()
    ax.set_xlabel("accuracy queries Q")
    ax.set_ylabel(f"mean top-1 over {len(out['budgets_ms'])} budgets (%)")
    ax.set_title(f"{out['workspace']}: accuracy against query cost ({out['seeds']} seeds each)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
