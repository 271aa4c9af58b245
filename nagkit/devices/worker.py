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
(written by the parent from a module it was handed) for torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
               "TF_NUM_INTEROP_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


class _LoadError(Exception):
    stage = "load"


class _InputError(Exception):
    stage = "input"


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that fix the size of every thread pool a runtime might open."""
    env = {k: str(threads) for k in THREAD_VARS}
    env["TF_NUM_INTEROP_THREADS"] = "1"
    return env


def _rand(rng, shape, dtype):
    import numpy as np

    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -128), min(info.max, 127), size=shape, endpoint=True).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 1, size=shape, endpoint=True).astype(dt)
    raise _InputError(f"unsupported input dtype {dt}")


def _check_shape(model_shape, given, name) -> list[int]:
    """The shape to feed: the given one (checked against the model's fixed dims) or the model's."""
    if given is None:
        if any(not isinstance(d, int) or d < 0 for d in model_shape):
            raise _InputError(f"input {name!r} has dynamic shape {list(model_shape)}; pass input_shape")
        return [int(d) for d in model_shape]
    given = [int(d) for d in given]
    fixed = [d if isinstance(d, int) and d >= 0 else None for d in model_shape]
    if len(fixed) != len(given) or any(f is not None and f != g for f, g in zip(fixed, given)):
        raise _InputError(f"input_shape {given} does not match input {name!r} of shape {list(model_shape)}")
    return given


class LiteRTRunner:
    def __init__(self, threads: int):
        try:
            from ai_edge_litert.interpreter import Interpreter

            self.name, self.package = "litert", "ai-edge-litert"
        except ImportError:
            from tflite_runtime.interpreter import Interpreter  # the older package, if that is the one installed

            self.name, self.package = "tflite_runtime", "tflite-runtime"
        self._Interpreter = Interpreter
        self.threads = threads
        self.delegate = "xnnpack"

    def prepare(self, path: str, input_shape, rng):
        try:
            it = self._Interpreter(model_path=path, num_threads=self.threads)
            inputs = it.get_input_details()
            if input_shape is not None and len(inputs) == 1 and list(inputs[0]["shape"]) != list(input_shape):
                shape = _check_shape(list(inputs[0].get("shape_signature", inputs[0]["shape"])), input_shape, inputs[0]["name"])
                it.resize_tensor_input(inputs[0]["index"], shape)
            it.allocate_tensors()
        except _InputError:
            raise
        except Exception as e:
            raise _LoadError(f"{type(e).__name__}: {e}") from e
        shapes = []
        for d in it.get_input_details():
            shape = [int(x) for x in d["shape"]]
            it.set_tensor(d["index"], _rand(rng, shape, d["dtype"]))
            shapes.append(shape)
        return it.invoke, shapes


class OnnxRuntimeRunner:
    name, package, delegate = "onnxruntime", "onnxruntime", None

    def __init__(self, threads: int):
        import onnxruntime as ort

        self._ort = ort
        self.threads = threads

    def prepare(self, path: str, input_shape, rng):
        ort = self._ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        try:
            sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise _LoadError(f"{type(e).__name__}: {e}") from e
        feeds, shapes = {}, []
        dtypes = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
                  "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
                  "tensor(uint8)": "uint8", "tensor(bool)": "bool"}
        inputs = sess.get_inputs()
        for i, inp in enumerate(inputs):
            if inp.type not in dtypes:
                raise _InputError(f"unsupported ONNX input type {inp.type} of {inp.name!r}")
            shape = _check_shape(inp.shape, input_shape if i == 0 else None, inp.name)
            feeds[inp.name] = _rand(rng, shape, dtypes[inp.type])
            shapes.append(shape)
        run = sess.run

        def once():
            run(None, feeds)

        return once, shapes


class TorchRunner:
    name, package, delegate = "torch", "torch", None

    def __init__(self, threads: int):
        import torch

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set (cannot happen in a fresh worker, but harmless)
            pass
        self._torch = torch
        self.threads = threads

    def prepare(self, path: str, input_shape, rng):
        torch = self._torch
        if input_shape is None:
            raise _InputError("torch models need input_shape")
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                model = torch.jit.load(path, map_location="cpu")
            model.eval()
        except Exception as e:
            raise _LoadError(f"{type(e).__name__}: {e}") from e
        x = torch.from_numpy(_rand(rng, [int(d) for d in input_shape], "float32"))

        def once():
            with torch.inference_mode():
                model(x)

        return once, [list(x.shape)]


RUNNERS = {"litert": LiteRTRunner, "onnxruntime": OnnxRuntimeRunner, "torch": TorchRunner}


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _serve(runner, args, out) -> None:
    import numpy as np

    from nagkit.devices.base import MeasureConfig
    from nagkit.devices.measure import run_loop, wall_timed

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
            info = {"name": runner.name, "version": _version(runner.package), "threads": args.threads,
                    "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                    "delegate": runner.delegate, "pid": os.getpid()}
            if runner.name == "torch":  # what torch itself reports, not just what was asked
                info["runtime_threads"] = runner._torch.get_num_threads()
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
        except (_LoadError, _InputError) as e:
            reply({"ok": False, "stage": e.stage, "error": str(e)})
        except Exception as e:  # a runtime error while invoking
            sys.stderr.write(traceback.format_exc())
            reply({"ok": False, "stage": stage, "error": f"{type(e).__name__}: {e}"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nagkit.devices.worker")
    ap.add_argument("--runtime", choices=sorted(RUNNERS), required=True)
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
        runner = RUNNERS[args.runtime](args.threads)
    except Exception as e:
        out.write(json.dumps({"ok": False, "stage": "start", "error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        return 3
    _serve(runner, args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
