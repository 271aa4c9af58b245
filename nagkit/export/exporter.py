"""Export a PyTorch module to ONNX and/or TFLite, then check each file's parity with PyTorch.

:func:`export_model` converts into a hidden staging folder inside ``out_dir``, runs every
exported file in its runtime (ONNX Runtime, LiteRT) against the module, and only then moves
the files into place as ``<stem>.onnx`` / ``<stem>.tflite``. A failed conversion or parity check
leaves nothing behind. The input layout is NCHW float32, exactly as the PyTorch module takes it;
the batch is fixed at export time (``input_shape[0]``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.io import sha256_file
from nagkit.errors import BadInputError, UnknownNameError
from nagkit.export.parity import (DEFAULT_RTOL, ParityError, ParityResult, check_parity, float16_reference,
                                  seeded_inputs)
from nagkit.runtimes.convert import (FORMAT_PRECISIONS, IO_NAMES, PRECISIONS, to_onnx, to_onnx_int8,  # noqa: F401
                                     to_tflite, to_tflite_fp16, to_tflite_int8)
from nagkit.runtimes.models import load_model
from nagkit.runtimes.versions import converter_versions, runtime_versions

log = logging.getLogger(__name__)

FORMATS = ("onnx", "tflite")
INT8_FORMATS = ("onnx", "tflite")  # one of them per int8 bundle (tflite-int8 has int8 I/O, onnx-int8 float I/O)
SUFFIX = {"onnx": ".onnx", "tflite": ".tflite"}
CONVERTER = {"onnx": "torch.onnx", "tflite": "litert-torch"}
INPUT_LAYOUT = "NCHW"


@dataclass
class ExportedModel:
    format: str
    path: str
    size_bytes: int
    sha256: str
    converter: str
    converter_version: str | None
    runtime: str
    runtime_version: str | None
    output_shape: list[int]
    parity: list[ParityResult] = field(default_factory=list)
    precision: str = "fp32"
    quantization: dict[str, Any] | None = None  # int8: the input/output tensors' dtype, scale, zero point
    fp16_vs_fp32: dict[str, Any] | None = None  # fp16: the file against the fp32 module (the rounding's effect)

    @property
    def worst_parity(self) -> ParityResult | None:
        """The check closest to (or furthest over) its tolerance."""
        return max(self.parity, key=lambda r: r.max_abs_diff / r.tolerance) if self.parity else None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["parity"] = [p.to_dict() for p in self.parity]
        w = self.worst_parity
        d["parity_max_abs_diff"] = w.max_abs_diff if w else None
        d["parity_tolerance"] = w.tolerance if w else None
        return d


@dataclass
class ExportResult:
    models: dict[str, ExportedModel]
    input_shape: list[int]
    input_layout: str = INPUT_LAYOUT
    input_dtype: str = "float32"
    names: tuple[str, str] = IO_NAMES
    metadata: dict[str, Any] | None = None  # what the model files carry (nagkit.runtimes.metadata)
    versions: dict[str, str | None] = field(default_factory=dict)
    durations_s: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    precision: str = "fp32"
    calibration_images: int = 0  # int8: how many representative inputs set the activation ranges

    @property
    def paths(self) -> dict[str, Path]:
        return {f: Path(m.path) for f, m in self.models.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": {f: m.to_dict() for f, m in self.models.items()},
            "input": {"shape": self.input_shape, "layout": self.input_layout, "dtype": self.input_dtype,
                      "name": self.names[0]},
            "output_name": self.names[1],
            "versions": self.versions,
            "durations_s": self.durations_s,
            "seed": self.seed,
            "precision": self.precision,
            "calibration_images": self.calibration_images,
        }


def normalize_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """``'both'``, ``'onnx,tflite'`` or an iterable -> a sorted tuple of valid formats."""
    if isinstance(formats, str):
        items = [f.strip().lower() for f in formats.split(",") if f.strip()]
    else:
        items = [str(f).strip().lower() for f in formats]
    out: set[str] = set()
    for f in items:
        if f in ("both", "all"):
            out.update(FORMATS)
        elif f in FORMATS:
            out.add(f)
        else:
            raise UnknownNameError("export format", f, (*FORMATS, "both"))
    if not out:
        raise BadInputError(f"no export format given; valid formats: {', '.join((*FORMATS, 'both'))}")
    return tuple(sorted(out))


def export_values() -> tuple[str, ...]:
    """Every ``--export`` item: the formats, ``both``, and ``<format>-<precision>`` for each
    precision a format is converted at (:data:`~nagkit.runtimes.convert.FORMAT_PRECISIONS`)."""
    return (*FORMATS, "both", *(f"{f}-{p}" for p in PRECISIONS[1:] for f in FORMATS if p in FORMAT_PRECISIONS[f]))


def parse_export(text: str | Iterable[str]) -> tuple[tuple[str, ...], str]:
    """``--export``: ``tflite``, ``onnx``, ``both``, ``tflite-int8``, ``onnx-int8``,
    ``tflite-fp16``, comma-separated -> (formats, precision). One bundle holds one precision."""
    items = [t.strip().lower() for t in (text.split(",") if isinstance(text, str) else text) if str(t).strip()]
    valid = export_values()
    fmts, precisions = [], set()
    for item in items:
        fmt, _, prec = item.partition("-")
        if item not in valid:
            if fmt in FORMATS and prec in PRECISIONS:  # a known precision this format is not converted at
                from nagkit.runtimes.convert import check_precision_name

                check_precision_name(prec, fmt)
            raise UnknownNameError("export format", item, valid)
        fmts.append(fmt)
        precisions.add(prec or "fp32")
    if len(precisions) > 1:
        raise BadInputError(f"--export {','.join(items)} mixes precisions ({', '.join(sorted(precisions))}); "
                            "a bundle holds one", hint="build one bundle per precision")
    formats, precision = normalize_formats(fmts), (precisions.pop() if precisions else "fp32")
    if precision != "fp32":
        check_precision(precision, formats, None, calibrated=False)  # one int8 model per bundle: refused up front
    return formats, precision


def check_precision(precision: str, fmts: Sequence[str], calibration: np.ndarray | None, *,
                    calibrated: bool = True) -> None:
    """``precision`` is known, an int8 bundle has one model and (``calibrated``) representative
    data, an fp16 bundle is one TFLite model."""
    if precision not in PRECISIONS:
        raise UnknownNameError("precision", precision, PRECISIONS)
    if precision == "fp16" and tuple(fmts) != ("tflite",):
        raise BadInputError(f"float16 weights are a TFLite form here (decisions 27); an fp16 bundle holds "
                            f"model.tflite only, not {', '.join(fmts)}",
                            hint="--export tflite-fp16, or export onnx at fp32 (--export onnx)")
    if precision == "int8":
        if len(fmts) > 1:
            raise BadInputError("an int8 bundle holds one model: tflite-int8 (int8 input and output) or onnx-int8 "
                                "(float input and output)", hint="build one bundle per format")
        if calibrated and (calibration is None or len(calibration) == 0):
            raise BadInputError("int8 export needs representative images to set the activation ranges; none given")


file_sha256 = sha256_file


def all_versions() -> dict[str, str | None]:
    """nagkit, Python, the converters and the runtimes."""
    from nagkit.version import __version__

    v: dict[str, str | None] = {"nagkit": __version__, "python": platform.python_version()}
    v.update(converter_versions())
    v.update(runtime_versions())
    return v


def _export_one(module, example, f: str, tmp_path: Path, target: Path, *, versions: dict[str, str | None],
                durations: dict[str, float], parity: bool, parity_inputs: np.ndarray | None, seed: int, rtol: float,
                threads: int | None, names: tuple[str, str], metadata: dict[str, Any] | None,
                calibration: np.ndarray | None = None, precision: str = "fp32") -> ExportedModel:
    """Convert ``module`` to format ``f`` at ``tmp_path`` (tensors ``names``, ``metadata`` inside)
    and check its parity (seeded inputs, plus ``parity_inputs``); the result names ``target``,
    where the file will be moved. fp16: parity against the float16 reference of ``module``, and
    the file's difference from ``module`` itself recorded apart."""
    t0 = time.perf_counter()
    log.info("converting to %s%s with %s (input %s %s)", f, "" if precision == "fp32" else f"-{precision}",
             CONVERTER[f], tuple(example.shape), INPUT_LAYOUT)
    if calibration is not None:  # int8: parity is accuracy, judged by the caller on labelled images
        (to_onnx_int8 if f == "onnx" else to_tflite_int8)(module, example, calibration, tmp_path, names=names,
                                                          metadata=metadata)
        parity = False
    elif precision == "fp16":
        to_tflite_fp16(module, example, tmp_path, names=names, metadata=metadata)
    else:
        (to_onnx if f == "onnx" else to_tflite)(module, example, tmp_path, names=names, metadata=metadata)
    durations[f"convert_{f}"] = round(time.perf_counter() - t0, 4)
    t0 = time.perf_counter()
    loaded = load_model(tmp_path, threads=threads)
    results = []
    fp16_vs_fp32 = None
    against = float16_reference(module) if precision == "fp16" and parity else module
    try:
        if parity:
            results.append(check_parity(against, loaded, seed=seed, rtol=rtol))
            if parity_inputs is not None:
                results.append(check_parity(against, loaded, inputs=parity_inputs, rtol=rtol))
        if precision == "fp16":  # what the float16 rounding itself changes: information, not a check
            rounding = check_parity(module, loaded, seed=seed, rtol=rtol, raise_on_fail=False)
            fp16_vs_fp32 = {"max_abs_diff": rounding.max_abs_diff, "max_abs_ref": rounding.max_abs_ref,
                            "seed": rounding.seed}
    except ParityError as e:  # name the target, not the staging file that is about to vanish
        what = " (against PyTorch with its weights rounded to float16)" if precision == "fp16" else ""
        raise ParityError(e.message.replace(str(tmp_path), str(target)) + what + "; nothing was written",
                          dataclasses.replace(e.result, path=str(target)), hint=e.hint) from None
    durations[f"parity_{f}"] = round(time.perf_counter() - t0, 4)
    results = [dataclasses.replace(r, path=str(target)) for r in results]
    for r in results:
        log.info("%s parity (%s): max|diff| %.3g <= tol %.3g", f, r.describe_inputs(), r.max_abs_diff, r.tolerance)
    return ExportedModel(
        format=f, path=str(target), size_bytes=tmp_path.stat().st_size, sha256=file_sha256(tmp_path),
        converter=CONVERTER[f], converter_version=versions.get("torch" if f == "onnx" else "litert-torch"),
        runtime=loaded.runtime, runtime_version=versions.get(loaded.runtime),
        output_shape=[int(v) if v is not None else -1 for v in loaded.output_shape], parity=results,
        precision=precision, quantization=dict(loaded.quantization) if calibration is not None else None,
        fp16_vs_fp32=fp16_vs_fp32,
    )


def export_model(
    module,
    input_shape: Sequence[int],
    formats: str | Iterable[str] = FORMATS,
    out_dir: str | os.PathLike = ".",
    *,
    stem: str = "model",
    seed: int = 0,
    parity: bool = True,
    parity_inputs: np.ndarray | None = None,
    rtol: float = DEFAULT_RTOL,
    threads: int | None = None,
    force: bool = False,
    names: tuple[str, str] = IO_NAMES,
    metadata: Mapping[str, Any] | None = None,
    precision: str = "fp32",
    calibration: np.ndarray | None = None,
) -> ExportResult:
    """Convert ``module`` to each format, check parity, move the files into ``out_dir``.

    ``names``: the input and output tensor names (both formats); ``metadata``: a JSON object
    written into each file (:mod:`nagkit.runtimes.metadata`; e.g. ``model_metadata``).

    ``input_shape``: the full NCHW shape, batch included (the exported batch is fixed).
    ``parity_inputs``: inputs to compare on, in addition to the seeded ones (any multiple of
    the batch). Existing ``<stem>.<ext>`` files in ``out_dir`` are replaced only with ``force``.
    ``precision``: ``fp32``; ``int8`` with ``calibration`` (parity is then the caller's accuracy
    check); ``fp16`` (TFLite only, against :func:`~nagkit.export.parity.float16_reference`).
    Raises :class:`~nagkit.export.parity.ParityError` (exit 1) on a mismatch and
    :class:`~nagkit.runtimes.convert.ConversionError` (exit 3) when a converter fails.
    """
    import torch

    fmts = normalize_formats(formats)
    check_precision(precision, fmts, calibration)
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 4 or min(shape) < 1:
        raise BadInputError(f"input_shape must be 4 positive ints (N, C, H, W), got {tuple(input_shape)}")
    out_dir = Path(out_dir)
    targets = {f: out_dir / f"{stem}{SUFFIX[f]}" for f in fmts}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not force:
        raise BadInputError(
            f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; not overwriting",
            hint="pass --force to replace, or choose another --out",
        )
    if any(t.device.type != "cpu" for t in [*module.parameters(), *module.buffers()]):
        import copy

        module = copy.deepcopy(module).cpu()  # exported models run on CPU runtimes; leave the caller's be
    module = module.eval()
    example = torch.from_numpy(seeded_inputs(shape, seed))
    created_dir = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{stem}.export-", dir=out_dir))
    durations: dict[str, float] = {}
    versions = all_versions()
    meta = json.loads(json.dumps(dict(metadata), allow_nan=False)) if metadata is not None else None
    models: dict[str, ExportedModel] = {}
    try:
        for f in fmts:
            models[f] = _export_one(module, example, f, staging / targets[f].name, targets[f], versions=versions,
                                    durations=durations, parity=parity, parity_inputs=parity_inputs, seed=seed,
                                    rtol=rtol, threads=threads, names=names, metadata=meta,
                                    calibration=calibration if precision == "int8" else None, precision=precision)
        for f in fmts:
            os.replace(staging / targets[f].name, targets[f])
    except BaseException:
        if created_dir:
            shutil.rmtree(staging, ignore_errors=True)
            try:
                out_dir.rmdir()
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ExportResult(models=models, input_shape=list(shape), names=tuple(names), metadata=meta, versions=versions,
                        durations_s=durations, seed=seed, precision=precision,
                        calibration_images=len(calibration) if precision == "int8" else 0)
