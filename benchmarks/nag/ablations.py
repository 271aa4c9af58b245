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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--evolution", default=None, help="bench_nag.py JSON whose evolution means to compare with")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "nag" / "ablations.json"))
    args = ap.parse_args()

    from nagkit.app.workspace import load_workspace
    from nagkit.data.dataset import collect
    from nagkit.latency.slots import SlotLatency
    from nagkit.nag.archive import Archive
    from nagkit.nag.evaluator import train_evaluator
    from nagkit.nag.train import frontier_search, make_grid, refine, train_generator
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

    def row(name, accs, t0, **extra):
        r = {"accuracy_pct": accs, "seconds": time.perf_counter() - t0, **extra}
        if evo:
            r["minus_evolution"] = [a - e for a, e in zip(accs, evo)]
            r["mean_minus_evolution"] = float(np.mean(r["minus_evolution"]))
        out["rows"][name] = r
        print(name, np.round(accs, 2).tolist(), file=sys.stderr)
        atomic_write_json(args.out, out)

    evs = {}
    for k in (2, 5, 10, 30):  # the shipped method with K grid budgets
        t0 = time.perf_counter()
        grid = make_grid(dataclasses.replace(ws.budgets, k=k), latency)
        ev, _ = train_evaluator(ws.space, known.dec, known.latency, known.accuracy, grid,
                                dataclasses.replace(ws.evaluator_config, seed=args.seed), embed_dim=ws.budgets.embed_dim)
        evs[k] = (grid, ev)
        gc = dataclasses.replace(ws.generator_config, seed=args.seed)
        archive = Archive.from_decisions(known.dec, known.latency, known.accuracy, gc.imitation_top)
        gen = train_generator(ws.space, grid, gc, ev, latency, archive, ws.budgets.embed_dim)
        rs = ws.open_accuracy_source()
        _, ev2, archive2, ref = refine(ws.space, latency, known, ev, gen, ws.frontier_config, ws.evaluator_config,
                                       rs, args.seed)
        row("v2" if k == ws.budgets.k else f"v2-k{k}", score(ws, ev2, gen, archive2, budgets), t0, k=k,
            refinement_queries=ref["queries"])
    grid, ev = evs[ws.budgets.k]
    for reward in ("dominance", "mnasnet", "tunas"):
        t0 = time.perf_counter()
        gen = rl_generator(ws, grid, ev, latency, reward, args.seed, RL_STEPS)
        row(f"rl-{reward}", score(ws, ev, gen, None, budgets), t0, reward=reward)
    t0 = time.perf_counter()
    ev_lat, _ = train_evaluator(ws.space, known.dec, known.latency, known.accuracy, grid,
                                dataclasses.replace(ws.evaluator_config, seed=args.seed, accuracy_term=False),
                                embed_dim=ws.budgets.embed_dim)
    gen = rl_generator(ws, grid, ev_lat, latency, "dominance", args.seed, RL_STEPS)
    row("rl-no-accuracy", score(ws, ev_lat, gen, None, budgets), t0)  # ranked by the same latency-only R
    t0 = time.perf_counter()
    accs = []
    for b in budgets:  # one generator per budget, REINFORCE at that budget only, 1/K of the steps
        gen = rl_generator(ws, grid, ev, latency, "dominance", args.seed, RL_STEPS // len(budgets), (b, b))
        accs.append(score(ws, ev, gen, None, [b])[0])
    row("rl-independent", accs, t0, steps_each=RL_STEPS // len(budgets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
