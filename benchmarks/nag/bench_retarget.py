"""Re-targeting reuses accuracies (issue 33): a workspace trained on one latency table, copied to
another with `nagkit init --from W --latency-table T`, trains for T from every accuracy it has
already paid for plus at most ``retarget_queries`` (1,000) new ones; its zero-query generation on
T against OFA's EvolutionFinder on T (50,100 queries per budget), side by side in one run.

    .venv/bin/python benchmarks/nag/bench_retarget.py [--seeds 3] [--jobs 2]

Pairs (the shipped w1.0 tables, each as T): LiteRT CPU -> ONNX Runtime CPU, LiteRT CPU -> H200
CUDA, ONNX Runtime CPU -> LiteRT CPU. Each source workspace W is trained from scratch (its
dataset of 501 and 5,010 queries in all, seed s) through the app layer, as a user's would be;
then `init_workspace(..., latency_table=T)` and `train_workspace` on the copy. Budgets on T: the
ofa-cpu-w1.0 budgets for the LiteRT table, else 5 budgets log-spaced over [1.25 x fastest,
0.8 x slowest] of the space on T (a rule, not a choice per table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from bench_nag import DEFAULT_BUDGETS, machine  # noqa: E402

from nagkit.io import atomic_write_json  # noqa: E402

TABLES = {"litert": "cpu-litert-1t-ofa-mbv3-w1.0.json", "onnxruntime": "cpu-onnxruntime-1t-ofa-mbv3-w1.0.json",
          "cuda-h200": "cuda-h200-ofa-mbv3-w1.0.json"}
PAIRS = [("litert", "onnxruntime"), ("litert", "cuda-h200"), ("onnxruntime", "litert")]


def table_path(name: str) -> Path:
    from nagkit.resources import LATENCY_TABLES

    return LATENCY_TABLES / TABLES[name]


def budgets_for(ws, name: str) -> list[float]:
    if name == "litert":
        return DEFAULT_BUDGETS["ofa-cpu-w1.0"]
    from nagkit.latency.slots import SlotLatency

    lat = SlotLatency(ws.latency_table, ws.space)
    return [float(round(b, 4)) for b in np.geomspace(1.25 * lat.fastest_ms, 0.8 * lat.slowest_ms, 5)]


def make_source_workspace(root: Path, table: str, seed: int):
    """A workspace like ofa-cpu-w1.0 on ``table`` with seed ``seed``, its dataset collected."""
    from nagkit.app.workspace import load_workspace
    from nagkit.data.dataset import collect

    root.mkdir(parents=True)
    (root / "nagkit.toml").write_text(
        f'name = "{root.name}"\nlatency_table = "{table_path(table)}"\n'
        'accuracy = "ofa-predictor:ofa/acc_predictor.pth"\n'
        f'seed = {seed}\n\n[space]\npreset = "ofa-mbv3-w1.0"\nresolutions = [224]\n')
    ws = load_workspace(root)
    collect(ws.artifact_path("dataset"), space=ws.space, table=ws.latency_table, source=ws.open_accuracy_source(),
            n=ws.dataset_settings.n, seed=ws.dataset_settings.seed, table_prov=ws.latency_table_provenance())
    return ws


def generate_scored(ws, budgets: list[float]) -> list[dict]:
    model = ws.nag_model(with_source=False)
    scorer = ws.open_accuracy_source()
    rows = []
    for b in budgets:
        r = model.generate([b], display=False)[0]
        rows.append({"budget_ms": b, "arch": str(r.best.arch), "latency_ms": r.best.latency_ms,
                     "accuracy_pct": 100 * float(scorer.evaluate([r.best.arch])[0]),
                     "selection_queries": r.selection_queries, "seconds": r.seconds})
    return rows


def seed_job(seed: int, tmp: Path) -> dict:
    from nagkit.app.nag import train_workspace
    from nagkit.app.workspace import init_workspace

    out: dict = {"seed": seed, "pairs": []}
    sources = {}
    for src_name in sorted({a for a, _ in PAIRS}):
        ws = make_source_workspace(tmp / f"{src_name}-{seed}", src_name, seed)
        t0 = time.perf_counter()
        rep = train_workspace(ws)
        sources[src_name] = ws
        out[f"source_{src_name}"] = {"seconds": time.perf_counter() - t0, "accuracy_queries": rep["accuracy_queries"]}
    for a, b in PAIRS:
        dest = init_workspace(tmp / f"{a}-to-{b}-{seed}", source=sources[a].root, latency_table=table_path(b))
        t0 = time.perf_counter()
        rep = train_workspace(dest)
        secs = time.perf_counter() - t0
        out["pairs"].append({"from": a, "to": b, "seconds": secs, "accuracy_queries": rep["accuracy_queries"],
                             "generation": generate_scored(dest, budgets_for(dest, b))})
    return out


def evolution(table: str, b: float, seed: int, root: Path) -> dict:
    from nagkit.app.workspace import load_workspace
    from nagkit.search.base import SearchProblem, run_search
    from nagkit.search.factory import make_method
    from nagkit.search.methods import default_stop

    ws = load_workspace(root)
    src = ws.open_accuracy_source()
    res = run_search(make_method("evolution", SearchProblem(ws.space, ws.latency_table, src, b), seed=seed),
                     default_stop("evolution"))
    return {"table": table, "budget_ms": b, "seed": seed, "accuracy_pct": 100 * res.accuracy, "queries": res.queries,
            "seconds": res.seconds}


_TMP: dict = {}


def _job(job):
    import torch

    torch.set_num_threads(1)
    if job[0] == "nag":
        return job, seed_job(job[1], _TMP["dir"])
    return job, evolution(job[1], job[2], job[3], _TMP["dir"] / f"evo-{job[1]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--evo-seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(HERE / "retarget-w1.0.json"))
    args = ap.parse_args()
    from nagkit.app.workspace import load_workspace

    os.environ.setdefault("NAGKIT_HOME", tempfile.mkdtemp(prefix="nagkit-home-"))
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        _TMP["dir"] = tmp
        budgets = {}
        for t in sorted({b for _, b in PAIRS}):
            root = tmp / f"evo-{t}"
            root.mkdir()
            (root / "nagkit.toml").write_text(
                f'name = "evo-{t}"\nlatency_table = "{table_path(t)}"\naccuracy = "ofa-predictor:ofa/acc_predictor.pth"\n'
                'seed = 0\n\n[space]\npreset = "ofa-mbv3-w1.0"\nresolutions = [224]\n')
            budgets[t] = budgets_for(load_workspace(root), t)
        jobs = [("nag", s) for s in range(args.seeds)]
        jobs += [("evo", t, b, s) for t in budgets for b in budgets[t] for s in range(args.evo_seeds)]
        info = machine()  # its load_avg_start: before the jobs
        t0 = time.time()
        results = {}
        if args.jobs > 1:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(args.jobs) as pool:
                for job, res in pool.imap_unordered(_job, jobs):
                    results[job] = res
        else:
            for job in jobs:
                results[job] = _job(job)[1]
    out: dict = {"benchmark": "nag-retarget-reuses-accuracies", "machine": info, "pairs": PAIRS,
                 "budgets_ms": budgets, "seeds": args.seeds, "jobs": args.jobs, "seconds": time.time() - t0}
    out["nag"] = [results[("nag", s)] for s in range(args.seeds)]
    summary = []
    for a, b in PAIRS:
        evo = {bb: float(np.mean([results[("evo", b, bb, s)]["accuracy_pct"] for s in range(args.evo_seeds)]))
               for bb in budgets[b]}
        per_seed = []
        new_q = []
        for run in out["nag"]:
            pr = next(p for p in run["pairs"] if p["from"] == a and p["to"] == b)
            per_seed.append([g["accuracy_pct"] - evo[g["budget_ms"]] for g in pr["generation"]])
            new_q.append(pr["accuracy_queries"]["new"])
        d = np.array(per_seed)
        summary.append({"from": a, "to": b, "budgets_ms": budgets[b], "evolution_mean_pct": list(evo.values()),
                        "nag_minus_evolution_mean": d.mean(0).tolist(), "nag_minus_evolution_worst_seed": d.min(0).tolist(),
                        "new_queries": new_q, "new_queries_ok": max(new_q) <= 1000,
                        "mean_ok": bool((d.mean(0) >= -0.1).all()), "worst_seed_ok": bool((d.min(0) >= -0.25).all())})
    out["evolution"] = [v for k, v in results.items() if k[0] == "evo"]
    out["summary"] = summary
    out["machine"]["load_avg_end"] = os.getloadavg()
    atomic_write_json(Path(args.out), out)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
