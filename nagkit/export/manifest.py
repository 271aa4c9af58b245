"""The bundle manifest (``manifest.json``, validated by ``manifest.schema.json``) and the
bundle's README: what a model is, how it was made and how to feed it."""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError
from nagkit.images.preprocessing import preprocessing_for

SCHEMA_ID = "nagkit.bundle/1"
MODEL_FILES = {"tflite": "model.tflite", "onnx": "model.onnx"}
RANDOM_INIT_NOTE = "random-init weights: the model is only good for latency checks, not for predictions"


def make_manifest(
    space,
    arch,
    *,
    export=None,
    input_shape: list[int] | None = None,
    weights_sha256: str | None = None,
    weights_source: str | None = None,
    budget_ms: float | None = None,
    device: Mapping[str, Any] | str | None = None,
    predicted: Mapping[str, Any] | None = None,
    measured: Any = None,
    accuracy: float | None = None,
    accuracy_source: str | None = None,
    accuracy_metric: str = "top1",
    labels: list[str] | None = None,
    seed: int | None = None,
    notes: list[str] | None = None,
    build: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest fields of a bundle for ``arch`` in ``space`` (files are added by write_bundle).

    ``export``: an :class:`~nagkit.export.exporter.ExportResult` (input spec, parity, versions).
    ``weights_sha256=None`` means random-init weights. ``predicted``: ``{"ms": ..., "source": ...}``.
    ``measured``: a ``LatencyStats`` (or its dict). ``device``: a spec string or a dict with "spec".
    ``build``: free-form provenance of the command that made the bundle (workspace, candidates
    tried, time per phase...).
    """
    if input_shape is None:
        input_shape = list(export.input_shape) if export is not None else [1, space.in_channels, arch.r, arch.r]
    if accuracy is not None and not math.isfinite(float(accuracy)):
        accuracy = None  # unknown (e.g. a fallback candidate without an estimate): recorded as null
    if accuracy is not None and not accuracy_source:
        raise BadInputError("an accuracy needs its source (e.g. 'supernet eval, ImageNet val 10k')")
    if measured is not None and not isinstance(measured, Mapping):  # a LatencyStats
        measured = measured.to_dict()
    labels = list(labels) if labels is not None else (list(space.labels) or None)
    m: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "space": space.name,
        "arch": {"canonical": str(arch), "ofa": space.to_ofa_dict(arch), "params": space.params(arch),
                 "macs": space.macs(arch)},
        "budget_ms": budget_ms,
        "device": ({"spec": device} if isinstance(device, str) else dict(device)) if device is not None else None,
        "latency": {"predicted": dict(predicted) if predicted is not None else None,
                    "measured": dict(measured) if measured is not None else None},
        "accuracy": ({"value": float(accuracy), "metric": accuracy_metric, "source": accuracy_source}
                     if accuracy is not None else None),
        "weights": ({"sha256": weights_sha256, "source": weights_source, "note": None} if weights_sha256
                    else {"sha256": "random-init", "source": None, "note": RANDOM_INIT_NOTE}),
        "input": {"shape": [int(v) for v in input_shape], "layout": "NCHW", "dtype": "float32",
                  "preprocessing": preprocessing_for(space, arch.r)},
        "output": {"shape": [int(input_shape[0]), space.n_classes], "kind": "logits",
                   "n_classes": space.n_classes, "labels": labels},
    }
    if export is not None:
        m["versions"] = dict(export.versions)
        m["files"] = {
            MODEL_FILES[f]: {
                "format": f, "sha256": em.sha256, "size_bytes": em.size_bytes,
                "converter": f"{em.converter} {em.converter_version}", "runtime": em.runtime,
                "parity": _parity_summary(em.worst_parity),
            } for f, em in export.models.items()
        }
    if seed is not None:
        m["seed"] = int(seed)
    if notes:
        m["notes"] = list(notes)
    if build is not None:
        m["build"] = dict(build)
    return m


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


def readme_text(manifest: Mapping[str, Any], name: str) -> str:
    shape = manifest["input"]["shape"]
    pre = manifest["input"]["preprocessing"]
    resize = (f"resize to {pre['resize']}x{pre['resize']} (no crop)" if pre["resize"] == pre["center_crop"]
              else f"resize to {pre['resize']}, center-crop {pre['center_crop']}")
    w = manifest["weights"]
    files = manifest["files"]
    lines = [
        f"# {name}: nagkit bundle",
        "",
        f"Architecture `{manifest['arch']['canonical']}` of search space `{manifest['space']}`"
        + (f", built for a latency budget of {manifest['budget_ms']} ms" if manifest.get("budget_ms") else "")
        + (f" on `{manifest['device']['spec']}`" if manifest.get("device") else "") + ".",
        "",
    ]
    if w["sha256"] == "random-init":
        lines += [f"**{w['note']}.**", ""]
    lines += [
        f"Files: {', '.join(f'`{f}`' for f in files)}; `manifest.json` has the full details (arch as OFA's "
        "dict, latency, accuracy, weights sha256, versions).",
        "",
        f"Input: one float32 tensor of shape {shape} in {manifest['input']['layout']} layout (fixed batch "
        f"{shape[0]}). Preprocessing: {resize}, "
        f"scale by {pre['scale']:.6g}, subtract mean {pre['mean']}, divide by std {pre['std']}. "
        f"Output: {manifest['output']['kind']} of shape {manifest['output']['shape']}.",
        "",
    ]
    if "model.tflite" in files:
        lines += [
            "## LiteRT", "", "```python", "import numpy as np",
            "from ai_edge_litert.interpreter import Interpreter  # pip install ai-edge-litert", "",
            'interp = Interpreter(model_path="model.tflite")', "interp.allocate_tensors()",
            "inp, out = interp.get_input_details()[0], interp.get_output_details()[0]",
            f"x = np.zeros({tuple(shape)}, dtype=np.float32)  # preprocessed image(s), NCHW",
            'interp.set_tensor(inp["index"], x)', "interp.invoke()",
            'logits = interp.get_tensor(out["index"])', "```", "",
        ]
    if "model.onnx" in files:
        lines += [
            "## ONNX Runtime", "", "```python", "import numpy as np",
            "import onnxruntime as ort  # pip install onnxruntime", "",
            'sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])',
            f"x = np.zeros({tuple(shape)}, dtype=np.float32)  # preprocessed image(s), NCHW",
            "logits = sess.run(None, {sess.get_inputs()[0].name: x})[0]", "```", "",
        ]
    lines += ["Check its latency on a device: `nagkit check . --device cpu --budget MS` "
              "(exit 1 when over budget).", ""]
    return "\n".join(lines)
