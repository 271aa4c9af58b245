"""The CPU measurement worker: a persistent process that times many models in a row.

Started by :class:`nagkit.devices.cpu.CpuDevice` as ``python -m nagkit.devices.worker
--runtime R --threads N [--cores 0,1]``. Before any runtime is imported it pins itself to
the cores (``os.sched_setaffinity``) and sets the thread variables, so the runtime's thread
pools start with the right size and placement.

Protocol: one JSON object per line, requests on stdin, replies on a private copy of the
original stdout (fd 1 is pointed at stderr, so whatever a runtime prints can never corrupt a
reply). No pickle crosses the pipe. Requests::

    {"op": "hello"}                                        -> {"ok": true, "runtime": {...}}
    {"op": "measure", "model": PATH, "input_shape": [..] | null, "cfg": {...}, "seed": 0}
        -> {"ok": true, "samples_ms": [...], "warmup_runs": .., "warmup_s": .., "elapsed_s": ..,
            "stop_reason": "converged"|"max_runs"|"max_time", "rel_iqr": .., "input_shapes": [..]}
        or {"ok": false, "stage": "load"|"input"|"run", "error": "..."}
    {"op": "quit"}

Models are files: ``.tflite`` for LiteRT, ``.onnx`` for ONNX Runtime and TorchScript files
(written by the parent from a module it was handed) for torch. The runners are
:data:`nagkit.runtimes.models.RUNNERS`, which open each runtime exactly as parity checks do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

from nagkit.runtimes.threads import thread_env  # nothing heavy: runtimes load after the set-up below

RUNTIMES = ("litert", "onnxruntime", "torch")  # the keys of nagkit.runtimes.models.RUNNERS


def _serve(runner, args, out) -> None:
    import numpy as np

    from nagkit.devices.base import MeasureConfig
    from nagkit.devices.measure import run_loop, wall_timed
    from nagkit.runtimes.base import InputError, LoadError
    from nagkit.runtimes.versions import package_version

    def reply(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except json.JSONDecodeError as e:
            reply({"ok": False, "stage": "protocol", "error": f"bad request: {e}"})
            continue
        op = req.get("op")
        if op == "quit":
            reply({"ok": True})
            return
        if op == "hello":
            info = {"name": runner.name, "version": package_version(runner.package), "threads": args.threads,
                    "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                    "delegate": runner.delegate, "pid": os.getpid()}
            if runner.name == "torch":  # what torch itself reports, not just what was asked
                info["runtime_threads"] = runner.runtime_threads()
            reply({"ok": True, "runtime": info})
            continue
        if op != "measure":
            reply({"ok": False, "stage": "protocol", "error": f"unknown op {op!r}"})
            continue
        stage = "load"
        try:
            rng = np.random.default_rng(int(req.get("seed", 0)))
            once, shapes = runner.prepare(req["model"], req.get("input_shape"), rng)
            stage = "run"
            cfg = MeasureConfig(**req.get("cfg", {}))
            res = run_loop(wall_timed(once, time.perf_counter), cfg, clock=time.perf_counter)
            reply({"ok": True, "samples_ms": list(res.samples_ms), "warmup_runs": res.warmup_runs,
                   "warmup_s": res.warmup_s, "elapsed_s": res.elapsed_s, "stop_reason": res.stop_reason,
                   "rel_iqr": res.rel_iqr if res.rel_iqr != float("inf") else None, "input_shapes": shapes})
        except (LoadError, InputError) as e:
            reply({"ok": False, "stage": e.stage, "error": str(e)})
        except Exception as e:  # a runtime error while invoking
            sys.stderr.write(traceback.format_exc())
            reply({"ok": False, "stage": stage, "error": f"{type(e).__name__}: {e}"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nagkit.devices.worker")
    ap.add_argument("--runtime", choices=RUNTIMES, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cores", default="", help="comma-separated core ids to pin to")
    args = ap.parse_args(argv)

    # Replies go to a private copy of stdout; fd 1 now points at stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    # Placement and thread counts first, runtime import after.
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    os.environ.update(thread_env(args.threads))
    try:
        from nagkit.runtimes.models import RUNNERS  # the runtime libraries load here, after the set-up

        runner = RUNNERS[args.runtime](args.threads)
    except Exception as e:
        out.write(json.dumps({"ok": False, "stage": "start", "error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        return 3
    _serve(runner, args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
