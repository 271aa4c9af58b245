"""Load and run exported models: LiteRT (``.tflite``) and ONNX Runtime (``.onnx``, CPU).

:func:`load_model` picks the runtime from the file suffix and returns a
:class:`~nagkit.runtimes.base.LoadedModel` with one ``run(x)`` for both, opened with the same
settings the CPU device times with (:data:`RUNNERS`, the worker's table; ``threads`` defaults
to the cpu device's :data:`~nagkit.runtimes.threads.DEFAULT_THREADS`). Errors: a missing or
unreadable model file is bad input (exit 2); a runtime that is not installed or fails while
running is a runtime failure (exit 3).
"""

from __future__ import annotations

import os
from pathlib import Path

from nagkit.errors import ArtifactError, BadInputError
from nagkit.runtimes.base import LoadedModel
from nagkit.runtimes.litert import LiteRTModel, LiteRTRunner
from nagkit.runtimes.ort import OnnxModel, OnnxRuntimeRunner
from nagkit.runtimes.threads import DEFAULT_THREADS
from nagkit.runtimes.torchrt import TorchRunner

__all__ = ["FORMAT_OF_SUFFIX", "LiteRTModel", "LoadedModel", "OnnxModel", "RUNNERS", "RUNTIMES", "load_model"]

RUNTIMES = {".tflite": "litert", ".onnx": "onnxruntime"}
FORMAT_OF_SUFFIX = {".tflite": "tflite", ".onnx": "onnx"}
MODELS = {".tflite": LiteRTModel, ".onnx": OnnxModel}
# runtime name -> timing runner (what the CPU worker times with)
RUNNERS = {"litert": LiteRTRunner, "onnxruntime": OnnxRuntimeRunner, "torch": TorchRunner}


def load_model(path: str | os.PathLike, threads: int = DEFAULT_THREADS) -> LoadedModel:
    """Load ``.tflite`` in LiteRT or ``.onnx`` in ONNX Runtime (CPUExecutionProvider)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in RUNTIMES:
        raise BadInputError(
            f"cannot tell the format of {str(path)!r} from its suffix {suffix!r}; "
            f"valid suffixes: {', '.join(sorted(RUNTIMES))}"
        )
    from nagkit.io import input_file

    input_file(path, "model file", hint="export one with `nagkit export ... --out DIR`")
    if path.stat().st_size == 0:
        raise ArtifactError(f"model file {str(path)!r} is empty (truncated?)",
                            hint="export it again with `nagkit export`")
    return MODELS[suffix](path, threads=threads)
