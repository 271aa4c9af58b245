"""The accuracy of an exported model file, run in its runtime (LiteRT or ONNX Runtime), on
images preprocessed with its space's declared transform: what a bundle's manifest reports as
"the bundled file" (``evaluated``), on the Fashion-MNIST test set or a fine-tuning val split."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

RUNTIME_NAME = {"tflite": "LiteRT", "onnx": "ONNX Runtime"}
FMNIST_TEST_SPLIT = "test (never used for training or search)"


def exported_accuracy(model_path: Path, batches: Iterable, threads: int = 1) -> tuple[float, int, float]:
    """(top-1, images, seconds) of a model file on (x, y) batches (numpy or torch)."""
    from nagkit.runtimes.models import load_model

    m = load_model(model_path, threads=threads)
    t0 = time.perf_counter()
    correct = n = 0
    for x, y in batches:
        out = m.run(np.asarray(x, dtype=np.float32))
        y = np.asarray(y)
        correct += int((np.argmax(out, axis=1) == y).sum())
        n += len(y)
    return correct / max(n, 1), n, time.perf_counter() - t0


def _what(model_path: Path) -> str:
    fmt = Path(model_path).suffix.lstrip(".")
    return f"{Path(model_path).name} (the bundled file) run with {RUNTIME_NAME.get(fmt, fmt)}, 1 thread"


def fmnist_test_record(model_path: Path, space, r: int, limit: int | None = None) -> dict:
    """The accuracy record of a model file on the Fashion-MNIST test set (10,000 images)."""
    from nagkit.images.fmnist import load_split
    from nagkit.images.preprocessing import apply

    x, y = load_split("test")
    if limit:
        x, y = x[:limit], y[:limit]

    def batches():
        for i in range(0, len(x), 500):
            yield apply(x[i:i + 500][:, None], space, r).numpy(), y[i:i + 500]

    acc, n, _ = exported_accuracy(model_path, batches())
    return fmnist_test_record_of(acc, n, model_path)


def fmnist_test_record_of(value: float, images: int, model_path: Path) -> dict:
    """The record :func:`fmnist_test_record` writes for a top-1 ``value`` over ``images`` test
    images, from an evaluation that already ran the file this way (an int8 build's parity)."""
    from nagkit.export.manifest import accuracy_record

    return accuracy_record(value, dataset="fashion-mnist", split=FMNIST_TEST_SPLIT, images=images,
                           evaluated=_what(model_path), source="nagkit: the exported model on Debian's Fashion-MNIST")


def folder_val_record(model_path: Path, space, r: int, data) -> dict:
    """The accuracy record of a model file on a fine-tuning ImageFolder's val split."""
    from nagkit.export.manifest import accuracy_record
    from nagkit.images.folder import batches

    acc, n, _ = exported_accuracy(model_path, batches(data.val, space, r, 64))
    return accuracy_record(acc, dataset=f"imagefolder {data.root.name}", split=f"val ({data.val_source})", images=n,
                           evaluated=_what(model_path), source="nagkit: the exported model after fine-tuning")
