"""NAG's zero-query generation vs OFA's EvolutionFinder, side by side in one run.

    .venv/bin/python benchmarks/nag/bench_nag.py --workspace ofa-note10 [--seeds 0,1,2] [--evo-seeds 3]
    .venv/bin/python benchmarks/nag/bench_nag.py --workspace ofa-cpu-w1.0
    .venv/bin/python benchmarks/nag/bench_nag.py --workspace ofa-note10 --queries 50000   # another query budget

For each NAG training seed s, everything a user pays for, counted: the uniform dataset (the
workspace's size, a tenth of the query budget, sampled with seed s from the workspace's accuracy
source), then the whole training (surrogate-assisted frontier search, surrogate, generator
imitation), every accuracy-source query counted; then zero-query generation at every budget, one
budget per call: the chosen arch's accuracy (from the workspace's accuracy source, queried only
to score it, after the choice), the share of 1,000 raw generator samples within the budget, and
the time per budget (median of 5 calls). Then OFA's EvolutionFinder exactly
(nagkit.search.methods.Evolution: population 100, 500 generations, 50 mutations + 50 crossovers,
50,100 queries) at every budget, several seeds, timed in the same run. The JSON records the CPU,
its load before and after, and every figure.

``--jobs N`` runs the trainings and evolution runs in N worker processes of one thread each (on a
machine with at least N idle cores); the JSON records it. Timings for the acceptance come from a
run with ``--jobs 1`` on a quiet machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from nagkit import __version__  # noqa: E402
from nagkit.io import atomic_write_json  # noqa: E402

DEFAULT_BUDGETS = {"ofa-note10": [15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0],
                   "ofa-cpu-w1.0": [5.0, 10.0, 20.0, 40.0, 80.0]}


def machine() -> dict:
    import torch

    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "load_avg_start": os.getloadavg(), "nagkit": __version__}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key in ("model name", "cpu family", "model", "stepping") and key not in info.get("cpu_id", {}):
            info.setdefault("cpu_id", {})[key] = val.strip()
        if key == "model name" and "cpu" not in info:
            info["cpu"] = val.strip()
        if not line.strip() and "cpu" in info:
            break
    return info


def run_resumable(jobs: list[tuple], work, partial: Path, n_workers: int = 1, initializer=None) -> dict:
    """{job: result} for every job, each ``work(job) -> (job, result)``; a finished job's result is
    appended to ``partial`` (JSON lines), so an interrupted run resumes with the rest. ``n_workers``
    > 1 runs them in forked workers (``initializer`` in each); 1 runs them here."""
    results = {}
    if partial.is_file():
        for line in partial.read_text().splitlines():
            rec = json.loads(line)
            results[tuple(rec["job"])] = rec["result"]
    todo = [j for j in jobs if j not in results]
    print(f"{len(results)} jobs from {partial.name}, {len(todo)} to run", file=sys.stderr, flush=True)
    t0 = time.time()

    def keep(job: tuple, res: dict) -> None:
        results[job] = res
        with open(partial, "a") as fh:
            fh.write(json.dumps({"job": list(job), "result": res}) + "\n")
        print(json.dumps({"job": list(job), "s": round(time.time() - t0)}), file=sys.stderr, flush=True)

    if n_workers > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(n_workers, initializer=initializer) as pool:
            for job, res in pool.imap_unordered(work, todo):
                keep(job, res)
    else:
        if initializer is not None:
            initializer()
        for job in todo:
            keep(job, work(job)[1])
    return results


def train_seed(ws, seed: int, queries: int | None = None) -> tuple[object, dict]:
    """The dataset (seed ``seed``) and the training, timed together; ``queries`` overrides the
    workspace's query budget (the dataset is then a tenth of it, as the default rule)."""
    import tempfile

    from nagkit.app.workspace import dataset_size
    from nagkit.data.dataset import collect
    from nagkit.nag.train import train_models

    fc = ws.frontier_config if queries is None else dataclasses.replace(ws.frontier_config, total_queries=queries)
    n = ws.dataset_settings.n if queries is None else dataset_size(fc)
    src = ws.open_accuracy_source()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ds = collect(Path(tmp) / "dataset.jsonl", space=ws.space, table=ws.latency_table, source=src, n=n, seed=seed,
                     table_prov=ws.latency_table_provenance())
    t_ds = time.perf_counter() - t0
    tr = train_models(ws.space, ws.latency_table, ds.archs, ds.accuracy, budgets=ws.budgets,
                      evaluator_cfg=dataclasses.replace(ws.evaluator_config, seed=seed),
                      generator_cfg=dataclasses.replace(ws.generator_config, seed=seed),
                      frontier_cfg=fc, surrogate_cfg=dataclasses.replace(ws.surrogate_config, seed=seed), source=src)
    secs = time.perf_counter() - t0
    rep = tr.report
    q = {"dataset": len(ds), "frontier_search": rep["frontier"]["queries"], "refinement": rep["refinement"]["queries"]}
    q["total"] = sum(q.values())
    assert src.queries == q["total"], (src.queries, q)
    return tr, {"seed": seed, "training_seconds": secs, "dataset_seconds": t_ds, "accuracy_queries": q,
                "query_budget": fc.total_queries,
                "phase_seconds": {"dataset": t_ds, "frontier_search": rep["frontier"]["seconds"],
                                  "surrogate_fits_in_search": rep["frontier"].get("surrogate_fit_seconds", 0.0),
                                  "evaluator": rep["evaluator"]["seconds"],
                                  "generator": rep["generator"]["imitation"]["seconds"]
                                  + rep["generator"]["reinforce"]["seconds"],
                                  "refinement": rep["refinement"]["seconds"]},
                "frontier_rounds": rep["frontier"]["rounds"],
                "archive_rows": rep["archive_rows"], "training_rows": rep["training_rows"]}


def generation_rows(ws, tr, budgets: list[float]) -> list[dict]:
    from nagkit.nag.infer import NagModel

    model = NagModel(ws.space, ws.latency_table, tr.evaluator, tr.generator, None, ws.inference, tr.archive)
    scorer = ws.open_accuracy_source()  # scores the chosen arch after the choice; nothing chooses by it
    model.generate(budgets[:1], display=False)  # warm-up
    rows = []
    for b in budgets:
        r = model.generate([b], display=False)[0]  # zero-query: no source at all in the model
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            model.generate([b], display=False)
            times.append(time.perf_counter() - t0)
        dec, lat = model.sample(r.effective_budget_ms, 1000, seed=2024)
        acc = float(scorer.evaluate([r.best.arch])[0])
        rows.append({"budget_ms": b, "arch": str(r.best.arch), "latency_ms": r.best.latency_ms,
                     "accuracy_pct": 100 * acc, "selection_queries": r.selection_queries, "note": r.note,
                     "within_budget": r.best.latency_ms <= b,
                     "raw_samples_within_budget": float((lat <= b + 1e-9).mean()),
                     "unique_candidates": r.n_unique, "generation_seconds_median_of_5": float(np.median(times)),
                     "generation_seconds_runs": times})
    return rows


def evolution_run(ws, b: float, s: int) -> dict:
    from nagkit.search.base import SearchProblem, run_search
    from nagkit.search.factory import make_method
    from nagkit.search.methods import default_stop

    src = ws.open_accuracy_source()
    res = run_search(make_method("evolution", SearchProblem(ws.space, ws.latency_table, src, b), seed=s),
                     default_stop("evolution"))
    print(f"evolution {b:g} ms seed {s}: {100 * res.accuracy:.2f}% ({res.seconds:.1f} s)", file=sys.stderr)
    return {"seed": s, "accuracy_pct": 100 * res.accuracy, "latency_ms": res.latency_ms,
            "arch": str(res.arch), "queries": res.queries, "seconds": res.seconds}


def evolution_rows(ws, budgets: list[float], seeds: int, runs_by_key: dict | None = None) -> list[dict]:
    from nagkit.search.base import SearchProblem
    from nagkit.search.factory import make_method

    rows = []
    for b in budgets:
        runs = [runs_by_key[(b, s)] if runs_by_key else evolution_run(ws, b, s) for s in range(seeds)]
        accs = [r["accuracy_pct"] for r in runs]
        rows.append({"budget_ms": b, "accuracy_pct_mean": float(np.mean(accs)), "runs": runs,
                     "seconds_mean": float(np.mean([r["seconds"] for r in runs])),
                     "settings": make_method("evolution", SearchProblem(ws.space, ws.latency_table, None, b)).settings()})
    return rows


def seed_job(ws, seed: int, budgets: list[float], queries: int | None = None) -> dict:
    tr, info = train_seed(ws, seed, queries)
    info["generation"] = generation_rows(ws, tr, budgets)
    print(json.dumps({"seed": seed, "acc": [round(r["accuracy_pct"], 2) for r in info["generation"]],
                      "train_s": round(info["training_seconds"], 1)}), file=sys.stderr)
    return info


_SHARED: dict = {}


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _work(job: tuple) -> tuple:
    ws = _SHARED["ws"]
    if job[0] == "nag":
        return job, seed_job(ws, job[1], _SHARED["budgets"], _SHARED["queries"])
    return job, evolution_run(ws, job[1], job[2])


def parallel(ws, seeds, budgets, evo_seeds, jobs, queries) -> tuple[list[dict], dict]:
    """The same jobs in ``jobs`` forked workers of one thread each; trainings first (the longest)."""
    import multiprocessing as mp

    _SHARED.update(ws=ws, budgets=budgets, queries=queries)
    work = [("nag", s) for s in seeds] + [("evo", b, s) for b in budgets for s in range(evo_seeds)]
    trainings, evo = {}, {}
    with mp.get_context("fork").Pool(jobs, initializer=_one_thread) as pool:
        for job, res in pool.imap_unordered(_work, work):
            if job[0] == "nag":
                trainings[job[1]] = res
            else:
                evo[(job[1], job[2])] = res
    return [trainings[s] for s in seeds], evo


def summary(budgets, nag_by_seed: dict[int, list[dict]], evo: list[dict], trainings: list[dict]) -> dict:
    deltas = {s: [n["accuracy_pct"] - e["accuracy_pct_mean"] for n, e in zip(rows, evo)]
              for s, rows in nag_by_seed.items()}
    per_budget = []
    for i, b in enumerate(budgets):
        d = [deltas[s][i] for s in deltas]
        per_budget.append({"budget_ms": b, "evolution_mean_pct": evo[i]["accuracy_pct_mean"],
                           "nag_mean_pct": float(np.mean([nag_by_seed[s][i]["accuracy_pct"] for s in nag_by_seed])),
                           "nag_minus_evolution_mean": float(np.mean(d)), "nag_minus_evolution_worst_seed": float(min(d)),
                           "nag_minus_evolution_per_seed": d})
    gen_t = [r["generation_seconds_median_of_5"] for rows in nag_by_seed.values() for r in rows]
    raw = [r["raw_samples_within_budget"] for rows in nag_by_seed.values() for r in rows]
    return {
        "per_budget": per_budget,
        "mean_ok": all(p["nag_minus_evolution_mean"] >= -0.1 for p in per_budget),
        "worst_seed_ok": all(p["nag_minus_evolution_worst_seed"] >= -0.25 for p in per_budget),
        "stretch_at_least_evolution": all(p["nag_minus_evolution_mean"] >= 0 for p in per_budget),
        "selection_queries_total": int(sum(r["selection_queries"] for rows in nag_by_seed.values() for r in rows)),
        "raw_samples_within_budget_min": float(min(raw)), "raw_samples_ok": min(raw) >= 0.99,
        "generation_seconds_max": float(max(gen_t)), "generation_ok": max(gen_t) <= 0.020,
        "training_seconds_max": float(max(t["training_seconds"] for t in trainings)),
        "training_queries_max": int(max(t["accuracy_queries"]["total"] for t in trainings)),
        "training_queries_ok": max(t["accuracy_queries"]["total"] for t in trainings) <= trainings[0]["query_budget"],
        "evolution_queries_per_run": evo[0]["runs"][0]["queries"],
        "evolution_seconds_per_run_mean": float(np.mean([e["seconds_mean"] for e in evo])),
        # one evolution run per budget, for all the workspace's budgets, against one training
        "evolution_seconds_all_budgets_mean": float(sum(e["seconds_mean"] for e in evo)),
        "training_faster_than_evolution_all_budgets": max(t["training_seconds"] for t in trainings)
        < sum(e["seconds_mean"] for e in evo),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--budgets", default=None, help="comma-separated ms (default: per workspace)")
    ap.add_argument("--seeds", default="0,1,2", help="NAG training seeds")
    ap.add_argument("--evo-seeds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--note", default="")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (one thread each)")
    ap.add_argument("--queries", type=int, default=None, help="the training's query budget (default: the workspace's)")
    args = ap.parse_args()

    from nagkit.app.workspace import load_workspace
    from nagkit.latency.slots import SlotLatency

    ws = load_workspace(args.workspace)
    budgets = [float(b) for b in args.budgets.split(",")] if args.budgets else DEFAULT_BUDGETS[ws.name]
    out_path = Path(args.out or ROOT / "benchmarks" / "nag" / f"{ws.name}.json")
    out: dict = {"benchmark": "nag-zero-query-vs-ofa-evolution", "machine": machine(), "workspace": ws.summary(),
                 "budgets_ms": budgets, "note": args.note, "query_budget": args.queries or ws.frontier_config.total_queries,
                 "config": {"budgets": dataclasses.asdict(ws.budgets), "surrogate": dataclasses.asdict(ws.surrogate_config),
                            "evaluator": dataclasses.asdict(ws.evaluator_config),
                            "generator": dataclasses.asdict(ws.generator_config),
                            "frontier": dataclasses.asdict(ws.frontier_config),
                            "inference": dataclasses.asdict(ws.inference)}}
    lat = SlotLatency(ws.latency_table, ws.space)
    out["space_range_ms"] = [lat.fastest_ms, lat.slowest_ms]
    seeds = [int(s) for s in args.seeds.split(",")]
    out["jobs"] = args.jobs
    # Both sides' modules are imported before either is timed: the first training used to carry
    # the import of torch's training code (~3-7 s) that evolution, timed later, did not.
    import nagkit.data.dataset  # noqa: F401
    import nagkit.nag.train  # noqa: F401
    import nagkit.search.factory  # noqa: F401
    import nagkit.search.methods  # noqa: F401

    out["imports_before_timing"] = True
    if args.jobs > 1:
        trainings, evo_runs = parallel(ws, seeds, budgets, args.evo_seeds, args.jobs, args.queries)
    else:
        trainings = [seed_job(ws, seed, budgets, args.queries) for seed in seeds]
        evo_runs = None
    nag = {t["seed"]: t["generation"] for t in trainings}
    out["nag"] = trainings
    out["evolution"] = evolution_rows(ws, budgets, args.evo_seeds, evo_runs)
    out["summary"] = summary(budgets, nag, out["evolution"], trainings)
    out["machine"]["load_avg_end"] = os.getloadavg()
    atomic_write_json(out_path, out)
    print(json.dumps(out["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
