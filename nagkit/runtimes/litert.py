"""LiteRT (``.tflite``, XNNPACK on the CPU): the one place an interpreter is opened.

:func:`open_interpreter` is used by :class:`LiteRTModel` (parity, verification, accuracy) and
by :class:`LiteRTRunner` (timing in the CPU worker), so both run a model with the same
settings. LiteRT comes from ``ai_edge_litert``; ``tflite_runtime`` is used only when it is the
one installed.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, DeviceError
from nagkit.runtimes.base import InputError, LoadedModel, LoadError, check_shape, expect_single, random_input
from nagkit.runtimes.quiet import native_stderr_captured


def interpreter_class() -> tuple[type, str]:
    """The LiteRT ``Interpreter`` class and the distribution it came from."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter, "ai-edge-litert"
    except ImportError:
        pass
    try:
        from tflite_runtime.interpreter import Interpreter  # type: ignore[import-not-found]

        return Interpreter, "tflite-runtime"
    except ImportError:
        pass
    raise DeviceError(
        "no LiteRT interpreter is installed (neither ai_edge_litert nor tflite_runtime)",
        hint="pip install ai-edge-litert (make setup installs it), or use an .onnx model",
    )


def interpreter_settings(threads: int) -> dict[str, Any]:
    """The keyword arguments every LiteRT interpreter gets besides the model path."""
    return {"num_threads": int(threads)}


def open_interpreter(path: str | os.PathLike, threads: int):
    """An interpreter for ``path`` (tensors not yet allocated: a caller may resize inputs first).
    LiteRT's native INFO lines ("Created TensorFlow Lite XNNPACK delegate") stay off the console
    unless ``-v`` (:mod:`nagkit.runtimes.quiet`)."""
    with native_stderr_captured():
        cls, _ = interpreter_class()
        return cls(model_path=str(path), **interpreter_settings(threads))


def quantization_of(detail: dict[str, Any]) -> dict[str, Any] | None:
    """``{"dtype", "scale", "zero_point"}`` of an integer input/output tensor (a full-integer
    model's), or None for a float one."""
    dt = np.dtype(detail["dtype"])
    if dt.kind not in "iu":
        return None
    scale, zero = detail.get("quantization", (0.0, 0))
    if not scale:
        raise ArtifactError(f"tensor {detail.get('name')!r} is {dt} without a quantization scale; "
                            "nagkit runs float models and full-integer models with quantized input and output")
    return {"dtype": str(dt), "scale": float(scale), "zero_point": int(zero)}


def quantize(x: np.ndarray, q: dict[str, Any]) -> np.ndarray:
    """float -> the tensor's integers: round(x / scale) + zero_point, clipped to the dtype."""
    info = np.iinfo(q["dtype"])
    v = np.round(np.asarray(x, dtype=np.float32) / q["scale"]) + q["zero_point"]
    return np.clip(v, info.min, info.max).astype(q["dtype"])


def dequantize(y: np.ndarray, q: dict[str, Any]) -> np.ndarray:
    """The tensor's integers -> float32: (y - zero_point) * scale."""
    return ((y.astype(np.float32) - q["zero_point"]) * q["scale"]).astype(np.float32)


class LiteRTModel(LoadedModel):
    runtime = "litert"
    format = "tflite"

    def _load(self) -> None:
        try:
            self._interp = open_interpreter(self.path, self.threads)
            with native_stderr_captured():
                self._interp.allocate_tensors()
        except DeviceError:
            raise
        except Exception as e:
            raise ArtifactError(
                f"LiteRT cannot load {str(self.path)!r}: {e}",
                hint="is it a .tflite flatbuffer? re-export it with `nagkit export --format tflite`",
            ) from e
        ins, outs = self._interp.get_input_details(), self._interp.get_output_details()
        expect_single(self.path, "input", ins)
        expect_single(self.path, "output", outs)
        self._in, self._out = ins[0], outs[0]
        self.input_shape = tuple(int(v) for v in self._in["shape"])
        self.output_shape = tuple(int(v) for v in self._out["shape"])
        self.input_dtype = np.dtype(self._in["dtype"])
        self.quantization = {k: quantization_of(d) for k, d in (("input", self._in), ("output", self._out))}
        if self.quantization["input"] is not None:  # a full-integer model takes float32 here, quantized in _run_once
            self.input_dtype = np.dtype(np.float32)

    def _run_once(self, x: np.ndarray) -> np.ndarray:
        qin, qout = self.quantization["input"], self.quantization["output"]
        if qin is not None:
            x = quantize(x, qin)
        try:
            self._interp.set_tensor(self._in["index"], x)
            self._interp.invoke()
            y = np.array(self._interp.get_tensor(self._out["index"]), copy=True)
        except Exception as e:
            raise DeviceError(f"LiteRT failed running {str(self.path)!r}: {e}") from e
        return dequantize(y, qout) if qout is not None else y


class LiteRTRunner:
    """Times ``.tflite`` files: :meth:`prepare` loads one and returns a zero-argument invoke."""

    delegate = "xnnpack"

    def __init__(self, threads: int):
        _, dist = interpreter_class()
        self.name, self.package = ("litert", dist) if dist == "ai-edge-litert" else ("tflite_runtime", dist)
        self.threads = threads

    def prepare(self, path: str, input_shape, rng):
        try:
            it = open_interpreter(path, self.threads)
            inputs = it.get_input_details()
            if input_shape is not None and len(inputs) == 1 and list(inputs[0]["shape"]) != list(input_shape):
                shape = check_shape(list(inputs[0].get("shape_signature", inputs[0]["shape"])), input_shape,
                                    inputs[0]["name"])
                it.resize_tensor_input(inputs[0]["index"], shape)
            it.allocate_tensors()
        except InputError:
            raise
        except Exception as e:
            raise LoadError(f"{type(e).__name__}: {e}") from e
        shapes = []
        for d in it.get_input_details():
            shape = [int(x) for x in d["shape"]]
            it.set_tensor(d["index"], random_input(rng, shape, d["dtype"]))
            shapes.append(shape)
        return it.invoke, shapes
