"""The user's wait, through the CLI, as issue 33 measured it: `nagkit dataset` + `nagkit train`
on a fresh copy of a workspace, against `nagkit search` (OFA-exact evolution, 50,100 queries) at
each of the workspace's budgets, every command its own process (start-up and imports included on
both sides), interleaved over rounds so that the host's drift falls on both alike.

    .venv/bin/python benchmarks/nag/bench_cli_time.py --workspace ofa-note10 [--rounds 3]
    .venv/bin/python benchmarks/nag/bench_cli_time.py --workspace ofa-cpu-w1.0

Round i: NAG with seed i (a fresh `nagkit init --from W` copy with its dataset, journal and models
removed, `seed = i` in its nagkit.toml, then `nagkit dataset` and `nagkit train`), then evolution with seed i at every
budget (`nagkit search --budget B --seed i`); the next round starts with evolution, and so on
(ABBA). Writes ``cli_time-<workspace>.json`` with every command's wall time, the accuracy
queries each side spent, the load before and after each command, and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from bench_nag import DEFAULT_BUDGETS, machine  # noqa: E402

from nagkit.io import atomic_write_json  # noqa: E402

NAGKIT = [sys.executable, "-m", "nagkit.cli.main"]


def run(args: list[str], env: dict) -> tuple[float, dict]:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.run(NAGKIT + args, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"nagkit {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    out = json.loads(p.stdout) if "--json" in args else {}
    return secs, {"command": "nagkit " + " ".join(args), "seconds": secs, "load_before": load,
                  "load_after": os.getloadavg()[0], "json": out}


def nag_side(ws_name: str, seed: int, tmp: Path, env: dict) -> dict:
    dest = tmp / f"nag-{seed}"
    shutil.rmtree(dest, ignore_errors=True)
    t_init, init = run(["init", str(dest), "--from", ws_name], env)  # a copy, not counted (the user has one)
    for name in ("dataset.jsonl", "queries.jsonl", "evaluator.pt", "evaluator.json", "generator.pt",
                 "generator.json", "archive.jsonl"):
        (dest / name).unlink(missing_ok=True)
    toml = dest / "nagkit.toml"  # the round's seed for the dataset and the training alike
    text = toml.read_text()
    head, sep, rest = text.partition("\n[")
    head = re.sub(r"^seed\s*=.*$\n?", "", head, flags=re.M).rstrip("\n") + f"\nseed = {seed}\n"
    toml.write_text(head + sep + rest)
    t_ds, ds = run(["dataset", "-w", str(dest), "--json"], env)
    t_tr, tr = run(["train", "-w", str(dest), "--json"], env)
    return {"seed": seed, "seconds": t_ds + t_tr, "dataset": ds, "train": tr, "init_seconds_not_counted": t_init}


def evo_side(ws_name: str, budgets: list[float], seed: int, env: dict) -> dict:
    runs = [run(["search", "-w", ws_name, "--budget", f"{b:g}", "--seed", str(seed), "--json"], env)[1]
            for b in budgets]
    return {"seed": seed, "seconds": sum(r["seconds"] for r in runs), "runs": runs}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="ofa-note10")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    budgets = DEFAULT_BUDGETS[args.workspace]
    out = {"benchmark": "nag-cli-time", "workspace": args.workspace, "budgets_ms": budgets, "machine": machine(),
           "rounds": []}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        env = dict(os.environ, NAGKIT_HOME=str(tmp / "home"))
        for i in range(args.rounds):
            order = ("nag", "evo") if i % 2 == 0 else ("evo", "nag")
            row: dict = {"round": i, "order": list(order)}
            for side in order:
                row[side] = nag_side(args.workspace, i, tmp, env) if side == "nag" else \
                    evo_side(args.workspace, budgets, i, env)
                print(f"round {i} {side}: {row[side]['seconds']:.1f} s", file=sys.stderr, flush=True)
            out["rounds"].append(row)
    nag_s = [r["nag"]["seconds"] for r in out["rounds"]]
    evo_s = [r["evo"]["seconds"] for r in out["rounds"]]
    out["summary"] = {
        "nag_dataset_plus_train_seconds": nag_s, "evolution_all_budgets_seconds": evo_s,
        "nag_faster_in_every_round": all(a < b for a, b in zip(nag_s, evo_s)),
        "ratio_evolution_over_nag_per_round": [b / a for a, b in zip(nag_s, evo_s)],
        "nag_accuracy_queries": [r["nag"]["train"]["json"].get("accuracy_queries") for r in out["rounds"]],
        "evolution_queries_per_budget": [q["json"].get("accuracy_queries") for q in out["rounds"][0]["evo"]["runs"]],
    }
    out["machine"]["load_avg_end"] = os.getloadavg()
    path = Path(args.out or HERE / f"cli_time-{args.workspace}.json")
    atomic_write_json(path, out)
    print(json.dumps(out["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
