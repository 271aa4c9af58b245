"""Bundles: a folder (and the same as a .zip beside it) with the model(s), manifest.json, README.md.

Layout of a bundle ``DIR`` (and ``DIR.zip``, whose entries sit under one top folder ``DIR.name/``)::

    model.tflite      and/or model.onnx (fp32, NCHW input)
    manifest.json     validated against nagkit/export/manifest.schema.json
    README.md         how to run it with LiteRT and ONNX Runtime

:func:`write_bundle` builds everything in a temporary folder beside the target and renames it
into place; an existing bundle is replaced only with ``force``. :func:`read_bundle` opens a
folder or a .zip; zip extraction refuses entries that would land outside the folder (absolute
paths, ``..``, symlinks, devices) and checks every model's sha256 against the manifest.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from nagkit.errors import ArtifactError, BadInputError
from nagkit.export.manifest import (MODEL_FILES, RANDOM_INIT_NOTE, SCHEMA_ID, dumps_manifest, json_default,
                                    make_manifest, readme_text)
from nagkit.export.schema import validate_manifest
from nagkit.io import check_out_path, current_umask, exclusive_lock

__all__ = ["MODEL_FILES", "RANDOM_INIT_NOTE", "SCHEMA_ID", "Bundle", "check_bundle_target", "dumps_manifest",
           "make_manifest", "read_bundle", "readme_text", "safe_extract", "verify_bundle",
           "write_bundle", "zip_path_for"]

MAX_ZIP_ENTRIES = 64
MAX_ZIP_BYTES = 4 << 30


@dataclass
class Bundle:
    """An opened bundle. For a zip, ``root`` is a temporary folder removed by :meth:`close`."""

    root: Path
    manifest: dict[str, Any]
    zip_path: Path | None = None
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    @property
    def models(self) -> dict[str, Path]:
        return {f: self.root / n for f, n in MODEL_FILES.items() if n in self.manifest.get("files", {})}

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- writing --------------------------------------------------------------------------------------
def zip_path_for(out_dir: str | os.PathLike) -> Path:
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".zip")


def check_bundle_target(out_dir: str | os.PathLike, force: bool = False) -> None:
    """Raise BadInputError if the bundle folder or its zip exists and ``force`` is not set."""
    out_dir = Path(out_dir)
    check_out_path(out_dir)
    taken = [str(p) for p in (out_dir, zip_path_for(out_dir)) if p.exists() or p.is_symlink()]
    if taken and not force:
        raise BadInputError(f"bundle output {' and '.join(repr(t) for t in taken)} already exist"
                            f"{'s' if len(taken) == 1 else ''}; not overwriting",
                            hint="pass --force to replace it, or choose another --out")
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInputError(f"bundle output {str(out_dir)!r} exists and is not a folder", hint="choose another --out")


def write_bundle(out_dir: str | os.PathLike, models: Mapping[str, str | os.PathLike],
                 manifest_fields: Mapping[str, Any], force: bool = False) -> Bundle:
    """Write a bundle folder ``out_dir`` and ``out_dir.zip`` atomically.

    ``models``: format ("tflite"/"onnx") -> path of the exported file (copied in).
    ``manifest_fields``: from :func:`make_manifest`; ``files`` entries are (re)computed from the
    copied models (sha256, size), keeping converter/runtime/parity details given for them.
    """
    from nagkit.export.exporter import all_versions

    out_dir = Path(out_dir)
    check_bundle_target(out_dir, force=force)
    if not models:
        raise BadInputError(f"a bundle needs at least one model; valid formats: {', '.join(MODEL_FILES)}")
    for f, p in models.items():
        if f not in MODEL_FILES:
            raise BadInputError(f"unknown bundle model format {f!r}; valid formats: {', '.join(MODEL_FILES)}")
        if not Path(p).is_file():
            raise BadInputError(f"model file {str(p)!r} for the bundle does not exist")
    try:
        manifest = json.loads(json.dumps(dict(manifest_fields), default=json_default, allow_nan=False))
    except ValueError as e:
        raise BadInputError(f"bundle manifest fields hold a NaN or infinity, which JSON cannot carry: {e}") from None
    manifest.setdefault("schema", SCHEMA_ID)
    manifest.setdefault("created", _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
                        .replace("+00:00", "Z"))
    versions = all_versions()
    versions.update(manifest.get("versions") or {})
    manifest["versions"] = versions
    given_files = dict(manifest.get("files") or {})
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    # One writer at a time per folder (issue 13 D7): a second `nagkit build --out X` started
    # together waits here, then finds X taken and is refused (unless --force), so two writers
    # of one output never both report success and a bundle is never silently replaced.
    with exclusive_lock(parent, wait_s=_LOCK_WAIT_S,
                        message=f"another nagkit process has been writing a bundle in {str(parent)!r} for over "
                                f"{_LOCK_WAIT_S:.0f} s", hint="wait for it to finish, or choose another --out"):
        check_bundle_target(out_dir, force=force)  # again, now that no other writer is at work
        return _write_locked(out_dir, models, manifest, given_files)


_LOCK_WAIT_S = 600.0


def _write_locked(out_dir: Path, models: Mapping[str, str | os.PathLike], manifest: dict[str, Any],
                  given_files: dict[str, Any]) -> Bundle:
    from nagkit.export.exporter import file_sha256

    parent = out_dir.parent
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=parent))
    tmp_zip = None
    old = None
    try:
        files: dict[str, Any] = {}
        for f, p in sorted(models.items()):
            name = MODEL_FILES[f]
            shutil.copyfile(p, tmp_dir / name)
            entry = dict(given_files.get(name) or {})
            entry.update({"format": f, "sha256": file_sha256(tmp_dir / name), "size_bytes": (tmp_dir / name).stat().st_size,
                          "runtime": "litert" if f == "tflite" else "onnxruntime"})
            entry.setdefault("parity", None)
            files[name] = entry
        manifest["files"] = files
        validate_manifest(manifest, where=f"manifest of bundle {str(out_dir)!r}")
        (tmp_dir / "manifest.json").write_text(dumps_manifest(manifest))
        (tmp_dir / "README.md").write_text(readme_text(manifest, out_dir.name))
        os.chmod(tmp_dir, 0o755 & ~current_umask())
        fd, tmp_zip_s = tempfile.mkstemp(prefix=f".{out_dir.name}.zip.", suffix=".tmp", dir=parent)
        os.close(fd)
        tmp_zip = Path(tmp_zip_s)
        _write_zip(tmp_dir, tmp_zip, top=out_dir.name)
        os.chmod(tmp_zip, 0o644 & ~current_umask())
        if out_dir.exists():  # force was given (check_bundle_target, under the lock)
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
            os.replace(out_dir, old / "b")
        os.replace(tmp_dir, out_dir)
        os.replace(tmp_zip, zip_path_for(out_dir))
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        if old is not None and (old / "b").exists() and not out_dir.exists():
            os.replace(old / "b", out_dir)  # put the previous bundle back
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(tmp_dir, ignore_errors=True)
        if tmp_zip is not None and tmp_zip.exists():
            tmp_zip.unlink()
        raise
    return Bundle(root=out_dir, manifest=manifest, zip_path=zip_path_for(out_dir))


def _write_zip(folder: Path, zip_path: Path, top: str) -> None:
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.iterdir()):
            info = zipfile.ZipInfo(f"{top}/{p.name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(p, "rb") as src, zf.open(info, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


# -- reading --------------------------------------------------------------------------------------
def read_bundle(path: str | os.PathLike, *, verify: bool = True) -> Bundle:
    """Open a bundle folder or .zip; validate the manifest and (``verify``) the models' sha256."""
    from nagkit.export.exporter import file_sha256

    path = Path(path)
    tmp = None
    if path.is_dir():
        root = path
    elif path.is_file() and zipfile.is_zipfile(path):
        tmp = tempfile.TemporaryDirectory(prefix="nagkit-bundle-")
        try:
            safe_extract(path, Path(tmp.name))
            root = _bundle_root(Path(tmp.name), path)
        except BaseException:
            tmp.cleanup()
            raise
    elif path.is_file():
        raise ArtifactError(f"{str(path)!r} is neither a bundle folder nor a zip file",
                            hint="pass the folder or .zip written by `nagkit build` / `nagkit export --bundle`")
    else:
        raise BadInputError(f"bundle {str(path)!r} does not exist",
                            hint="build one with `nagkit build` or `nagkit export --bundle`")
    try:
        mpath = root / "manifest.json"
        if not mpath.is_file():
            raise ArtifactError(f"bundle {str(path)!r} has no manifest.json")
        try:
            manifest = json.loads(mpath.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ArtifactError(f"manifest.json of bundle {str(path)!r} is not valid JSON: {e}") from None
        validate_manifest(manifest, where=f"manifest of bundle {str(path)!r}")
        if verify:
            for name, entry in manifest["files"].items():
                fp = root / name
                if not fp.is_file():
                    raise ArtifactError(f"bundle {str(path)!r} lists {name} but the file is missing")
                digest = file_sha256(fp)
                if digest != entry["sha256"]:
                    raise ArtifactError(f"{name} in bundle {str(path)!r} is corrupt: sha256 {digest[:16]}... "
                                        f"!= manifest {entry['sha256'][:16]}...",
                                        hint="rebuild or re-download the bundle")
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    return Bundle(root=root, manifest=manifest, zip_path=path if tmp is not None else None, _tmp=tmp)


def verify_bundle(bundle: Bundle | str | os.PathLike, module=None, *, seed: int = 0, rtol: float | None = None,
                  threads: int | None = None) -> dict[str, Any]:
    """Load every model of a bundle in its runtime and check it on seeded inputs.

    Checks: each model loads (LiteRT / ONNX Runtime), takes the manifest's input shape and gives
    the manifest's output shape; with ``module``, each matches PyTorch (parity); with two models,
    they match each other. Raises ArtifactError / ParityError; returns what was checked.
    """
    from nagkit.export.parity import DEFAULT_RTOL, check_parity, compare, seeded_inputs
    from nagkit.runtimes.models import load_model

    rtol = DEFAULT_RTOL if rtol is None else rtol
    b = bundle if isinstance(bundle, Bundle) else read_bundle(bundle)
    try:
        shape = [int(v) for v in b.manifest["input"]["shape"]]
        want_out = [int(v) for v in b.manifest["output"]["shape"]]
        x = seeded_inputs(shape, seed)
        outs: dict[str, Any] = {}
        report: dict[str, Any] = {"root": str(b.root), "seed": seed, "models": {}}
        for fmt, path in sorted(b.models.items()):
            m = load_model(path, threads=threads)
            if list(m.input_shape) != shape:
                raise ArtifactError(f"{path.name} takes input {list(m.input_shape)} but the manifest says {shape}")
            y = m.run(x)
            if list(y.shape) != want_out:
                raise ArtifactError(f"{path.name} gives output {list(y.shape)} but the manifest says {want_out}")
            outs[fmt] = y
            entry: dict[str, Any] = {"runtime": m.runtime, "output_shape": list(y.shape)}
            if module is not None:
                entry["parity"] = check_parity(module, m, inputs=x, rtol=rtol).to_dict()
            report["models"][fmt] = entry
        if len(outs) == 2:
            diff, _, tol, ok = compare(outs["tflite"], outs["onnx"], rtol)
            report["cross_runtime"] = {"max_abs_diff": diff, "tolerance": tol, "passed": ok}
            if not ok:
                from nagkit.errors import CheckFailedError

                raise CheckFailedError(f"model.tflite (LiteRT) and model.onnx (ONNX Runtime) of bundle {str(b.root)!r} "
                                       f"disagree: max|diff| = {diff:.3g} > tolerance {tol:.3g} (seed {seed})")
        return report
    finally:
        if b is not bundle:
            b.close()


def _bundle_root(folder: Path, src: Path) -> Path:
    if (folder / "manifest.json").is_file():
        return folder
    subs = [p for p in folder.iterdir()]
    if len(subs) == 1 and subs[0].is_dir() and (subs[0] / "manifest.json").is_file():
        return subs[0]
    raise ArtifactError(f"zip {str(src)!r} holds no bundle (no manifest.json at its top or in one top folder)")


_DRIVE = re.compile(r"^[A-Za-z]:")


def safe_extract(zip_path: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Extract a zip into ``dest``, refusing any entry that could escape it.

    Refused: absolute names, drive letters, backslashes, ``..`` components, symlinks and other
    non-regular files, duplicate names, more than MAX_ZIP_ENTRIES entries or MAX_ZIP_BYTES in all.
    Nothing is written unless every entry passes.
    """
    dest = Path(dest).resolve()
    zip_path = Path(zip_path)
    try:
        zf = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile as e:
        raise ArtifactError(f"{str(zip_path)!r} is not a valid zip: {e}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise ArtifactError(f"zip {str(zip_path)!r} has {len(infos)} entries; a bundle has at most {MAX_ZIP_ENTRIES}")
        total = sum(i.file_size for i in infos)
        if total > MAX_ZIP_BYTES:
            raise ArtifactError(f"zip {str(zip_path)!r} would expand to {total} bytes (limit {MAX_ZIP_BYTES})")
        seen: set[str] = set()
        plan: list[tuple[zipfile.ZipInfo, Path]] = []
        for info in infos:
            name = info.filename
            bad = _unsafe_reason(info)
            if bad:
                raise ArtifactError(f"refusing zip {str(zip_path)!r}: entry {name!r} {bad}",
                                    hint="this zip was not written by nagkit; do not trust it")
            target = (dest / PurePosixPath(name)).resolve()
            if target != dest and dest not in target.parents:
                raise ArtifactError(f"refusing zip {str(zip_path)!r}: entry {name!r} escapes the folder")
            key = str(PurePosixPath(name)).rstrip("/")
            if key in seen:
                raise ArtifactError(f"refusing zip {str(zip_path)!r}: entry {name!r} appears twice")
            seen.add(key)
            plan.append((info, target))
        written: list[Path] = []
        for info, target in plan:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "xb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            written.append(target)
    return written


def _unsafe_reason(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if not name or "\x00" in name:
        return "has an empty or NUL name"
    if "\\" in name:
        return "uses backslashes"
    if name.startswith("/") or _DRIVE.match(name):
        return "is an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "contains '..'"
    mode = (info.external_attr >> 16) & 0xFFFF
    ftype = stat.S_IFMT(mode)
    if ftype == stat.S_IFLNK:
        return "is a symlink"
    if ftype not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "is not a regular file or folder"
    return None
