"""Bundles: a folder (and the same as a .zip beside it) with the model(s), manifest.json, README.md.

Layout of a bundle ``DIR`` (and ``DIR.zip``, whose entries sit under one top folder ``DIR.name/``)::

    model.tflite      and/or model.onnx (fp32, NCHW input)
    manifest.json     validated against nagkit/export/manifest.schema.json
    README.md         how to run it with LiteRT and ONNX Runtime

:func:`write_bundle` builds everything in a temporary folder beside the target and renames it
into place; an existing bundle is replaced only with ``force``. :func:`read_bundle` opens a
folder or a .zip: the manifest is read with a size and nesting limit and validated; from a zip
only the files the manifest lists are extracted, none bigger than the manifest says
(:mod:`nagkit.export.zipfiles`); every model's size and sha256 are checked.
:func:`check_model_shapes` loads the models and holds their input/output shapes to the
manifest's; :func:`verify_bundle` also runs them (parity, LiteRT vs ONNX Runtime).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError
from nagkit.export.manifest import (MODEL_FILES, RANDOM_INIT_NOTE, SCHEMA_ID, dumps_manifest, json_default,
                                    make_manifest)
from nagkit.export.readme import readme_text
from nagkit.export.schema import validate_manifest
from nagkit.export.zipfiles import (MAX_MANIFEST_BYTES, MAX_MODEL_BYTES, MAX_README_BYTES, bundle_top, check_listing,
                                    checked_entries, extract_entry, open_zip, read_entry, safe_extract, write_zip)
from nagkit.io import check_out_path, current_umask, exclusive_lock, input_file, read_input_file

__all__ = ["MODEL_FILES", "RANDOM_INIT_NOTE", "SCHEMA_ID", "Bundle", "check_bundle_target", "check_files",
           "check_model_shapes", "dumps_manifest", "make_manifest", "parse_manifest", "read_bundle", "readme_text",
           "safe_extract", "verify_bundle", "write_bundle", "zip_path_for"]


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
    """Raise BadInputError if the bundle folder or its zip exists and ``force`` is not set, and
    also with ``force`` when what is there is not a bundle nagkit wrote (issue 35): ``--force``
    replaces a bundle, never a user's folder or file."""
    out_dir = Path(out_dir)
    check_out_path(out_dir)
    taken = [str(p) for p in (out_dir, zip_path_for(out_dir)) if p.exists() or p.is_symlink()]
    if taken and not force:
        raise BadInputError(f"bundle output {' and '.join(repr(t) for t in taken)} already exist"
                            f"{'s' if len(taken) == 1 else ''}; not overwriting",
                            hint="pass --force to replace it, or choose another --out")
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInputError(f"bundle output {str(out_dir)!r} exists and is not a folder", hint="choose another --out")
    for why in (_not_a_bundle_folder(out_dir), _not_a_bundle_zip(zip_path_for(out_dir), out_dir.name)):
        if why:
            raise BadInputError(f"--force replaces only a bundle nagkit wrote; {why}, so it is left as it is",
                                hint="choose another --out, or move the files away yourself")


_BUNDLE_NAMES = frozenset(MODEL_FILES.values()) | {"manifest.json", "README.md"}


def _bundle_schema(data: bytes) -> bool:
    try:
        m = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(m, dict) and isinstance(m.get("schema"), str) and m["schema"].startswith("nagkit.bundle/")


def _not_a_bundle_folder(out_dir: Path) -> str | None:
    """None when ``out_dir`` is missing, an empty folder, or a bundle folder (only a bundle's
    files, with a nagkit bundle manifest); else why it is not one."""
    if out_dir.is_symlink():
        return f"{str(out_dir)!r} is a link"
    if not out_dir.exists():
        return None
    names = {p.name for p in out_dir.iterdir()}
    if not names:
        return None
    others = sorted(names - _BUNDLE_NAMES)
    if others:
        return (f"{str(out_dir)!r} holds {len(others)} file(s) a bundle does not have "
                f"({', '.join(repr(n) for n in others[:3])}{', ...' if len(others) > 3 else ''})")
    man = out_dir / "manifest.json"
    if not (man.is_file() and not man.is_symlink() and man.stat().st_size <= MAX_MANIFEST_BYTES
            and _bundle_schema(man.read_bytes())):
        return f"{str(out_dir)!r} has no nagkit bundle manifest"
    if any((out_dir / n).is_symlink() or not (out_dir / n).is_file() for n in names):
        return f"{str(out_dir)!r} holds a link or a folder"
    return None


def _not_a_bundle_zip(zip_path: Path, top: str) -> str | None:
    """None when ``zip_path`` is missing or a bundle zip (entries only ``top/<bundle file>``,
    with a nagkit bundle manifest); else why it is not one."""
    if zip_path.is_symlink():
        return f"{str(zip_path)!r} is a link"
    if not zip_path.exists():
        return None
    why = f"{str(zip_path)!r} is not a bundle zip"
    if not zip_path.is_file():
        return why
    try:
        with zipfile.ZipFile(zip_path) as zf:
            infos = zf.infolist()
            if len(infos) > len(_BUNDLE_NAMES) or any(
                    i.filename.partition("/")[0] != top or i.filename.partition("/")[2] not in _BUNDLE_NAMES
                    for i in infos):
                return why
            man = zf.getinfo(f"{top}/manifest.json")
            if man.file_size > MAX_MANIFEST_BYTES or not _bundle_schema(zf.read(man)):
                return why
    except (KeyError, zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, RuntimeError, NotImplementedError):
        return why
    return None


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
        write_zip(tmp_dir, tmp_zip, top=out_dir.name)
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


# -- reading --------------------------------------------------------------------------------------
MAX_MANIFEST_DEPTH = 16


def _depth(v: Any) -> int:
    """The nesting depth of a JSON value, without recursion."""
    deepest, stack = 0, [(v, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if d > MAX_MANIFEST_DEPTH:
            break
        if isinstance(node, dict):
            stack.extend((c, d + 1) for c in node.values())
        elif isinstance(node, list):
            stack.extend((c, d + 1) for c in node)
    return deepest


def parse_manifest(data: bytes, where: str) -> dict[str, Any]:
    """A manifest from its bytes: JSON, not nested deeper than :data:`MAX_MANIFEST_DEPTH`, of
    this nagkit's schema, valid. Raises :class:`ArtifactError` naming what is wrong."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ArtifactError(f"{where} is {len(data)} bytes; a manifest has at most {MAX_MANIFEST_BYTES}")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ArtifactError(f"{where} is nested too deeply to be a bundle manifest") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{where} is not valid JSON: {str(e)[:160]}") from None
    if _depth(manifest) > MAX_MANIFEST_DEPTH:
        raise ArtifactError(f"{where} is nested deeper than {MAX_MANIFEST_DEPTH} levels; not a bundle manifest")
    if isinstance(manifest, dict) and isinstance(manifest.get("schema"), str) and manifest["schema"] != SCHEMA_ID \
            and manifest["schema"].startswith("nagkit.bundle/"):
        raise ArtifactError(f"{where} is of schema {manifest['schema'][:40]!r}; this nagkit reads {SCHEMA_ID}",
                            hint="rebuild the bundle with this nagkit (`nagkit build` or `nagkit export --bundle`)")
    validate_manifest(manifest, where=where)
    return manifest


def _read_zip(path: Path, dest: Path) -> dict[str, Any]:
    """Extract the bundle in zip ``path`` into ``dest``: the manifest, the files it lists (each at
    most its listed size) and the README; nothing else. Returns the manifest."""
    with open_zip(path) as zf:
        entries = checked_entries(zf, path)
        top = bundle_top(entries, path)
        data = read_entry(zf, entries[top + "manifest.json"], MAX_MANIFEST_BYTES, path)
        manifest = parse_manifest(data, f"manifest of bundle {str(path)!r}")
        check_listing(entries, top, {n: int(e["size_bytes"]) for n, e in manifest["files"].items()}, path)
        (dest / "manifest.json").write_bytes(data)
        for name, entry in manifest["files"].items():
            extract_entry(zf, entries[top + name], dest / name, int(entry["size_bytes"]), path)
        if top + "README.md" in entries:
            (dest / "README.md").write_bytes(read_entry(zf, entries[top + "README.md"], MAX_README_BYTES, path))
    return manifest


def read_bundle(path: str | os.PathLike, *, verify: bool = True) -> Bundle:
    """Open a bundle folder or .zip; validate the manifest and (``verify``) the models' sizes
    and sha256. A zip is extracted into a temporary folder, only what its manifest lists."""
    path = Path(path)
    tmp = None
    if path.is_dir():
        root = path
        mpath = root / "manifest.json"
        if not os.path.lexists(mpath):
            raise ArtifactError(f"bundle {str(path)!r} has no manifest.json")
        data = read_input_file(mpath, "manifest", max_bytes=MAX_MANIFEST_BYTES, error=ArtifactError)
        manifest = parse_manifest(data, f"manifest of bundle {str(path)!r}")
    else:  # missing, a FIFO, a device: one line saying what it is, never read
        input_file(path, "bundle", hint="build one with `nagkit build` or `nagkit export --bundle`")
        if not zipfile.is_zipfile(path):
            raise ArtifactError(f"{str(path)!r} is neither a bundle folder nor a zip file",
                                hint="pass the folder or .zip written by `nagkit build` / `nagkit export --bundle`")
        tmp = tempfile.TemporaryDirectory(prefix="nagkit-bundle-")
        root = Path(tmp.name)
        try:
            manifest = _read_zip(path, root)
        except BaseException:
            tmp.cleanup()
            raise
    try:
        if verify:
            check_files(root, manifest, str(path))
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    return Bundle(root=root, manifest=manifest, zip_path=path if tmp is not None else None, _tmp=tmp)


def check_files(root: Path, manifest: Mapping[str, Any], where: str) -> None:
    """Every file the manifest lists is in ``root`` with its size and sha256."""
    from nagkit.export.exporter import file_sha256

    for name, entry in manifest["files"].items():
        fp = root / name
        if not os.path.lexists(fp):
            raise ArtifactError(f"bundle {where!r} lists {name} but the file is missing")
        input_file(fp, name, error=ArtifactError, label=f"{name} in bundle {where!r}")
        if entry["size_bytes"] > MAX_MODEL_BYTES:
            raise ArtifactError(f"bundle {where!r}: its manifest lists {name} at {entry['size_bytes']:,} bytes; a "
                                f"model file has at most {MAX_MODEL_BYTES:,} (TFLite's and ONNX's limit)")
        size = fp.stat().st_size
        if size != entry["size_bytes"]:
            raise ArtifactError(f"{name} in bundle {where!r} is {size} bytes; the manifest says {entry['size_bytes']}",
                                hint="rebuild or re-download the bundle")
        digest = file_sha256(fp)
        if digest != entry["sha256"]:
            raise ArtifactError(f"{name} in bundle {where!r} is corrupt: sha256 {digest[:16]}... "
                                f"!= manifest {entry['sha256'][:16]}...", hint="rebuild or re-download the bundle")


def check_model_shapes(b: Bundle, threads: int | None = None) -> dict[str, Any]:
    """Load every model of ``b`` in its runtime; its input and output shapes must be the
    manifest's (an :class:`ArtifactError` otherwise). Returns ``{format: loaded model}``."""
    from nagkit.runtimes.models import load_model

    shape = [int(v) for v in b.manifest["input"]["shape"]]
    want_out = [int(v) for v in b.manifest["output"]["shape"]]
    loaded = {}
    for fmt, path in sorted(b.models.items()):
        m = load_model(path, threads=threads)
        if list(m.input_shape) != shape:
            raise ArtifactError(f"{path.name} takes input {list(m.input_shape)} but the manifest says {shape}",
                                hint="the manifest does not describe this model; rebuild the bundle")
        if list(m.output_shape) != want_out:
            raise ArtifactError(f"{path.name} gives output {list(m.output_shape)} but the manifest says {want_out}",
                                hint="the manifest does not describe this model; rebuild the bundle")
        loaded[fmt] = m
    return loaded


def verify_bundle(bundle: Bundle | str | os.PathLike, module=None, *, seed: int = 0, rtol: float | None = None,
                  threads: int | None = None) -> dict[str, Any]:
    """Load every model of a bundle in its runtime and check it on seeded inputs.

    Checks: each model loads (LiteRT / ONNX Runtime), its input and output shapes are the
    manifest's and it runs; with ``module``, each matches PyTorch (parity); with two models,
    they match each other. Raises ArtifactError / ParityError / CheckFailedError; returns what
    was checked.
    """
    from nagkit.export.parity import DEFAULT_RTOL, check_parity, compare, seeded_inputs

    rtol = DEFAULT_RTOL if rtol is None else rtol
    b = bundle if isinstance(bundle, Bundle) else read_bundle(bundle)
    try:
        x = seeded_inputs([int(v) for v in b.manifest["input"]["shape"]], seed)
        outs: dict[str, Any] = {}
        report: dict[str, Any] = {"root": str(b.root), "seed": seed, "models": {}}
        for fmt, m in check_model_shapes(b, threads).items():
            y = m.run(x)
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
