"""`nagkit check`: verify a bundle, and measure a bundle or model on a device against a budget.

A bundle is verified before it is measured (:func:`open_verified`): its manifest (size, nesting,
schema), only the files the manifest lists (from a zip: nothing else is extracted, nothing
larger than listed), their sizes and sha256, and each model's input and output shapes against
the manifest's. A bundle that fails is bad input (exit 2), never measured.

:func:`check` then measures and returns a :class:`CheckResult`; :meth:`CheckResult.raise_if_failed`
raises :class:`OverBudgetError` (a :class:`~nagkit.errors.CheckFailedError`, exit 1) when the
median is over budget, like every other failed check. Exit 0 within budget, 2 for bad input,
3 when the device fails. :func:`verify` (``nagkit check BUNDLE`` without a device) also runs
every model once and holds LiteRT and ONNX Runtime to each other.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagkit.devices.base import Device, LatencyStats, MeasureConfig
from nagkit.errors import BadInputError, CheckFailedError, short_repr

log = logging.getLogger(__name__)

MODEL_SUFFIX = {".tflite": "tflite", ".onnx": "onnx"}


class OverBudgetError(CheckFailedError):
    """A model's measured median latency is over the budget (exit 1)."""

    def __init__(self, result: CheckResult):
        s = result.stats
        super().__init__(
            f"median {s.median_ms:.3f} ms > budget {result.budget_ms:g} ms on {result.device} "
            f"(p10 {s.p10_ms:.3f}, p90 {s.p90_ms:.3f}, n={s.n}) [{result.model}]",
            hint="build a faster model (`nagkit build --budget B` with a lower B), or check on the device "
                 "the latency table was profiled on")
        self.result = result


@dataclass
class CheckResult:
    model: str
    format: str
    device: str
    budget_ms: float
    stats: LatencyStats
    input_shape: list[int]

    @property
    def passed(self) -> bool:
        return self.stats.median_ms <= self.budget_ms

    def raise_if_failed(self) -> None:
        """:class:`OverBudgetError` when the median is over the budget."""
        if not self.passed:
            raise OverBudgetError(self)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "format": self.format, "device": self.device, "budget_ms": self.budget_ms,
                "passed": self.passed, "median_ms": self.stats.median_ms, "margin_ms": self.budget_ms - self.stats.median_ms,
                "input_shape": self.input_shape, "latency": self.stats.to_dict()}


def measure_config(runs: int | None) -> MeasureConfig | None:
    if runs is None:
        return None
    if runs < 1:
        raise BadInputError(f"--runs must be at least 1, got {runs}")
    return MeasureConfig(min_runs=runs, max_runs=max(runs, 1000))


def _model_shape(path: Path) -> list[int]:
    from nagkit.runtimes.models import load_model

    m = load_model(path)
    shape = m.describe().get("input_shape")
    if not shape or any(s is None or s < 1 for s in shape):
        raise BadInputError(f"model {str(path)!r} has a dynamic input shape {shape}; nagkit check needs a fixed one")
    return [int(s) for s in shape]


def _exists(p: Path) -> None:
    if not p.exists():
        raise BadInputError(f"{str(p)!r} does not exist; pass a bundle folder, a bundle .zip, or a .tflite/.onnx file",
                            hint="make one with `nagkit build --budget B --export tflite,onnx`")


def open_verified(p: Path):
    """The bundle at ``p``, its files' hashes and its models' shapes held to its manifest."""
    from nagkit.export.bundle import check_model_shapes, read_bundle

    bundle = read_bundle(p)
    try:
        check_model_shapes(bundle)
    except BaseException:
        bundle.close()
        raise
    return bundle


def resolve_model(target: str | Path, device: Device) -> tuple[Path, str, list[int], Any]:
    """The model file in the device's format, its format, input shape and the open bundle (or None)."""
    p = Path(target)
    _exists(p)
    if p.is_file() and p.suffix in MODEL_SUFFIX:
        fmt = MODEL_SUFFIX[p.suffix]
        if device.model_format != fmt:
            raise BadInputError(f"device {device.spec!r} runs {device.model_format} models, not {fmt} ({p.name})",
                                hint=_format_hint(device.model_format))
        return p, fmt, _model_shape(p), None
    bundle = open_verified(p)
    models = bundle.models
    if device.model_format not in models:
        bundle.close()
        raise BadInputError(
            f"bundle {str(p)!r} has {', '.join(sorted(models)) or 'no models'}; device {device.spec!r} needs "
            f"{device.model_format}", hint=_format_hint(device.model_format))
    shape = [int(v) for v in bundle.manifest["input"]["shape"]]
    return models[device.model_format], device.model_format, shape, bundle


def _format_hint(fmt: str) -> str:
    if fmt == "onnx":
        return "rebuild with --export onnx, or use a LiteRT device such as --device cpu:runtime=litert"
    if fmt == "tflite":
        return "rebuild with --export tflite, or use --device cpu:runtime=onnxruntime"
    return "nagkit check measures exported models on cpu or adb devices"


def check(target: str | Path, device_spec: str, budget_ms: float, runs: int | None = None) -> CheckResult:
    from nagkit.devices.registry import get_device

    if not (isinstance(budget_ms, (int, float)) and math.isfinite(budget_ms) and budget_ms > 0):
        raise BadInputError(f"--budget must be a finite number of milliseconds > 0, got {short_repr(budget_ms)}")
    cfg = measure_config(runs)
    dev = get_device(device_spec)
    bundle = None
    try:
        path, fmt, shape, bundle = resolve_model(target, dev)
        log.info("measuring %s on %s", path, dev.spec)
        stats = dev.measure(path, tuple(shape), cfg)
        return CheckResult(str(target), fmt, dev.spec, float(budget_ms), stats, shape)
    finally:
        if bundle is not None:
            bundle.close()
        dev.close()


@dataclass
class VerifyResult:
    bundle: str
    manifest: dict[str, Any]
    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        m = self.manifest
        return {"bundle": self.bundle, "verified": True, "schema": m["schema"], "arch": m["arch"]["canonical"],
                "input": {k: m["input"][k] for k in ("name", "shape", "layout", "dtype")},
                "output": {k: m["output"][k] for k in ("name", "shape")},
                "files": {n: {"sha256": e["sha256"], "size_bytes": e["size_bytes"],
                              **self.report["models"].get(e["format"], {})} for n, e in m["files"].items()},
                "cross_runtime": self.report.get("cross_runtime"), "latency_status": m["latency"]["status"]}


def verify(target: str | Path) -> VerifyResult:
    """``nagkit check BUNDLE`` without a device: the manifest, the files (only those listed, at
    their sizes and hashes), each model's shapes, one run of each, LiteRT vs ONNX Runtime."""
    from nagkit.export.bundle import read_bundle, verify_bundle

    p = Path(target)
    _exists(p)
    if p.is_file() and p.suffix in MODEL_SUFFIX:
        raise BadInputError(f"{p.name} is a model file without a manifest to verify it against",
                            hint="measure it instead: nagkit check MODEL --device D --budget MS")
    bundle = read_bundle(p)  # verify_bundle holds the shapes to the manifest
    try:
        return VerifyResult(str(target), bundle.manifest, verify_bundle(bundle))
    finally:
        bundle.close()
