"""What every runtime adapter shares: random inputs and shape checks for timing, and the
:class:`LoadedModel` base.

A *model* (``LoadedModel``) runs given inputs and returns outputs (parity checks, bundle
verification, test accuracy). A *runner* times a model file on random inputs (the CPU worker).
Both open the runtime through the same function of their runtime's module, so what is checked
for parity is what is timed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError
from nagkit.runtimes.threads import DEFAULT_THREADS

# -- timing runners -----------------------------------------------------------------------------
class LoadError(Exception):
    """A runner could not load the model (reported with ``stage = "load"``)."""

    stage = "load"


class InputError(Exception):
    """A runner could not make the model's inputs (reported with ``stage = "input"``)."""

    stage = "input"


def random_input(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """Seeded random data of ``shape`` and ``dtype`` (standard normal for floats)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -128), min(info.max, 127), size=shape, endpoint=True).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 1, size=shape, endpoint=True).astype(dt)
    raise InputError(f"unsupported input dtype {dt}")


def check_shape(model_shape: Sequence[Any], given: Sequence[int] | None, name: str) -> list[int]:
    """The shape to feed: the given one (checked against the model's fixed dims) or the model's."""
    if given is None:
        if any(not isinstance(d, int) or d < 0 for d in model_shape):
            raise InputError(f"input {name!r} has dynamic shape {list(model_shape)}; pass input_shape")
        return [int(d) for d in model_shape]
    given = [int(d) for d in given]
    fixed = [d if isinstance(d, int) and d >= 0 else None for d in model_shape]
    if len(fixed) != len(given) or any(f is not None and f != g for f, g in zip(fixed, given)):
        raise InputError(f"input_shape {given} does not match input {name!r} of shape {list(model_shape)}")
    return given


# -- models ---------------------------------------------------------------------------------------
class LoadedModel:
    """A model loaded in a runtime. Subclasses implement ``_load`` and ``_run_once``.

    Exported models have a fixed input shape (batch 1 by default); ``run`` takes any batch that
    is a multiple of the model's batch and loops over chunks. Inputs are NCHW float32."""

    runtime = ""
    format = ""

    def __init__(self, path: str | os.PathLike, threads: int | None = None):
        self.path = Path(path)
        self.threads = int(threads) if threads else DEFAULT_THREADS
        self.input_shape: tuple[int | None, ...] = ()
        self.output_shape: tuple[int | None, ...] = ()
        self.input_dtype = np.dtype(np.float32)
        # {"input"/"output": {"dtype", "scale", "zero_point"} of a full-integer model's tensor, or None}
        self.quantization: dict[str, dict[str, Any] | None] = {"input": None, "output": None}
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
                f"which takes {fmt_shape(want)} ({'NCHW' if len(want) == 4 else 'fixed'} layout)",
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
        from nagkit.runtimes.versions import runtime_version

        return {
            "path": str(self.path),
            "format": self.format,
            "runtime": self.runtime,
            "runtime_version": runtime_version(self.runtime),
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
            "input_dtype": str(self.input_dtype),
        }


def expect_single(path: Path, what: str, details: Sequence[Any]) -> None:
    if len(details) != 1:
        raise ArtifactError(
            f"model {str(path)!r} has {len(details)} {what}s; nagkit runs models with exactly one {what}"
        )


def fmt_shape(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("N" if v is None else str(v) for v in shape) + ")"
