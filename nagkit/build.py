"""`nagkit build`: from a latency budget to a verified TFLite/ONNX bundle.

Phases (each timed): generate (NAG inference on the workspace) -> extract (subnet with the
supernet's weights) -> [finetune] -> convert + parity (LiteRT / ONNX Runtime vs PyTorch) ->
measure (on --device, if given) -> bundle. If the measured median exceeds the budget, the next
candidate is tried, at most ``max_tries`` of them. Nothing is left behind on failure: exports
go to a staging folder and the bundle is written atomically.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError, CheckFailedError

log = logging.getLogger(__name__)

DEFAULT_MAX_TRIES = 3


class InfeasibleBudgetError(CheckFailedError):
    """The budget is below the smallest achievable latency (exit 1)."""


@dataclass
class Attempt:
    arch: str
    predicted_ms: float
    measured_ms: float | None
    accepted: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BuildResult:
    bundle: str
    zip: str
    arch: str
    ofa: dict[str, Any]
    budget_ms: float
    predicted_ms: float
    predicted_raw_ms: float
    measured: dict[str, Any] | None
    accuracy: float | None
    accuracy_source: str | None
    device: str | None
    formats: list[str]
    weights: str
    attempts: list[Attempt] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    parity: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["attempts"] = [a.to_dict() for a in self.attempts]
        return d


def parse_formats(text: str | None) -> tuple[str, ...]:
    from nagkit.export.exporter import normalize_formats

    if not text:
        return ("tflite",)
    return normalize_formats([t.strip() for t in text.split(",") if t.strip()])


def _predict(table, space, arch) -> tuple[float, float]:
    cal = float(table.predict(space, arch))
    try:
        raw = float(table.predict(space, arch, calibrated=False))
    except TypeError:
        raw = cal
    return cal, raw


def smallest_achievable(table, space) -> tuple[Any, float]:
    """The smallest arch (min depth/kernel/expand at the lowest resolution) and its latency."""
    arch = space.smallest()
    return arch, float(table.predict(space, arch))


def _load_weights(ws, space, weights: str | None, random_init: bool, seed: int):
    from nagkit.supernet import OFAMobileNetV3, load_supernet, sha256_file

    path = Path(weights) if weights else ws.supernet_path()
    if path is not None:
        if random_init:
            raise BadInputError("--random-init conflicts with supernet weights; drop one of them")
        net = load_supernet(path, space)
        return net, sha256_file(path), str(path)
    if not random_init:
        raise BadInputError(
            f"workspace {ws.name!r} has no supernet weights, so a bundle would carry random weights",
            hint="pass --weights OFA_CHECKPOINT.pth, or --random-init for a latency-only bundle")
    import torch

    torch.manual_seed(seed)
    return OFAMobileNetV3(space).eval(), None, None


ACCURACY_MODES = ("auto", "always", "never")


def _source_accuracy(source, arch, mode: str) -> float | None:
    """The accuracy source's value for ``arch`` as ``mode`` allows (see :func:`build`)."""
    if source is None or mode == "never":
        return None
    if mode == "auto" and getattr(source, "expensive", False):
        cached = source.cached(arch) if hasattr(source, "cached") else None
        if cached is None:
            log.info("accuracy not measured: the %s source is expensive here and has no cached value for %s "
                     "(pass --accuracy always)", getattr(source, "name", "accuracy"), arch)
        return cached
    return float(source.evaluate([arch])[0])


def build(budget_ms: float, *, workspace=None, device_spec: str | None = None, formats: str | None = "tflite",
          out: str | Path | None = None, force: bool = False, weights: str | None = None, random_init: bool = False,
          finetune: int = 0, max_tries: int = DEFAULT_MAX_TRIES, samples: int | None = None, seed: int = 0,
          device=None, accuracy: str = "auto") -> BuildResult:
    """Build a verified bundle for ``budget_ms``. ``device`` (a Device) overrides ``device_spec``.

    ``accuracy``: when to ask the workspace's accuracy source for the exported arch's accuracy:
    ``always``; ``never``; ``auto`` (default) = unless the source is expensive (a supernet
    evaluated on this machine: ~30 s per arch on a 2-core CPU) and has no cached value.
    """
    from nagkit.export.bundle import check_bundle_target, make_manifest, write_bundle
    from nagkit.export.exporter import export_model
    from nagkit.nag.infer import NagModel
    from nagkit.workspace import load_workspace

    timings: dict[str, float] = {}
    if not budget_ms > 0:
        raise BadInputError(f"--budget must be a positive number of milliseconds, got {budget_ms}")
    if max_tries < 1:
        raise BadInputError(f"--max-tries must be at least 1, got {max_tries}")
    if accuracy not in ACCURACY_MODES:
        raise BadInputError(f"--accuracy {accuracy!r} is not valid; valid: {', '.join(ACCURACY_MODES)}")
    fmts = parse_formats(formats)
    out_dir = Path(out) if out else Path(f"nagkit-bundle-{budget_ms:g}ms")
    check_bundle_target(out_dir, force=force)

    t = time.perf_counter()
    ws = load_workspace(workspace)
    space = ws.space
    table = ws.latency_table

    smallest, min_ms = smallest_achievable(table, space)
    if budget_ms < min_ms:
        raise InfeasibleBudgetError(
            f"budget {budget_ms:g} ms is below the smallest achievable latency {min_ms:.2f} ms "
            f"({smallest}) in workspace {ws.name!r}",
            hint=f"use --budget {min_ms:.2f} or more, or profile a faster device")

    # -- device first: a bad spec fails before any work --------------------------------------
    dev = device
    if dev is None and device_spec:
        from nagkit.devices.registry import get_device

        dev = get_device(device_spec)
    try:
        if dev is not None and dev.model_format not in fmts:
            raise BadInputError(
                f"device {dev.spec!r} measures {dev.model_format} models, but --export is {','.join(fmts)}",
                hint=f"add it: --export {','.join(sorted(set(fmts) | {dev.model_format}))}")
        net, w_sha, w_src = _load_weights(ws, space, weights, random_init, seed)
        model = NagModel.from_workspace(ws)
        # BN statistics: recalibrated on the workspace's data when its accuracy source is the
        # supernet itself (the data is known); otherwise inherited from the checkpoint.
        recalibrate = w_sha is not None and weights is None and ws.accuracy_spec.startswith("supernet:")
        timings["load"] = time.perf_counter() - t

        # -- generate ------------------------------------------------------------------------
        t = time.perf_counter()
        lo, hi = model.grid.lo, model.grid.hi
        gen_budget = min(max(budget_ms, lo), hi)
        res = model.generate([gen_budget], samples=samples or ws.inference.samples, rerank=ws.inference.rerank,
                             max_rounds=ws.inference.max_rounds, seed=seed, top=max_tries, accuracy=False)[0]
        cands = [c for c in res.candidates if c.latency_ms <= budget_ms]
        if not cands:  # budget in [smallest achievable, generator range): the smallest arch fits
            from nagkit.nag.infer import Candidate

            cands = [Candidate(smallest, min_ms, float("nan"))]
        timings["generate"] = time.perf_counter() - t

        attempts: list[Attempt] = []
        staging_root = Path(tempfile.mkdtemp(prefix=".nagkit-build-", dir=out_dir.parent if out_dir.parent.exists() else None))
        try:
            for i, cand in enumerate(cands[:max_tries]):
                arch = cand.arch
                pred, pred_raw = _predict(table, space, arch)
                t = time.perf_counter()
                sub = net.extract(arch)
                if recalibrate:  # the exported model is the one whose accuracy was measured
                    from nagkit.supernet.finetune import recalibrate_subnet

                    sub = recalibrate_subnet(sub, space, _split(ws))
                timings["extract"] = timings.get("extract", 0.0) + time.perf_counter() - t
                if finetune:
                    t = time.perf_counter()
                    sub = _finetune(ws, sub, finetune, seed)
                    timings["finetune"] = timings.get("finetune", 0.0) + time.perf_counter() - t
                shape = (1, space.in_channels, arch.r, arch.r)
                ex = export_model(sub, shape, fmts, staging_root / f"c{i}", seed=seed, force=True)
                for k, v in ex.durations_s.items():
                    key = "convert" if k.startswith("convert") else "parity" if k.startswith("parity") else k
                    timings[key] = timings.get(key, 0.0) + v
                stats = None
                if dev is not None:
                    t = time.perf_counter()
                    stats = dev.measure(ex.paths[dev.model_format], shape, None)
                    timings["measure"] = timings.get("measure", 0.0) + time.perf_counter() - t
                    if stats.median_ms > budget_ms:
                        attempts.append(Attempt(str(arch), pred, stats.median_ms, False,
                                                f"measured median {stats.median_ms:.3f} ms > budget {budget_ms:g} ms on {dev.spec}"))
                        log.warning("candidate %d (%s) measured %.3f ms > %g ms on %s; trying the next one",
                                    i + 1, arch, stats.median_ms, budget_ms, dev.spec)
                        continue
                attempts.append(Attempt(str(arch), pred, stats.median_ms if stats else None, True))
                t = time.perf_counter()
                acc = cand.accuracy
                if acc is None and w_sha is not None:
                    acc = _source_accuracy(model.source, arch, accuracy)
                    timings["accuracy"] = time.perf_counter() - t
                    t = time.perf_counter()
                notes = [f"workspace {ws.name}", "BN statistics " + ("recalibrated on the workspace's training images"
                                                               if recalibrate else "inherited from the supernet checkpoint")]
                notes = notes + (["fine-tuned for %d epochs" % finetune] if finetune else [])
                if w_sha is None and acc is not None:
                    notes.append(f"the architecture's accuracy with trained weights is {acc:.4f} "
                                 f"({res.accuracy_source}); this bundle's weights are random")
                    acc = None
                manifest = make_manifest(
                    space, arch, export=ex, weights_sha256=w_sha, weights_source=w_src, budget_ms=budget_ms,
                    device=({"spec": dev.spec, "info": dev.info(), "runtime": dev.runtime_info()} if dev else None),
                    predicted={"ms": pred, "raw_ms": pred_raw, "source": "latency table",
                               "table": ws.latency_table_spec},
                    measured=stats, accuracy=acc, accuracy_source=res.accuracy_source if acc is not None else None,
                    seed=seed, notes=notes,
                )
                bundle = write_bundle(out_dir, ex.paths, manifest, force=force)
                timings["bundle"] = time.perf_counter() - t
                return BuildResult(
                    bundle=str(bundle.root), zip=str(bundle.zip_path), arch=str(arch), ofa=space.to_ofa_dict(arch),
                    budget_ms=budget_ms, predicted_ms=pred, predicted_raw_ms=pred_raw,
                    measured=stats.to_dict() if stats else None, accuracy=acc,
                    accuracy_source=res.accuracy_source if acc is not None else None,
                    device=dev.spec if dev else None, formats=list(fmts),
                    weights=w_sha or "random-init", attempts=attempts, timings_s=timings,
                    parity={f: m.to_dict().get("parity_max_abs_diff") for f, m in ex.models.items()},
                )
        finally:
            shutil.rmtree(staging_root, ignore_errors=True)
        raise CheckFailedError(
            f"none of the {len(attempts)} best candidates for {budget_ms:g} ms met the budget on "
            f"{dev.spec if dev else 'the device'}: " + "; ".join(f"{a.arch} {a.note}" for a in attempts),
            hint="the latency table may not match this device: re-profile it with `nagkit profile --device ...` "
                 "and retrain with `nagkit train`, or raise --max-tries")
    finally:
        if dev is not None and device is None:
            dev.close()


def _split(ws):
    """The images the workspace's ``supernet:`` accuracy source recalibrates and validates on."""
    from nagkit.data.supernet_acc import split_settings

    try:
        ckpt = ws.supernet_path()
    except Exception:  # noqa: BLE001 - a workspace without weights
        ckpt = None
    return split_settings(ws.accuracy_options, ckpt)


def _finetune(ws, sub, epochs: int, seed: int):
    from nagkit.supernet.finetune import finetune_subnet

    return finetune_subnet(sub, ws.space, _split(ws), epochs=epochs, seed=seed)
