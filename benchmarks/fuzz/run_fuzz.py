#!/usr/bin/env python3
"""The long fuzz run of issue 13: 100,000 hypothesis-generated hostile inputs per parser.

    nice .venv/bin/python benchmarks/fuzz/run_fuzz.py                 # all parsers, 100,000 each
    .venv/bin/python benchmarks/fuzz/run_fuzz.py --parser arch --n 5000

Parsers (strategies and checks in ``tests/fuzzing.py``, the same ones the property tests use):

* ``arch``: ``SearchSpace.parse_arch`` / ``Arch.parse`` on canonical strings (valid ones edited),
  text, OFA dicts and their JSON, deep nesting;
* ``latency_table``: ``LatencyTable.from_bytes`` (what ``load`` runs) on shipped-format tables with
  random edits (mostly re-sealed so the deep checks run), byte damage and junk, then predictions,
  the latency range and the summary of every table it accepts;
* ``benchmark_model``: ``parse_benchmark_runs``/``parse_benchmark_output`` and
  ``to_latency_stats`` on the real samples in ``shared/data/benchmark_model`` with line edits,
  hostile numbers, token soup, long hostile lines and ``count=`` lines with any subset of fields;
* ``device_profile``: ``load_profile`` on the shipped device profiles, edited, plus alias bombs,
  deep nesting, huge integers and junk;
* ``workspace_toml``: ``load_workspace`` on the shipped workspaces' ``nagkit.toml``, edited (seeds
  and counts out of range, names and paths the OS refuses or cannot read), plus deep nesting,
  huge integers and junk; an accepted workspace also reads the latency table it names;
* ``config``: the last two together (issue 13's fourth parser).

A failure is any exception other than nagkit's own error types, or a broken check (an accepted
arch that does not round-trip, a table whose prediction is not finite, statistics a table would
refuse). Each input is timed in CPU time and wall time, with the garbage collector paused (the
heap of hypothesis's bookkeeping would otherwise put multi-second full collections on random
inputs) and after one untimed warm-up input (imports); the 20 costliest in CPU time are run
again (best of 3 in wall time) so that the reported slowest time is the parser's, not a pause of
the shared machine. Writes ``results.json`` beside this script with machine info, after every
parser (``complete`` says whether all of them ran).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib import metadata

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except OSError:
        commit = None
    return {"os": platform.system(), "kernel": platform.release(), "machine": platform.machine(), "cpu_model": cpu,
            "logical_cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "load_avg_at_start": list(os.getloadavg()), "nice": os.nice(0), "python": platform.python_version(),
            "hypothesis": metadata.version("hypothesis"), "nagkit_commit": commit}


def main() -> int:
    from tests.fuzzing import PARSERS, run_campaign

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parser", action="append", choices=sorted(PARSERS), help="Repeatable (default: all).")
    ap.add_argument("--n", type=int, default=100_000, help="Inputs per parser.")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    args = ap.parse_args()

    from nagkit.io import atomic_write_json

    info = machine()
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    names = args.parser or list(PARSERS)
    results: dict = {}
    out: dict = {}
    for name in names:
        camp = run_campaign(name, args.n, seed=args.seed)
        d = asdict(camp)
        d["non_nagkit_exceptions"] = d.pop("failure_count")
        d["examples_of_failures"] = d.pop("failures")
        d["inputs_per_s"] = round(camp.inputs / camp.elapsed_s, 1) if camp.elapsed_s else None
        for k in ("slowest_s", "slowest_cpu_s", "slowest_wall_s", "elapsed_s"):
            d[k] = round(d[k], 6)
        results[name] = d
        print(f"{name}: {camp.inputs:,} inputs ({camp.accepted:,} accepted, {camp.refused:,} refused with a nagkit "
              f"error), {camp.failure_count} other exceptions, slowest {camp.slowest_s * 1e3:.1f} ms "
              f"(CPU {camp.slowest_cpu_s * 1e3:.1f} ms; wall during the run {camp.slowest_wall_s * 1e3:.1f} ms), "
              f"{camp.elapsed_s:.0f} s", flush=True)
        out = _report(args, info, started, results, complete=len(results) == len(names))
        atomic_write_json(args.out, out)  # after every parser: a long run's results survive its interruption
    print(f"wrote {args.out}: {'PASS' if out['passed'] else 'FAIL'}")
    return 0 if out["passed"] else 1


def _report(args, info: dict, started: str, results: dict, complete: bool) -> dict:
    return {
        "benchmark": "fuzz (issue 13; issue 35: device profiles and workspace TOML as parsers of their own)",
        "created": started,
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "complete": complete,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": info,
        "note": "shared 2-core VM with other jobs running, run under nice: 'slowest_wall_s' and 'over_1s_wall' "
                "include pauses of the machine; 'slowest_cpu_s' is CPU time (garbage collector paused while an input "
                "runs); 'slowest_s' (the 20 costliest inputs in CPU time, re-run) and 'over_1s_confirmed' are "
                "re-timed wall times, best of 3",
        "inputs_per_parser": args.n,
        "seed": args.seed,
        "acceptance": {"non_nagkit_exceptions": 0, "max_seconds_per_input": 1.0},
        "parsers": results,
        "passed": all(r["non_nagkit_exceptions"] == 0 and r["over_1s_confirmed"] == 0 and r["inputs"] >= args.n
                      for r in results.values()),
    }


if __name__ == "__main__":
    sys.exit(main())
