"""Activation memory of an exported TFLite model, measured from the file (docs/decisions.md 39).

Two figures, both read with LiteRT from the file itself:

- ``liveness_bytes``: the largest sum of activation-tensor bytes alive at once when the file's
  operators run one at a time in their stored order (a tensor lives from the operator that
  writes it, or the start for the graph's input, to the last operator that reads it, or the end
  for the graph's output). Constants are weights, not activations, and so is what an operator
  computes from constants alone (an fp16 file's weights dequantized to float32).
- ``arena_bytes``: the extent of the memory LiteRT's own planner allocates for those tensors
  (built-in kernels, no delegate: a delegate keeps its tensors to itself), from the tensors'
  addresses after ``allocate_tensors``: what the interpreter holds for activations (and, in an
  fp16 file run by the built-in kernels, the float32 copies of its weights too).

nagkit's estimate (:func:`nagkit.space.counts.count_peak`) models the liveness; the arena adds
the planner's alignment and any gaps it leaves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

_ITEMSIZE = {"FLOAT32": 4, "FLOAT16": 2, "INT32": 4, "UINT8": 1, "INT64": 8, "BOOL": 1, "INT16": 2, "INT8": 1,
             "FLOAT64": 8, "UINT64": 8, "UINT32": 4, "UINT16": 2, "BFLOAT16": 2}


def tflite_liveness(path: str | os.PathLike) -> tuple[int, list[int], int]:
    """(live-tensor peak in bytes, the activation tensors' indices, the number of operators) of
    the .tflite at ``path``,
    from its flatbuffer: the main subgraph's operators in their stored order (the order LiteRT
    runs them)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    model = fu.read_model_from_bytearray(bytearray(Path(path).read_bytes()))
    sg = model.subgraphs[0]
    names = {v: k for k, v in vars(fb.TensorType).items() if not k.startswith("_")}
    start: dict[int, int] = {int(i): -1 for i in sg.inputs}
    end: dict[int, int] = {}
    for k, op in enumerate(sg.operators):
        reads = [int(i) for i in op.inputs if int(i) in start]
        for i in reads:
            end[i] = k
        if not reads:  # e.g. float16 weights dequantized to float32: weights, not activations
            continue
        for i in op.outputs:
            start.setdefault(int(i), k)
            end[int(i)] = k
    for i in sg.outputs:
        end[int(i)] = len(sg.operators)
    size = {i: int(np.prod(sg.tensors[i].shape)) * _ITEMSIZE[names[sg.tensors[i].type]] for i in start}
    live = max(sum(size[i] for i in start if start[i] <= k <= end.get(i, start[i]))
               for k in range(len(sg.operators)))
    return int(live), sorted(start), len(sg.operators)


def tflite_activation_memory(path: str | os.PathLike) -> dict[str, Any]:
    """``{"liveness_bytes", "arena_bytes", "operators", "tensors"}`` of the .tflite at ``path``."""
    from nagkit.runtimes.litert import interpreter_class

    live, tensors, n_ops = tflite_liveness(path)
    cls, _ = interpreter_class()
    resolver = sys.modules[cls.__module__].OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = cls(model_path=os.fspath(path), experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    lo, hi = None, 0
    for i in tensors:
        arr = it.tensor(i)()
        addr = arr.__array_interface__["data"][0]
        lo = addr if lo is None else min(lo, addr)
        hi = max(hi, addr + arr.nbytes)
    return {"liveness_bytes": live, "arena_bytes": int(hi - (lo or 0)), "operators": n_ops, "tensors": len(tensors)}
