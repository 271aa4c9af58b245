"""Zero-query generation with a second limit against OFA's evolution filtering on the same limits
(issue 34's quality and feasibility points), side by side in one run.

    .venv/bin/python benchmarks/constraints/bench_quality.py [--jobs 2] [--seeds 0,1,2] [--evo-seeds 3]

Points: ofa-note10 (OFA's predictor, the Note10 table) at 20, 30 and 50 ms, each with a parameter
limit; ofa-cpu-w1.0 at 10, 20 and 40 ms, each with a peak-activation limit (fp32). Each limit is
the 25th or the 50th percentile of the resource among the space's networks *at that latency*:
200,000 uniform random archs (seed 0), those whose table latency lies in [0.9 B, B].

For each NAG training seed s, as benchmarks/nag/bench_nag.py counts it: the uniform dataset and
the whole training (the workspace's query budget, every query counted; latency only: one
generator serves every limit), then zero-query generation at every point: the chosen arch's
accuracy (scored by the workspace's accuracy source after the choice), and 1,000 raw generator
samples drawn under the limit's masks, of which the share within the budget and every limit.
Then OFA's EvolutionFinder exactly (nagkit.search.methods.Evolution: population 100, 500
generations, 50,100 queries) whose rejection sampling also rejects what breaks the limit
(SearchProblem.fits), at every point, several seeds. Every finished job is appended to
results/quality.partial.jsonl, so an interrupted run resumes; results/quality.json at the end.
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
sys.path.insert(0, str(ROOT / "benchmarks" / "nag"))

from bench_nag import machine, run_resumable, train_seed  # noqa: E402

from nagkit.io import atomic_write_json  # noqa: E402

POINTS = {"ofa-note10": ("max_params", [20.0, 30.0, 50.0]), "ofa-cpu-w1.0": ("max_peak_kb", [10.0, 20.0, 40.0])}
PERCENTILES = (25, 50)
RAW = 1000
MARGIN = 0.15  # the acceptance: NAG's mean of the training seeds >= evolution's mean - 0.15 points


def _ws(name: str):
    from nagkit.app.workspace import load_workspace

    return load_workspace(name)


def limit_values(name: str, n: int = 200_000) -> dict:
    """{budget: {percentile: limit}} of the workspace's points, and how many archs each rests on."""
    from nagkit.latency.slots import SlotLatency
    from nagkit.space import sampling as ops
    from nagkit.space.resources import SlotResources

    ws = _ws(name)
    key, budgets = POINTS[name]
    dec = ops.random_decisions(ws.space, n, np.random.default_rng(0))
    lat = SlotLatency(ws.latency_table, ws.space)(dec)
    res = SlotResources(ws.space)(dec)
    value = res["params"] if key == "max_params" else res["peak"] * 4 / 1000  # kB at fp32
    out = {}
    for b in budgets:
        near = (lat >= 0.9 * b) & (lat <= b)
        v = value[near]
        out[b] = {"n_archs": int(near.sum()), **{p: float(np.percentile(v, p)) for p in PERCENTILES}}
        if key == "max_params":
            out[b].update({p: float(round(out[b][p])) for p in PERCENTILES})
    return out


def _limits(key: str, value: float):
    from nagkit.nag.constraints import Limits

    return Limits(**{key: value})


def nag_job(name: str, seed: int, points: list[tuple[float, int, float]]) -> dict:
    from nagkit.nag.infer import NagModel
    from nagkit.nag.generator import sample_archs

    ws = _ws(name)
    key = POINTS[name][0]
    tr, info = train_seed(ws, seed)
    model = NagModel(ws.space, ws.latency_table, tr.evaluator, tr.generator, None, ws.inference, tr.archive)
    scorer = ws.open_accuracy_source()
    rows = []
    for b, pct, value in points:
        lim = _limits(key, value)
        r = model.generate([b], display=False, limits=lim)[0]
        cons = model.constraints(lim)
        dec, _ = sample_archs(model.generator, [b], RAW, 2024, temperature=ws.inference.temperature,
                              limits=cons.tensors())
        lat = model.latency(dec)
        ok = (lat <= b + 1e-9) & cons.fits(dec)
        rows.append({"budget_ms": b, "percentile": pct, "limit": value, "arch": str(r.best.arch),
                     "latency_ms": r.best.latency_ms, "accuracy_pct": 100 * float(scorer.evaluate([r.best.arch])[0]),
                     "reached": r.best.resources, "binding": r.extra["constraints"]["binding"],
                     "raw_samples": RAW, "raw_samples_meeting_all": int(ok.sum()),
                     "selection_queries": r.selection_queries})
    info["points"] = rows
    print(json.dumps({"nag": name, "seed": seed, "acc": [round(x["accuracy_pct"], 2) for x in rows]}),
          file=sys.stderr, flush=True)
    return info


def evo_job(name: str, b: float, pct: int, value: float, seed: int) -> dict:
    from nagkit.latency.slots import SlotLatency
    from nagkit.nag.constraints import Constraints
    from nagkit.search.base import SearchProblem, run_search
    from nagkit.search.factory import make_method
    from nagkit.search.methods import default_stop
    from nagkit.space.decisions import from_archs
    from nagkit.space.resources import SlotResources

    ws = _ws(name)
    cons = Constraints(SlotLatency(ws.latency_table, ws.space), SlotResources(ws.space), _limits(POINTS[name][0], value))
    src = ws.open_accuracy_source()
    method = make_method("evolution", SearchProblem(ws.space, ws.latency_table, src, b, fits=cons.fits), seed=seed)
    res = run_search(method, default_stop("evolution"))
    reached = {k: float(v[0]) for k, v in cons.reached(from_archs(ws.space, [res.arch])).items() if not np.isnan(v[0])}
    print(f"evolution {name} {b:g} ms p{pct} seed {seed}: {100 * res.accuracy:.2f}% ({res.seconds:.1f} s)",
          file=sys.stderr, flush=True)
    return {"seed": seed, "accuracy_pct": 100 * res.accuracy, "latency_ms": res.latency_ms, "arch": str(res.arch),
            "queries": res.queries, "seconds": res.seconds, "reached": reached, "settings": method.settings()}


_LIMITS: dict = {}


def _work(job: tuple) -> tuple:
    if job[0] == "nag":
        name, seed = job[1], job[2]
        pts = [(b, p, _LIMITS[name][b][p]) for b in POINTS[name][1] for p in PERCENTILES]
        return job, nag_job(name, seed, pts)
    _, name, b, p, seed = job
    return job, evo_job(name, b, p, _LIMITS[name][b][p], seed)


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def summarize(limits: dict, results: dict, seeds: list[int], evo_seeds: int) -> dict:
    out = {}
    for name, (key, budgets) in POINTS.items():
        rows = []
        for b in budgets:
            for p in PERCENTILES:
                nag = [next(x for x in results[("nag", name, s)]["points"] if x["budget_ms"] == b and x["percentile"] == p)
                       for s in seeds]
                evo = [results[("evo", name, b, p, s)] for s in range(evo_seeds)]
                nag_acc, evo_acc = [x["accuracy_pct"] for x in nag], [x["accuracy_pct"] for x in evo]
                rows.append({"budget_ms": b, "percentile": p, key: limits[name][b][p],
                             "nag_mean_pct": float(np.mean(nag_acc)), "nag_per_seed": nag_acc,
                             "evolution_mean_pct": float(np.mean(evo_acc)), "evolution_per_seed": evo_acc,
                             "nag_minus_evolution_mean": float(np.mean(nag_acc) - np.mean(evo_acc)),
                             "raw_meeting_all_min": min(x["raw_samples_meeting_all"] for x in nag) / RAW,
                             "binding": [x["binding"] for x in nag]})
        out[name] = {"limit": key, "points": rows,
                     "quality_ok": all(r["nag_minus_evolution_mean"] >= -MARGIN for r in rows),
                     "feasibility_ok": all(r["raw_meeting_all_min"] == 1.0 for r in rows),
                     "training_queries": [results[("nag", name, s)]["accuracy_queries"]["total"] for s in seeds],
                     "evolution_queries_per_run": results[("evo", name, budgets[0], PERCENTILES[0], 0)]["queries"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--evo-seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "constraints" / "results" / "quality.json"))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    info = machine()
    t0 = time.time()
    for name in POINTS:
        _LIMITS[name] = limit_values(name)
    jobs = [("nag", name, s) for name in POINTS for s in seeds]
    jobs += [("evo", name, b, p, s) for name in POINTS for b in POINTS[name][1] for p in PERCENTILES
             for s in range(args.evo_seeds)]
    results = run_resumable(jobs, _work, out.with_suffix(".partial.jsonl"), args.jobs, _one_thread)
    info["load_avg_end"] = __import__("os").getloadavg()
    doc = {"machine": info, "jobs": args.jobs, "seconds": time.time() - t0, "seeds": seeds,
           "evo_seeds": args.evo_seeds, "raw_samples_per_point": RAW, "margin_points": MARGIN,
           "limit_rule": "percentile of the resource among 200,000 uniform random archs (seed 0) whose table "
                         "latency lies in [0.9 B, B]; peak in kB at fp32",
           "limits": {n: {str(b): v for b, v in d.items()} for n, d in _LIMITS.items()},
           "summary": summarize(_LIMITS, results, seeds, args.evo_seeds),
           "nag_trainings": {f"{n}/{s}": results[("nag", n, s)] for n in POINTS for s in seeds},
           "evolution_runs": [{"workspace": j[1], "budget_ms": j[2], "percentile": j[3], **results[j]}
                              for j in jobs if j[0] == "evo"]}
    atomic_write_json(out, doc)
    for name, s in doc["summary"].items():
        for r in s["points"]:
            print(f"{name} {r['budget_ms']:g} ms p{r['percentile']} {s['limit']}={r[s['limit']]:.6g}: NAG "
                  f"{r['nag_mean_pct']:.2f} evolution {r['evolution_mean_pct']:.2f} "
                  f"({r['nag_minus_evolution_mean']:+.2f}); raw meeting all {r['raw_meeting_all_min']:.3f}")
        print(f"{name}: quality {'met' if s['quality_ok'] else 'NOT met'}, feasibility "
              f"{'met' if s['feasibility_ok'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
