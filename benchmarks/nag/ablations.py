"""The paper's ablations with zero-query generation; writes benchmarks/nag/ablations.json.

    .venv/bin/python benchmarks/nag/ablations.py [--workspace ofa-note10] [--seed 0]

One training seed, the workspace's budgets (15..60 ms on ofa-note10), evolution's mean from a
bench_nag.py JSON of the same machine as the reference (``--evolution``). Every variant starts
from the same data (the dataset plus one frontier search) so the rows differ only in what they
ablate; each is scored by the workspace's accuracy source after zero-query generation.

Rows:
- ``v2``: the shipped method (evaluator, imitation of the frontier archive, refinement).
- ``rl-dominance`` / ``rl-mnasnet`` / ``rl-tunas``: the paper's training, REINFORCE from
  scratch (no imitation, no refinement), with the Pareto-dominance evaluator as the reward, or
  MnasNet's acc * (c/B)^-0.07 / TuNAS's acc - 0.07 |c/B - 1| with the evaluator's accuracy
  estimate; the same generator, the same number of steps.
- ``rl-no-accuracy``: REINFORCE on an evaluator trained with dominance by latency only
  (paper Table 3).
- ``rl-independent``: one generator per budget (REINFORCE at that budget only), each with 1/7
  of the steps, against ``rl-dominance``'s one generator for all budgets.
- ``v2-k{2,5,10,30}``: the shipped method with K grid budgets.
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

from bench_nag import DEFAULT_BUDGETS, machine  # noqa: E402 - this folder is on sys.path
from nagkit.io import atomic_write_json  # noqa: E402

RL_STEPS = 700


def score(ws, ev, gen, archive, budgets) -> list[float]:
    from nagkit.nag.infer import NagModel

    m = NagModel(ws.space, ws.latency_table, ev, gen, None, ws.inference, archive)
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


def _evaluator(k: int, accuracy_term: bool = True):
    from nagkit.nag.evaluator import train_evaluator
    from nagkit.nag.train import make_grid

    ws, known, latency, seed = (_SHARED[x] for x in ("ws", "known", "latency", "seed"))
    grid = make_grid(dataclasses.replace(ws.budgets, k=k), latency)
    ev, _ = train_evaluator(ws.space, known.dec, known.latency, known.accuracy, grid,
                            dataclasses.replace(ws.evaluator_config, seed=seed, accuracy_term=accuracy_term),
                            embed_dim=ws.budgets.embed_dim)
    return grid, ev


def _job(job: tuple) -> tuple:
    """One ablation row (or one budget of ``rl-independent``), from the shared data."""
    from nagkit.nag.archive import Archive
    from nagkit.nag.train import refine, train_generator

    ws, known, latency, seed, budgets = (_SHARED[x] for x in ("ws", "known", "latency", "seed", "budgets"))
    t0 = time.perf_counter()
    kind = job[0]
    extra: dict = {}
    if kind == "v2":  # the shipped method with K grid budgets
        grid, ev = _evaluator(job[1])
        gc = dataclasses.replace(ws.generator_config, seed=seed)
        archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, gc.imitation_top)
        gen = train_generator(ws.space, grid, gc, ev, latency, archive, ws.budgets.embed_dim)
        rs = ws.open_accuracy_source()
        _, ev2, archive2, ref = refine(ws.space, latency, known, ev, gen, ws.frontier_config, ws.evaluator_config,
                                       rs, seed)
        accs = score(ws, ev2, gen, archive2, budgets)
        extra = {"k": job[1], "refinement_queries": ref["queries"]}
    elif kind == "rl":
        grid, ev = _evaluator(ws.budgets.k)
        gen = rl_generator(ws, grid, ev, latency, job[1], seed, RL_STEPS)
        accs, extra = score(ws, ev, gen, None, budgets), {"reward": job[1]}
    elif kind == "rl-no-accuracy":  # ranked by the same latency-only evaluator
        grid, ev = _evaluator(ws.budgets.k, accuracy_term=False)
        gen = rl_generator(ws, grid, ev, latency, "dominance", seed, RL_STEPS)
        accs = score(ws, ev, gen, None, budgets)
    else:  # one generator per budget, REINFORCE at that budget only, 1/K of the steps
        b = job[1]
        grid, ev = _evaluator(ws.budgets.k)
        gen = rl_generator(ws, grid, ev, latency, "dominance", seed, RL_STEPS // len(budgets), (b, b))
        accs = score(ws, ev, gen, None, [b])
    return job, {"accuracy_pct": accs, "seconds": time.perf_counter() - t0, **extra}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--evolution", default=None, help="bench_nag.py JSON whose evolution means to compare with")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "nag" / "ablations.json"))
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (set OMP_NUM_THREADS=1)")
    args = ap.parse_args()

    from nagkit.app.workspace import load_workspace
    from nagkit.data.dataset import collect
    from nagkit.latency.slots import SlotLatency
    from nagkit.nag.train import frontier_search
    from nagkit.space.decisions import Pool, dedupe, from_archs

    ws = load_workspace(args.workspace)
    budgets = DEFAULT_BUDGETS[ws.name]
    out = {"benchmark": "nag-ablations", "machine": machine(), "workspace": ws.name, "budgets_ms": budgets,
           "seed": args.seed, "rl_steps": RL_STEPS, "rows": {}}
    evo = None
    if args.evolution:
        evo = [r["accuracy_pct_mean"] for r in json.loads(Path(args.evolution).read_text())["evolution"]]
        out["evolution_mean_pct"], out["evolution_from"] = evo, args.evolution
    src = ws.open_accuracy_source()
    ds = collect(ws.artifact_path("dataset"), space=ws.space, table=ws.latency_table, source=src,
                 n=ws.dataset_settings.n, seed=ws.dataset_settings.seed, table_prov=ws.latency_table_provenance())
    latency = SlotLatency(ws.latency_table, ws.space)
    dec = from_archs(ws.space, ds.archs)
    known = Pool(dec, np.zeros(len(dec)), latency(dec), ds.accuracy)
    src.reset_queries()
    known, front = frontier_search(ws.space, latency, known, ws.frontier_config, src, args.seed)
    known = known.select(dedupe(ws.space, known.dec))
    out["frontier_queries"] = front["queries"]

    jobs = [("v2", k) for k in (2, 5, 10, 30)] + [("rl", r) for r in ("dominance", "mnasnet", "tunas")]
    jobs += [("rl-no-accuracy",)] + [("rl-independent", b) for b in budgets]
    _SHARED.update(ws=ws, known=known, latency=latency, seed=args.seed, budgets=budgets)
    results = {}
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            for job, res in pool.imap_unordered(_job, jobs):
                results[job] = res
                print(job, np.round(res["accuracy_pct"], 2).tolist(), file=sys.stderr)
    else:
        for job in jobs:
            results[job] = _job(job)[1]
    out["jobs"] = args.jobs

    def row(name, r):
        if evo:
            r["minus_evolution"] = [a - e for a, e in zip(r["accuracy_pct"], evo)]
            r["mean_minus_evolution"] = float(np.mean(r["minus_evolution"]))
        out["rows"][name] = r

    for k in (2, 5, 10, 30):
        row("v2" if k == ws.budgets.k else f"v2-k{k}", results[("v2", k)])
    for reward in ("dominance", "mnasnet", "tunas"):
        row(f"rl-{reward}", results[("rl", reward)])
    row("rl-no-accuracy", results[("rl-no-accuracy",)])
    ind = [results[("rl-independent", b)] for b in budgets]
    row("rl-independent", {"accuracy_pct": [r["accuracy_pct"][0] for r in ind],
                           "seconds": float(sum(r["seconds"] for r in ind)),
                           "steps_each": RL_STEPS // len(budgets)})
    out["machine"]["load_avg_end"] = __import__("os").getloadavg()
    atomic_write_json(args.out, out)
    print(json.dumps({n: round(r.get("mean_minus_evolution", float("nan")), 3) for n, r in out["rows"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
