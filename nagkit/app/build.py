"""`nagkit build`: from a latency budget to a verified TFLite/ONNX bundle.

Phases (each timed, each announced on the ``say`` callback): open (the device is contacted
first; the workspace and table for it are chosen by :mod:`nagkit.app.targets`: the device's
own table when one exists, training its generator on demand) -> generate (NAG inference) ->
extract (subnet with the supernet's weights) -> [finetune] -> convert + parity (LiteRT / ONNX
Runtime vs PyTorch) -> measure (on --device, if given) -> bundle. If the measured median exceeds
the budget, the next candidate is tried, at most ``max_tries`` of them. Without a device nothing
is measured, and the result and the manifest say the bundle is unverified. Nothing is left
behind on failure: exports go to a staging folder and the bundle is written atomically.

The options are one frozen :class:`BuildOptions`; one build's state moves through named stages
(:class:`_Build`: open, generate, then per candidate extract -> export -> measure, bundle).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nagkit.app.build_limits import check_limits, limits_record
from nagkit.app.build_result import Attempt, BuildResult  # noqa: F401 - BuildResult: the API's result type
from nagkit.app.build_inputs import check_counts as _check_counts
from nagkit.app.build_inputs import finetune_data as _finetune_data
from nagkit.app.build_inputs import has_fmnist_data as _has_fmnist_data
from nagkit.app.build_inputs import load_weights as _load_weights
from nagkit.app.build_inputs import predict as _predict  # noqa: F401 - benchmarks/finetune imports it from here
from nagkit.app.build_inputs import source_accuracy as _source_accuracy
from nagkit.app.build_inputs import split as _split
from nagkit.app.int8 import DEFAULT_MAX_INT8_DROP, quantize_after_note
from nagkit.errors import BadInputError, CheckFailedError

log = logging.getLogger(__name__)

DEFAULT_MAX_TRIES = 3
AIM_MARGIN = 0.95  # a re-aimed candidate is generated 5% under the budget scaled by the measured ratio
UNVERIFIED_NOTE = ("not measured: no device was given (--device), so this bundle is unverified; its latency is "
                   "the table's prediction only (check it with `nagkit check BUNDLE --device D --budget B`)")
ACCURACY_MODES = ("auto", "always", "never")


from nagkit.nag.budgets import BudgetBelowRangeError as InfeasibleBudgetError  # noqa: E402 - exit 1


@dataclass(frozen=True)
class BuildOptions:
    """How to build (everything but the budget, the workspace and an open device).

    ``device_spec``: measure on this device (and fall back to the next candidate when over
    budget); ``formats``: ``tflite``, ``onnx`` or both, comma-separated; ``out``: the bundle
    folder (default ``nagkit-bundle-<B>ms``); ``weights``/``random_init``: other supernet
    weights, or none; ``finetune``: epochs, on ``data`` (an ImageFolder: the head is replaced for
    its classes) or, without it, on the workspace's Fashion-MNIST (an OFA workspace needs ``data``), trained on
    ``device_train``; ``samples``: generator samples per budget (default: the workspace's); ``accuracy``: when to
    ask the workspace's accuracy source for the exported
    arch's accuracy: ``always``, ``never``, or ``auto`` = unless the source is expensive (a
    supernet evaluated on this machine: ~30 s per arch on a 2-core CPU) and has no cached value;
    unless ``never``, a workspace trained on Fashion-MNIST also runs the exported model on its
    test set (10,000 images, ~10 s), the accuracy the manifest reports.
    """

    device_spec: str | None = None
    formats: str | None = "tflite"
    out: str | Path | None = None
    force: bool = False
    weights: str | None = None
    random_init: bool = False
    finetune: int = 0
    data: str | None = None
    device_train: str = "cpu"
    val_fraction: float = 0.2
    mixed_sizes: bool = False
    max_tries: int = DEFAULT_MAX_TRIES
    samples: int | None = None
    seed: int = 0
    accuracy: str = "auto"
    max_int8_drop: float = DEFAULT_MAX_INT8_DROP  # points: an int8 export losing more fails (exit 1)
    quantize_after: bool = False  # int8/fp16 export of the arch chosen on an fp32 table (said in the manifest)
    limits: Any = None  # nagkit.nag.constraints.Limits: --max-params, --max-size-mb, --max-macs, --max-peak-kb

    def check(self) -> None:
        parse_export(self.formats)  # an unknown format or precision fails before any work
        if not 0 <= self.max_int8_drop <= 100:
            raise BadInputError(f"--max-int8-drop must be between 0 and 100 points, got {self.max_int8_drop}")
        _check_counts(self)
        if self.accuracy not in ACCURACY_MODES:
            raise BadInputError(f"--accuracy {self.accuracy!r} is not valid; valid: {', '.join(ACCURACY_MODES)}")
        if self.mixed_sizes and self.data is None:
            raise BadInputError("--mixed-sizes is only read with --data", hint="add --finetune EPOCHS --data DIR")
        if self.data is not None and not self.finetune:
            raise BadInputError("--data is only read with --finetune: the images to fine-tune on (an int8 export "
                                "then calibrates on them too); without --finetune an int8 export calibrates on the "
                                "workspace's own images", hint="add --finetune EPOCHS, or drop --data")
        if self.quantize_after and parse_export(self.formats)[1] not in ("int8", "fp16"):
            raise BadInputError("--quantize-after goes with an int8 or fp16 export",
                                hint="add --export tflite-int8 (or onnx-int8, or tflite-fp16)")
        if self.random_init and parse_export(self.formats)[1] == "int8":  # also: an unknown --export fails here
            raise BadInputError("--export tflite-int8 needs trained weights: an int8 model is judged by its accuracy",
                                hint="drop --random-init, or export fp32 (--export tflite)")
        if self.finetune and self.random_init:
            raise BadInputError("--finetune needs trained weights; --random-init makes a latency-only bundle",
                                hint="drop --random-init and pass --weights CKPT")
        if self.finetune:
            self.finetune_options().check()

    def finetune_options(self):
        from nagkit.app.finetune import FinetuneOptions

        return FinetuneOptions(epochs=self.finetune, data=self.data, device_train=self.device_train,
                               val_fraction=self.val_fraction, seed=self.seed, mixed_sizes=self.mixed_sizes)


def parse_export(text: str | None) -> tuple[tuple[str, ...], str]:
    """``--export`` -> (formats, precision): ``tflite``, ``onnx``, ``tflite-int8``, ``tflite-fp16``, comma-separated."""
    from nagkit.export.exporter import parse_export as parse

    return parse(text) if text else (("tflite",), "fp32")


@dataclass
class _Build:
    """One build's state, stage by stage."""

    budget_ms: float
    opts: BuildOptions
    fmts: tuple[str, ...]
    out_dir: Path
    precision: str = "fp32"
    int8: dict[str, Any] | None = None  # the int8 parity record of the current candidate
    ws: Any = None
    dev: Any = None
    net: Any = None
    w_sha: str | None = None
    w_src: str | None = None
    model: Any = None  # the workspace's NagModel
    recalibrate: bool = False
    folder: Any = None  # the ImageFolder to fine-tune on
    ft: Any = None  # the current candidate's FinetuneResult
    min_ms: float = 0.0  # the fastest network of the space on the table
    budget_note: str | None = None  # what happened to a budget above the slowest network
    result: Any = None  # the generator's result for the budget
    target: Any = None  # nagkit.app.targets.Target: the workspace and table used
    say: Any = None  # one progress line per phase (stderr in the CLI), or None
    progress: Any = None  # (phase, done, total) for long phases (training on demand)
    attempts: list[Attempt] = field(default_factory=list)
    aims: list[dict[str, float]] = field(default_factory=list)  # re-aims after over-budget measurements
    timings: dict[str, float] = field(default_factory=dict)
    limits_rec: dict[str, Any] | None = None  # the accepted candidate's constraints record
    table_fid: dict[str, Any] | None = None  # what the table's profile reached under its time budget (decisions 42)

    def announce(self, msg: str) -> None:
        if self.say is not None:
            self.say(f"build: {msg}")

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the block's wall time to ``timings[phase]``."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - t

    # -- stages ------------------------------------------------------------------------------
    def open(self, workspace, device) -> None:
        """Device (contacted and checked first), workspace and table for it, budget against the
        space's range on that table, weights, model."""
        from nagkit.app.int8 import for_precision
        from nagkit.app.targets import choose_target
        from nagkit.app.workspace import load_workspace
        from nagkit.devices.base import prepare_device
        from nagkit.latency.slots import SlotLatency
        from nagkit.nag.budgets import check_budget

        t = time.perf_counter()
        ws = load_workspace(workspace)
        self.folder = _finetune_data(ws, self.opts)  # a bad --data fails now, before any work
        ws = for_precision(ws, self.folder, self.precision, self.opts.quantize_after, self.announce)
        self.dev = device
        if self.dev is None and self.opts.device_spec:
            from nagkit.devices.registry import get_device

            self.dev = get_device(self.opts.device_spec)
        dev, o = self.dev, self.opts
        if dev is not None and dev.model_format not in self.fmts:
            raise BadInputError(
                f"device {dev.spec!r} measures {dev.model_format} models, but --export is {','.join(self.fmts)}",
                hint=f"add it: --export {','.join(sorted(set(self.fmts) | {dev.model_format}))}")
        if dev is not None:
            self.announce(f"contacting {dev.spec}")
            prepare_device(dev)  # an unreachable device fails now, before any work
        self.target = choose_target(ws, dev, say=self.announce, precision=None if self.opts.quantize_after
                                    else self.precision)
        ws = self.ws = self.target.workspace
        self.read_table_record()
        lat = SlotLatency(ws.latency_table, ws.space)
        self.min_ms = lat.fastest_ms
        _, self.budget_note = check_budget(self.budget_ms, lat.fastest_ms, lat.slowest_ms)  # below: exit 1
        self.target.ready(self.progress, self.announce)  # a device workspace's generator, trained once
        self.announce(f"workspace {ws.ref}; budget {self.budget_ms:g} ms against {lat.fastest_ms:.4g}.."
                      f"{lat.slowest_ms:.4g} ms on its table")
        self.net, self.w_sha, self.w_src = _load_weights(ws, ws.space, o.weights, o.random_init, o.seed)
        self.model = ws.nag_model()
        # BN statistics: recalibrated on the workspace's data when its accuracy source is the
        # supernet itself (the data is known); otherwise inherited from the checkpoint.
        self.recalibrate = self.w_sha is not None and o.weights is None and ws.accuracy_spec.startswith("supernet:")
        self.timings["load"] = time.perf_counter() - t

    def read_table_record(self) -> None:
        """What the table's profile reached under its time budget (its ``time_budget`` record), said
        now; a table cut short for time or below a usable level is warned about."""
        from nagkit.latency.table_fidelity import fidelity_line, table_fidelity

        self.table_fid = table_fidelity(self.ws.table_origin()[1])
        if self.table_fid is not None:
            self.announce(f"latency table: {fidelity_line(self.table_fid)}")
            for w in self.table_fid["warnings"]:
                log.warning("%s", w)

    def candidates(self) -> list:
        """The generator's best archs for the budget, by the evaluator (zero accuracy queries)."""
        return self.generate(self.budget_ms)[: self.opts.max_tries]

    def generate(self, budget_ms: float) -> list:
        """Ranked candidates for ``budget_ms`` within every limit (exit 1 when none can be)."""
        o = self.opts
        with self.timed("generate"):
            self.result = self.model.generate([budget_ms], samples=o.samples, seed=o.seed, top=o.max_tries,
                                              display=False, limits=o.limits, formats=self.fmts,
                                              precision=self.precision)[0]
        return list(self.result.candidates)

    def subnet(self, arch):
        """The arch's subnet with the supernet's weights (BN recalibrated, fine-tuned as asked)."""
        self.announce("extract the subnet" + (" and recalibrate its BN statistics" if self.recalibrate else ""))
        with self.timed("extract"):
            sub = self.net.extract(arch)
            if self.recalibrate:  # the exported model is the one whose accuracy was measured
                from nagkit.supernet.finetune import recalibrate_subnet

                sub = recalibrate_subnet(sub, self.ws.space, _split(self.ws))
        if self.opts.finetune:
            from nagkit.app.finetune import finetune_on_fmnist, finetune_on_folder

            fo = self.opts.finetune_options()
            with self.timed("finetune"):
                self.ft = (finetune_on_folder(sub, self.ws.space, arch, self.folder, fo) if self.folder is not None
                           else finetune_on_fmnist(sub, self.ws.space, arch, _split(self.ws), fo))
            sub = self.ft.module
        return sub

    @property
    def space(self):
        """The workspace's space, with the fine-tuned head's classes."""
        labels = self.ft.labels if self.ft else None
        return self.ws.space if labels is None else self.ws.space.with_labels(labels)

    def export(self, sub, arch, where: Path):
        from nagkit.export.exporter import export_model
        from nagkit.export.manifest import model_metadata

        shape = (1, self.ws.space.in_channels, arch.r, arch.r)
        cal, cal_from = self.calibration(arch)
        self.announce(f"convert to {', '.join(self.fmts)}" + (f" int8 (calibrating on {cal_from})" if cal is not None
                                                              else " and check parity with PyTorch"))
        ex = export_model(sub, shape, self.fmts, where, seed=self.opts.seed, force=True,
                          metadata=model_metadata(self.space, arch, shape, dtype="int8" if cal is not None and "tflite" in self.fmts else "float32"),
                          precision=self.precision, calibration=cal)
        if cal is not None:
            from nagkit.app.int8 import int8_parity

            self.announce("int8 parity: top-1 agreement and accuracy against fp32 on the held-out images")
            with self.timed("int8_parity"):
                self.int8 = int8_parity(ex.paths[self.fmts[0]], sub, self.space, arch.r, folder=self.folder,
                                        max_drop=self.opts.max_int8_drop, calibration=cal_from)
        for k, v in ex.durations_s.items():
            key = "convert" if k.startswith("convert") else "parity" if k.startswith("parity") else k
            self.timings[key] = self.timings.get(key, 0.0) + v
        return ex, shape

    def calibration(self, arch):
        """(representative inputs, where from) for an int8 export, or (None, "")."""
        if self.precision != "int8":
            return None, ""
        from nagkit.app.int8 import calibration_inputs

        with self.timed("calibration_data"):
            return calibration_inputs(self.space, arch.r, split=None if self.folder is not None else _split(self.ws),
                                      folder=self.folder)

    def measure(self, i: int, arch, pred: float, ex, shape):
        """(accepted, stats): the exported model timed on the device, if there is one."""
        dev = self.dev
        if dev is None:
            return True, None
        self.announce(f"measure on {dev.spec}")
        with self.timed("measure"):
            stats = dev.measure(ex.paths[dev.model_format], shape, None)
        if stats.median_ms > self.budget_ms:
            self.attempts.append(Attempt(str(arch), pred, stats.median_ms, False,
                                         f"measured median {stats.median_ms:.3f} ms > budget {self.budget_ms:g} ms "
                                         f"on {dev.spec}"))
            log.warning("candidate %d (%s) measured %.3f ms > %g ms on %s; trying the next one",
                        i + 1, arch, stats.median_ms, self.budget_ms, dev.spec)
            return False, stats
        return True, stats

    def accuracies(self, cand, ex) -> tuple[list[dict[str, Any]], list[str]]:
        """The accuracy records for the manifest, the one reported first, and notes: the
        exported file on the fine-tuning val split or the Fashion-MNIST test set (as the options
        allow), fine-tuning's before/after, the workspace source's value for the arch."""
        from nagkit.app.evaluate import folder_val_record
        from nagkit.app.provenance import source_record

        ws, o, arch, t = self.ws, self.opts, cand.arch, time.perf_counter()
        model = ex.paths.get("tflite") or ex.paths["onnx"]
        records: list[dict[str, Any]] = []
        acc = cand.accuracy
        if acc is None and self.w_sha is not None and self.ft is None:
            src = self.model.source
            if src is not None and (o.accuracy == "always" or (o.accuracy == "auto" and not src.expensive)):
                self.announce(f"accuracy of the arch from {src.name}"
                              + (" (one supernet evaluation: about 30 s on a 2-core CPU)" if src.expensive else ""))
            acc = _source_accuracy(src, arch, o.accuracy)
        if self.w_sha is None:
            notes = [] if acc is None else [f"the architecture's accuracy with trained weights is {acc:.4f} "
                                            f"({self.result.accuracy_source}); this bundle's weights are random"]
            return [], notes
        if self.ft is not None and self.folder is not None:
            records.append(folder_val_record(model, self.space, arch.r, self.folder))
        elif o.accuracy != "never" and _has_fmnist_data(ws):
            records.append(self.fmnist_test(model, arch))
        if self.ft is not None:
            records += [self.ft.after, self.ft.before]
        elif acc is not None and self.model.source is not None:
            records.append(source_record(self.model.source, acc))
        self.timings["accuracy"] = time.perf_counter() - t
        return records, []

    def fmnist_test(self, model, arch) -> dict[str, Any]:
        """The exported file's accuracy record on the Fashion-MNIST test set. An int8 file's parity
        has run this file on all of those images (the same preprocessing, runtime and thread): its
        int8 accuracy is the record's value, not measured a second time."""
        from nagkit.app.evaluate import FMNIST_TEST_SPLIT, fmnist_test_record, fmnist_test_record_of

        p = self.int8
        if p is not None and self.folder is None and (p["dataset"], p["split"]) == ("fashion-mnist", FMNIST_TEST_SPLIT):
            return fmnist_test_record_of(p["int8_accuracy"], p["images"], model)
        return fmnist_test_record(model, self.space, arch.r)

    def bundle(self, cand, ex, stats, pred: float, pred_raw: float) -> BuildResult:
        """Accuracy (as the options allow), manifest, bundle folder + zip."""
        from nagkit.app.provenance import table_record
        from nagkit.export.bundle import write_bundle
        from nagkit.export.manifest import make_manifest

        ws, dev, o, arch, res = self.ws, self.dev, self.opts, cand.arch, self.result
        self.attempts.append(Attempt(str(arch), pred, stats.median_ms if stats else None, True))
        records, acc_notes = self.accuracies(cand, ex)
        t = time.perf_counter()
        notes = [f"workspace {ws.name}", "BN statistics " + ("recalibrated on the workspace's training images"
                                                            if self.recalibrate or self.ft
                                                            else "inherited from the supernet checkpoint")]
        notes = notes + ([f"fine-tuned for {o.finetune} epoch(s)"] if o.finetune else [])
        notes = notes + ([self.budget_note] if self.budget_note else []) + ([] if dev else [UNVERIFIED_NOTE])
        notes = notes + acc_notes + ([quantize_after_note(self.precision)] if self.opts.quantize_after else [])
        notes = notes + [f"latency table: {w}" for w in (self.table_fid or {}).get("warnings", [])]
        if self.aims:
            a = self.aims[-1]
            notes.append(f"re-aimed: this device measured {a['ratio']:.2f}x the table's prediction, so this network "
                         f"was generated for {a['aim_ms']:.4g} ms on the table; profile the device for a table of "
                         f"its own (`nagkit profile --device {dev.spec if dev else 'D'} --space {ws.space.name}`)")
        manifest = make_manifest(
            self.space, arch, export=ex, weights_sha256=self.w_sha, weights_source=self.w_src,
            fine_tuned=self.ft.record if self.ft else None, budget_ms=self.budget_ms,
            device=({"spec": dev.spec, "info": dev.info(), "runtime": dev.runtime_info()} if dev else None),
            predicted={"ms": pred, "raw_ms": pred_raw, "source": "latency table", "table": table_record(ws)},
            measured=stats, accuracy=records[0] if records else None, accuracy_others=records[1:],
            seed=o.seed, notes=notes, int8=self.int8, constraints=self.limits_rec,
            build={"budget_note": self.budget_note, "selection_queries": res.selection_queries,
                   "generated_for_ms": res.effective_budget_ms, "re_aims": self.aims, "verified_on_device": dev is not None,
                   "workspace": ws.ref, "latency_table": {"path": self.target.table, "device_own": self.target.device_table,
                                                          "note": self.target.note},
                   "generator_trained_now": self.target.trained is not None, "table_fidelity": self.table_fid},
        )
        bundle = write_bundle(self.out_dir, ex.paths, manifest, force=o.force)
        self.timings["bundle"] = time.perf_counter() - t
        top = records[0] if records else None
        return BuildResult(
            bundle=str(bundle.root), zip=str(bundle.zip_path), arch=str(arch), ofa=ws.space.to_ofa_dict(arch),
            budget_ms=self.budget_ms, predicted_ms=pred, predicted_raw_ms=pred_raw,
            measured=stats.to_dict() if stats else None, accuracy=top["value"] if top else None,
            accuracy_source=(f"{top['dataset']} {top['split']}, {top['images']} images: {top['evaluated']}"
                             if top else None),
            device=dev.spec if dev else None, formats=list(self.fmts),
            weights=self.w_sha or "random-init", attempts=self.attempts, timings_s=self.timings,
            parity={f: m.to_dict().get("parity_max_abs_diff") for f, m in ex.models.items()},
            note=self.budget_note, workspace=ws.describe(), table=self.target.table, table_note=self.target.note,
            verified=dev is not None, trained=self.target.trained, accuracies=records,
            re_aims=list(self.aims), precision=self.precision, int8=self.int8, constraints=self.limits_rec,
            table_fidelity=self.table_fid,
        )

    def first_fitting(self, cands: list, staging_root: Path) -> BuildResult:
        """Try candidates (at most ``max_tries``) until one meets the budget on the device; bundle
        it. After one measures over the budget, the next is *re-aimed* (:meth:`reaim`): a table
        off for this device by a steady factor still gives a bundle that meets the budget as
        measured; said on stderr and in the manifest, with the fix (decisions 22)."""
        tried: set[str] = set()
        queue = list(cands)
        for i in range(self.opts.max_tries):
            if not (queue := [c for c in queue if str(c.arch) not in tried]):
                break
            cand = queue.pop(0)
            tried.add(str(cand.arch))
            pred, pred_raw = _predict(self.ws.latency_table, self.ws.space, cand.arch)
            sub = self.subnet(cand.arch)
            ex, shape = self.export(sub, cand.arch, staging_root / f"c{i}")
            self.limits_rec = limits_record(self.opts.limits, self.budget_ms, pred, self.space, cand.arch, ex,
                                            self.precision)
            check_limits(self.limits_rec, self.opts.limits)  # the real file's bytes, before any measurement
            accepted, stats = self.measure(i, cand.arch, pred, ex, shape)
            if accepted:
                return self.bundle(cand, ex, stats, pred, pred_raw)
            if i + 1 < self.opts.max_tries:
                queue = self.reaim() or queue
        raise CheckFailedError(
            f"none of the {len(self.attempts)} candidates tried for {self.budget_ms:g} ms met the budget on "
            f"{self.dev.spec if self.dev else 'the device'}: " + "; ".join(f"{a.arch} {a.note}" for a in self.attempts),
            hint=f"the latency table may not match this device: profile it with `nagkit profile --device "
                 f"{self.dev.spec if self.dev else 'D'} --space {self.ws.space.name}` (a build then uses its table), "
                 "or raise --max-tries")

    def reaim(self) -> list:
        """Candidates generated for budget / (worst measured/predicted ratio so far) x
        :data:`AIM_MARGIN`; none if that aim is below the space's fastest network on the table."""
        ratio = max(a.measured_ms / a.predicted_ms for a in self.attempts
                    if a.measured_ms is not None and a.predicted_ms > 0)
        aim = self.budget_ms / ratio * AIM_MARGIN
        if aim < self.min_ms:
            log.warning("cannot re-aim: this device measured %.2fx the table's prediction, and %g ms / %.2f is below "
                        "the fastest network on the table (%.4g ms)", ratio, self.budget_ms, ratio, self.min_ms)
            return []
        self.aims.append({"aim_ms": aim, "ratio": ratio})
        log.warning("this device measured %.2fx the table's prediction: the next candidate is generated for %.4g ms "
                    "on the table (%g ms / %.2f x %g)", ratio, aim, self.budget_ms, ratio, AIM_MARGIN)
        return self.generate(aim)


def build(budget_ms: float, *, workspace=None, options: BuildOptions | None = None, device=None,
          say=None, progress=None) -> BuildResult:
    """Build a verified bundle for ``budget_ms`` on ``workspace`` (a Workspace, folder, preset or
    None for the default). ``device`` (an open Device, left open) overrides ``options.device_spec``.
    ``say(line)`` hears each phase as it starts; ``progress(phase, done, total)`` long ones."""
    from nagkit.export.bundle import check_bundle_target

    import math

    o = options or BuildOptions()
    if not (isinstance(budget_ms, (int, float)) and math.isfinite(budget_ms) and budget_ms > 0):
        raise BadInputError(f"--budget must be a finite number of milliseconds > 0, got {budget_ms}")
    o.check()
    fmts, precision = parse_export(o.formats)
    run = _Build(budget_ms, o, fmts, Path(o.out) if o.out else Path(f"nagkit-bundle-{budget_ms:g}ms"),
                 precision=precision, say=say, progress=progress)
    check_bundle_target(run.out_dir, force=o.force)
    try:
        run.open(workspace, device)
        cands = run.candidates()
        parent = run.out_dir.parent
        staging_root = Path(tempfile.mkdtemp(prefix=".nagkit-build-", dir=parent if parent.exists() else None))
        try:
            return run.first_fitting(cands, staging_root)
        finally:
            shutil.rmtree(staging_root, ignore_errors=True)
    finally:
        if run.dev is not None and device is None:
            run.dev.close()
