"""`nagkit export`: a subnet of a supernet checkpoint (or a seeded random init) to ONNX and/or
TFLite, each file checked against PyTorch; optionally a bundle whose zip is re-opened and
verified.

:func:`export_subnet` returns a JSON-able result (paths, sizes, parity, params, MACs, versions,
time per phase); the CLI only prints it. :func:`write_verified_bundle` is the one path that
writes a bundle and then re-opens its zip and checks every model in it again.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError

log = logging.getLogger(__name__)

FMNIST = "fashion-mnist"  # --data: Debian's Fashion-MNIST (training split to calibrate, test split for parity)


def check_request(space, *, weights: str | None, random_init: bool, out: Path | None, arch,
                  as_bundle: bool, force: bool, precision: str = "fp32", data: str | None = None) -> Path:
    """Refuse conflicting or unusable options before any work; returns the output folder."""
    if precision == "int8" and random_init:
        raise BadInputError("--format tflite-int8 needs trained weights: an int8 model is judged by its accuracy",
                            hint="pass --weights CKPT, or export fp32 (--format tflite)")
    if precision == "int8" and not data:
        raise BadInputError("--format tflite-int8 needs images to calibrate and judge the int8 model on",
                            hint=f"pass --data {FMNIST} (Debian's Fashion-MNIST) or --data DIR (an ImageFolder: "
                                 "DIR/train/<class>/*.png, DIR/val/...)")
    if data is not None and precision != "int8":
        raise BadInputError("--data is only read for an int8 export", hint="add --format tflite-int8")
    if weights is None and not random_init:
        raise BadInputError("no weights given: pass --weights CKPT (a supernet checkpoint) or --random-init "
                            "(a random model, only good for latency checks)",
                            hint=f"nagkit export --weights CKPT --space {space.name} --arch ... --out DIR")
    if weights is not None and random_init:
        raise BadInputError("--weights and --random-init exclude each other; pass one")
    out = Path(out) if out is not None else Path("nagkit-export") / str(arch)
    if out.suffix.lower() in (".onnx", ".tflite", ".zip"):
        raise BadInputError(f"--out {str(out)!r} looks like a file name; --out is a folder "
                            f"(the files are written as {str(out.with_suffix(''))}/model.onnx, .../model.tflite)",
                            hint=f"use --out {str(out.with_suffix(''))}")
    from nagkit.io import check_out_path

    check_out_path(out)  # too long for the OS, or below an existing file (issue 13 D5, issue 35)
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {str(out)!r} exists and is not a folder", hint="choose another --out")
    if as_bundle:
        from nagkit.export.bundle import check_bundle_target

        check_bundle_target(out, force=force)
    return out


def load_subnet(space, arch, *, weights: str | None, seed: int, phases: dict[str, float],
                progress: Callable[[str], None]):
    """(module, weights sha256 or None): the subnet with the checkpoint's weights, or seeded
    random ones. Adds ``load``/``extract`` to ``phases``."""
    t0 = time.perf_counter()
    if weights is None:
        from nagkit.supernet import StaticNet

        progress(f"random-init subnet (seed {seed}); only good for latency checks")
        module = StaticNet.from_arch(space, arch, seed=seed)
        phases["extract"] = time.perf_counter() - t0
        return module, None
    from nagkit.supernet import load_supernet, sha256_file

    progress(f"loading {weights} ({space.name})")
    net = load_supernet(weights, space)
    phases["load"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    module = net.extract(arch)
    phases["extract"] = time.perf_counter() - t1
    return module, sha256_file(weights)


def write_verified_bundle(out: Path, export, manifest: dict[str, Any], module, *, seed: int, force: bool,
                          phases: dict[str, float]) -> tuple[Any, dict[str, Any]]:
    """Write the bundle folder + zip, then re-open the zip and check every model in it against
    ``module`` on new seeded inputs (and the two runtimes against each other). Returns
    ``(bundle, check report)``; adds ``bundle``/``bundle_check`` to ``phases``."""
    from nagkit.export.bundle import verify_bundle, write_bundle

    t = time.perf_counter()
    b = write_bundle(out, export.paths, manifest, force=force)
    phases["bundle"] = time.perf_counter() - t
    t = time.perf_counter()
    report = verify_bundle(b.zip_path, module, seed=seed)
    phases["bundle_check"] = time.perf_counter() - t
    return b, report


def verify_against(module, precision: str):
    """What a written bundle's model is checked against: ``module`` (fp32), its float16 reference
    (fp16), or nothing (int8, judged by accuracy)."""
    if precision == "int8":
        return None
    if precision == "fp16":
        from nagkit.export.parity import float16_reference

        return float16_reference(module)
    return module


def _files(export, final: dict[str, Path]) -> dict[str, Any]:
    out = {}
    for f, m in export.models.items():
        w = m.worst_parity
        out[f] = {
            "path": str(final[f]), "size_bytes": m.size_bytes, "sha256": m.sha256,
            "converter": f"{m.converter} {m.converter_version}",
            "runtime": f"{m.runtime} {m.runtime_version}",
            "parity_max_abs_diff": w.max_abs_diff if w else None,
            "parity_tolerance": w.tolerance if w else None,
            "parity_seed": w.seed if w else None,
            **({"fp16_vs_fp32": m.fp16_vs_fp32} if m.fp16_vs_fp32 else {}),
        }
    return out


def _int8_inputs(space, arch, data: str | None):
    """(calibration inputs, where from, the ImageFolder or None) for ``--data``."""
    from nagkit.app.int8 import calibration_inputs

    if data == FMNIST:
        from nagkit.images.fmnist import SplitSettings

        return (*calibration_inputs(space, arch.r, split=SplitSettings()), None)
    from nagkit.images.folder import open_image_folder

    folder = open_image_folder(data, channels=space.in_channels)
    return (*calibration_inputs(space, arch.r, folder=folder), folder)


def export_subnet(space, arch, *, weights: str | None, formats: tuple[str, ...], out: Path, batch: int, seed: int,
                  as_bundle: bool, force: bool, progress: Callable[[str], None] = log.info, precision: str = "fp32",
                  data: str | None = None, max_int8_drop: float = 1.0) -> dict[str, Any]:
    """Load (or random-init), extract, export, check parity (int8: accuracy against fp32 on
    ``data``'s held-out images, :mod:`nagkit.app.int8`); optionally write and verify a bundle."""
    from nagkit.export.exporter import export_model
    from nagkit.export.manifest import model_metadata

    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    module, weights_sha = load_subnet(space, arch, weights=weights, seed=seed, phases=phases, progress=progress)
    shape = (batch, space.in_channels, arch.r, arch.r)
    cal, cal_from, folder = _int8_inputs(space, arch, data) if precision == "int8" else (None, "", None)
    progress(f"exporting {arch} to {', '.join(formats)} (input {'x'.join(map(str, shape))} NCHW float32)")
    if as_bundle:
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.models-", dir=out.parent))
    else:
        work = out
    try:
        res = export_model(module, shape, formats, work, seed=seed, force=force, precision=precision,
                           calibration=cal, metadata=model_metadata(space, arch, shape,
                                                                    dtype="int8" if cal is not None and "tflite" in formats else "float32"))
        phases.update(res.durations_s)
        int8 = None
        if cal is not None:
            from nagkit.app.int8 import int8_parity

            progress("int8 parity: top-1 agreement and accuracy against fp32 on the held-out images")
            t = time.perf_counter()
            int8 = int8_parity(res.paths[formats[0]], module, space, arch.r, folder=folder, max_drop=max_int8_drop,
                               calibration=cal_from)
            phases["int8_parity"] = time.perf_counter() - t
        result: dict[str, Any] = {
            "space": space.name, "arch": str(arch), "ofa": space.to_ofa_dict(arch),
            "weights": str(weights) if weights else "random-init", "weights_sha256": weights_sha,
            "params": space.params(arch), "params_module": int(sum(p.numel() for p in module.parameters())),
            "macs": space.macs(arch), "input": {"shape": list(shape), "layout": "NCHW", "dtype": "float32"},
            "files": {}, "versions": res.versions, "precision": precision, "int8": int8,
        }
        final = res.paths
        if as_bundle:
            from nagkit.export.manifest import make_manifest

            manifest = make_manifest(space, arch, export=res, weights_sha256=weights_sha,
                                     weights_source=str(weights) if weights else None, int8=int8)
            b, result["bundle_check"] = write_verified_bundle(out, res, manifest, verify_against(module, precision),
                                                              seed=seed + 1, force=force, phases=phases)
            result["bundle"] = {"folder": str(b.root), "zip": str(b.zip_path), "manifest": str(b.root / "manifest.json")}
            final = {f: b.root / Path(p).name for f, p in res.paths.items()}
        result["files"] = _files(res, final)
    finally:
        if as_bundle:
            shutil.rmtree(work, ignore_errors=True)
    phases["total"] = time.perf_counter() - t0
    result["durations_s"] = {k: round(v, 3) for k, v in phases.items()}
    return result
