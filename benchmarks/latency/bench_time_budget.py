"""Issue 36's first acceptance point: the default profile command keeps to its time budget.

    .venv/bin/python benchmarks/latency/bench_time_budget.py [--runs 3] [--budget 10m] [--extra ARGS]

Each run is the command a new user types, through the CLI, with a COLD cache (a fresh, empty
NAGKIT_CACHE: no converted blocks, no remembered rates) and a fresh output:

    nagkit profile --device cpu-litert-1t --space ofa-mbv3-w1.0 --resolutions 224 --calibrate --json

(with ``--time-budget`` when ``--budget`` is given; without it the default applies). It records
the wall time of the whole process against the budget (the acceptance: <= budget x 1.1), the
profile's own record (``time_budget`` in the table's provenance: phases planned, done and skipped,
held-out fidelity, noise verdicts), the machine and its load before and after. Results are
appended run by run to results/time_budget-<cpu>.jsonl, so an interrupted series keeps what it
measured. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "nag"))

from bench_nag import machine  # noqa: E402

COMMAND = ["profile", "--device", "cpu-litert-1t", "--space", "ofa-mbv3-w1.0", "--resolutions", "224", "--calibrate",
           "--json"]


def parse_seconds(text: str | None) -> float:
    from nagkit.latency.budget_text import parse_time_budget

    return 600.0 if text is None else float(parse_time_budget(text))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", default=None, help="passed as --time-budget (default: the command's default)")
    ap.add_argument("--extra", default="", help="more arguments for nagkit profile")
    args = ap.parse_args()
    budget_s = parse_seconds(args.budget)
    info = machine()
    slug = "-".join(info.get("cpu_id", {}).get(k, "x") for k in ("cpu family", "model"))
    out = ROOT / "benchmarks" / "latency" / "results" / f"time_budget-fam{slug}.jsonl"
    cmd = list(COMMAND) + (["--time-budget", args.budget] if args.budget else []) + shlex.split(args.extra)
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, NAGKIT_CACHE=str(Path(tmp) / "cache"), PYTHONPATH=str(ROOT))
            table = Path(tmp) / "table.json"
            load0 = os.getloadavg()
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "nagkit", *cmd, "--out", str(table)], capture_output=True,
                               text=True, env=env, cwd=tmp)
            wall = time.perf_counter() - t0
            rec: dict = {"run": i, "command": "nagkit " + shlex.join(cmd), "budget_s": budget_s, "wall_s": wall,
                         "ratio": wall / budget_s, "within_1_1": wall <= 1.1 * budget_s, "exit": p.returncode,
                         "load_before": load0, "load_after": os.getloadavg(), "machine": info,
                         "stderr_tail": p.stderr[-1500:]}
            if p.returncode == 0 and table.is_file():
                prov = json.loads(table.read_text()).get("provenance", {})
                rec["time_budget"] = prov.get("time_budget")
                rec["calibration"] = {k: prov.get(k) for k in ("calibration", "calibrated") if k in prov}
        with open(out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(json.dumps({k: rec[k] for k in ("run", "wall_s", "ratio", "within_1_1", "exit")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
