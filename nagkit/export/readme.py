"""The bundle's README.md: what the model is, its preprocessing as runnable code, how to run it
with LiteRT and ONNX Runtime, and how sure nagkit is of its latency and accuracy.

:func:`preprocess_code` writes the manifest's ``input.preprocessing`` as a Python function
(PIL + numpy, no nagkit): tests run it against nagkit's own transform.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TFLITE_METADATA_WHY = (
    "The standard TFLite Support metadata (a `TFLITE_METADATA` entry written by tflite-support's "
    "MetadataWriter) is not written: neither LiteRT 2.3 nor litert-torch 0.10 can write it, and nagkit "
    "does not depend on tflite-support. Each model carries the same facts (input shape and preprocessing, "
    "labels) as JSON under the key `nagkit.model`: in the .tflite flatbuffer's `metadata` list, and in "
    "the .onnx file's metadata_props (`sess.get_modelmeta().custom_metadata_map[\"nagkit.model\"]`); "
    "`manifest.json` carries them all.")


def preprocess_code(pre: Mapping[str, Any], shape: list[int]) -> str:
    """A ``preprocess(path)`` function implementing ``pre`` (a manifest's ``input.preprocessing``)."""
    rgb = pre["color"] == "RGB"
    interp = {"bilinear": "BILINEAR", "bicubic": "BICUBIC", "nearest": "NEAREST"}[pre["interpolation"]]
    lines = [
        "import numpy as np",
        "from PIL import Image",
        "",
        f"MEAN = np.array({pre['mean']}, dtype=np.float32)",
        f"STD = np.array({pre['std']}, dtype=np.float32)",
        "",
        "",
        "def _resize(x, size):  # float32 H x W x C, resampled channel by channel (PIL mode 'F')",
        f"    return np.stack([np.asarray(Image.fromarray(x[..., c]).resize(size, Image.{interp}), dtype=np.float32)",
        "                     for c in range(x.shape[-1])], axis=-1)",
        "",
        "",
        "def preprocess(path):",
        f'    """One image file -> the model\'s input, float32 of shape {tuple(shape)}."""',
        f'    img = Image.open(path).convert("{"RGB" if rgb else "L"}")',
        "    x = np.asarray(img, dtype=np.float32).reshape(img.height, img.width, -1) / 255  # scale to [0, 1]",
    ]
    if pre["resize_rule"] == "whole":
        lines.append(f"    x = _resize(x, ({pre['resize']}, {pre['resize']}))  # the whole image, no crop")
    else:
        crop = pre["center_crop"]
        lines += [
            f"    s = {pre['resize']}  # the shorter side, keeping the aspect ratio",
            "    h, w = x.shape[:2]",
            "    size = (s, int(s * h / w)) if w <= h else (int(s * w / h), s)",
            "    x = _resize(x, size)",
            f"    top, left = int(round((x.shape[0] - {crop}) / 2.0)), int(round((x.shape[1] - {crop}) / 2.0))",
            f"    x = x[top:top + {crop}, left:left + {crop}]  # center crop",
        ]
    lines += [
        "    x = (x - MEAN) / STD",
        f"    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)  # {pre['layout']}",
    ]
    return "\n".join(lines)


def _status_lines(manifest: Mapping[str, Any]) -> list[str]:
    lat, acc, w = manifest["latency"], manifest["accuracy"], manifest["weights"]
    out = []
    if lat["status"] == "unverified":
        pred = lat["predicted"]
        out.append("- **Latency: unverified.** No device measured this model"
                   + (f"; {pred['ms']:.3f} ms is the latency table's prediction" if pred else "")
                   + ". Measure it: `nagkit check . --device D --budget MS`.")
    else:
        m = lat["measured"]
        out.append(f"- Latency: median {m['median_ms']:.3f} ms measured on `{m.get('device', '?')}` (n = {m['n']}).")
    if acc:
        size = f"{acc['images']:,} images" if acc.get("images") else "no images of its own"
        out.append(f"- Accuracy: {100 * acc['value']:.2f}% {acc['metric']} on {acc['dataset']}, split {acc['split']}, "
                   f"{size}; evaluated: {acc['evaluated']}.")
        out += [f"  - also {100 * a['value']:.2f}% on {a['dataset']}, split {a['split']}: {a['evaluated']}"
                for a in acc.get("others", [])]
    else:
        out.append("- Accuracy: not measured.")
    if w["sha256"] == "random-init":
        out.append(f"- **{w['note']}.**")
    elif w.get("fine_tuned"):
        ft = w["fine_tuned"]
        out.append(f"- Weights: fine-tuned for {ft['epochs']} epoch(s) on {ft['data'].get('dir', 'the workspace data')} "
                   f"from `{w['source']}` (sha256 {w['sha256'][:16]}...).")
    else:
        out.append(f"- Weights: from `{w['source']}` (sha256 {w['sha256'][:16]}...).")
    return out


def readme_text(manifest: Mapping[str, Any], name: str) -> str:
    inp, out, files = manifest["input"], manifest["output"], manifest["files"]
    shape, pre = inp["shape"], inp["preprocessing"]
    labels = out.get("labels") or []
    lines = [
        f"# {name}: nagkit bundle",
        "",
        f"Architecture `{manifest['arch']['canonical']}` of search space `{manifest['space']}`"
        + (f", built for a latency budget of {manifest['budget_ms']} ms" if manifest.get("budget_ms") else "")
        + (f" on `{manifest['device']['spec']}`" if manifest.get("device") else "") + ".",
        "",
        *_status_lines(manifest),
        "",
        f"Files: {', '.join(f'`{f}`' for f in files)}; `manifest.json` has the full details (arch as OFA's dict, "
        "latency with its table and device, accuracy with its split, weights sha256, versions).",
        "",
        f"Input `{inp.get('name', 'image')}`: {inp['dtype']}, shape {shape}, {inp['layout']} (fixed batch {shape[0]}). "
        f"Output `{out.get('name', 'logits')}`: {out['kind']} of shape {out['shape']}"
        + (f"; `logits[:, i]` is class i of {labels[:10]}{' ...' if len(labels) > 10 else ''}" if labels else "")
        + ".",
        "",
        "## Preprocessing",
        "",
        f"Convert to {pre['color']}, resize ({pre['resize_rule']}: "
        + (f"the whole image to {pre['resize']}x{pre['resize']}, no crop" if pre["resize_rule"] == "whole"
           else f"the shorter side to {pre['resize']}, then center-crop {pre['center_crop']}x{pre['center_crop']}")
        + f"; {pre['interpolation']}, antialias {str(pre['antialias']).lower()}) on floats scaled to [0, 1], "
        f"subtract mean {pre['mean']}, divide by std {pre['std']}, lay out {pre['layout']}:",
        "",
        "```python",
        preprocess_code(pre, shape),
        "```",
        "",
    ]
    if not pre["antialias"]:
        lines += ["(`antialias false` changes nothing when an image is enlarged; PIL always smooths when it "
                  "shrinks an image, while the model was trained without that, as "
                  "`torch.nn.functional.interpolate(x, size, mode=\"bilinear\", align_corners=False)` does.)", ""]
    lines += _int8_section(manifest.get("quantization"))
    lines += _run_sections(files, inp.get("name", "image"), out.get("name", "logits"))
    lines += ["## Metadata inside the models", "",
              "Tensors are named `image` and `logits` in both files. " + _TFLITE_METADATA_WHY, "",
              "Check this bundle (hashes, shapes, latency on a device): `nagkit check . --device cpu --budget MS` "
              "(exit 1 when over budget); `nagkit check .` alone verifies the files.", ""]
    return "\n".join(lines)


def _run_sections(files: Mapping[str, Any], iname: str, oname: str) -> list[str]:
    lines: list[str] = []
    if "model.tflite" in files:
        lines += [
            "## LiteRT", "", "```python",
            "from ai_edge_litert.interpreter import Interpreter  # pip install ai-edge-litert", "",
            'interp = Interpreter(model_path="model.tflite")',
            "run = interp.get_signature_runner()  # serving_default",
            f'logits = run({iname}=preprocess("photo.png"))["{oname}"]', "```", "",
        ]
    if "model.onnx" in files:
        lines += [
            "## ONNX Runtime", "", "```python",
            "import onnxruntime as ort  # pip install onnxruntime", "",
            'sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])',
            f'logits = sess.run(["{oname}"], {{"{iname}": preprocess("photo.png")}})[0]', "```", "",
        ]
    return lines


def _int8_section(q: Mapping[str, Any] | None) -> list[str]:
    """An int8 model's input and output (quantized or float) and its accuracy against fp32."""
    if not q:
        return []
    if q.get("precision") == "fp16":
        return _fp16_section(q)
    i, o, p = q["input"], q["output"], q.get("parity")
    lines = ["## int8", ""]
    if i is None or o is None:  # onnx-int8: QDQ, float input and output
        lines += [f"A statically quantized model. Weights: {q['scheme']['weights']}. Activations: "
                  f"{q['scheme']['activations']}. Its input and output stay float32 (quantized inside the graph): "
                  "feed it what `preprocess` returns.", ""]
    else:
        lines += _int8_io(q, i, o)
    if p:
        lines += [f"Against the fp32 model on {p['images']:,} {p['dataset']} images ({p['split']}): top-1 agreement "
                  f"{100 * p['top1_agreement']:.2f}%, accuracy {100 * p['int8_accuracy']:.2f}% vs "
                  f"{100 * p['fp32_accuracy']:.2f}% fp32 (drop {p['drop_points']:.2f} points, allowed "
                  f"{p['max_drop_points']:g}).", ""]
    return lines


def _fp16_section(q: Mapping[str, Any]) -> list[str]:
    """A float16-weight model: float in and out, and how far the rounding moved its outputs."""
    lines = ["## fp16", "", f"Float16 weights. Weights: {q['scheme']['weights']}. Activations: "
             f"{q['scheme']['activations']}. Its input and output are float32: feed it what `preprocess` returns.", ""]
    p = q.get("parity") or {}
    if p.get("fp32") and p.get("max_abs_diff") is not None:
        f = p["fp32"]
        lines += [f"Against the fp32 model on a seeded input: max|diff| {f['max_abs_diff']:.3g} on logits up to "
                  f"{f['max_abs_ref']:.3g}; against {p['reference']}: {p['max_abs_diff']:.3g} (tolerance "
                  f"{p['tolerance']:.3g}).", ""]
    return lines


def _int8_io(q: Mapping[str, Any], i: Mapping[str, Any], o: Mapping[str, Any]) -> list[str]:
    """A full-integer model's int8 input and output, as code."""
    return [f"A full-integer model. Weights: {q['scheme']['weights']}. Activations: "
            f"{q['scheme']['activations']}. Its input and output are {i['dtype']}: quantize what "
            "`preprocess` returns, and dequantize the logits (argmax needs no dequantizing):", "", "```python",
            f"x = np.clip(np.round(preprocess(\"photo.png\") / {i['scale']!r}) + ({i['zero_point']}), -128, 127)"
            f".astype(np.{i['dtype']})",
            f"# logits = (y.astype(np.float32) - ({o['zero_point']})) * {o['scale']!r}", "```", ""]
