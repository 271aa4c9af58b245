"""What each piece of NAG v3 contributes at 5,010 queries, and the paper's ablations; writes
benchmarks/nag/ablations.json.

    .venv/bin/python benchmarks/nag/ablations.py [--workspace ofa-note10] [--seeds 0,1,2] [--jobs 2]
        [--evolution benchmarks/nag/ofa-note10.json]

Per seed s, every row starts from the same dataset (501 uniform archs, seed s) and spends at most
5,010 accuracy queries in all, counted; each is scored by the workspace's accuracy source after
zero-query generation at the workspace's budgets; evolution's means come from a bench_nag.py JSON
of the same machine (``--evolution``).

Rows:
- ``v3``: the shipped method (surrogate-assisted frontier search, the surrogate as evaluator
  with the exact memory of queried archs, the fast generator's imitation).
- ``v3-guided-search``: v2's accuracy-guided search (local ridge screen) instead of the
  surrogate-assisted one, the rest as v3: what the search contributes.
- ``v3-learned-evaluator``: v2's learned evaluator (pointwise, 150 epochs) instead of the
  surrogate: what computing R from the surrogate contributes.
- ``v3-samples-alone``: the generator's samples alone are ranked, without the frontier archive's
  3 best archs within B beside them (``[inference] archive = 0``, v3 before decisions 41).
- ``v3-populations-16``: the frontier search's populations as before decisions 45 (16 parents,
  32 kept per budget, against 32 and 48): what the larger populations contribute.
- ``v3-log-spacing``: the frontier search's budgets in equal slices of log-latency, as before
  decisions 48 (against half of them in slices of latency): what the mixed spacing contributes.
- ``v3-no-memory``: the surrogate's estimate ranks every sample, queried or not: what the exact
  memory contributes.
- ``v3-v2-generator``: v2's generator (hidden 128, 600 imitation steps of 256): what the smaller,
  faster generator costs.
- ``v2``: v2 entire (guided search, learned evaluator, two refinement rounds) at 5,010 queries.
- ``rl-dominance`` / ``rl-mnasnet`` / ``rl-tunas``: the paper's training on v3's data: REINFORCE
  from scratch (no imitation) with the Pareto-dominance evaluator (v3's surrogate) as the
  reward, or MnasNet's acc * (c/B)^-0.07 / TuNAS's acc - 0.07 |c/B - 1| with its accuracy.
- ``rl-no-accuracy``: REINFORCE on an evaluator trained with dominance by latency only (paper
  Table 3).
- ``rl-independent``: one generator per budget (REINFORCE at that budget only), each with 1/7 of
  the steps, against ``rl-dominance``'s one generator for all budgets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench_nag import DEFAULT_BUDGETS, machine, run_resumable  # noqa: E402 - this folder is on sys.path
from nagkit.io import atomic_write_json  # noqa: E402

RL_STEPS = 700


def score(ws, ev, gen, budgets, archive=None, inference=None) -> list[float]:
    """Zero-query generation at ``budgets``, scored; ``archive``: the training's frontier archive,
    whose best archs within B join the samples as in ``nagkit generate`` (none for the paper's
    generator-only rows)."""
    from nagkit.nag.infer import NagModel

    m = NagModel(ws.space, ws.latency_table, ev, gen, None, inference or ws.inference, archive)
    src = ws.open_accuracy_source()
    return [100 * float(src.evaluate([m.generate([b], display=False)[0].best.arch])[0]) for b in budgets]


def rl_generator(ws, grid, ev, latency, reward: str, seed: int, steps: int, budget_range=None):
    import torch

    from nagkit.nag.generator import Generator, reinforce
    from nagkit.nag.train import evaluator_reward

    gc = dataclasses.replace(ws.generator_config, steps=steps, seed=seed, reward=reward)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = Generator(ws.space, grid, gc, ws.budgets.embed_dim).bind(latency)
    reinforce(gen, budget_range or (grid.lo, grid.hi), gc, evaluator_reward(ev, latency, reward, gc.reward_coef), seed)
    return gen


_SHARED: dict = {}


def dataset(ws, seed: int):
    import tempfile

    from nagkit.data.dataset import collect

    src = ws.open_accuracy_source()
    with tempfile.TemporaryDirectory() as tmp:
        return collect(Path(tmp) / "d.jsonl", space=ws.space, table=ws.latency_table, source=src,
                       n=ws.dataset_settings.n, seed=seed, table_prov=ws.latency_table_provenance())


def train(ws, seed: int, *, frontier=None, evaluator=None, generator=None):
    """One whole training from the dataset of seed ``seed`` (every query counted)."""
    from nagkit.nag.train import train_models

    ds = dataset(ws, seed)
    src = ws.open_accuracy_source()
    tr = train_models(ws.space, ws.latency_table, ds.archs, ds.accuracy, budgets=ws.budgets,
                      evaluator_cfg=dataclasses.replace(evaluator or ws.evaluator_config, seed=seed),
                      generator_cfg=dataclasses.replace(generator or ws.generator_config, seed=seed),
                      frontier_cfg=frontier or ws.frontier_config,
                      surrogate_cfg=dataclasses.replace(ws.surrogate_config, seed=seed), source=src)
    return tr, len(ds) + src.queries


def _job(job: tuple) -> tuple:
    """One ablation row for one seed (or one budget of ``rl-independent``)."""
    from nagkit.nag.evaluator import train_evaluator
    from nagkit.nag.train import make_grid

    ws, budgets = _SHARED["ws"], _SHARED["budgets"]
    kind, seed = job[0], job[1]
    t0 = time.perf_counter()
    fc, ec, gc = ws.frontier_config, ws.evaluator_config, ws.generator_config
    v2_front = dataclasses.replace(fc, method="guided", refine_rounds=2)
    extra: dict = {}
    if kind in ("v3", "v3-no-memory", "v3-guided-search", "v3-learned-evaluator", "v3-v2-generator", "v2",
                "v3-samples-alone", "v3-populations-16", "v3-log-spacing"):
        cfg = {"v3": {}, "v3-no-memory": {}, "v3-samples-alone": {}, "v3-guided-search": {"frontier": dataclasses.replace(fc, method="guided")},
               "v3-populations-16": {"frontier": dataclasses.replace(
                   fc, active=dataclasses.replace(fc.active, parents=16, population=32))},
               "v3-log-spacing": {"frontier": dataclasses.replace(
                   fc, active=dataclasses.replace(fc.active, spacing="log"))},
               "v3-learned-evaluator": {"evaluator": dataclasses.replace(ec, kind="learned")},
               "v3-v2-generator": {"generator": dataclasses.replace(gc, hidden=128, imitation_steps=600,
                                                                     imitation_batch=256)},
               "v2": {"frontier": v2_front, "evaluator": dataclasses.replace(ec, kind="learned")}}[kind]
        tr, queries = train(ws, seed, **cfg)
        ev = tr.evaluator
        if kind == "v3-no-memory":
            ev.remember(_empty(ws), np.zeros(0))
        inf = dataclasses.replace(ws.inference, archive=0) if kind in ("v3-samples-alone", "v2") else None
        accs = score(ws, ev, tr.generator, budgets, archive=tr.archive, inference=inf)
        extra = {"queries": queries, "training_seconds": tr.report["seconds"]}
    else:  # the paper's rows, on v3's data and surrogate
        tr, queries = train(ws, seed, generator=dataclasses.replace(gc, imitation_steps=0))
        ev, latency = tr.evaluator, tr.generator._lat
        grid = tr.generator.grid
        extra = {"queries": queries}
        if kind == "rl":
            gen = rl_generator(ws, grid, ev, latency, job[2], seed, RL_STEPS)
            accs = score(ws, ev, gen, budgets)
        elif kind == "rl-no-accuracy":  # ranked by the same latency-only evaluator
            dec = _known(ws, tr)
            ev0, _ = train_evaluator(ws.space, dec[0], dec[1], dec[2], make_grid(ws.budgets, latency),
                                     dataclasses.replace(ec, kind="learned", seed=seed, accuracy_term=False),
                                     embed_dim=ws.budgets.embed_dim)
            gen = rl_generator(ws, grid, ev0, latency, "dominance", seed, RL_STEPS)
            accs = score(ws, ev0, gen, budgets)
        else:  # one generator per budget, REINFORCE at that budget only, 1/K of the steps
            accs = []
            for b in budgets:
                gen = rl_generator(ws, grid, ev, latency, "dominance", seed, RL_STEPS // len(budgets), (b, b))
                accs += score(ws, ev, gen, [b])
    return job, {"accuracy_pct": accs, "seconds": time.perf_counter() - t0, **extra}


def _empty(ws):
    from nagkit.space.decisions import Decisions

    return Decisions.empty(ws.space)


def _known(ws, tr):
    """(decisions, latency, accuracy) of the archive (what a latency-only evaluator is fitted on)."""
    return tr.archive.dec, tr.archive.latency_ms, tr.archive.accuracy


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--evolution", default=None, help="bench_nag.py JSON whose evolution means to compare with")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "nag" / "ablations.json"))
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (set OMP_NUM_THREADS=1)")
    ap.add_argument("--rows", default="all")
    args = ap.parse_args()

    from nagkit.app.workspace import load_workspace

    ws = load_workspace(args.workspace)
    budgets = DEFAULT_BUDGETS[ws.name]
    seeds = [int(s) for s in args.seeds.split(",")]
    out = {"benchmark": "nag-v3-ablations", "machine": machine(), "workspace": ws.name, "budgets_ms": budgets,
           "seeds": seeds, "rl_steps": RL_STEPS, "query_budget": ws.frontier_config.total_queries, "rows": {}}
    evo = None
    if args.evolution:
        evo = [r["accuracy_pct_mean"] for r in json.loads(Path(args.evolution).read_text())["evolution"]]
        out["evolution_mean_pct"], out["evolution_from"] = evo, args.evolution
    names = ["v3", "v3-samples-alone", "v3-populations-16", "v3-log-spacing", "v3-guided-search", "v3-learned-evaluator", "v3-no-memory", "v3-v2-generator", "v2",
             "rl-dominance", "rl-mnasnet", "rl-tunas", "rl-no-accuracy", "rl-independent"]
    if args.rows != "all":
        unknown = sorted(set(args.rows.split(",")) - set(names))
        if unknown:
            ap.error(f"unknown rows {', '.join(unknown)}; rows are {', '.join(names)}")
        names = [n for n in names if n in args.rows.split(",")]
    jobs = []
    for n in names:
        key = ("rl", n.split("-", 1)[1]) if n in ("rl-dominance", "rl-mnasnet", "rl-tunas") else (n,)
        jobs += [(key[0], s, *key[1:]) for s in seeds]
    _SHARED.update(ws=ws, budgets=budgets)
    # every finished job is appended here, so an interrupted run resumes with the rest
    partial = Path(args.out).with_name(Path(args.out).name + f".{ws.name}.partial.jsonl")
    results = run_resumable(jobs, _job, partial, args.jobs)
    out["jobs"] = args.jobs
    for n in names:
        key = ("rl", n.split("-", 1)[1]) if n in ("rl-dominance", "rl-mnasnet", "rl-tunas") else (n,)
        runs = [results[(key[0], s, *key[1:])] for s in seeds]
        acc = np.array([r["accuracy_pct"] for r in runs])
        row = {"accuracy_pct_per_seed": acc.tolist(), "accuracy_pct": acc.mean(0).tolist(),
               "queries": [r.get("queries") for r in runs], "seconds": [r["seconds"] for r in runs]}
        if evo:
            d = acc - np.asarray(evo)
            row["minus_evolution"] = d.mean(0).tolist()
            row["mean_minus_evolution"] = float(d.mean())
            row["worst_seed_minus_evolution"] = float(d.min())
        out["rows"][n] = row
    out["machine"]["load_avg_end"] = __import__("os").getloadavg()
    atomic_write_json(args.out, out)
    partial.unlink()
    print(json.dumps({n: round(r.get("mean_minus_evolution", float("nan")), 3) for n, r in out["rows"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
