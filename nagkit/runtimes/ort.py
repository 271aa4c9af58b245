"""ONNX Runtime (``.onnx``, CPUExecutionProvider): the one place a session is opened.

:func:`session_options` is the only definition of nagkit's ONNX Runtime settings;
:func:`open_session` applies it for :class:`OnnxModel` (parity, verification) and
:class:`OnnxRuntimeRunner` (timing in the CPU worker) alike.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, DeviceError
from nagkit.runtimes.base import InputError, LoadedModel, LoadError, check_shape, expect_single, random_input

PROVIDERS = ("CPUExecutionProvider",)
DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
          "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
          "tensor(uint8)": "uint8", "tensor(bool)": "bool"}


def _ort():
    try:
        import onnxruntime
    except ImportError as e:  # pragma: no cover - depends on the install
        raise DeviceError("ONNX Runtime is not installed", hint="pip install onnxruntime") from e
    return onnxruntime


def session_options(threads: int):
    """``SessionOptions``: ``threads`` intra-op threads, one inter-op thread, sequential
    execution, all graph optimisations, warnings and errors only."""
    ort = _ort()
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return so


def describe_options(so) -> dict[str, Any]:
    """The settings of a ``SessionOptions`` that change how a model runs, as plain values."""
    return {"intra_op_num_threads": so.intra_op_num_threads, "inter_op_num_threads": so.inter_op_num_threads,
            "execution_mode": str(so.execution_mode), "graph_optimization_level": str(so.graph_optimization_level),
            "log_severity_level": so.log_severity_level}


def open_session(path: str | os.PathLike, threads: int):
    return _ort().InferenceSession(str(path), sess_options=session_options(threads), providers=list(PROVIDERS))


class OnnxModel(LoadedModel):
    runtime = "onnxruntime"
    format = "onnx"

    def _load(self) -> None:
        _ort()  # not installed: a DeviceError, not a bad model
        try:
            self._sess = open_session(self.path, self.threads)
        except Exception as e:
            raise ArtifactError(
                f"ONNX Runtime cannot load {str(self.path)!r}: {e}",
                hint="is it an ONNX model? re-export it with `nagkit export --format onnx`",
            ) from e
        ins, outs = self._sess.get_inputs(), self._sess.get_outputs()
        expect_single(self.path, "input", ins)
        expect_single(self.path, "output", outs)
        self._in_name = ins[0].name
        self.input_shape = tuple(v if isinstance(v, int) else None for v in ins[0].shape)
        self.output_shape = tuple(v if isinstance(v, int) else None for v in outs[0].shape)
        self.input_dtype = np.dtype(DTYPES.get(ins[0].type, "float32"))

    def _run_once(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._sess.run(None, {self._in_name: x})[0]
        except Exception as e:
            raise DeviceError(f"ONNX Runtime failed running {str(self.path)!r}: {e}") from e


class OnnxRuntimeRunner:
    """Times ``.onnx`` files: :meth:`prepare` opens one and returns a zero-argument run."""

    name, package, delegate = "onnxruntime", "onnxruntime", None

    def __init__(self, threads: int):
        _ort()
        self.threads = threads

    def prepare(self, path: str, input_shape, rng):
        try:
            sess = open_session(path, self.threads)
        except Exception as e:
            raise LoadError(f"{type(e).__name__}: {e}") from e
        feeds, shapes = {}, []
        for i, inp in enumerate(sess.get_inputs()):
            if inp.type not in DTYPES:
                raise InputError(f"unsupported ONNX input type {inp.type} of {inp.name!r}")
            shape = check_shape(inp.shape, input_shape if i == 0 else None, inp.name)
            feeds[inp.name] = random_input(rng, shape, DTYPES[inp.type])
            shapes.append(shape)
        run = sess.run

        def once():
            run(None, feeds)

        return once, shapes
