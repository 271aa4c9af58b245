"""The bundle manifest (``manifest.json``, validated by ``manifest.schema.json``): what a model
is, how it was made, how to feed it, how fast and accurate it is, and how sure nagkit is of it.

Provenance a deployer can check without nagkit beside it:

- ``input.preprocessing``: the space's declared input transform at the model's resolution
  (:meth:`~nagkit.space.space.SearchSpace.preprocessing`), shown as code in the README;
- ``latency``: the prediction with the table it came from (its spec, sha256, and the device and
  runtime it was measured on), the measurement with its device, and ``status``: ``measured``,
  or ``unverified`` when no device measured the model;
- ``accuracy``: the value with its dataset, split, number of images and what was evaluated
  (the bundled file in its runtime, the PyTorch subnet, or a predictor); ``others`` holds
  further evaluations (e.g. before/after fine-tuning);
- ``weights``: the checkpoint's sha256 and source, and how the subnet was fine-tuned, if it was.

The model files describe themselves too (:func:`model_metadata`, written into them at export).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError
from nagkit.images.preprocessing import preprocessing_for

SCHEMA_ID = "nagkit.bundle/2"
MODEL_SCHEMA_ID = "nagkit.model/1"
MODEL_FILES = {"tflite": "model.tflite", "onnx": "model.onnx"}
RANDOM_INIT_NOTE = "random-init weights: the model is only good for latency checks, not for predictions"
UNVERIFIED_NOTE = ("unverified: no device measured this model; the latency is the table's prediction "
                   "(check it with `nagkit check BUNDLE --device D --budget MS`)")
METADATA_WHERE = {"tflite": "the flatbuffer's Metadata entry 'nagkit.model' (JSON) and the signature "
                            "serving_default (image -> logits)",
                  "onnx": "metadata_props['nagkit.model'] (JSON)"}


def accuracy_record(value: float, *, dataset: str | None, split: str, images: int | None, evaluated: str,
                    source: str, metric: str = "top1") -> dict[str, Any]:
    """One accuracy with what it was measured on: ``dataset``, ``split`` and its number of
    ``images`` (None for a prediction without its own images), and what was ``evaluated``."""
    if not (isinstance(value, (int, float)) and math.isfinite(float(value)) and 0 <= float(value) <= 1):
        raise BadInputError(f"an accuracy must be a fraction in [0, 1], got {value!r}")
    return {"value": float(value), "metric": metric, "dataset": dataset, "split": split,
            "images": int(images) if images is not None else None, "evaluated": evaluated, "source": source}


def model_metadata(space, arch, input_shape: Sequence[int], *, labels: Sequence[str] | None = None,
                   names: tuple[str, str] = ("image", "logits"), dtype: str = "float32") -> dict[str, Any]:
    """What an exported model file carries about itself: its input (name, shape, layout,
    ``dtype``: ``int8`` for a full-integer model, whose input takes the preprocessed image
    quantized with the tensor's scale and zero point, and preprocessing) and output (name, shape,
    labels)."""
    labels = list(labels) if labels is not None else (list(space.labels) or None)
    n_classes = len(labels) if labels else space.n_classes
    return {
        "schema": MODEL_SCHEMA_ID, "space": space.name, "arch": str(arch),
        "input": {"name": names[0], "shape": [int(v) for v in input_shape], "layout": "NCHW", "dtype": dtype,
                  "preprocessing": preprocessing_for(space, arch.r)},
        "output": {"name": names[1], "shape": [int(input_shape[0]), int(n_classes)], "kind": "logits",
                   "labels": labels},
    }


def _latency(predicted, measured, device) -> dict[str, Any]:
    if measured is not None and not isinstance(measured, Mapping):  # a LatencyStats
        measured = measured.to_dict()
    out: dict[str, Any] = {"predicted": dict(predicted) if predicted is not None else None,
                           "measured": dict(measured) if measured is not None else None,
                           "status": "measured" if measured is not None else "unverified"}
    if measured is not None and device is not None:
        out["measured"]["device"] = device["spec"]
    if measured is None:
        out["note"] = UNVERIFIED_NOTE
    return out


def _weights(sha: str | None, source: str | None, fine_tuned: Mapping[str, Any] | None) -> dict[str, Any]:
    if not sha:
        return {"sha256": "random-init", "source": None, "note": RANDOM_INIT_NOTE, "fine_tuned": None}
    return {"sha256": sha, "source": source, "note": None, "fine_tuned": dict(fine_tuned) if fine_tuned else None}


def make_manifest(
    space,
    arch,
    *,
    export=None,
    input_shape: list[int] | None = None,
    weights_sha256: str | None = None,
    weights_source: str | None = None,
    fine_tuned: Mapping[str, Any] | None = None,
    budget_ms: float | None = None,
    device: Mapping[str, Any] | str | None = None,
    predicted: Mapping[str, Any] | None = None,
    measured: Any = None,
    accuracy: Mapping[str, Any] | None = None,
    accuracy_others: Sequence[Mapping[str, Any]] = (),
    labels: list[str] | None = None,
    seed: int | None = None,
    notes: list[str] | None = None,
    build: Mapping[str, Any] | None = None,
    int8: Mapping[str, Any] | None = None,
    constraints: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest fields of a bundle for ``arch`` in ``space`` (files are added by write_bundle).

    ``export``: an :class:`~nagkit.export.exporter.ExportResult` (input spec, names, parity,
    versions). ``weights_sha256=None`` means random-init weights; ``fine_tuned``: how they were
    fine-tuned. ``predicted``: ``{"ms": ..., "table": {"spec", "sha256", "device", "runtime"}}``.
    ``measured``: a ``LatencyStats`` (or its dict). ``device``: a spec string or a dict with
    "spec". ``accuracy`` (and ``accuracy_others``): :func:`accuracy_record` dicts. ``labels``:
    the output's class names (default: the space's). ``build``: free-form provenance of the
    command that made the bundle. ``constraints``: the limits, what the network reaches and which
    limit binds (:func:`nagkit.nag.constraints.report`; decisions 39).
    """
    if input_shape is None:
        input_shape = list(export.input_shape) if export is not None else [1, space.in_channels, arch.r, arch.r]
    names = tuple(export.names) if export is not None else ("image", "logits")
    device = ({"spec": device} if isinstance(device, str) else dict(device)) if device is not None else None
    dtype = next((em.quantization["input"]["dtype"] for em in (export.models.values() if export is not None else ())
                  if em.quantization and em.quantization["input"]), "float32")  # tflite-int8: int8; onnx-int8: float
    meta = model_metadata(space, arch, input_shape, labels=labels, names=names, dtype=dtype)
    others = [dict(a) for a in accuracy_others]
    m: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "space": space.name,
        "arch": {"canonical": str(arch), "ofa": space.to_ofa_dict(arch), "params": space.params(arch),
                 "macs": space.macs(arch)},
        "budget_ms": budget_ms,
        "device": device,
        "latency": _latency(predicted, measured, device),
        "accuracy": dict(accuracy, others=others) if accuracy is not None else None,
        "weights": _weights(weights_sha256, weights_source, fine_tuned),
        "input": meta["input"],
        "output": dict(meta["output"], n_classes=meta["output"]["shape"][1]),
    }
    if accuracy is None and others:
        m["accuracy"] = dict(others[0], others=others[1:])
    if export is not None:
        m["versions"] = dict(export.versions)
        m["files"] = {
            MODEL_FILES[f]: {
                "format": f, "sha256": em.sha256, "size_bytes": em.size_bytes,
                "converter": f"{em.converter} {em.converter_version}", "runtime": em.runtime,
                "parity": _parity_summary(em.worst_parity),
                "metadata": METADATA_WHERE[f] if export.metadata is not None else None,
                "precision": em.precision,
            } for f, em in export.models.items()
        }
    if export is not None and export.precision == "fp16":
        m["quantization"] = _float16(export)
    elif export is not None and export.precision != "fp32":
        m["quantization"] = _quantization(export, int8)
    if seed is not None:
        m["seed"] = int(seed)
    notes = list(notes or []) + ([UNVERIFIED_NOTE] if measured is None else [])
    if notes:
        m["notes"] = notes
    m.update({k: dict(v) for k, v in (("build", build), ("constraints", constraints)) if v is not None})
    return m


INT8_SCHEME = {
    "tflite": {
        "weights": "int8, symmetric, per output channel (conv, depthwise conv, fully connected)",
        "activations": "int8, affine, per tensor; ranges from histogram observers on the calibration images",
        "bias": "int32 (the converter's, from the weight and input scales)",
        "float": "ops the PT2E quantizer does not annotate run in float between DEQUANTIZE/QUANTIZE (decisions 23)",
        "tool": "litert-torch PT2E quantizer (static post-training quantization)",
    },
    "onnx": {
        "weights": "int8, symmetric, per output channel",
        "activations": "int8, affine, per tensor; MinMax ranges on the calibration images",
        "bias": "int32",
        "float": "the input and output tensors (QuantizeLinear/DequantizeLinear in the graph, QDQ format) and "
                 "ops onnxruntime does not quantize",
        "tool": "onnxruntime.quantization.quantize_static (QDQ, static post-training quantization)",
    },
}


FP16_SCHEME = {
    "weights": "float16 (conv, depthwise conv, fully connected; BatchNorm folded first), behind DEQUANTIZE ops "
               "that give float32 at load",
    "activations": "float32",
    "bias": "float32",
    "float": "everything but those weights: the input and output tensors are float32",
    "tool": "litert-torch with its float16 recipe (ai-edge-quantizer float casting, weight-only)",
}


def _float16(export) -> dict[str, Any]:
    """An fp16 bundle's ``quantization``: the scheme, and parity: the file against PyTorch with
    its weights rounded to float16 (``files.*.parity``, the fp32 tolerance), and the rounding's
    own effect, the file against the fp32 module (information, not a check)."""
    (em,) = [m for m in export.models.values()][:1]
    w = em.worst_parity
    return {"precision": "fp16", "scheme": dict(FP16_SCHEME),
            "parity": {"reference": "PyTorch, BatchNorm folded, conv and linear weights rounded to float16",
                       "max_abs_diff": w.max_abs_diff if w else None, "tolerance": w.tolerance if w else None,
                       "fp32": dict(em.fp16_vs_fp32) if em.fp16_vs_fp32 else None}}


def _quantization(export, int8: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a quantized bundle is: precision, scheme, calibration, the input/output tensors'
    scale and zero point (a full-integer model takes int8: q = round(x / scale) + zero_point on
    the preprocessed image), and parity as accuracy (``int8``: :mod:`nagkit.app.int8`'s record)."""
    (em,) = [m for m in export.models.values()][:1]
    return {"precision": export.precision, "scheme": dict(INT8_SCHEME[em.format]),
            "calibration_images": export.calibration_images,
            "input": em.quantization["input"] if em.quantization else None,
            "output": em.quantization["output"] if em.quantization else None,
            "parity": dict(int8) if int8 is not None else None}


def _parity_summary(p) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"max_abs_diff": p.max_abs_diff, "tolerance": p.tolerance, "passed": p.passed, "seed": p.seed}


_SCALAR_LIST = re.compile(r"\[\s*((?:[-+0-9.eE]+|\"[^\"\n]*\"|null|true|false)(?:,\s*(?:[-+0-9.eE]+|\"[^\"\n]*\"|null|true|false))*)\s*\]")


def dumps_manifest(manifest: Mapping[str, Any]) -> str:
    """Indented JSON with lists of scalars (shapes, OFA arrays, mean/std) kept on one line."""
    text = json.dumps(manifest, indent=1)
    return _SCALAR_LIST.sub(lambda m: json.dumps(json.loads(m.group(0))), text) + "\n"


def json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot put a {type(o).__name__} in a manifest")
