"""Load and run exported models: LiteRT (``.tflite``) and ONNX Runtime (``.onnx``, CPU).

:func:`load_model` picks the runtime from the file suffix and returns a :class:`LoadedModel`
with one ``run(x)`` for both. Exported models have a fixed input shape (batch 1 by default);
``run`` takes any batch that is a multiple of the model's batch and loops over chunks, so a
batch-1 model can still score N inputs. Inputs are NCHW float32, as in PyTorch.

LiteRT comes from ``ai_edge_litert``; ``tflite_runtime`` is used only when it is the one
installed. Errors: a missing or unreadable model file is bad input (exit 2); a runtime that is
not installed or fails while running is a runtime failure (exit 3).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError, DeviceError

log = logging.getLogger(__name__)

RUNTIMES = {".tflite": "litert", ".onnx": "onnxruntime"}
FORMAT_OF_SUFFIX = {".tflite": "tflite", ".onnx": "onnx"}


class LoadedModel:
    """A model loaded in a runtime. Subclasses implement ``_load`` and ``_run_once``."""

    runtime = ""
    format = ""

    def __init__(self, path: str | os.PathLike, threads: int | None = None):
        self.path = Path(path)
        self.threads = threads
        self.input_shape: tuple[int | None, ...] = ()
        self.output_shape: tuple[int | None, ...] = ()
        self.input_dtype = np.dtype(np.float32)
        self._load()

    def _load(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _run_once(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def batch(self) -> int | None:
        """The model's fixed batch size, or None when the batch dimension is dynamic."""
        b = self.input_shape[0] if self.input_shape else None
        return b if isinstance(b, int) and b > 0 else None

    def run(self, x: np.ndarray) -> np.ndarray:
        """Run a batch of inputs; a batch larger than the model's is run chunk by chunk."""
        x = np.ascontiguousarray(np.asarray(x), dtype=self.input_dtype)
        want = self.input_shape
        if x.ndim != len(want) or any(w is not None and w != g for w, g in zip(want[1:], x.shape[1:])):
            raise BadInputError(
                f"input of shape {tuple(x.shape)} does not fit {self.format} model {str(self.path)!r}, "
                f"which takes {_fmt_shape(want)} ({'NCHW' if len(want) == 4 else 'fixed'} layout)",
                hint="export the model again with the input shape you need (nagkit export --batch N)",
            )
        b = self.batch
        n = x.shape[0]
        if b is None or n == b:
            return self._run_once(x)
        if n % b:
            raise BadInputError(
                f"batch of {n} inputs is not a multiple of the {self.format} model's fixed batch {b} "
                f"({str(self.path)!r})",
                hint=f"pass a multiple of {b} inputs, or export with --batch {n}",
            )
        return np.concatenate([self._run_once(x[i : i + b]) for i in range(0, n, b)], axis=0)

    __call__ = run

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "format": self.format,
            "runtime": self.runtime,
            "runtime_version": runtime_version(self.runtime),
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
            "input_dtype": str(self.input_dtype),
        }


class LiteRTModel(LoadedModel):
    runtime = "litert"
    format = "tflite"

    def _load(self) -> None:
        interpreter_cls, _ = litert_interpreter()
        kw: dict[str, Any] = {"model_path": str(self.path)}
        if self.threads:
            kw["num_threads"] = int(self.threads)
        try:
            self._interp = interpreter_cls(**kw)
            self._interp.allocate_tensors()
        except Exception as e:
            raise ArtifactError(
                f"LiteRT cannot load {str(self.path)!r}: {e}",
                hint="is it a .tflite flatbuffer? re-export it with `nagkit export --format tflite`",
            ) from e
        ins, outs = self._interp.get_input_details(), self._interp.get_output_details()
        _expect_single(self.path, "input", ins)
        _expect_single(self.path, "output", outs)
        self._in, self._out = ins[0], outs[0]
        self.input_shape = tuple(int(v) for v in self._in["shape"])
        self.output_shape = tuple(int(v) for v in self._out["shape"])
        self.input_dtype = np.dtype(self._in["dtype"])

    def _run_once(self, x: np.ndarray) -> np.ndarray:
        try:
            self._interp.set_tensor(self._in["index"], x)
            self._interp.invoke()
            return np.array(self._interp.get_tensor(self._out["index"]), copy=True)
        except Exception as e:
            raise DeviceError(f"LiteRT failed running {str(self.path)!r}: {e}") from e


class OnnxModel(LoadedModel):
    runtime = "onnxruntime"
    format = "onnx"

    def _load(self) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:  # pragma: no cover - depends on the install
            raise DeviceError("ONNX Runtime is not installed", hint="pip install onnxruntime") from e
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if self.threads:
            opts.intra_op_num_threads = int(self.threads)
            opts.inter_op_num_threads = 1
        try:
            self._sess = ort.InferenceSession(str(self.path), sess_options=opts,
                                              providers=["CPUExecutionProvider"])
        except Exception as e:
            raise ArtifactError(
                f"ONNX Runtime cannot load {str(self.path)!r}: {e}",
                hint="is it an ONNX model? re-export it with `nagkit export --format onnx`",
            ) from e
        ins, outs = self._sess.get_inputs(), self._sess.get_outputs()
        _expect_single(self.path, "input", ins)
        _expect_single(self.path, "output", outs)
        self._in_name = ins[0].name
        self.input_shape = tuple(v if isinstance(v, int) else None for v in ins[0].shape)
        self.output_shape = tuple(v if isinstance(v, int) else None for v in outs[0].shape)
        self.input_dtype = np.dtype(_ORT_DTYPES.get(ins[0].type, np.float32))

    def _run_once(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._sess.run(None, {self._in_name: x})[0]
        except Exception as e:
            raise DeviceError(f"ONNX Runtime failed running {str(self.path)!r}: {e}") from e


_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
               "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int32)": np.int32,
               "tensor(int64)": np.int64}


def _expect_single(path: Path, what: str, details: Sequence[Any]) -> None:
    if len(details) != 1:
        raise ArtifactError(
            f"model {str(path)!r} has {len(details)} {what}s; nagkit runs models with exactly one {what}"
        )


def _fmt_shape(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("N" if v is None else str(v) for v in shape) + ")"


def load_model(path: str | os.PathLike, threads: int | None = None) -> LoadedModel:
    """Load ``.tflite`` in LiteRT or ``.onnx`` in ONNX Runtime (CPUExecutionProvider)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in RUNTIMES:
        raise BadInputError(
            f"cannot tell the format of {str(path)!r} from its suffix {suffix!r}; "
            f"valid suffixes: {', '.join(sorted(RUNTIMES))}"
        )
    if not path.is_file():
        raise BadInputError(f"model file {str(path)!r} does not exist",
                            hint="export one with `nagkit export ... --out DIR`")
    if path.stat().st_size == 0:
        raise ArtifactError(f"model file {str(path)!r} is empty (truncated?)",
                            hint="export it again with `nagkit export`")
    cls = LiteRTModel if suffix == ".tflite" else OnnxModel
    return cls(path, threads=threads)


def litert_interpreter() -> tuple[type, str]:
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


def runtime_version(runtime: str) -> str | None:
    """Installed version of ``litert`` or ``onnxruntime`` (None if not installed)."""
    from importlib import metadata

    dists = {"litert": ("ai-edge-litert", "tflite-runtime"), "onnxruntime": ("onnxruntime",)}[runtime]
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def runtime_versions() -> dict[str, str | None]:
    return {"litert": runtime_version("litert"), "onnxruntime": runtime_version("onnxruntime")}
