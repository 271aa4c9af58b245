"""int8 bundles (decisions 23): the representative images static quantization calibrates on,
and parity as accuracy.

Max-abs-diff does not hold across quantization, so an int8 model is judged against the fp32
subnet it was quantized from on labelled held-out images: top-1 agreement (how often the two
pick the same class), the accuracy of each and the drop in points. A drop over ``max_drop``
fails the build (:class:`Int8DropError`, exit 1) with the figures in the message; when it holds,
the figures go into the manifest (``quantization.parity``).

The images: on a workspace whose accuracy source is the Fashion-MNIST supernet, calibration uses
the first :data:`CALIBRATION_IMAGES` of the source's seeded BN-recalibration subset of the
training split, and parity the 10,000 test images; with fine-tuning data (``--data DIR``), the
folder's training images and its val split. Anything else has no images here: a clear error
before any work.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nagkit.errors import BadInputError, CheckFailedError

log = logging.getLogger(__name__)

CALIBRATION_IMAGES = 256  # PT2E's histogram observers: ~45 ms per image for a 28-40 px fmnist subnet (2-core CPU)
DEFAULT_MAX_INT8_DROP = 1.0  # points of top-1 accuracy
FP16_TABLE_NOTE = ("--quantize-after: a float16-weight model chosen on an fp32 latency table; the predicted latency and "
                   "the budget's range are fp32's: a runtime that turns float16 weights into float32 at load (CPU "
                   "LiteRT) runs it as fp32, a float16 GPU or NPU may not; measure it with --device, or build from an "
                   "fp16 table (`nagkit profile --precision fp16`)")
INT8_TABLE_NOTE = ("--quantize-after: an int8 model chosen on an fp32 latency table; the predicted latency and the "
                   "budget's range are fp32's, not this model's (int8 changes which blocks are cheap: decisions 25); "
                   "measure it with --device, or `nagkit check BUNDLE --device D --budget B`, or build from an int8 "
                   "table (`nagkit profile --precision int8`)")


class Int8DropError(CheckFailedError):
    """The int8 model lost more accuracy than allowed (exit 1); ``record`` holds the figures."""

    def __init__(self, message: str, record: dict[str, Any], *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.record = record


def for_precision(ws, folder, precision: str, quantize_after: bool, say):
    """The workspace a build exporting at ``precision`` generates with (``ws``, or its precision
    twin: :func:`nagkit.app.targets.precision_workspace`); an int8 export's images checked first."""
    from nagkit.app.targets import precision_workspace

    if precision == "int8":
        check_calibration_data(ws, folder)
    ws = precision_workspace(ws, precision, quantize_after=quantize_after, say=say)
    if quantize_after:
        log.warning("%s", quantize_after_note(precision))
    return ws


def quantize_after_note(precision: str) -> str:
    """What ``--quantize-after`` means for the bundle's latency, at ``precision``."""
    return FP16_TABLE_NOTE if precision == "fp16" else INT8_TABLE_NOTE


def check_calibration_data(ws, folder) -> None:
    """Refuse an int8 export on a workspace with no images on this machine (before any work)."""
    if folder is not None or ws.accuracy_spec.startswith("supernet:"):
        return
    raise BadInputError(
        f"--export tflite-int8 on workspace {ws.name!r} needs images to calibrate and judge the int8 model on, "
        f"and the images its space {ws.space.name!r} was trained on are not on this machine",
        hint="pass --finetune EPOCHS --data DIR (an ImageFolder of your classes: DIR/train/<class>/*.png), "
             "or export fp32 (--export tflite)")


def calibration_inputs(space, r: int, *, split=None, folder=None, n: int = CALIBRATION_IMAGES) -> tuple[np.ndarray, str]:
    """(N x C x r x r float32 preprocessed with the space's declared transform, where they came from)."""
    from nagkit.images.preprocessing import apply

    if folder is not None:
        import torch

        from nagkit.images.folder import batches

        seeded = torch.Generator().manual_seed(0)  # a seeded sample of every class, not the first folder's
        x = np.concatenate([np.asarray(b, dtype=np.float32)
                            for b, _ in batches(folder.train, space, r, 64, shuffle=seeded, limit=n)])
        return x, f"{len(x)} training images of imagefolder {folder.root.name} (seeded sample, seed 0)"
    sp = split.load()
    idx = split.calibration_indices(len(sp.train_x))[:n]
    x = apply(sp.train_x[idx][:, None], space, r).numpy().astype(np.float32)
    return x, (f"{len(x)} Fashion-MNIST training images (the first of the supernet source's seeded "
               f"BN-recalibration subset, seed {split.calib_seed})")


def _held_out(space, r: int, folder, limit: int | None = None):
    """(batches of (x, y), dataset, split) the parity is measured on (the first ``limit`` images):
    the Fashion-MNIST test set as :func:`nagkit.app.evaluate.fmnist_test_record` reads it."""
    from nagkit.app.evaluate import FMNIST_TEST_SPLIT
    from nagkit.images.preprocessing import apply

    if folder is not None:
        from nagkit.images.folder import batches

        return (list(batches(folder.val, space, r, 64, limit=limit)), f"imagefolder {folder.root.name}",
                f"val ({folder.val_source})")
    from nagkit.images.fmnist import load_split

    x, y = load_split("test")
    x, y = x[:limit], y[:limit]
    out = [(apply(x[i:i + 500][:, None], space, r).numpy(), y[i:i + 500]) for i in range(0, len(x), 500)]
    return out, "fashion-mnist", FMNIST_TEST_SPLIT


def int8_parity(int8_path, module, space, r: int, *, folder=None, max_drop: float = DEFAULT_MAX_INT8_DROP,
                calibration: str = "", limit: int | None = None) -> dict[str, Any]:
    """Top-1 agreement, accuracies and drop of the int8 file (LiteRT, 1 thread) against the fp32
    PyTorch subnet on the held-out images (all of them; ``limit``: the first so many); raises
    :class:`Int8DropError` over ``max_drop`` points."""
    import torch

    from nagkit.runtimes.models import load_model

    data, dataset, split = _held_out(space, r, folder, limit)
    m = load_model(int8_path, threads=1)
    module = module.eval()
    agree = c32 = c8 = n = 0
    with torch.no_grad():
        for x, y in data:
            x = np.asarray(x, dtype=np.float32)
            y = np.asarray(y)
            p32 = module(torch.from_numpy(x)).argmax(1).numpy()
            p8 = np.argmax(m.run(x), axis=1)
            agree += int((p32 == p8).sum())
            c32 += int((p32 == y).sum())
            c8 += int((p8 == y).sum())
            n += len(y)
    if n == 0:
        raise BadInputError(f"no held-out images to judge the int8 model on ({dataset} {split})")
    rec = {"dataset": dataset, "split": split, "images": n, "top1_agreement": agree / n, "fp32_accuracy": c32 / n,
           "int8_accuracy": c8 / n, "drop_points": 100.0 * (c32 - c8) / n, "max_drop_points": float(max_drop),
           "fp32_evaluated": "the PyTorch subnet (fp32; its fp32 export matches it to 1e-4)",
           "int8_evaluated": f"{int8_path.name} run with LiteRT, 1 thread", "calibration": calibration}
    rec["passed"] = rec["drop_points"] <= max_drop
    if not rec["passed"]:
        raise Int8DropError(
            f"the int8 model loses {rec['drop_points']:.2f} points of top-1 accuracy (> --max-int8-drop {max_drop:g}): "
            f"fp32 {100 * rec['fp32_accuracy']:.2f}%, int8 {100 * rec['int8_accuracy']:.2f}%, top-1 agreement "
            f"{100 * rec['top1_agreement']:.2f}% on {n} {dataset} {split.split(' ')[0]} images; nothing was written",
            rec, hint="export fp32 (--export tflite), or allow more with --max-int8-drop POINTS")
    return rec
