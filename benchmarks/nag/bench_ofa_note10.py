"""NAG on ofa-note10 vs OFA-style evolution, side by side; writes benchmarks/nag/ofa_note10.json.

    .venv/bin/python benchmarks/nag/bench_ofa_note10.py [--evo-seeds 3] [--skip-train] [--equal-queries 2000]

Measures, at budgets 15/20/25/30/40/50/60 ms on the Note10 table with OFA's predictor:
- feasibility: the returned arch within budget; the share of 1,000 raw generator samples within budget;
- quality: accuracy (from the predictor) of NAG's arch vs evolution (500 generations, mean of seeds);
- NAG vs repeated independent evolution at equal total accuracy-source queries;
- time: generation per budget, training (evaluator + generator), evolution per budget, their ratio.
Timings are wall-clock on this machine; the JSON records its CPU, load and torch threads.
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

BUDGETS = [15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0]
REFERENCE_EVOLUTION = [78.5, 80.5, 81.8, 82.8, 83.7, 84.5, 84.9]
EQ_SEARCH_QUERIES = 30  # source-guided search queries per budget in the equal-query comparison


def machine() -> dict:
    import torch

    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "load_avg_start": os.getloadavg(), "nagkit": __version__}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def run_evolution(ws, source, budget: float, seed: int, generations: int = 500, queries: int | None = None):
    from nagkit.search.base import QueryBudget, SearchProblem, Steps, run_search
    from nagkit.search.methods import Evolution

    prob = SearchProblem(ws.space, ws.latency_table, source, budget)
    stop = Steps(generations + 1) | QueryBudget(queries) if queries else Steps(generations + 1)
    return run_search(Evolution(prob, seed, generations=generations), stop)


def nag_section(ws, model, source, rerank: int, samples: int) -> dict:
    """Generation at every budget: returned arch, raw-sample feasibility, timing. Timed calls
    run the whole pipeline the quality figures use (sampling, local refinement, re-ranking and
    polishing by the accuracy source); the evaluator-only pick (no accuracy-source query at
    generation time) is reported beside it."""
    model.source = source
    model.generate(BUDGETS[:1], samples=samples, rerank=rerank, top=1)  # warm-up
    q0 = source.queries
    t0 = time.perf_counter()
    batch = model.generate(BUDGETS, samples=samples, rerank=rerank, top=1)
    t_batch = time.perf_counter() - t0
    q_batch = source.queries - q0
    plain = model.generate(BUDGETS, samples=samples, rerank=0, top=1)  # evaluator-only pick (+1 query each)
    per_budget_times, per_budget_runs = [], []
    for b in BUDGETS:  # median of 3 calls (the CPU is shared: single calls catch others' bursts)
        runs = []
        for _ in range(3):
            t1 = time.perf_counter()
            model.generate([b], samples=samples, rerank=rerank, top=1)
            runs.append(time.perf_counter() - t1)
        per_budget_runs.append(runs)
        per_budget_times.append(float(np.median(runs)))
    archs, lat, bud = model.sample(BUDGETS, 1000, seed=2024)
    rows = []
    for i, (b, r) in enumerate(zip(BUDGETS, batch)):
        sl = slice(i * 1000, (i + 1) * 1000)
        rows.append({"budget_ms": b, "arch": str(r.best.arch), "ofa": ws.space.to_ofa_dict(r.best.arch),
                     "latency_ms": r.best.latency_ms, "accuracy_pct": r.best.accuracy * 100,
                     "within_budget": r.best.latency_ms <= b,
                     "raw_samples_within_budget": float((lat[sl] <= b).mean()),
                     "raw_samples_unique_feasible": len({str(a) for a, l in zip(archs[sl], lat[sl]) if l <= b}),
                     "unique_feasible_candidates": r.extra.get("unique_feasible", len(r.candidates)),
                     "accuracy_queries": r.queries,
                     "evaluator_only": {"arch": str(plain[i].best.arch), "latency_ms": plain[i].best.latency_ms,
                                        "accuracy_pct": plain[i].best.accuracy * 100},
                     "generation_seconds_single_budget": per_budget_times[i],
                     "generation_seconds_single_budget_runs": per_budget_runs[i]})
    return {"rows": rows, "rerank": rerank, "samples": samples, "inference": dataclasses.asdict(model.inference),
            "search_queries_cap_per_budget": model.inference.search_queries,
            "batch_seconds_all_budgets": t_batch, "accuracy_queries_total": q_batch}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--evo-seeds", type=int, default=3)
    ap.add_argument("--skip-train", action="store_true", help="use the workspace's trained artifacts")
    ap.add_argument("--equal-queries", type=int, default=2000, help="total queries for the equal-cost comparison")
    ap.add_argument("--rerank", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "nag" / "ofa_note10.json"))
    ap.add_argument("--note", default="")
    ap.add_argument("--reuse-evolution", default=None,
                    help="take the evolution (and equal-query) sections from an earlier JSON of this script")
    ap.add_argument("--evolution-only", action="store_true",
                    help="run only the evolution rows (for --reuse-evolution later) and write them to --out")
    ap.add_argument("--train-seconds", type=float, default=None,
                    help="wall time of the `nagkit train` run (with --skip-train)")
    args = ap.parse_args()

    from nagkit.data.dataset import collect, load_dataset
    from nagkit.nag.infer import NagModel
    from nagkit.nag.train import save_model, train_models
    from nagkit.workspace import load_workspace

    ws = load_workspace(args.workspace)
    if args.evolution_only:
        return evolution_only(ws, args)
    out: dict = {"benchmark": "nag-ofa-note10", "machine": machine(), "workspace": ws.summary(),
                 "budgets_ms": BUDGETS, "reference_evolution_pct": REFERENCE_EVOLUTION, "note": args.note}
    source = ws.open_accuracy_source()
    rerank = ws.inference.rerank if args.rerank is None else args.rerank

    # -- full-scale NAG (M = dataset n) -------------------------------------------------------
    ds_path = ws.artifact_path("dataset")
    t0 = time.perf_counter()
    ds = collect(ds_path, space=ws.space, table=ws.latency_table, source=source, n=ws.dataset_settings.n,
                 seed=ws.dataset_settings.seed, table_prov=ws.latency_table_provenance())
    out["dataset"] = {"rows": len(ds), "seconds": time.perf_counter() - t0,
                      "latency_range_ms": list(ds.latency_range)}
    if not args.skip_train:
        source.reset_queries()
        t0 = time.perf_counter()
        ev, gen, rep = train_models(ws.space, ws.latency_table, ds.archs, ds.latency_ms, ds.accuracy,
                                    budgets=ws.budgets, evaluator_cfg=ws.evaluator_config,
                                    generator_cfg=ws.generator_config, source=source)
        train_s = time.perf_counter() - t0
        from nagkit.data.accuracy import file_sha256

        prov = {"workspace": ws.name, "dataset_sha256": file_sha256(ds_path), "dataset_rows": len(ds),
                "seed": ws.seed, "accuracy_queries": {"dataset": len(ds), "refinement": rep["refinement_queries"]}}
        save_model(ws.artifact_path("evaluator"), ev, prov, rep["evaluator"])
        save_model(ws.artifact_path("generator"), gen, prov, {**rep["generator"], "refinement": rep["refinement"]})
        out["training"] = {"seconds_total": train_s, "evaluator_seconds": rep["evaluator"]["seconds"],
                           "generator_seconds": rep["generator"]["seconds"],
                           "refinement_queries": rep["refinement_queries"], "refinement": rep["refinement"],
                           "holdout": rep["evaluator"].get("holdout"),
                           "torch_threads": rep["torch_threads"], "target_seconds": 180}
    else:  # trained by `nagkit train`: its reports carry the timings
        ev_meta = json.loads(ws.artifact_path("evaluator").with_suffix(".json").read_text())
        gen_meta = json.loads(ws.artifact_path("generator").with_suffix(".json").read_text())
        out["training"] = {"source": "reports in evaluator.json / generator.json (from `nagkit train`)",
                           "evaluator_seconds": ev_meta["report"]["seconds"],
                           "generator_seconds": gen_meta["report"]["seconds"],
                           "refinement": gen_meta["report"].get("refinement"),
                           "accuracy_queries": gen_meta["provenance"].get("accuracy_queries"),
                           "holdout": ev_meta["report"].get("holdout"), "target_seconds": 180}
        if args.train_seconds:
            out["training"]["seconds_total"] = args.train_seconds
    model = NagModel.from_workspace(ws)
    source.reset_queries()
    out["nag"] = nag_section(ws, model, source, rerank, ws.inference.samples)
    print(json.dumps(out["nag"]["rows"], indent=1), file=sys.stderr)

    # -- OFA-style evolution, side by side ----------------------------------------------------------
    evo_rows = []
    if args.reuse_evolution:  # evolution rows of an earlier run of this script (same machine)
        prev = json.loads(Path(args.reuse_evolution).read_text())
        out["evolution"] = {**prev["evolution"], "reused_from": str(args.reuse_evolution),
                            "reused_machine": prev["machine"]}
        evo_rows = prev["evolution"]["rows"]
        if "equal_queries" in prev and not args.equal_queries:
            out["equal_queries"] = prev["equal_queries"]
    if not evo_rows:
        evo_rows = evolution_rows(ws, source, args.evo_seeds)
    if not args.reuse_evolution:
        out["evolution"] = {"rows": evo_rows, "seeds": args.evo_seeds, "generations": 500}

    # -- acceptance summary ------------------------------------------------------------------------
    nag_rows = out["nag"]["rows"]
    deltas = [n["accuracy_pct"] - e["accuracy_pct_mean"] for n, e in zip(nag_rows, evo_rows)]
    deltas_ref = [n["accuracy_pct"] - r for n, r in zip(nag_rows, REFERENCE_EVOLUTION)]
    gen_t = max(r["generation_seconds_single_budget"] for r in nag_rows)
    evo_t = float(np.mean([e["seconds_mean"] for e in evo_rows]))
    out["acceptance"] = {
        "returned_within_budget_all": all(r["within_budget"] for r in nag_rows),
        "raw_samples_within_budget_min": min(r["raw_samples_within_budget"] for r in nag_rows),
        "raw_samples_within_budget_ok": all(r["raw_samples_within_budget"] >= 0.9 for r in nag_rows),
        "nag_minus_evolution_points": deltas, "nag_minus_reference_points": deltas_ref,
        "quality_ok": all(d >= -0.2 for d in deltas),
        "nag_evaluator_only_minus_evolution_points": [n["evaluator_only"]["accuracy_pct"] - e["accuracy_pct_mean"]
                                                      for n, e in zip(nag_rows, evo_rows)],
        "nag_accuracy_queries_per_budget": [n["accuracy_queries"] for n in nag_rows],
        "generation_seconds_max_per_budget": gen_t, "generation_ok": gen_t <= 0.05,
        "generation_seconds_batch_per_budget": out["nag"]["batch_seconds_all_budgets"] / len(BUDGETS),
        "training_seconds": out.get("training", {}).get("seconds_total"),
        "training_ok": out.get("training", {}).get("seconds_total", 1e9) <= 180,
        "evolution_seconds_mean_per_budget": evo_t,
        "evolution_over_generation_time_ratio": evo_t / gen_t if gen_t else None,
    }

    # -- equal total accuracy-source queries ---------------------------------------------------------
    if args.equal_queries:
        out["equal_queries"] = equal_query_section(ws, args.equal_queries, rerank, ds.latency_range)
    out["machine"]["load_avg_end"] = os.getloadavg()
    atomic_write_json(args.out, out)
    print(json.dumps(out["acceptance"], indent=1))
    return 0


def evolution_rows(ws, source, seeds: int) -> list[dict]:
    rows = []
    for b, ref in zip(BUDGETS, REFERENCE_EVOLUTION):
        accs, secs, qs, archs = [], [], [], []
        for s in range(seeds):
            r = run_evolution(ws, source, b, seed=s)
            accs.append(r.accuracy * 100)
            secs.append(r.seconds)
            qs.append(r.queries)
            archs.append(str(r.arch))
        rows.append({"budget_ms": b, "accuracy_pct_mean": float(np.mean(accs)), "accuracy_pct_seeds": accs,
                     "seconds_mean": float(np.mean(secs)), "queries_per_run": int(np.mean(qs)),
                     "reference_pct": ref, "archs": archs})
        print(f"evolution {b:g} ms: {np.mean(accs):.2f}% ({np.mean(secs):.1f} s)", file=sys.stderr)
    return rows


def evolution_only(ws, args) -> int:
    out = {"benchmark": "nag-ofa-note10-evolution", "machine": machine(), "workspace": ws.summary(),
           "budgets_ms": BUDGETS, "note": args.note}
    out["evolution"] = {"rows": evolution_rows(ws, ws.open_accuracy_source(), args.evo_seeds),
                        "seeds": args.evo_seeds, "generations": 500}
    out["machine"]["load_avg_end"] = os.getloadavg()
    atomic_write_json(args.out, out)
    return 0


def equal_query_section(ws, total: int, rerank: int, grid_range: tuple[float, float]) -> dict:
    """NAG with `total` queries in all (dataset + refinement + re-ranking) vs one independent
    evolution per budget with total / 7 queries each. The small dataset's latency range may not
    reach 15 or 60 ms, so the budget grid is pinned to ``grid_range`` (the full dataset's)."""
    from nagkit.data.dataset import dataset_from_arrays
    from nagkit.nag.infer import NagModel
    from nagkit.nag.train import train_models
    from nagkit.space.sampling import sample_many

    src = ws.open_accuracy_source()
    k = len(BUDGETS)
    inf = ws.inference
    # generation-time queries scaled down with the total: re-rank <= 20, polish <= 2 x 15 and the
    # source-guided search <= EQ_SEARCH_QUERIES per budget (the full-cost run uses the workspace's cap)
    rr = min(rerank, 20)
    eq_inf = dataclasses.replace(inf, polish_rounds=min(inf.polish_rounds, 2) if rr else 0,
                                 polish_queries=min(inf.polish_queries, 15),
                                 search_queries=min(inf.search_queries, EQ_SEARCH_QUERIES) if rr else 0,
                                 archive_seeds=0)  # no archive: its training-time searches would cost queries
    per_budget = (rr + eq_inf.polish_rounds * eq_inf.polish_queries
                  + (eq_inf.search_queries if eq_inf.search_rounds > 0 else 0)) if rr else 1
    gc = ws.generator_config
    refine = min(gc.refine_rounds * gc.refine_samples, total // 4)
    rounds = gc.refine_rounds if refine else 0
    per_round = refine // rounds if rounds else 0
    n_data = total - k * per_budget - rounds * per_round
    archs = sample_many(ws.space, n_data, seed=ws.dataset_settings.seed + 77)
    lat = ws.latency_table.predict_many(ws.space, archs)
    acc = src.evaluate(archs)
    ds = dataset_from_arrays(ws.space, archs, lat, acc)
    gcfg = dataclasses.replace(gc, refine_rounds=rounds, refine_samples=per_round, refine_search_queries=0)
    t0 = time.perf_counter()
    ev, gen, rep = train_models(ws.space, ws.latency_table, ds.archs, ds.latency_ms, ds.accuracy,
                                budgets=dataclasses.replace(ws.budgets, min_ms=grid_range[0], max_ms=grid_range[1]),
                                evaluator_cfg=ws.evaluator_config, generator_cfg=gcfg, source=src)
    train_s = time.perf_counter() - t0
    model = NagModel(ws.space, ws.latency_table, ev, gen, src, inference=eq_inf)
    from nagkit.nag.infer import NoFeasibleArchError

    nag_rows = []
    for b in BUDGETS:  # one budget at a time, so a budget it cannot meet is recorded, not fatal
        try:
            r = model.generate([b], samples=ws.inference.samples, rerank=rr, top=1)[0]
            nag_rows.append({"budget_ms": b, "accuracy_pct": r.best.accuracy * 100, "latency_ms": r.best.latency_ms})
        except NoFeasibleArchError as e:
            nag_rows.append({"budget_ms": b, "accuracy_pct": None, "latency_ms": None, "error": e.message})
    nag_q = src.queries
    evo_src = ws.open_accuracy_source()
    per = total // k
    evo_rows = []
    for b in BUDGETS:  # 3 seeds of the whole repeated-evolution run (each seed uses `total` queries)
        runs = [run_evolution(ws, evo_src, b, seed=s, queries=per) for s in range(3)]
        evo_rows.append({"budget_ms": b, "accuracy_pct": float(np.mean([r.accuracy * 100 for r in runs])),
                         "accuracy_pct_seeds": [r.accuracy * 100 for r in runs],
                         "latency_ms": [r.latency_ms for r in runs], "queries": [r.queries for r in runs]})
    wins = [(n["accuracy_pct"] if n["accuracy_pct"] is not None else 0.0) - e["accuracy_pct"]
            for n, e in zip(nag_rows, evo_rows)]  # a budget NAG could not meet counts as 0%
    return {"total_queries": total, "nag_queries": nag_q, "nag_queries_within_total": nag_q <= total,
            "nag_dataset": n_data, "nag_refinement": rep["refinement_queries"],
            "nag_rerank_per_budget": rr, "nag_generation_queries_per_budget_max": per_budget,
            "nag_inference": dataclasses.asdict(eq_inf), "nag_training_seconds": train_s, "nag": nag_rows,
            "evolution_queries_per_seed": evo_src.queries / 3, "evolution_per_budget": per, "evolution_seeds": 3,
            "evolution": evo_rows,
            "nag_minus_evolution_points": wins, "nag_mean_advantage_points": float(np.mean(wins)),
            "nag_wins_budgets": int(sum(w > 0 for w in wins))}


if __name__ == "__main__":
    sys.exit(main())
