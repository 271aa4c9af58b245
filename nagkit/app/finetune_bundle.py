"""`nagkit finetune`: a subnet (of an existing bundle, or an arch) fine-tuned on the user's
ImageFolder, exported and bundled with its accuracy before and after.

The subnet comes from a bundle (its space, arch, budget and predicted latency; the weights are
the checkpoint the bundle names, which must still have the sha256 the manifest records, or
``--weights`` with that sha256) or from ``--arch`` with ``--space`` or ``--workspace`` and
``--weights`` (default: the workspace's supernet). :func:`finetune_to_bundle` runs it; the CLI
prints what it returns.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError
from nagkit.io import input_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    """What is fine-tuned: space, arch, weights file and sha256, and what the bundle said."""

    space: Any
    arch: Any
    weights: Path
    weights_sha256: str
    budget_ms: float | None = None
    predicted: dict[str, Any] | None = None
    origin: str = ""


def _weights_from_bundle(manifest: dict[str, Any], weights: str | None, where: str) -> tuple[Path, str]:
    from nagkit.supernet import sha256_file

    w = manifest["weights"]
    if w["sha256"] == "random-init":
        raise BadInputError(f"bundle {where!r} has random-init weights: there is nothing to fine-tune",
                            hint="pass --weights CKPT (a supernet checkpoint of the bundle's space)")
    path = Path(weights) if weights else (Path(w["source"]) if w.get("source") else None)
    if path is None or not path.is_file():
        raise BadInputError(f"the weights of bundle {where!r} ({w.get('source')!r}) are not on this machine",
                            hint=f"pass --weights CKPT, the checkpoint with sha256 {w['sha256'][:16]}...")
    sha = sha256_file(path)
    if sha != w["sha256"]:
        raise BadInputError(f"{str(path)!r} (sha256 {sha[:16]}...) is not the checkpoint bundle {where!r} was built "
                            f"from (sha256 {w['sha256'][:16]}...)", hint="pass --weights with the bundle's checkpoint")
    return path, sha


def resolve_source(*, bundle: str | None, arch: str | None, space: str | None, workspace: str | None,
                   weights: str | None) -> Source:
    """The subnet to fine-tune, from a bundle or from ``arch`` (the text of ``--arch``: a
    canonical string or OFA's dict as JSON; see the module docstring)."""
    from nagkit.space import get_space
    from nagkit.supernet import sha256_file

    ws = None
    if workspace is not None:
        from nagkit.app.workspace import load_workspace

        ws = load_workspace(workspace)
    if bundle is not None:
        if arch is not None:
            raise BadInputError("pass a BUNDLE or --arch, not both")
        from nagkit.export.bundle import read_bundle

        with read_bundle(bundle) as b:
            m = b.manifest
        sp = ws.space if ws is not None else get_space(m["space"])
        path, sha = _weights_from_bundle(m, weights, bundle)
        pred = m["latency"]["predicted"]
        if pred is not None:
            pred = dict(pred, note=f"predicted for the bundle's head of {m['output']['n_classes']} classes")
        return Source(sp, sp.parse_arch(m["arch"]["canonical"]), path, sha, m.get("budget_ms"), pred, f"bundle {bundle}")
    if arch is None:
        raise BadInputError("nothing to fine-tune: pass a BUNDLE, or --arch ARCH with --space or --workspace",
                            hint="nagkit finetune out/my-bundle --data DIR --epochs 2 --out out/tuned")
    sp = ws.space if ws is not None else get_space(space or "ofa-mbv3-w1.0")
    path = Path(weights) if weights else (ws.supernet_path() if ws is not None else None)
    if path is None:
        raise BadInputError("no weights: pass --weights CKPT (e.g. OFA's ofa_mbv3_d234_e346_k357_w1.0.pth)")
    path = input_file(path, "--weights", hint="pass a supernet checkpoint (.pth)")
    return Source(sp, sp.parse_arch(arch), path, sha256_file(path), origin=f"arch {sp.parse_arch(arch)}")


def finetune_to_bundle(src: Source, opts, *, out: Path, formats: tuple[str, ...], force: bool) -> dict[str, Any]:
    """Fine-tune ``src`` on ``opts.data`` (:class:`~nagkit.app.finetune.FinetuneOptions`),
    export, write and re-verify the bundle ``out``; returns what happened."""
    from nagkit.app.evaluate import folder_val_record
    from nagkit.app.export import write_verified_bundle
    from nagkit.app.finetune import finetune_on_folder
    from nagkit.export.bundle import check_bundle_target
    from nagkit.export.exporter import export_model
    from nagkit.export.manifest import make_manifest, model_metadata
    from nagkit.images.folder import open_image_folder
    from nagkit.supernet import load_supernet

    opts.check()
    if not opts.data:
        raise BadInputError("nagkit finetune needs --data DIR, an ImageFolder (DIR/train/<class>/*.png)")
    check_bundle_target(out, force=force)
    t0, phases = time.perf_counter(), {}
    data = open_image_folder(opts.data, channels=src.space.in_channels, val_fraction=opts.val_fraction, seed=opts.seed,
                             mixed_sizes=opts.mixed_sizes)
    if data.skipped:
        log.warning("skipped %d unreadable image(s), e.g. %s", len(data.skipped), data.skipped[0][0])
    phases["data"] = time.perf_counter() - t0
    t = time.perf_counter()
    sub = load_supernet(src.weights, src.space).extract(src.arch)
    ft = finetune_on_folder(sub, src.space, src.arch, data, opts)
    phases["finetune"] = time.perf_counter() - t
    space = src.space.with_labels(ft.labels)
    shape = (1, space.in_channels, src.arch.r, src.arch.r)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.models-", dir=out.parent))
    try:
        ex = export_model(ft.module, shape, formats, work, seed=opts.seed, force=True,
                          metadata=model_metadata(space, src.arch, shape))
        phases.update(ex.durations_s)
        t = time.perf_counter()
        exported = folder_val_record(ex.paths.get("tflite") or ex.paths["onnx"], space, src.arch.r, data)
        phases["accuracy"] = time.perf_counter() - t
        manifest = make_manifest(
            space, src.arch, export=ex, weights_sha256=src.weights_sha256, weights_source=str(src.weights),
            fine_tuned=ft.record, budget_ms=src.budget_ms, predicted=src.predicted, accuracy=exported,
            accuracy_others=[ft.after, ft.before], seed=opts.seed,
            notes=[f"fine-tuned from {src.origin}", f"{len(data.skipped)} unreadable image(s) skipped"])
        b, report = write_verified_bundle(out, ex, manifest, ft.module, seed=opts.seed + 1, force=force, phases=phases)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    phases["total"] = time.perf_counter() - t0
    return {"bundle": str(b.root), "zip": str(b.zip_path), "space": src.space.name, "arch": str(src.arch),
            "labels": ft.labels, "data": data.summary(), "before": ft.before, "after": ft.after, "exported": exported,
            "epochs": opts.epochs, "device_train": ft.record["device"], "bundle_check": report,
            "durations_s": {k: round(v, 2) for k, v in phases.items()}}
